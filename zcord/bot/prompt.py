"""The prompt assembler: where zcor puts what in a model request, for every front end.

Providers bill the longest prefix a request shares with an earlier one at a fraction of the
price (OpenAI and DeepSeek automatically, Anthropic at `cache_control` breakpoints). So the
parts that change rarely come first and the one part that changes with every batch, the
auto-recall context header, comes last:

    tools (zcor's in zcord's order, then the front end's)
    system: zcor's prefix (persona, rules, important memories), then the front end's own
            leading system text
    the history, as the front end keeps it (zcor's header never in it)
    the context header                      <- per batch, re-rendered each model round
    the newest batch (and this turn's tool rounds)

`assemble` is pure: no I/O, no clock, no counter, so the same inputs give the same Prompt and
the same wire bytes (zcord.retrieval.llm renders a Prompt for each protocol). The header is
not a message of the history: it is placed when the Prompt is rendered, so no front end can
store it by accident.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from ..retrieval.llm import Message, Prompt

__all__ = ["Prompt", "assemble", "batch_start", "cache_key"]


def assemble(*, prefix: str = "", system: str = "", history: Sequence[Message] = (),
             batch: Sequence[Message] = (), header: str = "",
             zcor_tools: Sequence[dict[str, Any]] = (), client_tools: Sequence[dict[str, Any]] = (),
             session: str | None = None) -> Prompt:
    """Lay out one request.

    Args:
        prefix: zcor's system prefix (`zcor/prefix`), byte-stable while nothing it shows changes.
        system: the front end's own leading system text (a character card, say); "" for none.
        history: the conversation before the newest batch, as the front end keeps it.
        batch: the newest batch (the messages that triggered recall) and, within a turn, the
            model's tool calls and their results so far.
        header: the context header for the batch (`zcor/context`), "" when nothing is recalled.
        zcor_tools: the tools zcord declares, in zcord's order.
        client_tools: the front end's own tools, in its order, after zcor's.
        session: the zcor session (its cache key is derived from it, never sent as it is).

    Returns:
        The Prompt (zcord.retrieval.llm), which Provider.send renders for its protocol.
    """
    names = {t["name"] for t in zcor_tools}
    tools = tuple(zcor_tools) + tuple(t for t in client_tools if t["name"] not in names)
    parts = tuple(p for p in (prefix.strip("\n"), system) if p.strip())
    return Prompt(system=parts, messages=tuple(history) + tuple(batch), batch_at=len(history),
                  header=header.strip("\n"), tools=tools, cache_key=cache_key(session) if session else None)


def batch_start(messages: Sequence[Message]) -> int:
    """Where the newest batch begins in a front end's message list: the first of the user
    messages that end the list or are followed only by this turn's tool rounds (assistant
    tool calls and tool results). With no user message at all, the end of the list."""
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "user"), None)
    if last is None:
        return len(messages)
    if any(m.role not in ("assistant", "tool") or (m.role == "assistant" and not m.tool_calls)
           for m in messages[last + 1:]):
        # an answer came after the last user message: the batch is what follows it, if anything
        return len(messages)
    start = last
    while start > 0 and messages[start - 1].role == "user":
        start -= 1
    return start


def cache_key(session: str) -> str:
    """The provider-side cache key for a session: a digest, so the session's name (a chat's
    id, a person's key) is never sent to the provider."""
    return "zcor-" + hashlib.sha256(session.encode("utf-8", "surrogatepass")).hexdigest()[:24]
