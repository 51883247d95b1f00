"""Undo: revert a logged operation, every version of a memory, the Memory at any instant.

All three read the change history, which holds every change with its full before and
after: sealed segments under history/, then the inline and journaled changes in memory.
A revert is itself an operation (operator, `zcor/history/revert`): its changes are
ordinary changes (node.create / node.update / node.delete, important.set,
relationship.*, state.restore) carrying the receipt `{"revertOf": seq}`, so it is
journaled, replayed and can be reverted in turn. Ids are never reused: a reverted delete
brings the same memory back under its own id.
"""

from __future__ import annotations

import json
import mmap
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orjson import loads as _loads

from ..core.errors import Conflict, InvalidArgument, NotFound, ZcorError, advice
from ..core.fsutil import reverse_lines
from ..core.journal import apply_change
from ..core.layout import HISTORY_DIR
from ..core.models import Node, Relationship, format_time
from ..core.state import MemoryState

if TYPE_CHECKING:
    from ..core.oplog import OpLog
    from .calls import Ctx
    from .parts import FlowRoom

REVERT = "zcor/history/revert"
REINSTATE = "zcor/history/reinstate"
REVERT_ORIGIN = "zcor/history/revertOrigin"
REJECT = "zcor/review/reject"
REVERTERS = (REVERT, REVERT_ORIGIN, REJECT)
"""The operations that revert others (their log result names what they reverted)."""
_AT_RE = re.compile(rb'"at":"([^"]+)"')


class UndoBook:
    """What undo keeps between calls (a part of the Service): whether the operation log
    reaches back to change 1. The log is only ever appended to while zcord runs, so the
    answer is kept for the process."""

    def __init__(self, oplog: OpLog) -> None:
        self.oplog = oplog
        self._log_has_first_change: bool | None = None

    def log_from_the_start(self) -> bool:
        """Whether operations.jsonl holds change 1."""
        known = self._log_has_first_change
        if known is None:
            known = False
            try:
                with open(self.oplog.path, "rb") as f:
                    for line in f:
                        if b'"changeId":' in line:
                            known = any(c.get("changeId") == 1 for c in json.loads(line).get("changes", ()))
                            break
            except (OSError, ValueError):
                known = False
            self._log_has_first_change = known
        return known


@dataclass
class HistorySource:
    """Where the change history is: the Memory directory, the sealed segments' names (files
    that never change once named) and the inline changes. `live` reads the Service's own
    lists (lock held); `copied` copies them under the lock, for a walk outside it."""

    dir: Path
    history: list[Any]
    history_segments: list[str]

    @classmethod
    def live(cls, svc: FlowRoom) -> HistorySource:
        return cls(svc.dir, svc.state.history, svc.state.history_segments)

    @classmethod
    def copied(cls, svc: FlowRoom) -> HistorySource:
        return cls(svc.dir, list(svc.state.history), list(svc.state.history_segments))


# -- the change history, raw ------------------------------------------------------------------


def changes(src: HistorySource, target: str | None = None) -> Iterator[dict[str, Any]]:
    """Every change ever committed as its JSON dict, oldest first (optionally only those of
    one target: memory id or personId)."""
    needle = None if target is None else b'"target":' + json.dumps(target).encode()
    for seg in list(src.history_segments):
        path = src.dir / HISTORY_DIR / seg
        if needle is None:
            with open(path, "rb") as f:
                for line in f:
                    yield json.loads(line)
            continue
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            at = data.find(needle)
            while at >= 0:  # one C-speed search over the file, lines parsed only where it hits
                start = data.rfind(b"\n", 0, at) + 1
                end = data.find(b"\n", at)
                end = len(data) if end < 0 else end
                c = json.loads(data[start:end])
                if c.get("target") == target:
                    yield c
                at = data.find(needle, end)
    for c in list(src.history):
        if target is None or c.target == target:
            yield c.dump()


def _indexed_changes(svc: FlowRoom, target: str) -> list[dict[str, Any]] | None:
    """The changes of one target from the operation log's index (the log holds every change),
    oldest first; None when the index cannot answer (being built) or the log does not reach
    back to the first change (then the history itself is read)."""
    try:
        records, _total = svc.oplog.query([], None, None, 1 << 30, 0, changes_only=True, target=target)
    except ZcorError:
        return None
    out = {}
    for rec in records:
        for c in rec.get("changes", ()):
            cid = c.get("changeId")
            if cid and c.get("target") == target:
                out[cid] = {**c, "origin": rec.get("origin")}
    if not svc.undo.log_from_the_start():
        return None
    return [out[k] for k in sorted(out)]


def _line_time(line: bytes) -> float:
    m = _AT_RE.search(line)
    return datetime.fromisoformat(m.group(1).decode()).timestamp() if m else float("-inf")


def _walk_after(src: HistorySource, t: float) -> Iterator[Any]:
    """The changes after the last one made at or before instant t, oldest first, as raw
    segment lines (bytes) or inline Change objects. The boundary is found from the newest
    back, so the cost follows how far back t is."""
    inline = list(src.history)
    segments = list(src.history_segments)
    k = len(inline)
    while k > 0 and inline[k - 1].at.timestamp() > t:
        k -= 1
    pieces: list[tuple[Path, int]] = []
    if k == 0:
        for seg in reversed(segments):
            path = src.dir / HISTORY_DIR / seg
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                start, found = 0, False
                for offset, line in reverse_lines(fd, os.fstat(fd).st_size):
                    if _line_time(line) <= t:
                        start, found = offset + len(line) + 1, True
                        break
            finally:
                os.close(fd)
            pieces.insert(0, (path, start))
            if found:
                break
    for path, start in pieces:
        with open(path, "rb") as f:
            f.seek(start)
            yield from f
    yield from inline[k:]



_KEY_RE = re.compile(rb'"kind":"([a-z.]+)","target":(null|"(?:[^"\\]|\\.)*")')


# -- the Memory before a restore -----------------------------------------------------------------


def before_restore(svc: FlowRoom, change: dict[str, Any], src: HistorySource | None = None) -> MemoryState:
    """The Memory just before a restore: its pre-restore backup, or, when that file is gone
    (pruned, deleted by hand), rebuilt from the change history (which holds every change)."""
    name = (change.get("before") or {}).get("backupFile")
    try:
        return svc.backups.read(str(name))
    except (ZcorError, OSError):
        return _rebuilt_before(svc, change["changeId"], src if src is not None else HistorySource.live(svc))


def _rebuilt_before(svc: FlowRoom, change_id: int, src: HistorySource) -> MemoryState:
    """Replay every change before change_id onto an empty Memory. A restore on the way
    brings in the backup it read (or, for a revert that was itself rebuilt, the Memory
    before the restore it reverted). Conflict when the history cannot say (a Memory
    migrated from an old format started with memories no change created)."""
    state = MemoryState()
    for c in changes(src):
        cid, kind = c["changeId"], c["kind"]
        if cid >= change_id:
            break
        if kind == "state.restore":
            after = c.get("after") or {}
            if isinstance(after.get("rebuiltBefore"), int):
                state = _rebuilt_before(svc, after["rebuiltBefore"], src)
                continue
            try:
                state = svc.backups.read(str(after.get("restoredFrom")))
            except (ZcorError, OSError) as e:
                raise Conflict(f"The Memory before change {change_id} cannot be rebuilt: its pre-restore backup "
                               f"is gone, and so is {after.get('restoredFrom')!r}, restored by change {cid} "
                               f"({getattr(e, 'message', e)})") from None
        elif kind == "state.migrate":
            raise Conflict(f"The Memory before change {change_id} cannot be rebuilt: its pre-restore backup is "
                           f"gone, and the history starts from a Memory migrated from an old format") from None
        else:
            try:
                apply_change(state, c)
            except ZcorError as e:
                raise Conflict(f"The Memory before change {change_id} cannot be rebuilt from the history: "
                               f"{e.message}") from None
        state.history.clear()
    return state


# -- versions and time travel -------------------------------------------------------------------


def versions(svc: FlowRoom, target: str) -> dict[str, Any]:
    """Every version of one memory (or relationship, by personId), oldest first: each change
    with the record as it was after it (None after a delete)."""
    if not isinstance(target, str) or not target:
        raise InvalidArgument("id must be a memory id or a personId", field="id")
    with svc.lock:
        found = _indexed_changes(svc, target)
        if found is None:
            found = list(changes(HistorySource.live(svc), target))
        items = [{"at": c["at"], "actor": c["actor"], "seq": c.get("opSeq"), "changeId": c["changeId"],
                  "kind": c["kind"], "tool": c.get("tool"), "origin": c.get("origin"),
                  "record": c.get("after") if not c["kind"].endswith(".delete") else None}
                 for c in found if c["kind"].startswith(("node.", "relationship."))]
    if not items:
        raise NotFound(f"No change in the history concerns {target!r}", field="id")
    return {"id": target, "items": items}


def state_at(svc: FlowRoom, when: datetime) -> dict[str, Any]:
    """The whole Memory as it was at an instant (read-only).

    Walking forward from the instant, the first later change of each memory, relationship
    or of the important list holds in its `before` what was there at the instant; whatever
    no later change touched is as it is now, or, past a restore, as the restore's
    pre-restore backup has it. Only those first changes are parsed."""
    t = when.timestamp()
    with svc.lock:
        st = svc.state
        nodes: dict[str, Any] = dict(st.nodes)
        rels: dict[str, Any] = dict(st.relationships)
        important: Any = list(st.important)
        src = HistorySource.copied(svc)
    firsts: dict[tuple[str, str | None], dict[str, Any]] = {}
    count = 0
    restore: dict[str, Any] | None = None
    for item in _walk_after(src, t):
        count += 1
        if isinstance(item, bytes):
            m = _KEY_RE.search(item)
            kind = m.group(1).decode() if m else ""
            raw = m.group(2) if m else b"null"
            target = None if raw == b"null" else raw[1:-1].decode() if b"\\" not in raw else json.loads(raw)
            key = ("important", None) if kind.startswith("important.") else (kind.split(".")[0], target)
            if kind != "state.restore" and key in firsts:
                continue
            c = _loads(item)
        else:
            c = item.dump()
        kind, target = c["kind"], c.get("target")
        if kind == "state.restore":
            restore = c
            break
        key = ("important", None) if kind.startswith("important.") else (kind.split(".")[0], target)
        firsts.setdefault(key, c)
    if restore is not None:
        old = before_restore(svc, restore, src)
        nodes, rels, important = dict(old.nodes), dict(old.relationships), list(old.important)
        count = sum(1 for _ in _walk_after(src, t))
    for (what, target), c in firsts.items():
        kind, before = c["kind"], c.get("before")
        if what == "important":
            important = list(before or [])
        table = nodes if what == "node" else rels if what == "relationship" else None
        if table is None or target is None:
            continue
        if kind.endswith(".create"):
            table.pop(target, None)
        else:
            table[target] = before

    def order(node_id: str) -> tuple[int, str]:
        return (len(node_id), node_id)  # m9 before m10: creation order for zcord's ids

    def plain(x: Any) -> Any:
        return x if isinstance(x, dict) else x.dump()

    return {"at": format_time(when), "undoneChanges": count,
            "nodes": [plain(nodes[i]) for i in sorted(nodes, key=order)],
            "important": important, "relationships": [plain(rels[p]) for p in sorted(rels)]}


# -- revert ------------------------------------------------------------------------------------


def _differs(current: dict[str, Any] | None, expected: dict[str, Any] | None) -> list[str]:
    if current is None or expected is None:
        return [] if current == expected else ["(whole record)"]
    return sorted(k for k in set(current) | set(expected) if current.get(k) != expected.get(k))


class Undo:
    """Builds one revert inside the caller's transaction, collecting conflicts."""

    def __init__(self, svc: FlowRoom, ctx: Ctx, seq: int, force: bool, tx: Any = None):
        self.svc, self.ctx, self.seq, self.force = svc, ctx, seq, force
        self.st = svc.state
        self.tx = svc.begin(ctx) if tx is None else tx
        self.conflicts: list[dict[str, Any]] = []
        self.receipt = {"revertOf": seq}
        self.important_before: list[str] | None = None  # set when the operation changed the list
        self.dry = False  # a preview: write no file

    def conflict(self, target: str | None, problem: str, fields: list[str] | None = None, hard: bool = False) -> bool:
        """Note a conflict; True when the undo of this change must be skipped."""
        self.conflicts.append({"target": target, "problem": problem, **({"fields": fields} if fields else {}),
                               **({"forceable": False} if hard else {})})
        return hard or not self.force

    def record(self, kind: str, target: str | None, before: Any = None, after: Any = None) -> None:
        self.tx.record(kind, target, before=before, after=after, receipt=self.receipt)

    # node changes

    def _check_refs(self, rec: dict[str, Any], target: str) -> bool:
        parent, by = rec.get("parentId"), rec.get("supersededBy")
        if parent is not None and parent not in self.st.nodes:
            return not self.conflict(target, f"its parent {parent} no longer exists", hard=True)
        if by is not None and by not in self.st.nodes:
            return not self.conflict(target, f"the memory that superseded it, {by}, no longer exists", hard=True)
        return True

    def node_created(self, target: str, after: dict[str, Any]) -> None:
        cur = self.st.nodes.get(target)
        if cur is None:
            self.conflict(target, "it was deleted since", hard=True)
            return
        diff = _differs(cur.dump(), after)
        if diff and self.conflict(target, "it changed since", diff):
            return
        st = self.st
        kids, links, replaced = st.child_ids(target), st.links.get(target), st.replaced.get(target)
        if kids or links or replaced:
            what = ", ".join(x for x in (kids and f"children {', '.join(kids[:5])}",
                                         links and f"relationships {', '.join(sorted(links))}",
                                         replaced and f"superseded memories {', '.join(sorted(replaced))}") if x)
            self.conflict(target, f"removing it would orphan {what}", hard=True)
            return
        if target in st.important and self.important_before is None:
            new = [i for i in st.important if i != target]
            self.record("important.set", target, before=list(st.important), after=new)
            self.tx.set_important(new)
        self.record("node.delete", target, before=cur.dump())
        self.tx.remove_node(target)

    def node_changed(self, target: str, before: dict[str, Any], after: dict[str, Any]) -> None:
        cur = self.st.nodes.get(target)
        if cur is None:
            if self.conflict(target, "it was deleted since"):
                return
        else:
            diff = _differs(cur.dump(), after)
            if diff and self.conflict(target, "it changed since", diff):
                return
        if not self._check_refs(before, target):
            return
        node = Node.model_validate(before)
        if node.parent_id is not None and target in self.st.ancestors(node.parent_id):
            self.conflict(target, f"its old parent {node.parent_id} is now below it", hard=True)
            return
        if cur is None:
            self.record("node.create", target, after=node.dump())
            self.tx.add_node(node)
        else:
            self.record("node.update", target, before=cur.dump(), after=node.dump())
            self.tx.put_node(node)

    def node_deleted(self, target: str, before: dict[str, Any]) -> None:
        if target in self.st.nodes:
            self.conflict(target, "a memory with this id exists again", hard=True)
            return
        if not self._check_refs(before, target):
            return
        node = Node.model_validate(before)
        self.record("node.create", target, after=node.dump())
        self.tx.add_node(node)

    def check_important(self, before: list[str], after: list[str]) -> None:
        """Before anything is undone: the list must still be what the operation left."""
        if list(self.st.important) != after and self.conflict(None, "the important list changed since",
                                                               ["important"]):
            return
        self.important_before = before

    def finish_important(self) -> None:
        """After the memories are back: the list as it was, less memories no longer current."""
        if self.important_before is None:
            return
        cur = list(self.st.important)
        new = [i for i in self.important_before if i in self.st.nodes and self.st.nodes[i].superseded_by is None]
        if new != cur:
            self.record("important.set", None, before=cur, after=new)
            self.tx.set_important(new)

    # scopes (issue 34)

    def scope(self, target: str, before: Any, after: Any) -> None:
        cur = self.st.scopes.get(target)
        if cur != after and self.conflict(target, "its scope changed since", ["scope"]):
            return
        if cur != before:
            self.record("scope.set", target, before=cur, after=before)
            self.tx.set_scope(target, before)

    # relationships

    def rel(self, kind: str, target: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
        cur_obj = self.st.relationships.get(target)
        cur = cur_obj.dump() if cur_obj is not None else None
        expected = None if kind == "relationship.delete" else after
        diff = _differs(cur, expected)
        if diff and self.conflict(target, "it changed since" if cur is not None and expected is not None
                                  else "it was deleted since" if cur is None else "it exists again", diff):
            return
        if before is None:
            if cur is not None:
                self.record("relationship.delete", target, before=cur)
                self.tx.remove_rel(target)
            return
        link = before.get("memoryNodeId")
        if link is not None and link not in self.st.nodes:
            self.conflict(target, f"the memory it linked, {link}, no longer exists", hard=True)
            return
        rel = Relationship.model_validate(before)
        self.record("relationship.create" if cur is None else "relationship.update", target, before=cur,
                    after=rel.dump())
        if cur is None:
            self.tx.add_rel(rel)
        else:
            self.tx.put_rel(rel)

    # a restore

    def restore(self, change: dict[str, Any]) -> None:
        later = self.st.next_change_id() - 1 - change["changeId"]
        if later > 0 and self.conflict(None, f"{later} change(s) were made after the restore"):
            return
        name = (change.get("before") or {}).get("backupFile")
        incoming = before_restore(self.svc, change)
        rebuilt = {} if self.svc.backups.exists(str(name)) else {"rebuiltBefore": change["changeId"]}
        auto = "(a backup written when the revert runs)" if self.dry else \
            self.svc.backups.write(self.st, self.ctx.at, bot=False)

        def summary(s: Any) -> dict[str, Any]:
            return {"nodes": len(s.nodes), "relationships": len(s.relationships), "important": list(s.important)}

        self.record("state.restore", None, before={"backupFile": auto, **summary(self.st)},
                    after={"restoredFrom": name, **rebuilt, **summary(incoming)})
        self.tx.replace_all(incoming)
        self.ctx.snapshot_first = True


def revert(svc: FlowRoom, seq: int, force: bool, preview: bool, params: dict[str, Any]) -> dict[str, Any]:
    """Undo every change of one logged operation (operator method `zcor/history/revert`;
    its params model, zcord.transport.params.HistoryRevertParams, checked seq, force and
    preview; `params` is what the operation log records).

    With `preview: true` nothing is changed or logged: the result lists exactly the changes
    the revert would make (with before and after) and any conflicts."""
    if preview:
        return _preview(svc, seq, force)
    return svc.review.settle_after(lambda: svc.calls.run_operation(REVERT, params, lambda ctx: _revert(svc, ctx, seq, force)))


def _preview(svc: FlowRoom, seq: int, force: bool) -> dict[str, Any]:
    with svc.lock:
        ctx = svc.calls.preview_ctx(REVERT)
        ctx.snapshot_first = False
        try:
            u = _plan(svc, ctx, seq, force, dry=True)
            planned = [c.dump() for c in u.tx.changes]
        except Conflict as e:
            return {"seq": seq, "ok": False, "message": e.message, "conflicts": e.data.get("conflicts", []),
                    "changes": []}
        finally:
            if ctx.tx is not None:
                ctx.tx.rollback()
        return {"seq": seq, "ok": True, "forced": bool(u.conflicts), "conflicts": u.conflicts,
                "changes": [{k: c.get(k) for k in ("kind", "target", "before", "after")} for c in planned]}


def _revert(svc: FlowRoom, ctx: Ctx, seq: int, force: bool) -> dict[str, Any]:
    u = _plan(svc, ctx, seq, force)
    svc.review.start_reverting([seq], ctx.seq)  # a held operation reverted is no longer pending
    svc.commit(ctx)
    ctx.log_result = {"reverted": seq}
    return {"seq": ctx.seq, "reverted": seq, "forced": bool(u.conflicts),
            "changes": [{"kind": c["kind"], "target": c.get("target")} for c in ctx.changes]}


def _plan(svc: FlowRoom, ctx: Ctx, seq: int, force: bool, dry: bool = False) -> Undo:
    """Apply the revert inside a transaction (not yet committed); Conflict when refused."""
    rec = svc.find_operation(seq)
    if rec is None:
        raise NotFound(f"No operation with seq {seq} in the log", field="seq")
    if rec.get("tool") == "zcor/erase":
        raise InvalidArgument(f"Operation {seq} was an erasure (zcor/erase), which cannot be reverted: what it "
                              f"removed is gone from every file of the Memory", field="seq")
    own = [c for c in rec.get("changes", []) if c.get("changeId") and c.get("kind") != "erased"]
    if rec.get("status") != "ok" or not own:
        raise InvalidArgument(f"Operation {seq} ({rec.get('tool')}) changed nothing in the Memory; there is "
                              f"nothing to revert", field="seq")
    u = Undo(svc, ctx, seq, force)
    u.dry = dry
    _undo_changes(u, own)
    _refuse_conflicts(u, f"Operation {seq}", force)
    if not u.tx.changes:
        raise InvalidArgument(f"Reverting operation {seq} would change nothing: the Memory already holds what "
                              f"was there before it", field="seq")
    return u


def _refuse_conflicts(u: Undo, what: str, force: bool, field: str = "seq") -> None:
    hard = [x for x in u.conflicts if x.get("forceable") is False]
    if u.conflicts and (hard or not force):
        shown = "; ".join((f"operation {x['seq']}, " if "seq" in x else "") + f"{x['target'] or 'the Memory'}: "
                          f"{x['problem']}" + (f" ({', '.join(x['fields'])})" if x.get("fields") else "")
                          for x in u.conflicts[:8])
        said = "" if hard else f" {advice('force_revert')}"
        raise Conflict(f"{what} cannot be reverted: {shown}.{said}", field=field,
                       data={"conflicts": u.conflicts}, hint=None if hard else "force_revert")


def _undo_changes(u: Undo, own: list[dict[str, Any]]) -> None:
    """Undo one operation's changes (newest first) inside u's transaction, noting conflicts."""
    marks = [c for c in own if c["kind"].startswith("important.")]
    if marks:
        u.check_important(marks[0].get("before") or [], marks[-1].get("after") or [])
    for c in reversed(own):
        kind, target = c["kind"], c.get("target")
        if kind == "node.create":
            u.node_created(target, c["after"])
        elif kind in ("node.update", "node.supersede"):
            u.node_changed(target, c["before"], c["after"])
        elif kind == "node.delete":
            u.node_deleted(target, c["before"])
        elif kind.startswith("relationship."):
            u.rel(kind, target, c.get("before"), c.get("after"))
        elif kind == "scope.set":
            u.scope(target, c.get("before"), c.get("after"))
        elif kind == "state.restore":
            u.restore(c)
    u.finish_important()


def reinstate(svc: FlowRoom, target: str, cid: int, params: dict[str, Any]) -> dict[str, Any]:
    """Make one earlier version of a memory (or relationship) current again, as one new
    change (operator method `zcor/history/reinstate {id, changeId}`, checked by its params
    model; `params` is what the operation log records)."""

    def run(ctx: Ctx) -> dict[str, Any]:
        version = next((c for c in changes(HistorySource.live(svc), target) if c["changeId"] == cid), None)
        if version is None or not version["kind"].startswith(("node.", "relationship.")):
            raise NotFound(f"Change {cid} is not a change of {target!r}", field="changeId")
        record = version.get("after")
        if record is None:
            raise InvalidArgument(f"Change {cid} deleted {target}; reinstate a version it had before", field="changeId")
        u = Undo(svc, ctx, 0, True)
        u.receipt = {"reinstates": cid}
        if version["kind"].startswith("node."):
            cur = svc.state.nodes.get(target)
            if cur is not None and cur.dump() == record:
                raise InvalidArgument(f"{target} already is that version", field="changeId")
            u.node_changed(target, record, cur.dump() if cur is not None else record)
        else:
            cur_rel = svc.state.relationships.get(target)
            u.rel("relationship.update", target, record, cur_rel.dump() if cur_rel is not None else None)
        hard = [x for x in u.conflicts if x.get("forceable") is False]
        if hard:
            raise Conflict(f"{target} cannot be set back to change {cid}: "
                           + "; ".join(x["problem"] for x in hard), field="changeId", data={"conflicts": hard})
        svc.commit(ctx)
        ctx.log_result = {"reinstated": cid}
        return {"seq": ctx.seq, "id": target, "changeId": cid,
                "changes": [{"kind": c["kind"], "target": c.get("target")} for c in ctx.changes]}

    return svc.calls.run_operation(REINSTATE, params, run)


# -- several operations at once: undo by origin, and the review's reject --------------------------


def reverted_seqs(svc: FlowRoom) -> set[int]:
    """The operations undone by a revert that is itself still in force (a revert of a revert
    puts its operation back), from the reverting operations' log results."""
    undone_by: dict[int, list[int]] = {}
    for tool in REVERTERS:
        records, _ = svc.oplog.query([], None, None, 1 << 30, 0, changes_only=True, tool=tool)
        for rec in records:
            got = (rec.get("result") or {}).get("reverted")
            seqs = got if isinstance(got, list) else [got]
            if rec.get("status") == "ok":
                undone_by[rec["seq"]] = [x for x in seqs if isinstance(x, int)]
    memo: dict[int, bool] = {}

    def in_force(reverter: int) -> bool:  # not undone by a later revert in force
        if reverter not in memo:
            memo[reverter] = True  # a cycle cannot happen (reverts point back in time); be safe
            memo[reverter] = not any(reverter in seqs and in_force(r) for r, seqs in undone_by.items() if r > reverter)
        return memo[reverter]

    return {x for r, seqs in undone_by.items() if in_force(r) for x in seqs}


def plan_many(svc: FlowRoom, ctx: Ctx, records: list[dict[str, Any]], force: bool, what: str, field: str,
              dry: bool = False, receipt: dict[str, Any] | None = None) -> Undo:
    """Undo several logged operations, newest first, in one transaction (not yet committed);
    Conflict when refused, as `_plan` for one."""
    records = sorted(records, key=lambda r: r["seq"], reverse=True)
    u = Undo(svc, ctx, records[0]["seq"], force)
    u.dry = dry
    for rec in records:
        own = [c for c in rec.get("changes", []) if c.get("changeId")]
        u.seq, u.receipt, u.important_before = rec["seq"], {"revertOf": rec["seq"], **(receipt or {})}, None
        seen = len(u.conflicts)
        _undo_changes(u, own)
        for x in u.conflicts[seen:]:
            x["seq"] = rec["seq"]
    _refuse_conflicts(u, what, force, field)
    if not u.tx.changes:
        raise InvalidArgument(f"Reverting {what[0].lower() + what[1:]} would change nothing: the Memory already "
                              f"holds what was there before", field=field)
    return u


def preview_many(svc: FlowRoom, name: str, plan: Callable[[Ctx], Undo]) -> dict[str, Any]:
    """Run plan(ctx) -> Undo as a preview: nothing changed, logged or numbered."""
    with svc.lock:
        ctx = svc.calls.preview_ctx(name)
        try:
            u = plan(ctx)
            planned = [c.dump() for c in u.tx.changes]
        except Conflict as e:
            return {"ok": False, "message": e.message, "conflicts": e.data.get("conflicts", []), "changes": []}
        finally:
            if ctx.tx is not None:
                ctx.tx.rollback()
        return {"ok": True, "forced": bool(u.conflicts), "conflicts": u.conflicts,
                "changes": [{k: c.get(k) for k in ("kind", "target", "before", "after")} for c in planned]}


def origin_operations(svc: FlowRoom, sender: str, start: float | None, end: float | None) -> list[dict[str, Any]]:
    """The operations in force that changed the Memory on behalf of `sender` (its origin
    names it) in the time range, newest first."""
    records, _ = svc.oplog.query([], start, end, 1 << 30, 0, changes_only=True, origin=sender)
    undone = reverted_seqs(svc)
    return [r for r in records if r.get("status") == "ok" and r["seq"] not in undone
            and any(c.get("changeId") for c in r.get("changes", ()))]


def split_by_speaker(records: list[dict[str, Any]], sender: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the operations `sender` caused: the speaker of their origin, the ones they were only
    present at: shared with whoever spoke)."""
    from ..core.origin import speaker

    own = [r for r in records if speaker(r.get("origin")) == sender]
    return own, [r for r in records if speaker(r.get("origin")) != sender]


def revert_origin(svc: FlowRoom, sender: str, start: float | None, end: float | None, with_shared: bool,
                  force: bool, preview: bool, params: dict[str, Any]) -> dict[str, Any]:
    """Undo every change one sender caused in a time range, newest first, as one operation
    (operator method `zcor/history/revertOrigin`), itself revertible. By default only the
    operations whose origin's speaker is that sender; the ones where they were only present
    (another sender spoke) are listed apart (`shared`) and undone only with `shared: true`.
    Conflicts and `force` / `preview` as for `revert`; the params model
    (zcord.transport.params.HistoryRevertOriginParams) checked the arguments: `sender` in
    comparison form, the range in epoch seconds; `params` is what the operation log records."""

    def plan(ctx: Ctx, dry: bool, seqs: list[int], shared: list[int]) -> Undo:
        own, others = split_by_speaker(origin_operations(svc, sender, start, end), sender)
        records = own + others if with_shared else own
        shared.extend(r["seq"] for r in others)
        if not records:
            more = (f"; {len(others)} operation(s) in that range came from another sender's message while "
                    f"{sender} was present (seqs {', '.join(map(str, shared[:20]))}): pass shared: true to undo "
                    f"them too") if others else ""
            raise InvalidArgument(f"No change in force was caused by {sender} in that range; nothing to revert{more}",
                                  field="sender")
        seqs.extend(sorted((r["seq"] for r in records), reverse=True))
        what = f"The {len(seqs)} operation(s) caused by {sender}"
        return plan_many(svc, ctx, records, force, what, "sender", dry, {"revertOrigin": sender})

    if preview:
        seen: list[int] = []
        apart: list[int] = []
        try:
            out = preview_many(svc, REVERT_ORIGIN, lambda ctx: plan(ctx, True, seen, apart))
        except InvalidArgument as e:
            if not apart:
                raise
            out = {"ok": False, "message": e.message, "conflicts": [], "changes": []}  # only shared ones
        return {"sender": sender, "seqs": seen, "shared": apart, **out}

    def run(ctx: Ctx) -> dict[str, Any]:
        seqs: list[int] = []
        apart: list[int] = []
        u = plan(ctx, False, seqs, apart)
        svc.review.start_reverting(seqs, ctx.seq)
        svc.commit(ctx)
        ctx.log_result = {"reverted": seqs, "sender": sender}
        return {"seq": ctx.seq, "sender": sender, "reverted": seqs, "forced": bool(u.conflicts),
                "shared": [] if with_shared else apart,
                "changes": [{"kind": c["kind"], "target": c.get("target")} for c in ctx.changes]}

    return svc.review.settle_after(lambda: svc.calls.run_operation(REVERT_ORIGIN, params, run))
