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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..core.errors import ZcorError
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
    ToolUse,
    Turn,
    Unreachable,
    Used,
    answer,
    frame_messages,
    refusal,
    usage_params,
)

__all__ = ["DEFAULT_MAX_ROUNDS", "FRAME_TOOL", "Conversation", "MemoryBot", "ToolUse", "usage_params"]


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

    def __exit__(self, *exc: object) -> None:
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
        recalled = self.client.recall_batch(self.session, events, self.private)
        self.blocked = list(recalled.get("blocked") or ())
        ids: list[str] = recalled["ids"]
        if any(isinstance(e, dict) and e.get("origin") == "external" for e in events):
            self.origin = {"session": self.session, "senders": batch_senders(events),
                           **({"private": True} if self.private else {})}
        return ids

    def context_header(self) -> str:
        text: str = self.client.context(self.session)["text"]
        return text

    def report_usage(self, reply: Reply, prompt: Prompt, front_end: str) -> None:
        """Tell zcord what the provider said the request cost (`zcor/usage/report`), with
        what zcor added to it; nothing when the provider gave no usage."""
        self.report(usage_params(self.session, reply, prompt, front_end))

    def report(self, params: dict[str, Any] | None) -> None:
        """Send one usage report (core.usage_params; None sends nothing). A zcord that does
        not know the method, or a failure, costs the conversation nothing."""
        if params is None:
            return
        try:
            self.client.request("zcor/usage/report", params)
        except (ClientError, RpcError, ZcorError):
            pass

    # -- running the model's tool calls --------------------------------------------------

    def run(self, call: ToolCall) -> Outcome:
        """Run one call (that passed core.refusal) through the daemon, with the origin."""
        try:
            return Ran(self.client.call_tool(call.name, call.arguments, origin=self.origin))
        except ToolError as e:
            return Failed(e.to_dict())
        except ClientError as e:
            return Unreachable(str(e))

    def execute(self, call: ToolCall, declared: set[str]) -> tuple[Message, ToolUse]:
        """Run one tool call through the daemon, or refuse it (core.refusal).

        Returns the tool-result message for the model and a summary for the person.
        """
        return refusal(call, declared) or answer(call, self.run(call))


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
    _frames: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def frame(self, events: list[dict[str, Any]]) -> list[Message]:
        """The system-made external_event_frame call and result that deliver a batch."""
        return frame_messages(next(self._frames), events)

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
        # the prefix is read once a turn; the tools are declared per request (config may change
        # between rounds), read before the header as each round reads them
        prefix = self.bot.prefix()
        tools = self.bot.tools()
        turn = Turn(session=self.bot.session, prefix=prefix, history=self.transcript[:batch_at],
                    batch=self.transcript[batch_at:], header=self.bot.context_header(), zcor_tools=tools,
                    max_rounds=self.max_rounds, front_end="chat")
        try:  # the sync driver of zcord.bot.core: each step is one call to the provider or zcord
            while not isinstance(step := turn.next_step(), Done):
                if isinstance(step, Ask):
                    turn.replied(self.provider.send(step.prompt, on_text=on_text))
                elif isinstance(step, Run):
                    turn.ran(self.bot.run(step.call))
                elif isinstance(step, Refresh):
                    tools = self.bot.tools()
                    turn.refreshed(self.bot.context_header(), tools)
                elif isinstance(step, Report):
                    self.bot.report(step.params)
                elif isinstance(step, Used) and on_tool:
                    on_tool(step.use)
            return step.reply.text
        finally:  # the rounds that ran stay in the transcript, as the answer does
            self.transcript[batch_at:] = turn.batch
