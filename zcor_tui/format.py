"""Pure helpers that turn daemon data into text: times, labels, affinity bars, term lists.

No Textual and no daemon calls here, so every rule is easy to test on its own.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, time, timedelta
from typing import Any

from rich.markup import escape as rich_escape
from rich.text import Text

from zcord.client import human_size  # noqa: F401  (one rule for the CLI and the TUI)
from zcord.client import invisible_marked, json_shown, shown  # noqa: F401  (one rule for the CLI and the TUI)
from zcord.client import describe_origin

DATE_FORMS = ("%Y-%m-%d", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S",
              "%Y/%m/%d", "%Y/%m/%d %H:%M")
TERM_SEPARATORS = re.compile(r"[,，、;；\n]+")
KEYWORD_SEPARATORS = re.compile(r"[\s,，、;；]+")
SUPERSEDED_MARK = "⊘ "
"""Before a superseded memory's title wherever it is listed (not only a dimmer colour)."""


def when(iso: str | None) -> str:
    """`2026-01-01 09:00:05 +08:00`: the daemon's time to the second, with its offset."""
    if not iso:
        return "—"
    try:
        t = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    offset = t.strftime("%z")
    offset = f"{offset[:3]}:{offset[3:]}" if offset else ""
    return f"{t:%Y-%m-%d %H:%M:%S} {offset}".rstrip()


def when_short(iso: str | None) -> str:
    """`2026-01-01 09:00` for table cells."""
    if not iso:
        return "—"
    try:
        return f"{datetime.fromisoformat(iso):%Y-%m-%d %H:%M}"
    except ValueError:
        return iso


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


def split_terms(text: str) -> list[str]:
    """Terms separated by commas (ASCII or full-width), 、, semicolons or new lines."""
    return [t.strip() for t in TERM_SEPARATORS.split(text) if t.strip()]


def split_keywords(text: str) -> list[str]:
    """Search keywords: separated by spaces as well as by commas."""
    return [t for t in KEYWORD_SEPARATORS.split(text.strip()) if t]


def affinity_bar(value: int, half: int = 10) -> Text:
    """A signed bar: negative fills left of the centre in red, positive right in green."""
    value = max(-100, min(100, int(value)))
    filled = round(abs(value) * half / 100)
    if value != 0 and filled == 0:
        filled = 1
    bar = Text()
    if value < 0:
        bar.append("·" * (half - filled), style="dim")
        bar.append("█" * filled, style="red")
    else:
        bar.append("·" * half, style="dim")
    bar.append("│", style="bold")
    if value > 0:
        bar.append("█" * filled, style="green")
        bar.append("·" * (half - filled), style="dim")
    else:
        bar.append("·" * half, style="dim")
    bar.append(f" {value:+d}" if value else "  0", style="bold red" if value < 0 else
               ("bold green" if value > 0 else "bold"))
    return bar


def node_label(node_id: str, title: str, *, superseded: bool = False, important: bool = False,
               marked: bool = False, child_count: int = 0, width: int | None = None) -> Text:
    """The tree's line for one memory; with `width` (cells), the title is cut to fit and the
    id stays whole (`★ Mike (friend from college) m1` must not lose the `1` and read as m1…)."""
    label = Text(no_wrap=True, overflow="ellipsis")
    if marked:
        label.append("✓ ", style="bold magenta")
    if important:
        label.append("★ ", style="bold yellow")
    if superseded:
        label.append(SUPERSEDED_MARK, style="bold red")
    tail = Text()
    tail.append(f" {node_id}", style="dim")
    if superseded:
        tail.append(" superseded", style="italic red")
    if child_count:
        tail.append(f" ({child_count})", style="dim cyan")
    name = Text(one_line(title), style="dim" if superseded else "")
    if width is not None:
        room = max(2, width - label.cell_len - tail.cell_len)
        if name.cell_len > room:
            name.truncate(room, overflow="ellipsis")
    label.append_text(name)
    label.append_text(tail)
    return label


def one_line(text: str | None, limit: int = 200) -> str:
    """First line of text, trimmed to `limit` characters, terminal controls made visible."""
    if not text:
        return ""
    line = text.strip().splitlines()[0] if text.strip() else ""
    line = line if len(line) <= limit else line[:limit - 1] + "…"
    return shown(line, lines=False)


def origin_text(origin: Any) -> str:
    """Who caused a change ("from qq:42 in qq:group:1"), its sender keys and session (the
    bot's words) with terminal controls and bidi overrides made visible; "" for none."""
    return shown(describe_origin(origin), lines=False)


def plain(text: Any, style: str = "", *, lines: bool = True) -> Text:
    """Memory text as a Rich Text: never read as markup, terminal controls made visible.

    Every text that came from the Memory reaches a widget through this (or `one_line`,
    `shown_id`): a title with `[/]` would crash a DataTable cell or a Static read as
    markup, and an escape sequence would act on the operator's terminal.
    """
    return Text(shown(text, lines=lines), style=style)


def cell(text: Any) -> str:
    """Memory text for a DataTable cell that stays a plain string (tests and sorting read
    it): one line, controls marked, markup escaped (a `str` cell is read as Rich markup)."""
    return rich_escape(shown(text, lines=False))


def shown_id(pid: Any, style: str = "cyan") -> Text:
    """A personId with its invisible and compatibility characters marked (`qq:1⟨U+200B⟩0`):
    ids that differ only by them are separate records and must not look identical."""
    return Text(invisible_marked(str(pid)), style=style)


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def compact_json(value: Any, limit: int = 1000) -> str:
    text = json_shown(json.dumps(value, ensure_ascii=False, separators=(", ", ": ")))
    return text if len(text) <= limit else text[:limit - 1] + "…"


def change_targets(record: dict[str, Any]) -> str:
    """What an operation-log record touched: the targets of its changes, else its id params."""
    targets: list[str] = []
    for change in record.get("changes") or ():
        target = change.get("target")
        if target and target not in targets:
            targets.append(target)
    if not targets:
        params = record.get("params") or {}
        for key in ("id", "personId", "parentId", "replacementId"):
            value = params.get(key)
            if isinstance(value, str) and value:
                targets.append(value)
        ids = params.get("ids")
        if isinstance(ids, list):
            targets.extend(str(i) for i in ids)
    return ", ".join(invisible_marked(t) for t in targets)
