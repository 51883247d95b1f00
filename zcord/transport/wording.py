"""Words for operators (zcor-tui and `zcor`): zcord's refusals reworded, sizes.

The daemon writes its messages for the model: they name the tool to call next ("Use
zcor_memory_query or zcor_memory_children to find ids", "call only the tools you were
given"). An operator needs the same fact with their own next step. The daemon's text is
left as the model needs it and names its advice in the error's data (`{"hint": key,
"advice": text}`, zcord.core.errors.HINTS); these words, keyed on the hint, swap only that
text, exactly as it appears in the message. The key decides; a message is never searched
for advice it might hold.
"""

from __future__ import annotations

from typing import Any, Literal

from .shown import invisible_marked

Where = Literal["tui", "cli"]

OPERATOR_ADVICE: dict[str, tuple[str, str]] = {
    "find_ids": ("It does not exist or was deleted; Search (2) finds memories by their words.",
                 "It does not exist or was deleted; `zcor call zcor_memory_query '{\"keywords\": [\"…\"]}'` finds ids."),
    "find_person": ("Relationships (4) lists everyone, and n there creates one.",
                    "`zcor call zcor_relationship_query '{}'` lists them."),
    "list_backups": ("the Backups screen lists the files there.", "`zcor backup --list` lists them."),
    "unlink_first": ("clear their linked memory in Relationships (4) first",
                     "clear their memoryNodeId first (`zcor call zcor_relationship_write`)"),
    "force_revert": ("Force writes the old values anyway, as a new change.",
                     "`--force` writes the old values anyway, as a new change (`--preview` shows them)."),
    "undeclared_tool": ("zcord has no tool {tool}.", "zcord has no tool {tool}; `zcor tools` lists them."),
}
"""hint key → the operator's next step (in the TUI, in the CLI); TOOL stands for the tool
the hint names (its `tool` field, quoted as the daemon quotes it)."""

TOOL = "{tool}"


def for_operator(code: str, message: str, where: Where = "tui", data: Any = None) -> str:
    """The message with advice meant for the model replaced by the operator's next step.

    data: the error's data (ToolError.data); its hint names the advice, and the advice is
    the exact text to swap. An error without a hint is shown as it is.
    """
    hint = data.get("hint") if isinstance(data, dict) else None
    said = data.get("advice") if isinstance(data, dict) else None
    if not isinstance(hint, str) or hint not in OPERATOR_ADVICE or not isinstance(said, str):
        return message
    words = OPERATOR_ADVICE[hint][0 if where == "tui" else 1]
    if TOOL in words:
        if "tool" not in data:
            return message
        words = words.replace(TOOL, repr(data["tool"]))
    return message.replace(said, words)


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
