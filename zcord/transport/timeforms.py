"""Times as operators write them (`2026-01-31 20:00`, `-2h`), read into ISO 8601 with an
offset for zcord's `from`, `to` and `time` parameters; shared by `zcor` and zcor-tui."""

from __future__ import annotations

import re
from datetime import datetime, time, timedelta

DATE_FORMS = ("%Y-%m-%d", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S",
              "%Y/%m/%d", "%Y/%m/%d %H:%M")


def parse_local(text: str, *, end: bool = False) -> str | None:
    """An operator's date (or date and time) as ISO 8601 with the local UTC offset.

    `2026-01-31` means the whole day: its start for `from`, its last millisecond for `to`
    (`end=True`). A full ISO time with an offset is passed through. Empty text is None.

    Raises:
        ValueError: the text is not a date this function understands.
    """
    text = text.strip()
    if not text:
        return None
    try:
        t = datetime.fromisoformat(text)
        if t.tzinfo is not None:
            return t.isoformat(timespec="milliseconds")
    except ValueError:
        t = None
    date_only = False
    if t is None:
        for form in DATE_FORMS:
            try:
                t = datetime.strptime(text, form)
                date_only = "%H" not in form
                break
            except ValueError:
                continue
    elif len(text) <= 10:
        date_only = True
    if t is None:
        raise ValueError(f"{text!r} is not a date; write 2026-01-31 or 2026-01-31 20:00")
    if end:
        if date_only:
            t = datetime.combine(t.date(), time(23, 59, 59, 999000))
        elif t.second == 0 and t.microsecond == 0 and text.count(":") == 1:
            t = t + timedelta(seconds=59, microseconds=999000)  # 20:00 means up to 20:00:59.999
    return t.astimezone().isoformat(timespec="milliseconds")


RELATIVE = re.compile(r"^-\s*((?:\d+\s*[smhdw]\s*)+)(?:ago)?$", re.I)
RELATIVE_PART = re.compile(r"(\d+)\s*([smhdw])", re.I)
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_instant(text: str, now: datetime | None = None) -> str:
    """An instant for time travel as ISO 8601 with its UTC offset.

    Accepts what `parse_local` accepts (an ISO time with offset is kept; a local date or
    date and time gets the local offset; a date alone is its first instant) and times
    relative to now: `-90m`, `-2h`, `-3d`, `-1w`, `-1d 6h`.

    Raises:
        ValueError: empty, or not a time this function understands.
    """
    text = text.strip()
    if not text:
        raise ValueError("give a time: 2026-01-31 20:00, 2026-01-31T20:00:00+08:00, -2h or -3d")
    m = RELATIVE.match(text)
    if m:
        seconds = sum(int(n) * UNIT_SECONDS[u.lower()] for n, u in RELATIVE_PART.findall(m.group(1)))
        base = now if now is not None else datetime.now().astimezone()
        return (base - timedelta(seconds=seconds)).isoformat(timespec="milliseconds")
    try:
        value = parse_local(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a time; write 2026-01-31 20:00, 2026-01-31T20:00:00+08:00, "
                         f"-2h or -3d") from None
    assert value is not None
    return value
