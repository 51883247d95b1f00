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
import os
import re
import threading
import time
from collections.abc import Callable, Collection, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from ..core import indexcache
from ..core import origin as O
from ..core.config import Config, ConfigFile
from ..core.errors import InvalidArgument, ZcorError
from ..core.fsutil import reverse_lines
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
from ..core.persona import PersonaName
from ..core.state import MemoryState, Tx
from ..core.store import Store
from ..retrieval.recall import RecallSessions, Retriever
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
from .settings import Settings
from .snapshots import Snapshots
from .trust import TRUST_FILE, TrustBook
from .undo import UndoBook
from .usage import USAGE_FILE, UsageBook
from .views import BotViews
from .warmup import Warmup

__all__ = ["Ctx", "InternalError", "RestoreInProgress", "Service"]

log = logging.getLogger(__name__)

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
        self.views = BotViews(self)
        self.recall_log = RecallLog(self.dir / RECALL_LOG_DIR, lambda: self.config.recall_log_entries,
                                    lambda: self.config.recall_log_bytes,
                                    lambda ids, people: self.views.recalled_header(ids, people))
        self.sessions.observer = lambda session, events, words, hits: self.recall_log.observe(
            session, events, words, hits, self.sessions.senders.get(session, []))
        self.sessions.observing = lambda: self.config.recall_log_entries > 0  # off: recall explains nothing
        self.twins = TwinIndex(lambda: self.state, self.synonyms)
        self.warmup = Warmup(self)
        self.settings = Settings(self)
        self.operator = OperatorViews(self)
        self.twins.on_pending = self.warmup.build_twins_later
        self.consolidation = Consolidation(self.twins, lambda: self.state, self.dir / CONSOLIDATE_FILE)
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
        self.calls.last_at = last_recorded_at(self.state, self.oplog.path)
        return self

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
        return self.settings.public_config()

    def update_config(self, patch: dict[str, Any], actor: str = "operator") -> dict[str, Any]:
        """Change config.json (Settings.update_config)."""
        return self.settings.update_config(patch, actor)

    def persona_get(self) -> dict[str, Any]:
        """PERSONA.md as stored (Settings.persona_get)."""
        return self.settings.persona_get()

    def persona_set(self, text: Any, actor: str = "operator") -> dict[str, Any]:
        """Replace PERSONA.md (Settings.persona_set)."""
        return self.settings.persona_set(text, actor)

    def synonym_groups(self) -> list[list[str]]:
        return self.settings.synonym_groups()

    def set_synonym_group(self, index: int | None, terms: list[str] | None,
                          actor: str = "operator") -> dict[str, Any]:
        """Operators' synonym editing: index None adds, terms None removes, both replace."""
        return synonyms.set_group(self, index, terms, actor)

    def reload(self) -> None:
        """Re-read config.json and synonyms.json (Settings.reload)."""
        self.settings.reload()

    def refresh_synonyms(self) -> None:
        """Pick up a hand edit of synonyms.json; a broken edit keeps the last good groups."""
        try:
            self.synonyms.reload_if_changed()
        except ZcorError as e:
            log.warning("%s; keeping the previous synonym groups", e.message)

    # -- the bot's views (not tool calls: never recorded) ------------------------------

    def prefix(self) -> str:
        """The system prefix, built from live state and PERSONA.md (BotViews.prefix)."""
        return self.views.prefix()

    def recall(self, session: str, events: Any, private: bool = False) -> list[str]:
        """Replace the session's recall set from a batch of events; returns it, best first."""
        ids: list[str] = self.recall_batch(session, events, private)["ids"]
        return ids

    def recall_batch(self, session: str, events: Any, private: Any = False) -> dict[str, Any]:
        """`zcor/recall`'s answer (BotViews.recall_batch)."""
        return self.views.recall_batch(session, events, private)

    def usage_report(self, session: str, report: dict[str, Any], actor: str = "operator") -> dict[str, Any]:
        """Count a front end's token-usage report (BotViews.usage_report)."""
        return self.views.usage_report(session, report, actor)

    # -- per-sender trust (zcor/trust/get, zcor/trust/set) -------------------------------

    def trust_get(self) -> dict[str, Any]:
        return self.settings.trust_get()

    def trust_set(self, params: Any, actor: str = "operator") -> dict[str, Any]:
        """Give a sender a trust level (Settings.trust_set)."""
        return self.settings.trust_set(params, actor)

    def context(self, session: str) -> dict[str, Any]:
        """The context header for the session, rendered from live state now (BotViews.context)."""
        return self.views.context(session)

    def recall_explain(self, text: str, sender_key: str | None = None) -> dict[str, Any]:
        """For operators: how a text would be recalled (BotViews.recall_explain)."""
        return self.views.recall_explain(text, sender_key)

    def consolidate_list(self, limit: int = 20, offset: int = 0, kind: str | None = None) -> dict[str, Any]:
        """`zcor/consolidate/list`: the proposals not dismissed, paged (OperatorViews.consolidate_list)."""
        return self.operator.consolidate_list(limit, offset, kind)

    def consolidate_dismiss(self, ids: Any) -> dict[str, Any]:
        """`zcor/consolidate/dismiss`: remember a proposal as dismissed (OperatorViews)."""
        return self.operator.consolidate_dismiss(ids)

    # -- operator views and actions that are not tools -----------------------------------

    def status(self) -> dict[str, Any]:
        """The Memory's counts for `zcor/status` (OperatorViews.status)."""
        return self.operator.status()

    def snapshot(self) -> dict[str, Any]:
        """Write memory-state.json now, holding every change so far (waits for a snapshot
        being written in the background); StorageError when the disk refuses it (the
        operation log still holds every change, so nothing is lost)."""
        done: dict[str, Any] = self.gate.writes_wait(self.snapshots.take)
        return done

    def history_query(self, params: Any, args: I.OperatorHistoryArgs | None = None) -> dict[str, Any]:
        """`zcor/history/query` (rooms.history.operator_query); `args`: the params already
        checked by the method's params model."""
        return history.operator_query(self, params, args)

    def backup_preview(self, name: Any) -> dict[str, Any]:
        """What restoring backups/<name> would change, in counts (rooms.backups.preview)."""
        return backups.preview(self, name)

    def warm_recall(self) -> None:
        """What a recall needs, so that the first one is answered at full speed (Warmup.warm_recall)."""
        self.warmup.warm_recall()

    def warm(self) -> None:
        """Build what the calls need, giving way to them (Warmup.warm)."""
        self.warmup.warm()

    def build_twins(self) -> None:
        """Index every current memory for the twin check (Warmup.build_twins)."""
        self.warmup.build_twins()


class OperatorViews:
    """The operator's views of the Memory that are not tools (a part of the Service,
    `Service.operator`): the status line's counts and the consolidation proposals."""

    def __init__(self, svc: Service) -> None:
        self.svc = svc

    def status(self) -> dict[str, Any]:
        st = self.svc.state
        return {
            "memoryDir": str(self.svc.dir),
            "nodes": len(st.nodes),
            "currentNodes": sum(1 for n in st.nodes.values() if n.superseded_by is None),
            "relationships": len(st.relationships),
            "important": list(st.important),
            "historyChanges": st.next_change_id() - 1,
            "operations": self.svc.oplog.count(),
            "synonymGroups": len(self.svc.synonyms.groups),
            "personaEmpty": self.svc.persona_get()["empty"],
            "journaledChanges": self.svc.snapshots.changes,
            "pendingReview": len(self.svc.review.items),
            "recallSessions": len(self.svc.sessions.sets),
            "usageToday": self.svc.usage.today_line(),
        }

    def consolidate_list(self, limit: int = 20, offset: int = 0, kind: str | None = None) -> dict[str, Any]:
        """`zcor/consolidate/list`: the proposals not dismissed, paged (zcord.service.consolidate)."""
        if kind is not None and kind not in KINDS:
            raise InvalidArgument(f"kind must be one of {', '.join(KINDS)}, or omitted for both", field="kind")
        with self.svc.lock:
            complete = self.svc.consolidation.ready()
            if not complete:
                self.svc.warmup.build_twins_later(force=True)
            items = self.svc.consolidation.proposals(self.svc.review.hidden)
            pending = self.svc.twins.pending + self.svc.consolidation.pending
            indexed = len(self.svc.twins.entries)
        if kind is not None:
            items = [i for i in items if i["kind"] == kind]
        page = items[offset:offset + limit]
        return {"items": page, "total": len(items),
                "nextOffset": offset + limit if offset + limit < len(items) else None,
                "scan": {"complete": complete, "pending": pending, "indexed": indexed}}

    def consolidate_dismiss(self, ids: Any) -> dict[str, Any]:
        """`zcor/consolidate/dismiss`: remember a proposal as dismissed."""
        with self.svc.lock:
            return self.svc.consolidation.dismiss(ids)


def last_recorded_at(state: MemoryState, log_path: Path) -> datetime | None:
    """The time of the newest change or logged operation (the operation clock never goes
    below it, see Dispatcher.new_ctx)."""
    times = [state.history[-1].at] if state.history else []
    try:
        fd = os.open(log_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
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
