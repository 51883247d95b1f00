"""Before/after views of one history change: unified or side by side, changed words lit.

Built on difflib. Text is split into tokens (ASCII words, runs of spaces, and every other
character on its own, so Chinese is compared character by character) and the changed
tokens are highlighted. Pure functions returning Rich renderables; no Textual here.

Bounded (issue 33): difflib's matching takes time in the product of the two sides' lengths,
so each view gets a `Budget` of work (MAX_WORK token pairs) and time (MAX_SECONDS). Lines
are compared first; a pair of changed lines is compared word by word when the budget allows
(else shown whole, still marked - and +); past the budget the view says "diff too large —
showing before/after" and shows both versions whole. Common heads and tails are cut off
before matching, so a small edit of a long text stays cheap. The screens build large views
in a worker thread (`heavy`), never on the UI thread.
"""

from __future__ import annotations

import difflib
import json
import re
import time
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


MAX_WORK = 400_000
"""Token pairs one view may compare (about a tenth of a second of difflib)."""
MAX_SECONDS = 0.5
TOO_LARGE = "diff too large — showing before/after"
HEAVY_CHARS = 4_000
"""A view over this many characters of text is built off the UI thread (`heavy`)."""


class DiffTooLarge(Exception):
    """The view's budget is spent: show before and after whole instead."""


class Budget:
    """What one view may still spend on matching: token pairs and time."""

    def __init__(self, work: int = MAX_WORK, seconds: float = MAX_SECONDS):
        self.work = work
        self.deadline = time.monotonic() + seconds

    def spend(self, a: int, b: int) -> bool:
        """Take a × b from the budget; False (taking nothing) when it does not fit or time is up."""
        cost = a * b
        if cost > self.work or time.monotonic() > self.deadline:
            return False
        self.work -= cost
        return True


def opcodes(a: list[str], b: list[str], budget: Budget) -> list[tuple[str, int, int, int, int]]:
    """difflib's opcodes for a → b, the common head and tail matched without difflib;
    DiffTooLarge when the middle does not fit the budget."""
    head = 0
    while head < len(a) and head < len(b) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < len(a) - head and tail < len(b) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    mid_a, mid_b = a[head:len(a) - tail], b[head:len(b) - tail]
    out: list[tuple[str, int, int, int, int]] = []
    if head:
        out.append(("equal", 0, head, 0, head))
    if mid_a and mid_b:
        if not budget.spend(len(mid_a), len(mid_b)):
            raise DiffTooLarge
        for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=False).get_opcodes():
            out.append((op, i1 + head, i2 + head, j1 + head, j2 + head))
    elif mid_a:
        out.append(("delete", head, len(a) - tail, head, head))
    elif mid_b:
        out.append(("insert", head, head, head, len(b) - tail))
    if tail:
        out.append(("equal", len(a) - tail, len(a), len(b) - tail, len(b)))
    return out


def heavy(*texts: Any) -> bool:
    """Whether a view of these values (strings, records, changes) is large enough to be
    built off the UI thread."""
    return len(json.dumps(texts, ensure_ascii=False, default=str)) > HEAVY_CHARS


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


def word_diff(before: str, after: str, budget: Budget | None = None) -> tuple[Text, Text]:
    """Both texts whole, with removed tokens lit in the first and added ones in the second;
    DiffTooLarge past the budget."""
    a, b = tokens(before), tokens(after)
    left, right = Text(), Text()
    for op, i1, i2, j1, j2 in opcodes(a, b, budget or Budget()):
        if op == "equal":
            left.append("".join(a[i1:i2]))
            right.append("".join(b[j1:j2]))
        else:
            if i2 > i1:
                left.append("".join(a[i1:i2]), style=REMOVED)
            if j2 > j1:
                right.append("".join(b[j1:j2]), style=ADDED)
    return left, right


SHOWN_LINES = 400
SHOWN_CHARS = 40_000


def _shown_part(text: str) -> Text:
    """A version as shown past the budget: its first SHOWN_LINES lines and SHOWN_CHARS
    characters, and how much more there is."""
    lines = text.split("\n")
    head = "\n".join(lines[:SHOWN_LINES])[:SHOWN_CHARS]
    out = Text(head)
    if len(head) < len(text):
        out.append(f"\n… {len(text) - len(head):,} more characters (zcor history shows the whole record)",
                   style="dim italic")
    return out


def too_large(before: str, after: str) -> RenderableType:
    """Both versions, under a note that the diff was too large."""
    return Group(Text(TOO_LARGE, style="bold yellow"), Text("before:", style="bold"),
                 _tint(_shown_part(before), REMOVED_LINE), Text("after:", style="bold"),
                 _tint(_shown_part(after), ADDED_LINE))


def unified(before: str, after: str, context: int = 2, budget: Budget | None = None) -> Text:
    """A line diff: `- ` / `+ ` lines with the changed words lit (when the budget allows),
    `  ` for context lines; DiffTooLarge when even the lines do not fit the budget."""
    budget = budget or Budget()
    a, b = before.splitlines() or [""], after.splitlines() or [""]
    out = Text()

    def line(prefix: str, body: Text | str, style: str = "") -> None:
        out.append(prefix, style=style or "dim")
        out.append(body if isinstance(body, Text) else Text(body, style=style))
        out.append("\n")

    ops = opcodes(a, b, budget)
    for n, (op, i1, i2, j1, j2) in enumerate(ops):
        if op == "equal":
            chunk = a[i1:i2]
            if len(chunk) > 2 * context + 1:
                head = chunk[:context] if n > 0 else []
                tail = chunk[-context:] if n < len(ops) - 1 else []
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
                    try:
                        left, right = word_diff(old[k], new[k], budget)
                    except DiffTooLarge:  # the lines whole, unlit
                        out.append(f"  {TOO_LARGE}\n", style="yellow")
                        line("- ", old[k], REMOVED_LINE)
                        line("+ ", new[k], ADDED_LINE)
                        continue
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


def fields_diff(before: dict[str, Any], after: dict[str, Any], *, side_by_side: bool,
                budget: Budget | None = None) -> RenderableType:
    """The fields that differ between two records, unified or side by side; a field whose
    diff does not fit the budget is shown before/after whole, under a note."""
    budget = budget or Budget()
    fields = changed_fields(before, after)
    if not fields:
        return Text("no field changed", style="dim")
    if side_by_side:
        table = Table(expand=True, show_lines=True, padding=(0, 1), header_style="bold")
        table.add_column("field", no_wrap=True, ratio=1)
        table.add_column("before", ratio=4)
        table.add_column("after", ratio=4)
        for key in fields:
            old, new = as_text(before.get(key)), as_text(after.get(key))
            try:
                left, right = word_diff(old, new, budget)
                name = Text(key, style="bold")
            except DiffTooLarge:
                left, right = _tint(_shown_part(old), REMOVED_LINE), _tint(_shown_part(new), ADDED_LINE)
                name = Text.assemble((key, "bold"), ("\n" + TOO_LARGE, "yellow"))
            table.add_row(name, left, right)
        return table
    parts: list[RenderableType] = []
    for key in fields:
        parts.append(Text(key, style="bold underline"))
        old, new = as_text(before.get(key)), as_text(after.get(key))
        try:
            parts.append(unified(old, new, budget=budget))
        except DiffTooLarge:
            parts.append(too_large(old, new))
    return Group(*parts)


def change_view(change: dict[str, Any], *, side_by_side: bool, budget: Budget | None = None) -> RenderableType:
    """One history change: a diff for updates, the whole record for creates and deletes
    (bounded: see the module docstring)."""
    budget = budget or Budget()
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
        parts.append(fields_diff(before, after, side_by_side=side_by_side, budget=budget))
    elif before is not None or after is not None:
        left, right = as_text(before), as_text(after)
        try:
            if side_by_side:
                table = Table(expand=True, padding=(0, 1), header_style="bold")
                table.add_column("before", ratio=1)
                table.add_column("after", ratio=1)
                table.add_row(*word_diff(left, right, budget))
                parts.append(table)
            else:
                parts.append(unified(left, right, budget=budget))
        except DiffTooLarge:
            parts.append(too_large(left, right))
    receipt = change.get("receipt")
    if isinstance(receipt, dict):
        replaced = receipt.get("replaced") or {}
        note = Text("Receipt: ", style="bold yellow")
        if replaced:
            note.append(shown(f"{replaced.get('id')} ({replaced.get('title')}) is no longer important. "))
        note.append(shown(receipt.get("reminder", "")))
        parts.append(note)
    return Group(*parts)
