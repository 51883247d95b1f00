"""The Store: owns one Memory directory for the lifetime of the process — its lock, loading
the state (through the node cache when it belongs to the state file), snapshots written
atomically (sealing long inline history into segments), and backups.

What the directory holds is named in layout.py; how files are read, in parsing.py and
fastload.py; how the state file is written, in serializer.py.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import fastload, indexcache, nodecache
from .errors import (
    InvalidArgument,
    MemoryDirInUse,
    NotFound,
    StateFileInvalid,
    StorageError,
    advice,
)
from .fsutil import atomic_write, create_new, make_dir, read_nofollow, remove_stale_tmp
from .journal import SnapshotPos, write_pos
from .layout import (
    BACKUPS_DIR,
    BLOBS_DIR,
    BOT_BACKUP_RE,
    HISTORY_DIR,
    LEGACY_FILE,
    LOCK_FILE,
    PERSONA_FILE,
    STATE_FILE,
    SYNONYMS_FILE,
    backup_names,
    default_synonyms_bytes,
    kept_original_name,
    segment_name,
)
from .models import Change
from .parsing import RestoreLimits, nesting_depth, parse_backup, parse_state
from .persona import PERSONA_TEMPLATE
from .serializer import StateSerializer, StateView
from .state import MemoryState

log = logging.getLogger(__name__)

# Inline change history is sealed into a segment file once its JSON passes this size, so a
# save rewrites the nodes and recent changes only, not the whole (unbounded) history.
SEAL_BYTES = 1 << 20
DEFAULT_LIMITS = RestoreLimits()
"""config.py's defaults (a frozen dataclass: one instance serves every call)."""


@dataclass(frozen=True)
class Seal:
    """History sealed into a segment by a snapshot: the state must drop these inline
    changes (first_id..last_id) and name the segment."""

    segment: str
    first_id: int
    last_id: int


class LockLost(StorageError):
    """The Memory directory or its lock file is no longer the one this process locked."""


class Store:
    """Owns one Memory directory for the lifetime of the process."""

    def __init__(self, memory_dir: Path | str):
        self.dir = Path(memory_dir).absolute()
        self.state_path = self.dir / STATE_FILE
        self.backups = self.dir / BACKUPS_DIR
        self._lock_fd: int | None = None
        self._locked: tuple[tuple[int, int], tuple[int, int]] | None = None  # (dir, lock file) (dev, ino)
        self._serializer = StateSerializer()
        self.cache_used = False
        """Whether the last load read the memories from memory-state.cache."""
        self.cache_header: dict[str, Any] | None = None
        """That cache's header (what memory-state.recall.cache must be bound to), or None."""
        self.snapshot_lock = threading.RLock()
        """Held while a snapshot or backup is encoded and written (one at a time)."""
        self._naming = threading.Lock()
        self._writing: set[str] = set()  # backup names being written

    # -- directory and lock -------------------------------------------------------

    def open(self) -> None:
        """Create the directory layout if needed (0750/0640 whatever the umask), take the
        exclusive lock, and delete temporary files a killed process left behind."""
        missing = []
        d = self.dir
        while not os.path.lexists(d) and d.parent != d:
            missing.append(d)
            d = d.parent
        for d in reversed(missing):
            make_dir(d)
        try:
            fd = os.open(self.dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise StateFileInvalid(f"{LOCK_FILE} is a symbolic link (in {self.dir}); zcord never follows links "
                                       f"inside the Memory directory (remove it and start again)") from None
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise MemoryDirInUse(
                f"Memory directory {self.dir} is in use by another zcord process (pid {holder}); "
                f"stop it first or point this one at another directory.") from None
        st = os.fstat(fd)
        try:
            os.fchmod(fd, 0o640)
        except OSError:
            pass
        self._lock_fd = fd
        self._locked = (_dev_ino(os.stat(self.dir)), (st.st_dev, st.st_ino))
        try:
            self.verify_lock()  # the path was swapped between open and flock
        except LockLost:
            self.close()
            raise MemoryDirInUse(f"{LOCK_FILE} in {self.dir} changed while zcord locked it; another zcord is "
                                 f"starting on the same directory") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        for sub in (BACKUPS_DIR, BLOBS_DIR, HISTORY_DIR):
            try:
                make_dir(self.dir / sub)
            except NotADirectoryError:
                self.close()
                raise StateFileInvalid(f"{sub}/ in {self.dir} is a symbolic link or a file; zcord never follows "
                                       f"links inside the Memory directory (make it a real directory)") from None
        stale = []
        for where in (self.dir, self.backups, self.dir / HISTORY_DIR):
            stale += remove_stale_tmp(where)
        if stale:
            log.warning("removed %d temporary file(s) left by an interrupted write", len(stale))
        syn = self.dir / SYNONYMS_FILE
        if not syn.exists():
            atomic_write(syn, default_synonyms_bytes())
        persona = self.dir / PERSONA_FILE
        if not persona.exists() and not persona.is_symlink():
            create_new(persona, PERSONA_TEMPLATE.encode())

    def verify_lock(self) -> None:
        """Raise LockLost unless the Memory path and its zcord.lock still name what this
        process locked (a renamed directory or a deleted lock would let a second zcord in)."""
        if self._locked is None:
            return
        try:
            here = (_dev_ino(os.stat(self.dir)), _dev_ino(os.lstat(self.dir / LOCK_FILE)))
        except OSError:
            here = None
        if here != self._locked:
            raise LockLost(f"zcord no longer holds the Memory directory {self.dir}: the directory was moved or "
                           f"its {LOCK_FILE} removed or replaced while zcord ran, so another zcord may own it now. "
                           f"Writes are refused; restart zcord.")

    def close(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        self._locked = None

    # -- load and save --------------------------------------------------------------

    def load(self) -> MemoryState:
        """The current state: memory-state.json, else legacy memories.json, else empty."""
        for name in (STATE_FILE, LEGACY_FILE):
            path = self.dir / name
            if not os.path.lexists(path):
                continue
            if name == STATE_FILE:
                with fastload.collector_paused():
                    cached = fastload.state_of_cache(self.dir)
                self.cache_used = cached is not None
                self.cache_header = cached[1] if cached is not None else None
                if cached is not None:
                    return cached[0]
            try:
                raw = read_nofollow(path)
            except OSError as e:
                if e.errno == errno.ELOOP:
                    raise StateFileInvalid(f"{name} is a symbolic link; zcord never follows links inside the "
                                           f"Memory directory (put the real file there)") from None
                raise
            return parse_state(raw, name, self.dir / HISTORY_DIR if name == STATE_FILE else None)
        return MemoryState()

    def write_snapshot(self, view: MemoryState | StateView, pos: SnapshotPos | None,
                       private: bool = False) -> Seal | None:
        """Write memory-state.json from view atomically, then memory-state.pos; changes
        nothing in memory (safe from a background thread while calls go on).

        When the inline history has grown past SEAL_BYTES, it is first written as a segment
        file under history/ (atomically; an orphan from a failed attempt is simply replaced),
        then the state is written naming that segment and holding no inline history; the
        returned Seal tells the owner of the live state to do the same (`apply_seal`).

        private: encode with a serializer of its own, without snapshot_lock (a restore's
        slow phase, which the caller makes the only writer of the state file meanwhile), so
        backups asked for by calls meanwhile do not wait for it.
        """
        ser = StateSerializer() if private else self._serializer
        with contextlib.nullcontext() if private else self.snapshot_lock:
            self.verify_lock()
            ser.encode_history(view.history)
            data = ser.encode_parts(view)
            seal: Seal | None = None
            if ser.inline_history_bytes > SEAL_BYTES and view.history:
                first, last = view.history[0].change_id, view.history[-1].change_id
                seal = Seal(segment_name(first, last), first, last)
                atomic_write(self.dir / HISTORY_DIR / seal.segment, ser.history_lines())
                data = ser.encode_parts(view, sealed=[*view.history_segments, seal.segment], history_blob=b"")
            tracker = nodecache.Tracker(data)
            atomic_write(self.state_path, tracker)
            if pos is not None:
                write_pos(self.dir, pos)
            node_header = nodecache.write(self.dir, self.state_path, view.nodes.values(), len(view.nodes), tracker)
            indexcache.write(self.dir, view, node_header)
            return seal

    def apply_seal(self, state: MemoryState, seal: Seal) -> None:
        """Drop the sealed changes from the live state's inline history (call between calls)."""
        with self.snapshot_lock:
            if seal.segment in state.history_segments:
                return
            h = state.history
            k = 0
            while k < len(h) and h[k].change_id <= seal.last_id:
                k += 1
            del h[:k]
            state.history_segments.append(seal.segment)
            self._serializer.reset_history()

    def save(self, state: MemoryState, pos: SnapshotPos | None = None) -> None:
        """Write the whole state now (a restore, a migration, shutdown); keeps a migrated
        file's original first. Memory is updated (sealing) only after every write succeeded."""
        self.keep_original(state)
        seal = self.write_snapshot(state, pos)
        if seal is not None:
            self.apply_seal(state, seal)

    def keep_original(self, state: MemoryState) -> None:
        """Before a migrated state is first written: keep the version-1/2 file it came from."""
        mig = state.migration
        if mig is not None and mig.from_version in ("1", "2"):
            keep = self.dir / kept_original_name(mig.from_version)
            if keep.exists() and keep.read_bytes() != mig.raw:
                keep = self.dir / kept_original_name(mig.from_version, datetime.now(UTC))
            if not keep.exists():
                atomic_write(keep, mig.raw)

    def iter_history(self, state: MemoryState) -> Iterator[Change]:
        """Every change ever committed, oldest first: sealed segments, then inline."""
        for seg in state.history_segments:
            with open(self.dir / HISTORY_DIR / seg, "rb") as f:
                for line in f:
                    yield Change.model_validate_json(line)
        yield from state.history

    def encode_full(self, state: MemoryState | StateView, private: bool = False) -> bytes:
        """A self-contained copy of the state: sealed history inlined (for backups).
        private: as for write_snapshot."""
        parts = [(self.dir / HISTORY_DIR / seg).read_bytes().rstrip(b"\n").replace(b"\n", b",\n")
                 for seg in state.history_segments]
        ser = StateSerializer() if private else self._serializer
        with contextlib.nullcontext() if private else self.snapshot_lock:
            ser.encode_history(state.history)
            if ser.inline_history_bytes:
                parts.append(ser.history_blob())
            return ser.encode(state, sealed=[], history_blob=b",\n".join(parts))

    # -- backups --------------------------------------------------------------------

    def _check_backups_dir(self) -> None:
        if os.path.islink(self.backups) or not os.path.isdir(self.backups):
            raise StorageError(f"{BACKUPS_DIR}/ in {self.dir} is not a real directory (a symbolic link?); zcord "
                               f"neither reads nor writes backups through it. Make it a plain directory.")

    def write_backup(self, state: MemoryState | StateView, at: datetime, bot: bool = False,
                     private: bool = False, pre_restore: bool = False) -> str:
        """Write a backup; bot=True names it as one of the bot's (pruned by prune_bot_backups),
        unless pre_restore (the copy before the bot's restore: `-bot-prerestore`, never
        pruned); private: as for write_snapshot."""
        self.verify_lock()
        self._check_backups_dir()
        with self._naming:  # backups may be written by more than one thread at once
            name = next(n for n in backup_names(at, bot, pre_restore)
                        if not os.path.lexists(self.backups / n) and n not in self._writing)
            self._writing.add(name)
        try:
            atomic_write(self.backups / name, self.encode_full(state, private))
        finally:
            with self._naming:
                self._writing.discard(name)
        return name

    def prune_bot_backups(self, keep: int) -> list[str]:
        """Delete the oldest of the bot's backups beyond keep; operators' are never touched."""
        self._check_backups_dir()
        mine = sorted((os.stat(self.backups / n, follow_symlinks=False).st_mtime_ns, n)
                      for n in os.listdir(self.backups) if BOT_BACKUP_RE.match(n))
        gone = []
        for _, name in mine[:max(0, len(mine) - keep)]:
            try:
                os.unlink(self.backups / name)
                gone.append(name)
            except FileNotFoundError:
                pass
        return gone

    def list_backups(self) -> list[str]:
        self._check_backups_dir()
        return sorted(p.name for p in self.backups.iterdir() if p.is_file() and p.suffix == ".json")

    def read_backup(self, name: str, limits: RestoreLimits = DEFAULT_LIMITS) -> MemoryState:
        """Parse a file from backups/, refusing any name that could leave the directory and
        any file over the limits (invalid_argument naming the setting and the value)."""
        if (not name or "/" in name or "\\" in name or "\x00" in name or name in (".", "..")
                or ".." in name or os.path.isabs(name)):
            raise InvalidArgument(
                f"backupFile must be a plain file name inside backups/ (no '/', no '..'), got {name!r}",
                field="backupFile")
        self._check_backups_dir()
        path = self.backups / name
        base = self.backups.resolve()
        try:
            real = path.resolve(strict=True)
        except (FileNotFoundError, RuntimeError):
            raise NotFound(f"No backup named {name!r} in backups/; {advice('list_backups')}", field="backupFile",
                           hint="list_backups") from None
        if real.parent != base or not real.is_file():
            raise InvalidArgument(f"backupFile {name!r} leads outside backups/ and cannot be restored",
                                  field="backupFile")
        try:
            raw = read_nofollow(real, limits.bytes)
        except ValueError as e:
            raise InvalidArgument(f"backup cannot be restored: {e} (maxRestoreBytes in config.json)",
                                  field="backupFile") from None
        except OSError as e:
            raise InvalidArgument(f"backup {name!r} cannot be read ({e.strerror or e})", field="backupFile") from None
        try:
            state = parse_backup(raw, f"backups/{name}", limits)
        except StateFileInvalid as e:
            raise InvalidArgument(f"backup cannot be restored: {e.message}", field="backupFile") from None
        # memories and relationships have typed fields; a change's before, after and receipt
        # hold any JSON, which is kept and written again: its nesting is bounded here (the
        # document's top level, the history array and the change are the first three levels)
        values = [v for c in state.history for v in (c.before, c.after, c.receipt)]
        if nesting_depth(values, limits.depth, start=3) > limits.depth:
            raise InvalidArgument(f"backup cannot be restored: backups/{name} nests arrays or objects more than "
                                  f"{limits.depth} deep in its change history (maxRestoreDepth in config.json)",
                                  field="backupFile")
        for count, what, limit, setting in ((len(state.nodes), "memories", limits.nodes, "maxRestoreNodes"),
                                            (len(state.relationships), "relationships", limits.relationships,
                                             "maxRestoreRelationships")):
            if count > limit:
                raise InvalidArgument(f"backup cannot be restored: backups/{name} holds {count} {what}; at most "
                                      f"{limit} can be restored ({setting} in config.json)", field="backupFile")
        return state


def _dev_ino(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino
