"""Replies too large to deliver: a tool's page is cut to fit (with the offset of the next
page), anything else becomes a clear error, never a disconnect. The cap sits well below
the unread-output limit (connections.MAX_OUTPUT_BUFFER), so a client that reads its
replies is never cut off for one large answer."""

from __future__ import annotations

from typing import Any

from ..core import protocol as P
from ..core.errors import ZcorError

MAX_REPLY_BYTES = 16 << 20
"""The largest reply zcord sends (its JSON line)."""

_PAGED = (("items", "nextOffset", "total"), ("children", "childrenNextOffset", "childrenTotal"))


def too_large(size: int, what: str) -> str:
    return (f"The reply to {what} would be {size >> 20} MiB, over the {MAX_REPLY_BYTES >> 20} MiB a reply may "
            f"be; ask for less (a smaller limit, or a narrower query).")


def fit_tool_result(result: dict[str, Any], name: str) -> Any:
    """tool_success_raw(result), or, when that is over MAX_REPLY_BYTES, the longest first part
    of its page that fits, with the next offset (`nextOffset`, or `childrenNextOffset` for a
    trace) pointing at the rest and `truncated: true`; a tool failure when no page fits."""
    raw = P.tool_success_raw(result)
    if len(raw.data) <= MAX_REPLY_BYTES:
        return raw
    for key, next_key, total_key in _PAGED:
        items = result.get(key)
        if not isinstance(items, list) or not items or next_key not in result:
            continue
        nxt, total = result.get(next_key), result.get(total_key)
        start = (nxt if isinstance(nxt, int) else total if isinstance(total, int) else len(items)) - len(items)

        def page(k: int, key: str = key, items: list[Any] = items, next_key: str = next_key, start: int = start) -> Any:
            return P.tool_success_raw({**result, key: items[:k], next_key: start + k, "truncated": True})

        lo, hi = 0, len(items) - 1
        while lo < hi:  # the largest k whose page fits
            mid = (lo + hi + 1) // 2
            if len(page(mid).data) <= MAX_REPLY_BYTES:
                lo = mid
            else:
                hi = mid - 1
        if lo > 0:
            return page(lo)
    return P.tool_failure(ReplyTooLarge(too_large(len(raw.data), name)))


class ReplyTooLarge(ZcorError):
    """A reply over MAX_REPLY_BYTES."""

    code = "reply_too_large"
