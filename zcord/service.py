"""The rules of SPEC §2 and §4: one method per tool, no sockets.

`Service.call(tool, params, actor)` validates the arguments against the tool's input
model, runs the handler, commits any change atomically (memory and disk together, or
neither), and appends the call to the operation log.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic.alias_generators import to_camel

from . import inputs as I
from .errors import (Conflict, InvalidArgument, MayHaveTakenEffect, NotFound, ProviderError, RateLimited,
                     StateFileInvalid, StorageError, Superseded, UnknownTool, ZcorError, describe_os_error)
from .models import MAX_IMPORTANT, Change, Node, OpError, OpRecord, Relationship, now
from .fsutil import atomic_write
from .oplog import OpLog
from .protocol import VIEW_TOOLS, Forbidden
from .state import MemoryState, Tx
from .config import Config, ConfigFile, api_key, api_key_for, key_withheld_reason
from .prefix import build_prefix, persona_text
from .llm import Message, Provider
from .recall import SEARCH_CANDIDATES, RecallSessions, Retriever, parse_events
from .store import (BOT_BACKUP_RE, CONFIG_FILE, OPLOG_FILE, PERSONA_FILE, SYNONYMS_FILE, RestoreLimits, Seal, StateView,
                    Store)
from . import nodecache
from .journal import POS_FILE, SnapshotPos, read_pos, replay, write_pos
from .synonyms import Synonyms
from .text import derive_keywords, normalize, tokenizer


class InternalError(ZcorError):
    code = "internal_error"


class RestoreInProgress(Exception):
    """A call that would change the Memory met a restore in its slow phase: it is undone and
    not recorded, and runs again once the restore is over (Service.when_restored)."""


SEARCH_TOOL = "zcor_memory_search"
RESTORE_TOOL = "zcor_memory_restore"
BACKUP_TOOL = "zcor_memory_backup"
HISTORY_TOOL = "zcor_memory_history"

SNAPSHOT_CHANGES = int(os.environ.get("ZCOR_SNAPSHOT_CHANGES", "2000"))
SNAPSHOT_BYTES = int(os.environ.get("ZCOR_SNAPSHOT_BYTES", str(32 << 20)))
SNAPSHOT_SECONDS = float(os.environ.get("ZCOR_SNAPSHOT_SECONDS", "600"))
"""A snapshot (memory-state.json) is written in the background once this many changes, or
this many bytes of change records, have been journaled since the last one, or the oldest
of them is this old (checked at each change). Smaller values: faster start after a crash,
more background writing."""
SNAPSHOT_RETRY_SECONDS = 30.0
POS_ADVANCE_BYTES = 64 << 20
"""When the log has grown this much since the snapshot's position (reads are logged too),
the position moves up (nothing changed: memory-state.pos alone is rewritten) or a snapshot
is taken, so loading never scans more than about this much of the log."""
SYNC_FORK_NODES = 5000
"""From this many memories, a synchronous snapshot (shutdown, restore, migration,
zcor/snapshot) is encoded by a forked child too."""
SEARCH_SYSTEM = (
    "You filter the results of a memory search. You get the search keywords and candidate "
    "memories (id, title, content). Choose the candidates relevant to the keywords, at most 5, "
    "most relevant first. Answer with a JSON array of their ids and nothing else, for example "
    '["m3", "m17"]. Answer [] when none is relevant.'
)
MAX_SEARCH_RESULTS = 5
MAX_PERSONA = 100_000  # characters of PERSONA.md, which goes into every request


@dataclass
class Ctx:
    """One call in progress."""

    actor: str
    tool: str
    seq: int
    at: datetime
    tx: Tx | None = None
    committed: bool = False
    changes: list[dict[str, Any]] = field(default_factory=list)
    log_result: dict[str, Any] | None = None
    preloaded: tuple[str, Any] | None = None
    """Restore: (backupFile, parsed state or the ZcorError) read before the lock was taken."""
    snapshot_first: bool = False
    """Set by a change that cannot be replayed from its record (a revert of a restore)."""
    snapshotted: bool = False
    """The change was written to memory-state.json before its log record (restore, migration)."""


def _loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "arguments"


def invalid_from(err: ValidationError) -> InvalidArgument:
    """One InvalidArgument naming every field that is wrong."""
    msgs = []
    first = None
    for e in err.errors():
        name = _loc(e["loc"])
        first = first or name
        if e["type"] == "extra_forbidden":
            hint = f" (did you mean {to_camel(name)}?)" if "_" in name else ""
            msgs.append(f"unknown parameter {name}{hint}")
        elif e["type"] == "missing":
            msgs.append(f"{name} is required")
        else:
            msgs.append(f"{name}: {e['msg'].removeprefix('Value error, ')}")
    return InvalidArgument("; ".join(msgs), field=first)


def parse_args(model: type[I.Args], params: Any) -> I.Args:
    """Validate a call's arguments against its input model; errors name every bad field."""
    if not isinstance(params, dict):
        raise InvalidArgument("arguments must be a JSON object", field="arguments")
    try:
        return model.model_validate(params)
    except ValidationError as e:
        raise invalid_from(e) from None


def synonym_terms(a: I.SynonymsAddArgs) -> list[str]:
    """A group's terms, trimmed, refused unless distinct after normalization."""
    terms = [t.strip() for t in a.terms]
    if len({normalize(t) for t in terms}) != len(terms):
        raise InvalidArgument("terms must be distinct (compared case-insensitively, full-width = half-width)",
                              field="terms")
    return terms


def parse_time_filter(value: str | None, name: str) -> float | None:
    if value is None:
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidArgument(f"{name}: {value!r} is not an ISO 8601 time like 2026-01-31T20:00:00+08:00",
                              field=name) from None
    if t.tzinfo is None or t.utcoffset() is None:
        raise InvalidArgument(f"{name}: {value!r} has no UTC offset; add one, e.g. {value}+08:00", field=name)
    return t.timestamp()


def time_range(args) -> tuple[float | None, float | None]:
    start = parse_time_filter(args.from_, "from")
    end = parse_time_filter(args.to, "to")
    if start is not None and end is not None and start > end:
        raise InvalidArgument("from is later than to", field="from")
    return start, end


def page(total: int, offset: int, count: int) -> int | None:
    return offset + count if offset + count < total else None


_SURROGATE = re.compile("[\ud800-\udfff]")
MAX_LOGGED_DEPTH = 32


def loggable(value: Any, depth: int = 0) -> Any:
    """A copy of a call's parameters that the operation log can hold: lone surrogates (not
    Unicode, so not UTF-8) become U+FFFD, and nesting deeper than MAX_LOGGED_DEPTH is cut."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, (dict, list)) and depth >= MAX_LOGGED_DEPTH:
        return "(nested too deeply to record)"
    if isinstance(value, dict):
        return {loggable(str(k)): loggable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [loggable(v, depth + 1) for v in value]
    return value


def dedupe_words(words: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for w in words:
        k = normalize(w)
        if k not in seen:
            seen.add(k)
            out.append(w)
    return out


class _Forker:
    """A thread that lives as long as the process and runs what it is given (forks)."""

    def __init__(self) -> None:
        import queue

        self._jobs: queue.Queue = queue.Queue()
        threading.Thread(target=self._loop, name="zcord-forker", daemon=True).start()

    def _loop(self) -> None:
        while True:
            fn, done, ready = self._jobs.get()
            try:
                done.append(("ok", fn()))
            except BaseException as e:
                done.append(("error", e))
            ready.set()

    def run(self, fn: Callable[[], Any]) -> Any:
        done: list = []
        ready = threading.Event()
        self._jobs.put((fn, done, ready))
        ready.wait()
        status, value = done[0]
        if status == "error":
            raise value
        return value


def _test_hold(kind: str) -> None:
    """Tests only: with ZCOR_TEST_RESTORE_HOLD (or _BACKUP_HOLD) set to a path, a restore (a
    backup) in its slow phase creates that file and waits until it is removed (so a test can
    act meanwhile)."""
    path = os.environ.get(f"ZCOR_TEST_{kind}_HOLD")
    if not path:
        return
    Path(path).touch()
    while os.path.exists(path):
        time.sleep(0.01)


def _die_with_parent() -> None:
    """Linux: SIGKILL this (forked) process when its parent dies, so a snapshot writer never
    outlives a killed daemon (its temporary file is deleted at the next start)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:
        os._exit(1)


def _child_answer(pid: int, reader: int) -> tuple[str, Any]:
    """Wait for a snapshot writer child: ("ok", Seal or None) or ("error", what went wrong)."""
    with os.fdopen(reader, "rb") as f:
        answer = f.read()
    _, status = os.waitpid(pid, 0)
    try:
        doc = json.loads(answer)
    except ValueError:
        doc = {"error": f"the snapshot writer (pid {pid}) ended with status {status}"}
    if "error" in doc:
        return "error", doc["error"]
    seal = doc.get("seal")
    return "ok", Seal(**seal) if seal else None


class Service:
    """One Memory directory's tools. Thread-safe: calls are serialized."""

    def __init__(self, memory_dir: Path | str, clock: Callable[[], datetime] = now):
        self.store = Store(memory_dir)
        self.dir = self.store.dir
        self.clock = clock
        self.oplog = OpLog(self.dir / OPLOG_FILE)
        self.synonyms = Synonyms(self.dir / SYNONYMS_FILE)
        self.config_file = ConfigFile(self.dir / CONFIG_FILE)
        self.state = MemoryState()
        self.retriever = Retriever(lambda: self.state, self.synonyms)
        self.sessions = RecallSessions(self.retriever)
        self.lock = threading.RLock()
        self.http_client = None  # an httpx.Client to reuse for provider calls (tests may inject one)
        self._seq = 0
        self._last_bot_backup: float | None = None  # time.monotonic() of the bot's last backup
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        # the journal: changes logged since the last snapshot, and the background writer
        self._journal_changes = 0
        self._journal_bytes = 0
        self._journal_since: float | None = None
        self._snap_thread: threading.Thread | None = None
        self._snap_result: tuple[str, Any, tuple[int, int, int]] | None = None
        self._snap_retry_at = 0.0
        self._pos_offset = 0  # the log offset recorded with the last snapshot
        self._forker: _Forker | None = None
        self._last_snapshot: tuple[threading.Thread | None, str] = (None, "")  # the last settled one
        self._open = False
        # a restore's slow phase (writing the pre-restore backup and the new snapshot) runs
        # without the lock: reads go on against the old state, changes wait (RestoreInProgress)
        self._restore_gate = threading.Lock()  # one restore at a time
        self._restoring = False
        self._restore_idle = threading.Event()
        self._restore_idle.set()
        self._restore_waiters: list[Callable[[], None]] = []
        self._restore_mutex = threading.Lock()  # guards the two above (never held for long)
        self.worker_thread: threading.Thread | None = None
        """The daemon's worker: a change it meets during a restore raises RestoreInProgress to
        the daemon, which runs it again after `when_restored`; other threads wait themselves."""

    # -- lifetime ---------------------------------------------------------------------

    def open(self) -> "Service":
        self.store.open()
        try:
            self.config_file.load()
            self.state = self.store.load()
            self.synonyms.load()
            self.oplog.open()
            pos = read_pos(self.dir)
            replayed = replay(self.state, self.oplog.path, pos)
            self._pos_offset = pos.log_offset if pos is not None and pos.log_offset <= self.oplog.size else 0
        except BaseException:
            self.close()
            raise
        self._open = True
        if replayed:
            self._journal_changes = replayed
            self._journal_since = time.monotonic()
        ops = [c.op_seq for c in self.state.history if c.op_seq]
        self._seq = max([self.oplog.last_seq, *ops[-1:]])
        self._reconcile()
        self._last_bot_backup = self._bot_backup_clock()
        return self

    def _bot_backup_clock(self) -> float | None:
        """The bot's last backup on the monotonic clock, from the newest bot backup file (so
        a restart does not reset the bot's backup interval)."""
        try:
            newest = max((e.stat(follow_symlinks=False).st_mtime for e in os.scandir(self.store.backups)
                          if BOT_BACKUP_RE.match(e.name)), default=None)
        except OSError:
            return None
        if newest is None:
            return None
        return time.monotonic() - max(0.0, time.time() - newest)

    def close(self) -> None:
        """Finish any snapshot, write one holding the journaled changes (so the next start
        replays nothing), close the log and release the directory."""
        self._restore_idle.wait()  # a restore in its slow phase finishes first
        with self.lock:
            if self._open:
                self._open = False
                self._settle_snapshot()
                if self._journal_changes:
                    try:
                        self._save(self._snapshot_pos())
                    except (OSError, ZcorError) as e:
                        print(f"zcord: could not write the snapshot at shutdown ({e}); the next start replays "
                              f"the operation log", file=sys.stderr)
            self.oplog.close()
            self.store.close()

    def __enter__(self) -> "Service":
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the one entry point ------------------------------------------------------------

    @property
    def config(self) -> Config:
        """The effective configuration (config.json with environment overrides)."""
        return self.config_file.effective

    def public_config(self) -> dict[str, Any]:
        key_set = api_key() is not None
        withheld = key_withheld_reason(self.config.llm.base_url) if key_set else None
        return self.config.public(api_key_set=key_set, withheld=withheld)

    def _operate(self, name: str, params: dict[str, Any], actor: str,
                 fn: Callable[[], tuple[Any, list[dict[str, Any]]]], what: str) -> Any:
        """Run an operator action that is not a tool (config, synonym groups) the way tools
        run: serialized, recorded in the operation log, announced to listeners."""
        with self.lock:
            self.store.verify_lock()
            ctx = self._new_ctx(name, actor)
            try:
                result, changes = fn()
            except ZcorError as e:
                self._log(ctx, params, error=e)
                raise
            except OSError as e:
                err = StorageError(f"{what} could not be saved ({describe_os_error(e)}); nothing changed.")
                self._log(ctx, params, error=err)
                raise err from None
            if changes:
                ctx.committed = True
                ctx.changes = changes
            try:
                self._log(ctx, params)
            finally:
                if changes:
                    self._notify(ctx)
            return result

    def update_config(self, patch: dict[str, Any], actor: str = "operator") -> dict[str, Any]:
        """Change config.json (partial, camelCase keys); recorded in the operation log."""
        def apply():
            before = self.config_file.stored.model_dump(mode="json", by_alias=True)
            self.config_file.update(patch)
            after = self.config_file.stored.model_dump(mode="json", by_alias=True)
            return self.public_config(), [{"kind": "config.update", "before": before, "after": after}]

        return self._operate("zcor/config/set", {"patch": patch}, actor, apply, "config.json")

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
            raise InvalidArgument(f"text is {len(text)} characters; PERSONA.md may have at most {MAX_PERSONA}",
                                  field="text")
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArgument("text contains a lone surrogate code point, which is not valid Unicode",
                                  field="text") from None

        def apply():
            before = self.persona_get()["text"]
            if before == text:
                return self.persona_get(), []
            atomic_write(self.dir / PERSONA_FILE, data)
            return self.persona_get(), [{"kind": "persona.update", "target": PERSONA_FILE,
                                         "before": before, "after": text}]

        return self._operate("zcor/persona/set", {"text": text}, actor, apply, PERSONA_FILE)

    def synonym_groups(self) -> list[list[str]]:
        with self.lock:
            self._refresh_synonyms()
            return [list(g) for g in self.synonyms.groups]

    def set_synonym_group(self, index: int | None, terms: list[str] | None,
                          actor: str = "operator") -> dict[str, Any]:
        """Operators' synonym editing: index None adds, terms None removes, both replace."""
        params = {"index": index, "terms": terms}

        def apply():
            try:
                self.synonyms.reload_if_changed()  # a broken hand edit is never replaced by our copy
            except StateFileInvalid as e:
                raise StateFileInvalid(f"{e.message}; fix the file by hand first (it was left as it is)") from None
            groups = self.synonyms.groups
            if index is not None and (not isinstance(index, int) or isinstance(index, bool)
                                      or not 0 <= index < len(groups)):
                raise InvalidArgument(f"index must name an existing group (0..{len(groups) - 1})", field="index")
            clean = None
            if terms is not None:
                clean = synonym_terms(parse_args(I.SynonymsAddArgs, {"terms": terms}))
            if index is None and clean is None:
                raise InvalidArgument("give terms to add a group, or an index to change or remove one",
                                      field="terms")
            before = groups[index] if index is not None else None
            new = list(groups)
            if index is None:
                new.append(clean)
            elif clean is None:
                del new[index]
            else:
                new[index] = clean
            self.synonyms.replace_groups(new)
            self.retriever.teach_jieba()
            kind = "synonyms.add" if before is None else ("synonyms.remove" if clean is None else "synonyms.update")
            return {"groups": len(new)}, [{"kind": kind, "before": before, "after": clean}]

        return self._operate("zcor/synonyms/set", params, actor, apply, "synonyms.json")

    def reload(self) -> None:
        """Re-read config.json and synonyms.json (SIGHUP); a broken file keeps the old values."""
        with self.lock:
            self.config_file.load()
            self.synonyms.load()

    # -- bot-facing retrieval (not tool calls: never recorded) --------------------------

    def prefix(self) -> str:
        """The system prefix, built from live state and PERSONA.md."""
        with self.lock:
            return build_prefix(self.state, self.dir / PERSONA_FILE, self.config.relationship_memory)

    def recall(self, session: str, events: Any) -> list[str]:
        """Replace the session's recall set from a batch of events; returns it, best first."""
        if not isinstance(session, str) or not session:
            raise InvalidArgument("session must be a non-empty string", field="session")
        parsed = parse_events(events)
        with self.lock:
            self._refresh_synonyms()
            return self.sessions.recall(session, parsed, self.config.recall_budget, self.config.recall_ranking)

    def context(self, session: str) -> dict[str, Any]:
        """The context header for the session, rendered from live state now."""
        if not isinstance(session, str) or not session:
            raise InvalidArgument("session must be a non-empty string", field="session")
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
            self._refresh_synonyms()
            cfg = self.config
            return self.sessions.explain(text, cfg.recall_budget, cfg.recall_ranking, sender_key, self._senders_on())

    def _senders_on(self) -> bool:
        """Speakers' relationships lead the header when both switches are on."""
        return self.config.recall_senders and self.config.relationship_memory

    def _refresh_synonyms(self) -> None:
        """Pick up a hand edit of synonyms.json; a broken edit keeps the last good groups."""
        try:
            self.synonyms.reload_if_changed()
        except ZcorError as e:
            print(f"zcord: {e.message}; keeping the previous synonym groups", file=sys.stderr)

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
            "journaledChanges": self._journal_changes,
        }

    def call(self, tool: str, params: Any = None, actor: str = "operator",
             allowed: Collection[str] | None = None, view: bool = False) -> dict[str, Any]:
        """Run one tool call and record it. Raises ZcorError subclasses on failure.

        Args:
            allowed: the tools declared to this caller; any other name is refused (and recorded).
            view: an operator's read made only to display something (VIEW_TOOLS): answered
                but not recorded. Asked by the model, or for another tool, it is refused (and
                recorded).
        """
        if params is None:
            params = {}
        declared = allowed is None or tool in allowed
        if view and actor != "model" and tool in VIEW_TOOLS and declared:
            return self._view_call(tool, params, actor)
        if tool == SEARCH_TOOL and declared:
            return self._search_call(params, actor)
        if tool == RESTORE_TOOL and declared and not view:
            return self._restore_call(params, actor)
        if tool == BACKUP_TOOL and declared and not view:
            return self._backup_call(params, actor)
        if tool == HISTORY_TOOL and declared:
            self.oplog.warm(background=True)  # a large backlog is indexed by its thread, not here
        return self._writes_wait(lambda: self._call_locked(tool, params, actor, allowed, view, None))

    def _call_locked(self, tool: str, params: Any, actor: str, allowed: Collection[str] | None, view: bool,
                     preloaded: tuple[str, Any] | None) -> dict[str, Any]:
        from .tools import TOOLS

        with self.lock:
            self.store.verify_lock()
            self._reconcile_or_say()  # so a history query sees changes whose log record failed
            ctx = self._new_ctx(tool, actor)
            ctx.preloaded = preloaded

            def run() -> dict[str, Any]:
                if view:
                    raise (Forbidden("Only operators may make unrecorded display reads (zcor/view); "
                                     "the model's calls are always recorded.", field="_meta")
                           if actor == "model" else
                           InvalidArgument(f"zcor/view is for the read-only tools ({', '.join(sorted(VIEW_TOOLS))}); "
                                           f"{tool} is always recorded.", field="_meta"))
                spec = TOOLS.get(tool)
                if spec is None or (allowed is not None and tool not in allowed):
                    raise UnknownTool(f"Tool {tool!r} is not declared in this request; call only the "
                                      f"tools you were given.", field="name")
                return spec.handler(self, parse_args(spec.input_model, params), ctx)

            return self._run_logged(ctx, params, run)

    def run_operation(self, name: str, params: Any, fn: Callable[[Ctx], dict[str, Any]]) -> dict[str, Any]:
        """An operator method that changes the Memory (revert, reinstate) run as a tool call
        is: serialized, one transaction, journaled, recorded in the log, announced."""
        def attempt() -> dict[str, Any]:
            with self.lock:
                self.store.verify_lock()
                ctx = self._new_ctx(name, "operator")
                return self._run_logged(ctx, params, lambda: fn(ctx), storage_errors=True)

        return self._writes_wait(attempt)

    # -- restores: reads go on while the slow phase runs ----------------------------------

    def _writes_wait(self, fn: Callable[[], Any]) -> Any:
        """Run fn (which takes the lock); a change it met during a restore's slow phase was
        undone: raise RestoreInProgress (defer_writes) or wait for the restore and run it again."""
        while True:
            try:
                return fn()
            except RestoreInProgress:
                if threading.current_thread() is self.worker_thread:
                    raise
                self._restore_idle.wait()

    def when_restored(self, callback: Callable[[], None]) -> None:
        """Call callback once no restore is in its slow phase (now, if none is). Never
        waits for the service lock (the daemon calls it from its event loop)."""
        with self._restore_mutex:
            if self._restoring:
                self._restore_waiters.append(callback)
                return
        callback()

    def _set_restoring(self, on: bool) -> list[Callable[[], None]]:
        """(lock held) Begin or end a restore's slow phase; ending returns the waiters to call."""
        with self._restore_mutex:
            self._restoring = on
            if on:
                self._restore_idle.clear()
                return []
            self._restore_idle.set()
            waiters, self._restore_waiters = self._restore_waiters, []
            return waiters

    @staticmethod
    def _wake(waiters: list[Callable[[], None]]) -> None:
        for callback in waiters:
            try:
                callback()
            except Exception as e:  # a waiter that cannot be woken must not fail the restore
                print(f"zcord: could not resume a call held by a restore: {e!r}", file=sys.stderr)

    def _restore_call(self, params: Any, actor: str) -> dict[str, Any]:
        """zcor_memory_restore in three steps, so reads are answered throughout:

        1. with the lock: check the arguments (the backup was parsed before, without it) and
           stop changes (they wait, RestoreInProgress) and background snapshots;
        2. without it: write the pre-restore backup of the (unchanging) state, then the new
           state's snapshot, which names the restore's change, atomically: a crash before
           the rename leaves the old state, after it the new one (the next start records
           the change from the snapshot if its log record is missing);
        3. with the lock: switch the live state to the new one and record the call.
        Reads meanwhile see the old state, and from the switch the new one."""
        from .tools import TOOLS

        spec = TOOLS[RESTORE_TOOL]
        with self._restore_gate:
            preloaded = self._preload_restore(params)  # parsing a large backup must not hold the lock
            with self.lock:
                self.store.verify_lock()
                self._reconcile_or_say()
                if self.state.migration is not None:  # the first change after a migration: all at once
                    ctx = self._new_ctx(RESTORE_TOOL, actor)
                    ctx.preloaded = preloaded
                    return self._run_logged(ctx, params,
                                            lambda: self.restore(parse_args(spec.input_model, params), ctx))
                ctx = self._new_ctx(RESTORE_TOOL, actor)
                try:
                    a = parse_args(spec.input_model, params)
                    incoming = preloaded[1] if preloaded is not None and preloaded[0] == a.backup_file \
                        else self.store.read_backup(a.backup_file, RestoreLimits.of(self.config))
                    if isinstance(incoming, ZcorError):
                        raise incoming
                except ZcorError as e:
                    self._log(ctx, params, error=e)
                    raise
                self._set_restoring(True)
            try:
                return self._restore_slow(ctx, params, a.backup_file, incoming)
            finally:
                with self.lock:
                    waiters = self._set_restoring(False) if self._restoring else []
                self._wake(waiters)

    def _write_waited(self, pos: SnapshotPos, view: StateView | None = None) -> Seal | None:
        """Write a snapshot and wait for it: by a forked child from SYNC_FORK_NODES memories
        (the daemon's heap keeps none of the encoder's garbage), else, or when the child
        fails, here, raising what the disk says. view: a restore's new state (encoded with a
        serializer of its own, without the lock); None: the live state."""
        target = self.state if view is None else view
        if len(target.nodes) >= SYNC_FORK_NODES:
            try:
                status, value = _child_answer(*self._fork_snapshot(pos, view))
            except OSError:
                status, value = "error", None
            if status == "ok":
                return value
        return self.store.write_snapshot(target, pos, private=view is not None)

    def _restore_slow(self, ctx: Ctx, params: Any, name: str, incoming: MemoryState) -> dict[str, Any]:
        """Steps 2 and 3 of _restore_call (changes are held: nothing changes the state)."""
        bot = ctx.actor == "model"
        snap = self._snap_thread
        if snap is not None:
            snap.join()  # a background snapshot finishes without the lock; no other starts now

        def summary(s: MemoryState | StateView) -> dict[str, Any]:
            return {"nodes": len(s.nodes), "relationships": len(s.relationships), "important": list(s.important)}

        try:
            with self.lock:
                self._settle_snapshot()
                old = StateView.of(self.state)
            try:
                auto = self.store.write_backup(old, ctx.at, bot=bot, private=True)
            except OSError as e:
                raise StorageError(f"The pre-restore backup could not be written ({describe_os_error(e)}); "
                                   f"nothing was restored.") from None
            change = Change(change_id=old.last_change_id + 1, at=ctx.at, actor=ctx.actor, tool=ctx.tool,
                            op_seq=ctx.seq, kind="state.restore", target=None,
                            before={"backupFile": auto, **summary(old)},
                            after={"restoredFrom": name, **summary(incoming)})
            new = StateView(incoming.nodes, list(incoming.important), incoming.relationships,
                            [*old.history, change], max(old.next_id, incoming.next_id),
                            list(old.history_segments))
            pos = SnapshotPos(min(change.change_id, self.oplog.last_change_id), self.oplog.size)
            _test_hold("RESTORE")
            try:
                seal = self._write_waited(pos, new)
            except OSError as e:
                check = "" if e.errno in (errno.EMFILE, errno.ENFILE) else " Check the disk and try again."
                raise StorageError(f"The Memory could not be saved ({describe_os_error(e)}); nothing "
                                   f"changed.{check}") from None
        except ZcorError as e:
            with self.lock:
                self._log(ctx, params, error=e)
            raise
        except Exception as e:
            err = InternalError(f"internal error in {ctx.tool}: {type(e).__name__}: {e}; nothing changed")
            with self.lock:
                self._log(ctx, params, error=err)
            raise err from e
        with self.lock:  # the switch
            waiters = self._set_restoring(False)
            tx = self._begin(ctx)
            tx.replace_all(incoming)
            self.state.history.append(change)
            if seal is not None:
                self.store.apply_seal(self.state, seal)
            self._snapshot_written(pos)
            ctx.committed = ctx.snapshotted = True
            ctx.changes = [change.dump()]
            ctx.log_result = {"restoredFrom": name, "backupFile": auto}
            if bot:
                self._prune_bot_backups(ctx)
            result = {"restoredFrom": name, "backupFile": auto, **summary(self.state)}
            try:
                self._log(ctx, params)
            finally:
                self._notify(ctx)
        self._wake(waiters)
        return result

    def _run_logged(self, ctx: Ctx, params: Any, fn: Callable[[], dict[str, Any]],
                    storage_errors: bool = False) -> dict[str, Any]:
        """Run one call (lock held): on failure undo it and record the error; on success
        record it and announce what it changed. storage_errors: an OSError is a
        storage_error (else, like anything unexpected, an internal_error)."""
        name = ctx.tool
        try:
            result = fn()
        except RestoreInProgress:
            self._rollback(ctx)  # not an operation: it runs again after the restore
            if ctx.seq == self._seq:
                self._seq -= 1
            raise
        except ZcorError as e:
            self._rollback(ctx)
            self._log(ctx, params, error=e)
            raise
        except Exception as e:
            self._rollback(ctx)
            if storage_errors and isinstance(e, OSError):
                err: ZcorError = StorageError(f"{name} could not be completed ({describe_os_error(e)}); "
                                              f"nothing changed.")
            else:
                err = InternalError(f"internal error in {name}: {type(e).__name__}: {e}; nothing changed")
            self._log(ctx, params, error=err)
            raise err from e
        try:
            self._log(ctx, params)
        finally:
            if ctx.committed:
                self._notify(ctx)
        return result

    def find_operation(self, seq: int) -> dict[str, Any] | None:
        """The operation-log record with this seq, or None."""
        from .journal import find_record

        return find_record(self.oplog.path, seq)

    def _view_call(self, tool: str, params: Any, actor: str) -> dict[str, Any]:
        """A read-only tool answered for display: same checks and result, no log record."""
        from .tools import TOOLS

        spec = TOOLS[tool]
        if tool == HISTORY_TOOL:
            self.oplog.warm(background=True)
        with self.lock:
            self.store.verify_lock()
            if tool == HISTORY_TOOL:
                self._reconcile_or_say()
            ctx = Ctx(actor=actor, tool=tool, seq=0, at=self.clock())
            try:
                return spec.handler(self, parse_args(spec.input_model, params), ctx)
            except ZcorError:
                raise
            except Exception as e:
                raise InternalError(f"internal error in {tool}: {type(e).__name__}: {e}; nothing changed") from e

    def history_query(self, params: Any) -> dict[str, Any]:
        """`zcor/history/query`: the history tool's query plus the operator's filters (changes only,
        actor, tool, target), all applied by the index, so totals and pages are exact. Like
        other operator displays it is not recorded."""
        a = parse_args(I.OperatorHistoryArgs, params)
        start, end = time_range(a)
        self.oplog.warm(background=True)
        with self.lock:
            self.store.verify_lock()
            self._reconcile_or_say()
            items, total = self.oplog.query(a.keywords or [], start, end, a.limit, a.offset,
                                            changes_only=a.changes_only, actor=a.actor, tool=a.tool,
                                            target=a.target)
        return {"items": items, "total": total, "nextOffset": page(total, a.offset, len(items))}

    def _preload_restore(self, params: Any) -> tuple[str, Any] | None:
        from .tools import TOOLS

        try:
            a = parse_args(TOOLS[RESTORE_TOOL].input_model, params)
        except ZcorError:
            return None  # reported by the call itself
        try:
            return a.backup_file, self.store.read_backup(a.backup_file, RestoreLimits.of(self.config))
        except ZcorError as e:
            return a.backup_file, e
        except OSError as e:
            return a.backup_file, StorageError(f"The backup could not be read ({describe_os_error(e)}).")

    def _new_ctx(self, tool: str, actor: str) -> Ctx:
        """The next operation: its sequence number and time (call with the lock held)."""
        self._seq += 1
        return Ctx(actor=actor, tool=tool, seq=self._seq, at=self.clock())

    def _rollback(self, ctx: Ctx) -> None:
        if ctx.tx is not None and not ctx.committed:
            ctx.tx.rollback()

    # -- commit and log -------------------------------------------------------------------

    def _begin(self, ctx: Ctx) -> Tx:
        if self._restoring:
            raise RestoreInProgress
        ctx.tx = Tx(self.state, ctx.actor, ctx.tool, ctx.seq, ctx.at)
        return ctx.tx

    def _commit(self, ctx: Ctx) -> None:
        tx = ctx.tx
        assert tx is not None
        mig = self.state.migration
        if mig is not None:
            tx.record("state.migrate", None, before={"version": mig.from_version, "file": mig.file},
                      after={"version": 3})
            tx.changes.insert(0, tx.changes.pop())
        numbered = tx.commit_changes()
        # most changes become durable with their log record (_log); these cannot be
        # replayed from it, so the snapshot is written first, as before the journal
        if mig is not None or ctx.tool == RESTORE_TOOL or ctx.snapshot_first or not self.store.state_path.exists():
            self._settle_snapshot()
            try:
                self._save(self._snapshot_pos())
            except OSError as e:
                tx.rollback()
                if e.errno in (errno.EMFILE, errno.ENFILE):
                    raise StorageError(f"The Memory could not be saved: {describe_os_error(e)}; nothing "
                                       f"changed.") from None
                raise StorageError(f"The Memory could not be saved ({e.strerror or e}); nothing changed. "
                                   f"Check the disk and try again.") from None
            ctx.snapshotted = True
            self._snapshot_written()
        self.state.migration = None
        ctx.committed = True
        ctx.changes = [c.dump() for c in numbered]

    # -- snapshots ----------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Write memory-state.json now, holding every change so far (waits for a snapshot
        being written in the background); StorageError when the disk refuses it (the
        operation log still holds every change, so nothing is lost)."""
        return self._writes_wait(self._snapshot_locked)

    def _snapshot_locked(self) -> dict[str, Any]:
        """zcor/snapshot. A large Memory's snapshot is written by the background writer (a
        forked child) while the lock is free, so calls go on meanwhile; the caller waits for
        it. A small one, or one the child failed to write, is written here, under the lock."""
        mine = None
        while mine is None:
            with self.lock:
                self.store.verify_lock()
                if self._restoring:
                    raise RestoreInProgress
                busy = self._snap_thread
                if busy is None or not busy.is_alive():
                    self._settle_snapshot()
                    if len(self.state.nodes) < SYNC_FORK_NODES:
                        return self._snapshot_here()
                    pos = self._snapshot_pos()
                    self._start_snapshot()
                    mine = self._snap_thread
            if mine is None:
                busy.join()  # a background snapshot is being written: wait for it without the lock
        mine.join()
        with self.lock:
            if self._snap_thread is mine:
                self._settle_snapshot()
            thread, status = self._last_snapshot
            if thread is mine and status == "ok":
                return {"changeId": pos.change_id, "bytes": self.store.state_path.stat().st_size}
            if self._restoring:
                raise RestoreInProgress
            return self._snapshot_here()  # raises what the disk says, or writes it after all

    def _snapshot_here(self) -> dict[str, Any]:
        pos = self._snapshot_pos()
        try:
            self._save(pos)
        except OSError as e:
            raise StorageError(f"The snapshot could not be written ({describe_os_error(e)}); the operation log "
                               f"still holds every change.") from None
        self._snapshot_written(pos)
        return {"changeId": self.state.next_change_id() - 1, "bytes": self.store.state_path.stat().st_size}

    def _save(self, pos: SnapshotPos) -> None:
        """Store.save (the migrated original kept, the snapshot, the seal taken in), with the
        snapshot written by _write_waited: by a forked child for a large Memory (at 100,000
        memories, writing it here left the heap some 60 MiB larger)."""
        self.store.keep_original(self.state)
        seal = self._write_waited(pos)
        if seal is not None:
            self.store.apply_seal(self.state, seal)

    def _snapshot_written(self, pos: SnapshotPos | None = None) -> None:
        """A synchronous snapshot holding every change so far was written."""
        self._journal_changes, self._journal_bytes, self._journal_since = 0, 0, None
        self._snap_retry_at = 0.0
        self._pos_offset = pos.log_offset if pos is not None else self.oplog.size

    def _advance_pos(self) -> None:
        """After any record: keep the stretch of log that loading must scan short."""
        if self.oplog.size - self._pos_offset < POS_ADVANCE_BYTES or self._snap_thread is not None or \
                self._restoring:
            return
        if self._journal_changes == 0:
            pos = self._snapshot_pos()
            try:
                write_pos(self.dir, pos)
            except OSError as e:
                print(f"zcord: could not update {POS_FILE} ({e})", file=sys.stderr)
            self._pos_offset = pos.log_offset  # on failure, the next try is POS_ADVANCE_BYTES later
        elif time.monotonic() >= self._snap_retry_at:
            self._start_snapshot()

    def _snapshot_pos(self) -> SnapshotPos:
        last = self.state.next_change_id() - 1
        return SnapshotPos(min(last, self.oplog.last_change_id), self.oplog.size)

    def _journaled(self, nbytes: int) -> None:
        """A change record was appended: start a background snapshot when one is due."""
        self._journal_changes += 1
        self._journal_bytes += nbytes
        now_m = time.monotonic()
        if self._journal_since is None:
            self._journal_since = now_m
        if self._snap_thread is not None:
            if self._snap_thread.is_alive():
                return
            self._settle_snapshot()
        if now_m < self._snap_retry_at or not self._journal_changes or self._restoring:
            return
        if (self._journal_changes >= SNAPSHOT_CHANGES or self._journal_bytes >= SNAPSHOT_BYTES
                or now_m - (self._journal_since or now_m) >= SNAPSHOT_SECONDS):
            self._start_snapshot()

    def _start_snapshot(self) -> None:
        """Write the snapshot in the background (lock held, between calls).

        A forked child process writes it from its copy-on-write image of the state: the
        encoding never competes with calls for the interpreter, so writes keep their speed
        while a snapshot is written. A thread of this process waits for the child and
        takes its answer. Where fork is unavailable, a thread writes from a copy instead."""
        pos = self._snapshot_pos()
        taken = (self._journal_changes, self._journal_bytes, pos.log_offset)
        self._snap_result = None
        try:
            pid, reader = self._fork_snapshot(pos)
        except OSError as e:
            print(f"zcord: cannot fork the snapshot writer ({e}); writing it from a thread", file=sys.stderr)
            view = StateView.of(self.state)

            def run() -> None:
                try:
                    self._snap_result = ("ok", self.store.write_snapshot(view, pos), taken)
                except BaseException as e:  # reported by _settle_snapshot; the journal still holds it all
                    self._snap_result = ("error", e, taken)
        else:
            def run() -> None:
                self._snap_result = (*_child_answer(pid, reader), taken)

        self._snap_thread = threading.Thread(target=run, name="zcord-snapshot", daemon=True)
        self._snap_thread.start()

    def _fork_snapshot(self, pos: SnapshotPos, view: StateView | None = None) -> tuple[int, int]:
        """Fork the child that writes the snapshot (of view: a restore's new state; else of
        the live state); returns (pid, read end of its answer).

        The fork is made by one long-lived thread (the caller waits for it, lock held), so
        the child's parent-death signal (given by the thread that forked it) comes only when
        the daemon itself ends."""
        if self._forker is None:
            self._forker = _Forker()
        return self._forker.run(lambda: self._fork_child(pos, view))

    def _fork_child(self, pos: SnapshotPos, view: StateView | None = None) -> tuple[int, int]:
        reader, writer = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(reader)
            os.close(writer)
            raise
        if pid:
            os.close(writer)
            return pid, reader
        # the child: write, answer in one line, and leave without running any cleanup
        code = 1
        try:
            os.close(reader)
            _die_with_parent()
            self.store.snapshot_lock = threading.RLock()  # no other thread exists here
            seal = self.store.write_snapshot(self.state, pos) if view is None else \
                self.store.write_snapshot(view, pos, private=True)
            answer = {"seal": None if seal is None else {"segment": seal.segment, "first_id": seal.first_id,
                                                         "last_id": seal.last_id}}
            code = 0
        except BaseException as e:
            answer = {"error": f"{type(e).__name__}: {e}"}
        try:
            os.write(writer, json.dumps(answer).encode())
        finally:
            os._exit(code)

    def _settle_snapshot(self) -> None:
        """Wait for the background snapshot, if any, and take in its outcome (lock held)."""
        thread = self._snap_thread
        if thread is None:
            return
        thread.join()
        self._snap_thread = None
        result, self._snap_result = self._snap_result, None
        if result is None:
            return
        status, value, (changes, nbytes, offset) = result
        self._last_snapshot = (thread, status)
        if status == "ok":
            self._pos_offset = offset
            if value is not None:
                self.store.apply_seal(self.state, value)
            self._journal_changes = max(0, self._journal_changes - changes)
            self._journal_bytes = max(0, self._journal_bytes - nbytes)
            self._journal_since = time.monotonic() if self._journal_changes else None
        else:
            self._snap_retry_at = time.monotonic() + SNAPSHOT_RETRY_SECONDS
            print(f"zcord: could not write the snapshot ({value}); the operation log holds every change, "
                  f"retrying in {SNAPSHOT_RETRY_SECONDS:.0f} s", file=sys.stderr)

    def _notify(self, ctx: Ctx) -> None:
        """Tell listeners (the daemon's subscribers) what a committed call changed."""
        event = {"tool": ctx.tool, "actor": ctx.actor, "seq": ctx.seq,
                 "changes": [{"kind": c["kind"], "target": c.get("target")} for c in ctx.changes]}
        for listener in list(self.listeners):
            try:
                listener(event)
            except Exception as e:  # a broken listener must not fail the call
                print(f"zcord: change listener failed: {e!r}", file=sys.stderr)

    def _reconcile_or_say(self) -> None:
        """_reconcile before a call or a history read: a log that still cannot be written is
        reported here, and the call goes on (its own record meets the same failure)."""
        try:
            self._reconcile()
        except OSError as e:
            print(f"zcord: could not write the operation log: {e}", file=sys.stderr)

    def _reconcile(self, upto: int | None = None) -> None:
        """Log changes that reached the state but not the log (crash or failed log write).

        Args:
            upto: the last change id to consider (the call being logged owns the later ones).
        """
        history = self.state.history
        if (not history and self.state.sealed_last_change_id > self.oplog.last_change_id) or \
                (history and history[0].change_id > self.oplog.last_change_id + 1):
            # unlogged changes were already sealed into a segment (rare: read them back)
            history = list(self.store.iter_history(self.state))
        end = len(history)
        if upto is not None:
            while end > 0 and history[end - 1].change_id > upto:
                end -= 1
        if not end or history[end - 1].change_id <= self.oplog.last_change_id:
            return
        i = end
        while i > 0 and history[i - 1].change_id > self.oplog.last_change_id:
            i -= 1
        groups: dict[int | None, list] = {}
        for c in history[i:end]:
            groups.setdefault(c.op_seq, []).append(c)
        for op_seq, changes in groups.items():
            first = changes[0]
            self.oplog.append(OpRecord(
                seq=op_seq or self._seq + 1, at=first.at, actor=first.actor, tool=first.tool,
                status="ok", changes=[c.dump() for c in changes], recovered=True), durable=True)
            self._seq = max(self._seq, op_seq or self._seq + 1)

    def _log(self, ctx: Ctx, params: Any, error: ZcorError | None = None) -> None:
        record = OpRecord(
            seq=ctx.seq, at=ctx.at, actor=ctx.actor, tool=ctx.tool,
            params=params if isinstance(params, dict) else {"arguments": repr(params)[:1000]},
            status="error" if error else "ok",
            error=OpError(code=error.code, message=error.message, field=error.field) if error else None,
            changes=ctx.changes, result=ctx.log_result)
        journal = ctx.committed and ctx.tx is not None and not ctx.snapshotted
        try:
            own = [c["changeId"] for c in ctx.changes if c.get("changeId")]
            self._reconcile(upto=own[0] - 1 if own else None)
            before = self.oplog.size
            try:
                self.oplog.append(record, durable=bool(ctx.changes))
            except ValueError:  # JSON cannot carry these params (lone surrogates, nesting too deep)
                record = record.model_copy(update={"tool": loggable(record.tool), "params": loggable(record.params)})
                self.oplog.append(record, durable=bool(ctx.changes))
        except OSError as e:
            if journal:
                # the record was the change's only durable copy: undo it in memory too
                ctx.tx.rollback()
                ctx.committed = False
                ctx.changes = []
                err = StorageError(f"The Memory could not be saved ({describe_os_error(e)}); nothing changed. "
                                   f"Check the disk and try again.")
                try:  # the failed call is recorded like any other, if the disk takes it
                    self.oplog.append(record.model_copy(update={
                        "status": "error", "changes": [], "result": None,
                        "error": OpError(code=err.code, message=err.message)}), durable=False)
                except (OSError, ValueError):
                    pass
                raise err from None
            if ctx.committed:
                raise MayHaveTakenEffect(
                    f"The change was saved but the operation log could not be written ({describe_os_error(e)}); "
                    f"the operation may have taken effect. Read the memory before retrying.") from None
            print(f"zcord: could not write the operation log: {e}", file=sys.stderr)
            return
        if journal:
            self._journaled(self.oplog.size - before)
        self._advance_pos()

    # -- zcor_memory_search: the LLM phase runs without the lock ------------------------

    def _search_call(self, params: Any, actor: str) -> dict[str, Any]:
        from .tools import TOOLS

        spec = TOOLS[SEARCH_TOOL]
        with self.lock:
            self.store.verify_lock()
            ctx = self._new_ctx(SEARCH_TOOL, actor)
            try:
                args = parse_args(spec.input_model, params)
                self._refresh_synonyms()
                terms = sorted(self.synonyms.classes.expand(args.keywords))
                hits = self.retriever.hits(terms, keyword_equality=False, limit=SEARCH_CANDIDATES,
                                           mode=self.config.recall_ranking, floor=False)
                candidates = [self.state.nodes[h.id].dump() for h in hits]
                cfg = self.config.llm
            except ZcorError as e:
                self._log(ctx, params, error=e)
                raise
        try:
            if not candidates:
                ids: list[str] = []
            else:
                ids = self._llm_filter(cfg, args.keywords, candidates)
        except ZcorError as e:
            with self.lock:
                self._renumber(ctx)
                self._log(ctx, params, error=e)
            raise
        by_id = {c["id"]: c for c in candidates}
        result = {"items": [by_id[i] for i in ids], "candidateCount": len(candidates)}
        with self.lock:
            ctx.log_result = {"ids": ids, "candidates": [c["id"] for c in candidates]}
            self._renumber(ctx)
            self._log(ctx, params)
        return result

    def _renumber(self, ctx: Ctx) -> None:
        """A record logged after the lock was let go takes the next seq now, so the log's seqs
        increase line by line and the largest is always the last (unique across restarts)."""
        if ctx.seq != self._seq:
            ctx.seq = self._new_ctx(ctx.tool, ctx.actor).seq

    def _llm_filter(self, cfg, keywords: list[str], candidates: list[dict[str, Any]]) -> list[str]:
        """Ask the configured provider which candidates are relevant; strict about the answer."""
        provider = Provider(cfg, api_key_for(cfg.base_url), client=self.http_client)
        payload = {"keywords": keywords,
                   "candidates": [{"id": c["id"], "title": c["title"], "content": c["content"]}
                                  for c in candidates]}
        reply = provider.chat(SEARCH_SYSTEM, [Message("user", json.dumps(payload, ensure_ascii=False))],
                              max_tokens=256)
        text = reply.text.strip()
        fence = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, re.S)
        if fence:
            text = fence.group(1)
        try:
            ids = json.loads(text)
        except ValueError:
            raise ProviderError(f"The search filter's answer is not a JSON array of ids: {reply.text[:200]!r}") \
                from None
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ProviderError(f"The search filter's answer is not a JSON array of id strings: {text[:200]!r}")
        if len(ids) > MAX_SEARCH_RESULTS:
            raise ProviderError(f"The search filter returned {len(ids)} ids; at most {MAX_SEARCH_RESULTS} "
                                f"were asked for.")
        if len(set(ids)) != len(ids):
            raise ProviderError("The search filter returned an id twice.")
        known = {c["id"] for c in candidates}
        strangers = [i for i in ids if i not in known]
        if strangers:
            raise ProviderError(f"The search filter returned ids that were not candidates: "
                                f"{', '.join(strangers)}.")
        return ids

    # -- lookups ----------------------------------------------------------------------------

    def _node(self, node_id: str, name: str = "id") -> Node:
        node = self.state.nodes.get(node_id)
        if node is None:
            raise NotFound(f"No memory with {name} {node_id!r}. Use zcor_memory_query or "
                           f"zcor_memory_children to find ids.", field=name)
        return node

    def _current(self, node_id: str, name: str = "id", action: str = "changed") -> Node:
        node = self._node(node_id, name)
        if node.superseded_by is not None:
            raise Superseded(f"Memory {node_id} was superseded by {node.superseded_by} and cannot be "
                             f"{action}; use {node.superseded_by} instead.", field=name)
        return node

    def _check_parent(self, parent_id: str, node_id: str | None) -> None:
        self._node(parent_id, "parentId")
        if node_id is not None and node_id in self.state.ancestors(parent_id):
            raise Conflict(f"Moving {node_id} under {parent_id} would create a cycle: {parent_id} is "
                           f"{node_id} itself or one of its descendants.", field="parentId")

    def _derive(self, title: str) -> list[str]:
        """Keywords from a title, cut by a jieba that knows every synonym term and keyword."""
        self.retriever.teach_jieba()
        return derive_keywords(title)

    def warm(self) -> None:
        """Build the retrieval indexes and the query text, load jieba, teach it the Memory's
        words and index the log (a daemon runs this in the background after it is ready, so
        the first calls do not pay for it). The indexes and the text are built in steps (1,000
        nodes, one 4,096-node piece of text), each under the lock, so calls are answered in
        between; a call that needs them finishes the build."""
        for step in ("index_step", "text_step"):
            while True:
                with self.lock:
                    if not getattr(self.state, step)():
                        break
                time.sleep(0.0005)  # let a waiting call take the lock
        tokenizer()
        with self.lock:
            self._refresh_synonyms()
            self.retriever.teach_jieba()
            if not self.store.cache_used and len(self.state.nodes) >= nodecache.MIN_NODES and \
                    self._snap_thread is None and self._open and not self._restoring:
                self._start_snapshot()  # a large Memory without a usable cache: the next start has one
        self.oplog.warm()

    def _item(self, node_id: str) -> dict[str, Any]:
        node = self.state.nodes[node_id]
        return {"id": node.id, "title": node.title, "superseded": node.superseded_by is not None,
                "childCount": len(self.state.child_ids(node_id))}

    # -- memory tools ---------------------------------------------------------------------

    def write(self, a: I.WriteArgs, ctx: Ctx) -> dict[str, Any]:
        st = self.state
        if a.keywords is not None:
            keywords = dedupe_words(a.keywords)
        if a.id is None:
            if a.parent_id is not None:
                self._check_parent(a.parent_id, None)
            tx = self._begin(ctx)
            node = Node(
                id=tx.take_id(), title=a.title, content=a.content,
                keywords=keywords if a.keywords is not None else self._derive(a.title),
                parent_id=a.parent_id, source_message=a.source_message,
                created_at=ctx.at, updated_at=ctx.at)
            tx.put_node(node)
            tx.record("node.create", node.id, after=node.dump())
            created = True
        else:
            old = self._node(a.id)
            if old.superseded_by is not None:
                raise Superseded(f"Memory {a.id} was superseded by {old.superseded_by} and cannot be "
                                 f"updated; update {old.superseded_by} instead.", field="id")
            update: dict[str, Any] = {"title": a.title, "content": a.content, "updated_at": ctx.at}
            if a.given("parent_id"):
                if a.parent_id is not None:
                    self._check_parent(a.parent_id, a.id)
                update["parent_id"] = a.parent_id
            if a.given("keywords"):
                update["keywords"] = keywords if a.keywords is not None else self._derive(a.title)
            if a.given("source_message"):
                update["source_message"] = a.source_message
            node = old.model_copy(update=update)
            if {**node.dump(), "updatedAt": None} == {**old.dump(), "updatedAt": None}:
                return {"created": False, **old.dump()}  # nothing changes (a move to its own parent): no record
            tx = self._begin(ctx)
            tx.put_node(node)
            tx.record("node.update", node.id, before=old.dump(), after=node.dump())
            created = False
        self._commit(ctx)
        return {"created": created, **st.nodes[node.id].dump()}

    def read(self, a: I.IdArgs, ctx: Ctx) -> dict[str, Any]:
        node = self._node(a.id)
        parent = self.state.nodes.get(node.parent_id) if node.parent_id else None
        return {**node.dump(), "important": node.id in self.state.important,
                "parentTitle": parent.title if parent else None,
                "childCount": len(self.state.child_ids(node.id))}

    def delete(self, a: I.IdArgs, ctx: Ctx) -> dict[str, Any]:
        st = self.state
        node = self._node(a.id)
        problems = []
        children = st.child_ids(a.id)
        if children:
            shown = ", ".join(children)
            problems.append(f"it has {len(children)} child{'ren' if len(children) != 1 else ''} ({shown}); "
                            f"move or delete them first")
        links = sorted(st.links.get(a.id, ()))
        if links:
            problems.append(f"relationship(s) {', '.join(links)} link to it; unlink them with "
                            f"zcor_relationship_write(memoryNodeId=null) first")
        replaced = sorted(st.replaced.get(a.id, ()), key=st.rank.__getitem__)
        if replaced:
            problems.append(f"it replaces superseded memor{'ies' if len(replaced) != 1 else 'y'} "
                            f"{', '.join(replaced)}, so it must stay")
        if problems:
            raise Conflict(f"Memory {a.id} cannot be deleted: " + "; ".join(problems) + ".", field="id",
                           data={"children": children, "relationships": links, "replaces": replaced})
        tx = self._begin(ctx)
        was_important = a.id in st.important
        if was_important:
            after = [i for i in st.important if i != a.id]
            tx.record("important.unmark", a.id, before=list(st.important), after=after)
            tx.set_important(after)
        tx.remove_node(a.id)
        tx.record("node.delete", a.id, before=node.dump())
        self._commit(ctx)
        return {"id": a.id, "deleted": True, "wasImportant": was_important}

    def children(self, a: I.ChildrenArgs, ctx: Ctx) -> dict[str, Any]:
        if a.parent_id is not None:
            self._node(a.parent_id, "parentId")
        return {"parentId": a.parent_id, "items": [self._item(i) for i in self.state.child_ids(a.parent_id)]}

    def trace(self, a: I.IdArgs, ctx: Ctx) -> dict[str, Any]:
        self._node(a.id)
        path = [{"id": i, "title": self.state.nodes[i].title} for i in reversed(self.state.ancestors(a.id))]
        return {"id": a.id, "path": path, "children": [self._item(i) for i in self.state.child_ids(a.id)]}

    def important(self, a: I.ImportantArgs, ctx: Ctx) -> dict[str, Any]:
        st = self.state
        node = self._node(a.id)
        result: dict[str, Any] = {"id": a.id, "important": a.important, "changed": False}
        if a.important:
            if node.superseded_by is not None:
                raise Superseded(f"Memory {a.id} was superseded by {node.superseded_by} and cannot be "
                                 f"marked important; mark {node.superseded_by} instead.", field="id")
            if a.id not in st.important:
                after = [*st.important, a.id]
                receipt = None
                if len(after) > MAX_IMPORTANT:
                    gone = after.pop(0)
                    title = st.nodes[gone].title
                    receipt = {
                        "replaced": {"id": gone, "title": title},
                        "reminder": f"At most {MAX_IMPORTANT} memories can be important, so {gone} "
                                    f"({title}) is no longer marked. The memory itself is kept; mark it "
                                    f"again if it still matters more than another.",
                    }
                tx = self._begin(ctx)
                tx.record("important.mark", a.id, before=list(st.important), after=after, receipt=receipt)
                tx.set_important(after)
                self._commit(ctx)
                result["changed"] = True
                if receipt:
                    result.update(receipt)
        elif a.id in st.important:
            after = [i for i in st.important if i != a.id]
            tx = self._begin(ctx)
            tx.record("important.unmark", a.id, before=list(st.important), after=after)
            tx.set_important(after)
            self._commit(ctx)
            result["changed"] = True
        result["importantIds"] = list(st.important)
        return result

    def query(self, a: I.QueryArgs, ctx: Ctx) -> dict[str, Any]:
        st = self.state
        start, end = time_range(a)
        keys = [normalize(k) for k in a.keywords or ()]
        # the longest keyword is usually the rarest: find its nodes in one pass, check the rest
        keys.sort(key=len, reverse=True)
        found = st.text_matches(keys[0]) if keys else None
        candidates = st.nodes.keys() if found is None else found
        rest = keys if found is None else keys[1:]
        hits = []
        nodes, index, rank = st.nodes, st.index, st.rank
        for node_id in candidates:
            node = nodes[node_id]
            if node.superseded_by is not None and not a.include_superseded:
                continue
            idx = index.get(node_id)
            updated = idx.updated if idx is not None else node.updated_at.timestamp()
            if (start is not None and updated < start) or (end is not None and updated > end):
                continue
            if rest:
                title, content = normalize(node.title), normalize(node.content)
                if not all(k in title or k in content for k in rest):
                    continue
            hits.append((updated, rank[node_id], node_id))
        hits.sort(reverse=True)
        window = hits[a.offset:a.offset + a.limit]
        return {"items": [st.nodes[i].dump() for _, _, i in window], "total": len(hits),
                "nextOffset": page(len(hits), a.offset, len(window))}

    def merge(self, a: I.MergeArgs, ctx: Ctx) -> dict[str, Any]:
        st = self.state
        if len(set(a.ids)) != len(a.ids):
            raise InvalidArgument("ids must be distinct", field="ids")
        sources = [self._current(i, "ids", "merged") for i in a.ids]
        parents = {n.parent_id for n in sources}
        parent = parents.pop() if len(parents) == 1 else None
        tx = self._begin(ctx)
        new = Node(id=tx.take_id(), title=a.title, content=a.content,
                   keywords=dedupe_words(a.keywords) if a.keywords is not None else self._derive(a.title),
                   parent_id=parent, created_at=ctx.at, updated_at=ctx.at)
        tx.put_node(new)
        tx.record("node.create", new.id, after=new.dump())
        moved, relinked = self._redirect(tx, sources, new.id, a.reason, ctx, move_links=True)
        self._commit(ctx)
        return {"id": new.id, "node": st.nodes[new.id].dump(), "superseded": list(a.ids),
                "movedChildren": moved, "relinkedRelationships": relinked,
                "important": new.id in st.important, "importantIds": list(st.important)}

    def _redirect(self, tx: Tx, sources: list[Node], target: str, reason: str, ctx: Ctx,
                  move_links: bool) -> tuple[list[str], list[str]]:
        """Supersede sources by target; move important marks (and for merge children and links)."""
        st = self.state
        moved: list[str] = []
        relinked: list[str] = []
        for src in sources:
            cur = st.nodes[src.id]
            done = cur.model_copy(update={"superseded_by": target, "supersede_reason": reason,
                                          "updated_at": ctx.at})
            tx.put_node(done)
            tx.record("node.supersede", src.id, before=cur.dump(), after=done.dump())
        if move_links:
            for src in sources:
                for child_id in list(st.child_ids(src.id)):
                    child = st.nodes[child_id]
                    after = child.model_copy(update={"parent_id": target, "updated_at": ctx.at})
                    tx.put_node(after)
                    tx.record("node.update", child_id, before=child.dump(), after=after.dump())
                    moved.append(child_id)
                for pid in sorted(st.links.get(src.id, ())):
                    rel = st.relationships[pid]
                    after_rel = rel.model_copy(update={"memory_node_id": target, "updated_at": ctx.at})
                    tx.put_rel(after_rel)
                    tx.record("relationship.update", pid, before=rel.dump(), after=after_rel.dump())
                    relinked.append(pid)
        ids = {s.id for s in sources}
        slots = [n for n, i in enumerate(st.important) if i in ids]
        if slots:
            after_imp = []
            for n, i in enumerate(st.important):
                if i not in ids:
                    after_imp.append(i)
                elif n == slots[0] and target not in st.important:
                    after_imp.append(target)
            tx.record("important.move", target, before=list(st.important), after=after_imp)
            tx.set_important(after_imp)
        return moved, relinked

    def supersede(self, a: I.SupersedeArgs, ctx: Ctx) -> dict[str, Any]:
        st = self.state
        if len(set(a.ids)) != len(a.ids):
            raise InvalidArgument("ids must be distinct", field="ids")
        if a.replacement_id in a.ids:
            raise InvalidArgument(f"replacementId {a.replacement_id} is also listed in ids; a memory "
                                  f"cannot replace itself", field="replacementId")
        sources = [self._current(i, "ids", "superseded again") for i in a.ids]
        self._current(a.replacement_id, "replacementId", "used as a replacement")
        tx = self._begin(ctx)
        self._redirect(tx, sources, a.replacement_id, a.reason, ctx, move_links=False)
        self._commit(ctx)
        return {"replacementId": a.replacement_id, "superseded": list(a.ids),
                "importantIds": list(st.important)}

    # -- relationships -----------------------------------------------------------------

    def _rel(self, person_id: str) -> Relationship:
        rel = self.state.relationships.get(person_id)
        if rel is None:
            raise NotFound(f"No relationship for personId {person_id!r}. Use zcor_relationship_query to "
                           f"search by name, or zcor_relationship_write to create one.", field="personId")
        return rel

    def relationship_read(self, a: I.PersonArgs, ctx: Ctx) -> dict[str, Any]:
        return self._rel(a.person_id).dump()

    def relationship_query(self, a: I.RelQueryArgs, ctx: Ctx) -> dict[str, Any]:
        st = self.state
        start, end = time_range(a)
        if a.min_affinity is not None and a.max_affinity is not None and a.min_affinity > a.max_affinity:
            raise InvalidArgument("minAffinity is greater than maxAffinity", field="minAffinity")
        keys = [normalize(k) for k in a.keywords or ()]
        hits = []
        for pid, rel in st.relationships.items():
            idx = st.rel_index[pid]
            if (start is not None and idx.updated < start) or (end is not None and idx.updated > end):
                continue
            if (a.min_affinity is not None and rel.affinity < a.min_affinity) or \
                    (a.max_affinity is not None and rel.affinity > a.max_affinity):
                continue
            if all(any(k in t for t in idx.norm_text) for k in keys):
                hits.append((idx.updated, idx.rank, pid))
        hits.sort(reverse=True)
        window = hits[a.offset:a.offset + a.limit]
        return {"items": [st.relationships[p].dump() for _, _, p in window], "total": len(hits),
                "nextOffset": page(len(hits), a.offset, len(window))}

    def relationship_write(self, a: I.RelWriteArgs, ctx: Ctx) -> dict[str, Any]:
        st = self.state
        old = st.relationships.get(a.person_id)
        if a.memory_node_id is not None:
            self._current(a.memory_node_id, "memoryNodeId", "linked")
        fields: dict[str, Any] = {"name": a.name, "relationship": a.relationship, "affinity": a.affinity,
                                  "reason": a.reason, "updated_at": ctx.at}
        if a.given("aliases"):
            fields["aliases"] = dedupe_words(a.aliases or [])
        if a.given("memory_node_id"):
            fields["memory_node_id"] = a.memory_node_id
        tx = self._begin(ctx)
        if old is None:
            rel = Relationship(person_id=a.person_id, created_at=ctx.at, **fields)
            tx.put_rel(rel)
            tx.record("relationship.create", a.person_id, after=rel.dump())
        else:
            rel = old.model_copy(update=fields)
            tx.put_rel(rel)
            tx.record("relationship.update", a.person_id, before=old.dump(), after=rel.dump())
        self._commit(ctx)
        return {"created": old is None, **rel.dump()}

    def relationship_delete(self, a: I.PersonArgs, ctx: Ctx) -> dict[str, Any]:
        rel = self._rel(a.person_id)
        tx = self._begin(ctx)
        tx.remove_rel(a.person_id)
        tx.record("relationship.delete", a.person_id, before=rel.dump())
        self._commit(ctx)
        return {"personId": a.person_id, "deleted": True}

    # -- history, backup, restore, synonyms ----------------------------------------------

    def history(self, a: I.HistoryArgs, ctx: Ctx) -> dict[str, Any]:
        start, end = time_range(a)
        items, total = self.oplog.query(a.keywords or [], start, end, a.limit, a.offset)
        return {"items": items, "total": total, "nextOffset": page(total, a.offset, len(items))}

    def _bot_backup_allowed(self, now: float) -> None:
        """RateLimited unless the bot's last backup is at least the configured interval old."""
        interval = self.config.bot_backup_interval_seconds
        last = self._last_bot_backup
        if last is not None and now - last < interval:
            raise RateLimited(
                f"The bot may back up the Memory at most once every {interval} s "
                f"(botBackupIntervalSeconds); the last backup was {int(now - last)} s ago. Try again in "
                f"{math.ceil(interval - (now - last))} s.", data={"retryAfterSeconds": math.ceil(interval - (now - last))})

    def _backup_call(self, params: Any, actor: str) -> dict[str, Any]:
        """zcor_memory_backup: a copy of the state taken with the lock (dicts of immutable
        records: quick), encoded and written without it, so reads and writes go on
        meanwhile; the backup holds the Memory as it was when the call began."""
        from .tools import TOOLS

        bot = actor == "model"
        with self.lock:
            self.store.verify_lock()
            ctx = self._new_ctx(BACKUP_TOOL, actor)
            try:
                parse_args(TOOLS[BACKUP_TOOL].input_model, params)
                now = time.monotonic()
                if bot:
                    self._bot_backup_allowed(now)
                    previous, self._last_bot_backup = self._last_bot_backup, now  # one at a time
                view = StateView.of(self.state)
            except ZcorError as e:
                self._log(ctx, params, error=e)
                raise
        try:
            _test_hold("BACKUP")
            name = self.store.write_backup(view, ctx.at, bot=bot, private=True)
        except (OSError, ZcorError) as e:
            err = e if isinstance(e, ZcorError) else \
                StorageError(f"The backup could not be written ({describe_os_error(e)}).")
            with self.lock:
                if bot and self._last_bot_backup == now:
                    self._last_bot_backup = previous
                self._renumber(ctx)
                self._log(ctx, params, error=err)
            raise err from None
        with self.lock:
            ctx.log_result = {"backupFile": name}
            if bot:
                self._prune_bot_backups(ctx)
            self._renumber(ctx)
            self._log(ctx, params)
        return {"backupFile": name}

    def backup(self, a: I.NoArgs, ctx: Ctx) -> dict[str, Any]:
        bot = ctx.actor == "model"
        now = time.monotonic()
        if bot:
            self._bot_backup_allowed(now)
        try:
            name = self.store.write_backup(self.state, ctx.at, bot=bot)
        except OSError as e:
            raise StorageError(f"The backup could not be written ({describe_os_error(e)}).") from None
        ctx.log_result = {"backupFile": name}
        if bot:
            self._last_bot_backup = now
            self._prune_bot_backups(ctx)
        return {"backupFile": name}

    def _prune_bot_backups(self, ctx: Ctx) -> None:
        try:
            gone = self.store.prune_bot_backups(self.config.max_bot_backups)
        except (OSError, ZcorError) as e:  # the backup itself is written; pruning retries next time
            print(f"zcord: could not prune the bot's old backups: {e}", file=sys.stderr)
            return
        if gone:
            ctx.log_result = {**(ctx.log_result or {}), "pruned": gone}

    def restore(self, a: I.RestoreArgs, ctx: Ctx) -> dict[str, Any]:
        st = self.state
        if ctx.preloaded is not None and ctx.preloaded[0] == a.backup_file:
            incoming = ctx.preloaded[1]
            if isinstance(incoming, ZcorError):
                raise incoming
        else:
            incoming = self.store.read_backup(a.backup_file, RestoreLimits.of(self.config))
        bot = ctx.actor == "model"
        try:
            auto = self.store.write_backup(st, ctx.at, bot=bot)
        except OSError as e:
            raise StorageError(f"The pre-restore backup could not be written ({describe_os_error(e)}); "
                               f"nothing was restored.") from None

        def summary(s: MemoryState) -> dict[str, Any]:
            return {"nodes": len(s.nodes), "relationships": len(s.relationships),
                    "important": list(s.important)}

        tx = self._begin(ctx)
        tx.record("state.restore", None, before={"backupFile": auto, **summary(st)},
                  after={"restoredFrom": a.backup_file, **summary(incoming)})
        tx.replace_all(incoming)
        self._commit(ctx)
        ctx.log_result = {"restoredFrom": a.backup_file, "backupFile": auto}
        if bot:
            self._prune_bot_backups(ctx)
        return {"restoredFrom": a.backup_file, "backupFile": auto, **summary(st)}

    def backup_preview(self, name: Any) -> dict[str, Any]:
        """What restoring backups/<name> would change, in counts; changes nothing. The backup
        is parsed without the lock; only the snapshot of the current parts takes it."""
        if not isinstance(name, str):
            raise InvalidArgument("backupFile must be a file name from backups/", field="backupFile")
        try:
            incoming = self.store.read_backup(name, RestoreLimits.of(self.config))
        except OSError as e:
            raise StorageError(f"The backup could not be read ({describe_os_error(e)}).") from None
        with self.lock:
            nodes, rels = dict(self.state.nodes), dict(self.state.relationships)
            important = list(self.state.important)

        def compare(now: dict[str, Any], after: dict[str, Any]) -> dict[str, int]:
            return {"now": len(now), "after": len(after),
                    "added": sum(1 for k in after if k not in now),
                    "removed": sum(1 for k in now if k not in after),
                    "changed": sum(1 for k, v in after.items() if k in now and now[k].dump() != v.dump())}

        return {"backupFile": name, "memories": compare(nodes, incoming.nodes),
                "relationships": compare(rels, incoming.relationships),
                "important": {"now": important, "after": list(incoming.important),
                              "changed": important != list(incoming.important)}}

    def synonyms_add(self, a: I.SynonymsAddArgs, ctx: Ctx) -> dict[str, Any]:
        terms = synonym_terms(a)
        try:
            self.synonyms.reload_if_changed()
            added = self.synonyms.add_group(terms)
            self.retriever.teach_jieba()
        except OSError as e:
            raise StorageError(f"synonyms.json could not be saved ({describe_os_error(e)}); nothing changed.") \
                from None
        if added:
            ctx.committed = True
            ctx.changes = [{"kind": "synonyms.add", "before": None, "after": terms}]
        cls = sorted(self.synonyms.classes.of[normalize(terms[0])])
        return {"terms": terms, "added": added, "class": cls}
