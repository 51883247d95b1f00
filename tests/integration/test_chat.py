"""The console World: `zcord.bot.bot` and `zcor chat` against a real daemon and a scripted LLM
on 127.0.0.1 that speaks each provider's wire format and records every request."""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys

import pytest

from tests.fakellm import FakeLLM, anthropic_text, anthropic_tools, openai_text, openai_tools
from zcord.bot.bot import Conversation, MemoryBot
from zcord.core.config import LlmConfig
from zcord.retrieval.llm import Provider

RELATIONSHIP_TOOLS = {"zcor_relationship_read", "zcor_relationship_query", "zcor_relationship_write",
                      "zcor_relationship_delete"}


@pytest.fixture(params=["openai", "anthropic"])
def llm(request):
    with FakeLLM() as server:
        server.protocol = request.param
        yield server


def text(llm, s):
    return openai_text(s) if llm.protocol == "openai" else anthropic_text(s)


def tools(llm, *calls):
    return openai_tools(*calls) if llm.protocol == "openai" else anthropic_tools(*calls)


def system_of(llm, req):
    body = req["json"]
    return body["messages"][0]["content"] if llm.protocol == "openai" else body["system"]


def declared_of(llm, req):
    body = req["json"]
    if llm.protocol == "openai":
        return {t["function"]["name"] for t in body["tools"]}
    return {t["name"] for t in body["tools"]}


def tool_results(llm, req):
    """(tool_call_id, content, is_error) of every tool result in a request."""
    out = []
    for m in req["json"]["messages"]:
        if llm.protocol == "openai" and m["role"] == "tool":
            out.append((m["tool_call_id"], m["content"], None))
        if llm.protocol == "anthropic" and isinstance(m["content"], list):
            out += [(b["tool_use_id"], b["content"], b.get("is_error", False))
                    for b in m["content"] if b.get("type") == "tool_result"]
    return out


def frame_calls(llm, req):
    names = []
    for m in req["json"]["messages"]:
        if llm.protocol == "openai":
            names += [c["function"]["name"] for c in m.get("tool_calls") or []]
        elif isinstance(m["content"], list):
            names += [b["name"] for b in m["content"] if b.get("type") == "tool_use"]
    return names


def provider_for(llm):
    return Provider(LlmConfig(protocol=llm.protocol, base_url=llm.url, model="scripted", timeout_seconds=5),
                    "sk-chat")


def test_a_turn_carries_prefix_header_tools_and_frame_and_the_model_writes(daemon, llm):
    with daemon.client("operator") as op:
        imp = op.call_tool("zcor_memory_write", {"title": "我是小助手的主人", "content": "主人叫阿杰，住在杭州"})
        op.call_tool("zcor_memory_important", {"id": imp["id"], "important": True})
        cat = op.call_tool("zcor_memory_write", {"title": "阿杰的猫叫团子", "content": "橘猫，怕洗澡"})
        op.config_set({"relationshipMemory": False})
    llm.script += [tools(llm, ("zcor_memory_write", {"title": "阿杰周末去爬山", "content": "和朋友去西湖边爬山",
                                                     "sourceMessage": "我周末要去爬山，团子就交给你了"})),
                   text(llm, "好的，祝你玩得开心！")]
    uses = []
    with MemoryBot.connect("console", str(daemon.sock)) as bot:
        conv = Conversation(bot, provider_for(llm))
        answer = conv.handle([{"text": "我周末要去爬山，团子就交给你了", "senderKey": "console:ajie"}],
                             on_tool=uses.append)
    assert answer == "好的，祝你玩得开心！"
    first = llm.requests[0]
    system = system_of(llm, first)
    assert "主人叫阿杰，住在杭州" in system, "the prefix carries the important memory"
    assert "external_event_frame" in system
    assert f"[{cat['id']}] 阿杰的猫叫团子" in system, "the context header recalled from the typed text"
    declared = declared_of(llm, first)
    assert "zcor_memory_write" in declared and not declared & RELATIONSHIP_TOOLS
    assert "external_event_frame" not in declared
    assert frame_calls(llm, first) == ["external_event_frame"], "the frame pair delivers the batch"
    frame_result = json.loads(tool_results(llm, first)[0][1])
    assert frame_result["events"][0]["text"] == "我周末要去爬山，团子就交给你了"
    assert frame_result["events"][0]["from"] == "console:ajie"
    # the header is never stored in the transcript: it is rendered into each request's system
    # text, and the second request's conversation messages do not carry it
    second = llm.requests[1]
    convo = second["json"]["messages"][1:] if llm.protocol == "openai" else second["json"]["messages"]
    assert "阿杰的猫叫团子" not in json.dumps(convo, ensure_ascii=False)
    assert "阿杰的猫叫团子" in system_of(llm, second)
    assert uses and uses[0].ok and uses[0].name == "zcor_memory_write"
    with daemon.client("operator") as op:
        found = op.call_tool("zcor_memory_query", {"keywords": ["爬山"]})["items"]
        assert [n["title"] for n in found] == ["阿杰周末去爬山"]
        assert found[0]["sourceMessage"] == "我周末要去爬山，团子就交给你了"
        hist = op.call_tool("zcor_memory_history", {"keywords": ["阿杰周末去爬山"]})["items"]
        assert hist[0]["actor"] == "model" and hist[0]["tool"] == "zcor_memory_write"


def test_frame_and_undeclared_tool_calls_are_refused_without_effect(daemon, llm):
    with daemon.client("operator") as op:
        op.config_set({"relationshipMemory": False})
        before = op.status()
    llm.script += [tools(llm, ("external_event_frame", {"events": []}),
                         ("zcor_relationship_write", {"personId": "p1", "name": "x", "relationship": "x",
                                                      "affinity": 5, "reason": "x"})),
                   text(llm, "明白了")]
    uses = []
    with MemoryBot.connect("console", str(daemon.sock)) as bot:
        answer = Conversation(bot, provider_for(llm)).handle([{"text": "你好"}], on_tool=uses.append)
    assert answer == "明白了"
    assert [u.ok for u in uses] == [False, False]
    results = tool_results(llm, llm.requests[1])[1:]  # after the frame's own result
    assert len(results) == 2
    assert all("error" in json.loads(content) for _, content, _ in results)
    if llm.protocol == "anthropic":
        assert all(is_error for _, _, is_error in results)
    with daemon.client("operator") as op:
        after = op.status()
        assert after["relationships"] == before["relationships"] == 0
        assert after["historyChanges"] == before["historyChanges"]


def run_chat(daemon, llm, lines: list[str], configure: bool = True) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZCOR_")}
    env["ZCOR_LLM_API_KEY"] = "sk-chat"
    if configure:
        with daemon.client("operator") as op:
            op.config_set({"llm": {"protocol": llm.protocol, "baseUrl": llm.url, "model": "scripted",
                                   "timeoutSeconds": 5}})
    proc = subprocess.run([sys.executable, "-m", "zcord.cli", "chat", "--socket", str(daemon.sock)],
                          input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_zcor_chat_shows_tools_used_and_survives_a_provider_error(daemon, llm):
    llm.script += [("status", 500, {"error": {"message": "overloaded"}}),
                   tools(llm, ("zcor_memory_write", {"title": "用户喜欢奶茶", "content": "三分糖"})),
                   text(llm, "记住啦")]
    out = run_chat(daemon, llm, ["你好", "我喜欢三分糖的奶茶", "/quit"])
    assert "[error]" in out and "HTTP 500" in out
    assert "zcor_memory_write" in out and "记住啦" in out
    with daemon.client("operator") as op:
        assert op.call_tool("zcor_memory_query", {"keywords": ["奶茶"]})["total"] == 1
        # zcor chat tells the origin of its calls: its session and the sender of the line
        (write,) = op.history_query({"tool": "zcor_memory_write"})["items"]
        assert write["origin"]["session"] == "console" and "inferred" not in write["origin"]
        assert write["origin"]["senders"] == [f"console:{getpass.getuser()}"]


def test_zcor_chat_commands_show_what_the_model_gets(daemon, llm):
    with daemon.client("operator") as op:
        op.call_tool("zcor_memory_write", {"title": "奶茶店在学校门口", "content": "叫一点点"})
    llm.script += [text(llm, "好呀")]
    out = run_chat(daemon, llm, ["/recall", "今天想喝奶茶", "/recall", "/prefix", "/tools", "/quit"])
    recall_parts = out.split("好呀")
    assert "nothing recalled" in recall_parts[0]
    assert "奶茶店在学校门口" in recall_parts[1], "after a batch, /recall shows the header"
    assert "external_event_frame" in recall_parts[1]  # the prefix's rule
    assert "zcor_memory_write:" in recall_parts[1]


def test_zcor_chat_recall_after_a_turn_never_says_nothing_yet(daemon, llm):
    """Issue 35: /recall after turns, the last of which recalled nothing, says so, not "yet"."""
    with daemon.client("operator") as op:
        op.call_tool("zcor_memory_write", {"title": "奶茶店在学校门口", "content": "叫一点点"})
    llm.script += [tools(llm, ("zcor_memory_write", {"title": "用户喜欢奶茶", "content": "三分糖"})),
                   text(llm, "好呀"), text(llm, "嗯")]
    out = run_chat(daemon, llm, ["今天想喝奶茶", "/recall", "你好", "/recall", "/quit"])
    first, second = out.split("好呀")[1].split("嗯")
    assert "[m1] 奶茶店在学校门口" in first  # the turn that recalled: its header
    assert "yet" not in second and "the last message recalled nothing" in second


def test_zcor_chat_without_a_provider_says_what_to_set(daemon, llm):
    out = run_chat(daemon, llm, ["hello", "/quit"], configure=False)
    assert "ZCOR_LLM_MODEL" in out and "ZCOR_LLM_BASE_URL" in out
    assert llm.requests == []


def test_streamed_replies_build_the_same_tool_calls_and_text(daemon, llm):
    """The provider streams (server-sent events): text arrives in pieces, tool calls are
    assembled from their fragments and run, and the final answer is the joined text."""
    llm.script += [tools(llm, ("zcor_memory_write", {"title": "流式写入的记忆", "content": "分两段到达"})),
                   text(llm, "这句话分成两半流过来")]
    pieces = []
    with MemoryBot.connect("console", str(daemon.sock)) as bot:
        answer = Conversation(bot, provider_for(llm)).handle([{"text": "记一下"}], on_text=pieces.append)
    assert answer == "这句话分成两半流过来"
    assert len(pieces) >= 2 and "".join(pieces) == answer
    assert all(r["json"].get("stream") for r in llm.requests)
    with daemon.client("operator") as op:
        assert op.call_tool("zcor_memory_query", {"keywords": ["流式写入"]})["total"] == 1
