"""`zcor serve-openai` against a real daemon, real clients (the official `openai` package and
a raw HTTP/SSE client) and a scripted provider on 127.0.0.1 (tests/fakellm.py)."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import io
import json
import logging
import os
import socket
import subprocess
import sys
import threading

import openai
import pytest

from tests.fakellm import FakeLLM, anthropic_text, anthropic_tools, openai_text, openai_tools
from zcord.bot.proxy import ApiError, Limits, ProxyServer, Settings, parse_chat
from zcord.core.config import LlmConfig

TOKEN = "tok-secret-123"
UPSTREAM_KEY = "sk-upstream-key-789"
ZCOR_CMD = [sys.executable, "-c", "import sys; from zcord.cli import main; sys.exit(main())"]


class Running:
    """A ProxyServer on its own event loop in a thread, on a free port of 127.0.0.1."""

    def __init__(self, sock, llm: FakeLLM, timeout: float = 5, protocol: str = "openai", **limits):
        self.loop = asyncio.new_event_loop()
        self.crashes: list[dict] = []  # anything the loop had to report (a task that failed unseen)
        self.loop.set_exception_handler(lambda loop, context: self.crashes.append(context))
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        cfg = LlmConfig(protocol=protocol, base_url=llm.url, model="scripted", timeout_seconds=timeout)
        settings = Settings(port=0, socket=str(sock), token=TOKEN, limits=Limits(**limits))

        async def make() -> ProxyServer:
            server = ProxyServer(settings, cfg, UPSTREAM_KEY)
            await server.start()
            return server

        self.server = asyncio.run_coroutine_threadsafe(make(), self.loop).result(30)
        self.url = f"http://127.0.0.1:{self.server.port}/v1"

    def client(self, token: str = TOKEN, **kw) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url, api_key=token, max_retries=0, timeout=30, **kw)

    def raw(self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None):
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=30)
        conn.request(method, path, body=body, headers={"Authorization": f"Bearer {TOKEN}",
                                                        "Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        return resp, resp.read(), conn

    def close(self) -> None:
        fut = asyncio.run_coroutine_threadsafe(self.server.close(), self.loop)
        try:
            fut.result(30)
        except TimeoutError:  # say where the endpoint is stuck
            out = io.StringIO()
            for t in asyncio.all_tasks(self.loop):
                t.print_stack(file=out)
            raise AssertionError("the endpoint did not close:\n" + out.getvalue()) from None
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
        assert self.crashes == [], self.crashes


@pytest.fixture
def llm():
    with FakeLLM() as server:
        yield server


@pytest.fixture
def proxy(daemon, llm):
    running = Running(daemon.sock, llm)
    yield running
    running.close()


def history(daemon, **filters):
    with daemon.client("operator") as op:
        return op.request("zcor/history/query", {"changesOnly": True, **filters})


def seed(daemon) -> str:
    with daemon.client("operator") as op:
        imp = op.call_tool("zcor_memory_write", {"title": "我是小助手的主人", "content": "主人叫阿杰，住在杭州"})
        op.call_tool("zcor_memory_important", {"id": imp["id"], "important": True})
        cat = op.call_tool("zcor_memory_write", {"title": "阿杰的猫叫团子", "content": "橘猫，怕洗澡"})
    return cat["id"]


def system_sent(req) -> str:
    first = req["json"]["messages"][0]
    return first["content"] if first["role"] == "system" else ""


def declared_sent(req) -> set[str]:
    return {t["function"]["name"] for t in req["json"].get("tools", [])}


ASK = [{"role": "system", "content": "You are Mimi, a cheerful cat-girl."},
       {"role": "user", "content": "团子今天怎么样"}]


# -- real clients --------------------------------------------------------------------------------


def test_openai_client_gets_an_answer_laid_out_for_the_prompt_cache(daemon, llm, proxy):
    cat = seed(daemon)
    llm.script.append(openai_text("团子在睡觉"))
    out = proxy.client().chat.completions.create(model="my-front-end-model", messages=ASK,
                                                 extra_headers={"X-Zcor-Session": "st:one"})
    assert out.choices[0].message.content == "团子在睡觉"
    assert out.model == "my-front-end-model"
    assert out.choices[0].finish_reason == "stop"
    (req,) = llm.requests
    assert req["json"]["model"] == "scripted"  # the deployment's model, not the client's name
    assert req["headers"]["Authorization"] == f"Bearer {UPSTREAM_KEY}"
    with daemon.client() as bot:
        prefix, header = bot.prefix(), bot.context("st:one")["text"]
    # zcor's prefix, then the client's own system prompt: the stable system text
    assert system_sent(req) == prefix.strip("\n") + "\n\nYou are Mimi, a cheerful cat-girl."
    # the recall header (with the cat) just before the newest batch, in its user turn
    assert cat in header and cat not in prefix
    assert req["json"]["messages"][1] == {"role": "user", "content": header + "\n\n团子今天怎么样"}
    assert [m["role"] for m in req["json"]["messages"]] == ["system", "user"]
    assert "zcor_memory_write" in declared_sent(req)
    # nothing of the header comes back to the client
    assert cat not in out.model_dump_json() and UPSTREAM_KEY not in out.model_dump_json()


def test_openai_client_streams_the_answer(daemon, llm, proxy):
    seed(daemon)
    llm.script.append(openai_text("团子在窗台上晒太阳"))
    stream = proxy.client().chat.completions.create(model="mine", messages=ASK, stream=True)
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "团子在窗台上晒太阳"
    assert len([c for c in chunks if c.choices[0].delta.content]) == 2  # the upstream's two pieces, as they came
    assert {c.model for c in chunks} == {"mine"}
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert llm.requests[0]["json"]["stream"] is True


def test_raw_sse_client_sees_chunked_events_ending_in_done(daemon, llm, proxy):
    llm.script.append(openai_text("你好呀"))
    body = json.dumps({"model": "x", "stream": True, "messages": [{"role": "user", "content": "在吗"}]}).encode()
    resp, data, conn = proxy.raw("POST", "/v1/chat/completions", body)
    assert resp.status == 200
    assert resp.getheader("Content-Type") == "text/event-stream"
    assert resp.getheader("Transfer-Encoding") == "chunked"
    events = [line[len("data: "):] for line in data.decode().split("\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    parsed = [json.loads(e) for e in events[:-1]]
    assert parsed[0]["choices"][0]["delta"]["role"] == "assistant"
    assert "".join(p["choices"][0]["delta"].get("content") or "" for p in parsed) == "你好呀"
    assert all(p["object"] == "chat.completion.chunk" and p["model"] == "x" for p in parsed)
    # the connection is kept: a second request on it is answered
    llm.script.append(openai_text("还在"))
    conn.request("POST", "/v1/chat/completions", body=body.replace(b'"stream": true', b'"stream": false'),
                 headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    again = conn.getresponse()
    assert json.loads(again.read())["choices"][0]["message"]["content"] == "还在"
    conn.close()


@pytest.mark.parametrize("streaming", [False, True])
def test_the_model_calls_a_zcor_tool_which_the_proxy_runs_and_history_shows(daemon, llm, proxy, streaming):
    llm.script += [openai_tools(("zcor_memory_write", {"title": "阿杰养了一只猫", "content": "橘猫，叫团子"})),
                   openai_text("记住啦")]
    client = proxy.client()
    messages = [{"role": "user", "content": "我养了一只橘猫叫团子", "name": "ajie"}]
    if streaming:
        text = "".join(c.choices[0].delta.content or "" for c in
                       client.chat.completions.create(model="m", messages=messages, stream=True,
                                                      extra_headers={"X-Zcor-Session": "st:room1"}))
    else:
        text = client.chat.completions.create(model="m", messages=messages,
                                              extra_headers={"X-Zcor-Session": "st:room1"}).choices[0].message.content
    assert text == "记住啦"
    # the second upstream request carries the call and zcor's result; the client never saw them
    second = llm.requests[1]["json"]["messages"]
    assert second[-2]["tool_calls"][0]["function"]["name"] == "zcor_memory_write"
    result = json.loads(second[-1]["content"])
    assert result["title"] == "阿杰养了一只猫"
    records = history(daemon, tool="zcor_memory_write")["items"]
    (record,) = [r for r in records if r.get("actor") == "model"]
    assert result["id"] in json.dumps(record, ensure_ascii=False)
    assert record["origin"] == {"session": "st:room1", "senders": ["openai:ajie"], "speaker": "openai:ajie"}


def test_a_client_tool_call_is_passed_back_untouched_and_its_result_forwarded(daemon, llm, proxy):
    weather = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                                "parameters": {"type": "object",
                                                               "properties": {"city": {"type": "string"}}}}}
    llm.script.append(openai_tools(("get_weather", {"city": "杭州"})))
    client = proxy.client()
    messages = [{"role": "user", "content": "杭州天气怎么样"}]
    out = client.chat.completions.create(model="m", messages=messages, tools=[weather])
    msg = out.choices[0].message
    assert out.choices[0].finish_reason == "tool_calls"
    (call,) = msg.tool_calls
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == ("call_0", "get_weather",
                                                                                   {"city": "杭州"})
    assert {"get_weather", "zcor_memory_write"} <= declared_sent(llm.requests[0])
    # the client runs its tool and sends the result back; it reaches the model as it was
    llm.script.append(openai_text("杭州晴"))
    messages += [msg.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": "call_0", "content": "晴，25度"}]
    out = client.chat.completions.create(model="m", messages=messages, tools=[weather])
    assert out.choices[0].message.content == "杭州晴"
    sent = llm.requests[1]["json"]["messages"]
    assert sent[-1] == {"role": "tool", "tool_call_id": "call_0", "content": "晴，25度"}
    assert sent[-2]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": call.function.arguments}


def test_a_client_tool_call_streams_back_too(daemon, llm, proxy):
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    llm.script.append(openai_tools(("get_weather", {"city": "杭州"})))
    chunks = list(proxy.client().chat.completions.create(model="m", stream=True, tools=[weather],
                                                         messages=[{"role": "user", "content": "天气"}]))
    calls = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert [(tc.id, tc.function.name, json.loads(tc.function.arguments)) for tc in calls] == \
        [("call_0", "get_weather", {"city": "杭州"})]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_models_lists_the_deployment_model(proxy):
    assert [m.id for m in proxy.client().models.list()] == ["scripted"]


def test_the_session_comes_from_the_header_and_the_sender_from_the_name(daemon, llm, proxy):
    seed(daemon)
    llm.script.append(openai_text("嗯"))
    proxy.client().chat.completions.create(model="m", extra_headers={"X-Zcor-Session": "st:room2"},
                                           messages=[{"role": "user", "content": "团子呢", "name": "ajie"}])
    with daemon.client() as bot:
        assert "阿杰的猫叫团子" in bot.context("st:room2")["text"]
        assert bot.context("st:other")["text"] == ""


def test_session_hash_is_stable_across_turns_and_differs_between_chats(tmp_path):
    proxy = ProxyServer.__new__(ProxyServer)
    proxy.settings = Settings(token="t")
    turn1 = parse_chat(json.dumps({"messages": ASK}).encode(), "openai")
    turn2 = parse_chat(json.dumps({"messages": ASK + [{"role": "assistant", "content": "喵"},
                                                      {"role": "user", "content": "再说说"}]}).encode(), "openai")
    other = parse_chat(json.dumps({"messages": [ASK[0], {"role": "user", "content": "你好"}]}).encode(), "openai")
    assert proxy.session_of(turn1, {}) == proxy.session_of(turn2, {})
    assert proxy.session_of(turn1, {}) != proxy.session_of(other, {})
    assert proxy.session_of(turn1, {"x-zcor-session": "h"}) == "h"
    assert [t for t, _ in turn2.new_user] == ["再说说"]  # only the new message is the recall batch
    proxy.settings = Settings(token="t", session_from=("user", "hash"))
    with_user = parse_chat(json.dumps({"messages": ASK, "user": "u1"}).encode(), "openai")
    assert proxy.session_of(with_user, {"x-zcor-session": "h"}) == "openai:user:u1"


def test_zcord_stopped_mid_conversation_the_answer_still_comes_without_memory(daemon, llm, proxy, caplog):
    seed(daemon)
    llm.script += [openai_text("团子在睡觉"), openai_text("还是在睡觉")]
    client = proxy.client()
    client.chat.completions.create(model="m", messages=ASK)
    assert "主人叫阿杰" in system_sent(llm.requests[0])
    daemon.stop()
    caplog.set_level(logging.WARNING, logger="zcord.bot.proxy")
    out = client.chat.completions.create(model="m", messages=ASK + [{"role": "assistant", "content": "团子在睡觉"},
                                                                   {"role": "user", "content": "团子呢"}])
    assert out.choices[0].message.content == "还是在睡觉"
    assert system_sent(llm.requests[1]) == "You are Mimi, a cheerful cat-girl."
    assert "zcor_memory_write" not in declared_sent(llm.requests[1])
    assert any("without memory" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


# -- access ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("token", [None, "wrong-token"])
def test_requests_without_the_token_are_refused(daemon, llm, proxy, token):
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    conn = http.client.HTTPConnection("127.0.0.1", proxy.server.port, timeout=30)
    conn.request("POST", "/v1/chat/completions", body=json.dumps({"model": "m", "messages": ASK}), headers=headers)
    resp = conn.getresponse()
    body = json.loads(resp.read())
    assert resp.status == 401
    assert body["error"]["code"] == "invalid_api_key" and "Bearer" in body["error"]["message"]
    with pytest.raises(openai.AuthenticationError):
        proxy.client(token="nope").models.list()
    assert llm.requests == []


AUTH_FORMS = [None, "", "Bearer", "Bearer ", f"Basic {TOKEN}", f"bearer{TOKEN}", f"Bearer {TOKEN}x",
              f"Bearer {TOKEN[:-1]}", f"Token {TOKEN}", f"Bearer {TOKEN.upper()}", f"Bearer\t{TOKEN}x",
              f"Bearer {TOKEN} {TOKEN}", f"{TOKEN}"]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/models", "/metrics", "/v1/chat/completions/",
                                  "//v1/models", "/v1/%63hat/completions", "/nothing"])
def test_every_wrong_authorization_on_every_path_is_a_401_that_closes(daemon, llm, proxy, path):
    for form in AUTH_FORMS:
        lines = ["Content-Length: 2"] + ([] if form is None else [f"Authorization: {form}"])
        got = exchange(proxy.server.port, head(path, *lines) + b"{}")
        assert got.startswith(b"HTTP/1.1 401 "), (path, form, got[:100])
        assert got.count(b"HTTP/1.1 ") == 1
    got = exchange(proxy.server.port, head(path, "Content-Length: 2", f"Authorization: Bearer {TOKEN}",
                                           f"Authorization: Bearer {TOKEN}") + b"{}")
    assert got.startswith(b"HTTP/1.1 400 ")  # two Authorization headers: which one counts is not guessed
    assert llm.requests == []


def test_past_the_concurrency_cap_a_request_gets_429(daemon, llm):
    running = Running(daemon.sock, llm, max_concurrent=1)
    try:
        release = threading.Event()
        llm.script.append(("wait", release, openai_text("慢慢来")))
        first: list = []
        t = threading.Thread(target=lambda: first.append(
            running.client().chat.completions.create(model="m", messages=ASK)))
        t.start()
        assert llm.arrived.wait(30)
        with pytest.raises(openai.RateLimitError) as e:
            running.client().chat.completions.create(model="m", messages=ASK)
        assert e.value.response.headers["Retry-After"] == "1"
        assert e.value.body["code"] == "too_many_requests"
        release.set()
        t.join(30)
        assert first[0].choices[0].message.content == "慢慢来"
    finally:
        running.close()


def test_a_connection_that_does_not_finish_its_request_is_closed(daemon, llm):
    running = Running(daemon.sock, llm, read_timeout=0.3)
    try:
        with socket.create_connection(("127.0.0.1", running.server.port), timeout=30) as s:
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 100\r\n")
            assert s.recv(100) == b""  # closed by the proxy, without an answer
    finally:
        running.close()


def test_the_upstream_key_never_reaches_the_client_even_when_the_upstream_echoes_it(daemon, llm, proxy):
    llm.script.append(("status", 401, {"error": {"message": f"Incorrect API key provided: {UPSTREAM_KEY}"}}))
    with pytest.raises(openai.APIStatusError) as e:
        proxy.client().chat.completions.create(model="m", messages=ASK)
    assert e.value.status_code == 502
    assert UPSTREAM_KEY not in e.value.response.text
    # a vetted sentence, not the provider's text
    assert e.value.body["message"] == "The LLM provider answered HTTP 401: it refused the API key (check zcor's llm key)."


# -- bad input: a clear error object, nothing written ---------------------------------------------


BAD = [
    (b"{not json", 400, "invalid_json"),
    (b"[1, 2]", 400, "invalid_json"),
    (json.dumps({"model": "m", "messages": []}).encode(), 400, "invalid_messages"),
    (json.dumps({"model": "m", "messages": [{"role": "narrator", "content": "x"}]}).encode(), 400, "unknown_role"),
    (json.dumps({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "看这张图"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]}).encode(),
     400, "unsupported_content"),
    (json.dumps({"model": "m", "messages": [{"role": "user", "content": 42}]}).encode(), 400, "invalid_content"),
    (json.dumps({"model": "m", "messages": ASK, "tools": [
        {"type": "function", "function": {"name": "zcor_memory_write"}}]}).encode(), 400, "tool_name_reserved"),
    (json.dumps({"model": "m", "messages": ASK, "n": 3}).encode(), 400, "unsupported_parameter"),
    (json.dumps({"model": "m", "messages": [{"role": "user", "content": "长" * (5 << 20)}]}).encode(),
     413, "request_too_large"),
    (json.dumps({"model": "m", "messages": [{"role": "user", "content": "a" * 1_000_001}]}).encode(),
     400, "message_too_long"),
    (json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi", "name": "a\u0007b"}]}).encode(),
     400, "invalid_name"),
]


@pytest.mark.parametrize("body,status,code", BAD, ids=[b[2] + str(i) for i, b in enumerate(BAD)])
def test_bad_input_gets_an_openai_error_object_and_changes_nothing(daemon, llm, proxy, body, status, code):
    before = history(daemon)["total"]
    resp, data, conn = proxy.raw("POST", "/v1/chat/completions", body)
    conn.close()
    error = json.loads(data)["error"]
    assert resp.status == status
    assert error["code"] == code and error["type"] and error["message"]
    assert llm.requests == []
    assert history(daemon)["total"] == before
    with daemon.client() as bot:
        assert bot.context("st:any")["text"] == ""


def test_text_parts_are_joined_and_forwarded(daemon, llm, proxy):
    llm.script.append(openai_text("好"))
    proxy.client().chat.completions.create(model="m", messages=[{"role": "user", "content": [
        {"type": "text", "text": "第一段"}, {"type": "text", "text": "第二段"}]}])
    assert llm.requests[0]["json"]["messages"][-1] == {"role": "user", "content": "第一段\n第二段"}


def test_unknown_route_and_method(proxy):
    resp, data, conn = proxy.raw("GET", "/v1/embeddings")
    assert resp.status == 404 and json.loads(data)["error"]["code"] == "not_found"
    resp, data, conn = proxy.raw("GET", "/v1/chat/completions")
    assert resp.status == 405 and resp.getheader("Allow") == "POST"


@pytest.mark.parametrize("streaming", [False, True])
def test_an_upstream_that_errors_is_a_502_error_object_and_nothing_is_written(daemon, llm, proxy, streaming):
    before = history(daemon)["total"]
    llm.script.append(("status", 500, {"error": {"message": "model overloaded"}}))
    with pytest.raises(openai.APIStatusError) as e:
        out = proxy.client().chat.completions.create(model="m", messages=ASK, stream=streaming)
        list(out) if streaming else None
    assert e.value.status_code == 502
    assert e.value.body["code"] == "upstream_error" and "HTTP 500" in e.value.body["message"]
    assert "model overloaded" not in e.value.response.text  # the provider's words are not passed on
    assert history(daemon)["total"] == before


def test_an_upstream_that_trickles_is_a_504_error_object(daemon, llm):
    running = Running(daemon.sock, llm, timeout=0.5)
    try:
        before = history(daemon)["total"]
        llm.script.append(("drip", 0.05))
        with pytest.raises(openai.APIStatusError) as e:
            running.client().chat.completions.create(model="m", messages=ASK)
        assert e.value.status_code == 504
        assert e.value.body["code"] == "upstream_timeout" and "within" in e.value.body["message"]
        assert history(daemon)["total"] == before
    finally:
        running.close()


@pytest.mark.parametrize("streaming", [False, True])
def test_an_upstream_answer_that_quotes_a_timeout_is_a_bad_answer_not_a_504(daemon, llm, proxy, streaming):
    """The status follows the failure's type: a gateway's page saying "did not answer within
    30 s" is an answer that is not a reply (502), whatever words it holds."""
    llm.script.append(("raw", "upstream did not answer within 30 s"))
    with pytest.raises(openai.APIStatusError) as e:
        out = proxy.client().chat.completions.create(model="m", messages=ASK, stream=streaming)
        list(out) if streaming else None
    assert e.value.status_code == 502
    assert e.value.body == {"message": "The LLM provider's answer is not a Chat Completions or Messages reply.",
                            "type": "upstream_error", "code": "upstream_error", "param": None}


def test_parse_chat_names_the_field():
    with pytest.raises(ApiError) as e:
        parse_chat(json.dumps({"messages": [{"role": "user", "content": "a"}, {"role": "tool", "content": "x"}]})
                   .encode(), "openai")
    assert e.value.param == "messages[1].tool_call_id"
    chat = parse_chat(json.dumps({"messages": ASK, "temperature": 0.7, "stop": "END"}).encode(), "anthropic")
    assert chat.options == {"temperature": 0.7, "stop_sequences": ["END"]}
    # a client's earlier tool call keeps its arguments as an object (Anthropic's format needs one)
    chat = parse_chat(json.dumps({"messages": [
        {"role": "user", "content": "天气"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "杭州"}'}},
            {"id": "c2", "type": "function", "function": {"name": "raw", "arguments": "not json"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "晴"}]}).encode(), "anthropic")
    assert [c.arguments for c in chat.messages[1].tool_calls] == [{"city": "杭州"}, "not json"]
    assert chat.new_user == []  # the last message is a tool result: no new batch for recall


# -- the command ----------------------------------------------------------------------------------


def test_the_command_serves_with_a_token_file_and_refuses_a_readable_one(daemon, llm, tmp_path):
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o644)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZCOR_")}
    env.update(ZCOR_LLM_BASE_URL=llm.url, ZCOR_LLM_MODEL="scripted", ZCOR_LLM_API_KEY=UPSTREAM_KEY)
    args = ZCOR_CMD + ["serve-openai", "--socket", str(daemon.sock), "--port", "0", "--token-file", str(token)]
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "chmod 600" in out.stderr
    token.chmod(0o600)
    proc = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        while "listening on" not in line:
            line = proc.stderr.readline()
            assert line, "serve-openai exited before listening"
        url = line.split("listening on ")[1].strip()
        llm.script.append(openai_text("喵"))
        client = openai.OpenAI(base_url=url, api_key=TOKEN, max_retries=0, timeout=30)
        assert client.chat.completions.create(model="m", messages=ASK).choices[0].message.content == "喵"
        assert llm.requests[0]["headers"]["Authorization"] == f"Bearer {UPSTREAM_KEY}"
        proc.terminate()
        assert proc.wait(30) == 0  # SIGTERM is a clean stop
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def test_the_token_comes_from_the_file_the_credential_or_the_environment(tmp_path):
    from zcord.bot.proxy import read_token

    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "proxy-token").write_text("from-credential\n")
    assert read_token(None, {"CREDENTIALS_DIRECTORY": str(creds), "ZCOR_PROXY_TOKEN": "from-env"}) == \
        "from-credential"
    assert read_token(None, {"ZCOR_PROXY_TOKEN": " from-env "}) == "from-env"
    assert read_token(None, {}) is None
    own = tmp_path / "own"
    own.write_text("")
    own.chmod(0o600)
    with pytest.raises(ValueError, match="empty"):
        read_token(str(own), {"ZCOR_PROXY_TOKEN": "from-env"})
    with pytest.raises(ValueError, match="cannot be read"):
        read_token(str(tmp_path / "missing"), {})


def test_no_token_is_allowed_only_on_loopback():
    from zcord.bot.proxy import build_parser, settings_from

    args = build_parser().parse_args(["--no-token", "--host", "0.0.0.0"])
    with pytest.raises(ValueError, match="loopback"):
        settings_from(args, {})
    assert settings_from(build_parser().parse_args(["--no-token"]), {}).token is None
    with pytest.raises(ValueError, match="no bearer token"):
        settings_from(build_parser().parse_args([]), {})
    with pytest.raises(ValueError, match="session-from"):
        settings_from(build_parser().parse_args(["--session-from", "cookie"]), {"ZCOR_PROXY_TOKEN": "t"})


def test_the_tool_list_follows_zcords_config(daemon, llm, proxy):
    llm.script += [openai_text("一"), openai_text("二")]
    client = proxy.client()
    client.chat.completions.create(model="m", messages=ASK)
    assert "zcor_relationship_write" in declared_sent(llm.requests[0])
    with daemon.client("operator") as op:
        op.config_set({"relationshipMemory": False})
    # zcord tells its bots the list changed; the next request offers the new list
    for _ in range(100):
        if proxy.server.daemon._tools is None:
            break
        threading.Event().wait(0.05)
    client.chat.completions.create(model="m", messages=ASK)
    assert "zcor_relationship_write" not in declared_sent(llm.requests[1])
    assert "zcor_memory_write" in declared_sent(llm.requests[1])


def test_header_names_are_configurable():
    from zcord.bot.proxy import build_parser, settings_from

    settings = settings_from(build_parser().parse_args(
        ["--session-header", "X-OpenWebUI-Chat-Id", "--sender-header", "X-OpenWebUI-User-Id"]), {"ZCOR_PROXY_TOKEN": "t"})
    proxy = ProxyServer.__new__(ProxyServer)
    proxy.settings = settings
    chat = parse_chat(json.dumps({"messages": ASK}).encode(), "openai")
    headers = {"x-openwebui-chat-id": "c-1", "x-openwebui-user-id": "u-9", "x-zcor-session": "ignored"}
    assert proxy.session_of(chat, headers) == "c-1"
    assert proxy.sender_of(None, chat, headers) == "openai:u-9"  # namespaced: never another front end's key
    assert proxy.sender_of("Ann", chat, headers) == "openai:Ann"


@pytest.mark.parametrize("streaming", [False, True])
def test_an_anthropic_provider_behind_the_openai_endpoint(daemon, llm, streaming):
    running = Running(daemon.sock, llm, protocol="anthropic")
    try:
        seed(daemon)
        llm.script += [anthropic_tools(("zcor_memory_write", {"title": "阿杰喜欢晒太阳", "content": "午后"})),
                       anthropic_text("好的，记住了")]
        out = running.client().chat.completions.create(model="m", messages=ASK, stream=streaming,
                                                       temperature=0.3, stop=["END"])
        text = "".join(c.choices[0].delta.content or "" for c in out) if streaming else \
            out.choices[0].message.content
        assert text == "好的，记住了"
        first, second = (r["json"] for r in llm.requests)
        assert llm.requests[0]["path"] == "/v1/messages"
        assert llm.requests[0]["headers"]["x-api-key"] == UPSTREAM_KEY
        with daemon.client() as bot:
            prefix = bot.prefix()
        # the system parts as blocks, the last one a cache breakpoint
        assert first["system"] == [{"type": "text", "text": prefix.strip("\n")},
                                   {"type": "text", "text": "You are Mimi, a cheerful cat-girl.",
                                    "cache_control": {"type": "ephemeral"}}]
        assert (first["temperature"], first["stop_sequences"]) == (0.3, ["END"])
        assert second["messages"][-1]["content"][0]["type"] == "tool_result"
        assert any(r.get("actor") == "model" for r in history(daemon, tool="zcor_memory_write")["items"])
    finally:
        running.close()


def test_expect_100_continue_is_answered(daemon, llm, proxy):
    llm.script.append(openai_text("好"))
    body = json.dumps({"model": "m", "messages": ASK}).encode()
    with socket.create_connection(("127.0.0.1", proxy.server.port), timeout=30) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode() +
                  b"\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nConnection: close\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        s.sendall(body)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK")
    assert json.loads(rest)["choices"][0]["message"]["content"] == "好"


def test_zcord_stopped_during_a_tool_round_the_answer_still_comes(daemon, llm, proxy, caplog):
    caplog.set_level(logging.WARNING, logger="zcord.bot.proxy")
    gone = threading.Event()
    llm.script += [("wait", gone, openai_tools(("zcor_memory_write", {"title": "没写成", "content": "x"}))),
                   openai_text("我现在记不住，但我听到了")]
    answer: list = []
    t = threading.Thread(target=lambda: answer.append(
        proxy.client().chat.completions.create(model="m", messages=ASK)))
    t.start()
    assert llm.arrived.wait(30)  # recall and the prefix went through; the model is "thinking"
    daemon.stop()
    gone.set()
    t.join(60)
    assert answer[0].choices[0].message.content == "我现在记不住，但我听到了"
    result = json.loads(llm.requests[1]["json"]["messages"][-1]["content"])
    assert result["error"]["code"] == "unavailable"
    # the second round still offers zcor's tools and prefix: the transcript holds a call to one
    assert "zcor_memory_write" in declared_sent(llm.requests[1])
    assert any(r.levelno == logging.WARNING for r in caplog.records)


def test_a_client_that_stops_reading_loses_its_connection_and_frees_its_slot(daemon, llm):
    running = Running(daemon.sock, llm, read_timeout=0.5, max_concurrent=1)
    try:
        llm.script.append(openai_text("长" * (2 << 20)))  # a 6 MB answer: more than the socket buffers hold
        body = json.dumps({"model": "m", "messages": ASK}).encode()
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", running.server.port))
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + TOKEN.encode() +
                      b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            for _ in range(600):  # the slot goes; the connection is dropped with what it did not take
                if running.server._busy == 0 and len(llm.requests) == 1 and not running.server.connections:
                    break
                threading.Event().wait(0.05)
            assert running.server._busy == 0 and not running.server.connections
            s.settimeout(30)
            received = 0
            while chunk := s.recv(1 << 16):
                received += len(chunk)
            assert received < 6 << 20  # closed before the whole answer went out
        llm.script.append(openai_text("下一位"))
        assert running.client().chat.completions.create(model="m", messages=ASK).choices[0].message.content == "下一位"
    finally:
        running.close()


def test_a_client_that_hangs_up_mid_stream_frees_its_slot(daemon, llm):
    running = Running(daemon.sock, llm, max_concurrent=1)
    try:
        llm.script.append(openai_text("长" * (2 << 20)))
        body = json.dumps({"model": "m", "stream": True, "messages": ASK}).encode()
        with socket.create_connection(("127.0.0.1", running.server.port), timeout=30) as s:
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + TOKEN.encode() +
                      b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            assert s.recv(4096).startswith(b"HTTP/1.1 200 OK")
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # reset
        for _ in range(600):
            if running.server._busy == 0:
                break
            threading.Event().wait(0.05)
        assert running.server._busy == 0
        llm.script.append(openai_text("下一位"))
        assert running.client().chat.completions.create(model="m", messages=ASK).choices[0].message.content == "下一位"
    finally:
        running.close()


def test_a_session_header_with_a_control_character_is_refused(daemon, llm, proxy):
    resp, data, conn = proxy.raw("POST", "/v1/chat/completions", json.dumps({"model": "m", "messages": ASK}).encode(),
                                 {"X-Zcor-Session": "room\x01one"})
    conn.close()
    assert resp.status == 400 and json.loads(data)["error"]["code"] == "invalid_header"
    assert llm.requests == []


# -- issue 34: private conversations ------------------------------------------------------------


def test_the_private_header_keeps_what_the_conversation_writes_in_its_session(daemon, llm, proxy):
    llm.script += [openai_tools(("zcor_memory_write", {"title": "阿杰的秘密Vexlor", "content": "只在私聊里说"})),
                   openai_text("记住啦"), openai_text("嗯")]
    client = proxy.client()
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "说个秘密 Vexlor", "name": "ajie"}],
                                   extra_headers={"X-Zcor-Session": "st:dm-ajie", "X-Zcor-Private": "1"})
    (record,) = [r for r in history(daemon, tool="zcor_memory_write")["items"] if r.get("actor") == "model"]
    assert record["origin"] == {"session": "st:dm-ajie", "senders": ["openai:ajie"], "speaker": "openai:ajie",
                                "private": True}
    # another conversation mentioning the secret: the header and the prompt carry none of it
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Vexlor 是什么", "name": "bo"}],
                                   extra_headers={"X-Zcor-Session": "st:room9"})
    assert "只在私聊里说" not in json.dumps(llm.requests[-1]["json"], ensure_ascii=False)
    with daemon.client() as bot:
        assert "只在私聊里说" not in bot.context("st:room9")["text"]
        bot.recall("st:dm-ajie", "Vexlor", private=True)
        assert "只在私聊里说" in bot.context("st:dm-ajie")["text"]


def test_a_bad_private_header_is_refused_and_changes_nothing(daemon, llm, proxy):
    resp, data, conn = proxy.raw("POST", "/v1/chat/completions", json.dumps({"model": "m", "messages": ASK}).encode(),
                                 {"X-Zcor-Private": "maybe"})
    conn.close()
    assert resp.status == 400 and json.loads(data)["error"]["code"] == "invalid_header"
    assert json.loads(data)["error"]["param"] == "x-zcor-private"
    assert llm.requests == []


def test_the_private_option_makes_every_request_private(daemon, llm):
    from zcord.bot.proxy import build_parser, settings_from

    args = build_parser().parse_args(["--no-token", "--private"])
    assert settings_from(args).private is True
    assert settings_from(build_parser().parse_args(["--no-token"])).private is False


# -- issue 32: the layout keeps the provider's prompt cache ---------------------------------------


CARD = "You are Mimi, a cheerful cat-girl who lives in Hangzhou. " * 20
MID = "[Note: the scene moves to the kitchen.]"


def running(daemon, llm, protocol="openai", **kw) -> Running:
    return Running(daemon.sock, llm, protocol=protocol, **kw)


def canonical(req) -> str:
    """A request as the provider reads it, in order: tools, system, messages."""
    body = req["json"]
    return json.dumps([body.get("tools"), body.get("system"), body["messages"]], ensure_ascii=False)


def common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_two_turns_share_everything_before_the_header_and_a_mid_system_message_stays(daemon, llm, protocol):
    proxy = running(daemon, llm, protocol)
    text = openai_text if protocol == "openai" else anthropic_text
    try:
        seed(daemon)
        with daemon.client("operator") as op:
            op.call_tool("zcor_memory_write", {"title": "厨房里有猫粮", "content": "团子的猫粮放在厨房"})
        llm.script += [text("团子在睡觉"), text("去厨房看看")]
        client = proxy.client()
        head = {"X-Zcor-Session": "st:cache"}
        turn1 = [{"role": "system", "content": CARD}, {"role": "user", "content": "团子今天怎么样"}]
        out1 = client.chat.completions.create(model="m", messages=turn1, extra_headers=head)
        with daemon.client() as bot:
            header1 = bot.context("st:cache")["text"]
        turn2 = turn1 + [{"role": "assistant", "content": out1.choices[0].message.content},
                         {"role": "system", "content": MID},
                         {"role": "user", "content": "厨房里有什么"}]
        out2 = client.chat.completions.create(model="m", messages=turn2, extra_headers=head)
        r1, r2 = llm.requests
        sent = r2["json"]["messages"]
        if protocol == "openai":
            # system not hoisted: the card is the system text after zcor's prefix, the mid-conversation
            # system message stays where the client put it
            assert system_sent(r2).endswith(CARD) and MID not in system_sent(r2)
            assert [m["role"] for m in sent] == ["system", "user", "assistant", "system", "user"]
            assert sent[3] == {"role": "system", "content": MID}
            assert sent[1] == {"role": "user", "content": "团子今天怎么样"}  # no header in the history
            assert sent[4]["content"].endswith("\n\n厨房里有什么") and "[m" in sent[4]["content"]
            # turn 1's messages before its header are the same bytes in turn 2
            assert r1["json"]["messages"][0] == sent[0]
        else:
            system = r2["json"]["system"]
            assert system[-1]["text"] == CARD and all(MID not in b["text"] for b in system)
            assert sent[2]["role"] == "user" and json.dumps(sent[2]["content"], ensure_ascii=False).count(
                f"[system] {MID}") == 1  # in place, saying what it is
            assert sent[1]["role"] == "assistant"
            assert sent[3]["content"][0]["text"].startswith("<") or "[m" in sent[3]["content"][0]["text"]
            assert sent[3]["content"][-1] == {"type": "text", "text": "厨房里有什么"}
            marks = json.dumps(r2["json"], ensure_ascii=False).count('"cache_control"')
            assert 2 <= marks <= 4  # after the system text and on the last turn before the header
            assert "cache_control" in json.dumps(sent[2])  # the last stable turn carries one
            assert r1["json"]["system"] == system
        a, b = canonical(r1), canonical(r2)
        # everything before turn 1's header is the same bytes in turn 2 (Anthropic's breakpoint
        # moves to the newer last stable turn, which only adds a mark after turn 1's messages)
        header_at = a.index(json.dumps(header1, ensure_ascii=False)[1:41])
        assert common_prefix(a, b) >= header_at - (60 if protocol == "anthropic" else 0)
        assert common_prefix(a, b) > len(a) * 0.8
        for out in (out1, out2):
            assert "[m" not in out.model_dump_json()  # the header is never returned
    finally:
        proxy.close()


def test_the_header_goes_before_the_user_batch_even_with_a_trailing_system_message(daemon, llm, proxy):
    seed(daemon)
    llm.script.append(openai_text("嗯"))
    proxy.client().chat.completions.create(model="m", extra_headers={"X-Zcor-Session": "st:post"}, messages=[
        {"role": "system", "content": CARD}, {"role": "user", "content": "早"},
        {"role": "assistant", "content": "早呀"}, {"role": "user", "content": "团子呢"},
        {"role": "user", "content": "它饿了吗"}, {"role": "system", "content": "[Write Mimi's next reply.]"}])
    sent = llm.requests[0]["json"]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user", "user", "system"]
    assert sent[3]["content"].endswith("\n\n团子呢") and sent[3]["content"] != "团子呢"  # the header opens the batch
    assert sent[4] == {"role": "user", "content": "它饿了吗"}
    assert sent[5] == {"role": "system", "content": "[Write Mimi's next reply.]"}


def test_a_continue_keeps_the_answer_being_continued_last(daemon, llm, proxy):
    """A front end's "continue" ends with the model's own unfinished text: the header goes
    before the last user message, not after the text to continue."""
    seed(daemon)
    llm.script += [openai_text("团子在窗台上"), openai_text("……还在睡觉。")]
    ask = [{"role": "system", "content": CARD}, {"role": "user", "content": "团子呢"}]
    client = proxy.client()
    client.chat.completions.create(model="m", extra_headers={"X-Zcor-Session": "st:cont"}, messages=ask)
    client.chat.completions.create(model="m", extra_headers={"X-Zcor-Session": "st:cont"}, messages=ask + [
        {"role": "assistant", "content": "团子在窗台上"}])
    sent = llm.requests[1]["json"]["messages"]
    assert sent[:2] == llm.requests[0]["json"]["messages"]  # the same bytes as the turn it continues
    assert [m["role"] for m in sent] == ["system", "user", "assistant"]
    assert sent[1]["content"].endswith("\n\n团子呢") and "[m" in sent[1]["content"]
    assert sent[2] == {"role": "assistant", "content": "团子在窗台上"}


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_tool_round_changes_only_the_header_and_reads_the_prefix_once(daemon, llm, protocol):
    proxy = running(daemon, llm, protocol)
    text, tools = (openai_text, openai_tools) if protocol == "openai" else (anthropic_text, anthropic_tools)
    try:
        cat = seed(daemon)
        # the tool round rewrites the memory shown in the header and marks it important (which
        # changes zcord's prefix): this turn's second request keeps the prefix it started with
        llm.script += [tools(("zcor_memory_write", {"id": cat, "title": "阿杰的猫叫团子，三岁了", "content": "橘猫"}),
                             ("zcor_memory_important", {"id": cat, "important": True})),
                       text("记住了")]
        proxy.client().chat.completions.create(model="m", extra_headers={"X-Zcor-Session": "st:tools"},
                                               messages=[{"role": "system", "content": CARD},
                                                         {"role": "user", "content": "团子三岁了"}])
        first, second = llm.requests
        with daemon.client() as bot:
            assert "三岁了" in bot.prefix()  # zcord's prefix did change
        if protocol == "openai":
            m1, m2 = first["json"]["messages"], second["json"]["messages"]
            assert m2[0] == m1[0]  # the same system bytes: the prefix was read once
            assert m2[1]["content"] != m1[1]["content"] and "三岁了" in m2[1]["content"]  # header re-rendered
            assert m2[1]["content"].endswith("团子三岁了")
            assert [m["role"] for m in m2] == ["system", "user", "assistant", "tool", "tool"]
        else:
            assert second["json"]["system"] == first["json"]["system"]
            assert second["json"]["tools"] == first["json"]["tools"]
            m2 = second["json"]["messages"]
            assert "三岁了" in m2[0]["content"][0]["text"]
            assert m2[1]["role"] == "assistant" and m2[2]["content"][0]["type"] == "tool_result"
        assert first["json"]["tools"] == second["json"]["tools"]
    finally:
        proxy.close()


class Reports:
    """Records what the endpoint reports to zcord with `zcor/usage/report` (zcord may not know
    the method yet: the call goes out all the same and its failure is ignored)."""

    def __init__(self, proxy: Running):
        self.params: list[dict] = []
        client = proxy.server.daemon.client
        original = client.request

        async def request(method, params=None, **kw):
            if method == "zcor/usage/report":
                self.params.append(params)
            return await original(method, params, **kw)

        client.request = request


def test_usage_goes_back_to_the_client_and_to_zcord(daemon, llm, proxy):
    reports = Reports(proxy)
    usage = {"prompt_tokens": 1200, "completion_tokens": 7, "total_tokens": 1207,
             "prompt_tokens_details": {"cached_tokens": 1024}}
    llm.script.append({**openai_text("好"), "usage": usage})
    out = proxy.client().chat.completions.create(model="m", messages=ASK, extra_headers={"X-Zcor-Session": "st:u"})
    assert out.usage.prompt_tokens == 1200 and out.usage.completion_tokens == 7
    assert out.usage.prompt_tokens_details.cached_tokens == 1024
    for _ in range(100):
        if reports.params:
            break
        threading.Event().wait(0.05)
    (report,) = reports.params
    assert report["session"] == "st:u" and report["frontEnd"] == "endpoint"
    assert (report["inputTokens"], report["cachedTokens"], report["outputTokens"]) == (1200, 1024, 7)
    assert report["protocol"] == "openai" and report["model"] == "scripted"
    assert report["prefixChars"] > 0


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_streamed_usage_comes_as_a_last_chunk_when_asked(daemon, llm, protocol):
    proxy = running(daemon, llm, protocol)
    try:
        reports = Reports(proxy)
        if protocol == "openai":
            llm.script.append({**openai_text("好的"), "usage": {"prompt_tokens": 50, "completion_tokens": 2,
                                                               "prompt_tokens_details": {"cached_tokens": 32}}})
        else:
            llm.script.append({**anthropic_text("好的"), "usage": {"input_tokens": 10, "output_tokens": 2,
                                                                  "cache_read_input_tokens": 40}})
        chunks = list(proxy.client().chat.completions.create(model="m", messages=ASK, stream=True,
                                                             stream_options={"include_usage": True}))
        assert chunks[-1].choices == [] and chunks[-1].usage is not None
        assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (50, 2)
        assert chunks[-1].usage.prompt_tokens_details.cached_tokens in (32, 40)
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "好的"
        for _ in range(100):
            if reports.params:
                break
            threading.Event().wait(0.05)
        assert reports.params and reports.params[0]["inputTokens"] == 50
        # without include_usage there is no usage chunk
        llm.script.append(openai_text("嗯") if protocol == "openai" else anthropic_text("嗯"))
        chunks = list(proxy.client().chat.completions.create(model="m", messages=ASK, stream=True))
        assert all(c.choices for c in chunks)
    finally:
        proxy.close()


# -- issue 33: the endpoint against its network (each attack fails on the hand-written server) -----


def exchange(port: int, data: bytes, timeout: float = 10) -> bytes:
    """Send raw bytes, read until the server closes (or the timeout); what came back."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    return out


def head(path: str = "/v1/chat/completions", *lines: str, method: str = "POST") -> bytes:
    return (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "".join(line + "\r\n" for line in lines)
            + "\r\n").encode()


def test_no_body_is_read_and_no_100_continue_before_the_token(daemon, llm, proxy):
    """#11: 4 MiB bodies without a token were read whole (and 100 Continue sent) before the 401."""
    with socket.create_connection(("127.0.0.1", proxy.server.port), timeout=10) as s:
        s.sendall(head("/v1/chat/completions", f"Content-Length: {(4 << 20) - 1}", "Expect: 100-continue",
                       "Content-Type: application/json"))
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 401 ") and b"100 Continue" not in answer
        assert b"connection: close" in answer.lower()
        assert s.recv(100) == b""  # closed: nothing more is read from it
    assert llm.requests == []


def test_connections_are_capped_per_address_and_idle_ones_closed(daemon, llm):
    """#11: 4,100 idle keep-alive connections were all held open."""
    proxy = Running(daemon.sock, llm, max_connections_per_ip=3, idle_timeout=0.3, read_timeout=5)
    try:
        held = [socket.create_connection(("127.0.0.1", proxy.server.port), timeout=10) for _ in range(3)]
        for _ in range(100):
            if len(proxy.server.connections) == 3:
                break
            threading.Event().wait(0.02)
        refused = exchange(proxy.server.port, head("/v1/models", f"Authorization: Bearer {TOKEN}", method="GET"))
        assert refused.startswith(b"HTTP/1.1 503 ") and b"too_many_connections" in refused
        for s in held:
            s.close()
        # a kept-alive connection that stays idle is closed after --idle-timeout
        with socket.create_connection(("127.0.0.1", proxy.server.port), timeout=10) as s:
            for _ in range(100):  # the held ones are gone
                if len(proxy.server.connections) <= 1:
                    break
                threading.Event().wait(0.02)
            s.sendall(head("/v1/models", f"Authorization: Bearer {TOKEN}", method="GET"))
            got = b""
            while chunk := s.recv(65536):
                got += chunk
            assert got.startswith(b"HTTP/1.1 200 ")  # answered, then closed when idle
    finally:
        proxy.close()


def test_a_request_head_sent_a_byte_at_a_time_is_cut_off(daemon, llm):
    proxy = Running(daemon.sock, llm, read_timeout=0.5)
    try:
        with socket.create_connection(("127.0.0.1", proxy.server.port), timeout=10) as s:
            closed = False
            for byte in head("/v1/models", "X-Pad: " + "a" * 200, method="GET"):
                try:
                    s.sendall(bytes([byte]))
                except (BrokenPipeError, ConnectionResetError):
                    closed = True
                    break
                threading.Event().wait(0.02)
            if not closed:
                with contextlib.suppress(ConnectionResetError):
                    assert s.recv(100) == b""
    finally:
        proxy.close()


@pytest.mark.parametrize("lines,status", [
    (["Content-Length: 2", "Content-Length: 2"], b"400"),
    (["Content-Length: 2", "X-Long: a", " folded"], b"400"),
    (["Content-Length: 2", "Transfer-Encoding: chunked"], b"411"),
    (["Transfer-Encoding: gzip"], b"411"),
    (["Content-Length: +2"], b"400"),
], ids=["duplicate-cl", "obs-fold", "cl-te", "unknown-te", "odd-cl"])
def test_strict_framing(daemon, llm, proxy, lines, status):
    """Duplicate Content-Length and obs-fold were accepted; a request smuggled after such a
    head would be read differently by a front proxy."""
    smuggled = head("/v1/models", f"Authorization: Bearer {TOKEN}", method="GET")
    got = exchange(proxy.server.port, head("/v1/chat/completions", f"Authorization: Bearer {TOKEN}", *lines)
                   + b"{}" + smuggled)
    assert got.startswith(b"HTTP/1.1 " + status), got[:200]
    assert got.count(b"HTTP/1.1 ") == 1  # the connection is closed: nothing after the head is read
    assert llm.requests == []


def no_token(daemon, llm) -> Running:
    proxy = Running.__new__(Running)
    proxy.loop = asyncio.new_event_loop()
    proxy.crashes = []
    proxy.loop.set_exception_handler(lambda loop, context: proxy.crashes.append(context))
    proxy.thread = threading.Thread(target=proxy.loop.run_forever, daemon=True)
    proxy.thread.start()
    cfg = LlmConfig(base_url=llm.url, model="scripted", timeout_seconds=5)

    async def make() -> ProxyServer:
        server = ProxyServer(Settings(port=0, socket=str(daemon.sock), token=None), cfg, UPSTREAM_KEY)
        await server.start()
        return server

    proxy.server = asyncio.run_coroutine_threadsafe(make(), proxy.loop).result(30)
    proxy.url = f"http://127.0.0.1:{proxy.server.port}/v1"
    return proxy


@pytest.mark.parametrize("extra,status,code", [
    ({"Host": "evil.example"}, 403, "forbidden_host"),  # DNS rebinding: the page's own name
    ({"Origin": "https://evil.example"}, 403, "cross_origin"),
    ({"Origin": "null"}, 403, "cross_origin"),
    ({"Sec-Fetch-Site": "cross-site"}, 403, "cross_origin"),
    ({"Content-Type": "text/plain"}, 415, "unsupported_media_type"),  # a "simple" cross-site POST
    ({"Origin": "http://localhost:3000", "Sec-Fetch-Site": "same-site"}, 200, None),
    ({}, 200, None),
])
def test_without_a_token_only_this_machine_and_no_web_page(daemon, llm, extra, status, code):
    """#12: a web page POSTed text/plain cross-site and read the owner's memory back."""
    proxy = no_token(daemon, llm)
    try:
        llm.default = openai_text("好")
        body = json.dumps({"model": "m", "messages": ASK}).encode()
        conn = http.client.HTTPConnection("127.0.0.1", proxy.server.port, timeout=30)
        headers = {"Content-Type": "application/json", **extra}
        if "Host" in extra:
            conn.putrequest("POST", "/v1/chat/completions", skip_host=True)
            for k, v in {**headers, "Content-Length": str(len(body))}.items():
                conn.putheader(k, v)
            conn.endheaders(body)
        else:
            conn.request("POST", "/v1/chat/completions", body=body, headers=headers)
        resp = conn.getresponse()
        data = json.loads(resp.read())
        assert resp.status == status
        if code:
            assert data["error"]["code"] == code and llm.requests == []
        else:
            assert data["choices"][0]["message"]["content"] == "好"
        conn.close()
    finally:
        proxy.close()


SLASH_KEY = "sk-ab/cd/ef-0123456789-ghijklmnop-SECRET"


@pytest.mark.parametrize("echo", [
    lambda key: {"error": {"message": f"Incorrect API key provided: {key}"}},
    lambda key: {"error": {"message": "bad key " + json.dumps(key)}},  # JSON-escaped inside JSON (\/ after dumps)
    lambda key: {"error": {"message": "x" * 250 + key}},  # the key lands on the provider-text cut
], ids=["plain", "escaped", "cut"])
def test_the_upstream_key_is_never_echoed_in_any_form(daemon, llm, echo):
    """#13: 50 of 51 key characters came back at the 300-character cut; `\\/` escaped whole."""
    proxy = Running(daemon.sock, llm)
    proxy.server.fixed_key = SLASH_KEY
    try:
        llm.script.append(("status", 401, echo(SLASH_KEY)))
        resp, data, conn = proxy.raw("POST", "/v1/chat/completions", json.dumps({"model": "m", "messages": ASK,
                                                                                  "stop": ["x"]}).encode())
        conn.close()
        text = data.decode()
        assert resp.status == 502
        for n in range(len(SLASH_KEY) - 5):  # no 6 characters of the key, in any escaping
            for form in (SLASH_KEY, SLASH_KEY.replace("/", "\\/")):
                assert form[n:n + 6] not in text, form[n:n + 6]
        assert "Incorrect" not in text and "bad key" not in text
    finally:
        proxy.close()


def test_redact_finds_the_key_in_every_form():
    from zcord.bot.proxy import redact

    key = SLASH_KEY
    assert key not in redact(f"a {key} b", key)
    assert "ab\\/cd" not in redact("k=" + json.dumps(key).replace("/", "\\/"), key)
    assert redact("tail " + key[:9], key) == "tail [redacted]"
    assert redact(key[-4:] + " head", key) == "[redacted] head"
    assert redact("nothing here", key) == "nothing here"


@pytest.mark.parametrize("body", [
    '{"model": "\\ud800", "messages": [{"role": "user", "content": "hi"}]}',
    '{"model": "m", "messages": [{"role": "user", "content": "half an emoji \\ud83d"}]}',
    '{"model": "m", "messages": [{"role": "user", "content": "old \\udc00"}, {"role": "assistant", "content": "a"},'
    ' {"role": "user", "content": "new"}]}',
    '{"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": NaN}',
    '{"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 1e400}',
], ids=["model", "content", "old-message", "nan", "infinity"])
def test_lone_surrogates_and_odd_json_get_a_400_and_the_chat_goes_on(daemon, llm, proxy, body):
    """#14: a lone surrogate gave no answer at all (a traceback), and the chat stayed dead."""
    resp, data, conn = proxy.raw("POST", "/v1/chat/completions", body.encode())
    conn.close()
    assert resp.status == 400
    assert json.loads(data)["error"]["code"] in ("invalid_text", "invalid_json")
    assert llm.requests == [] and proxy.crashes == []
    llm.script.append(openai_text("还在"))
    assert proxy.client().chat.completions.create(model="m", messages=ASK).choices[0].message.content == "还在"


def test_a_client_that_goes_away_has_its_tool_calls_dropped(daemon, llm):
    """A dropped client's request went on: its model's tool calls were still run."""
    proxy = Running(daemon.sock, llm, timeout=60)  # the upstream's own deadline is not what ends it
    try:
        dropped(daemon, llm, proxy)
    finally:
        proxy.close()


def dropped(daemon, llm, proxy) -> None:
    release = threading.Event()
    llm.script.append(("wait", release, openai_tools(("zcor_memory_write", {"title": "不该写入", "content": "x"}))))
    llm.default = openai_text("好")
    body = json.dumps({"model": "m", "messages": ASK}).encode()
    with socket.create_connection(("127.0.0.1", proxy.server.port), timeout=10) as s:
        s.sendall(head("/v1/chat/completions", f"Authorization: Bearer {TOKEN}", f"Content-Length: {len(body)}")
                  + body)
        assert llm.arrived.wait(30)
    for _ in range(200):  # the endpoint notices and lets the request go
        if proxy.server._busy == 0:
            break
        threading.Event().wait(0.05)
    assert proxy.server._busy == 0
    release.set()
    threading.Event().wait(0.3)  # give a (wrongly) surviving request time to run the call
    assert not [r for r in history(daemon, tool="zcor_memory_write")["items"] if r.get("actor") == "model"]
    assert len(llm.requests) == 1


def test_a_sender_header_is_namespaced(daemon, llm, proxy):
    """A token holder naming `qq:42` in X-Zcor-Sender was taken for that QQ member."""
    llm.script += [openai_tools(("zcor_memory_write", {"title": "冒名", "content": "x"})), openai_text("好")]
    proxy.client().chat.completions.create(model="m", messages=[{"role": "user", "content": "记一下"}],
                                           extra_headers={"X-Zcor-Session": "st:ns", "X-Zcor-Sender": "qq:42"})
    (record,) = [r for r in history(daemon, tool="zcor_memory_write")["items"] if r.get("actor") == "model"]
    assert record["origin"]["senders"] == ["openai:qq:42"]


# -- issue 35: the endpoint follows zcord's config; /metrics ------------------------------------


def test_the_provider_setting_follows_zcords_config(daemon, llm):
    """Started before a model was set, it answered 503 until restarted and /v1/models kept the old answer."""
    proxy = Running.__new__(Running)
    proxy.loop = asyncio.new_event_loop()
    proxy.crashes = []
    proxy.thread = threading.Thread(target=proxy.loop.run_forever, daemon=True)
    proxy.thread.start()

    async def make() -> ProxyServer:
        server = ProxyServer(Settings(port=0, socket=str(daemon.sock), token=TOKEN), None, UPSTREAM_KEY)
        await server.start()
        return server

    proxy.server = asyncio.run_coroutine_threadsafe(make(), proxy.loop).result(30)
    proxy.url = f"http://127.0.0.1:{proxy.server.port}/v1"
    try:
        with daemon.client("operator") as op:
            op.config_set({"llm": {"baseUrl": llm.url, "model": ""}})
        client = proxy.client()
        with pytest.raises(openai.APIStatusError) as e:
            client.chat.completions.create(model="", messages=ASK)
        assert e.value.status_code == 503 and e.value.body["code"] == "provider_not_configured"
        # a client that names its model needs no llm.model
        llm.script.append(openai_text("一"))
        assert client.chat.completions.create(model="qwen-local", messages=ASK).choices[0].message.content == "一"
        assert llm.requests[-1]["json"]["model"] == "qwen-local"
        # a model set now works at once, and /v1/models says so
        with daemon.client("operator") as op:
            op.config_set({"llm": {"baseUrl": llm.url, "model": "scripted"}})
        assert [m.id for m in client.models.list()] == ["scripted"]
        llm.script.append(openai_text("二"))
        assert client.chat.completions.create(model="", messages=ASK).choices[0].message.content == "二"
        assert llm.requests[-1]["json"]["model"] == "scripted"
    finally:
        proxy.close()


def test_a_zcord_that_starts_later_is_used_once_it_answers(make_daemon, llm):
    later = make_daemon()
    proxy = Running(later.sock, llm)
    try:
        llm.default = openai_text("好")
        client = proxy.client()
        client.chat.completions.create(model="m", messages=ASK)
        assert "zcor_memory_write" not in declared_sent(llm.requests[0])  # answered without memory
        later.start()
        for _ in range(100):
            client.chat.completions.create(model="m", messages=ASK)
            if "zcor_memory_write" in declared_sent(llm.requests[-1]):
                break
            threading.Event().wait(0.1)
        assert "zcor_memory_write" in declared_sent(llm.requests[-1])
    finally:
        proxy.close()


def test_metrics_behind_the_token(daemon, llm, proxy):
    llm.script.append(openai_text("好"))
    proxy.client().chat.completions.create(model="m", messages=ASK)
    resp, data, conn = proxy.raw("GET", "/metrics", headers={"Authorization": "Bearer nope"})
    conn.close()
    assert resp.status == 401
    resp, data, conn = proxy.raw("GET", "/metrics")
    conn.close()
    text = data.decode()
    assert resp.status == 200 and resp.getheader("Content-Type").startswith("text/plain")
    assert 'zcor_endpoint_requests_total{route="/v1/chat/completions",status="200"} 1.0' in text
    assert 'zcor_endpoint_requests_total{route="/metrics",status="401"} 1.0' in text
    (open_now,) = [line for line in text.splitlines() if line.startswith("zcor_endpoint_open_connections ")]
    assert float(open_now.split()[1]) >= 1  # this one at least (the openai client may keep its own)
    assert 'zcor_endpoint_upstream_seconds_count{outcome="ok",protocol="openai"} 1.0' in text
