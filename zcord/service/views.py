"""The bot's views of the Memory (a part of the Service, `views`): the system prefix, a
batch's recall set with blocked senders' messages left out, the context header, the
operator's recall explanation and the recall log's header of a batch, and the bot's
token-usage reports. None of them is a tool call: nothing is recorded.
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..core.config import Config
from ..core.errors import InvalidArgument, RateLimited
from ..core.layout import PERSONA_FILE
from ..core.state import MemoryState
from ..retrieval.prefix import build_prefix
from ..retrieval.recall import Event, RecallSessions, check_session, parse_events, render_header
from . import scope

if TYPE_CHECKING:
    from .logbudget import LogBudget
    from .parts import Holds
    from .trust import TrustBook
    from .usage import UsageBook


class ViewHost(Protocol):
    """What the bot's views use of the Service."""

    @property
    def lock(self) -> AbstractContextManager[Any]: ...
    @property
    def dir(self) -> Path: ...
    @property
    def config(self) -> Config: ...
    @property
    def state(self) -> MemoryState: ...
    @property
    def review(self) -> Holds: ...
    @property
    def sessions(self) -> RecallSessions: ...
    @property
    def trust(self) -> TrustBook: ...
    @property
    def usage(self) -> UsageBook: ...
    @property
    def usage_budget(self) -> LogBudget: ...

    @property
    def private_sessions(self) -> set[str]: ...

    def refresh_synonyms(self) -> None: ...


class BotViews:
    """What the bot reads of the Memory and reports to it, outside the tool calls."""

    def __init__(self, svc: ViewHost) -> None:
        self.svc = svc

    def prefix(self) -> str:
        """The system prefix, built from live state and PERSONA.md."""
        svc = self.svc
        with svc.lock:
            # held changes wait for review: the approved important list, memories as last approved
            st = cast(MemoryState, svc.review.view(svc.state))
            if svc.state.scopes and svc.config.private_scope == "session":
                # the prefix is shared by every session: no private conversation's memory is in it
                st = cast(MemoryState, scope.WithoutScoped(st))
            return build_prefix(st, svc.dir / PERSONA_FILE, svc.config.relationship_memory)

    def recall_batch(self, session: str, events: Any, private: Any = False) -> dict[str, Any]:
        """`zcor/recall`'s answer: the session's new recall set (`ids`, best first) and, when
        any, the senderKeys of the batch's external events whose sender is blocked, as the
        bot gave them (`blocked`), so a front end can keep those messages from the model.
        `private`: the session is a one-to-one conversation (scope.py); a batch with an
        external event sets or clears it for the session."""
        svc = self.svc
        check_session(session)
        if not isinstance(private, bool):
            raise InvalidArgument("private must be true or false", field="private")
        parsed = parse_events(events)
        with svc.lock:
            if any(e.origin == "external" for e in parsed):
                if private:
                    svc.private_sessions.add(session)
                else:
                    svc.private_sessions.discard(session)
            svc.refresh_synonyms()
            blocked = self._blocked_senders(parsed)
            kept = self._unblocked(session, parsed)
            ids = [] if kept is None else \
                svc.sessions.recall(session, kept, svc.config.recall_budget, svc.config.recall_ranking)
        return {"ids": ids, **({"blocked": blocked} if blocked else {})}

    def _blocked_senders(self, events: list[Event]) -> list[str]:
        svc = self.svc
        default = svc.config.default_trust
        if not svc.trust.levels and default != "blocked":
            return []
        out: dict[str, None] = {}
        for e in events:
            if e.origin == "external" and e.sender_key not in out and \
                    svc.trust.level(e.sender_key or "", default) == "blocked":
                out[e.sender_key or ""] = None
        return list(out)

    def _unblocked(self, session: str, events: list[Event]) -> list[Event] | None:
        """The batch without blocked senders' external events; None (and the session's recall
        set emptied) when every external event came from a blocked sender."""
        svc = self.svc
        default = svc.config.default_trust
        if not svc.trust.levels and default != "blocked":
            return events
        external = [e for e in events if e.origin == "external"]
        kept = [e for e in events if e.origin != "external"
                or svc.trust.level(e.sender_key or "", default) != "blocked"]
        if external and not any(e.origin == "external" for e in kept):
            svc.sessions.sets[session] = []
            svc.sessions.senders[session] = []
            return None
        return kept

    def usage_report(self, session: str, report: dict[str, Any], actor: str = "operator") -> dict[str, Any]:
        """Count a front end's token-usage report (zcord.service.usage); not an operation.
        The bot's reports share botUsageReportsPerMinute: past it, RateLimited and nothing counted."""
        svc = self.svc
        if actor == "model":
            per_minute = svc.config.bot_usage_reports_per_minute
            if not svc.usage_budget.take(1, per_minute):
                wait = math.ceil(60 / per_minute) if per_minute else None
                raise RateLimited(f"The bot may report token usage at most {per_minute} times a minute "
                                  f"(botUsageReportsPerMinute); this report was not counted. Report once per "
                                  f"provider call, or raise the setting.", data={"retryAfterSeconds": wait})
        svc.usage.record(session, report)
        return {"recorded": True}

    def context(self, session: str) -> dict[str, Any]:
        """The context header for the session, rendered from live state now."""
        svc = self.svc
        check_session(session)
        with svc.lock:
            return svc.sessions.context(session, svc.config.recall_budget, self.senders_on())

    def recall_explain(self, text: str, sender_key: str | None = None) -> dict[str, Any]:
        """For operators: segmentation, expansion, hits and the header a text would produce
        (from `sender_key`, when given: their relationship leads the header)."""
        svc = self.svc
        if not isinstance(text, str):
            raise InvalidArgument("text must be a string", field="text")
        if sender_key is not None and not isinstance(sender_key, str):
            raise InvalidArgument("senderKey must be a string", field="senderKey")
        with svc.lock:
            svc.refresh_synonyms()
            cfg = svc.config
            return svc.sessions.explain(text, cfg.recall_budget, cfg.recall_ranking, sender_key, self.senders_on())

    def recalled_header(self, ids: list[str], people: list[str]) -> dict[str, Any]:
        """For the recall log's entry of a batch (its thread): the header those ids and
        speakers render now, what the budget cut, and the ids' titles. Without the lock: it
        only looks nodes and relationships up by key (immutable objects), so the bot's calls
        never wait for it."""
        svc = self.svc
        st = svc.state
        budget = svc.config.recall_budget
        people = people if self.senders_on() else []
        hidden = svc.review.hidden
        visible = [i for i in ids if i not in hidden]
        text, shown = render_header(st, visible, budget, people)
        full, _ = render_header(st, visible, max(budget, 1) * 1000, people)
        titles = {i: n.title for i in ids if (n := st.nodes.get(i)) is not None}
        return {"budget": budget, "headerChars": len(text), "fullChars": len(full),
                "truncated": len(full) > len(text), "notShown": [i for i in ids if i not in shown],
                "titles": titles}

    def senders_on(self) -> bool:
        """Speakers' relationships lead the header when both switches are on."""
        svc = self.svc
        return svc.config.recall_senders and svc.config.relationship_memory

