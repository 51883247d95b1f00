"""Issue 33, attack #9: memory text reaches the model by paths besides the header and the
prefix — tool results `zcor chat` feeds back (read, relationship_read, search, the important
receipt, error messages), the MCP stdio bridge's replies and the search-filter prompt. Each
is fenced as the header is (zcord.core.fence.fence_tool_result), on the poisoning suite's
corpus, against a real daemon and a fake provider on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.fakellm import FakeLLM, openai_text, openai_tools
from tests.fault.test_poisoning import CORPUS, markers_in
from tests.integration.conftest import ZCOR_CMD

pytestmark = pytest.mark.fault

ODD_BREAKS = re.compile(r"[\r\v\f\x1c-\x1e\x85\u2028\u2029\x1b\x90]")


def clean(text: str) -> None:
    assert markers_in(text) == [], text
    assert not ODD_BREAKS.search(text), text


def strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def test_fence_tool_result_neutralizes_every_string_and_is_idempotent():
    from zcord.core.fence import fence_reply_line, fence_tool_result

    result = {"items": [{"id": f"m{i}", "title": evil[:200], "content": evil, "keywords": [evil[:20]], "n": i,
                         "ok": True, "none": None} for i, evil in enumerate(CORPUS)]}
    fenced = fence_tool_result(result)
    for s in strings(fenced):
        clean(s)
    assert fence_tool_result(fenced) == fenced
    assert [i["id"] for i in fenced["items"]] == [f"m{i}" for i in range(len(CORPUS))]
    assert fenced["items"][0]["n"] == 0 and fenced["items"][0]["ok"] is True and fenced["items"][0]["none"] is None
    plain = {"id": "m1", "title": "小王爱吃火锅", "content": "line one\nline two"}
    assert fence_tool_result(plain) == plain
    for evil in CORPUS:
        line = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": evil}],
                                                                 "structuredContent": {"content": evil}}})
        out = json.loads(fence_reply_line(line.encode() + b"\n"))
        for s in strings(out):
            clean(s)
    other = b'{"jsonrpc": "2.0", "id": 2, "result": {"messages": [{"content": {"text": "<!--"}}]}}\n'
    assert fence_reply_line(other) == other  # prompts and resources are fenced by zcord already


@pytest.fixture
def planted(make_daemon):
    d = make_daemon().start()
    ids = []
    with d.client() as bot:
        for n, evil in enumerate(CORPUS):
            ids.append(bot.call_tool("zcor_memory_write", {"title": f"火锅{n}：{evil}"[:200], "content": evil,
                                                           "keywords": ["火锅"]})["id"])
        bot.call_tool("zcor_relationship_write", {"personId": "qq:42", "name": CORPUS[1][:100], "relationship": "朋友",
                                                  "affinity": 10, "reason": CORPUS[0]})
    return d, ids


def test_zcor_chat_feeds_tool_results_back_fenced(planted):
    d, ids = planted
    calls = [("zcor_memory_read", {"id": i}) for i in ids] + [
        ("zcor_relationship_read", {"personId": "qq:42"}),
        ("zcor_memory_important", {"id": ids[2], "important": True}),
        ("zcor_memory_supersede", {"ids": [ids[3]], "replacementId": ids[3], "reason": CORPUS[4]})]
    with FakeLLM() as llm:
        llm.protocol = "openai"
        llm.script += [openai_tools(*calls), openai_text("好的")]
        with d.client("operator") as op:
            op.config_set({"llm": {"protocol": "openai", "baseUrl": llm.url, "model": "scripted",
                                   "timeoutSeconds": 5}})
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZCOR_")}
        env["ZCOR_LLM_API_KEY"] = "sk-chat"
        proc = subprocess.run([sys.executable, "-m", "zcord.cli", "chat", "--socket", str(d.sock),
                               "--session", "fence", "--sender", "qq:42"],
                              input="看看记忆\n/quit\n", capture_output=True, text=True, timeout=120, env=env)
        assert proc.returncode == 0, proc.stderr
        messages = llm.requests[1]["json"]["messages"]
    results = [m for m in messages if m["role"] == "tool" and not m["tool_call_id"].startswith("frame_")]
    assert len(results) == len(calls)
    for m in results:
        clean(m["content"])
    reads = [json.loads(m["content"]) for m in results[:len(ids)]]
    assert [r["id"] for r in reads] == ids and all(r["content"] for r in reads)
    assert "error" in json.loads(results[-1]["content"])  # an error that quotes memory text: fenced too


def test_the_mcp_bridge_fences_tool_results(planted):
    d, ids = planted
    lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    lines += [{"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call",
               "params": {"name": "zcor_memory_read", "arguments": {"id": i}}} for n, i in enumerate(ids)]
    lines.append({"jsonrpc": "2.0", "id": 99, "method": "tools/call",
                  "params": {"name": "zcor_memory_query", "arguments": {"keywords": ["火锅"], "limit": 100}}})
    out = subprocess.run(ZCOR_CMD + ["mcp", "--socket", str(d.sock)],
                         input="".join(json.dumps(m) + "\n" for m in lines),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    replies = {r["id"]: r for r in map(json.loads, out.stdout.splitlines())}
    assert len(replies) == len(ids) + 2
    for n, i in enumerate(ids):
        result = replies[10 + n]["result"]
        assert result["isError"] is False and result["structuredContent"]["id"] == i
        for s in strings(result):
            clean(s)
    assert len(replies[99]["result"]["structuredContent"]["items"]) == len(ids)
    for s in strings(replies[99]["result"]):
        clean(s)


def test_the_search_filter_prompt_is_fenced(planted):
    d, ids = planted
    with FakeLLM() as llm:
        llm.protocol = "openai"
        llm.script += [openai_text("[]")]
        with d.client("operator") as op:
            op.config_set({"llm": {"protocol": "openai", "baseUrl": llm.url, "model": "scripted",
                                   "timeoutSeconds": 5}})
        with d.client() as bot:
            got = bot.call_tool("zcor_memory_search", {"keywords": ["火锅"]})
        prompt = llm.requests[0]["json"]["messages"][-1]["content"]
    assert got["items"] == [] and got["candidateCount"] >= 5
    clean(prompt)
    candidates = json.loads(prompt)["candidates"]
    assert len(candidates) == got["candidateCount"] and {c["id"] for c in candidates} <= set(ids)


def test_the_endpoint_feeds_tool_results_back_fenced_and_names_the_speaker(planted):
    """`zcor serve-openai`: zcor's tool results (and errors quoting memory text) go back to the
    model fenced, and the origin names the sender the batch ends with as its speaker."""
    from tests.integration.test_proxy import Running

    d, ids = planted
    calls = [("zcor_memory_read", {"id": i}) for i in ids] + [
        ("zcor_memory_supersede", {"ids": [ids[3]], "replacementId": ids[3], "reason": CORPUS[4]}),
        ("zcor_memory_write", {"title": "阿杰说火锅好吃", "content": "周五吃火锅"})]
    with FakeLLM() as llm:
        llm.script += [openai_tools(*calls), openai_text("好的")]
        running = Running(d.sock, llm)
        try:
            running.client().chat.completions.create(model="m", messages=[
                {"role": "user", "content": "看看火锅", "name": "bystander"},
                {"role": "user", "content": "记一下，周五吃火锅", "name": "ajie"}])
        finally:
            running.close()
        messages = llm.requests[1]["json"]["messages"]
    results = [m for m in messages if m["role"] == "tool"]
    assert len(results) == len(calls)
    for m in results:
        clean(m["content"])
    assert [json.loads(m["content"])["id"] for m in results[:len(ids)]] == ids
    assert "error" in json.loads(results[len(ids)]["content"])
    with d.client("operator") as op:
        (rec,) = op.request("zcor/history/query", {"changesOnly": True, "tool": "zcor_memory_write",
                                                   "keywords": ["阿杰说火锅好吃"]})["items"]
    assert rec["origin"]["speaker"] == "openai:ajie"
    assert set(rec["origin"]["senders"]) == {"openai:ajie", "openai:bystander"}
