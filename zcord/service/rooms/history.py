"""zcor_memory_history and the operator's history query: the operation log, searched by
its index (exact totals and pages)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import inputs as I
from .. import scope
from ..calls import Ctx, Locked, page, parse_args, time_range
from ..review import fingerprint

if TYPE_CHECKING:
    from ..parts import FlowRoom


REFUSED_CODES = frozenset({"blocked_sender", "untrusted_sender"})
WITHHELD_HELD = "held for an operator's review: its text is not shown until approved"
WITHHELD_REFUSED = "refused by the per-sender trust rule: its text is not shown"
WITHHELD_REJECTED = "rejected by an operator: its text is not shown"


SCAN_PAGE = 1000
"""Records read at a time when the model's history query leaves out private records."""


def history(svc: FlowRoom, a: I.HistoryArgs, ctx: Ctx) -> dict[str, Any]:
    start, end = time_range(a)
    hidden = _private_hidden(svc, ctx)
    if hidden is None:
        items, total = svc.oplog.query(a.keywords or [], start, end, a.limit, a.offset)
    else:  # another session's private records: not listed, not counted (scope.py)
        items, total = _query_without(svc, a, start, end, hidden)
    if ctx.actor == "model":  # held means invisible, in the log too (issue 33); operators see all
        held = held_versions(svc)
        items = [for_model(svc, rec, held) for rec in items]
    return {"items": items, "total": total, "nextOffset": page(total, a.offset, len(items))}


def _private_hidden(svc: FlowRoom, ctx: Ctx) -> frozenset[str] | None:
    """For a model's call while scopes apply and some private conversation was ever logged:
    the memory ids hidden from it (their records are left out too); else None (no filter)."""
    if ctx.actor != "model" or svc.config.private_scope != "session":
        return None
    if not svc.state.scopes and not svc.private_logged():
        return None
    return scope.hidden_now(svc.state)


def private_record(rec: dict[str, Any], session: Any, hidden: frozenset[str]) -> bool:
    """Whether a log record belongs to another session's private conversation or touches a
    memory hidden from `session`."""
    origin = rec.get("origin")
    if isinstance(origin, dict) and origin.get("private") is True and origin.get("session") != session:
        return True
    if hidden:
        for c in rec.get("changes") or ():
            if c.get("target") in hidden:
                return True
    return False


def _query_without(svc: FlowRoom, a: I.HistoryArgs, start: float | None, end: float | None,
                   hidden: frozenset[str]) -> tuple[list[dict[str, Any]], int]:
    """The history query without the records private_record leaves out: the page asked for and
    the exact total (every match is read, SCAN_PAGE at a time)."""
    session = scope.viewer()
    keep: list[dict[str, Any]] = []
    total = 0
    at = 0
    while True:
        got, _ = svc.oplog.query(a.keywords or [], start, end, SCAN_PAGE, at)
        for rec in got:
            if private_record(rec, session, hidden):
                continue
            if a.offset <= total < a.offset + a.limit:
                keep.append(rec)
            total += 1
        if len(got) < SCAN_PAGE:
            return keep, total
        at += SCAN_PAGE


def held_versions(svc: FlowRoom) -> frozenset[tuple[str, str]]:
    """(target, fingerprint) of every version a held operation wrote."""
    return frozenset((c["target"], fingerprint(c["after"])) for e in svc.review.items.values()
                     for c in e.get("changes") or () if isinstance(c.get("target"), str)
                     and isinstance(c.get("after"), dict))


def for_model(svc: FlowRoom, rec: dict[str, Any], held: frozenset[tuple[str, str]] = frozenset()) -> dict[str, Any]:
    """A log record as the model may read it: the text of an operation still held for review,
    of a call the trust rule refused, of a version an operator rejected (in the held write
    and in the reject that undid it) and of a held version another record quotes (a later
    change's `before`) withheld; what was done, when and by whom kept."""
    book = svc.review
    why = None
    if rec.get("seq") in book.items:
        why = WITHHELD_HELD
    elif rec.get("status") == "error" and (rec.get("error") or {}).get("code") in REFUSED_CODES:
        why = WITHHELD_REFUSED
    elif book.rejected or held:
        for c in rec.get("changes") or ():
            target = c.get("target")
            for v in (c.get("before"), c.get("after")):
                if not isinstance(v, dict):
                    continue
                pair = (target, fingerprint(v))
                if pair in held:
                    why = WITHHELD_HELD
                elif pair in book.rejected:
                    why = WITHHELD_REJECTED
            if why is not None:
                break
    if why is None:
        return rec
    return {**rec, "params": {"withheld": why}, "result": None,
            "changes": [{**{k: v for k, v in c.items() if k not in ("before", "after", "receipt")}, "withheld": True}
                        for c in rec.get("changes") or ()]}


def operator_query(svc: FlowRoom, params: Any, args: I.OperatorHistoryArgs | None = None) -> dict[str, Any]:
    """`zcor/history/query`: the history tool's query plus the operator's filters (changes only,
    actor, tool, target, origin), all applied by the index, so totals and pages are exact. Like
    other operator displays it is not recorded."""
    a = parse_args(I.OperatorHistoryArgs, params) if args is None else args
    start, end = time_range(a)
    svc.oplog.warm(background=True)

    def read(ctx: Ctx) -> dict[str, Any]:
        items, total = svc.oplog.query(a.keywords or [], start, end, a.limit, a.offset,
                                       changes_only=a.changes_only, actor=a.actor, tool=a.tool,
                                       target=a.target, origin=a.origin)
        return {"items": items, "total": total, "nextOffset": page(total, a.offset, len(items))}

    return svc.calls.run("zcor/history/query", params, "operator", Locked(read), recorded=False)
