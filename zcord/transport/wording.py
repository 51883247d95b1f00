"""Words for operators (zcor-tui and `zcor`): zcord's refusals reworded, sizes.

The daemon writes its messages for the model: they name the tool to call next ("Use
zcor_memory_query or zcor_memory_children to find ids", "call only the tools you were
given"). An operator needs the same fact with their own next step. The daemon's text is
left as the model needs it; these rules, keyed on the error code, swap only the advice.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from .shown import invisible_marked

Where = Literal["tui", "cli"]

# (code, the model's advice, the operator's advice in the TUI, and in the CLI); \1… refer to the groups
RULES: list[tuple[str, re.Pattern[str], str, str]] = [
    ("not_found", re.compile(r"\s*Use zcor_memory_query or zcor_memory_children to find ids\."),
     " It does not exist or was deleted; Search (2) finds memories by their words.",
     " It does not exist or was deleted; `zcor call zcor_memory_query '{\"keywords\": [\"…\"]}'` finds ids."),
    ("not_found", re.compile(r"\s*Use zcor_relationship_query to search by name, or zcor_relationship_write to "
                             r"create one\."),
     " Relationships (4) lists everyone, and n there creates one.",
     " `zcor call zcor_relationship_query '{}'` lists them."),
    ("not_found", re.compile(r"; zcor_memory_backup returns names that can be restored\."),
     "; the Backups screen lists the files there.",
     "; `zcor backup --list` lists them."),
    ("conflict", re.compile(r"unlink them with zcor_relationship_write\(memoryNodeId=null\) first"),
     "clear their linked memory in Relationships (4) first",
     "clear their memoryNodeId first (`zcor call zcor_relationship_write`)"),
    ("unknown_tool", re.compile(r"Tool ('.*') is not declared in this request; call only the tools you were "
                                r"given\."),
     r"zcord has no tool \1.",
     r"zcord has no tool \1; `zcor tools` lists them."),
    ("conflict", re.compile(r" Pass force to write the old values anyway, as a new change\."),
     " Force writes the old values anyway, as a new change.",
     " `--force` writes the old values anyway, as a new change (`--preview` shows them)."),
]


def for_operator(code: str, message: str, where: Where = "tui") -> str:
    """The message with advice meant for the model replaced by the operator's next step."""
    for rule_code, pattern, tui, cli in RULES:
        if rule_code == code:
            message = pattern.sub(tui if where == "tui" else cli, message)
    return message


def human_size(n: int) -> str:
    """`812 B`, `12.4 KB`, `3.1 MB` (powers of 1024)."""
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


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
