"""LLM providers over httpx: OpenAI-compatible Chat Completions and Anthropic Messages.

One neutral conversation format (system text, messages with optional tool calls and tool
results, tool declarations) is translated to each wire format and back. Used by
`zcor_memory_search` (a one-off filter request) and by bots (`zcord.bot.bot`, `zcor chat`).
Every failure is a ProviderError with a sentence that says what went wrong.

Limits: `timeoutSeconds` bounds the whole request, connecting, the headers and the body
together (a helper thread does the network reads; the caller waits for each piece only
until the deadline, so a provider that trickles bytes cannot stretch it), and an answer
larger than MAX_RESPONSE_BYTES is cut off as an error. The API key is only the header the
caller passed (see zcord.core.config.api_key_for) and never appears in an error message.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import queue
import re
import socket
import threading
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import httpx  # imported when a provider is first called: it costs a tenth of a second at start

from ..core.config import LlmConfig
from ..core.errors import ProviderError

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024
MAX_RESPONSE_BYTES = 8 << 20
"""Largest provider answer accepted (a filter reply is a few hundred bytes; a chat reply
a few kilobytes)."""
_TOO_LARGE = f"The LLM provider's answer is larger than {MAX_RESPONSE_BYTES >> 20} MiB; it was cut off."


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: Any  # the parsed JSON object, or the raw string when it was not valid JSON


@dataclass
class Message:
    """role: "user", "assistant" or "tool". Tool results carry tool_call_id (and is_error)."""

    role: str
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    is_error: bool = False


@dataclass
class Reply:
    text: str
    tool_calls: list[ToolCall]
    stop_reason: str | None
    raw: dict[str, Any]


def _openai_messages(system: str, messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for m in messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
        elif m.role == "assistant" and m.tool_calls:
            out.append({"role": "assistant", "content": m.content or None, "tool_calls": [
                {"id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": c.arguments if isinstance(c.arguments, str)
                              else json.dumps(c.arguments, ensure_ascii=False)}}
                for c in m.tool_calls]})
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def _anthropic_messages(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}
            if m.is_error:
                block["is_error"] = True
            # consecutive tool results share one user turn
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list) and \
                    all(b.get("type") == "tool_result" for b in out[-1]["content"]):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif m.role == "assistant" and m.tool_calls:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
            blocks += [{"type": "tool_use", "id": c.id, "name": c.name,
                        "input": c.arguments if isinstance(c.arguments, dict) else {}} for c in m.tool_calls]
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": m.role, "content": m.content})
    if out and out[0]["role"] != "user":
        # Messages must open with a user turn; a transcript may open with a synthesized frame.
        out.insert(0, {"role": "user", "content": "[conversation start]"})
    return out


def openai_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """MCP tool declarations (name, description, inputSchema) in Chat Completions form."""
    return [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                              "parameters": t["inputSchema"]}} for t in tools]


def anthropic_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """MCP tool declarations in Anthropic Messages form."""
    return [{"name": t["name"], "description": t.get("description", ""), "input_schema": t["inputSchema"]}
            for t in tools]


def _parse_args(raw: Any) -> Any:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw)
        return value
    except (TypeError, ValueError):
        return raw


def _plain_error(err: Exception) -> str:
    """An httpx error's text without the errno in brackets: `connection refused`."""
    text = re.sub(r"\[Errno -?\d+\]\s*", "", str(err)).strip() or type(err).__name__
    return text[0].lower() + text[1:] if text[:1].isupper() and not text[1:2].isupper() else text


class Provider:
    """One configured provider. `chat()` sends a conversation and returns the reply."""

    def __init__(self, cfg: LlmConfig, api_key: str | None, client: httpx.Client | None = None):
        if not cfg.model:
            raise ProviderError("No LLM is configured: set the model (ZCOR_LLM_MODEL or llm.model in "
                                "config.json) and the base URL (ZCOR_LLM_BASE_URL).")
        self.cfg = cfg
        self.api_key = api_key
        self._client = client

    @contextmanager
    def _transport(self, failing: str):
        """Map httpx failures to ProviderError; close a client made for this one request."""
        import httpx

        client = self._client or httpx.Client()
        try:
            yield client
        except httpx.TimeoutException:
            raise ProviderError(f"The LLM provider at {self.cfg.base_url} did not answer within "
                                f"{self.cfg.timeout_seconds:g} s.") from None
        except httpx.ConnectError as e:  # refused or unknown before a byte of answer, whichever call
            raise ProviderError(f"The LLM provider at {self.cfg.base_url} could not be reached: {_plain_error(e)} "
                                f"(is it running, and is llm.baseUrl right?)") from None
        except httpx.HTTPError as e:
            raise ProviderError(f"The LLM provider at {self.cfg.base_url} {failing}: {_plain_error(e)}") from None
        finally:
            if self._client is None:
                client.close()

    def _exchange(self, url: str, headers: dict[str, str], body: dict[str, Any], deadline: float,
                  failing: str) -> tuple[httpx.Response, Any]:
        """Send the request from a helper thread; (the response, its body pieces) as they come,
        each waited for only until the deadline. Past it the caller gets the timeout error
        at once and the connection is shut down under the helper (which then ends). The body
        stops at MAX_RESPONSE_BYTES (one byte more tells)."""
        pieces: queue.Queue = queue.Queue()  # ("head", response) ("data", bytes) ("end", None) ("error", exc)
        stop = threading.Event()
        timeout = self.cfg.timeout_seconds
        streams: list[Any] = []  # the connection's network stream, once connected

        def trace(event: str, info: dict[str, Any]) -> None:
            if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
                streams.append(info.get("return_value"))

        def hang_up() -> None:
            stop.set()
            for stream in streams[-1:]:
                try:
                    stream.get_extra_info("socket").shutdown(socket.SHUT_RDWR)
                except (OSError, AttributeError):
                    pass  # already closed by the helper

        def fetch() -> None:
            try:
                with self._transport(failing) as client, \
                        client.stream("POST", url, headers=headers, json=body, timeout=timeout,
                                      extensions={"trace": trace}) as resp:
                    pieces.put(("head", resp))
                    received = 0
                    for chunk in resp.iter_bytes():
                        if stop.is_set():
                            return
                        pieces.put(("data", chunk))
                        received += len(chunk)
                        if received > MAX_RESPONSE_BYTES:
                            break
                pieces.put(("end", None))
            except BaseException as e:  # handed to the caller
                pieces.put(("error", e))

        def take(what: str) -> tuple[str, Any]:
            try:
                kind, value = pieces.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                hang_up()
                raise ProviderError(f"The LLM provider at {self.cfg.base_url} {what} within {timeout:g} s.") \
                    from None
            if kind == "error":
                stop.set()
                raise value
            return kind, value

        threading.Thread(target=fetch, name="zcord-provider", daemon=True).start()
        kind, resp = take("did not answer")

        def chunks():
            try:
                while True:
                    kind, value = take("did not finish its answer")
                    if kind == "end":
                        return
                    yield value
            finally:
                stop.set()

        return resp, chunks()

    def _read_capped(self, chunks) -> bytes:
        """The body (pieces from _exchange) under the size cap."""
        body = bytearray()
        for chunk in chunks:
            body += chunk
            if len(body) > MAX_RESPONSE_BYTES:
                raise ProviderError(f"The LLM provider's answer is larger than {MAX_RESPONSE_BYTES >> 20} MiB; "
                                    f"it was cut off.")
        return bytes(body)

    def _capped_lines(self, chunks):
        """Server-sent event lines (decoded), under the size cap."""
        received = 0
        pending = b""
        for chunk in chunks:
            received += len(chunk)
            if received > MAX_RESPONSE_BYTES:
                raise ProviderError(f"The LLM provider's answer is larger than {MAX_RESPONSE_BYTES >> 20} MiB; "
                                    f"it was cut off.")
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                yield line.rstrip(b"\r").decode("utf-8", "replace")
        if pending:
            yield pending.rstrip(b"\r").decode("utf-8", "replace")

    def _parse_body(self, resp: httpx.Response, body: bytes) -> Reply:
        """A whole (non-streamed) answer: status, JSON, then the wire format's reply."""
        text = body.decode("utf-8", "replace")
        if resp.status_code >= 400:
            raise ProviderError(f"The LLM provider answered HTTP {resp.status_code}: {text[:300]}")
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            raise ProviderError(f"The LLM provider's answer is not JSON: {text[:200]!r}") from None
        if not isinstance(data, dict):
            raise ProviderError("The LLM provider's answer is not a JSON object.")
        return self._openai_reply(data) if self.cfg.protocol == "openai" else self._anthropic_reply(data)

    def _request(self, system: str, messages: list[Message], tools: list[dict[str, Any]] | None,
                 max_tokens: int, options: dict[str, Any] | None = None) -> tuple[str, dict[str, str], dict[str, Any]]:
        """URL, headers and body of one request in the configured wire format; `options`
        (sampling settings already in that format) are added to the body."""
        base = self.cfg.base_url.rstrip("/")
        if self.cfg.protocol == "openai":
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            body: dict[str, Any] = {"model": self.cfg.model, "messages": _openai_messages(system, messages),
                                    "max_tokens": max_tokens}
            if tools:
                body["tools"] = openai_tools(tools)
            return base + "/chat/completions", headers, {**(options or {}), **body}
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        body = {"model": self.cfg.model, "max_tokens": max_tokens, "messages": _anthropic_messages(messages)}
        if system:
            body["system"] = system
        if tools:
            body["tools"] = anthropic_tools(tools)
        return base + "/messages", headers, {**(options or {}), **body}

    def chat(self, system: str, messages: list[Message], tools: list[dict[str, Any]] | None = None,
             max_tokens: int = DEFAULT_MAX_TOKENS, on_text: Callable[[str], None] | None = None,
             options: dict[str, Any] | None = None) -> Reply:
        """Send the conversation; with on_text, stream and hand over the text as it arrives.
        `options`: extra body fields in the configured wire format (temperature, top_p, …)."""
        url, headers, body = self._request(system, messages, tools, max_tokens, options)
        deadline = time.monotonic() + self.cfg.timeout_seconds
        if on_text is not None:
            return self._stream(url, headers, body, on_text, deadline)
        resp, chunks = self._exchange(url, headers, body, deadline, "could not be reached")
        with contextlib.closing(chunks):
            raw = self._read_capped(chunks)
        return self._parse_body(resp, raw)

    # -- streaming (server-sent events) ------------------------------------------------------

    def _stream(self, url: str, headers: dict[str, str], body: dict[str, Any],
                on_text: Callable[[str], None], deadline: float) -> Reply:
        body = {**body, "stream": True}
        state = _OpenAIStream() if self.cfg.protocol == "openai" else _AnthropicStream()
        resp, chunks = self._exchange(url, headers, body, deadline, "failed mid-answer")
        with contextlib.closing(chunks):
            if resp.status_code >= 400 or "text/event-stream" not in resp.headers.get("content-type", ""):
                # an error, or a server that ignores "stream": a whole answer
                reply = self._parse_body(resp, self._read_capped(chunks))
                if reply.text:
                    on_text(reply.text)
                return reply
            for line in self._capped_lines(chunks):
                piece = self._sse_piece(line, state)
                if piece is None:
                    break
                if piece:
                    on_text(piece)
        return state.reply()

    @staticmethod
    def _sse_piece(line: str, state: _OpenAIStream | _AnthropicStream) -> str | None:
        """The text of one server-sent event line ("" when it has none); None at [DONE]."""
        if not line.startswith("data:"):
            return ""
        payload = line[5:].strip()
        if payload == "[DONE]":
            return None
        try:
            event = json.loads(payload)
        except ValueError:
            raise ProviderError(f"The LLM provider streamed a malformed event: {payload[:200]!r}") from None
        return state.feed(event)

    # -- asyncio callers (zcord.bot.proxy) ---------------------------------------------------

    async def achat(self, system: str, messages: list[Message], tools: list[dict[str, Any]] | None = None,
                    max_tokens: int = DEFAULT_MAX_TOKENS,
                    on_text: Callable[[str], Awaitable[None] | None] | None = None,
                    options: dict[str, Any] | None = None, client: httpx.AsyncClient | None = None) -> Reply:
        """chat() for asyncio callers, on the event loop itself (no helper thread): the same
        wire formats, the same deadline over the whole request and the same size cap.
        on_text may be a coroutine function; it is awaited for each piece."""
        import httpx

        url, headers, body = self._request(system, messages, tools, max_tokens, options)
        if on_text is not None:
            body = {**body, "stream": True}
        http = client or httpx.AsyncClient()
        timeout = self.cfg.timeout_seconds
        what = ["did not answer"]

        async def hand(piece: str) -> None:
            out = on_text(piece) if on_text is not None else None
            if inspect.isawaitable(out):
                await out

        try:
            async with asyncio.timeout(timeout), \
                    http.stream("POST", url, headers=headers, json=body, timeout=timeout) as resp:
                what[0] = "did not finish its answer"
                if on_text is None or resp.status_code >= 400 or \
                        "text/event-stream" not in resp.headers.get("content-type", ""):
                    raw = bytearray()
                    # closed here, not left to the loop's finalizer (a task still pending at shutdown)
                    async with contextlib.aclosing(cast("AsyncGenerator[bytes, None]", resp.aiter_bytes())) as chunks:
                        async for chunk in chunks:
                            raw += chunk
                            if len(raw) > MAX_RESPONSE_BYTES:
                                raise ProviderError(_TOO_LARGE)
                    reply = self._parse_body(resp, bytes(raw))
                    if reply.text:
                        await hand(reply.text)
                    return reply
                state = _OpenAIStream() if self.cfg.protocol == "openai" else _AnthropicStream()
                received, pending = 0, b""
                async with contextlib.aclosing(cast("AsyncGenerator[bytes, None]", resp.aiter_bytes())) as chunks:
                    async for chunk in chunks:
                        received += len(chunk)
                        if received > MAX_RESPONSE_BYTES:
                            raise ProviderError(_TOO_LARGE)
                        *lines, pending = (pending + chunk).split(b"\n")
                        for line in lines:
                            piece = self._sse_piece(line.rstrip(b"\r").decode("utf-8", "replace"), state)
                            if piece is None:
                                return state.reply()
                            if piece:
                                await hand(piece)
                piece = self._sse_piece(pending.rstrip(b"\r").decode("utf-8", "replace"), state)
                if piece:
                    await hand(piece)
                return state.reply()
        except (TimeoutError, httpx.TimeoutException):
            raise ProviderError(f"The LLM provider at {self.cfg.base_url} {what[0]} within {timeout:g} s.") from None
        except httpx.HTTPError as e:
            raise ProviderError(f"The LLM provider at {self.cfg.base_url} could not be reached: {e}") from None
        finally:
            if client is None:
                await http.aclose()

    @staticmethod
    def _openai_reply(data: dict[str, Any]) -> Reply:
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise ProviderError("The LLM provider returned no choice.")
        msg = choices[0].get("message") if isinstance(choices[0], dict) else None
        if not isinstance(msg, dict):
            raise ProviderError("The LLM provider's choice has no message.")
        calls = []
        for c in msg.get("tool_calls") or []:
            fn = c.get("function") or {}
            calls.append(ToolCall(id=str(c.get("id", "")), name=str(fn.get("name", "")),
                                  arguments=_parse_args(fn.get("arguments", "{}"))))
        content = msg.get("content")
        if content is not None and not isinstance(content, str):
            raise ProviderError("The LLM provider's message content is not text.")
        return Reply(text=content or "", tool_calls=calls, stop_reason=choices[0].get("finish_reason"), raw=data)

    @staticmethod
    def _anthropic_reply(data: dict[str, Any]) -> Reply:
        blocks = data.get("content")
        if data.get("type") == "error" or not isinstance(blocks, list):
            raise ProviderError(f"The LLM provider returned no content: {json.dumps(data)[:200]}")
        text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
        calls = [ToolCall(id=str(b.get("id", "")), name=str(b.get("name", "")), arguments=b.get("input", {}))
                 for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
        return Reply(text=text, tool_calls=calls, stop_reason=data.get("stop_reason"), raw=data)


class _OpenAIStream:
    """Accumulates Chat Completions chunks: text deltas and indexed tool-call pieces."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}
        self.stop: str | None = None
        self.seen = False

    def feed(self, event: dict[str, Any]) -> str:
        if "error" in event:
            raise ProviderError(f"The LLM provider reported an error mid-answer: {json.dumps(event)[:200]}")
        choices = event.get("choices") or []
        if not choices:
            return ""
        self.seen = True
        choice = choices[0]
        self.stop = choice.get("finish_reason") or self.stop
        delta = choice.get("delta") or {}
        for tc in delta.get("tool_calls") or []:
            slot = self.calls.setdefault(tc.get("index", 0), {"id": "", "name": "", "arguments": ""})
            slot["id"] = tc.get("id") or slot["id"]
            fn = tc.get("function") or {}
            slot["name"] = fn.get("name") or slot["name"]
            slot["arguments"] += fn.get("arguments") or ""
        piece = delta.get("content") or ""
        if piece:
            self.text.append(piece)
        return piece

    def reply(self) -> Reply:
        if not self.seen:
            raise ProviderError("The LLM provider returned no choice.")
        calls = [ToolCall(c["id"], c["name"], _parse_args(c["arguments"] or "{}"))
                 for _, c in sorted(self.calls.items())]
        return Reply("".join(self.text), calls, self.stop, {"streamed": True})


class _AnthropicStream:
    """Accumulates Messages stream events: text blocks and tool_use blocks with JSON pieces."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.stop: str | None = None
        self.seen = False

    def feed(self, event: dict[str, Any]) -> str:
        kind = event.get("type")
        if kind == "error":
            raise ProviderError(f"The LLM provider reported an error mid-answer: {json.dumps(event)[:200]}")
        if kind == "message_start":
            self.seen = True
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            self.blocks[event.get("index", 0)] = {"type": block.get("type"), "text": block.get("text", ""),
                                                  "id": block.get("id", ""), "name": block.get("name", ""),
                                                  "json": ""}
        elif kind == "content_block_delta":
            block = self.blocks.setdefault(event.get("index", 0), {"type": "text", "text": "", "json": ""})
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta":
                block["text"] += delta.get("text", "")
                return delta.get("text", "")
            if delta.get("type") == "input_json_delta":
                block["json"] += delta.get("partial_json", "")
        elif kind == "message_delta":
            self.stop = (event.get("delta") or {}).get("stop_reason") or self.stop
        return ""

    def reply(self) -> Reply:
        if not self.seen:
            raise ProviderError("The LLM provider returned no content.")
        blocks = [b for _, b in sorted(self.blocks.items())]
        text = "".join(b["text"] for b in blocks if b["type"] == "text")
        calls = [ToolCall(b["id"], b["name"], _parse_args(b["json"] or "{}")) for b in blocks
                 if b["type"] == "tool_use"]
        return Reply(text, calls, self.stop, {"streamed": True})
