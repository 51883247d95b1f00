"""`zcor serve-openai`: an OpenAI-compatible endpoint that adds zcor's memory to any chat
front end (SillyTavern, Open WebUI, LobeChat, …).

A small asyncio HTTP/1.1 server (no framework: two routes, JSON bodies and server-sent
events) speaks Chat Completions (`POST /v1/chat/completions`, streamed or not, and
`GET /v1/models`). For each request it maps the conversation to a zcor session and each
user message to a sender key, delivers the new user messages to auto-recall, puts the
system prefix and the context header in front of the client's own system prompt, offers
zcor's declared tools next to the client's own, runs zcor's tool calls itself (with their
origin in `_meta`) and hands the client's tool calls back untouched, and forwards the
conversation to the deployment's provider (zcord's provider settings and key rules). When
zcord cannot be reached the answer still comes, without memory, and a warning is logged.

Every refusal is an OpenAI-style error object `{"error": {"message", "type", "code"}}`.
A request is checked whole before anything reaches zcord, so bad input changes nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import hmac
import ipaddress
import json
import logging
import os
import secrets
import signal
import stat
import sys
import time
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any

from ..core.config import Config, ConfigFile, LlmConfig, api_key_for
from ..core.errors import ProviderError
from ..retrieval.llm import DEFAULT_MAX_TOKENS, Message, Provider, Reply, ToolCall
from ..transport.client import AsyncClient, ClientError, RpcError, ToolError, tool_result
from ..transport.systemd import notify
from .bot import DEFAULT_MAX_ROUNDS, FRAME_TOOL

log = logging.getLogger("zcord.proxy")

DEFAULT_PORT = 8765
TOKEN_ENV = "ZCOR_PROXY_TOKEN"
TOKEN_CREDENTIAL = "proxy-token"
SESSION_HEADER = "x-zcor-session"
SENDER_HEADER = "x-zcor-sender"
ORIGIN_META = "zcor/origin"
ROLES = ("system", "developer", "user", "assistant", "tool")
MAX_HEADER_BYTES = 64 << 10
MAX_DISCARD_BYTES = 64 << 20
"""An over-long body up to this size is read and dropped after the 413, so the client can
read the answer; a longer one just has its connection closed."""
RESERVED_PREFIX = "zcor_"
MAX_MESSAGE_CHARS = 1_000_000
"""Longest message text: zcord's limit on one recall event's text."""
# sampling settings forwarded to the provider, by wire format (OpenAI name -> provider name)
OPTIONS = {"openai": {"temperature": "temperature", "top_p": "top_p", "stop": "stop", "seed": "seed",
                      "presence_penalty": "presence_penalty", "frequency_penalty": "frequency_penalty"},
           "anthropic": {"temperature": "temperature", "top_p": "top_p", "stop": "stop_sequences"}}


@dataclass
class Limits:
    """The endpoint's caps; each refusal names the cap it hit."""

    max_request_bytes: int = 4 << 20
    """Largest request body; a longer one is refused (413) before it is read."""
    read_timeout: float = 30.0
    """Seconds a connection has to send one whole request (headers and body), the most a
    kept-alive connection may stay idle, and the most a client may go without reading."""
    max_concurrent: int = 8
    """Chat completions answered at once; one more is refused at once with 429."""
    max_rounds: int = DEFAULT_MAX_ROUNDS
    """Model rounds per request while it calls zcor's tools."""
    memory_timeout: float = 10.0
    """Seconds to wait for zcord on one call before going on without memory."""


@dataclass
class Settings:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    socket: str | None = None
    token: str | None = None
    """The bearer token clients must send; None only with --no-token on a loopback host."""
    session_from: tuple[str, ...] = ("header", "hash")
    """Where the zcor session comes from, first that applies: header (X-Zcor-Session),
    user (the request's `user` field), hash (the first system and user messages)."""
    fixed_session: str | None = None
    default_sender: str = "openai:user"
    session_header: str = SESSION_HEADER
    """The header naming the conversation (lower case)."""
    sender_header: str = SENDER_HEADER
    """The header naming the person, for user messages without a name (lower case)."""
    limits: Limits = field(default_factory=Limits)


class ApiError(Exception):
    """A refusal sent as an OpenAI-style error object."""

    def __init__(self, status: int, message: str, code: str, type: str = "invalid_request_error",
                 param: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.code, self.type, self.param = status, message, code, type, param
        self.headers = headers or {}
        self.unread = 0
        """Body bytes the client is still sending: read and dropped after the answer, so the
        client sees the answer instead of a reset connection."""

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "code": self.code, "param": self.param}}


# -- the request, checked and in the neutral conversation format --------------------------------


@dataclass
class ChatRequest:
    model: str
    system: str
    messages: list[Message]
    new_user: list[tuple[str, str | None]]
    """(text, name) of the user messages after the last other message: the new batch."""
    first: list[str]
    """The texts of the first system and the first user message (for the session hash)."""
    tools: list[dict[str, Any]]
    """The client's own tools, in MCP form (name, description, inputSchema)."""
    stream: bool
    max_tokens: int
    options: dict[str, Any]
    user: str | None


def _key_problem(value: str) -> str | None:
    """Why a session or sender key from the client cannot be used, or None (zcord refuses
    control characters and blank keys in an origin)."""
    if not value.strip():
        return "is blank"
    if any(unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp") for ch in value):
        return "holds a control character or a line break"
    return None


def _text_of(content: Any, where: str) -> str:
    """A message's text: a string, null, or an array of text parts. Other parts (images,
    audio, files) are refused: the provider layer carries text only."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ApiError(400, f"{where}.content must be a string or an array of content parts, "
                            f"got {type(content).__name__}.", "invalid_content", param=f"{where}.content")
    texts = []
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind is None or not isinstance(kind, str):
            raise ApiError(400, f"{where}.content[{i}] is not a content part (an object with a type).",
                           "invalid_content", param=f"{where}.content[{i}]")
        else:
            raise ApiError(400, f"{where}.content[{i}] is a {kind!r} part; zcor's endpoint forwards text only "
                                f"(send the text parts, or use a provider connection without zcor for images "
                                f"and audio).", "unsupported_content", param=f"{where}.content[{i}]")
    return "\n".join(texts)


def _tool_calls(raw: Any, where: str) -> list[ToolCall]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ApiError(400, f"{where}.tool_calls must be an array.", "invalid_messages", param=f"{where}.tool_calls")
    calls = []
    for i, c in enumerate(raw):
        fn = c.get("function") if isinstance(c, dict) else None
        if not isinstance(fn, dict) or not isinstance(c.get("id"), str) or not isinstance(fn.get("name"), str):
            raise ApiError(400, f"{where}.tool_calls[{i}] needs an id and a function with a name.",
                           "invalid_messages", param=f"{where}.tool_calls[{i}]")
        args = fn.get("arguments", "{}")
        try:  # an object when it is one (Anthropic's wire format needs it), else the text as sent
            parsed = json.loads(args) if isinstance(args, str) else args
        except (ValueError, RecursionError):
            parsed = args
        calls.append(ToolCall(c["id"], fn["name"], parsed if isinstance(parsed, dict) else args))
    return calls


def _client_tools(raw: Any) -> list[dict[str, Any]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ApiError(400, "tools must be an array of {type: function, function: {name, parameters}}.",
                       "invalid_tools", param="tools")
    out = []
    for i, t in enumerate(raw):
        fn = t.get("function") if isinstance(t, dict) and t.get("type", "function") == "function" else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise ApiError(400, f"tools[{i}] must be {{type: function, function: {{name, parameters}}}}.",
                           "invalid_tools", param=f"tools[{i}]")
        if fn["name"].startswith(RESERVED_PREFIX) or fn["name"] == FRAME_TOOL:
            raise ApiError(400, f"tools[{i}] is named {fn['name']!r}: names starting with {RESERVED_PREFIX!r} are "
                                f"zcor's own tools; rename the client's tool.", "tool_name_reserved",
                           param=f"tools[{i}].function.name")
        params = fn.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(params, dict):
            raise ApiError(400, f"tools[{i}].function.parameters must be a JSON Schema object.", "invalid_tools",
                           param=f"tools[{i}].function.parameters")
        out.append({"name": fn["name"], "description": str(fn.get("description") or ""), "inputSchema": params})
    return out


def parse_chat(body: bytes, protocol: str) -> ChatRequest:
    """Check a Chat Completions request whole; ApiError names the first thing wrong."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        raise ApiError(400, "The request body is not valid JSON.", "invalid_json") from None
    if not isinstance(data, dict):
        raise ApiError(400, "The request body must be a JSON object.", "invalid_json")
    model = data.get("model", "")
    if not isinstance(model, str):
        raise ApiError(400, "model must be a string.", "invalid_model", param="model")
    raw = data.get("messages")
    if not isinstance(raw, list) or not raw:
        raise ApiError(400, "messages must be a non-empty array.", "invalid_messages", param="messages")
    if data.get("n", 1) != 1:
        raise ApiError(400, "n must be 1: zcor's endpoint answers with one choice.", "unsupported_parameter",
                       param="n")
    system: list[str] = []
    messages: list[Message] = []
    first: dict[str, str] = {}
    new_user: list[tuple[str, str | None]] = []
    for i, m in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise ApiError(400, f"{where} must be an object.", "invalid_messages", param=where)
        role = m.get("role")
        if role not in ROLES:
            raise ApiError(400, f"{where}.role {str(role)[:40]!r} is not one of {', '.join(ROLES)}.",
                           "unknown_role", param=f"{where}.role")
        text = _text_of(m.get("content"), where)
        if len(text) > MAX_MESSAGE_CHARS:
            raise ApiError(400, f"{where} has {len(text):,} characters; the most one message may have is "
                                f"{MAX_MESSAGE_CHARS:,}.", "message_too_long", param=f"{where}.content")
        name = m.get("name") if isinstance(m.get("name"), str) and m.get("name") else None
        if name is not None and _key_problem(name):
            raise ApiError(400, f"{where}.name {_key_problem(name)}; it names the sender.", "invalid_name",
                           param=f"{where}.name")
        if role in ("system", "developer"):
            system.append(text)
            first.setdefault("system", text)
            continue
        if role == "user":
            first.setdefault("user", text)
            new_user.append((text, name))
            messages.append(Message("user", text))
            continue
        new_user = []
        if role == "assistant":
            messages.append(Message("assistant", text, tool_calls=_tool_calls(m.get("tool_calls"), where)))
        else:
            if not isinstance(m.get("tool_call_id"), str):
                raise ApiError(400, f"{where} (a tool result) needs tool_call_id.", "invalid_messages",
                               param=f"{where}.tool_call_id")
            messages.append(Message("tool", text, tool_call_id=m["tool_call_id"]))
    stream = data.get("stream", False)
    if not isinstance(stream, bool):
        raise ApiError(400, "stream must be true or false.", "invalid_parameter", param="stream")
    max_tokens = data.get("max_completion_tokens", data.get("max_tokens"))
    if max_tokens is None:
        max_tokens = DEFAULT_MAX_TOKENS
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise ApiError(400, "max_tokens must be a positive integer.", "invalid_parameter", param="max_tokens")
    options = {wire: data[name] for name, wire in OPTIONS[protocol].items() if data.get(name) is not None}
    if protocol == "anthropic" and isinstance(options.get("stop_sequences"), str):
        options["stop_sequences"] = [options["stop_sequences"]]
    user = data.get("user") if isinstance(data.get("user"), str) and data.get("user") else None
    return ChatRequest(model=model, system="\n\n".join(s for s in system if s), messages=messages,
                       new_user=new_user, first=[first.get("system", ""), first.get("user", "")],
                       tools=_client_tools(data.get("tools")), stream=stream, max_tokens=max_tokens,
                       options=options, user=user)


# -- zcord: prefix, recall, context, tools -------------------------------------------------------


@dataclass
class Memory:
    """What zcord adds to one request; `available` False when it could not be reached."""

    available: bool
    system: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)


class Daemon:
    """The proxy's one bot connection to zcord, (re)made on demand."""

    RETRY_SECONDS = 1.0

    def __init__(self, socket_path: str | None, timeout: float):
        self.socket_path = socket_path
        self.timeout = timeout
        self.client: AsyncClient | None = None
        self._last_try = -1e9
        self._lock = asyncio.Lock()
        self._tools: list[dict[str, Any]] | None = None

    async def connected(self) -> AsyncClient | None:
        """The client when zcord answers now; None (at once) while it is away."""
        if self.client is not None:
            return self.client if self.client.connected else None
        async with self._lock:
            if self.client is None and time.monotonic() - self._last_try >= self.RETRY_SECONDS:
                self._last_try = time.monotonic()
                try:
                    client = AsyncClient(self.socket_path, role="bot", timeout=self.timeout,
                                         client_name="zcor-serve-openai")
                    # the tool list is kept until zcord says it changed (MCP's list_changed) or
                    # the connection is made again; the prefix and context are asked each time
                    client.on_notification("notifications/tools/list_changed", lambda _: self._forget_tools())
                    client.on_connection_change(lambda _: self._forget_tools())
                    self.client = await client.connect()
                except (ClientError, OSError) as e:
                    log.warning("zcord cannot be reached (%s); answering without memory", e)
        return self.client

    def _forget_tools(self) -> None:
        self._tools = None

    async def _tool_list(self, client: AsyncClient) -> list[dict[str, Any]]:
        if self._tools is None:
            self._tools = await client.list_tools()
        return self._tools

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()

    async def memory(self, session: str, events: list[dict[str, Any]]) -> Memory:
        client = await self.connected()
        if client is None:
            log.warning("zcord is not connected; session %s is answered without memory", session)
            return Memory(False)

        async def recalled() -> dict[str, Any]:
            if events:
                await client.recall(session, events)
            return await client.context(session)

        try:
            context, prefix, tools = await asyncio.gather(recalled(), client.prefix(), self._tool_list(client))
        except ClientError as e:
            log.warning("zcord failed during recall (%s); session %s is answered without memory", e, session)
            return Memory(False)
        header = context.get("text") or ""
        return Memory(True, prefix + ("\n\n" + header if header else ""), tools)

    async def call(self, call: ToolCall, declared: set[str], origin: dict[str, Any]) -> Message:
        """Run one of the model's calls to zcor's tools; the tool-result message."""
        def error(code: str, message: str) -> Message:
            return Message("tool", json.dumps({"error": {"code": code, "message": message}}, ensure_ascii=False),
                           tool_call_id=call.id, is_error=True)

        if call.name not in declared:
            return error("unknown_tool", "external_event_frame is synthesized by the system; never call it."
                         if call.name == FRAME_TOOL else
                         f"Tool {call.name!r} is not declared in this request; call only the tools you were given.")
        if not isinstance(call.arguments, dict):
            return error("invalid_argument", f"arguments of {call.name} must be a JSON object, "
                                             f"got {str(call.arguments)[:100]!r}")
        client = await self.connected()
        if client is None:
            return error("unavailable", "zcor's memory cannot be reached right now.")
        try:
            result = tool_result(await client.request("tools/call", {
                "name": call.name, "arguments": call.arguments, "_meta": {ORIGIN_META: origin}}))
        except ToolError as e:
            return Message("tool", json.dumps({"error": e.to_dict()}, ensure_ascii=False), tool_call_id=call.id,
                           is_error=True)
        except ClientError as e:
            log.warning("zcord failed during %s (%s)", call.name, e)
            return error("unavailable", str(e))
        return Message("tool", json.dumps(result, ensure_ascii=False), tool_call_id=call.id)


# -- HTTP/1.1 ------------------------------------------------------------------------------------


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


async def read_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, limits: Limits) -> Request | None:
    """One request off the connection; None when the client closed it between requests."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if not e.partial.strip():
            return None
        raise ApiError(400, "The request ended inside its headers.", "bad_request") from None
    except asyncio.LimitOverrunError:
        raise ApiError(431, f"The request headers are larger than {MAX_HEADER_BYTES >> 10} KiB.",
                       "headers_too_large") from None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise ApiError(400, "The request line is not HTTP/1.x.", "bad_request")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, sep, value = line.partition(":")
            if not sep:
                raise ApiError(400, f"A header line has no colon: {line[:60]!r}.", "bad_request")
            headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise ApiError(411, "Send the body with a Content-Length (chunked request bodies are not accepted).",
                       "length_required")
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise ApiError(400, "Content-Length is not a number.", "bad_request") from None
    if length < 0:
        raise ApiError(400, "Content-Length is negative.", "bad_request")
    if length > limits.max_request_bytes:
        error = ApiError(413, f"The request body is {length} bytes; the limit is {limits.max_request_bytes} "
                              f"(serve-openai --max-request-bytes).", "request_too_large")
        error.unread = length
        raise error
    if length and headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    try:
        body = await reader.readexactly(length) if length else b""
    except asyncio.IncompleteReadError:
        raise ApiError(400, "The request body is shorter than its Content-Length.", "bad_request") from None
    return Request(parts[0], parts[1].split("?", 1)[0], headers, body)


async def _discard(reader: asyncio.StreamReader, n: int) -> None:
    while n > 0:
        data = await reader.read(min(n, 1 << 16))
        if not data:
            return
        n -= len(data)


def _head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}"] + [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _json_response(status: int, obj: Any, keep_alive: bool, extra: dict[str, str] | None = None) -> bytes:
    data = json.dumps(obj, ensure_ascii=False).encode()
    headers = {"Content-Type": "application/json", "Content-Length": str(len(data)),
               "Connection": "keep-alive" if keep_alive else "close", **(extra or {})}
    return _head(status, headers) + data


class SlowReader(ConnectionError):
    """The client did not take the answer within the timeout; its connection is closed."""


async def drain(writer: asyncio.StreamWriter, timeout: float) -> None:
    """Wait until the client has taken what was written, at most `timeout` seconds (a client
    that stops reading would otherwise hold its completion slot for ever)."""
    try:
        async with asyncio.timeout(timeout):
            await writer.drain()
    except TimeoutError:
        raise SlowReader(f"the client read nothing for {timeout:g} s") from None


class EventStream:
    """A server-sent event response, chunked so the connection can be kept; the headers go
    out with the first event, so an error before any text is still a plain HTTP error."""

    def __init__(self, writer: asyncio.StreamWriter, opening: Any, timeout: float):
        self.writer = writer
        self.opening = opening
        self.timeout = timeout
        self.started = False

    @staticmethod
    def _event(obj: Any) -> bytes:
        data = b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj, ensure_ascii=False).encode()) + \
            b"\n\n"
        return b"%x\r\n%s\r\n" % (len(data), data)

    async def send(self, obj: Any) -> None:
        out = b""
        if not self.started:  # the headers, the opening event and this one in one write
            self.started = True
            out = _head(200, {"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                              "Transfer-Encoding": "chunked", "Connection": "keep-alive"}) + \
                self._event(self.opening)
        self.writer.write(out + self._event(obj))
        await drain(self.writer, self.timeout)

    async def end(self) -> None:
        """[DONE] and the end of the chunked body (always after at least one event)."""
        self.writer.write(self._event(b"[DONE]") + b"0\r\n\r\n")
        await drain(self.writer, self.timeout)


# -- the endpoint ---------------------------------------------------------------------------------


def _upstream_error(e: ProviderError, key: str | None) -> ApiError:
    message = e.message if hasattr(e, "message") else str(e)
    if key:
        message = message.replace(key, "[redacted]")
    if " within " in message and ("did not answer" in message or "did not finish" in message):
        return ApiError(504, message, "upstream_timeout", type="upstream_error")
    return ApiError(502, message, "upstream_error", type="upstream_error")


class ProxyServer:
    """The endpoint: holds the settings, the provider and the connection to zcord."""

    def __init__(self, settings: Settings, llm: LlmConfig, api_key: str | None):
        self.settings = settings
        self.limits = settings.limits
        self.llm = llm
        self.api_key = api_key
        import httpx  # one pooled client for every upstream request (keeps connections open)

        self._http = httpx.AsyncClient()
        # the pooled client goes to each achat() call; Provider's own client is the sync one
        self.provider = Provider(llm, api_key) if llm.model else None
        self.daemon = Daemon(settings.socket, self.limits.memory_timeout)
        self._busy = 0
        self._tasks: set[asyncio.Task] = set()
        self._server: asyncio.AbstractServer | None = None
        self.port = settings.port

    # -- lifetime --

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._connection, self.settings.host, self.settings.port,
                                                  limit=MAX_HEADER_BYTES)
        self.port = self._server.sockets[0].getsockname()[1]
        await self.daemon.connected()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                await asyncio.wait(list(self._tasks), timeout=5)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
        await self.daemon.close()
        await self._http.aclose()

    # -- connections --

    async def _send(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(data)
        await drain(writer, self.limits.read_timeout)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        try:
            while True:
                try:
                    async with asyncio.timeout(self.limits.read_timeout):
                        req = await read_request(reader, writer, self.limits)
                except TimeoutError:
                    return  # idle, or too slow to send one request: closed without an answer
                except ApiError as e:
                    await self._send(writer, _json_response(e.status, e.body(), False))
                    if 0 < e.unread <= MAX_DISCARD_BYTES:
                        with contextlib.suppress(TimeoutError, asyncio.IncompleteReadError):
                            async with asyncio.timeout(self.limits.read_timeout):
                                await _discard(reader, e.unread)
                    return
                if req is None:
                    return
                keep = req.headers.get("connection", "").lower() != "close"
                try:
                    await self._route(req, writer, keep)
                except ApiError as e:
                    await self._send(writer, _json_response(e.status, e.body(), keep, e.headers))
                if not keep:
                    return
        except SlowReader:
            writer.transport.abort()  # drop what it did not take instead of flushing it at close
        except (ConnectionError, OSError):
            pass  # the client went away
        except asyncio.CancelledError:
            pass  # the server is closing
        finally:
            writer.close()

    def _authorize(self, req: Request) -> None:
        token = self.settings.token
        if token is None:
            return
        scheme, _, given = req.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
            raise ApiError(401, "Missing or wrong bearer token: send 'Authorization: Bearer <token>' with the token "
                                "zcor serve-openai was started with.", "invalid_api_key")

    async def _route(self, req: Request, writer: asyncio.StreamWriter, keep: bool) -> None:
        routes = {"/v1/models": "GET", "/v1/chat/completions": "POST"}
        if req.path not in routes:
            raise ApiError(404, f"No route {req.path[:100]!r}: this endpoint serves /v1/chat/completions and "
                                f"/v1/models.", "not_found")
        if req.method != routes[req.path]:
            raise ApiError(405, f"{req.path} takes {routes[req.path]}, not {req.method[:10]}.", "method_not_allowed",
                           headers={"Allow": routes[req.path]})
        self._authorize(req)
        if req.path == "/v1/models":
            name = self.llm.model or "zcor"
            await self._send(writer, _json_response(200, {"object": "list", "data": [
                {"id": name, "object": "model", "created": 0, "owned_by": "zcor"}]}, keep))
            return
        if self._busy >= self.limits.max_concurrent:
            raise ApiError(429, f"{self._busy} requests are being answered, the most at once "
                                f"(serve-openai --max-concurrent); try again shortly.", "too_many_requests",
                           type="rate_limit_error", headers={"Retry-After": "1"})
        self._busy += 1
        try:
            await self._complete(req, writer, keep)
        finally:
            self._busy -= 1

    # -- one completion --

    def session_of(self, chat: ChatRequest, headers: dict[str, str]) -> str:
        if self.settings.fixed_session:
            return self.settings.fixed_session
        for source in self.settings.session_from:
            if source == "header" and headers.get(self.settings.session_header):
                return headers[self.settings.session_header][:200]
            if source == "user" and chat.user:
                return f"openai:user:{chat.user[:180]}"
            if source == "hash":
                digest = hashlib.sha256(json.dumps(chat.first, ensure_ascii=False).encode()).hexdigest()
                return f"openai:{digest[:16]}"
        return "openai:default"

    def sender_of(self, name: str | None, chat: ChatRequest, headers: dict[str, str]) -> str:
        if name:
            return f"openai:{name[:180]}"
        if headers.get(self.settings.sender_header):
            return headers[self.settings.sender_header][:200]
        if chat.user:
            return f"openai:{chat.user[:180]}"
        return self.settings.default_sender

    async def _complete(self, req: Request, writer: asyncio.StreamWriter, keep: bool) -> None:
        if self.provider is None:
            raise ApiError(503, "No LLM provider is configured for zcor: set llm.model and llm.baseUrl in the "
                                "Memory's config.json, or ZCOR_LLM_MODEL and ZCOR_LLM_BASE_URL.",
                           "provider_not_configured", type="server_error")
        chat = parse_chat(req.body, self.llm.protocol)
        for header in (self.settings.session_header, self.settings.sender_header):
            if header in req.headers and _key_problem(req.headers[header]):
                raise ApiError(400, f"The header {header} {_key_problem(req.headers[header])}.", "invalid_header",
                               param=header)
        session = self.session_of(chat, req.headers)
        now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        events = [{"text": text, "origin": "external", "senderKey": self.sender_of(name, chat, req.headers),
                   "source": session, "ts": now[:-2] + ":" + now[-2:]} for text, name in chat.new_user if text]
        origin = {"session": session, "senders": list(dict.fromkeys(e["senderKey"] for e in events))[-50:]}
        memory = await self.daemon.memory(session, events)
        declared = {t["name"] for t in memory.tools}
        client_tools = {t["name"] for t in chat.tools}
        created = int(time.time())
        cid = "chatcmpl-" + secrets.token_hex(12)
        model = chat.model or self.llm.model

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        stream = EventStream(writer, chunk({"role": "assistant", "content": ""}), self.limits.read_timeout) if chat.stream else None

        transcript = list(chat.messages)
        system = memory.system + ("\n\n" + chat.system if memory.system and chat.system else chat.system)
        try:
            for _ in range(self.limits.max_rounds):
                reply = await self._ask(system, transcript, memory.tools + chat.tools, chat, stream, chunk)
                ours = [c for c in reply.tool_calls if c.name not in client_tools]
                theirs = [c for c in reply.tool_calls if c.name in client_tools]
                results = [await self.daemon.call(c, declared, origin) for c in ours]
                if theirs or not ours:
                    await self._answer(writer, keep, stream, chunk, reply, theirs,
                                       {"id": cid, "created": created, "model": model})
                    return
                transcript.append(Message("assistant", reply.text, tool_calls=ours))
                transcript += results
                fresh = await self.daemon.memory(session, []) if memory.available else memory
                if fresh.available:  # the context after the tools ran (kept as it was if zcord went away)
                    memory = fresh
                    system = memory.system + ("\n\n" + chat.system if memory.system and chat.system
                                              else chat.system)
            raise ApiError(502, f"The model kept calling zcor's tools for {self.limits.max_rounds} rounds without "
                                f"answering; stopped.", "too_many_tool_rounds", type="upstream_error")
        except ApiError as e:
            if stream is None or not stream.started:
                raise
            await stream.send(e.body())  # mid-stream: the error as the last event
            await stream.end()

    async def _ask(self, system: str, transcript: list[Message], tools: list[dict[str, Any]],
                   chat: ChatRequest, stream: EventStream | None, chunk) -> Reply:
        """One provider request on the event loop; streamed text is passed on as it comes."""
        assert self.provider is not None

        async def piece(text: str) -> None:
            if stream is not None:
                await stream.send(chunk({"content": text}))

        try:
            return await self.provider.achat(system, transcript, tools, chat.max_tokens,
                                             piece if stream is not None else None, chat.options, self._http)
        except ProviderError as e:
            raise _upstream_error(e, self.api_key) from None

    async def _answer(self, writer, keep, stream, chunk, reply: Reply, calls: list[ToolCall],
                      meta: dict[str, Any]) -> None:
        wire_calls = [{"id": c.id, "type": "function", "function": {
            "name": c.name, "arguments": c.arguments if isinstance(c.arguments, str)
            else json.dumps(c.arguments, ensure_ascii=False)}} for c in calls]
        finish = "tool_calls" if calls else ("length" if reply.stop_reason in ("length", "max_tokens") else "stop")
        if stream is not None:
            if wire_calls:
                await stream.send(chunk({"tool_calls": [{"index": i, **c} for i, c in enumerate(wire_calls)]}))
            await stream.send(chunk({}, finish))
            await stream.end()
            return
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or (None if calls else "")}
        if wire_calls:
            message["tool_calls"] = wire_calls
        body: dict[str, Any] = {"id": meta["id"], "object": "chat.completion", "created": meta["created"],
                                "model": meta["model"],
                                "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
        usage = reply.raw.get("usage") if isinstance(reply.raw, dict) else None
        if isinstance(usage, dict) and "prompt_tokens" in usage:
            body["usage"] = usage
        await self._send(writer, _json_response(200, body, keep))


# -- the command --------------------------------------------------------------------------------


def read_token(token_file: str | None, env: dict[str, str] | None = None) -> str | None:
    """The bearer token: --token-file (owner-only), else the systemd credential proxy-token,
    else $ZCOR_PROXY_TOKEN. ValueError with the reason when a file is unfit."""
    environ: Mapping[str, str] = os.environ if env is None else env
    path: Path | None = Path(token_file) if token_file else None
    if path is None and environ.get("CREDENTIALS_DIRECTORY"):
        cred = Path(environ["CREDENTIALS_DIRECTORY"]) / TOKEN_CREDENTIAL
        path = cred if cred.is_file() else None
    if path is not None:
        try:
            st = path.stat()
            text = path.read_text().strip()
        except OSError as e:
            raise ValueError(f"the token file {path} cannot be read: {e.strerror}") from None
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO) and token_file:
            raise ValueError(f"the token file {path} may be read by others (mode {stat.S_IMODE(st.st_mode):o}); "
                             f"chmod 600 it")
        if not text:
            raise ValueError(f"the token file {path} is empty")
        return text
    token = (environ.get(TOKEN_ENV) or "").strip()
    return token or None


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def provider_config(socket_path: str | None) -> LlmConfig:
    """zcord's provider setting with this process's ZCOR_LLM_* on top (as `zcor chat` does)."""
    llm = LlmConfig()
    try:
        async with AsyncClient(socket_path, role="bot", timeout=5, reconnect=False,
                               client_name="zcor-serve-openai") as c:
            llm = LlmConfig.model_validate(await c.request("zcor/llm"))
    except (ClientError, RpcError, ValueError) as e:
        log.warning("the provider setting could not be read from zcord (%s); using the environment", e)
    return ConfigFile._with_env(Config(llm=llm)).llm


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="zcor serve-openai", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--socket", help="zcord socket (default: $ZCOR_SOCKET or the daemon's default)")
    ap.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 picks one)")
    ap.add_argument("--token-file", metavar="F",
                    help="file holding the bearer token (owner-only); default: the systemd credential "
                         f"{TOKEN_CREDENTIAL}, else ${TOKEN_ENV}")
    ap.add_argument("--no-token", action="store_true",
                    help="serve without a token (only on a loopback address)")
    ap.add_argument("--session-from", default="header,hash",
                    help="where a conversation's zcor session comes from, first that applies: header "
                         "(X-Zcor-Session), user (the request's user field), hash (the first system and user "
                         "messages); default header,hash")
    ap.add_argument("--session-header", default="X-Zcor-Session", metavar="NAME",
                    help="the header that names the conversation (default X-Zcor-Session)")
    ap.add_argument("--sender-header", default="X-Zcor-Sender", metavar="NAME",
                    help="the header that names the person (default X-Zcor-Sender)")
    ap.add_argument("--session", help="one fixed zcor session for every request")
    ap.add_argument("--sender", default="openai:user", help="sender key of user messages with no name "
                                                            "(default openai:user)")
    ap.add_argument("--max-request-bytes", type=int, default=Limits.max_request_bytes)
    ap.add_argument("--max-concurrent", type=int, default=Limits.max_concurrent)
    ap.add_argument("--read-timeout", type=float, default=Limits.read_timeout,
                    help="seconds a connection has to send one request (default 30)")
    ap.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return ap


def settings_from(args: argparse.Namespace, env: dict[str, str] | None = None) -> Settings:
    sources = tuple(s.strip() for s in args.session_from.split(",") if s.strip())
    bad = [s for s in sources if s not in ("header", "user", "hash")]
    if bad or not sources:
        raise ValueError(f"--session-from takes header, user and hash, comma-separated; got {args.session_from!r}")
    token = None if args.no_token else read_token(args.token_file, env)
    if args.no_token and not _is_loopback(args.host):
        raise ValueError(f"--no-token is allowed only on a loopback address, not {args.host}")
    if token is None and not args.no_token:
        raise ValueError(f"no bearer token: give --token-file, the systemd credential {TOKEN_CREDENTIAL} or "
                         f"${TOKEN_ENV} (or --no-token on a loopback address)")
    if args.max_request_bytes < 1024 or args.max_concurrent < 1 or args.read_timeout <= 0:
        raise ValueError("--max-request-bytes must be ≥ 1024, --max-concurrent ≥ 1 and --read-timeout > 0")
    return Settings(host=args.host, port=args.port, socket=args.socket, token=token, session_from=sources,
                    fixed_session=args.session, default_sender=args.sender,
                    session_header=args.session_header.lower(), sender_header=args.sender_header.lower(),
                    limits=Limits(max_request_bytes=args.max_request_bytes, read_timeout=args.read_timeout,
                                  max_concurrent=args.max_concurrent))


async def serve(settings: Settings) -> None:
    llm = await provider_config(settings.socket)
    server = ProxyServer(settings, llm, api_key_for(llm.base_url))
    await server.start()
    if not llm.model:
        log.warning("no LLM provider is configured; chat completions are refused until one is (restart after)")
    print(f"zcor serve-openai: listening on http://{settings.host}:{server.port}/v1", file=sys.stderr, flush=True)
    notify("READY=1", f"STATUS=listening on {settings.host}:{server.port}")
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
        log.info("stopping")
        notify("STOPPING=1")
    finally:
        await server.close()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = settings_from(args)
    except ValueError as e:
        print(f"zcor serve-openai: {e}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(settings))
    except KeyboardInterrupt:
        return 0
    except OSError as e:
        print(f"zcor serve-openai: cannot listen on {settings.host}:{settings.port}: {e.strerror}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
