"""How much of a call the operation log keeps when the call is refused or comes from the bot
in bulk: the log is on disk for good, so a client must not be able to fill the disk with
it. A refused call's parameters, and any over LOG_PARAMS_BYTES, are kept cut (strings and
arrays shortened, with a `_truncated` marker saying how large they were); the bot's calls
that change nothing share a budget of `botLogBytesPerMinute`, past which their records
keep only the marker (the calls are still answered and still recorded)."""

from __future__ import annotations

import json
import time
from typing import Any

LOG_PARAMS_BYTES = 4096
"""Parameters larger than this (as JSON) are recorded cut."""
LOG_STRING_CHARS = 256
LOG_ITEMS = 32
LOG_DEPTH = 6
LOG_ERROR_CHARS = 2000
"""An error message longer than this is recorded cut (it may quote the input)."""
TRUNCATED = "_truncated"


def _size(params: Any) -> int:
    try:
        return len(json.dumps(params, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace"))
    except (ValueError, TypeError, RecursionError):
        return len(repr(params)[:1 << 20])


def _cut(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return value if len(value) <= LOG_STRING_CHARS else \
            f"{value[:LOG_STRING_CHARS]}…[{len(value) - LOG_STRING_CHARS} more characters not recorded]"
    if isinstance(value, (list, dict)) and depth >= LOG_DEPTH:
        return "…[nested too deeply to record]"
    if isinstance(value, list):
        out = [_cut(v, depth + 1) for v in value[:LOG_ITEMS]]
        if len(value) > LOG_ITEMS:
            out.append(f"…[{len(value) - LOG_ITEMS} more items not recorded]")
        return out
    if isinstance(value, dict):
        items = list(value.items())
        cut = {_cut(str(k)): _cut(v, depth + 1) for k, v in items[:LOG_ITEMS]}
        if len(items) > LOG_ITEMS:
            cut["…"] = f"[{len(items) - LOG_ITEMS} more fields not recorded]"
        return cut
    return value


def cut_message(message: str) -> str:
    return message if len(message) <= LOG_ERROR_CHARS else \
        f"{message[:LOG_ERROR_CHARS]}…[{len(message) - LOG_ERROR_CHARS} more characters not recorded]"


class LogBudget:
    """The bot's budget of log bytes for calls that change nothing (a token bucket that
    refills at per_minute bytes a minute)."""

    def __init__(self) -> None:
        self.tokens: float | None = None
        self.at = time.monotonic()

    def take(self, size: int, per_minute: int) -> bool:
        now = time.monotonic()
        if self.tokens is None:
            self.tokens = float(per_minute)
        self.tokens = min(float(per_minute), self.tokens + (now - self.at) * per_minute / 60)
        self.at = now
        if self.tokens < size:
            return False
        self.tokens -= size
        return True


def bounded_params(params: dict[str, Any], refused: bool, bot_read: bool, budget: LogBudget,
                   per_minute: int) -> dict[str, Any]:
    """The params a record keeps: whole when small, cut (with the marker) when over
    LOG_PARAMS_BYTES, only the marker once the bot's budget is spent (charged with what is
    kept)."""
    if not (refused or bot_read):
        return params
    size = _size(params)
    kept, kept_size = params, size
    if size > LOG_PARAMS_BYTES:
        kept = _cut(params)
        if not isinstance(kept, dict) or _size(kept) > 4 * LOG_PARAMS_BYTES:
            kept = {}
        kept[TRUNCATED] = {"bytes": size, "reason": "refused call" if refused else "large parameters"}
        kept_size = _size(kept)
    if bot_read and not budget.take(kept_size, per_minute):
        return {TRUNCATED: {"bytes": size, "reason": "botLogBytesPerMinute"}}
    return kept
