"""The prompt assembler and its wire rendering (zcord.bot.prompt, zcord.retrieval.llm): the
stable parts first and byte-identical from one batch to the next, the context header just
before the newest batch, Anthropic breakpoints, the per-session cache key, and usage parsing."""

from __future__ import annotations

import json

import pytest

from zcord.bot.prompt import assemble, batch_start, cache_key
from zcord.core.config import LlmConfig
from zcord.retrieval.llm import (
    Message,
    Provider,
    ToolCall,
    Usage,
    _anthropic_messages,
    _AnthropicStream,
    _openai_messages,
    _OpenAIStream,
    usage_of,
)

TOOLS = [{"name": "zcor_memory_write", "description": "w", "inputSchema": {"type": "object"}},
         {"name": "zcor_memory_read", "description": "r", "inputSchema": {"type": "object"}}]


def provider(protocol: str, cache_key_mode: str = "auto", base_url: str = "http://127.0.0.1:9/v1") -> Provider:
    return Provider(LlmConfig(protocol=protocol, base_url=base_url, model="m", prompt_cache_key=cache_key_mode),
                    "sk")


def wire(protocol: str, prompt, cache_key_mode: str = "auto", base_url: str = "http://127.0.0.1:9/v1"):
    return provider(protocol, cache_key_mode, base_url)._request(prompt, 100)[2]


def turns(n: int) -> list[Message]:
    out = []
    for i in range(n):
        out += [Message("user", f"message {i}"), Message("assistant", f"answer {i}")]
    return out


def test_the_header_goes_into_the_newest_user_turn_and_nothing_before_it_changes():
    history = turns(3)
    one = assemble(prefix="PREFIX\n", system="CARD", history=history, batch=[Message("user", "now")],
                   header="HEADER one", zcor_tools=TOOLS, session="s")
    two = assemble(prefix="PREFIX\n", system="CARD", history=[*history, Message("user", "now"),
                                                             Message("assistant", "ok")],
                   batch=[Message("user", "later")], header="HEADER two", zcor_tools=TOOLS, session="s")
    a, b = _openai_messages(one), _openai_messages(two)
    assert a[0] == {"role": "system", "content": "PREFIX\n\nCARD"}
    assert a[-1] == {"role": "user", "content": "HEADER one\n\nnow"}
    assert b[-1] == {"role": "user", "content": "HEADER two\n\nlater"}
    # the second request starts with the first one's messages before its header, byte for byte
    assert json.dumps(b[:len(a) - 1]) == json.dumps(a[:-1])
    assert "HEADER" not in json.dumps(b[:-1])


def test_a_batch_that_does_not_start_with_a_user_message_gets_the_header_as_its_own_turn():
    frame = [Message("assistant", "", tool_calls=[ToolCall("f1", "external_event_frame", {"count": 1})]),
             Message("tool", '{"events": []}', tool_call_id="f1")]
    prompt = assemble(prefix="P", history=turns(1), batch=frame, header="H")
    out = _openai_messages(prompt)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user", "assistant", "tool"]
    assert out[3] == {"role": "user", "content": "H"}
    anthropic = _anthropic_messages(prompt)
    assert anthropic[2] == {"role": "user", "content": [{"type": "text", "text": "H"}]}
    assert anthropic[3]["content"][0]["type"] == "tool_use"


def test_no_header_adds_no_message():
    prompt = assemble(prefix="P", history=turns(1), batch=[Message("user", "x")], header="")
    assert _openai_messages(prompt)[-1] == {"role": "user", "content": "x"}


def test_system_messages_in_the_middle_stay_where_they_were():
    history = [Message("user", "a"), Message("system", "author's note"), Message("assistant", "b")]
    prompt = assemble(prefix="P", system="CARD", history=history, batch=[Message("user", "c")], header="H")
    out = _openai_messages(prompt)
    assert [m["role"] for m in out] == ["system", "user", "system", "assistant", "user"]
    assert out[2]["content"] == "author's note"
    assert _anthropic_messages(prompt)[1] == {"role": "user", "content": "[system] author's note"}


def test_anthropic_breakpoints_after_the_system_text_and_on_the_last_stable_turn():
    prompt = assemble(prefix="P", system="CARD", history=turns(2), batch=[Message("user", "new")], header="H",
                      zcor_tools=TOOLS)
    body = wire("anthropic", prompt)
    assert body["system"] == [{"type": "text", "text": "P"},
                              {"type": "text", "text": "CARD", "cache_control": {"type": "ephemeral"}}]
    marks = [(i, b) for i, m in enumerate(body["messages"]) if isinstance(m["content"], list)
             for b in m["content"] if "cache_control" in b]
    assert marks == [(3, {"type": "text", "text": "answer 1", "cache_control": {"type": "ephemeral"}})]
    assert body["messages"][4]["content"] == [{"type": "text", "text": "H"}, {"type": "text", "text": "new"}]
    text = json.dumps(body)
    assert text.count("cache_control") <= 4


def test_anthropic_breakpoint_on_a_tool_result_turn_and_none_for_one_off_requests():
    history = [Message("user", "a"),
               Message("assistant", "", tool_calls=[ToolCall("t1", "zcor_memory_read", {"id": "m1"})]),
               Message("tool", "{}", tool_call_id="t1"), Message("assistant", "done")]
    body = wire("anthropic", assemble(history=history[:3], batch=[], header="H"))
    assert body["messages"][2]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    one_off = provider("anthropic")._request(
        __import__("zcord.retrieval.llm", fromlist=["plain_prompt"]).plain_prompt("S", [Message("user", "q")], None),
        100)[2]
    assert one_off["system"] == "S" and "cache_control" not in json.dumps(one_off)


def test_the_first_turn_opens_with_a_user_turn_for_anthropic():
    frame = [Message("assistant", "", tool_calls=[ToolCall("f1", "external_event_frame", {})]),
             Message("tool", "{}", tool_call_id="f1")]
    out = _anthropic_messages(assemble(batch=frame, header=""))
    assert out[0] == {"role": "user", "content": "[conversation start]"}


@pytest.mark.parametrize(("mode", "url", "sent"), [
    ("auto", "https://api.openai.com/v1", True), ("auto", "http://127.0.0.1:8080/v1", False),
    ("on", "http://127.0.0.1:8080/v1", True), ("off", "https://api.openai.com/v1", False)])
def test_prompt_cache_key_follows_the_switch(mode, url, sent):
    body = wire("openai", assemble(history=turns(1), batch=[Message("user", "x")], session="qq:group:1"), mode, url)
    assert ("prompt_cache_key" in body) is sent
    if sent:
        assert body["prompt_cache_key"] == cache_key("qq:group:1")
        assert "qq" not in body["prompt_cache_key"], "the session's name is never sent"


def test_tools_keep_zcords_order_then_the_clients():
    client = [{"name": "web_search", "description": "", "inputSchema": {"type": "object"}},
              {"name": "zcor_memory_read", "description": "dup", "inputSchema": {"type": "object"}}]
    prompt = assemble(zcor_tools=TOOLS, client_tools=client)
    assert [t["name"] for t in prompt.tools] == ["zcor_memory_write", "zcor_memory_read", "web_search"]


def test_batch_start():
    u, a = Message("user", "u"), Message("assistant", "a")
    call = Message("assistant", "", tool_calls=[ToolCall("c", "x", {})])
    res = Message("tool", "r", tool_call_id="c")
    assert batch_start([u, a, u, u]) == 2
    assert batch_start([u, a, u, call, res]) == 2, "this turn's tool rounds stay after the header"
    assert batch_start([u, a]) == 2, "no new user message: the header goes last"
    assert batch_start([]) == 0
    assert batch_start([Message("system", "s"), u]) == 1


def test_assemble_is_pure():
    args = dict(prefix="P", system="S", history=turns(2), batch=[Message("user", "n")], header="H",
                zcor_tools=TOOLS, session="s")
    assert wire("anthropic", assemble(**args)) == wire("anthropic", assemble(**args))
    assert json.dumps(wire("openai", assemble(**args))) == json.dumps(wire("openai", assemble(**args)))


def test_usage_of_every_protocol():
    assert usage_of({"prompt_tokens": 1200, "completion_tokens": 30,
                     "prompt_tokens_details": {"cached_tokens": 1024}}) == Usage(1200, 1024, 0, 30)
    assert usage_of({"prompt_tokens": 900, "completion_tokens": 5, "prompt_cache_hit_tokens": 640,
                     "prompt_cache_miss_tokens": 260}) == Usage(900, 640, 0, 5)
    assert usage_of({"input_tokens": 50, "cache_read_input_tokens": 3000, "cache_creation_input_tokens": 200,
                     "output_tokens": 80}) == Usage(3250, 3000, 200, 80)
    assert usage_of(None) is None and usage_of({"other": 1}) is None
    assert usage_of({"prompt_tokens": -3, "completion_tokens": "x"}) == Usage(0, 0, 0, 0)


def test_streamed_usage_is_collected():
    s = _OpenAIStream()
    s.feed({"choices": [{"delta": {"content": "hi"}, "finish_reason": "stop"}]})
    s.feed({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 2,
                                     "prompt_tokens_details": {"cached_tokens": 8}}})
    assert s.reply().usage == Usage(10, 8, 0, 2)
    a = _AnthropicStream()
    a.feed({"type": "message_start", "message": {"usage": {"input_tokens": 5, "cache_read_input_tokens": 100,
                                                           "cache_creation_input_tokens": 0, "output_tokens": 1}}})
    a.feed({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 42}})
    assert a.reply().usage == Usage(105, 100, 0, 42)


def test_streaming_asks_openai_compatible_servers_for_the_usage():
    p = provider("openai")
    assert p._streamed({"a": 1}) == {"a": 1, "stream": True, "stream_options": {"include_usage": True}}
    assert provider("anthropic")._streamed({"a": 1}) == {"a": 1, "stream": True}
