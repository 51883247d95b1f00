"""The journal: operations.jsonl is the Memory's write-ahead log; memory-state.json its snapshot.

A call that changes the Memory is acknowledged once its operation-log record (which holds
every change with its full before and after) is appended and fsynced. memory-state.json is
rewritten now and then, in the background, from a copy of the state taken between calls;
`memory-state.pos` says which change the snapshot ends with and where the log stood then.
Loading reads the snapshot and replays the changes logged after it.

Changes that cannot be replayed from their record (a restore: its record names the backup,
not its content; the first write after a migration) are written to the snapshot
synchronously, before their record is appended, as every change was before the journal.
"""

from __future__ import annotations

import errno
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import StateFileInvalid
from .fsutil import atomic_write, read_nofollow, reverse_lines
from .models import Change, Node, Relationship
from .state import MemoryState

POS_FILE = "memory-state.pos"
_CHANGE_MARK = b'"changeId":'


@dataclass(frozen=True)
class SnapshotPos:
    """The last change a snapshot holds, and the log's size when it was taken (every
    record before that offset carries changes up to change_id at most)."""

    change_id: int
    log_offset: int


def read_pos(memdir: Path) -> SnapshotPos | None:
    """memory-state.pos, or None when it is missing or unreadable (the log is then scanned
    back from its end instead: slower, never wrong)."""
    try:
        doc = json.loads(read_nofollow(memdir / POS_FILE, 4096))
        pos = SnapshotPos(int(doc["changeId"]), int(doc["logOffset"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return pos if pos.change_id >= 0 and pos.log_offset >= 0 else None


def write_pos(memdir: Path, pos: SnapshotPos) -> None:
    atomic_write(memdir / POS_FILE, json.dumps({"changeId": pos.change_id, "logOffset": pos.log_offset}).encode()
                 + b"\n")


def last_change_id(state: MemoryState) -> int:
    return state.next_change_id() - 1


def _start_offset(fd: int, size: int, after: int, pos: SnapshotPos | None) -> int:
    """Where to start reading for changes after `after`: the snapshot's recorded log
    offset when it is usable, else the line after the last record holding only changes up
    to `after` (found scanning back from the end)."""
    if pos is not None and pos.change_id <= after and pos.log_offset <= size and \
            (pos.log_offset == 0 or os.pread(fd, 1, pos.log_offset - 1) == b"\n"):
        return pos.log_offset
    for offset, line in reverse_lines(fd, size):
        if _CHANGE_MARK in line:
            ids = [c.get("changeId") or 0 for c in _record(line, offset).get("changes", ())]
            if ids and max(ids) <= after:
                return offset + len(line) + 1
    return 0


def _record(line: bytes, offset: int) -> dict[str, Any]:
    try:
        rec = json.loads(line)
        if not isinstance(rec, dict):
            raise ValueError("not an object")
        return rec
    except ValueError as e:
        raise StateFileInvalid(f"operations.jsonl at byte {offset} holds an invalid record ({e}); "
                               f"fix or remove that line by hand") from None


def tail_changes(log_path: Path, after: int, pos: SnapshotPos | None) -> list[dict[str, Any]]:
    """Every change logged with a changeId above `after`, in order (call after OpLog.open,
    which cuts a torn last line)."""
    try:
        fd = os.open(log_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise StateFileInvalid(f"{log_path.name} is a symbolic link; zcord never follows links inside "
                                   f"the Memory directory (put the real file there)") from None
        raise
    try:
        size = os.fstat(fd).st_size
        offset = _start_offset(fd, size, after, pos)
        out: list[dict[str, Any]] = []
        expect = after + 1
        with os.fdopen(os.dup(fd), "rb") as f:
            f.seek(offset)
            for line in f:
                if not line.endswith(b"\n"):
                    break  # a torn last line (OpLog.open cuts it; a reader just stops there)
                if _CHANGE_MARK in line:
                    for c in _record(line, offset).get("changes", ()):
                        cid = c.get("changeId")
                        if not isinstance(cid, int) or cid < expect:
                            continue
                        if cid != expect:
                            raise StateFileInvalid(
                                f"operations.jsonl at byte {offset} logs change {cid} but change {expect} is "
                                f"neither in memory-state.json nor in the log; the Memory cannot be rebuilt "
                                f"past change {expect - 1} (restore a backup, or remove the records from "
                                f"byte {offset} on to keep what is before them)")
                        out.append(c)
                        expect += 1
                offset += len(line)
        return out
    finally:
        os.close(fd)


def apply_change(state: MemoryState, c: dict[str, Any]) -> Change:
    """Replay one logged change onto the state (loading); returns it as a history entry."""
    try:
        change = Change.model_validate(c)
    except ValueError as e:
        raise StateFileInvalid(f"operations.jsonl: change {c.get('changeId')} is not a valid change ({e})") from None
    kind, target, after = change.kind, change.target, change.after
    where = f"operations.jsonl: change {change.change_id} ({kind} {target})"
    try:
        if kind in ("node.create", "node.update", "node.supersede"):
            node = Node.model_validate(after)
            if node.id != target or (node.parent_id is not None and node.parent_id not in state.nodes):
                raise ValueError("its record does not fit the Memory")
            if kind == "node.create" and node.id not in state.nodes:
                state.add_node(node)  # in id order (a reverted delete brings an old id back)
            else:
                state._put_node(node)
            m = node.id[1:]
            if node.id.startswith("m") and m.isdigit():
                state.next_id = max(state.next_id, int(m) + 1)
        elif kind == "node.delete":
            if target is None:
                raise KeyError(target)  # as the lookup of a node id None would
            state._remove_node(target)
        elif kind.startswith("important."):
            if not isinstance(after, list) or any(i not in state.nodes for i in after):
                raise ValueError("the important list names unknown memories")
            state.important = list(after)
        elif kind == "relationship.create" and target not in state.relationships:
            state.add_rel(Relationship.model_validate(after))  # in creation order (a reverted delete)
        elif kind in ("relationship.create", "relationship.update"):
            state._put_rel(Relationship.model_validate(after))
        elif kind == "relationship.delete":
            if target is None:
                raise KeyError(target)
            state._remove_rel(target)
        elif kind == "scope.set":
            if target is None or not (after is None or isinstance(after, str)):
                raise ValueError("a scope is a session name or null")
            if after is None:
                state.scopes.pop(target, None)
            else:
                state.scopes[target] = after
        elif kind in ("state.migrate", "erased"):
            pass  # "erased": a change of a person forgotten (zcord.service.erasure), kept for its id
        else:
            raise SnapshotOnly(change.change_id, kind, change.at)
    except SnapshotOnly:
        raise
    except (ValueError, KeyError) as e:
        raise StateFileInvalid(f"{where} cannot be replayed: {e}") from None
    state.history.append(change)
    return change


class SnapshotOnly(ValueError):
    """A change whose content only the snapshot holds (a restore names its backup, not what
    was in it) was met while replaying the log."""

    def __init__(self, change_id: int, kind: str, at: Any):
        super().__init__(f"a {kind} change cannot be replayed from the log (it was to be in the snapshot)")
        self.change_id, self.kind, self.at = change_id, kind, at

    def advice(self, memdir: Path) -> str:
        """What went wrong, and what to do, for the operator who starts zcord."""
        what = {"state.restore": "a restore from a backup"}.get(self.kind, f"a {self.kind} change")
        at = self.at.isoformat(timespec="milliseconds") if hasattr(self.at, "isoformat") else str(self.at)
        if not (memdir / "memory-state.json").exists():
            problem = (f"memory-state.json is missing from {memdir}, and operations.jsonl cannot rebuild the "
                       f"Memory without it: change {self.change_id} ({what}, at {at}) was saved in "
                       f"memory-state.json only")
        else:
            problem = (f"memory-state.json in {memdir} is older than change {self.change_id} ({what}, at {at}), "
                       f"which was saved in memory-state.json only; it may have been replaced by an older copy")
        return (f"{problem}. Put back memory-state.json from a copy of this directory, or copy the newest file "
                f"in {memdir / 'backups'} made after {at} (their names carry the time in UTC) to "
                f"memory-state.json, then start zcord again")


def replay(state: MemoryState, log_path: Path, pos: SnapshotPos | None) -> int:
    """Apply the changes logged after the snapshot; returns how many."""
    changes = tail_changes(log_path, last_change_id(state), pos)
    for c in changes:
        try:
            apply_change(state, c)
        except SnapshotOnly as e:
            raise StateFileInvalid(e.advice(log_path.parent)) from None
    return len(changes)


def find_record(log_path: Path, seq: int) -> dict[str, Any] | None:
    """The operation-log record with this seq (scanning back from the end: recent
    operations are found at once), or None."""
    prefix = b'{"seq":%d,' % seq
    fd = os.open(log_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        for offset, line in reverse_lines(fd, os.fstat(fd).st_size):
            if line.startswith(prefix):
                return _record(line, offset)
    finally:
        os.close(fd)
    return None

