"""Pure helpers that turn daemon data into text: times, labels, affinity bars, term lists.

No Textual and no daemon calls here, so every rule is easy to test on its own.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from rich.text import Text

# one rule for the CLI and the TUI
from zcord.client import change_targets, human_size, parse_instant, parse_local  # noqa: F401

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
               marked: bool = False, child_count: int = 0) -> Text:
    """The tree's line for one memory."""
    label = Text(no_wrap=True, overflow="ellipsis")
    if marked:
        label.append("✓ ", style="bold magenta")
    if important:
        label.append("★ ", style="bold yellow")
    if superseded:
        label.append(SUPERSEDED_MARK, style="bold red")
    label.append(one_line(title), style="dim" if superseded else "")
    label.append(f" {node_id}", style="dim")
    if superseded:
        label.append(" superseded", style="italic red")
    if child_count:
        label.append(f" ({child_count})", style="dim cyan")
    return label


def one_line(text: str | None, limit: int = 200) -> str:
    """First line of text, trimmed to `limit` characters."""
    if not text:
        return ""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[:limit - 1] + "…"


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def compact_json(value: Any, limit: int = 1000) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return text if len(text) <= limit else text[:limit - 1] + "…"
