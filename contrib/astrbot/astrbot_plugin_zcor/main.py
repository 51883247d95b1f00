"""zcor memory for AstrBot: every LLM request of a conversation gets the persona's long-term
memory from a zcord daemon.

On each LLM request the plugin
1. delivers the new user message to zcor's auto-recall as an external event (the sender's
   id becomes `senderKey`, the group or private chat the zcor session: plugin settings),
2. puts zcor's system prefix (PERSONA.md, the memory rules, the important memories) and the
   session's context header (the recalled memories) into the request's system prompt,
3. offers the tools zcord declares to the bot right now as AstrBot LLM tools, which call the
   daemon as the bot (so relationship tools come and go with the daemon's switch, and every
   call is in zcor's history with actor `model`).

It reaches zcord only through `zcord.client` (install the zcor wheel into AstrBot's Python).
When zcord cannot be reached the plugin logs a warning and the bot answers without memory;
it never fails the request.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from datetime import UTC, datetime
from typing import Any

from astrbot.api import AstrBotConfig, logger
from astrbot.api.event import AstrMessageEvent, filter
from astrbot.api.provider import ProviderRequest
from astrbot.api.star import Context, Star
from astrbot.core.agent.tool import FunctionTool, ToolSet
from pydantic.dataclasses import dataclass

try:
    from zcord.client import AsyncClient, ClientError, ToolError
except ImportError:  # the plugin loads, says what is missing, and leaves the bot alone
    AsyncClient = None  # type: ignore[assignment,misc]
    ClientError = ToolError = Exception  # type: ignore[assignment,misc]

DEFAULTS = {
    "socket": "",
    "session_template": "{platform}:{chat}:{chat_id}",
    "sender_template": "{platform}:{sender_id}",
    "timeout_seconds": 10.0,
}
# Mark the part of the system prompt this plugin added, so a retried request is not doubled:
# `<!-- zcor memory N -->`, a newline, the N characters of zcor's text, a newline,
# `<!-- /zcor memory N -->`. The length makes the block's end exact: text inside it (zcor
# fences memory text so that it never holds a marker, but PERSONA.md is the operator's) cannot
# end it early, and removing it takes the whole block. Both markers are among the
# RESERVED_MARKERS of zcord/core/fence.py.
PROMPT_START = "<!-- zcor memory"
PROMPT_END = "<!-- /zcor memory"
_BLOCK_START = re.compile(r"<!-- zcor memory (\d{1,9}) -->\n")


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
        try:
            result = await client.call_tool(name, arguments, **told(client, origin))
        except ToolError as e:
            return json.dumps({"error": e.to_dict()}, ensure_ascii=False)
        except (ClientError, OSError) as e:
            self.unavailable(e)
            return json.dumps({"error": {"code": "unavailable", "message": f"The memory is unavailable: {e}"}})
        return json.dumps(result, ensure_ascii=False)

    # -- the hook -----------------------------------------------------------------------

    @filter.on_llm_request()
    async def zcor_on_llm_request(self, event: AstrMessageEvent, req: ProviderRequest) -> None:
        """Recall for the new message; prefix, context header and memory tools into the request."""
        client = await self.daemon()
        if client is None:
            return
        session = self.session_of(event)
        origin = {"session": session, "senders": [self.sender_of(event)]}
        text = event.get_message_str() or req.prompt or ""
        try:
            if text.strip():
                await client.recall(session, [{
                    "text": text, "origin": "external", "senderKey": self.sender_of(event),
                    "source": session, "ts": datetime.now(UTC).isoformat(timespec="seconds")}])
            prefix = await client.prefix()
            header = (await client.context(session))["text"]
            tools = await client.list_tools()
        except (ClientError, OSError) as e:
            self.unavailable(e)
            return
        memory = prefix.strip() + ("\n\n" + header.strip() if header.strip() else "")
        req.system_prompt = add_memory(req.system_prompt or "", memory)
        if req.func_tool is None:
            req.func_tool = ToolSet()
        for tool in tools:
            req.func_tool.add_tool(ZcorTool(name=tool["name"], description=tool.get("description", ""),
                                            parameters=tool.get("inputSchema") or {"type": "object", "properties": {}},
                                            handler_module_path=__name__, plugin=self, origin=origin))

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


def add_memory(system_prompt: str, memory: str) -> str:
    """The system prompt with zcor's part first (replacing the one a retried request had)."""
    system_prompt = remove_memory(system_prompt)
    n = len(memory)
    block = f"{PROMPT_START} {n} -->\n{memory}\n{PROMPT_END} {n} -->"
    return block + ("\n\n" + system_prompt if system_prompt.strip() else "")


def remove_memory(system_prompt: str) -> str:
    """The system prompt without this plugin's blocks (and the blank line after each), each
    taken whole from its start marker to the end marker its length names; what the block
    was added to comes back as it was."""
    pos = 0
    while (m := _BLOCK_START.search(system_prompt, pos)) is not None:
        n = int(m.group(1))
        end = f"\n{PROMPT_END} {n} -->"
        if not system_prompt.startswith(end, m.end() + n):
            pos = m.start() + 1  # not a whole block of ours: leave it
            continue
        stop = m.end() + n + len(end)
        if system_prompt.startswith("\n\n", stop):
            stop += 2
        system_prompt = system_prompt[:m.start()] + system_prompt[stop:]
        pos = m.start()
    return system_prompt
