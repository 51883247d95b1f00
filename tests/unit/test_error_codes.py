"""Codes decide, sentences explain (issue 39): the endpoint's status follows the type of a
provider failure and a refusal's hint is named where it is raised, so editing any wording
(or a provider quoting ours back) changes no status and loses no hint."""

from __future__ import annotations

import asyncio
import errno
import logging
import re
import socket
import threading
from typing import get_args

import pytest

from tests.fakellm import FakeLLM
from zcord.bot.proxy import _upstream_error
from zcord.core.config import LlmConfig
from zcord.core.errors import (
    HINTS,
    Hint,
    HintKey,
    NotFound,
    ProviderBadAnswer,
    ProviderError,
    ProviderMidAnswer,
    ProviderStatus,
    ProviderTimeout,
    ProviderTooLarge,
    ProviderUnreachable,
    ZcorError,
)
from zcord.retrieval.llm import Message, Provider
from zcord.transport.connections import ConnectionServer
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


@pytest.mark.parametrize("stream", [
    'data: {"choices": [{"delta": {"content": "好"}}]}\n\ndata: {"error": {"message": "did not answer within 4 s"}}\n\n',
    'data: {"choices": [{"delta": {"content": "好"}}]}\n\ndata: {not json, did not answer within 4 s\n\n',
])
def test_a_stream_that_breaks_off_is_a_failure_mid_answer_sync_and_async(stream):
    with FakeLLM() as llm:
        provider = _provider(llm)
        for attempt in ("sync", "async"):
            llm.script.append(("raw", stream, "text/event-stream"))
            seen: list[str] = []
            with pytest.raises(ProviderMidAnswer) as e:
                if attempt == "sync":
                    provider.chat("sys", [Message("user", "你好")], on_text=seen.append)
                else:
                    asyncio.run(provider.achat("sys", [Message("user", "你好")], on_text=seen.append))
            assert seen == ["好"], attempt
            api = _upstream_error(e.value, None)
            assert (api.status, api.message) == (502, "The LLM provider failed mid-answer."), attempt


def _cut_off_server(content_type: str) -> tuple[socket.socket, threading.Thread]:
    """A provider that sends its head and a piece of the body, then hangs up."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(re.search(rb"(?i)content-length: (\d+)", head)[1])
            while len(body) < length:
                body += conn.recv(65536)
            conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: 1000\r\n\r\n"
                         f"data: {{\"choices\": [".encode())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server, thread


@pytest.mark.parametrize("streamed,kind", [(False, ProviderUnreachable), (True, ProviderMidAnswer)])
def test_a_connection_lost_after_the_head_is_said_by_what_was_being_read(streamed, kind):
    server, thread = _cut_off_server("text/event-stream" if streamed else "application/json")
    with server:
        port = server.getsockname()[1]
        provider = Provider(LlmConfig(protocol="openai", base_url=f"http://127.0.0.1:{port}/v1", model="m",
                                      timeout_seconds=5), None)
        with pytest.raises(ProviderError) as e:
            provider.chat("sys", [Message("user", "hi")], on_text=(lambda _: None) if streamed else None)
        thread.join(5)
    assert type(e.value) is kind, e.value.message
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


def test_the_hint_keys_the_type_checker_knows_are_the_hints():
    assert set(get_args(HintKey)) == set(HINTS) == set(OPERATOR_ADVICE)
    assert all(key == hint.key for key, hint in HINTS.items())


def test_advice_text_without_a_hint_decides_nothing():
    text = f"No memory with id 'm9'. {HINTS['find_ids'].advice}"
    assert "hint" not in NotFound(text).data
    assert for_operator("not_found", text, "tui", data={}) == text
    assert for_operator("not_found", text, "cli", data=None) == text


# -- asyncio's accept failures are known by the context's keys, not its message -------------------


def test_an_accept_failure_is_known_by_its_socket_not_by_asyncios_words(caplog):
    server = ConnectionServer(None)  # type: ignore[arg-type]  # loop_exception needs no Service
    passed_on: list[dict[str, object]] = []

    class Loop:
        def default_exception_handler(self, context: dict[str, object]) -> None:
            passed_on.append(context)

    emfile = OSError(errno.EMFILE, "Too many open files")
    with caplog.at_level(logging.ERROR, logger="zcord"):
        server.loop_exception(Loop(), {"message": "reworded by a newer Python", "exception": emfile,  # type: ignore[arg-type]
                                       "socket": object()})
        server.loop_exception(Loop(), {"message": "socket.accept() of something else", "exception": emfile})  # type: ignore[arg-type]
    assert [r.getMessage().split(";")[0] for r in caplog.records] == \
        ["cannot accept a new connection: Too many open files (EMFILE)"]
    assert [c["message"] for c in passed_on] == ["socket.accept() of something else"]
