"""zcor_memory_history and the operator's history query: the operation log, searched by
its index (exact totals and pages)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import inputs as I
from ..calls import Ctx, Locked, page, parse_args, time_range

if TYPE_CHECKING:
    from ..parts import FlowRoom


def history(svc: FlowRoom, a: I.HistoryArgs, ctx: Ctx) -> dict[str, Any]:
    start, end = time_range(a)
    items, total = svc.oplog.query(a.keywords or [], start, end, a.limit, a.offset)
    return {"items": items, "total": total, "nextOffset": page(total, a.offset, len(items))}


def operator_query(svc: FlowRoom, params: Any) -> dict[str, Any]:
    """`zcor/history/query`: the history tool's query plus the operator's filters (changes only,
    actor, tool, target, origin), all applied by the index, so totals and pages are exact. Like
    other operator displays it is not recorded."""
    a = parse_args(I.OperatorHistoryArgs, params)
    start, end = time_range(a)
    svc.oplog.warm(background=True)

    def read(ctx: Ctx) -> dict[str, Any]:
        items, total = svc.oplog.query(a.keywords or [], start, end, a.limit, a.offset,
                                       changes_only=a.changes_only, actor=a.actor, tool=a.tool,
                                       target=a.target, origin=a.origin)
        return {"items": items, "total": total, "nextOffset": page(total, a.offset, len(items))}

    return svc.calls.run("zcor/history/query", params, "operator", Locked(read), recorded=False)
