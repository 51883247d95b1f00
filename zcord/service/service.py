"""Service: one Memory directory's tools and views, in-process (SPEC §2 and §4).

`Service.call(tool, params, actor)` (its dispatcher, `Service.calls`) validates the arguments against the
tool's input model, runs the tool's rule (its room, zcord.service.rooms), commits any
change atomically (memory and disk together, or neither) and appends the call to the
operation log. This module adds the Memory's lifetime (open, close, warm-up), the
operator's settings (config, PERSONA.md, synonym groups) and the bot's views (prefix,
recall, context), none of which are tool calls.
"""

from __future__ import annotations

import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable, Collection, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from ..core import indexcache, nodecache
from ..core import origin as O
from ..core.config import Config, ConfigFile, api_key, key_withheld_reason
from ..core.errors import InvalidArgument, RateLimited, ZcorError
from ..core.fsutil import atomic_write, reverse_lines
from ..core.indexes import build_text_piece
from ..core.journal import find_record, read_pos, replay
from ..core.layout import (
    CONFIG_FILE,
    OPLOG_FILE,
    PERSONA_FILE,
    RECALL_LOG_DIR,
    SYNONYMS_FILE,
)
from ..core.models import now
from ..core.oplog import OpLog
from ..core.persona import PersonaName, persona_text
from ..core.senderkey import sender_key
from ..core.state import MemoryState, Tx
from ..core.store import Store
from ..core.text import kinds_of, tokenizer
from ..retrieval.prefix import build_prefix
from ..retrieval.recall import (
    Event,
    RecallSessions,
    Retriever,
    check_session,
    parse_events,
    render_header,
)
from ..retrieval.synonyms import Synonyms
from ..retrieval.twins import TwinIndex
from . import erasure, scope
from . import inputs as I
from .calls import Ctx, InternalError, RestoreInProgress
from .consolidate import CONSOLIDATE_FILE, KINDS, Consolidation
from .dispatcher import Dispatcher
from .gate import RestoreGate
from .logbudget import LogBudget
from .recall_log import RecallLog
from .review import REVIEW_FILE, ReviewBook
from .rooms import backups, history, synonyms
from .snapshots import Snapshots
from .trust import TRUST_FILE, TrustBook
from .undo import UndoBook
from .usage import USAGE_FILE, UsageBook

__all__ = ["Ctx", "InternalError", "RestoreInProgress", "Service"]

log = logging.getLogger(__name__)

MAX_PERSONA = 100_000  # characters of PERSONA.md, which goes into every request


class Service:
    """One Memory directory's tools. Thread-safe: calls are serialized by `lock`.

    It holds its parts: the dispatcher (`calls`, which runs and records every call), the
    restore gate, the snapshots, the review and trust books, the backups folder and the undo
    book. Each part sees the Service through a Protocol naming what it uses (parts.py)."""

    def __init__(self, memory_dir: Path | str, clock: Callable[[], datetime] = now):
        self.lock = threading.RLock()
        self.gate = RestoreGate()
        self.calls = Dispatcher(self)
        self.snapshots = Snapshots(self)
        self.store = Store(memory_dir)
        self.backups = backups.Backups(self.store, lambda: self.config)
        self.dir = self.store.dir
        self.clock = clock
        self.oplog = OpLog(self.dir / OPLOG_FILE)
        self.synonyms = Synonyms(self.dir / SYNONYMS_FILE)
        self.config_file = ConfigFile(self.dir / CONFIG_FILE)
        self.state = MemoryState()
        self.retriever = Retriever(lambda: self.state, self.synonyms)
        self.sessions = RecallSessions(self.retriever)
        self.recall_log = RecallLog(self.dir / RECALL_LOG_DIR, lambda: self.config.recall_log_entries,
                                    lambda: self.config.recall_log_bytes, self._recalled_header)
        self.sessions.observer = lambda session, events, words, hits: self.recall_log.observe(
            session, events, words, hits, self.sessions.senders.get(session, []))
        self.twins = TwinIndex(lambda: self.state, self.synonyms)
        self.twins.on_pending = self._build_twins_later
        self.consolidation = Consolidation(self.twins, lambda: self.state, self.dir / CONSOLIDATE_FILE)
        self._twins_building = False
        self.trust = TrustBook(self.dir / TRUST_FILE)
        self.review = ReviewBook(self.dir / REVIEW_FILE, self.lock)
        # held changes: recalled and searched as if not made (their memories as last approved)
        self.retriever.approved_view = lambda: self.review.approved_view(self.state)
        self.retriever.hidden_people = lambda: self.review.hidden_people  # held relationships: no person entry
        self.retriever.held_view = self.review.view  # memories as last approved in person entries
        self.retriever.own_name = PersonaName(self.dir / PERSONA_FILE)  # "thanks Juniper" addresses the bot
        # private conversations (issue 34): each session recalls only its own scoped memories
        self.retriever.scope_hidden = lambda session: scope.hidden_for(self.state, session) \
            if self.config.private_scope == "session" else frozenset()
        self._private_logged: bool | None = None
        self.private_sessions: set[str] = set()
        """Sessions whose latest batch was recalled as private (in memory, like recall sets)."""
        self.undo = UndoBook(self.oplog)
        self.usage = UsageBook(self.dir / USAGE_FILE)  # the real date: a test's clock is for operations
        self.usage_budget = LogBudget()  # the bot's usage reports per minute (a token bucket)
        self.http_client: Any = None  # an httpx.Client to reuse for provider calls (tests may inject one)
        self.is_open = False
        self.index_cache_used = False
        """Whether the last open loaded the retrieval indexes from memory-state.recall.cache."""

    # -- lifetime ---------------------------------------------------------------------

    def open(self) -> Service:
        self.store.open()
        try:
            erasure.resume(self.dir)  # an erasure a crash interrupted is completed first
            self.config_file.load()
            self.state = self.store.load()
            # the retrieval indexes from memory-state.recall.cache, when it belongs to the
            # snapshot just loaded; the journal's changes below then update them in place
            self.index_cache_used = indexcache.read(self.dir, self.state, self.store.cache_header)
            self.synonyms.load()
            self.oplog.open()
            pos = read_pos(self.dir)
            replayed = replay(self.state, self.oplog.path, pos)
            if replayed:  # jieba learns the keywords of the nodes as they are now, however indexed
                self.state.pending_words[:] = self.state.indexed_keywords()
            self.snapshots.pos_offset = pos.log_offset if pos is not None and pos.log_offset <= self.oplog.size else 0
            self.trust.load()
            self.consolidation.load()
            self.review.load(self.oplog.last_seq, self.find_operation)
            self.usage.load()
        except BaseException:
            self.close()
            raise
        self.is_open = True
        if replayed:
            self.snapshots.changes = replayed
            self.snapshots.since = time.monotonic()
        ops = [c.op_seq for c in self.state.history if c.op_seq]
        self.calls.seq = max([self.oplog.last_seq, *ops[-1:]])
        self.calls.reconcile()
        self.backups.read_clocks()
        self.calls.last_at = self._last_recorded_at()
        return self

    def _last_recorded_at(self) -> datetime | None:
        """The time of the newest change or logged operation (the operation clock never goes
        below it, see Dispatcher.new_ctx)."""
        times = [self.state.history[-1].at] if self.state.history else []
        try:
            fd = os.open(self.oplog.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return max(times, default=None)
        try:
            for _offset, line in reverse_lines(fd, os.fstat(fd).st_size):
                m = re.search(rb'"at":"([^"]+)"', line[:400])
                if m:
                    try:
                        times.append(datetime.fromisoformat(m.group(1).decode()))
                    except ValueError:
                        pass
                    break
        finally:
            os.close(fd)
        return max(times, default=None)

    def close(self) -> None:
        """Finish any snapshot, write one holding the journaled changes (so the next start
        replays nothing), close the log and release the directory."""
        self.gate.wait_idle()  # a restore in its slow phase finishes first
        with self.lock:
            if self.is_open:
                self.is_open = False
                self.snapshots.settle()
                if self.snapshots.changes:
                    try:
                        self.snapshots.save(self.snapshots.pos())
                    except (OSError, ZcorError) as e:
                        log.warning("could not write the snapshot at shutdown (%s); the next start replays "
                                    "the operation log", e)
            self.usage.close()
            self.recall_log.close()
            self.oplog.close()
            self.store.close()

    def __enter__(self) -> Service:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- calls: run and recorded by the dispatcher (self.calls) ----------------------------

    def call(self, tool: str, params: Any = None, actor: str = "operator",
             allowed: Collection[str] | None = None, view: bool = False,
             claim: Any = O.NO_CLAIM, batch: O.Batch | None = None,
             present: Mapping[str, list[str]] | None = None) -> dict[str, Any]:
        """Run one tool call and record it (Dispatcher.call)."""
        return self.calls.call(tool, params, actor, allowed, view, claim, batch, present)

    def run_operation(self, name: str, params: Any, fn: Callable[[Ctx], dict[str, Any]]) -> dict[str, Any]:
        """An operator method that changes the Memory (Dispatcher.run_operation)."""
        return self.calls.run_operation(name, params, fn)

    def begin(self, ctx: Ctx) -> Tx:
        return self.calls.begin(ctx)

    def commit(self, ctx: Ctx) -> None:
        self.calls.commit(ctx)

    def find_operation(self, seq: int) -> dict[str, Any] | None:
        """The operation-log record with this seq, or None."""
        return find_record(self.oplog.path, seq)

    def note_private(self) -> None:
        """A call of a private conversation is about to be logged."""
        self._private_logged = True

    def private_logged(self) -> bool:
        """Whether the operation log may hold a private conversation's record (read once from
        the log, then kept up by note_private): only then does the model's history query
        leave records out (rooms.history)."""
        if self._private_logged is None:
            self._private_logged = scope.file_holds(self.oplog.path, scope.PRIVATE_MARK)
        return self._private_logged

    @property
    def seq(self) -> int:
        """The last operation's sequence number."""
        return self.calls.seq

    @property
    def last_at(self) -> datetime | None:
        return self.calls.last_at

    @last_at.setter
    def last_at(self, value: datetime | None) -> None:
        self.calls.last_at = value

    @property
    def listeners(self) -> list[Callable[[dict[str, Any]], None]]:
        """Called with each committed call's event (the daemon's subscribers)."""
        return self.calls.listeners

    # -- settings: config.json, PERSONA.md, synonyms.json (operator changes, recorded) ---

    @property
    def config(self) -> Config:
        """The effective configuration (config.json with environment overrides)."""
        return self.config_file.effective

    def public_config(self) -> dict[str, Any]:
        key_set = api_key() is not None
        withheld = key_withheld_reason(self.config.llm.base_url) if key_set else None
        return self.config.public(api_key_set=key_set, withheld=withheld)

    def update_config(self, patch: dict[str, Any], actor: str = "operator") -> dict[str, Any]:
        """Change config.json (partial, camelCase keys); recorded in the operation log."""
        def apply() -> tuple[dict[str, Any], list[dict[str, Any]]]:
            before = self.config_file.stored.model_dump(mode="json", by_alias=True)
            self.config_file.update(patch)
            after = self.config_file.stored.model_dump(mode="json", by_alias=True)
            return self.public_config(), [{"kind": "config.update", "before": before, "after": after}]

        return self.calls.operate("zcor/config/set", {"patch": patch}, actor, apply, "config.json")

    def persona_get(self) -> dict[str, Any]:
        """PERSONA.md as stored (`text`, comments included) and whether it is empty for the model."""
        path = self.dir / PERSONA_FILE
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            text = ""
        return {"text": text, "empty": not persona_text(text), "path": str(path)}

    def persona_set(self, text: Any, actor: str = "operator") -> dict[str, Any]:
        """Replace PERSONA.md (atomically); recorded in the operation log with before and after."""
        if not isinstance(text, str):
            raise InvalidArgument("text must be a string: the whole new PERSONA.md", field="text")
        if len(text) > MAX_PERSONA:
            raise InvalidArgument(f"text is {len(text):,} characters; PERSONA.md may have at most {MAX_PERSONA:,}",
                                  field="text")
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArgument("text contains a lone surrogate code point, which is not valid Unicode",
                                  field="text") from None

        def apply() -> tuple[dict[str, Any], list[dict[str, Any]]]:
            before = self.persona_get()["text"]
            if before == text:
                return self.persona_get(), []
            atomic_write(self.dir / PERSONA_FILE, data)
            return self.persona_get(), [{"kind": "persona.update", "target": PERSONA_FILE,
                                         "before": before, "after": text}]

        return self.calls.operate("zcor/persona/set", {"text": text}, actor, apply, PERSONA_FILE)

    def synonym_groups(self) -> list[list[str]]:
        with self.lock:
            self.refresh_synonyms()
            return [list(g) for g in self.synonyms.groups]

    def set_synonym_group(self, index: int | None, terms: list[str] | None,
                          actor: str = "operator") -> dict[str, Any]:
        """Operators' synonym editing: index None adds, terms None removes, both replace."""
        return synonyms.set_group(self, index, terms, actor)

    def reload(self) -> None:
        """Re-read config.json and synonyms.json (SIGHUP); a broken file keeps the old values."""
        with self.lock:
            self.config_file.load()
            self.synonyms.load()

    def refresh_synonyms(self) -> None:
        """Pick up a hand edit of synonyms.json; a broken edit keeps the last good groups."""
        try:
            self.synonyms.reload_if_changed()
        except ZcorError as e:
            log.warning("%s; keeping the previous synonym groups", e.message)

    # -- the bot's views (not tool calls: never recorded) ------------------------------

    def prefix(self) -> str:
        """The system prefix, built from live state and PERSONA.md."""
        with self.lock:
            # held changes wait for review: the approved important list, memories as last approved
            st = cast(MemoryState, self.review.view(self.state))
            if self.state.scopes and self.config.private_scope == "session":
                # the prefix is shared by every session: no private conversation's memory is in it
                st = cast(MemoryState, scope.WithoutScoped(st))
            return build_prefix(st, self.dir / PERSONA_FILE, self.config.relationship_memory)

    def recall(self, session: str, events: Any, private: bool = False) -> list[str]:
        """Replace the session's recall set from a batch of events; returns it, best first."""
        ids: list[str] = self.recall_batch(session, events, private)["ids"]
        return ids

    def recall_batch(self, session: str, events: Any, private: Any = False) -> dict[str, Any]:
        """`zcor/recall`'s answer: the session's new recall set (`ids`, best first) and, when
        any, the senderKeys of the batch's external events whose sender is blocked, as the
        bot gave them (`blocked`), so a front end can keep those messages from the model.
        `private`: the session is a one-to-one conversation (scope.py); a batch with an
        external event sets or clears it for the session."""
        check_session(session)
        if not isinstance(private, bool):
            raise InvalidArgument("private must be true or false", field="private")
        parsed = parse_events(events)
        with self.lock:
            if any(e.origin == "external" for e in parsed):
                if private:
                    self.private_sessions.add(session)
                else:
                    self.private_sessions.discard(session)
            self.refresh_synonyms()
            blocked = self._blocked_senders(parsed)
            kept = self._unblocked(session, parsed)
            ids = [] if kept is None else \
                self.sessions.recall(session, kept, self.config.recall_budget, self.config.recall_ranking)
        return {"ids": ids, **({"blocked": blocked} if blocked else {})}

    def _blocked_senders(self, events: list[Event]) -> list[str]:
        default = self.config.default_trust
        if not self.trust.levels and default != "blocked":
            return []
        out: dict[str, None] = {}
        for e in events:
            if e.origin == "external" and e.sender_key not in out and \
                    self.trust.level(e.sender_key or "", default) == "blocked":
                out[e.sender_key or ""] = None
        return list(out)

    def _unblocked(self, session: str, events: list[Event]) -> list[Event] | None:
        """The batch without blocked senders' external events; None (and the session's recall
        set emptied) when every external event came from a blocked sender."""
        default = self.config.default_trust
        if not self.trust.levels and default != "blocked":
            return events
        external = [e for e in events if e.origin == "external"]
        kept = [e for e in events if e.origin != "external"
                or self.trust.level(e.sender_key or "", default) != "blocked"]
        if external and not any(e.origin == "external" for e in kept):
            self.sessions.sets[session] = []
            self.sessions.senders[session] = []
            return None
        return kept

    def usage_report(self, session: str, report: dict[str, Any], actor: str = "operator") -> dict[str, Any]:
        """Count a front end's token-usage report (zcord.service.usage); not an operation.
        The bot's reports share botUsageReportsPerMinute: past it, RateLimited and nothing counted."""
        if actor == "model":
            per_minute = self.config.bot_usage_reports_per_minute
            if not self.usage_budget.take(1, per_minute):
                wait = math.ceil(60 / per_minute) if per_minute else None
                raise RateLimited(f"The bot may report token usage at most {per_minute} times a minute "
                                  f"(botUsageReportsPerMinute); this report was not counted. Report once per "
                                  f"provider call, or raise the setting.", data={"retryAfterSeconds": wait})
        self.usage.record(session, report)
        return {"recorded": True}

    # -- per-sender trust (zcor/trust/get, zcor/trust/set) -------------------------------

    def trust_get(self) -> dict[str, Any]:
        with self.lock:
            return self.trust.listing(self.config.default_trust)

    def trust_set(self, params: Any, actor: str = "operator") -> dict[str, Any]:
        """Give a sender a trust level (level null: back to defaultTrust); trust.json is
        replaced atomically and the change recorded in the operation log."""
        if not isinstance(params, dict) or set(params) - {"sender", "level"} or "sender" not in params \
                or "level" not in params:
            raise InvalidArgument("params must be {sender, level}: level one of trusted, normal, untrusted, "
                                  "blocked, or null for the default", field="level" if isinstance(params, dict)
                                  and "sender" in params else "sender")

        def apply() -> tuple[dict[str, Any], list[dict[str, Any]]]:
            before, after = self.trust.set(params["sender"], params["level"])
            key = sender_key(params["sender"])  # kept and shown in comparison form
            out = {"sender": key, "level": self.trust.level(key, self.config.default_trust),
                   "explicit": after is not None}
            return out, ([] if before == after else
                         [{"kind": "trust.set", "target": key, "before": before, "after": after}])

        return self.calls.operate("zcor/trust/set", dict(params), actor, apply, TRUST_FILE)

    def context(self, session: str) -> dict[str, Any]:
        """The context header for the session, rendered from live state now."""
        check_session(session)
        with self.lock:
            return self.sessions.context(session, self.config.recall_budget, self._senders_on())

    def recall_explain(self, text: str, sender_key: str | None = None) -> dict[str, Any]:
        """For operators: segmentation, expansion, hits and the header a text would produce
        (from `sender_key`, when given: their relationship leads the header)."""
        if not isinstance(text, str):
            raise InvalidArgument("text must be a string", field="text")
        if sender_key is not None and not isinstance(sender_key, str):
            raise InvalidArgument("senderKey must be a string", field="senderKey")
        with self.lock:
            self.refresh_synonyms()
            cfg = self.config
            return self.sessions.explain(text, cfg.recall_budget, cfg.recall_ranking, sender_key, self._senders_on())

    def _recalled_header(self, ids: list[str], people: list[str]) -> dict[str, Any]:
        """For the recall log's entry of a batch (its thread): the header those ids and
        speakers render now, what the budget cut, and the ids' titles. Without the lock: it
        only looks nodes and relationships up by key (immutable objects), so the bot's calls
        never wait for it."""
        st = self.state
        budget = self.config.recall_budget
        people = people if self._senders_on() else []
        hidden = self.review.hidden
        visible = [i for i in ids if i not in hidden]
        text, shown = render_header(st, visible, budget, people)
        full, _ = render_header(st, visible, max(budget, 1) * 1000, people)
        titles = {i: n.title for i in ids if (n := st.nodes.get(i)) is not None}
        return {"budget": budget, "headerChars": len(text), "fullChars": len(full),
                "truncated": len(full) > len(text), "notShown": [i for i in ids if i not in shown],
                "titles": titles}

    def consolidate_list(self, limit: int = 20, offset: int = 0, kind: str | None = None) -> dict[str, Any]:
        """`zcor/consolidate/list`: the proposals not dismissed, paged (zcord.service.consolidate)."""
        if kind is not None and kind not in KINDS:
            raise InvalidArgument(f"kind must be one of {', '.join(KINDS)}, or omitted for both", field="kind")
        with self.lock:
            complete = self.consolidation.ready()
            if not complete:
                self._build_twins_later(force=True)
            items = self.consolidation.proposals(self.review.hidden)
            pending = self.twins.pending + self.consolidation.pending
            indexed = len(self.twins.entries)
        if kind is not None:
            items = [i for i in items if i["kind"] == kind]
        page = items[offset:offset + limit]
        return {"items": page, "total": len(items),
                "nextOffset": offset + limit if offset + limit < len(items) else None,
                "scan": {"complete": complete, "pending": pending, "indexed": indexed}}

    def consolidate_dismiss(self, ids: Any) -> dict[str, Any]:
        """`zcor/consolidate/dismiss`: remember a proposal as dismissed."""
        with self.lock:
            return self.consolidation.dismiss(ids)

    def _senders_on(self) -> bool:
        """Speakers' relationships lead the header when both switches are on."""
        return self.config.recall_senders and self.config.relationship_memory

    # -- operator views and actions that are not tools -----------------------------------

    def status(self) -> dict[str, Any]:
        st = self.state
        return {
            "memoryDir": str(self.dir),
            "nodes": len(st.nodes),
            "currentNodes": sum(1 for n in st.nodes.values() if n.superseded_by is None),
            "relationships": len(st.relationships),
            "important": list(st.important),
            "historyChanges": st.next_change_id() - 1,
            "operations": self.oplog.count(),
            "synonymGroups": len(self.synonyms.groups),
            "personaEmpty": self.persona_get()["empty"],
            "journaledChanges": self.snapshots.changes,
            "pendingReview": len(self.review.items),
            "recallSessions": len(self.sessions.sets),
            "usageToday": self.usage.today_line(),
        }

    def snapshot(self) -> dict[str, Any]:
        """Write memory-state.json now, holding every change so far (waits for a snapshot
        being written in the background); StorageError when the disk refuses it (the
        operation log still holds every change, so nothing is lost)."""
        return self.gate.writes_wait(self.snapshots.take)

    def history_query(self, params: Any, args: I.OperatorHistoryArgs | None = None) -> dict[str, Any]:
        """`zcor/history/query` (rooms.history.operator_query); `args`: the params already
        checked by the method's params model."""
        return history.operator_query(self, params, args)

    def backup_preview(self, name: Any) -> dict[str, Any]:
        """What restoring backups/<name> would change, in counts (rooms.backups.preview)."""
        return backups.preview(self, name)

    def warm_recall(self) -> None:
        """What a recall needs, so that the first one is answered at full speed: the
        retrieval indexes (loaded from memory-state.recall.cache by open when it belongs to
        the snapshot, else built here), jieba's dictionary and the Memory's words taught to
        it. A daemon runs this before it signals READY=1 (docs/reference.md)."""
        with self.lock:
            self.state.ensure_index()
        tokenizer()
        with self.lock:
            self.refresh_synonyms()
            self.retriever.teach_jieba()

    def _giving_way(self, wait: float = 0.004, most: int = 25) -> Callable[[], None]:
        """The background warm-up's pause between batches: when calls came since the last
        pause (the operation count moved), wait until they stop, up to `most` waits, so a
        bot's writes right after a start are not slowed by a build sharing the interpreter
        with them (issue 24); a bot that never stops still lets the build go on."""
        seen = self.seq

        def pause() -> None:
            nonlocal seen
            for _ in range(most):
                if self.seq == seen:
                    break
                seen = self.seq
                time.sleep(wait)

        return pause

    def warm(self) -> None:
        """Build the retrieval indexes, load jieba, teach it the Memory's words, index the log
        and build the query text (a daemon runs this in the background after it is ready, so
        the first calls do not pay for it). The indexes are built in steps of 1,000 nodes under
        the lock, the text a 4,096-node piece at a time outside it, so calls are answered in
        between; a call that needs either finishes the build. A large Memory whose memories or
        indexes did not come from their caches is then snapshotted in the background, so the
        next start has both."""
        while True:
            with self.lock:
                if not self.state.index_step():
                    break
            time.sleep(0.0005)  # let a waiting call take the lock
        tokenizer()
        kinds_of("")  # the kinds table, read once (some 20 ms), before a question needs it
        with self.lock:
            self.refresh_synonyms()
            self.retriever.teach_jieba()
            cached = self.store.cache_used and self.index_cache_used
            if not cached and len(self.state.nodes) >= nodecache.min_nodes() and \
                    self.snapshots.thread is None and self.is_open and not self.gate.restoring:
                self.snapshots.start()  # a large Memory without usable caches: the next start has them
        self.oplog.warm()
        # last, the query text (it gives way to calls, so it may take a while: the log index
        # is not kept waiting behind it): each piece built outside the lock, kept under it, and
        # tried once; one whose memories changed while it was built is left to the next query
        # that needs it (a Memory written all the time would have its pieces built over and over)
        pause = self._giving_way()
        tried: set[Any] = set()
        while True:
            with self.lock:
                wanted = self.state.text_piece_wanted(tried)
            if wanted is None:
                break
            tried.add(wanted[0])
            made = build_text_piece(self.state.nodes, wanted[1], pause)
            with self.lock:
                self.state.text_piece_made(*wanted, made)
        self.build_twins()

    def build_twins(self) -> None:
        """Index every current memory for the twin check (retrieval.twins), 100 at a time
        under the lock, giving way to calls between steps (the warm-up runs it last; a
        restore starts it in a thread of its own)."""
        with self.lock:
            if self._twins_building:
                return
            self._twins_building = self.twins.building = True
        pause = self._giving_way()
        try:
            while True:
                with self.lock:
                    # the index first, then the neighbourhoods of the memories it (re)indexed
                    if not self.is_open or not (self.twins.step(100) or self.consolidation.step(100)):
                        break
                pause()
                time.sleep(0.0005)
        finally:
            with self.lock:
                self._twins_building = self.twins.building = False

    def _build_twins_later(self, force: bool = False) -> None:
        """The twin index has more to do than a check does inline (after a restore), or a
        consolidation list found work left (`force`)."""
        if not self._twins_building and self.is_open:
            threading.Thread(target=self.build_twins, name="zcord-twins", daemon=True).start()
