"""A person's affinity over time, from the change history (`zcor/history/versions` of a
personId): the series `zcor relationship-history` prints and zcor-tui's Relationships draws.

Every relationship write is a change in the history, so the series needs no new records:
each version whose affinity or reason differs from the one before is a point.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["affinity_series", "sparkline", "sparkline_scale"]

BLOCKS = "▁▂▃▄▅▆▇█"


def affinity_series(versions: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Points `{at, affinity, reason, actor, seq, changeId, deleted}`, oldest first, from a
    `history_versions(personId)` result: the creation, every change of affinity or reason,
    and deletes (`deleted: true`, affinity None)."""
    points: list[dict[str, Any]] = []
    last: tuple[Any, Any] | None = None
    for v in versions.get("items") or ():
        if not str(v.get("kind", "")).startswith("relationship."):
            continue
        record = v.get("record")
        base = {"at": v.get("at"), "actor": v.get("actor"), "seq": v.get("seq"), "changeId": v.get("changeId")}
        if not isinstance(record, dict):
            points.append({**base, "affinity": None, "reason": None, "deleted": True})
            last = None
            continue
        now = (record.get("affinity"), record.get("reason"))
        if now != last:
            points.append({**base, "affinity": now[0], "reason": now[1], "deleted": False})
        last = now
    return points


def sparkline(values: list[int | None]) -> str:
    """One block per value, a space for a gap, scaled to the series' own range (`▁` its
    lowest, `█` its highest; sparkline_scale names them), so that a change of a few points
    shows: 0 → −20 → +75 draws `▂▁█`. A flat series is drawn on the −100..100 scale."""
    lo, hi = _range(values)
    out = []
    top = len(BLOCKS) - 1
    for value in values:
        if value is None:
            out.append(" ")
        else:
            v = max(-100, min(100, int(value)))
            out.append(BLOCKS[round((v - lo) * top / (hi - lo))])
    return "".join(out)


def sparkline_scale(values: list[int | None]) -> str:
    """What the sparkline's lowest and highest blocks stand for: `-20 ▁ … █ +75`."""
    lo, hi = _range(values)
    return f"{lo:+d} ▁ … █ {hi:+d}".replace("+0 ", "0 ").replace("█ +0", "█ 0")


def _range(values: list[int | None]) -> tuple[int, int]:
    present = [max(-100, min(100, int(v))) for v in values if v is not None]
    lo, hi = min(present, default=-100), max(present, default=100)
    return (lo, hi) if hi > lo else (-100, 100)
