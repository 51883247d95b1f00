"""The bot side of zcor, for any Python bot (no Textual): connect as the bot, hand the
declared tools to the model, build the system prefix, deliver message batches to
auto-recall, put the context header in front of each request, run the model's tool calls
through the daemon, and refuse any call to a tool not declared in the current request.

A minimal bot:

    from zcord.bot import Conversation, MemoryBot, Provider
    with MemoryBot.connect(session="qq:group:123") as bot:
        conv = Conversation(bot, Provider(cfg, api_key))
        answer = conv.handle([{"text": "我昨天去吃火锅了", "origin": "external",
                               "senderKey": "qq:42", "source": "qq:group:123"}])
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..core.errors import ZcorError
from ..core.fence import fence_tool_result
from ..core.origin import batch_senders
from ..retrieval.llm import (
    Message,
    Prompt,
    Provider,
    Reply,
    ToolCall,
    anthropic_tools,
    openai_tools,
)
from ..transport.client import Client, ClientError, RpcError, ToolError
from .blocked import filter_blocked
from .prompt import assemble

FRAME_TOOL = "external_event_frame"
DEFAULT_MAX_ROUNDS = 8


@dataclass
class ToolUse:
    """What the person is shown about each tool call the model made."""

    name: str
    arguments: Any
    ok: bool
    summary: str


class MemoryBot:
    """One bot session's connection to zcord."""

    def __init__(self, client: Client, session: str, private: bool = False):
        self.client = client
        self.session = session
        self.private = private
        """A one-to-one conversation: sent with every batch and origin, so what it creates
        stays in this session (zcord.service.scope)."""
        self.origin: dict[str, Any] = {"session": session, "senders": [], **({"private": True} if private else {})}
        """Whose messages the model is answering: sent with every tool call (`_meta`
        "zcor/origin"), set by `deliver` from the batch's external senders."""
        self.blocked: list[str] = []
        """The senderKeys of the last batch that zcord says are blocked (`zcor/recall`'s
        `blocked`): their messages are kept from the model (filter_blocked)."""

    @classmethod
    def connect(cls, session: str, socket_path: str | None = None, timeout: float = 30.0,
                private: bool = False) -> MemoryBot:
        return cls(Client(socket_path, role="bot", timeout=timeout, client_name="zcord.bot").connect(), session,
                   private)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> MemoryBot:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- what the model is given -------------------------------------------------------

    def tools(self) -> list[dict[str, Any]]:
        """The tools declared to the model right now (MCP form: name, description, inputSchema)."""
        return self.client.list_tools()

    @staticmethod
    def openai_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return openai_tools(tools)

    @staticmethod
    def anthropic_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return anthropic_tools(tools)

    def prefix(self) -> str:
        return self.client.prefix()

    def deliver(self, events: list[dict[str, Any]]) -> list[str]:
        """Send a batch of incoming events to auto-recall; returns the new recall set. The
        batch's external senders become the origin of the tool calls that follow."""
        answer = self.client.recall_batch(self.session, events, self.private)
        self.blocked = list(answer.get("blocked") or ())
        ids = answer["ids"]
        if any(isinstance(e, dict) and e.get("origin") == "external" for e in events):
            self.origin = {"session": self.session, "senders": batch_senders(events),
                           **({"private": True} if self.private else {})}
        return ids

    def context_header(self) -> str:
        return self.client.context(self.session)["text"]

    def report_usage(self, reply: Reply, prompt: Prompt, front_end: str) -> None:
        """Tell zcord what the provider said the request cost (`zcor/usage/report`), with
        what zcor added to it; nothing when the provider gave no usage. A zcord that does
        not know the method, or a failure, costs the conversation nothing."""
        params = usage_params(self.session, reply, prompt, front_end)
        if params is None:
            return
        try:
            self.client.request("zcor/usage/report", params)
        except (ClientError, RpcError, ZcorError):
            pass

    # -- running the model's tool calls --------------------------------------------------

    def execute(self, call: ToolCall, declared: set[str]) -> tuple[Message, ToolUse]:
        """Run one tool call through the daemon, or refuse it when it was not declared.

        Returns the tool-result message for the model and a summary for the person.
        """
        if call.name not in declared:
            why = ("external_event_frame is synthesized by the system to deliver events; never call it."
                   if call.name == FRAME_TOOL else
                   f"Tool {call.name!r} is not declared in this request; call only the tools you were given.")
            return (Message("tool", json.dumps({"error": {"code": "unknown_tool", "message": why}}),
                            tool_call_id=call.id, is_error=True),
                    ToolUse(call.name, call.arguments, False, "refused: not declared"))
        if not isinstance(call.arguments, dict):
            msg = f"arguments of {call.name} must be a JSON object, got {str(call.arguments)[:100]!r}"
            return (Message("tool", json.dumps({"error": {"code": "invalid_argument", "message": msg}}),
                            tool_call_id=call.id, is_error=True),
                    ToolUse(call.name, call.arguments, False, msg))
        try:
            result = self.client.call_tool(call.name, call.arguments, origin=self.origin)
        except ToolError as e:  # an error message may quote memory text: fenced as the result is
            return (Message("tool", json.dumps({"error": fence_tool_result(e.to_dict())}, ensure_ascii=False),
                            tool_call_id=call.id, is_error=True),
                    ToolUse(call.name, call.arguments, False, e.message))
        except ClientError as e:
            return (Message("tool", json.dumps({"error": {"code": "unavailable", "message": str(e)}}),
                            tool_call_id=call.id, is_error=True),
                    ToolUse(call.name, call.arguments, False, str(e)))
        # memory text in the result goes back to the model fenced (issue 33), as in the header
        return (Message("tool", json.dumps(fence_tool_result(result), ensure_ascii=False), tool_call_id=call.id),
                ToolUse(call.name, call.arguments, True, _summary(call.name, result)))


def usage_params(session: str, reply: Reply, prompt: Prompt, front_end: str,
                 model: str | None = None, protocol: str | None = None) -> dict[str, Any] | None:
    """The params of `zcor/usage/report` for one provider reply (None when it had no usage):
    its token counts and the characters zcor put in the request (the prefix, the header)."""
    u = reply.usage
    if u is None:
        return None
    params: dict[str, Any] = {
        "session": session, "frontEnd": front_end, "inputTokens": u.input_tokens,
        "cachedTokens": u.cached_tokens, "cacheWriteTokens": u.cache_write_tokens, "outputTokens": u.output_tokens,
        "prefixChars": len(prompt.system[0]) if prompt.system else 0, "headerChars": len(prompt.header)}
    if model:
        params["model"] = model[:200]
    if protocol:
        params["protocol"] = protocol
    return params


def _summary(name: str, result: dict[str, Any]) -> str:
    if "id" in result and "title" in result:
        return f"{result['id']} {result['title']}"
    if "items" in result:
        return f"{len(result['items'])} item(s)"
    return ", ".join(f"{k}={v}" for k, v in list(result.items())[:3])


@dataclass
class Conversation:
    """A transcript with one persona, and the loop that answers each incoming batch.

    The transcript holds, per batch, the synthesized external_event_frame call/result pair,
    the model's tool calls and results, and its answer. The context header is never stored:
    each request is laid out by zcord.bot.prompt.assemble, the header just before the newest
    batch, so that everything before it is the same bytes as in the request before.
    """

    bot: MemoryBot
    provider: Provider
    max_rounds: int = DEFAULT_MAX_ROUNDS
    transcript: list[Message] = field(default_factory=list)
    _frames: Any = field(default_factory=lambda: itertools.count(1))

    def frame(self, events: list[dict[str, Any]]) -> list[Message]:
        """The system-made external_event_frame call and result that deliver a batch."""
        n = next(self._frames)
        call = ToolCall(id=f"frame_{n}", name=FRAME_TOOL, arguments={"count": len(events)})
        payload = [{k: v for k, v in {"from": e.get("senderKey"), "source": e.get("source"),
                                      "time": e.get("ts"), "text": e["text"]}.items() if v is not None}
                   for e in events]
        return [Message("assistant", "", tool_calls=[call]),
                Message("tool", json.dumps({"events": payload}, ensure_ascii=False), tool_call_id=call.id)]

    def handle(self, events: list[dict[str, Any]],
               on_tool: Callable[[ToolUse], None] | None = None,
               on_text: Callable[[str], None] | None = None) -> str:
        """Deliver a batch, run the model (and its tool calls) until it answers in text. The
        messages of senders zcord says are blocked are left out of what the model sees (a log
        line says so); when every message was, the model is not asked and the answer is "".

        Args:
            on_tool: told about each tool call the model made (for showing the person).
            on_text: when given, replies are streamed and their text handed over as it comes.
        """
        for e in events:
            e.setdefault("origin", "external")
            e.setdefault("ts", datetime.now(UTC).astimezone().isoformat(timespec="seconds"))
        self.bot.deliver(events)
        if self.bot.blocked:  # a blocked sender's messages never reach the model (issue 33)
            events = filter_blocked(events, self.bot.blocked)
            if not any(e["origin"] == "external" for e in events):
                return ""
        batch_at = len(self.transcript)
        self.transcript += self.frame([e for e in events if e["origin"] == "external"])
        # the prefix is read once a turn: a tool round that marks a memory important changes it
        # from the next batch on, not under this turn's second request (the cache keeps it)
        prefix = self.bot.prefix()
        for _ in range(self.max_rounds):
            tools = self.bot.tools()  # declared per request: config may change between rounds
            declared = {t["name"] for t in tools}
            prompt = assemble(prefix=prefix, history=self.transcript[:batch_at],
                              batch=self.transcript[batch_at:], header=self.bot.context_header(),
                              zcor_tools=tools, session=self.bot.session)
            reply = self.provider.send(prompt, on_text=on_text)
            self.bot.report_usage(reply, prompt, "chat")
            if not reply.tool_calls:
                self.transcript.append(Message("assistant", reply.text))
                return reply.text
            self.transcript.append(Message("assistant", reply.text, tool_calls=reply.tool_calls))
            for call in reply.tool_calls:
                result, use = self.bot.execute(call, declared)
                self.transcript.append(result)
                if on_tool:
                    on_tool(use)
        raise ZcorError(f"The model kept calling tools for {self.max_rounds} rounds without answering; "
                        f"stopped.")
