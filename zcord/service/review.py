"""Review of untrusted changes (issue 22): the changes a bot made on behalf of an untrusted
sender are applied and logged but held — left out of auto-recall, search candidates and the
system prefix, and not markable important — until an operator approves them
(`zcor/review/approve`) or rejects them (`zcor/review/reject`, a revert of each).

The pending set is `review.json` in the Memory directory, written atomically: one entry per
held operation, keyed by the operation's `seq` (the number the History screen shows, and
what `zcor/history/revert` takes), holding its time, tool, origin and changes (before and
after). The ids an operator approves or rejects are those seqs.

Crash safety (a crash at any instant leaves the old or the new pending set):

- holding: the entry is written before the operation's log record; an entry whose seq the
  log never got (seq above the log's last) is dropped at the next start.
- reverting (reject, revert, revertOrigin of a held operation): the entry is first marked
  `reverting` by the reverting operation's seq, and removed after that operation is
  logged; at start a marked entry is removed when that operation is in the log, and put
  back to pending when it is not.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import InvalidArgument, NotFound, StateFileInvalid
from ..core.fsutil import atomic_write
from .trust import read_small_file

if TYPE_CHECKING:
    from .calls import Ctx
    from .parts import FlowRoom

log = logging.getLogger("zcord")

REVIEW_FILE = "review.json"
HIDING_KINDS = frozenset({"node.create", "node.update", "relationship.create", "relationship.update"})
"""Changes whose new record came from the untrusted sender: their targets are held."""
HOLDABLE_TOOLS = frozenset({"zcor_memory_write", "zcor_memory_delete", "zcor_memory_merge", "zcor_memory_supersede",
                            "zcor_relationship_write", "zcor_relationship_delete"})
"""Tools whose changes an untrusted sender may cause, held for review; their other changing
tools (important marks, restore, synonyms) they may not cause at all."""
MAX_IDS = 100
MAX_REVIEW_FILE = 256 << 20
APPROVE = "zcor/review/approve"
REVIEW_NOTE = ("Saved, but held for an operator's review because the message came from an untrusted sender: "
               "it is not recalled until approved. Do not write it again.")


class ReviewBook:
    """review.json and the ids it holds back (`hidden`: memory ids and personIds)."""

    def __init__(self, path: Path, lock: threading.RLock):
        self.path = path
        self.lock = lock
        self.items: dict[int, dict[str, Any]] = {}
        self.hidden: frozenset[str] = frozenset()

    # -- the file -------------------------------------------------------------------------

    def load(self, last_seq: int, find: Callable[[int], dict[str, Any] | None]) -> None:
        """Read review.json and settle what a crash left half done (see the module docstring)."""
        raw = read_small_file(self.path, MAX_REVIEW_FILE, " (held changes then count as approved)")
        if raw is None:
            self._set({})
            return
        try:
            doc = json.loads(raw)
            if doc.get("version") != 1 or not isinstance(doc.get("pending"), list):
                raise ValueError('expected {"version": 1, "pending": [...]}')
            items: dict[int, dict[str, Any]] = {}
            for entry in doc["pending"]:
                if not isinstance(entry, dict) or not isinstance(entry.get("seq"), int) or \
                        not isinstance(entry.get("changes"), list):
                    raise ValueError("an entry without seq or changes")
                items[entry["seq"]] = entry
        except (ValueError, TypeError, AttributeError) as e:
            raise StateFileInvalid(f"{self.path.name} is not a valid review file ({e}); fix it by hand or remove "
                                   f"it (held changes then count as approved)") from None
        settled: dict[int, dict[str, Any]] = {}
        for seq, entry in items.items():
            if seq > last_seq:
                continue  # its operation never reached the log: it did not happen
            by = entry.get("reverting")
            if by is not None:
                rec = find(by) if isinstance(by, int) and by <= last_seq else None
                if rec is not None and rec.get("status") == "ok" and rec.get("changes"):
                    continue  # reverted
                entry = {k: v for k, v in entry.items() if k != "reverting"}
            settled[seq] = entry
        if settled != items:
            self._save(settled)
        else:
            self._set(items)

    def _set(self, items: dict[int, dict[str, Any]]) -> None:
        self.items = items
        self.hidden = frozenset(c["target"] for e in items.values() for c in e["changes"]
                                if c.get("kind") in HIDING_KINDS and isinstance(c.get("target"), str))

    def _save(self, items: dict[int, dict[str, Any]]) -> None:
        data = json.dumps({"version": 1, "pending": [items[k] for k in sorted(items)]}, ensure_ascii=False)
        atomic_write(self.path, data.encode() + b"\n")
        self._set(items)

    # -- holding, reverting ---------------------------------------------------------------

    def hold(self, ctx: Ctx, changes: list[dict[str, Any]]) -> None:
        """Hold one operation's committed changes (lock held); OSError when the file cannot be written."""
        from ..core.models import format_time

        entry = {"seq": ctx.seq, "at": format_time(ctx.at), "tool": ctx.tool, "origin": ctx.origin,
                 "changes": [{k: c.get(k) for k in ("changeId", "kind", "target", "before", "after")}
                             for c in changes]}
        self._save({**self.items, ctx.seq: entry})

    def forget(self, seq: int) -> None:
        """Drop a hold whose operation was undone before it was logged (best effort: a stale
        entry is dropped at the next start anyway)."""
        if seq in self.items:
            try:
                self._save({k: v for k, v in self.items.items() if k != seq})
            except OSError as e:
                log.warning("%s: could not drop held operation %s (%s)", self.path.name, seq, e)

    def approve(self, seqs: list[int]) -> None:
        """The held operations become ordinary (lock held); OSError when the file cannot be written."""
        self._save({k: v for k, v in self.items.items() if k not in seqs})

    def start_reverting(self, seqs: list[int], by: int) -> None:
        """Mark the held ones among seqs as being reverted by operation `by` (before it commits)."""
        held = [s for s in seqs if s in self.items]
        if held:
            self._save({k: ({**v, "reverting": by} if k in held else v) for k, v in self.items.items()})

    def settle_after(self, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Run a reverting operation; then drop the entries it marked (or unmark them when it failed)."""
        try:
            result = run()
        except BaseException:
            with self.lock:
                marked = {k: v for k, v in self.items.items() if "reverting" in v}
                if marked:
                    try:
                        self._save({k: {f: x for f, x in v.items() if f != "reverting"} if k in marked else v
                                    for k, v in self.items.items()})
                    except OSError as e:
                        log.warning("%s: %s (settled at the next start)", self.path.name, e)
            raise
        by = result.get("seq")
        with self.lock:
            done = [k for k, v in self.items.items() if v.get("reverting") == by]
            if done:
                try:
                    self._save({k: v for k, v in self.items.items() if k not in done})
                except OSError as e:
                    log.warning("%s: %s (settled at the next start)", self.path.name, e)
        return result


class WithoutHeld:
    """A MemoryState seen without its held memories in the important list (the system prefix)."""

    def __init__(self, state: Any, hidden: frozenset[str]):
        self._state = state
        self.important = [i for i in state.important if i not in hidden]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._state, name)


# -- operator methods ----------------------------------------------------------------------


def _ids(params: Any, allowed: set[str]) -> list[int]:
    if not isinstance(params, dict):
        raise InvalidArgument("params must be an object {ids}")
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise InvalidArgument(f"unknown parameter {unknown[0]}", field=unknown[0])
    ids = params.get("ids")
    if not isinstance(ids, list) or not ids or len(ids) > MAX_IDS or \
            any(not isinstance(i, int) or isinstance(i, bool) or i < 1 for i in ids):
        raise InvalidArgument(f"ids must be 1 to {MAX_IDS} operation seqs (positive integers) of held changes, as "
                              f"zcor/review/list gives them", field="ids")
    if len(set(ids)) != len(ids):
        raise InvalidArgument("ids must be distinct", field="ids")
    return ids


def _pending(svc: FlowRoom, ids: list[int]) -> None:
    missing = [i for i in ids if i not in svc.review.items or "reverting" in svc.review.items[i]]
    if missing:
        raise NotFound(f"No held change with seq {', '.join(map(str, missing))}; zcor/review/list gives the held "
                       f"ones", field="ids")


def review_list(svc: FlowRoom, params: Any) -> dict[str, Any]:
    """`zcor/review/list`: every held operation, newest first, with its origin and changes."""
    if params:
        raise InvalidArgument("zcor/review/list takes no parameters")
    with svc.lock:
        items = [dict(e) for _, e in sorted(svc.review.items.items(), reverse=True) if "reverting" not in e]
    return {"items": items, "total": len(items)}


def approve(svc: FlowRoom, params: Any) -> dict[str, Any]:
    """`zcor/review/approve {ids}`: the held operations become ordinary (recalled); recorded."""
    ids = _ids(params, {"ids"})

    def apply():
        _pending(svc, ids)
        svc.review.approve(ids)
        return {"approved": ids}, [{"kind": "review.approve", "target": str(i)} for i in ids]

    return svc.calls.operate(APPROVE, params, "operator", apply, "review.json")


def reject(svc: FlowRoom, params: Any) -> dict[str, Any]:
    """`zcor/review/reject {ids, force?, preview?}`: revert the held operations, newest first,
    as one operation (conflicts as `zcor/history/revert`)."""
    from . import undo

    ids = _ids(params, {"ids", "force", "preview"})
    force, preview = params.get("force", False), params.get("preview", False)
    for name, value in (("force", force), ("preview", preview)):
        if not isinstance(value, bool):
            raise InvalidArgument(f"{name} must be true or false", field=name)

    def plan(ctx: Ctx, dry: bool) -> undo.Undo:
        _pending(svc, ids)
        records = []
        for i in ids:
            rec = svc.find_operation(i)
            if rec is None or rec.get("status") != "ok":
                raise NotFound(f"Operation {i} is not in the log as a change; approve it to clear it", field="ids")
            records.append(rec)
        return undo.plan_many(svc, ctx, records, force, f"Held operation(s) {', '.join(map(str, ids))}", "ids",
                              dry, {"rejected": True})

    if preview:
        return {"ids": ids, **undo.preview_many(svc, undo.REJECT, lambda ctx: plan(ctx, True))}

    def run(ctx: Ctx) -> dict[str, Any]:
        u = plan(ctx, False)
        svc.review.start_reverting(ids, ctx.seq)
        svc.commit(ctx)
        ctx.log_result = {"reverted": ids}
        return {"seq": ctx.seq, "rejected": ids, "forced": bool(u.conflicts),
                "changes": [{"kind": c["kind"], "target": c.get("target")} for c in ctx.changes]}

    return svc.review.settle_after(lambda: svc.calls.run_operation(undo.REJECT, params, run))
