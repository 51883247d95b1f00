"""Codes decide, sentences explain (issue 39): the endpoint's status follows the type of a
provider failure, a refusal's hint is named where it is raised, and each model-facing
sentence is written once, so editing any wording (or a provider quoting ours back) changes
no status, no hint and no refusal."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from tests.fakellm import FakeLLM
from zcord.bot.bot import FRAME_NOT_CALLABLE, FRAME_TOOL, MemoryBot, arguments_not_an_object
from zcord.bot.proxy import Daemon, _upstream_error
from zcord.core.config import LlmConfig
from zcord.core.errors import (
    HINTS,
    Hint,
    NotFound,
    ProviderBadAnswer,
    ProviderError,
    ProviderMidAnswer,
    ProviderStatus,
    ProviderTimeout,
    ProviderTooLarge,
    ProviderUnreachable,
    ZcorError,
    undeclared_tool,
)
from zcord.retrieval.llm import Message, Provider, ToolCall, _AnthropicStream, _OpenAIStream
from zcord.transport.wording import OPERATOR_ADVICE, for_operator

KEY = "sk-secret-key-0123456789"
BAD_ANSWER = "The LLM provider's answer is not a Chat Completions or Messages reply."


# -- the endpoint's answer follows the failure's type ---------------------------------------------


@pytest.mark.parametrize("error,status,code,message", [
    (ProviderTimeout("no words about time at all", seconds=7.5), 504, "upstream_timeout",
     "The LLM provider did not answer within 7.5 s (llm.timeoutSeconds)."),
    # a failure whose text quotes a timeout (a gateway's own words) is not one
    (ProviderError("The LLM provider at x failed: gateway did not answer within 3 s"), 502, "upstream_error",
     "The LLM provider failed."),
    (ProviderStatus("status line reworded", status=401), 502, "upstream_error",
     "The LLM provider answered HTTP 401: it refused the API key (check zcor's llm key)."),
    (ProviderStatus("The LLM provider answered HTTP 200: did not answer within 1 s", status=503), 502,
     "upstream_error", "The LLM provider answered HTTP 503: it failed."),
    (ProviderUnreachable("connection refused"), 502, "upstream_error",
     "The LLM provider could not be reached (is it running, and is llm.baseUrl right?)."),
    (ProviderMidAnswer("stream broke"), 502, "upstream_error", "The LLM provider failed mid-answer."),
    (ProviderBadAnswer("The LLM provider's answer is not a JSON object."), 502, "upstream_error", BAD_ANSWER),
    (ProviderBadAnswer("no choice, not JSON, did not answer within 2 s"), 502, "upstream_error", BAD_ANSWER),
])
def test_the_endpoint_status_follows_the_failure_type_not_its_words(error, status, code, message):
    api = _upstream_error(error, KEY)
    assert (api.status, api.code, api.message, api.type) == (status, code, message, "upstream_error")


def test_an_answer_too_large_is_said_with_the_key_redacted():
    api = _upstream_error(ProviderTooLarge(f"The answer quoting {KEY} is larger than 8 MiB; it was cut off."), KEY)
    assert api.status == 502 and KEY not in api.message and "larger than 8 MiB" in api.message


def _provider(llm: FakeLLM, timeout: float = 5) -> Provider:
    return Provider(LlmConfig(protocol="openai", base_url=llm.url, model="scripted", timeout_seconds=timeout), None)


@pytest.mark.parametrize("entry,kind", [
    (("raw", "upstream did not answer within 30 s"), ProviderBadAnswer),  # its words, not ours
    (("status", 500, {"error": {"message": "did not answer within 9 s"}}), ProviderStatus),
    ({"choices": []}, ProviderBadAnswer),
    ({"choices": [{"message": {"content": 5}}]}, ProviderBadAnswer),
    (["not", "an", "object"], ProviderBadAnswer),
    (("drip", 0.05), ProviderTimeout),
])
def test_each_provider_failure_has_its_type_sync_and_async(entry, kind):
    with FakeLLM() as llm:
        provider = _provider(llm, timeout=0.5)
        for attempt in ("sync", "async"):
            llm.script.append(entry)
            with pytest.raises(ProviderError) as e:
                if attempt == "sync":
                    provider.chat("sys", [Message("user", "你好")])
                else:
                    asyncio.run(provider.achat("sys", [Message("user", "你好")]))
            assert type(e.value) is kind, (attempt, e.value.message)
            assert e.value.code == "provider_error"  # the wire's code is the same for all
            if kind is ProviderStatus:
                assert e.value.status == 500
            if kind is ProviderTimeout:
                assert e.value.seconds == 0.5
            api = _upstream_error(e.value, None)
            assert api.status == (504 if kind is ProviderTimeout else 502), (attempt, api.message)


def test_an_unreachable_provider_is_a_502_sync_and_async():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    provider = Provider(LlmConfig(protocol="openai", base_url=f"http://127.0.0.1:{port}/v1", model="m",
                                  timeout_seconds=5), None)
    for run in (lambda: provider.chat("sys", [Message("user", "hi")]),
                lambda: asyncio.run(provider.achat("sys", [Message("user", "hi")]))):
        with pytest.raises(ProviderUnreachable) as e:
            run()
        assert _upstream_error(e.value, None).status == 502


@pytest.mark.parametrize("line,state", [
    ('data: {"error": {"message": "did not answer within 4 s"}}', _OpenAIStream),
    ('data: {"type": "error", "error": {"message": "did not answer within 4 s"}}', _AnthropicStream),
    ("data: {not json, did not answer within 4 s", _OpenAIStream),
])
def test_a_stream_that_breaks_off_is_a_failure_mid_answer(line, state):
    with pytest.raises(ProviderMidAnswer) as e:
        Provider._sse_piece(line, state())
    assert _upstream_error(e.value, None).status == 502


# -- hints are named where the refusal is raised ---------------------------------------------------


@pytest.fixture
def reworded(monkeypatch):
    """Every fixed advice edited: what a maintainer rewording HINTS does."""
    for key, hint in list(HINTS.items()):
        if key != "undeclared_tool":
            monkeypatch.setitem(HINTS, key, Hint(hint.key, hint.code, f"Reworded advice for {key}."))


def test_reworded_advice_keeps_its_hint_and_operator_words(svc, t, reworded):
    m = t.write(title="生日", content="三月三日")["id"]
    t.relationship_write(personId="qq:1", name="Mike", relationship="friend", affinity=1, reason="r",
                         memoryNodeId=m)
    refusals: dict[str, ZcorError] = {}
    for key, call in {
        "find_ids": lambda: t.read(id="m999"),
        "find_person": lambda: t.relationship_read(personId="qq:404"),
        "unlink_first": lambda: t.delete(id=m),
        "list_backups": lambda: svc.backup_preview("memory-state-none.json"),
    }.items():
        with pytest.raises(ZcorError) as e:
            call()
        refusals[key] = e.value
    for key, err in refusals.items():
        said = f"Reworded advice for {key}."
        assert err.code == HINTS[key].code and err.data["hint"] == key and err.data["advice"] == said, err.to_dict()
        assert said in err.message  # the model reads the one advice HINTS holds
        tui = for_operator(err.code, err.message, "tui", data=err.data)
        assert said not in tui and OPERATOR_ADVICE[key][0] in tui


def test_advice_text_without_a_hint_decides_nothing():
    text = f"No memory with id 'm9'. {HINTS['find_ids'].advice}"
    assert "hint" not in NotFound(text).data
    assert for_operator("not_found", text, "tui", data={}) == text
    assert for_operator("not_found", text, "cli", data=None) == text


# -- the model-facing refusals are written once ---------------------------------------------------


class _NoDaemon:
    """A client no refusal of an undeclared tool may reach."""

    def __getattr__(self, name: str):
        raise AssertionError(f"an undeclared call reached the daemon ({name})")


def test_the_bot_and_the_endpoint_refuse_a_bad_call_with_one_sentence():
    bot = MemoryBot(_NoDaemon(), "s")  # type: ignore[arg-type]
    endpoint = Daemon(None, 1.0)
    not_object = ToolCall("c1", "zcor_memory_query", ["x"])
    for call, code, sentence in ((ToolCall("c1", "zcor_nope", {}), "unknown_tool", undeclared_tool("zcor_nope")),
                                 (ToolCall("c1", FRAME_TOOL, {}), "unknown_tool", FRAME_NOT_CALLABLE),
                                 (not_object, "invalid_argument", arguments_not_an_object(not_object))):
        by_bot, use = bot.execute(call, {"zcor_memory_query"})
        by_endpoint = asyncio.run(endpoint.call(call, {"zcor_memory_query"}, {}))
        for message in (by_bot, by_endpoint):
            assert message.is_error and message.tool_call_id == "c1"
            assert json.loads(message.content) == {"error": {"code": code, "message": sentence}}
        assert not use.ok
    assert undeclared_tool("zcor_nope") == f"Tool 'zcor_nope' {HINTS['undeclared_tool'].advice}"
    assert arguments_not_an_object(not_object) == "arguments of zcor_memory_query must be a JSON object, got \"['x']\""
