"""Before/after views of one history change: unified or side by side, changed words lit.

Built on difflib. Text is split into tokens (ASCII words, runs of spaces, and every other
character on its own, so Chinese is compared character by character) and the changed
tokens are highlighted. Pure functions returning Rich renderables; no Textual here.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from zcord.client import shown

REMOVED = "bold #ffffff on #8b1a1a"
ADDED = "bold #000000 on #5fd75f"
REMOVED_LINE = "red"
ADDED_LINE = "green"
TOKEN = re.compile(r"[A-Za-z0-9_]+|[ \t]+|\n|.", re.S)
NOTHING = "∅"
TIME_FIELDS = ("createdAt", "updatedAt")


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


def as_text(value: Any) -> str:
    """A field value as diffable text: strings as they are (terminal controls made visible),
    lists one-per-comma, None as ∅."""
    return shown(_as_text(value))


def _as_text(value: Any) -> str:
    if value is None:
        return NOTHING
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        return ", ".join(str(v) for v in value) if value else "[]"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, ensure_ascii=False, indent=1)


def word_diff(before: str, after: str) -> tuple[Text, Text]:
    """Both texts whole, with removed tokens lit in the first and added ones in the second."""
    a, b = tokens(before), tokens(after)
    left, right = Text(), Text()
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            left.append("".join(a[i1:i2]))
            right.append("".join(b[j1:j2]))
        else:
            if i2 > i1:
                left.append("".join(a[i1:i2]), style=REMOVED)
            if j2 > j1:
                right.append("".join(b[j1:j2]), style=ADDED)
    return left, right


def unified(before: str, after: str, context: int = 2) -> Text:
    """A line diff: `- ` / `+ ` lines with the changed words lit, `  ` for context lines."""
    a, b = before.splitlines() or [""], after.splitlines() or [""]
    out = Text()

    def line(prefix: str, body: Text | str, style: str = "") -> None:
        out.append(prefix, style=style or "dim")
        out.append(body if isinstance(body, Text) else Text(body, style=style))
        out.append("\n")

    opcodes = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    for n, (op, i1, i2, j1, j2) in enumerate(opcodes):
        if op == "equal":
            chunk = a[i1:i2]
            if len(chunk) > 2 * context + 1:
                head = chunk[:context] if n > 0 else []
                tail = chunk[-context:] if n < len(opcodes) - 1 else []
                for text in head:
                    line("  ", text)
                out.append(f"  … {len(chunk) - len(head) - len(tail)} unchanged lines\n", style="dim italic")
                for text in tail:
                    line("  ", text)
            else:
                for text in chunk:
                    line("  ", text)
            continue
        old, new = a[i1:i2], b[j1:j2]
        if op == "replace":
            # pair the lines up so the changed words inside them can be lit
            for k in range(max(len(old), len(new))):
                if k < len(old) and k < len(new):
                    left, right = word_diff(old[k], new[k])
                    line("- ", _tint(left, REMOVED_LINE), REMOVED_LINE)
                    line("+ ", _tint(right, ADDED_LINE), ADDED_LINE)
                elif k < len(old):
                    line("- ", old[k], REMOVED_LINE)
                else:
                    line("+ ", new[k], ADDED_LINE)
        else:
            for text in old:
                line("- ", text, REMOVED_LINE)
            for text in new:
                line("+ ", text, ADDED_LINE)
    out.rstrip()
    return out


def _tint(text: Text, style: str) -> Text:
    """Colour the unlit parts of a word-diffed line."""
    out = Text(style=style)
    out.append_text(text)
    return out


def changed_fields(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    keys = list(before)
    keys += [k for k in after if k not in before]
    return [k for k in keys if before.get(k) != after.get(k)]


def record_text(record: dict[str, Any]) -> Text:
    """A whole record (a node or a relationship), one `field: value` per line."""
    out = Text()
    for key, value in record.items():
        out.append(f"{key}: ", style="bold")
        out.append(as_text(value))
        out.append("\n")
    out.rstrip()
    return out


def fields_diff(before: dict[str, Any], after: dict[str, Any], *, side_by_side: bool) -> RenderableType:
    """The fields that differ between two records, unified or side by side."""
    fields = changed_fields(before, after)
    if not fields:
        return Text("no field changed", style="dim")
    if side_by_side:
        table = Table(expand=True, show_lines=True, padding=(0, 1), header_style="bold")
        table.add_column("field", no_wrap=True, ratio=1)
        table.add_column("before", ratio=4)
        table.add_column("after", ratio=4)
        for key in fields:
            left, right = word_diff(as_text(before.get(key)), as_text(after.get(key)))
            table.add_row(Text(key, style="bold"), left, right)
        return table
    parts: list[RenderableType] = []
    for key in fields:
        parts.append(Text(key, style="bold underline"))
        parts.append(unified(as_text(before.get(key)), as_text(after.get(key))))
    return Group(*parts)


def change_view(change: dict[str, Any], *, side_by_side: bool) -> RenderableType:
    """One history change: a diff for updates, the whole record for creates and deletes."""
    kind = str(change.get("kind", ""))
    before, after = change.get("before"), change.get("after")
    parts: list[RenderableType] = []
    head = Text()
    # no change counter here: operators name changes by their operation's number (History's #)
    head.append(kind, style="bold cyan")
    if change.get("target"):
        head.append(shown(f" · {change['target']}", lines=False), style="bold")
    parts.append(head)
    if kind.endswith(".delete") and isinstance(before, dict):
        parts.append(Text("Deleted. The full record before the delete:", style="bold red"))
        parts.append(record_text(before))
    elif kind.endswith(".create") and isinstance(after, dict) and before is None:
        parts.append(Text("Created:", style="bold green"))
        parts.append(record_text(after))
    elif isinstance(before, dict) and isinstance(after, dict):
        parts.append(fields_diff(before, after, side_by_side=side_by_side))
    elif before is not None or after is not None:
        left, right = as_text(before), as_text(after)
        if side_by_side:
            table = Table(expand=True, padding=(0, 1), header_style="bold")
            table.add_column("before", ratio=1)
            table.add_column("after", ratio=1)
            table.add_row(*word_diff(left, right))
            parts.append(table)
        else:
            parts.append(unified(left, right))
    receipt = change.get("receipt")
    if isinstance(receipt, dict):
        replaced = receipt.get("replaced") or {}
        note = Text("Receipt: ", style="bold yellow")
        if replaced:
            note.append(shown(f"{replaced.get('id')} ({replaced.get('title')}) is no longer important. "))
        note.append(shown(receipt.get("reminder", "")))
        parts.append(note)
    return Group(*parts)
