"""Snapshots: memory-state.json written from the journal.

Every change is durable once its operation-log record is written (the journal). A snapshot
holds the state as of a log position so a start replays only what came after it. It is
written in the background by a forked child once enough changes are journaled, or
synchronously (shutdown, restores, migrations, zcor/snapshot) when zcord must wait for it.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..core.errors import StorageError, describe_os_error
from ..core.journal import POS_FILE, SnapshotPos, write_pos
from ..core.serializer import StateView
from ..core.store import Seal
from .calls import RestoreInProgress

if TYPE_CHECKING:
    from .parts import SnapshotHost

log = logging.getLogger(__name__)

SNAPSHOT_CHANGES = 2000
SNAPSHOT_BYTES = 32 << 20
SNAPSHOT_SECONDS = 600.0
"""A snapshot (memory-state.json) is written in the background once this many changes, or
this many bytes of change records, have been journaled since the last one, or the oldest
of them is this old (checked at each change). Smaller values: faster start after a crash,
more background writing. ZCOR_SNAPSHOT_CHANGES, ZCOR_SNAPSHOT_BYTES and
ZCOR_SNAPSHOT_SECONDS override them, read when a Service is made (Snapshots)."""
SNAPSHOT_RETRY_SECONDS = 30.0
POS_ADVANCE_BYTES = 64 << 20
"""When the log has grown this much since the snapshot's position (reads are logged too),
the position moves up (nothing changed: memory-state.pos alone is rewritten) or a snapshot
is taken, so loading never scans more than about this much of the log."""
SYNC_FORK_NODES = 5000
"""From this many memories, a synchronous snapshot (shutdown, restore, migration,
zcor/snapshot) is encoded by a forked child too."""

T = TypeVar("T")


class _Forker:
    """A thread that lives as long as the process and runs what it is given (forks)."""

    def __init__(self) -> None:
        import queue

        self._jobs: queue.Queue[tuple[Callable[[], Any], list[tuple[str, Any]], threading.Event]] = queue.Queue()
        threading.Thread(target=self._loop, name="zcord-forker", daemon=True).start()

    def _loop(self) -> None:
        while True:
            fn, done, ready = self._jobs.get()
            try:
                done.append(("ok", fn()))
            except BaseException as e:
                done.append(("error", e))
            ready.set()

    def run(self, fn: Callable[[], T]) -> T:
        done: list[tuple[str, Any]] = []
        ready = threading.Event()
        self._jobs.put((fn, done, ready))
        ready.wait()
        status, value = done[0]
        if status == "error":
            raise value
        return cast(T, value)


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


class Snapshots:
    """The journal's counters and the snapshot writer of one Service (whose lock guards
    everything here, except where a method says it runs without it)."""

    def __init__(self, svc: SnapshotHost) -> None:
        self.svc = svc
        env = os.environ
        self.max_changes = int(env.get("ZCOR_SNAPSHOT_CHANGES", SNAPSHOT_CHANGES))
        self.max_bytes = int(env.get("ZCOR_SNAPSHOT_BYTES", SNAPSHOT_BYTES))
        self.max_seconds = float(env.get("ZCOR_SNAPSHOT_SECONDS", SNAPSHOT_SECONDS))
        """When a background snapshot is due (SNAPSHOT_CHANGES, _BYTES, _SECONDS)."""
        self.changes = 0
        """Changes journaled since the last snapshot."""
        self.nbytes = 0
        self.since: float | None = None
        self.thread: threading.Thread | None = None
        """The background writer's thread, while a snapshot is being written."""
        self.result: tuple[str, Any, tuple[int, int, int]] | None = None
        self.retry_at = 0.0
        self.pos_offset = 0
        """The log offset recorded with the last snapshot."""
        self.forker: _Forker | None = None
        self.last: tuple[threading.Thread | None, str] = (None, "")
        """The last settled background snapshot and how it ended."""

    def take(self) -> dict[str, Any]:
        """zcor/snapshot. A large Memory's snapshot is written by the background writer (a
        forked child) while the lock is free, so calls go on meanwhile; the caller waits for
        it. A small one, or one the child failed to write, is written here, under the lock."""
        mine = None
        while mine is None:
            with self.svc.lock:
                self.svc.store.verify_lock()
                if self.svc.gate.restoring:
                    raise RestoreInProgress
                busy = self.thread
                if busy is None or not busy.is_alive():
                    self.settle()
                    if len(self.svc.state.nodes) < SYNC_FORK_NODES:
                        return self.here()
                    pos = self.pos()
                    self.start()
                    mine = self.thread
            if mine is None and busy is not None:
                busy.join()  # a background snapshot is being written: wait for it without the lock
        mine.join()
        with self.svc.lock:
            if self.thread is mine:
                self.settle()
            thread, status = self.last
            if thread is mine and status == "ok":
                return {"changeId": pos.change_id, "bytes": self.svc.store.state_path.stat().st_size}
            if self.svc.gate.restoring:
                raise RestoreInProgress
            return self.here()  # raises what the disk says, or writes it after all

    def here(self) -> dict[str, Any]:
        pos = self.pos()
        try:
            self.save(pos)
        except OSError as e:
            raise StorageError(f"The snapshot could not be written ({describe_os_error(e)}); the operation log "
                               f"still holds every change.") from None
        self.written(pos)
        return {"changeId": self.svc.state.next_change_id() - 1, "bytes": self.svc.store.state_path.stat().st_size}

    def save(self, pos: SnapshotPos) -> None:
        """Store.save (the migrated original kept, the snapshot, the seal taken in), with the
        snapshot written by write_waited: by a forked child for a large Memory (at 100,000
        memories, writing it here left the heap some 60 MiB larger)."""
        self.svc.store.keep_original(self.svc.state)
        seal = self.write_waited(pos)
        if seal is not None:
            self.svc.store.apply_seal(self.svc.state, seal)

    def write_waited(self, pos: SnapshotPos, view: StateView | None = None) -> Seal | None:
        """Write a snapshot and wait for it: by a forked child from SYNC_FORK_NODES memories
        (the daemon's heap keeps none of the encoder's garbage), else, or when the child
        fails, here, raising what the disk says. view: a restore's new state (encoded with a
        serializer of its own, without the lock); None: the live state."""
        target = self.svc.state if view is None else view
        if len(target.nodes) >= SYNC_FORK_NODES:
            try:
                status, value = _child_answer(*self.fork(pos, view))
            except OSError:
                status, value = "error", None
            if status == "ok":
                return cast("Seal", value)
        return self.svc.store.write_snapshot(target, pos, private=view is not None)

    def adopt(self, pos: SnapshotPos, seal: Seal | None) -> None:
        """(lock held) A restore's new state, written by write_waited(pos, view), has become
        the live state: take in the history it sealed; nothing is journaled since."""
        if seal is not None:
            self.svc.store.apply_seal(self.svc.state, seal)
        self.written(pos)

    def wait_background(self) -> None:
        """Without the lock: let a background snapshot finish (a restore, which stops new
        ones from starting, waits for it before it writes its own)."""
        thread = self.thread
        if thread is not None:
            thread.join()

    def written(self, pos: SnapshotPos | None = None) -> None:
        """A synchronous snapshot holding every change so far was written."""
        self.changes, self.nbytes, self.since = 0, 0, None
        self.retry_at = 0.0
        self.pos_offset = pos.log_offset if pos is not None else self.svc.oplog.size

    def advance_pos(self) -> None:
        """After any record: keep the stretch of log that loading must scan short."""
        if self.svc.oplog.size - self.pos_offset < POS_ADVANCE_BYTES or self.thread is not None or \
                self.svc.gate.restoring:
            return
        if self.changes == 0:
            pos = self.pos()
            try:
                write_pos(self.svc.dir, pos)
            except OSError as e:
                log.warning("could not update %s (%s)", POS_FILE, e)
            self.pos_offset = pos.log_offset  # on failure, the next try is POS_ADVANCE_BYTES later
        elif time.monotonic() >= self.retry_at:
            self.start()

    def pos(self) -> SnapshotPos:
        last = self.svc.state.next_change_id() - 1
        return SnapshotPos(min(last, self.svc.oplog.last_change_id), self.svc.oplog.size)

    def journaled(self, nbytes: int) -> None:
        """A change record was appended: start a background snapshot when one is due."""
        self.changes += 1
        self.nbytes += nbytes
        now_m = time.monotonic()
        if self.since is None:
            self.since = now_m
        if self.thread is not None:
            if self.thread.is_alive():
                return
            self.settle()
        if now_m < self.retry_at or not self.changes or self.svc.gate.restoring:
            return
        if (self.changes >= self.max_changes or self.nbytes >= self.max_bytes
                or now_m - (self.since or now_m) >= self.max_seconds):
            self.start()

    def start(self) -> None:
        """Write the snapshot in the background (lock held, between calls).

        A forked child process writes it from its copy-on-write image of the state: the
        encoding never competes with calls for the interpreter, so writes keep their speed
        while a snapshot is written. A thread of this process waits for the child and
        takes its answer. Where fork is unavailable, a thread writes from a copy instead."""
        pos = self.pos()
        taken = (self.changes, self.nbytes, pos.log_offset)
        self.result = None
        try:
            pid, reader = self.fork(pos)
        except OSError as e:
            log.warning("cannot fork the snapshot writer (%s); writing it from a thread", e)
            view = StateView.of(self.svc.state)

            def run() -> None:
                try:
                    self.result = ("ok", self.svc.store.write_snapshot(view, pos), taken)
                except BaseException as e:  # reported by settle; the journal still holds it all
                    self.result = ("error", e, taken)
        else:
            def run() -> None:
                self.result = (*_child_answer(pid, reader), taken)

        self.thread = threading.Thread(target=run, name="zcord-snapshot", daemon=True)
        self.thread.start()

    def fork(self, pos: SnapshotPos, view: StateView | None = None) -> tuple[int, int]:
        """Fork the child that writes the snapshot (of view: a restore's new state; else of
        the live state); returns (pid, read end of its answer).

        The fork is made by one long-lived thread (the caller waits for it, lock held), so
        the child's parent-death signal (given by the thread that forked it) comes only when
        the daemon itself ends."""
        if self.forker is None:
            self.forker = _Forker()
        return self.forker.run(lambda: self._fork_child(pos, view))

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
            self.svc.store.snapshot_lock = threading.RLock()  # no other thread exists here
            seal = self.svc.store.write_snapshot(self.svc.state, pos) if view is None else \
                self.svc.store.write_snapshot(view, pos, private=True)
            answer: dict[str, Any] = {"seal": None if seal is None else {"segment": seal.segment, "first_id": seal.first_id,
                                                         "last_id": seal.last_id}}
            code = 0
        except BaseException as e:
            answer = {"error": f"{type(e).__name__}: {e}"}
        try:
            os.write(writer, json.dumps(answer).encode())
        finally:
            os._exit(code)

    def settle(self) -> None:
        """Wait for the background snapshot, if any, and take in its outcome (lock held)."""
        thread = self.thread
        if thread is None:
            return
        thread.join()
        self.thread = None
        result, self.result = self.result, None
        if result is None:
            return
        status, value, (changes, nbytes, offset) = result
        self.last = (thread, status)
        if status == "ok":
            self.pos_offset = offset
            if value is not None:
                self.svc.store.apply_seal(self.svc.state, value)
            self.changes = max(0, self.changes - changes)
            self.nbytes = max(0, self.nbytes - nbytes)
            self.since = time.monotonic() if self.changes else None
        else:
            self.retry_at = time.monotonic() + SNAPSHOT_RETRY_SECONDS
            log.warning("could not write the snapshot (%s); the operation log holds every change, "
                        "retrying in %.0f s", value, SNAPSHOT_RETRY_SECONDS)
