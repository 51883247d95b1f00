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
    if llm.protocol == "openai":
        return body["messages"][0]["content"]
    system = body["system"]
    return system if isinstance(system, str) else "\n\n".join(b["text"] for b in system)


def texts_of(message) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "\n\n".join(b.get("text", "") for b in content if b.get("type") == "text")


def header_index(llm, req, needle):
    """The index of the message that carries the context header (the one holding `needle`)."""
    found = [i for i, m in enumerate(req["json"]["messages"]) if m["role"] == "user" and needle in texts_of(m)]
    assert len(found) == 1, req["json"]["messages"]
    return found[0]


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
    assert "阿杰的猫叫团子" not in system, "the header is not in the stable system text"
    declared = declared_of(llm, first)
    assert "zcor_memory_write" in declared and not declared & RELATIONSHIP_TOOLS
    assert "external_event_frame" not in declared
    assert frame_calls(llm, first) == ["external_event_frame"], "the frame pair delivers the batch"
    frame_result = json.loads(tool_results(llm, first)[0][1])
    assert frame_result["events"][0]["text"] == "我周末要去爬山，团子就交给你了"
    assert frame_result["events"][0]["from"] == "console:ajie"
    # the header is the message just before the newest batch (the frame's call), last of all
    # but the batch, recalled from the typed text
    messages = first["json"]["messages"]
    at = header_index(llm, first, f"[{cat['id']}] 阿杰的猫叫团子")
    assert messages[at + 1]["role"] == "assistant" and len(messages) == at + 3
    # the tool round re-renders only the header's message: everything before it is the same
    # bytes, and the header is never stored in the transcript
    second = llm.requests[1]
    again = header_index(llm, second, "阿杰的猫叫团子")
    assert again == at
    assert json.dumps(second["json"]["messages"][:at]) == json.dumps(messages[:at])
    assert json.dumps(second["json"]["messages"][at + 1:at + 3]) == json.dumps(messages[at + 1:])
    assert system_of(llm, second) == system
    assert "阿杰的猫叫团子" not in json.dumps([m.__dict__ for m in conv.transcript], ensure_ascii=False,
                                             default=str)
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


def run_chat(daemon, llm, lines: list[str], configure: bool = True, args: tuple[str, ...] = ()) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZCOR_")}
    env["ZCOR_LLM_API_KEY"] = "sk-chat"
    if configure:
        with daemon.client("operator") as op:
            op.config_set({"llm": {"protocol": llm.protocol, "baseUrl": llm.url, "model": "scripted",
                                   "timeoutSeconds": 5}})
    proc = subprocess.run([sys.executable, "-m", "zcord.cli", "chat", "--socket", str(daemon.sock), *args],
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


def test_zcor_chat_private_keeps_what_it_writes_in_its_session(daemon, llm):
    """Issue 34: `zcor chat --private` marks its batches and origins private."""
    llm.script += [tools(llm, ("zcor_memory_write", {"title": "用户的秘密Quindle", "content": "只在私聊说的"})),
                   text(llm, "记住啦"), text(llm, "好")]
    out = run_chat(daemon, llm, ["我有个秘密 Quindle", "/quit"], args=("--session", "qq:friend:9", "--private"))
    assert "(private)" in out
    with daemon.client("operator") as op:
        (write,) = op.history_query({"tool": "zcor_memory_write"})["items"]
        assert write["origin"]["private"] is True and write["origin"]["session"] == "qq:friend:9"
        mid = write["changes"][0]["target"]
        assert op.call_tool("zcor_memory_read", {"id": mid})["scope"] == {"session": "qq:friend:9"}
    out = run_chat(daemon, llm, ["Quindle 秘密", "/recall", "/quit"], configure=False)  # the console session
    assert "Quindle" not in out.split("好")[-1]
    first = [r for r in llm.requests if "Quindle" in json.dumps(r["json"], ensure_ascii=False)]
    assert all("只在私聊说的" not in json.dumps(r["json"], ensure_ascii=False) for r in first[-1:])


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


def test_consecutive_turns_share_everything_before_the_header(daemon, llm):
    """The prompt cache's view: turn two's request repeats turn one's up to where turn one's
    header was, byte for byte; only the header's message, the last exchange and the new
    batch differ. With Anthropic, breakpoints mark the system text and the last stable turn."""
    with daemon.client("operator") as op:
        op.call_tool("zcor_memory_write", {"title": "阿杰的猫叫团子", "content": "橘猫，怕洗澡"})
        op.call_tool("zcor_memory_write", {"title": "阿杰喜欢爬山", "content": "常去西湖边"})
    llm.script += [text(llm, "团子还好吗？"), text(llm, "爬山注意安全。"), text(llm, "晚安。")]
    with MemoryBot.connect("console", str(daemon.sock)) as bot:
        conv = Conversation(bot, provider_for(llm))
        conv.handle([{"text": "团子今天又不肯洗澡", "senderKey": "console:ajie"}])
        conv.handle([{"text": "周末去爬山吧", "senderKey": "console:ajie"}])
        conv.handle([{"text": "困了", "senderKey": "console:ajie"}])
    one, two, three = (r["json"] for r in llm.requests)
    assert json.dumps(one.get("tools")) == json.dumps(two.get("tools"))
    assert json.dumps(one.get("system")) == json.dumps(two.get("system"))
    at_one = header_index(llm, llm.requests[0], "阿杰的猫叫团子")
    at_two = header_index(llm, llm.requests[1], "阿杰喜欢爬山")
    assert at_two == at_one + 3, "the last exchange (frame call, frame result, answer) moved before the header"
    assert json.dumps(two["messages"][0]) == json.dumps(one["messages"][0])
    assert json.dumps(two["messages"][:at_one]) == json.dumps(one["messages"][:at_one])
    assert "阿杰的猫叫团子" not in json.dumps(two["messages"], ensure_ascii=False)
    # a batch that recalls nothing sends no header message at all
    assert not any("阿杰" in texts_of(m) for m in three["messages"][at_two + 1:] if m["role"] == "user")
    if llm.protocol == "anthropic":
        assert two["system"][-1]["cache_control"] == {"type": "ephemeral"}
        marked = [i for i, m in enumerate(two["messages"]) if isinstance(m["content"], list)
                  and any("cache_control" in b for b in m["content"])]
        assert marked == [at_two - 1], "the breakpoint is on the turn just before the header"
        assert json.dumps(two).count("cache_control") <= 4


def test_the_providers_usage_is_reported_to_zcord(daemon, llm):
    """zcor chat reads the provider's usage from each answer (cached part included) and
    reports it for its session; `zcor/usage` shows it with what zcor added."""
    with daemon.client("operator") as op:
        op.call_tool("zcor_memory_write", {"title": "阿杰的猫叫团子", "content": "橘猫，怕洗澡"})
    if llm.protocol == "openai":
        usage = {"prompt_tokens": 2000, "completion_tokens": 20, "prompt_tokens_details": {"cached_tokens": 1792}}
    else:
        usage = {"input_tokens": 8, "cache_read_input_tokens": 1792, "cache_creation_input_tokens": 200,
                 "output_tokens": 20}
    llm.script += [{**text(llm, "团子好可爱"), "usage": usage}]
    with MemoryBot.connect("console:usage", str(daemon.sock)) as bot:
        Conversation(bot, provider_for(llm)).handle([{"text": "团子今天又不肯洗澡", "senderKey": "console:ajie"}])
        header = bot.context_header()
        prefix = bot.prefix()
    with daemon.client("operator") as op:
        got = op.request("zcor/usage", {"session": "console:usage"})
    (row,) = got["sessions"]
    assert row["requests"] == 1 and row["outputTokens"] == 20 and row["cachedTokens"] == 1792
    assert row["inputTokens"] == 2000
    assert row["cacheWriteTokens"] == (0 if llm.protocol == "openai" else 200)
    assert row["headerChars"] == len(header.strip("\n")) and row["prefixChars"] == len(prefix.strip("\n"))
