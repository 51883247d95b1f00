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
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import httpx  # imported when a provider is first called: it costs a tenth of a second at start

from ..core.config import LlmConfig
from ..core.errors import (
    ProviderBadAnswer,
    ProviderError,
    ProviderMidAnswer,
    ProviderStatus,
    ProviderTimeout,
    ProviderTooLarge,
    ProviderUnreachable,
)

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024
MAX_RESPONSE_BYTES = 8 << 20
"""Largest provider answer accepted (a filter reply is a few hundred bytes; a chat reply
a few kilobytes)."""
_TOO_LARGE = f"The LLM provider's answer is larger than {MAX_RESPONSE_BYTES >> 20} MiB; it was cut off."
_FAILING: dict[type[ProviderError], str] = {ProviderUnreachable: "could not be reached",
                                            ProviderMidAnswer: "failed mid-answer"}
"""Any other transport failure of a whole answer (unreachable) or of a stream (mid-answer),
and how it is said."""


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


@dataclass(frozen=True)
class Usage:
    """What the provider says one request cost, in tokens, the same for every protocol.

    input_tokens is the whole prompt, its cached part included (OpenAI's prompt_tokens;
    Anthropic's input_tokens + cache_read_input_tokens + cache_creation_input_tokens)."""

    input_tokens: int = 0
    cached_tokens: int = 0
    """Read from the provider's prompt cache (OpenAI prompt_tokens_details.cached_tokens,
    Anthropic cache_read_input_tokens, DeepSeek prompt_cache_hit_tokens)."""
    cache_write_tokens: int = 0
    """Written to the cache (Anthropic cache_creation_input_tokens)."""
    output_tokens: int = 0


def _count(obj: Any, *path: str) -> int:
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj if isinstance(obj, int) and not isinstance(obj, bool) and obj >= 0 else 0


def usage_of(data: Any) -> Usage | None:
    """The Usage in a provider's `usage` object (either protocol, DeepSeek's fields too);
    None when there is none."""
    if not isinstance(data, dict):
        return None
    if "prompt_tokens" in data or "completion_tokens" in data:  # OpenAI-compatible
        cached = _count(data, "prompt_tokens_details", "cached_tokens") or _count(data, "prompt_cache_hit_tokens")
        return Usage(_count(data, "prompt_tokens"), cached, 0, _count(data, "completion_tokens"))
    if "input_tokens" in data or "output_tokens" in data:  # Anthropic
        read, write = _count(data, "cache_read_input_tokens"), _count(data, "cache_creation_input_tokens")
        return Usage(_count(data, "input_tokens") + read + write, read, write, _count(data, "output_tokens"))
    return None


@dataclass
class Reply:
    text: str
    tool_calls: list[ToolCall]
    stop_reason: str | None
    raw: dict[str, Any]
    usage: Usage | None = None


@dataclass(frozen=True)
class Prompt:
    """One model request in the neutral format, laid out for the provider's prompt cache
    (zcord.bot.prompt.assemble makes it; the renderers below turn it into wire bodies).

    Attributes:
        system: the stable system parts in order (zcor's prefix, then the front end's text).
        messages: the history, then the newest batch and this turn's tool rounds.
        batch_at: index in `messages` where the newest batch starts: the header goes just
            before it, and everything before it is the stable part of the conversation.
        header: the context header ("" when nothing is recalled).
        tools: declarations in MCP form (name, description, inputSchema), in a fixed order.
        cache_key: a per-session key for providers that take one (prompt_cache_key), or None.
        cache: whether to mark Anthropic cache breakpoints (a one-off request, such as the
            search filter, would only pay for writing a cache nobody reads).
    """

    system: tuple[str, ...] = ()
    messages: tuple[Message, ...] = ()
    batch_at: int = 0
    header: str = ""
    tools: tuple[dict[str, Any], ...] = ()
    cache_key: str | None = None
    cache: bool = True

    @property
    def system_text(self) -> str:
        """The system parts as one text (protocols that take a single system string)."""
        return "\n\n".join(self.system)

    @property
    def stable(self) -> tuple[Message, ...]:
        """The messages before the header: identical from one batch to the next."""
        return self.messages[:self.batch_at]


def plain_prompt(system: str, messages: list[Message], tools: list[dict[str, Any]] | None) -> Prompt:
    """A request with no context header (the search filter, callers of chat())."""
    return Prompt(system=(system,) if system else (), messages=tuple(messages), batch_at=len(messages),
                  tools=tuple(tools or ()), cache=False)


def _openai_message(m: Message) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    if m.role == "assistant" and m.tool_calls:
        return {"role": "assistant", "content": m.content or None, "tool_calls": [
            {"id": c.id, "type": "function",
             "function": {"name": c.name, "arguments": c.arguments if isinstance(c.arguments, str)
                          else json.dumps(c.arguments, ensure_ascii=False)}}
            for c in m.tool_calls]}
    return {"role": m.role, "content": m.content}


def _openai_messages(prompt: Prompt) -> list[dict[str, Any]]:
    """Chat Completions messages: one system message (the stable parts), the history, then
    the header as the first part of the newest user turn (a text put before that message's
    text: every OpenAI-compatible server takes it, where a system or second user message in
    mid-conversation is refused by some chat templates), or as a user message of its own
    when the batch does not start with one (zcor chat's event frame)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": prompt.system_text}] if prompt.system else []
    for i, m in enumerate(prompt.messages):
        if i == prompt.batch_at and prompt.header:
            if m.role == "user":
                out.append({"role": "user", "content": prompt.header + "\n\n" + m.content})
                continue
            out.append({"role": "user", "content": prompt.header})
        out.append(_openai_message(m))
    if prompt.header and prompt.batch_at >= len(prompt.messages):
        out.append({"role": "user", "content": prompt.header})
    return out


CACHE = {"type": "ephemeral"}
"""Anthropic's cache breakpoint: the prefix up to the block that carries it is cached."""


def _anthropic_message(m: Message) -> dict[str, Any]:
    if m.role == "tool":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}
        if m.is_error:
            block["is_error"] = True
        return {"role": "user", "content": [block]}
    if m.role == "assistant" and m.tool_calls:
        blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
        blocks += [{"type": "tool_use", "id": c.id, "name": c.name,
                    "input": c.arguments if isinstance(c.arguments, dict) else {}} for c in m.tool_calls]
        return {"role": "assistant", "content": blocks}
    if m.role in ("system", "developer"):
        # Messages has no system role inside the conversation: a front end's system message in
        # the middle of its history stays where it was, as a user turn that says what it is
        return {"role": "user", "content": f"[system] {m.content}"}
    return {"role": m.role, "content": m.content}


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    if isinstance(content, list):
        return cast("list[dict[str, Any]]", content)
    blocks: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
    message["content"] = blocks
    return blocks


def _join(out: list[dict[str, Any]], message: dict[str, Any]) -> None:
    """Append a message; consecutive tool results share one user turn."""
    prev = out[-1] if out else None
    if (prev is not None and message["role"] == "user" and prev["role"] == "user"
            and isinstance(prev["content"], list) and prev["content"]
            and all(b.get("type") == "tool_result" for b in prev["content"])
            and isinstance(message["content"], list)
            and all(b.get("type") == "tool_result" for b in message["content"])):
        prev["content"].extend(message["content"])
    else:
        out.append(message)


def _anthropic_messages(prompt: Prompt) -> list[dict[str, Any]]:
    """Messages turns; the header as the first text block of the newest user turn (or a
    user turn of its own before zcor chat's event frame), and a cache breakpoint on the
    last turn before it."""
    out: list[dict[str, Any]] = []
    stable = 0  # how many of `out` are before the header
    for i, m in enumerate(prompt.messages):
        if i == prompt.batch_at:
            stable = len(out)
            if prompt.header:
                if m.role == "user":
                    out.append({"role": "user", "content": [{"type": "text", "text": prompt.header},
                                                            {"type": "text", "text": m.content}]})
                    continue
                out.append({"role": "user", "content": [{"type": "text", "text": prompt.header}]})
        _join(out, _anthropic_message(m))
    if prompt.batch_at >= len(prompt.messages):
        stable = len(out)
        if prompt.header:
            out.append({"role": "user", "content": [{"type": "text", "text": prompt.header}]})
    if prompt.messages and _anthropic_message(prompt.messages[0])["role"] != "user":
        # Messages must open with a user turn; a transcript may open with a synthesized frame.
        # Decided by the conversation, not by the header in front of it: the opening stays the
        # same bytes when the first batch's header is gone from the next request.
        out.insert(0, {"role": "user", "content": "[conversation start]"})
        stable += 1 if stable else 0  # a breakpoint there would repeat the system's
    if prompt.cache and stable > 0 and (blocks := _blocks(out[stable - 1])):
        blocks[-1] = {**blocks[-1], "cache_control": CACHE}
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
        self.answers = Answers(self)

    @contextmanager
    def _transport(self, failing: type[ProviderError]) -> Iterator[httpx.Client]:
        """Map httpx failures to ProviderError; close a client made for this one request."""
        import httpx

        client = self._client or httpx.Client()
        try:
            yield client
        except httpx.TimeoutException:
            raise ProviderTimeout(f"The LLM provider at {self.cfg.base_url} did not answer within "
                                  f"{self.cfg.timeout_seconds:g} s.", seconds=self.cfg.timeout_seconds) from None
        except httpx.ConnectError as e:  # refused or unknown before a byte of answer, whichever call
            raise ProviderUnreachable(f"The LLM provider at {self.cfg.base_url} could not be reached: "
                                      f"{_plain_error(e)} (is it running, and is llm.baseUrl right?)") from None
        except httpx.HTTPError as e:
            raise failing(f"The LLM provider at {self.cfg.base_url} {_FAILING[failing]}: {_plain_error(e)}") from None
        finally:
            if self._client is None:
                client.close()

    def _exchange(self, url: str, headers: dict[str, str], body: dict[str, Any], deadline: float,
                  failing: type[ProviderError]) -> tuple[httpx.Response, Any]:
        """Send the request from a helper thread; (the response, its body pieces) as they come,
        each waited for only until the deadline. Past it the caller gets the timeout error
        at once and the connection is shut down under the helper (which then ends). The body
        stops at MAX_RESPONSE_BYTES (one byte more tells)."""
        pieces: queue.Queue[tuple[str, Any]] = queue.Queue()  # ("head", response) ("data", bytes) ("end", None) ("error", exc)
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
                raise ProviderTimeout(f"The LLM provider at {self.cfg.base_url} {what} within {timeout:g} s.",
                                      seconds=timeout) from None
            if kind == "error":
                stop.set()
                raise value
            return kind, value

        threading.Thread(target=fetch, name="zcord-provider", daemon=True).start()
        kind, resp = take("did not answer")

        def chunks() -> Iterator[bytes]:
            try:
                while True:
                    kind, value = take("did not finish its answer")
                    if kind == "end":
                        return
                    yield value
            finally:
                stop.set()

        return resp, chunks()

    def _request(self, prompt: Prompt, max_tokens: int,
                 options: dict[str, Any] | None = None) -> tuple[str, dict[str, str], dict[str, Any]]:
        """URL, headers and body of one request in the configured wire format; `options`
        (sampling settings already in that format) are added to the body."""
        base = self.cfg.base_url.rstrip("/")
        tools = list(prompt.tools)
        if self.cfg.protocol == "openai":
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            body: dict[str, Any] = {"model": self.cfg.model, "messages": _openai_messages(prompt),
                                    "max_tokens": max_tokens}
            if tools:
                body["tools"] = openai_tools(tools)
            if prompt.cache_key and self._sends_cache_key():
                body["prompt_cache_key"] = prompt.cache_key
            return base + "/chat/completions", headers, {**(options or {}), **body}
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        body = {"model": self.cfg.model, "max_tokens": max_tokens, "messages": _anthropic_messages(prompt)}
        if prompt.system and prompt.cache:
            # the system parts as blocks, the last a breakpoint: tools and system are cached together
            body["system"] = [{"type": "text", "text": part} for part in prompt.system]
            body["system"][-1]["cache_control"] = CACHE
        elif prompt.system:
            body["system"] = prompt.system_text
        if tools:
            body["tools"] = anthropic_tools(tools)
        return base + "/messages", headers, {**(options or {}), **body}

    def _sends_cache_key(self) -> bool:
        if self.cfg.prompt_cache_key == "auto":
            from urllib.parse import urlsplit

            host = (urlsplit(self.cfg.base_url).hostname or "").lower()
            return host == "api.openai.com"
        return self.cfg.prompt_cache_key == "on"

    def chat(self, system: str, messages: list[Message], tools: list[dict[str, Any]] | None = None,
             max_tokens: int = DEFAULT_MAX_TOKENS, on_text: Callable[[str], None] | None = None,
             options: dict[str, Any] | None = None) -> Reply:
        """Send a conversation with no context header (see send())."""
        return self.send(plain_prompt(system, messages, tools), max_tokens, on_text, options)

    def send(self, prompt: Prompt, max_tokens: int = DEFAULT_MAX_TOKENS,
             on_text: Callable[[str], None] | None = None, options: dict[str, Any] | None = None) -> Reply:
        """Send a laid-out request; with on_text, stream and hand over the text as it arrives.
        `options`: extra body fields in the configured wire format (temperature, top_p, …)."""
        url, headers, body = self._request(prompt, max_tokens, options)
        deadline = time.monotonic() + self.cfg.timeout_seconds
        if on_text is not None:
            return self._stream(url, headers, body, on_text, deadline)
        resp, chunks = self._exchange(url, headers, body, deadline, ProviderUnreachable)
        with contextlib.closing(chunks):
            raw = self.answers.read_capped(chunks)
        return self.answers.parse_body(resp, raw)

    # -- streaming (server-sent events) ------------------------------------------------------

    def _stream(self, url: str, headers: dict[str, str], body: dict[str, Any],
                on_text: Callable[[str], None], deadline: float) -> Reply:
        body = self._streamed(body)
        state = StreamDecoder(self.cfg.protocol)
        resp, chunks = self._exchange(url, headers, body, deadline, ProviderMidAnswer)
        with contextlib.closing(chunks):
            if resp.status_code >= 400 or "text/event-stream" not in resp.headers.get("content-type", ""):
                # an error, or a server that ignores "stream": a whole answer
                reply = self.answers.parse_body(resp, self.answers.read_capped(chunks))
                if reply.text:
                    on_text(reply.text)
                return reply
            for chunk in chunks:
                for piece in state.feed(chunk):
                    on_text(piece)
                if state.done:
                    break
            else:
                for piece in state.end():
                    on_text(piece)
        return state.reply()

    def _streamed(self, body: dict[str, Any]) -> dict[str, Any]:
        """The body asking for a stream; OpenAI-compatible servers are asked for the usage too
        (a last chunk with no choice), as Anthropic's stream always carries it."""
        if self.cfg.protocol == "openai":
            return {**body, "stream": True, "stream_options": {"include_usage": True}}
        return {**body, "stream": True}

    # -- asyncio callers (zcord.bot.proxy) ---------------------------------------------------

    async def achat(self, system: str, messages: list[Message], tools: list[dict[str, Any]] | None = None,
                    max_tokens: int = DEFAULT_MAX_TOKENS,
                    on_text: Callable[[str], Awaitable[None] | None] | None = None,
                    options: dict[str, Any] | None = None, client: httpx.AsyncClient | None = None) -> Reply:
        """chat() for asyncio callers (see asend())."""
        return await self.asend(plain_prompt(system, messages, tools), max_tokens, on_text, options, client)

    async def asend(self, prompt: Prompt, max_tokens: int = DEFAULT_MAX_TOKENS,
                    on_text: Callable[[str], Awaitable[None] | None] | None = None,
                    options: dict[str, Any] | None = None, client: httpx.AsyncClient | None = None) -> Reply:
        """send() for asyncio callers, on the event loop itself (no helper thread): the same
        wire formats, the same deadline over the whole request and the same size cap.
        on_text may be a coroutine function; it is awaited for each piece."""
        import httpx

        url, headers, body = self._request(prompt, max_tokens, options)
        if on_text is not None:
            body = self._streamed(body)
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
                                raise ProviderTooLarge(_TOO_LARGE)
                    reply = self.answers.parse_body(resp, bytes(raw))
                    if reply.text:
                        await hand(reply.text)
                    return reply
                state = StreamDecoder(self.cfg.protocol)
                async with contextlib.aclosing(cast("AsyncGenerator[bytes, None]", resp.aiter_bytes())) as chunks:
                    async for chunk in chunks:
                        for piece in state.feed(chunk):
                            await hand(piece)
                        if state.done:
                            return state.reply()
                for piece in state.end():
                    await hand(piece)
                return state.reply()
        except (TimeoutError, httpx.TimeoutException):
            raise ProviderTimeout(f"The LLM provider at {self.cfg.base_url} {what[0]} within {timeout:g} s.",
                                  seconds=timeout) from None
        except httpx.HTTPError as e:
            raise ProviderUnreachable(f"The LLM provider at {self.cfg.base_url} could not be reached: {e}") from None
        finally:
            if client is None:
                await http.aclose()


class Answers:
    """Reading a whole (non-streamed) provider answer (a part of Provider, `answers`): the
    body under the size cap, its status and JSON, then the wire format's reply."""

    def __init__(self, provider: Provider) -> None:
        self.provider = provider

    def read_capped(self, chunks: Iterable[bytes]) -> bytes:
        """The body (pieces from _exchange) under the size cap."""
        body = bytearray()
        for chunk in chunks:
            body += chunk
            if len(body) > MAX_RESPONSE_BYTES:
                raise ProviderTooLarge(_TOO_LARGE)
        return bytes(body)

    def parse_body(self, resp: httpx.Response, body: bytes) -> Reply:
        """A whole (non-streamed) answer: status, JSON, then the wire format's reply."""
        text = body.decode("utf-8", "replace")
        if resp.status_code >= 400:
            raise ProviderStatus(f"The LLM provider answered HTTP {resp.status_code}: {text[:300]}",
                                 status=resp.status_code)
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            raise ProviderBadAnswer(f"The LLM provider's answer is not JSON: {text[:200]!r}") from None
        if not isinstance(data, dict):
            raise ProviderBadAnswer("The LLM provider's answer is not a JSON object.")
        return self.openai_reply(data) if self.provider.cfg.protocol == "openai" else self.anthropic_reply(data)

    @staticmethod
    def openai_reply(data: dict[str, Any]) -> Reply:
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise ProviderBadAnswer("The LLM provider returned no choice.")
        msg = choices[0].get("message") if isinstance(choices[0], dict) else None
        if not isinstance(msg, dict):
            raise ProviderBadAnswer("The LLM provider's choice has no message.")
        calls = []
        for c in msg.get("tool_calls") or []:
            fn = c.get("function") or {}
            calls.append(ToolCall(id=str(c.get("id", "")), name=str(fn.get("name", "")),
                                  arguments=_parse_args(fn.get("arguments", "{}"))))
        content = msg.get("content")
        if content is not None and not isinstance(content, str):
            raise ProviderBadAnswer("The LLM provider's message content is not text.")
        return Reply(text=content or "", tool_calls=calls, stop_reason=choices[0].get("finish_reason"), raw=data,
                     usage=usage_of(data.get("usage")))

    @staticmethod
    def anthropic_reply(data: dict[str, Any]) -> Reply:
        blocks = data.get("content")
        if data.get("type") == "error" or not isinstance(blocks, list):
            raise ProviderBadAnswer(f"The LLM provider returned no content: {json.dumps(data)[:200]}")
        text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
        calls = [ToolCall(id=str(b.get("id", "")), name=str(b.get("name", "")), arguments=b.get("input", {}))
                 for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
        return Reply(text=text, tool_calls=calls, stop_reason=data.get("stop_reason"), raw=data,
                     usage=usage_of(data.get("usage")))


class StreamDecoder:
    """A streamed answer (server-sent events) decoded without I/O, for the sync and the
    asyncio sender alike (send(), asend()): `feed` each piece of the body as it arrives and
    hand on the text it yields, until `done` (the [DONE] event); `end` when the body ends
    without it; then `reply` is the whole Reply. ProviderError past MAX_RESPONSE_BYTES or at
    a malformed event."""

    def __init__(self, protocol: str) -> None:
        self.state: _OpenAIStream | _AnthropicStream = _OpenAIStream() if protocol == "openai" else _AnthropicStream()
        self.received = 0
        self.pending = b""
        self.done = False

    def feed(self, chunk: bytes) -> Iterator[str]:
        """The text in the lines `chunk` completes, piece by piece (so the text before a
        malformed event is handed on before the error); nothing more once done."""
        if self.done:
            return
        self.received += len(chunk)
        if self.received > MAX_RESPONSE_BYTES:
            raise ProviderTooLarge(_TOO_LARGE)
        *lines, self.pending = (self.pending + chunk).split(b"\n")
        yield from self._pieces(lines)

    def end(self) -> Iterator[str]:
        """The text of a last line the body ended without a line break after."""
        line, self.pending = self.pending, b""
        if not self.done:
            yield from self._pieces([line])

    def reply(self) -> Reply:
        return self.state.reply()

    def _pieces(self, lines: list[bytes]) -> Iterator[str]:
        for raw in lines:
            line = raw.rstrip(b"\r").decode("utf-8", "replace")
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                self.done = True
                return
            try:
                event = json.loads(payload)
            except ValueError:
                raise ProviderMidAnswer(f"The LLM provider streamed a malformed event: {payload[:200]!r}") from None
            piece = self.state.feed(event)
            if piece:
                yield piece


class _OpenAIStream:
    """Accumulates Chat Completions chunks: text deltas and indexed tool-call pieces."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}
        self.stop: str | None = None
        self.seen = False
        self.usage: dict[str, Any] | None = None

    def feed(self, event: dict[str, Any]) -> str:
        if isinstance(event.get("usage"), dict):  # stream_options.include_usage: the last chunk
            self.usage = event["usage"]
        if "error" in event:
            raise ProviderMidAnswer(f"The LLM provider reported an error mid-answer: {json.dumps(event)[:200]}")
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
            raise ProviderBadAnswer("The LLM provider returned no choice.")
        calls = [ToolCall(c["id"], c["name"], _parse_args(c["arguments"] or "{}"))
                 for _, c in sorted(self.calls.items())]
        return Reply("".join(self.text), calls, self.stop, {"streamed": True, "usage": self.usage},
                     usage_of(self.usage))


class _AnthropicStream:
    """Accumulates Messages stream events: text blocks and tool_use blocks with JSON pieces."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.stop: str | None = None
        self.seen = False
        self.usage: dict[str, Any] = {}
        """message_start's usage (the input and cache counts), updated by message_delta's."""

    def feed(self, event: dict[str, Any]) -> str:
        kind = event.get("type")
        if kind == "error":
            raise ProviderMidAnswer(f"The LLM provider reported an error mid-answer: {json.dumps(event)[:200]}")
        if kind == "message_start":
            self.seen = True
            start = (event.get("message") or {}).get("usage")
            if isinstance(start, dict):
                self.usage.update(start)
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
                return str(delta.get("text", ""))
            if delta.get("type") == "input_json_delta":
                block["json"] += delta.get("partial_json", "")
        elif kind == "message_delta":
            self.stop = (event.get("delta") or {}).get("stop_reason") or self.stop
            if isinstance(event.get("usage"), dict):
                self.usage.update(event["usage"])
        return ""

    def reply(self) -> Reply:
        if not self.seen:
            raise ProviderBadAnswer("The LLM provider returned no content.")
        blocks = [b for _, b in sorted(self.blocks.items())]
        text = "".join(b["text"] for b in blocks if b["type"] == "text")
        calls = [ToolCall(b["id"], b["name"], _parse_args(b["json"] or "{}")) for b in blocks
                 if b["type"] == "tool_use"]
        return Reply(text, calls, self.stop, {"streamed": True, "usage": self.usage or None},
                     usage_of(self.usage or None))
