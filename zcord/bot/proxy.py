"""`zcor serve-openai`: an OpenAI-compatible endpoint that adds zcor's memory to any chat
front end (SillyTavern, Open WebUI, LobeChat, …).

It speaks Chat Completions (`POST /v1/chat/completions`, streamed or not, `GET /v1/models`)
and serves `GET /metrics` (Prometheus text) behind the same bearer token. HTTP is uvicorn's
(h11) under a small ASGI app: the token, the Host/Origin checks and the framing are checked
from the request head before a byte of body is read or `100 Continue` is sent, and a guard
on each connection caps connections (in all and per client address), the time a request may
take to arrive and the time a connection may idle.

For each request it maps the conversation to a zcor session and each user message to a
sender key, delivers the new user messages to auto-recall and lays the request out with
zcord.bot.prompt.assemble so that the provider's prompt cache keeps everything but the
newest turn: zcor's tools then the client's, zcor's system prefix then the client's leading
system messages, the client's history where it was (a system message in mid-conversation
stays there), the context header just before the newest user batch. zcor's tool calls are
run here (with their origin in `_meta`); the client's are handed back untouched. The
provider setting follows zcord's config (read with each request); when zcord cannot be
reached the answer still comes, without memory, and a warning is logged.

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
import math
import os
import re
import secrets
import signal
import socket
import stat
import sys
import time
import unicodedata
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from ..core.config import Config, ConfigFile, LlmConfig, api_key_for
from ..core.errors import (
    ProviderBadAnswer,
    ProviderError,
    ProviderMidAnswer,
    ProviderStatus,
    ProviderTimeout,
    ProviderTooLarge,
    ProviderUnreachable,
)
from ..core.origin import batch_senders
from ..retrieval.llm import DEFAULT_MAX_TOKENS, Message, Prompt, Provider, Reply, ToolCall, Usage
from ..transport.client import AsyncClient, ClientError, RpcError, ToolError
from ..transport.systemd import notify
from .blocked import filter_blocked
from .core import (
    DEFAULT_MAX_ROUNDS,
    FRAME_TOOL,
    Ask,
    Done,
    Failed,
    Outcome,
    Ran,
    Refresh,
    Report,
    Run,
    TooManyRounds,
    Turn,
    Unreachable,
)
from .prompt import batch_start

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

DEFAULT_PORT = 8765
TOKEN_ENV = "ZCOR_PROXY_TOKEN"
TOKEN_CREDENTIAL = "proxy-token"
SESSION_HEADER = "x-zcor-session"
SENDER_HEADER = "x-zcor-sender"
PRIVATE_HEADER = "x-zcor-private"
"""`1` (or true/yes): the request is a one-to-one conversation; `0` (false/no) or absent: not
(zcord.service.scope: what a private conversation creates stays in its session)."""
PRIVATE_VALUES = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}
SENDER_NAMESPACE = "openai:"
"""Put in front of every sender key a client names (a message's `name`, the sender header,
the request's `user`), so a token holder cannot pass for a key of another front end
(`qq:42`) whose trust and relationship zcord keeps."""
ROLES = ("system", "developer", "user", "assistant", "tool")
MAX_HEADER_BYTES = 64 << 10
MAX_DISCARD_BYTES = 64 << 20
"""An authenticated client's over-long body up to this size is read and dropped after the
413 (the connection is kept), so the client can read the answer; past it the connection is
closed after the answer."""
RESERVED_PREFIX = "zcor_"
MAX_MESSAGE_CHARS = 1_000_000
"""Longest message text: zcord's limit on one recall event's text."""
# sampling settings forwarded to the provider, by wire format (OpenAI name -> provider name)
OPTIONS = {"openai": {"temperature": "temperature", "top_p": "top_p", "stop": "stop", "seed": "seed",
                      "presence_penalty": "presence_penalty", "frequency_penalty": "frequency_penalty"},
           "anthropic": {"temperature": "temperature", "top_p": "top_p", "stop": "stop_sequences"}}
FRONT_END = "endpoint"
"""The front end's name in `zcor/usage/report`."""


@dataclass
class Limits:
    """The endpoint's caps; each refusal names the cap it hit."""

    max_request_bytes: int = 4 << 20
    """Largest request body; a longer one is refused (413) before it is read."""
    read_timeout: float = 30.0
    """Seconds a connection has to send one whole request (headers and body), and the most a
    client may go without reading what it is sent."""
    idle_timeout: float = 5.0
    """Seconds a kept-alive connection may wait for its next request."""
    max_concurrent: int = 8
    """Chat completions answered at once; one more is refused at once with 429."""
    max_connections: int = 256
    """Open connections in all; one more is answered 503 and closed."""
    max_connections_per_ip: int = 32
    """Open connections from one client address; one more is answered 503 and closed."""
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
    private: bool = False
    """Every request is a one-to-one conversation (--private); else the X-Zcor-Private header says."""
    limits: Limits = field(default_factory=Limits)


class ApiError(Exception):
    """A refusal sent as an OpenAI-style error object."""

    def __init__(self, status: int, message: str, code: str, type: str = "invalid_request_error",
                 param: str | None = None, headers: dict[str, str] | None = None, close: bool = False):
        super().__init__(message)
        self.status, self.message, self.code, self.type, self.param = status, message, code, type, param
        self.headers = headers or {}
        self.close = close
        """Close the connection after the answer (a refusal before the token was checked, or
        a body too long to drop): nothing more is read from it."""

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "code": self.code, "param": self.param}}


# -- the request, checked and in the neutral conversation format --------------------------------


@dataclass
class ChatRequest:
    model: str
    system: str
    """The client's leading system (and developer) messages, joined: they follow zcor's prefix
    in the system text. A system message after the first other message stays in `messages`."""
    messages: list[Message]
    new_user: list[tuple[str, str | None]]
    """(text, name) of the user messages after the last other message: the new batch."""
    first: list[str]
    """The texts of the first system and the first user message (for the session hash)."""
    tools: list[dict[str, Any]]
    """The client's own tools, in MCP form (name, description, inputSchema)."""
    stream: bool
    include_usage: bool
    """stream_options.include_usage: a last chunk with the usage, before [DONE]."""
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


def _odd_value(value: Any, where: str) -> str | None:
    """Where a decoded JSON value holds what cannot be sent on (a lone surrogate, half of an
    emoji's pair, cannot be encoded as UTF-8; NaN and infinities are not JSON), or None."""
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if any(0xD800 <= ord(ch) <= 0xDFFF for ch in item):
                return f"{path} holds a lone surrogate (\\ud800-\\udfff without its pair), which is not text"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{path} is not a finite number"
        elif isinstance(item, dict):
            for k, v in item.items():
                if any(0xD800 <= ord(ch) <= 0xDFFF for ch in k):
                    return f"a key in {path} holds a lone surrogate, which is not text"
                stack.append((v, f"{path}.{k[:40]}" if path else k[:40]))
        elif isinstance(item, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(item))
    return None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


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
        data = json.loads(body, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise ApiError(400, "The request body is not valid JSON (UTF-8, no NaN or Infinity).",
                       "invalid_json") from None
    if not isinstance(data, dict):
        raise ApiError(400, "The request body must be a JSON object.", "invalid_json")
    odd = _odd_value(data, "")
    if odd:
        raise ApiError(400, f"The request cannot be used: {odd}.", "invalid_text", param=odd.split(" ")[0])
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
            first.setdefault("system", text)
            if not messages:  # a leading system message: part of the stable system text
                system.append(text)
            else:  # in mid-conversation: it stays where the client put it
                messages.append(Message("system", text))
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
    stream_options = data.get("stream_options")
    if stream_options is not None and not isinstance(stream_options, dict):
        raise ApiError(400, "stream_options must be an object.", "invalid_parameter", param="stream_options")
    include_usage = bool(stream and stream_options and stream_options.get("include_usage") is True)
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
                       tools=_client_tools(data.get("tools")), stream=stream, include_usage=include_usage,
                       max_tokens=max_tokens, options=options, user=user)


def header_at(messages: list[Message]) -> int:
    """Where the context header goes in the client's messages: before the newest user batch
    (prompt.batch_start), looking past system messages the client put after it (a front
    end's "post-history instructions"). When the client's messages end with an answer (a
    "continue" that has the model go on from its own text), before the last user messages
    all the same, so the answer being continued stays last; at the end when there are none."""
    end = len(messages)
    while end > 0 and messages[end - 1].role == "system":
        end -= 1
    at = batch_start(messages[:end])
    if at < end:
        return at
    users = [i for i in range(end) if messages[i].role == "user"]
    if not users:
        return len(messages)
    at = users[-1]
    while at > 0 and messages[at - 1].role == "user":
        at -= 1
    return at


# -- what never reaches the client: the upstream key and the provider's own words ---------------


def _key_forms(key: str) -> list[str]:
    """The key as it may appear in a provider's text: as is, JSON-escaped (with `\\/` too),
    URL-encoded."""
    escaped = json.dumps(key)[1:-1]
    forms = {key, escaped, escaped.replace("/", "\\/"), quote(key, safe="")}
    return sorted((f for f in forms if f), key=len, reverse=True)


def redact(text: str, key: str | None, window: int = 6) -> str:
    """`text` with every trace of `key` replaced by [redacted]: whole, escaped, and any piece
    of it at least `window` characters long (a cut key), and a piece shorter than that at
    the very end or start of the text (where a cut lands)."""
    if not key or not text:
        return text
    spans: list[tuple[int, int]] = []
    for form in _key_forms(key):
        n = min(window, len(form))
        grams = {form[i:i + n] for i in range(len(form) - n + 1)}
        i = 0
        while i <= len(text) - n:
            if text[i:i + n] in grams:
                j = i + n
                while j < len(text) and text[i:j + 1] in form:
                    j += 1
                spans.append((i, j))
                i = j
            else:
                i += 1
        for cut in range(min(len(form), n) - 1, 2, -1):  # the text ends with the key's start
            if text.endswith(form[:cut]):
                spans.append((len(text) - cut, len(text)))
                break
        for cut in range(min(len(form), n) - 1, 2, -1):  # or starts with the key's end
            if text.startswith(form[-cut:]):
                spans.append((0, cut))
                break
    if not spans:
        return text
    out, pos = [], 0
    for s, e in sorted(spans):
        if e <= pos:
            continue
        out.append(text[pos:max(s, pos)] + "[redacted]")
        pos = e
    return "".join(out) + text[pos:]


_STATUS_HINTS = {400: "it refused the request", 401: "it refused the API key (check zcor's llm key)",
                 403: "it refused the API key (check zcor's llm key)", 404: "the model or the URL is unknown there",
                 413: "the request is too large for it", 429: "it is rate-limiting; try again shortly"}


def _upstream_error(e: ProviderError, key: str | None) -> ApiError:
    """The client's answer for a provider failure, chosen by the failure's type: a short
    sentence zcor wrote, never the provider's own text (which may quote the key, a prompt or
    anything else)."""
    if isinstance(e, ProviderTimeout):
        return ApiError(504, f"The LLM provider did not answer within {e.seconds:g} s (llm.timeoutSeconds).",
                        "upstream_timeout", type="upstream_error")
    if isinstance(e, ProviderStatus):
        hint = _STATUS_HINTS.get(e.status, "it failed" if e.status >= 500 else "it refused the request")
        vetted = f"The LLM provider answered HTTP {e.status}: {hint}."
    elif isinstance(e, ProviderUnreachable):
        vetted = "The LLM provider could not be reached (is it running, and is llm.baseUrl right?)."
    elif isinstance(e, ProviderTooLarge):
        vetted = redact(e.message, key)
    elif isinstance(e, ProviderMidAnswer):
        vetted = "The LLM provider failed mid-answer."
    elif isinstance(e, ProviderBadAnswer):
        vetted = "The LLM provider's answer is not a Chat Completions or Messages reply."
    else:
        vetted = "The LLM provider failed."
    return ApiError(502, vetted, "upstream_error", type="upstream_error")


def without_blocked(chat: ChatRequest, events: list[dict[str, Any]],
                    blocked: list[str]) -> tuple[list[Message], bool]:
    """The client's messages without the newest batch's messages from blocked senders, and
    whether that left none of the batch: the batch's user messages are the last ones
    (chat.new_user, in order); each one's event (same order, empty texts having none) says
    whose it is."""
    if not blocked:
        return chat.messages, False
    kept = {id(e) for e in filter_blocked(events, blocked, log)}
    texts = [text for text, _ in chat.new_user]
    users = [i for i, m in enumerate(chat.messages) if m.role == "user"][-len(texts):] if texts else []
    senders = iter(events)
    drop = set()
    for i, text in zip(users, texts, strict=True):
        if text:
            event = next(senders)
            if id(event) not in kept:
                drop.add(i)
    return [m for i, m in enumerate(chat.messages) if i not in drop], bool(users) and drop == set(users)


# -- zcord: prefix, recall, context, tools, the provider setting, usage ------------------------


@dataclass
class Memory:
    """What zcord adds to one request; `available` False when it could not be reached."""

    available: bool
    prefix: str = ""
    header: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    """The batch's senders zcord names as blocked (`zcor/recall`'s `blocked`)."""


class Daemon:
    """The endpoint's one bot connection to zcord, (re)made on demand: a zcord that starts
    after the endpoint, or comes back, is used from the next request on."""

    RETRY_SECONDS = 1.0

    def __init__(self, socket_path: str | None, timeout: float):
        self.socket_path = socket_path
        self.timeout = timeout
        self.client: AsyncClient | None = None
        self._last_try = -1e9
        self._lock = asyncio.Lock()
        self._tools: list[dict[str, Any]] | None = None
        self._background: set[asyncio.Task[None]] = set()

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
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.wait(list(self._background), timeout=2)
        if self.client is not None:
            await self.client.close()

    async def memory(self, session: str, events: list[dict[str, Any]], private: bool = False) -> Memory:
        """Deliver the batch to auto-recall; the prefix, the header and the tools for it."""
        client = await self.connected()
        if client is None:
            log.warning("zcord is not connected; session %s is answered without memory", session)
            return Memory(False)

        blocked: list[str] = []

        async def recalled() -> Mapping[str, Any]:
            if events:
                answer = await client.recall_batch(session, events, private)
                blocked.extend(b for b in answer.get("blocked") or () if isinstance(b, str))
            return await client.context(session)

        try:
            context, prefix, tools = await asyncio.gather(recalled(), client.prefix(), self._tool_list(client))
        except ClientError as e:
            log.warning("zcord failed during recall (%s); session %s is answered without memory", e, session)
            return Memory(False)
        return Memory(True, prefix, context.get("text") or "", tools, blocked)

    async def header(self, session: str) -> str | None:
        """The context header now (after a tool round); None when zcord cannot say."""
        client = await self.connected()
        if client is None:
            log.warning("zcord is not connected; session %s keeps the header it had", session)
            return None
        try:
            return (await client.context(session)).get("text") or ""
        except ClientError as e:
            log.warning("zcord failed to give the context header (%s); session %s keeps the one it had", e, session)
            return None

    async def llm(self) -> dict[str, Any] | None:
        """zcord's provider setting (`zcor/llm`) now; None when zcord cannot be asked."""
        client = await self.connected()
        if client is None:
            return None
        try:
            value = await client.request("zcor/llm", timeout=self.timeout)
        except (ClientError, RpcError) as e:
            log.warning("the provider setting could not be read from zcord (%s)", e)
            return None
        return value if isinstance(value, dict) else None

    def report_usage(self, params: dict[str, Any] | None) -> None:
        """Tell zcord what one provider request cost (`zcor/usage/report`), in the background;
        a zcord without the method, or a failure, costs the conversation nothing."""
        if params is None or self.client is None or not self.client.connected:
            return
        client = self.client

        async def report() -> None:
            with contextlib.suppress(ClientError, RpcError, ToolError):
                await client.request("zcor/usage/report", params, timeout=self.timeout)

        task = asyncio.get_running_loop().create_task(report())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def metrics_text(self) -> str:
        """zcord's own metrics (`zcor/metrics`), "" when it cannot give them."""
        client = await self.connected()
        if client is None:
            return ""
        try:
            value = await client.request("zcor/metrics", {}, timeout=self.timeout)
        except (ClientError, RpcError, ToolError):
            return ""
        text = value.get("text") if isinstance(value, dict) else None
        return text if isinstance(text, str) else ""

    async def run(self, call: ToolCall, origin: dict[str, Any]) -> Outcome:
        """Run one of the model's calls to zcor's tools (that passed core.refusal), with its
        origin in `_meta`."""
        client = await self.connected()
        if client is None:
            return Unreachable("zcor's memory cannot be reached right now.")
        try:
            return Ran(await client.call_tool(call.name, call.arguments, origin=origin))
        except ToolError as e:
            return Failed(e.to_dict())
        except ClientError as e:
            log.warning("zcord failed during %s (%s)", call.name, e)
            return Unreachable(str(e))


# -- HTTP: uvicorn (h11) with a guard on each connection ---------------------------------------


_HEAD_END = re.compile(rb"\r?\n\r?\n")


def framing_problem(head: bytes) -> tuple[int, str, str] | None:
    """What is wrong with a request head's framing, as (status, code, message), or None (also
    while the head is not complete). h11 already refuses conflicting Content-Lengths and
    transfer codings other than chunked; this refuses what it lets through and a front
    proxy may read otherwise: a repeated Content-Length, a folded header line (obs-fold),
    and any Transfer-Encoding (request bodies are sent with a Content-Length here)."""
    head = head.lstrip(b"\r\n")
    end = _HEAD_END.search(head)
    if end is None:
        return None
    lengths = 0
    for line in head[:end.start()].split(b"\n")[1:]:
        line = line.rstrip(b"\r")
        if line[:1] in (b" ", b"\t"):
            return 400, "bad_request", "A header line is folded (starts with a space or tab); send it on one line."
        name, _, value = line.partition(b":")
        name = name.lower()
        if name == b"content-length":
            lengths += 1
            if not value.strip().isdigit():
                return 400, "bad_request", "Content-Length is not a number."
        elif name == b"transfer-encoding":
            return 411, "length_required", ("Send the body with a Content-Length (Transfer-Encoding is not accepted "
                                            "on requests).")
    if lengths > 1:
        return 400, "bad_request", "The request has more than one Content-Length."
    return None


def _raw_response(status: int, code: str, message: str) -> bytes:
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "code": code,
                                 "param": None}}).encode()
    return (f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body


def guarded_protocol(owner: ProxyServer) -> type:
    """uvicorn's h11 protocol with the endpoint's guard: connection caps (in all and per
    client address), a deadline for each request head to arrive (uvicorn has none: a client
    sending a byte now and then would hold the connection for ever), and the framing check.
    The body's own deadline is the app's (ProxyServer._read_body)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Guarded(H11Protocol):
        _counted = False
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            limits = owner.limits
            ip = self.client[0] if self.client else "?"
            self._ip = ip
            if len(owner.connections) >= limits.max_connections or owner.per_ip[ip] >= limits.max_connections_per_ip:
                which = ("--max-connections-per-ip" if owner.per_ip[ip] >= limits.max_connections_per_ip
                         else "--max-connections")
                owner.metrics.refused.inc()
                transport.write(_raw_response(503, "too_many_connections",
                                              f"Too many open connections (serve-openai {which}); close idle "
                                              f"ones or try again shortly."))
                transport.close()
                return
            self._counted = True
            owner.per_ip[ip] += 1
            owner.connections[self.client] = self
            owner.metrics.connections.inc()
            self._arm(limits.read_timeout)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._counted:
                self._counted = False
                owner.per_ip[self._ip] -= 1
                if owner.per_ip[self._ip] <= 0:
                    del owner.per_ip[self._ip]
                owner.connections.pop(self.client, None)
                owner.metrics.connections.dec()
            self._disarm()
            super().connection_lost(exc)

        def _arm(self, seconds: float) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(seconds, self._expired)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expired(self) -> None:
            # too slow to send a request, or to take an answer that was left in the write
            # buffer (a closing transport would wait for that client for ever): dropped
            self._deadline = None
            self.transport.abort()

        def handle_events(self) -> None:
            if self.conn.their_state is h11_idle():
                problem = framing_problem(self.conn.trailing_data[0])
                if problem is not None:
                    self._disarm()
                    self.transport.write(_raw_response(*problem))
                    self.transport.close()
                    return
            cycle = self.cycle
            super().handle_events()
            if self.cycle is not cycle:  # a request head arrived: the app bounds its body
                self._disarm()

        def on_response_complete(self) -> None:
            cycle = self.cycle
            super().on_response_complete()
            # uvicorn's keep-alive timer bounds the idle wait; this one a next request sent a
            # byte at a time, and an answer left unread in the write buffer (not when a
            # pipelined request has started already)
            if not self.transport.is_closing() and self.cycle is cycle:
                self._arm(owner.limits.read_timeout)

        def abort(self) -> None:
            """Drop the connection and what was not sent yet (a client that does not read)."""
            self.transport.abort()

    return Guarded


def h11_idle() -> Any:
    import h11

    return h11.IDLE


class SlowReader(ConnectionError):
    """The client did not take the answer within the timeout; its connection is dropped."""


Send = Callable[[dict[str, Any]], Awaitable[None]]


class EventStream:
    """A server-sent event response; the headers go out with the first event, so an error
    before any text is still a plain HTTP error."""

    def __init__(self, send: Send, opening: Any):
        self.send_raw = send
        self.opening = opening
        self.started = False

    @staticmethod
    def _event(obj: Any) -> bytes:
        return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj, ensure_ascii=False).encode()) + \
            b"\n\n"

    async def send(self, obj: Any) -> None:
        out = b""
        if not self.started:  # the headers, the opening event and this one together
            self.started = True
            await self.send_raw({"type": "http.response.start", "status": 200, "headers": [
                (b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
            out = self._event(self.opening)
        await self.send_raw({"type": "http.response.body", "body": out + self._event(obj), "more_body": True})

    async def end(self) -> None:
        """[DONE] and the end of the body (always after at least one event)."""
        await self.send_raw({"type": "http.response.body", "body": self._event(b"[DONE]"), "more_body": False})


async def send_json(send: Send, status: int, obj: Any, headers: dict[str, str] | None = None,
                    close: bool = False) -> None:
    data = json.dumps(obj, ensure_ascii=False).encode()
    await send_bytes(send, status, data, "application/json", headers, close)


async def send_bytes(send: Send, status: int, data: bytes, content_type: str,
                     headers: dict[str, str] | None = None, close: bool = False) -> None:
    head = [(b"content-type", content_type.encode()), (b"content-length", str(len(data)).encode())]
    head += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    if close:
        head.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": data, "more_body": False})


class Metrics:
    """The endpoint's own counters (prometheus_client, a registry of its own): requests by
    route and status, open and refused connections, upstream latency."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        self.requests = Counter("zcor_endpoint_requests", "HTTP requests answered, by route and status",
                                ["route", "status"], registry=self.registry)
        self.connections = Gauge("zcor_endpoint_open_connections", "Open client connections",
                                 registry=self.registry)
        self.refused = Counter("zcor_endpoint_refused_connections",
                               "Connections refused at the connection caps", registry=self.registry)
        self.upstream = Histogram("zcor_endpoint_upstream_seconds", "Seconds per provider request (to the "
                                  "whole answer)", ["protocol", "outcome"], registry=self.registry,
                                  buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120))
        self.tokens = Counter("zcor_endpoint_tokens", "Tokens the provider reported, by kind",
                              ["kind"], registry=self.registry)

    def text(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


# -- the endpoint ---------------------------------------------------------------------------------


ROUTES = {"/v1/models": "GET", "/v1/chat/completions": "POST", "/metrics": "GET"}
SINGLE = ("authorization", "host", "origin", "content-type", "content-length", "sec-fetch-site")
"""Headers a request may carry once: two of them would leave open which one counts."""


def _loopback_name(host: str | None) -> bool:
    return host is not None and _is_loopback(host.lower().strip("[]"))


def _wire_usage(u: Usage) -> dict[str, Any]:
    """A Usage in Chat Completions form (what the client's own accounting reads)."""
    return {"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens,
            "total_tokens": u.input_tokens + u.output_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cached_tokens}}


@dataclass
class Exchange:
    """One request as the app sees it: what was answered so far (for the metrics and for
    telling a finished answer from a client that went away)."""

    route: str = "other"
    status: int = 0
    complete: bool = False


class ClientGone(ConnectionError):
    """The client closed its connection before its request was answered."""


class ProxyServer:
    """The endpoint, an ASGI app served by uvicorn: holds the settings, the provider setting
    and the connection to zcord.

    Args:
        llm: a fixed provider setting (tests, benchmarks); None follows zcord's config,
            read with each request, with this process's ZCOR_LLM_* on top.
        api_key: a fixed upstream key; None takes the deployment's (api_key_for).
    """

    def __init__(self, settings: Settings, llm: LlmConfig | None = None, api_key: str | None = None):
        self.settings = settings
        self.limits = settings.limits
        self.fixed_llm = llm
        self.fixed_key = api_key
        self.llm = llm or ConfigFile._with_env(Config()).llm
        """The provider setting last seen (zcord's when it could be read)."""
        import httpx  # one pooled client for every upstream request (keeps connections open)

        self._http: httpx.AsyncClient = httpx.AsyncClient()
        self.daemon = Daemon(settings.socket, self.limits.memory_timeout)
        self._busy = 0
        self.connections: dict[Any, Any] = {}
        """The open connections (guarded uvicorn protocols) by client address."""
        self.per_ip: Counter[str] = Counter()
        self.metrics = Metrics()
        self._server: Any = None
        self.port = settings.port
        self.completion = Completion(self)

    # -- lifetime --

    async def start(self) -> None:
        import uvicorn

        config = uvicorn.Config(self, http=guarded_protocol(self), ws="none", lifespan="off", log_config=None,
                                access_log=False, proxy_headers=False, server_header=False, date_header=False,
                                timeout_keep_alive=max(1, math.ceil(self.limits.idle_timeout)),
                                h11_max_incomplete_event_size=MAX_HEADER_BYTES, timeout_graceful_shutdown=3)
        config.load()
        server = uvicorn.Server(config)
        server.lifespan = config.lifespan_class(config)
        family, kind, proto, _, address = socket.getaddrinfo(self.settings.host, self.settings.port,
                                                             type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.setblocking(False)
            await server.startup(sockets=[sock])
        except BaseException:
            sock.close()
            raise
        self._server, self._sock = server, sock
        self.port = sock.getsockname()[1]
        await self.daemon.connected()

    async def close(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            try:
                await asyncio.wait_for(self._server.shutdown(), 10)
            except TimeoutError:
                for conn in list(self.connections.values()):
                    conn.abort()
            self._sock.close()
        await self.daemon.close()
        await self._http.aclose()

    # -- ASGI --

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                       send: Send) -> None:
        if scope["type"] != "http":
            return
        ex = Exchange()
        conn = self.connections.get(tuple(scope["client"])) if scope.get("client") else None

        async def out(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                ex.status = message["status"]
            elif not message.get("more_body"):
                ex.complete = True
            try:
                async with asyncio.timeout(self.limits.read_timeout):
                    await send(message)
            except TimeoutError:
                if conn is not None:
                    conn.abort()  # drop what it did not take instead of flushing it at close
                raise SlowReader(f"the client read nothing for {self.limits.read_timeout:g} s") from None

        try:
            await self._handle(scope, receive, out, ex)
        except ApiError as e:
            if not ex.status:
                with contextlib.suppress(SlowReader, ConnectionError):
                    await send_json(out, e.status, e.body(), e.headers, e.close)
        except (SlowReader, ConnectionError):
            pass  # the client went away or stopped reading
        except Exception:
            log.exception("the endpoint failed on %s %s", scope.get("method"), ex.route)
            if not ex.status:
                with contextlib.suppress(SlowReader, ConnectionError):
                    await send_json(out, 500, ApiError(500, "zcor's endpoint failed on this request; the log "
                                                            "says why.", "internal_error", "server_error").body(),
                                    close=True)
        finally:
            self.metrics.requests.labels(ex.route, str(ex.status or 499)).inc()

    async def _handle(self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                      out: Send, ex: Exchange) -> None:
        headers: dict[str, str] = {}
        repeated = set()
        for raw_name, raw_value in scope["headers"]:
            name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
            if name in headers:
                repeated.add(name)
            headers[name] = value
        path = scope.get("raw_path", scope["path"].encode()).decode("latin-1").split("?", 1)[0]
        method = scope["method"]
        ex.route = path if path in ROUTES else "other"
        if "transfer-encoding" in headers:  # the guard refuses it first; kept for any other server
            raise ApiError(411, "Send the body with a Content-Length (Transfer-Encoding is not accepted on "
                                "requests).", "length_required", close=True)
        twice = repeated & {*SINGLE, self.settings.session_header, self.settings.sender_header, PRIVATE_HEADER}
        if twice:
            raise ApiError(400, f"The header {sorted(twice)[0]} is sent more than once.", "bad_request", close=True)
        if self.settings.token is None:
            self._local_only(headers)
        self._authorize(headers)
        if path not in ROUTES:
            raise ApiError(404, f"No route {path[:100]!r}: this endpoint serves /v1/chat/completions, /v1/models "
                                f"and /metrics.", "not_found")
        if method != ROUTES[path]:
            raise ApiError(405, f"{path} takes {ROUTES[path]}, not {method[:10]}.", "method_not_allowed",
                           headers={"Allow": ROUTES[path]})
        if path == "/v1/models":
            llm = await self._setting()
            await send_json(out, 200, {"object": "list", "data": [
                {"id": llm.model or "zcor", "object": "model", "created": 0, "owned_by": "zcor"}]})
        elif path == "/metrics":
            await self._metrics(out)
        else:
            await self._chat(receive, out, headers, ex)

    def _local_only(self, headers: dict[str, str]) -> None:
        """Without a token only this machine's own clients may call, and no web page: a page
        can make a browser POST to 127.0.0.1 (a text/plain "simple" request with no
        preflight) or reach it under its own name after DNS rebinding."""
        host = headers.get("host")
        if not host or not _loopback_name(urlsplit("//" + host).hostname):
            raise ApiError(403, f"Host {str(host)[:80]!r} is not this machine: without a token (--no-token) only "
                                f"localhost, 127.0.0.1 or [::1] is answered.", "forbidden_host", close=True)
        origin = headers.get("origin")
        if origin is not None and not _loopback_name(urlsplit(origin).hostname):
            raise ApiError(403, "A web page from another origin may not call this endpoint without a token.",
                           "cross_origin", close=True)
        if headers.get("sec-fetch-site", "").lower() == "cross-site":
            raise ApiError(403, "A cross-site browser request may not call this endpoint without a token.",
                           "cross_origin", close=True)

    def _authorize(self, headers: dict[str, str]) -> None:
        token = self.settings.token
        if token is None:
            return
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
            raise ApiError(401, "Missing or wrong bearer token: send 'Authorization: Bearer <token>' with the token "
                                "zcor serve-openai was started with.", "invalid_api_key", close=True)

    async def _metrics(self, out: Send) -> None:
        from prometheus_client import CONTENT_TYPE_LATEST

        zcord = await self.daemon.metrics_text()
        if zcord and not zcord.endswith("\n"):
            zcord += "\n"
        await send_bytes(out, 200, zcord.encode() + self.metrics.text(), CONTENT_TYPE_LATEST)

    async def _setting(self) -> LlmConfig:
        """The provider setting for this request: zcord's now (so a change applies at once),
        the last one seen while zcord is away."""
        if self.fixed_llm is not None:
            return self.fixed_llm
        raw = await self.daemon.llm()
        if raw is not None:
            try:
                self.llm = ConfigFile._with_env(Config(llm=LlmConfig.model_validate(raw))).llm
            except ValueError as e:
                log.warning("zcord's provider setting cannot be used (%s); keeping the last one", e)
        return self.llm

    async def _read_body(self, receive: Callable[[], Awaitable[dict[str, Any]]]) -> bytes:
        """The body, read only now that the request is authorized (the first receive() is when
        uvicorn sends `100 Continue`), within the read timeout and the size cap."""
        body = bytearray()
        try:
            async with asyncio.timeout(self.limits.read_timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        raise ClientGone("the client went away while sending its request")
                    body += message.get("body", b"")
                    if len(body) > self.limits.max_request_bytes:
                        raise ApiError(413, f"The request body is larger than {self.limits.max_request_bytes} bytes "
                                            f"(serve-openai --max-request-bytes).", "request_too_large", close=True)
                    if not message.get("more_body"):
                        return bytes(body)
        except TimeoutError:
            raise ApiError(408, f"The request body did not arrive within {self.limits.read_timeout:g} s.",
                           "request_timeout", close=True) from None

    async def _chat(self, receive: Callable[[], Awaitable[dict[str, Any]]], out: Send, headers: dict[str, str],
                    ex: Exchange) -> None:
        if self.settings.token is None:
            kind = headers.get("content-type", "").split(";")[0].strip().lower()
            if kind != "application/json":
                raise ApiError(415, f"Content-Type must be application/json, not {kind[:60]!r} (without a token "
                                    f"a browser's form or text/plain post is refused).", "unsupported_media_type",
                               close=True)
        length = int(headers.get("content-length") or 0)
        if length > self.limits.max_request_bytes:
            raise ApiError(413, f"The request body is {length} bytes; the limit is {self.limits.max_request_bytes} "
                                f"(serve-openai --max-request-bytes).", "request_too_large",
                           close=length > MAX_DISCARD_BYTES)
        if self._busy >= self.limits.max_concurrent:
            raise ApiError(429, f"{self._busy} requests are being answered, the most at once "
                                f"(serve-openai --max-concurrent); try again shortly.", "too_many_requests",
                           type="rate_limit_error", headers={"Retry-After": "1"})
        self._busy += 1
        try:
            body = await self._read_body(receive)
            # answered while watching the connection: a client that goes away has its request
            # dropped (the upstream request cancelled, zcor's tool calls not run)
            work = asyncio.ensure_future(self.completion.complete(body, headers, out))
            gone = asyncio.ensure_future(receive())
            try:
                await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
                if not work.done() and not ex.complete:
                    work.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await work
                    log.info("a client went away before its answer; its request was dropped")
                    return
                await work
            finally:
                gone.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await gone
        finally:
            self._busy -= 1

    # -- one completion --

    def session_of(self, chat: ChatRequest, headers: Mapping[str, str]) -> str:
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

    def private_of(self, headers: Mapping[str, str]) -> bool:
        """Whether the request is a one-to-one conversation: --private, else X-Zcor-Private."""
        value = headers.get(PRIVATE_HEADER)
        if value is None:
            return self.settings.private
        got = PRIVATE_VALUES.get(value.strip().lower())
        if got is None:
            raise ApiError(400, f"The header {PRIVATE_HEADER} must be 1 or 0 (true/false, yes/no), not "
                                f"{value[:40]!r}.", "invalid_header", param=PRIVATE_HEADER)
        return got or self.settings.private

    def sender_of(self, name: str | None, chat: ChatRequest, headers: Mapping[str, str]) -> str:
        """The sender key of a user message: what the client names, always in the endpoint's
        namespace (SENDER_NAMESPACE); the operator's --sender when it names nobody."""
        given = name or headers.get(self.settings.sender_header) or chat.user
        return SENDER_NAMESPACE + given[:180] if given else self.settings.default_sender


class Completion:
    """The completion driver of one endpoint: one chat request answered, from the parsed
    body to the reply (the asyncio driver of zcord.bot.core); the ProxyServer does the HTTP
    around it (routes, guards, the body's deadline) and holds what this reads."""

    def __init__(self, owner: ProxyServer):
        self.owner = owner

    async def complete(self, body: bytes, headers: Mapping[str, str], out: Send) -> None:
        llm = await self.owner._setting()
        chat = parse_chat(body, llm.protocol)
        if not llm.model and not chat.model:
            raise ApiError(503, "No model: name one in the request's model field, or set llm.model (and llm.baseUrl) "
                                "in zcor's config (`zcor config`), or ZCOR_LLM_MODEL.", "provider_not_configured",
                           type="server_error")
        if not llm.model:  # the client names the model the provider is asked for
            llm = llm.model_copy(update={"model": chat.model})
        key = self.owner.fixed_key if self.owner.fixed_key is not None else api_key_for(llm.base_url)
        provider = Provider(llm, key)
        for header in (self.owner.settings.session_header, self.owner.settings.sender_header):
            if header in headers and _key_problem(headers[header]):
                raise ApiError(400, f"The header {header} {_key_problem(headers[header])}.", "invalid_header",
                               param=header)
        private = self.owner.private_of(headers)
        session = self.owner.session_of(chat, headers)
        now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        events = [{"text": text, "origin": "external", "senderKey": self.owner.sender_of(name, chat, headers),
                   "source": session, "ts": now[:-2] + ":" + now[-2:]} for text, name in chat.new_user if text]
        # the senders in the order of their latest message, the speaker (whose message the batch
        # ends with) last and named: zcord tells the speaker from the others present (issue 33)
        origin: dict[str, Any] = {"session": session, "senders": batch_senders(events)}
        if events:
            origin["speaker"] = events[-1]["senderKey"]
        if private:
            origin["private"] = True
        memory = await self.owner.daemon.memory(session, events, private)
        created = int(time.time())
        cid = "chatcmpl-" + secrets.token_hex(12)
        model = chat.model or llm.model
        meta = {"id": cid, "created": created, "model": model}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        stream = EventStream(out, chunk({"role": "assistant", "content": ""})) if chat.stream else None
        # the layout (zcord.bot.prompt): the client's messages stay as they are; only the
        # batch grows with this turn's tool rounds, and only the header is read again
        messages, none_left = without_blocked(chat, events, memory.blocked)
        if none_left:
            # every new message came from a blocked sender: the model is not asked (issue 33)
            await self._answer(out, stream, chunk, Reply("", [], "stop", {}), [], meta, None, chat)
            return
        at = header_at(messages)
        turn = Turn(session=session, prefix=memory.prefix, system=chat.system, history=messages[:at],
                    batch=messages[at:], header=memory.header, zcor_tools=memory.tools, client_tools=chat.tools,
                    max_rounds=self.owner.limits.max_rounds, front_end=FRONT_END, model=llm.model,
                    protocol=llm.protocol)
        try:  # the asyncio driver of zcord.bot.core: each step is one call to the provider or zcord
            while not isinstance(step := turn.next_step(), Done):
                if isinstance(step, Ask):
                    turn.replied(await self._ask(provider, step.prompt, chat, stream, chunk, key))
                elif isinstance(step, Run):
                    turn.ran(await self.owner.daemon.run(step.call, origin))
                elif isinstance(step, Refresh):  # the header after the tools ran (kept if zcord went away)
                    turn.refreshed(await self.owner.daemon.header(session) if memory.available else None)
                elif isinstance(step, Report):
                    self.owner.daemon.report_usage(step.params)
            await self._answer(out, stream, chunk, step.reply, list(step.client_calls), meta, step.usage, chat)
        except TooManyRounds as e:
            await self._failed(stream, ApiError(502, e.message, e.code, type="upstream_error"))
        except ApiError as e:
            await self._failed(stream, e)

    async def _failed(self, stream: EventStream | None, e: ApiError) -> None:
        """A failure: an HTTP error before the answer started, the last event of a stream after."""
        if stream is None or not stream.started:
            raise e
        await stream.send(e.body())  # mid-stream: the error as the last event
        await stream.end()

    async def _ask(self, provider: Provider, prompt: Prompt, chat: ChatRequest, stream: EventStream | None,
                   chunk: Callable[..., dict[str, Any]], key: str | None) -> Reply:
        """One provider request on the event loop; streamed text is passed on as it comes."""
        async def piece(text: str) -> None:
            if stream is not None:
                await stream.send(chunk({"content": text}))

        started = time.monotonic()
        protocol = provider.cfg.protocol
        try:
            reply = await provider.asend(prompt, chat.max_tokens, piece if stream is not None else None,
                                         chat.options, self.owner._http)
        except ProviderError as e:
            self.owner.metrics.upstream.labels(protocol, "error").observe(time.monotonic() - started)
            log.warning("the provider failed: %s", redact(str(e), key))
            raise _upstream_error(e, key) from None
        self.owner.metrics.upstream.labels(protocol, "ok").observe(time.monotonic() - started)
        if reply.usage is not None:
            for kind, n in (("input", reply.usage.input_tokens), ("cached", reply.usage.cached_tokens),
                            ("output", reply.usage.output_tokens)):
                self.owner.metrics.tokens.labels(kind).inc(n)
        return reply

    async def _answer(self, out: Send, stream: EventStream | None, chunk: Callable[..., dict[str, Any]],
                      reply: Reply, calls: list[ToolCall], meta: dict[str, Any], total: Usage | None,
                      chat: ChatRequest) -> None:
        wire_calls = [{"id": c.id, "type": "function", "function": {
            "name": c.name, "arguments": c.arguments if isinstance(c.arguments, str)
            else json.dumps(c.arguments, ensure_ascii=False)}} for c in calls]
        finish = "tool_calls" if calls else ("length" if reply.stop_reason in ("length", "max_tokens") else "stop")
        usage = _wire_usage(total) if total is not None else None
        if stream is not None:
            if wire_calls:
                await stream.send(chunk({"tool_calls": [{"index": i, **c} for i, c in enumerate(wire_calls)]}))
            await stream.send(chunk({}, finish))
            if chat.include_usage and usage is not None:  # OpenAI's form: a last chunk with no choice
                await stream.send({**chunk({}), "choices": [], "usage": usage})
            await stream.end()
            return
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or (None if calls else "")}
        if wire_calls:
            message["tool_calls"] = wire_calls
        body: dict[str, Any] = {"id": meta["id"], "object": "chat.completion", "created": meta["created"],
                                "model": meta["model"],
                                "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
        if usage is not None:
            body["usage"] = usage
        await send_json(out, 200, body)


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
    ap.add_argument("--private", action="store_true",
                    help="every request is a one-to-one conversation: what it creates stays in its session "
                         "(else the X-Zcor-Private: 1 header says so per request)")
    ap.add_argument("--sender", default="openai:user", help="sender key of user messages with no name "
                                                            "(default openai:user)")
    ap.add_argument("--max-request-bytes", type=int, default=Limits.max_request_bytes)
    ap.add_argument("--max-concurrent", type=int, default=Limits.max_concurrent)
    ap.add_argument("--read-timeout", type=float, default=Limits.read_timeout,
                    help="seconds a connection has to send one request, and the most a client may go "
                         "without reading its answer (default 30)")
    ap.add_argument("--idle-timeout", type=float, default=Limits.idle_timeout,
                    help=f"seconds a kept-alive connection may wait for its next request "
                         f"(default {Limits.idle_timeout:g})")
    ap.add_argument("--max-connections", type=int, default=Limits.max_connections,
                    help=f"open connections in all (default {Limits.max_connections})")
    ap.add_argument("--max-connections-per-ip", type=int, default=Limits.max_connections_per_ip,
                    help=f"open connections from one address (default {Limits.max_connections_per_ip})")
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
    if args.max_request_bytes < 1024 or args.max_concurrent < 1 or args.read_timeout <= 0 \
            or args.idle_timeout <= 0 or args.max_connections < 1 or args.max_connections_per_ip < 1:
        raise ValueError("--max-request-bytes must be ≥ 1024, --max-concurrent, --max-connections and "
                         "--max-connections-per-ip ≥ 1, --read-timeout and --idle-timeout > 0")
    return Settings(host=args.host, port=args.port, socket=args.socket, token=token, session_from=sources,
                    fixed_session=args.session, default_sender=args.sender,
                    session_header=args.session_header.lower(), sender_header=args.sender_header.lower(),
                    private=args.private, limits=Limits(max_request_bytes=args.max_request_bytes, read_timeout=args.read_timeout,
                                  idle_timeout=args.idle_timeout, max_concurrent=args.max_concurrent,
                                  max_connections=args.max_connections,
                                  max_connections_per_ip=args.max_connections_per_ip))


async def serve(settings: Settings) -> None:
    server = ProxyServer(settings)  # the provider setting follows zcord's config
    await server.start()
    if not (await server._setting()).model:
        log.warning("no model is configured (llm.model): requests must name one until it is set")
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
