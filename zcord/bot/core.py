"""The bot core, sans-I/O: the rules every zcor front end follows when it talks to a model.

One object, `Turn`, holds one turn of a conversation (the model asked, maybe several times,
until it answers in text or hands calls back to the front end) and does no I/O: it says what
must be done next as a step, and the driver does it and feeds the result back, as h11 holds
HTTP's rules for drivers that own the sockets. `zcor chat` and the bot library
(zcord.bot.bot.Conversation) drive it synchronously, the OpenAI-compatible endpoint
(zcord.bot.proxy) from asyncio; a rule changed here changes for both.

    turn = Turn(session=..., prefix=..., history=..., batch=..., header=..., zcor_tools=...)
    while not isinstance(step := turn.next_step(), Done):
        Ask      send step.prompt to the model          -> turn.replied(reply)
        Run      run step.call on zcord                  -> turn.ran(Ran | Failed | Unreachable)
        Refresh  read the context header (and the tools) -> turn.refreshed(header, tools)
        Report   send step.params as zcor/usage/report   (nothing to feed back)
        Used     show step.use to the person             (nothing to feed back)

What it owns:

- the tool-call rule (`refusal`, `answer`): a call to a tool not declared in this request,
  the system's external_event_frame included, or with arguments that are not an object, is
  refused without reaching zcord; a result or a tool's error goes back to the model fenced
  (zcord.core.fence), a zcord that cannot be asked is an `unavailable` error;
- the tool loop: zcor's calls run, the front end's own (`client_tools`) handed back in
  `Done`, the header re-read after each tool round, at most `max_rounds` model requests;
- the layout of each request (zcord.bot.prompt.assemble) and what is reported of its cost
  (`usage_params`);
- the frame that delivers a batch of events (`frame_messages`).

Streaming is the driver's: the text pieces go from the provider to the person as they come,
and the whole reply is fed back once.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.errors import UnknownTool, ZcorError
from ..core.fence import fence_tool_result
from ..retrieval.llm import Message, Prompt, Reply, ToolCall, Usage
from .prompt import assemble

__all__ = ["DEFAULT_MAX_ROUNDS", "FRAME_TOOL", "Ask", "Done", "Failed", "Outcome", "Ran", "Refresh", "Report",
           "Run", "Step", "ToolUse", "TooManyRounds", "Turn", "TurnMisuse", "Unreachable", "Used", "answer",
           "frame_messages", "refusal", "usage_params"]

FRAME_TOOL = "external_event_frame"
DEFAULT_MAX_ROUNDS = 8

# -- the tool-call rule -----------------------------------------------------------------------


@dataclass(frozen=True)
class ToolUse:
    """What the person is shown about each tool call the model made."""

    name: str
    arguments: Any
    ok: bool
    summary: str


@dataclass(frozen=True)
class Ran:
    """zcord ran the call: its structured result."""

    result: dict[str, Any]


@dataclass(frozen=True)
class Failed:
    """The tool refused or failed: the error as zcord gave it (ToolError.to_dict())."""

    error: dict[str, Any]


@dataclass(frozen=True)
class Unreachable:
    """zcord could not be asked; the sentence says why."""

    message: str


Outcome = Ran | Failed | Unreachable
"""What came of running one call on zcord."""


def _error(call: ToolCall, error: Mapping[str, Any], shown: str) -> tuple[Message, ToolUse]:
    return (Message("tool", json.dumps({"error": error}, ensure_ascii=False), tool_call_id=call.id, is_error=True),
            ToolUse(call.name, call.arguments, False, shown))


def refusal(call: ToolCall, declared: Collection[str]) -> tuple[Message, ToolUse] | None:
    """The refusal of a call that must not reach zcord (a tool not declared in this request,
    external_event_frame, arguments that are not an object), or None to run it. Returns the
    tool-result message for the model and what the person is shown."""
    if call.name not in declared:
        why = ("external_event_frame is synthesized by the system to deliver events; never call it."
               if call.name == FRAME_TOOL else UnknownTool.undeclared(call.name).message)
        return _error(call, {"code": "unknown_tool", "message": why}, "refused: not declared")
    if not isinstance(call.arguments, dict):
        why = f"arguments of {call.name} must be a JSON object, got {str(call.arguments)[:100]!r}"
        return _error(call, {"code": "invalid_argument", "message": why}, why)
    return None


def answer(call: ToolCall, outcome: Outcome) -> tuple[Message, ToolUse]:
    """The tool-result message for the model, and what the person is shown, for what came of
    running `call`. Memory text in a result or a tool's error goes back fenced, as in the
    header (issue 33)."""
    if isinstance(outcome, Failed):
        return _error(call, fence_tool_result(outcome.error), str(outcome.error.get("message", "")))
    if isinstance(outcome, Unreachable):
        return _error(call, {"code": "unavailable", "message": outcome.message}, outcome.message)
    return (Message("tool", json.dumps(fence_tool_result(outcome.result), ensure_ascii=False), tool_call_id=call.id),
            ToolUse(call.name, call.arguments, True, _summary(outcome.result)))


def _summary(result: dict[str, Any]) -> str:
    if "id" in result and "title" in result:
        return f"{result['id']} {result['title']}"
    if "items" in result:
        return f"{len(result['items'])} item(s)"
    return ", ".join(f"{k}={v}" for k, v in list(result.items())[:3])


# -- what a batch and a request look like -----------------------------------------------------


def frame_messages(n: int, events: Sequence[Mapping[str, Any]]) -> list[Message]:
    """The system-made external_event_frame call and result that deliver a batch (the n-th
    of a conversation: the call's id is frame_<n>)."""
    call = ToolCall(id=f"frame_{n}", name=FRAME_TOOL, arguments={"count": len(events)})
    payload = [{k: v for k, v in {"from": e.get("senderKey"), "source": e.get("source"),
                                  "time": e.get("ts"), "text": e["text"]}.items() if v is not None}
               for e in events]
    return [Message("assistant", "", tool_calls=[call]),
            Message("tool", json.dumps({"events": payload}, ensure_ascii=False), tool_call_id=call.id)]


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


def _add(total: Usage | None, u: Usage | None) -> Usage | None:
    if u is None:
        return total
    if total is None:
        return u
    return Usage(total.input_tokens + u.input_tokens, total.cached_tokens + u.cached_tokens,
                 total.cache_write_tokens + u.cache_write_tokens, total.output_tokens + u.output_tokens)


# -- the steps of a turn ----------------------------------------------------------------------


@dataclass(frozen=True)
class Ask:
    """Send this request to the model; feed the reply to `Turn.replied`."""

    prompt: Prompt


@dataclass(frozen=True)
class Run:
    """Run this call of one of zcor's tools on zcord (it passed the tool-call rule); feed
    what came of it to `Turn.ran`."""

    call: ToolCall


@dataclass(frozen=True)
class Refresh:
    """A tool round ran: read the context header again (and the declared tools, where the
    front end reads them per request); feed them to `Turn.refreshed`."""


@dataclass(frozen=True)
class Report:
    """Tell zcord what the last request cost (`zcor/usage/report` with these params)."""

    params: dict[str, Any]


@dataclass(frozen=True)
class Used:
    """The model called a tool: what the person may be shown about it."""

    use: ToolUse


@dataclass(frozen=True)
class Done:
    """The turn is over: the model's last reply, the calls to the front end's own tools it
    made (handed back untouched), and the usage of every request of the turn added up."""

    reply: Reply
    client_calls: tuple[ToolCall, ...]
    usage: Usage | None


Step = Ask | Run | Refresh | Report | Used | Done


class TooManyRounds(ZcorError):
    """The model kept calling zcor's tools for max_rounds requests without answering."""

    code = "too_many_tool_rounds"


class TurnMisuse(RuntimeError):
    """A driver fed the turn what it did not ask for (a bug in the driver, never the model's)."""


class Turn:
    """One turn of a conversation, sans-I/O: the tool loop, the tool-call rule and the
    layout of each request, driven by `next_step` and the feeding methods.

    Args:
        session: the zcor session (the usage report's and the provider cache key's).
        prefix: zcor's system prefix, read once a turn: a tool round that marks a memory
            important changes it from the next turn on, not under this turn's next request.
        history: the conversation before the newest batch.
        batch: the newest batch; the turn's tool rounds and its answer are added to it.
        header: the context header for the first request.
        zcor_tools: the tools zcord declares (MCP form); a call to any other is refused.
        system: the front end's own leading system text.
        client_tools: the front end's own tools: calls to them end the turn, handed back.
        max_rounds: the most model requests in a turn.
        front_end, model, protocol: what the usage report names.
    """

    def __init__(self, *, session: str, prefix: str, history: Sequence[Message], batch: Sequence[Message],
                 header: str, zcor_tools: Sequence[dict[str, Any]], system: str = "",
                 client_tools: Sequence[dict[str, Any]] = (), max_rounds: int = DEFAULT_MAX_ROUNDS,
                 front_end: str = "chat", model: str | None = None, protocol: str | None = None):
        self.session, self.prefix, self.system = session, prefix, system
        self.history = tuple(history)
        self.batch: list[Message] = list(batch)
        """The newest batch, then this turn's tool rounds (and, once Done, its answer)."""
        self.header = header
        self.zcor_tools = tuple(zcor_tools)
        self.client_tools = tuple(client_tools)
        self._client_names = frozenset(t["name"] for t in self.client_tools)
        self.max_rounds = max_rounds
        self.front_end, self.model, self.protocol = front_end, model, protocol
        self.rounds = 0
        """Model requests asked for so far."""
        self.usage: Usage | None = None
        self._steps: deque[Step] = deque()
        self._waiting: type[Ask] | type[Run] | type[Refresh] | None = None
        self._reply: Reply | None = None
        self._ours: list[ToolCall] = []
        self._theirs: list[ToolCall] = []
        self._results: list[Message] = []
        self._declared: frozenset[str] = frozenset()
        self._stopped = False
        self._asked = Prompt()
        self._ask()

    # -- the driver's side --

    def next_step(self) -> Step:
        """What the driver must do now. Raises TooManyRounds when the model kept calling
        tools for max_rounds requests (after the last round's Used steps), TurnMisuse when
        the step handed out before still waits for its result. Done is handed out again to
        a driver that asks after it."""
        if self._waiting is not None:
            raise TurnMisuse(f"the turn still waits for the result of {self._waiting.__name__}")
        if not self._steps:
            if self._stopped:
                raise TooManyRounds(f"The model kept calling zcor's tools for {self.max_rounds} rounds without "
                                    f"answering; stopped.")
            raise TurnMisuse("the turn has no step to hand out")  # cannot happen: every path queues one
        step = self._steps[0]
        if isinstance(step, Done):
            return step
        self._steps.popleft()
        if isinstance(step, (Ask, Run, Refresh)):
            self._waiting = type(step)
        return step

    def replied(self, reply: Reply) -> None:
        """The model's reply to the last Ask."""
        self._fed(Ask)
        self.usage = _add(self.usage, reply.usage)
        params = usage_params(self.session, reply, self._asked, self.front_end, self.model, self.protocol)
        if params is not None:
            if not self.prefix:
                params["prefixChars"] = 0  # the system text is the front end's alone
            self._steps.append(Report(params))
        self._reply = reply
        self._ours = [c for c in reply.tool_calls if c.name not in self._client_names]
        self._theirs = [c for c in reply.tool_calls if c.name in self._client_names]
        self._results = []
        self._next_call()

    def ran(self, outcome: Outcome) -> None:
        """What came of the last Run."""
        self._fed(Run)
        self._took(answer(self._ours[len(self._results)], outcome))
        self._next_call()

    def refreshed(self, header: str | None = None, tools: Sequence[dict[str, Any]] | None = None) -> None:
        """The context header and the declared tools after a tool round; None keeps the one
        the turn had (zcord could not say, or the front end keeps its tool list)."""
        self._fed(Refresh)
        if header is not None:
            self.header = header
        if tools is not None:
            self.zcor_tools = tuple(tools)
        self._ask()

    # -- the rules --

    def _fed(self, kind: type[Ask] | type[Run] | type[Refresh]) -> None:
        if self._waiting is not kind:
            waits = self._waiting.__name__ if self._waiting else "nothing"
            raise TurnMisuse(f"the result of {kind.__name__} was fed, but the turn waits for {waits}")
        self._waiting = None

    def _prompt(self) -> Prompt:
        return assemble(prefix=self.prefix, system=self.system, history=self.history, batch=self.batch,
                        header=self.header, zcor_tools=self.zcor_tools, client_tools=self.client_tools,
                        session=self.session)

    def _ask(self) -> None:
        self.rounds += 1
        # the calls of a reply are checked against the tools declared in the request it answers
        self._declared = frozenset(t["name"] for t in self.zcor_tools)
        self._asked = self._prompt()
        self._steps.append(Ask(self._asked))

    def _took(self, result: tuple[Message, ToolUse]) -> None:
        self._results.append(result[0])
        self._steps.append(Used(result[1]))

    def _next_call(self) -> None:
        """Hand out the next of zcor's calls to run, the refused ones answered on the way;
        after the last, end the round."""
        while len(self._results) < len(self._ours):
            call = self._ours[len(self._results)]
            refused = refusal(call, self._declared)
            if refused is None:
                self._steps.append(Run(call))
                return
            self._took(refused)
        self._round_over()

    def _round_over(self) -> None:
        reply = self._reply
        assert reply is not None
        if self._theirs or not self._ours:
            # the answer, or calls only the front end can run (zcor's in the same reply ran)
            self.batch.append(Message("assistant", reply.text, tool_calls=list(self._theirs)))
            self._steps.append(Done(reply, tuple(self._theirs), self.usage))
            return
        self.batch.append(Message("assistant", reply.text, tool_calls=list(self._ours)))
        self.batch += self._results
        if self.rounds >= self.max_rounds:
            self._stopped = True
        else:
            self._steps.append(Refresh())
