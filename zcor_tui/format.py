"""Pure helpers that turn daemon data into text: times, labels, affinity bars, term lists.

No Textual and no daemon calls here, so every rule is easy to test on its own.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from rich.markup import escape as rich_escape
from rich.text import Text

# one rule for the CLI and the TUI
from zcord.client import change_targets as change_targets
from zcord.client import describe_origin as describe_origin
from zcord.client import human_size as human_size
from zcord.client import invisible_marked as invisible_marked
from zcord.client import json_shown as json_shown
from zcord.client import parse_instant as parse_instant
from zcord.client import parse_local as parse_local
from zcord.client import shown as shown

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


def diff_mode(side_by_side: bool) -> Text:
    """`diff unified (v: side by side)`: how diffs are shown now, and what `v` switches to
    (a bare `v: unified` read as if `v` made them unified)."""
    now, other = ("side by side", "unified") if side_by_side else ("unified", "side by side")
    return Text.assemble(("diff ", "dim"), (now, "bold"), (f" (v: {other})", "dim"))
