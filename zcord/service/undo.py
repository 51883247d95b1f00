"""Undo: the operator methods that revert a logged operation (`revert`), the operations one
sender caused (`revert_origin`), or make an earlier version current (`reinstate`).

They read the change history (zcord.core.history), which holds every change with its full
before and after; what was there is rebuilt by zcord.service.rebuild (which also answers
`versions` and `state_at`), the revert is planned by zcord.service.revert_plan.
A revert is itself an operation (operator, `zcor/history/revert`): its changes are
ordinary changes (node.create / node.update / node.delete, important.set,
relationship.*, state.restore) carrying the receipt `{"revertOf": seq}`, so it is
journaled, replayed and can be reverted in turn. Ids are never reused: a reverted delete
brings the same memory back under its own id.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core.errors import Conflict, InvalidArgument, NotFound
from ..core.history import changes
from .rebuild import live_source
from .rebuild import state_at as state_at  # operator methods zcor/history/at and /versions
from .rebuild import versions as versions
from .revert_plan import Undo as Undo  # review.reject plans with these
from .revert_plan import plan
from .revert_plan import plan_many as plan_many

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


# -- one operation ----------------------------------------------------------------------------


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
            u = plan(svc, ctx, seq, force, dry=True)
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
    u = plan(svc, ctx, seq, force)
    svc.review.start_reverting([seq], ctx.seq)  # a held operation reverted is no longer pending
    svc.commit(ctx)
    ctx.log_result = {"reverted": seq}
    return {"seq": ctx.seq, "reverted": seq, "forced": bool(u.conflicts),
            "changes": [{"kind": c["kind"], "target": c.get("target")} for c in ctx.changes]}


def reinstate(svc: FlowRoom, target: str, cid: int, params: dict[str, Any]) -> dict[str, Any]:
    """Make one earlier version of a memory (or relationship) current again, as one new
    change (operator method `zcor/history/reinstate {id, changeId}`, checked by its params
    model; `params` is what the operation log records)."""

    def run(ctx: Ctx) -> dict[str, Any]:
        version = next((c for c in changes(live_source(svc), target) if c["changeId"] == cid), None)
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
