"""zcor memory for AstrBot: every LLM request of a conversation gets the persona's long-term
memory from a zcord daemon, laid out so the provider's prompt cache keeps working.

On each LLM request the plugin
1. delivers the new user message to zcor's auto-recall as an external event (the sender's
   id becomes `senderKey`, the group or private chat the zcor session: plugin settings),
2. puts zcor's system prefix (PERSONA.md, the memory rules, the important memories) first in
   the request's system prompt, between two fixed markers: the same bytes every request
   while nothing it shows changes, so the system prompt and the history after it stay
   cached from one message to the next;
3. puts the session's context header (the memories recalled for this message) last, with
   the newest user message, as a part AstrBot sends to the model but never saves in the
   conversation history (AstrBot 4.x after 4.14: a temporary part of the user message,
   `mark_as_temp`; AstrBot 4.14 and older: a user message of its own just before the newest
   one, which AstrBot leaves out of what it saves). The header is replaced by the next
   message's; no copy of it is ever stored;
4. offers the tools zcord declares to the bot right now as AstrBot LLM tools, which call the
   daemon as the bot (so relationship tools come and go with the daemon's switch, and every
   call is in zcor's history with actor `model`, the message's sender as its speaker); what
   they return to the model, results and errors, is fenced as the header is
   (`zcord.core.fence.fence_tool_result`);
5. after the model's answer, reports the provider's token usage (input, cached, output) and
   what zcor added (prefix and header characters) to zcord (`zcor/usage/report`), so
   `zcor usage` shows the cache hits.

A private chat (the platform's one-to-one message: AstrBot's `is_private_chat()`,
`MessageType.FRIEND_MESSAGE`) is sent to zcord as private (`"private": true` in the recall
and in each tool call's origin), so what it creates stays in that chat's session (zcord's
`privateScope`); the setting `private_chats` (on by default) turns that off.

A message whose sender zcord says is blocked (`zcor/recall`'s `blocked`) is not sent to the
model at all: the plugin stops the event before AstrBot's request, and logs that it did.

It reaches zcord only through `zcord.client` (install the zcor wheel into AstrBot's Python).
When zcord cannot be reached the plugin logs a warning and the bot answers without memory;
it never fails the request.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from datetime import UTC, datetime
from typing import Any

from astrbot.api import AstrBotConfig, logger
from astrbot.api.event import AstrMessageEvent, filter
from astrbot.api.provider import LLMResponse, ProviderRequest
from astrbot.api.star import Context, Star
from astrbot.core.agent.message import Message, TextPart
from astrbot.core.agent.tool import FunctionTool, ToolSet
from pydantic.dataclasses import dataclass

try:
    from zcord.client import AsyncClient, ClientError, ToolError
except ImportError:  # the plugin loads, says what is missing, and leaves the bot alone
    AsyncClient = None  # type: ignore[assignment,misc]
    ClientError = ToolError = Exception  # type: ignore[assignment,misc]
try:
    from zcord.bot.prompt import assemble
    from zcord.retrieval.llm import usage_of
except ImportError:  # an older zcor wheel: the same layout by hand, usage from AstrBot's counts
    assemble = usage_of = None  # type: ignore[assignment]
try:
    from zcord.core.fence import fence_tool_result
except ImportError:  # an older zcor wheel: results as they are
    def fence_tool_result(value: Any) -> Any:  # type: ignore[misc]
        return value

DEFAULTS = {
    "socket": "",
    "session_template": "{platform}:{chat}:{chat_id}",
    "sender_template": "{platform}:{sender_id}",
    "timeout_seconds": 10.0,
    "private_chats": True,
}
# zcor's prefix in the system prompt sits between these two markers (fixed text: they are the
# same bytes every request, so the prompt cache keeps them). Both are among the
# RESERVED_MARKERS of zcord/core/fence.py: memory text shown in the prefix never holds one.
PROMPT_START = "<!-- zcor memory -->"
PROMPT_END = "<!-- /zcor memory -->"
ADDED = "_zcor_added"
"""Attribute of a ProviderRequest: what this plugin put into it (taken out again when the
hook runs a second time on the same request, so a retried request is not doubled)."""
USAGE = "_zcor_usage"
"""Event extra: the session and the characters zcor added, for the usage report."""
LAST = -100000
"""The hook's priority: after every other plugin's (AstrBot's web search tools run at
-10000), so the header stays the last thing in the request."""
TEMP_PARTS = hasattr(TextPart, "mark_as_temp")
"""AstrBot after 4.14: a content part marked temporary is sent and never saved."""


class HeaderMessage(Message):
    """AstrBot 4.14 and older: the context header as a user message of its own, which
    AstrBot's `_save_to_history` leaves out (its `_no_save`, set on each instance). It reads
    like the dict messages around it in `ProviderRequest.contexts`, for code that reads them
    so."""

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default)

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)


@dataclass
class ZcorTool(FunctionTool):
    """One of zcord's declared tools, run by the daemon as the bot."""

    plugin: Any = None
    origin: Any = None
    """The request's session and sender, sent with the call as its origin (`_meta` "zcor/origin")."""

    async def call(self, context: Any, **kwargs: Any) -> str:
        return await self.plugin.run_tool(self.name, kwargs, self.origin)


class ZcorMemory(Star):
    """Long-term memory from zcord: auto-recall, system prefix and memory tools per LLM request."""

    def __init__(self, context: Context, config: AstrBotConfig | None = None):
        super().__init__(context)
        self.config = {**DEFAULTS, **(dict(config) if config else {})}
        self.client: Any = None
        self.down_logged = False
        self.connecting = asyncio.Lock()  # conversations run concurrently: one connection for all

    # -- settings -----------------------------------------------------------------------

    def fields(self, event: AstrMessageEvent) -> dict[str, str]:
        group = event.get_group_id()
        sender = event.get_sender_id()
        return {
            "platform": event.get_platform_id() or event.get_platform_name(),
            "platform_type": event.get_platform_name(),
            "chat": "group" if group else "private",
            "chat_id": group or sender,
            "sender_id": sender,
            "umo": event.unified_msg_origin,
        }

    def session_of(self, event: AstrMessageEvent) -> str:
        return str(self.config["session_template"]).format(**self.fields(event))

    def sender_of(self, event: AstrMessageEvent) -> str:
        return str(self.config["sender_template"]).format(**self.fields(event))

    def private_of(self, event: AstrMessageEvent) -> bool:
        """Whether the message is the platform's private (one-to-one) chat and the setting
        keeps those private."""
        if not self.config.get("private_chats", True):
            return False
        try:
            return bool(event.is_private_chat())
        except Exception:  # an event without a message type: a group id says it is not private
            return not event.get_group_id()

    # -- the daemon ---------------------------------------------------------------------

    async def daemon(self) -> Any:
        """The connected client, or None (logged once per outage) when zcord is not there."""
        if AsyncClient is None:
            if not self.down_logged:
                logger.warning("zcor: the zcord package is not installed in AstrBot's Python "
                               "(pip install the zcor wheel); answering without memory")
                self.down_logged = True
            return None
        if self.client is not None and self.client.connected:
            return self.client
        async with self.connecting:
            if self.client is not None and self.client.connected:
                return self.client
            return await self.reconnect()

    async def reconnect(self) -> Any:
        if self.client is not None:  # the connection broke: start afresh
            try:
                await self.client.close()
            except Exception:
                pass
            self.client = None
        timeout = float(self.config["timeout_seconds"])
        client = AsyncClient(self.config["socket"] or None, role="bot", timeout=timeout,
                             connect_timeout=timeout, reconnect=False, client_name="astrbot_plugin_zcor")
        try:
            await client.connect()
        except (ClientError, OSError) as e:
            self.unavailable(e, client.path)
            return None
        self.client = client
        if self.down_logged:
            logger.info(f"zcor: connected to zcord at {client.path}; memory is back")
            self.down_logged = False
        return client

    def unavailable(self, err: BaseException, where: Any = None) -> None:
        if where is None and self.client is not None:
            where = self.client.path
        if not self.down_logged:
            logger.warning(f"zcor: zcord at {where} is unavailable ({err}); answering without memory")
            self.down_logged = True

    async def run_tool(self, name: str, arguments: dict[str, Any], origin: dict[str, Any] | None = None) -> str:
        """Run a model's tool call through zcord; errors become a result the model can act on."""
        client = await self.daemon()
        if client is None:
            return json.dumps({"error": {"code": "unavailable",
                                         "message": "The memory is unavailable right now; answer without it."}})
        # memory text in a result or an error goes back to the model fenced, as in the header
        try:
            result = await client.call_tool(name, arguments, **told(client, origin))
        except ToolError as e:
            return json.dumps({"error": fence_tool_result(e.to_dict())}, ensure_ascii=False)
        except (ClientError, OSError) as e:
            self.unavailable(e)
            return json.dumps({"error": fence_tool_result({"code": "unavailable",
                                                           "message": f"The memory is unavailable: {e}"})},
                              ensure_ascii=False)
        return json.dumps(fence_tool_result(result), ensure_ascii=False)

    # -- the hooks ----------------------------------------------------------------------

    @filter.on_llm_request(priority=LAST)
    async def zcor_on_llm_request(self, event: AstrMessageEvent, req: ProviderRequest) -> None:
        """Recall for the new message; prefix first in the system prompt, the context header
        last (never saved), memory tools into the request."""
        take_out(req)  # a retried request: what this hook added before goes first
        client = await self.daemon()
        if client is None:
            return
        session = self.session_of(event)
        sender = self.sender_of(event)
        # the message's sender speaks: the tool calls of this request answer them
        origin: dict[str, Any] = {"session": session, "senders": [sender], "speaker": sender}
        private = self.private_of(event)
        if private:  # a one-to-one chat: what it creates stays in its session
            origin["private"] = True
        text = event.get_message_str() or req.prompt or ""
        try:
            if text.strip():
                answer = await client.request("zcor/recall", {"session": session, "events": [{
                    "text": text, "origin": "external", "senderKey": sender,
                    "source": session, "ts": datetime.now(UTC).isoformat(timespec="seconds")}],
                    **({"private": True} if private else {})})
                if sender in ((answer or {}).get("blocked") or ()):
                    # a blocked sender's message never reaches the model: no request at all
                    logger.info(f"zcor: {sender} is blocked; their message is not sent to the model")
                    event.stop_event()
                    return
            prefix = await client.prefix()
            header = (await client.context(session))["text"]
            tools = await client.list_tools()
        except (ClientError, OSError) as e:
            self.unavailable(e)
            return
        block, header = add_memory(req, prefix, header)
        event.set_extra(USAGE, {"session": session, "prefixChars": len(block), "headerChars": len(header)})
        if req.func_tool is None:
            req.func_tool = ToolSet()
        for tool in tools:
            req.func_tool.add_tool(ZcorTool(name=tool["name"], description=tool.get("description", ""),
                                            parameters=tool.get("inputSchema") or {"type": "object", "properties": {}},
                                            handler_module_path=__name__, plugin=self, origin=origin))

    @filter.on_llm_response()
    async def zcor_on_llm_response(self, event: AstrMessageEvent, resp: LLMResponse) -> None:
        """Tell zcord what the provider said the answer cost (`zcor/usage/report`); a zcord
        that does not know the method, or any failure, costs the conversation nothing."""
        added = event.get_extra(USAGE)
        if not isinstance(added, dict) or self.client is None or not self.client.connected:
            return
        params = usage_params(resp)
        if params is None:
            return
        params = {"session": added["session"], "frontEnd": "astrbot", **params,
                  "prefixChars": added["prefixChars"], "headerChars": added["headerChars"]}
        try:
            await self.client.request("zcor/usage/report", params,
                                      timeout=min(float(self.config["timeout_seconds"]), 5.0))
        except Exception as e:  # noqa: BLE001 - a report is never worth failing the answer
            logger.debug(f"zcor: usage report not taken ({e})")

    async def terminate(self) -> None:
        if self.client is not None:
            await self.client.close()
            self.client = None


def told(client: Any, origin: dict[str, Any] | None) -> dict[str, Any]:
    """The origin as call_tool's keyword, when this zcord client library takes one (an older
    one does not: zcord then infers the origin from the batch the plugin delivered)."""
    if origin is None or "origin" not in inspect.signature(client.call_tool).parameters:
        return {}
    return {"origin": origin}


def add_memory(req: ProviderRequest, prefix: str, header: str) -> tuple[str, str]:
    """Put zcor's prefix first in the request's system prompt and the context header last;
    returns the prefix block and the header as added. What was added is remembered on the
    request (take_out removes exactly that)."""
    block = f"{PROMPT_START}\n{prefix.strip()}\n{PROMPT_END}" if prefix.strip() else ""
    before = system = req.system_prompt or ""
    if assemble is not None:  # zcor's assembler: its order of the system parts, its header
        laid = assemble(prefix=block, system=system, header=header if header.strip() else "")
        header = laid.header
        if block:  # without one AstrBot's prompt stays exactly as it was
            system = laid.system_text
    else:
        header = header.strip("\n") if header.strip() else ""
        if block:
            system = block + ("\n\n" + system if system.strip() else "")
    added: dict[str, Any] = {"system": block, "before": before}
    if header:
        if req.conversation is None:
            # no conversation AstrBot keeps (a third-party agent runner, a plugin's own
            # request): nothing is saved and there is no history to keep cached
            system = system + "\n\n" + header if system else header
            added["systemTail"] = header
        elif TEMP_PARTS:  # sent with the newest user message, left out when AstrBot saves it
            part = TextPart(text=header).mark_as_temp()
            req.extra_user_content_parts.append(part)
            added["part"] = part
        else:  # AstrBot 4.14: a user message just before the newest one, never saved
            message = HeaderMessage(role="user", content=header)
            message._no_save = True  # read by AstrBot's _save_to_history
            req.contexts.append(message)
            added["message"] = message
    req.system_prompt = added["after"] = system
    setattr(req, ADDED, added)
    return block, header


def take_out(req: ProviderRequest) -> None:
    """Remove what add_memory put into this request (nothing when it put nothing in)."""
    added = getattr(req, ADDED, None)
    if not isinstance(added, dict):
        return
    setattr(req, ADDED, None)
    system = req.system_prompt or ""
    if system == added.get("after"):  # as add_memory left it
        system = added.get("before", "")
    else:  # another plugin changed it since: take out ours only
        if (tail := added.get("systemTail")) and system.endswith("\n\n" + tail):
            system = system[:-len(tail) - 2]
        if (block := added.get("system")) and system.startswith(block + "\n\n"):
            system = system[len(block) + 2:]
    req.system_prompt = system
    if (part := added.get("part")) is not None:
        req.extra_user_content_parts[:] = [p for p in req.extra_user_content_parts if p is not part]
    if (message := added.get("message")) is not None:
        req.contexts[:] = [m for m in req.contexts if m is not message]


def usage_params(resp: LLMResponse) -> dict[str, Any] | None:
    """Token counts of one answer: the provider's own usage object when AstrBot kept the raw
    completion (OpenAI, Anthropic and DeepSeek fields, read by zcord's usage_of), else
    AstrBot's TokenUsage; with the model and wire protocol when known. None without usage."""
    raw = getattr(resp, "raw_completion", None)
    usage = getattr(raw, "usage", None)
    if usage is not None and not isinstance(usage, dict):
        usage = usage.model_dump() if hasattr(usage, "model_dump") else None
    parsed = usage_of(usage) if usage_of is not None and usage else None
    params: dict[str, Any] = {}
    if parsed is not None:
        params = {"inputTokens": parsed.input_tokens, "cachedTokens": parsed.cached_tokens,
                  "cacheWriteTokens": parsed.cache_write_tokens, "outputTokens": parsed.output_tokens}
        params["protocol"] = "openai" if "prompt_tokens" in usage or "completion_tokens" in usage else "anthropic"
    else:
        counted = getattr(resp, "usage", None)
        if counted is None:
            return None
        cached = max(int(getattr(counted, "input_cached", 0) or 0), 0)
        params = {"inputTokens": max(int(getattr(counted, "input_other", 0) or 0), 0) + cached,
                  "cachedTokens": cached, "cacheWriteTokens": 0,
                  "outputTokens": max(int(getattr(counted, "output", 0) or 0), 0)}
    model = getattr(raw, "model", None)
    if isinstance(model, str) and model:
        params["model"] = model[:200]
    return params
