"""The Memory as it was, rebuilt from the change history (zcord.core.history): every
version of one record (`versions`), the whole Memory at an instant (`state_at`), and the
Memory just before a restore (`before_restore`: its pre-restore backup, or replayed from
the history when that file is gone). Read-only: reverting is revert_plan's, the operator
methods are undo's.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from orjson import loads as _loads

from ..core.errors import Conflict, InvalidArgument, NotFound, ZcorError
from ..core.history import HistorySource, changes, line_key, walk_after
from ..core.journal import apply_change
from ..core.models import format_time
from ..core.state import MemoryState

if TYPE_CHECKING:
    from .parts import FlowRoom


def live_source(svc: FlowRoom) -> HistorySource:
    """The Service's own history lists (read with the lock held)."""
    return HistorySource(svc.dir, svc.state.history, svc.state.history_segments)


def copied_source(svc: FlowRoom) -> HistorySource:
    """Copies of the Service's history lists, taken under the lock, for a walk outside it."""
    return HistorySource(svc.dir, list(svc.state.history), list(svc.state.history_segments))


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


def before_restore(svc: FlowRoom, change: dict[str, Any], src: HistorySource | None = None) -> MemoryState:
    """The Memory just before a restore: its pre-restore backup, or, when that file is gone
    (pruned, deleted by hand), rebuilt from the change history (which holds every change)."""
    name = (change.get("before") or {}).get("backupFile")
    try:
        return svc.backups.read(str(name))
    except (ZcorError, OSError):
        return _rebuilt_before(svc, change["changeId"], src if src is not None else live_source(svc))


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
            found = list(changes(live_source(svc), target))
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
        src = copied_source(svc)
    firsts: dict[tuple[str, str | None], dict[str, Any]] = {}
    count = 0
    restore: dict[str, Any] | None = None
    for item in walk_after(src, t):
        count += 1
        if isinstance(item, bytes):
            kind, target = line_key(item)
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
        count = sum(1 for _ in walk_after(src, t))
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
