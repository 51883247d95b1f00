"""Import and Export on the Backups screen (issue 36): a lore file in after a preview of
exactly what it creates, the Memory out as a lorebook, World Info, JSONL or Markdown.

The file is read here and sent in as many messages as it needs (zcord.client.import_steps);
the import is one operation, which History reverts as one."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from zcord.client import ClientError, arun_steps, export_steps, import_steps, write_export

from .dialogs import ConfirmDialog, PromptDialog

FORMATS = {"worldinfo": "SillyTavern World Info", "card": "character card", "lorebook": "lorebook",
           "jsonl": "zcor JSONL export"}
EXPORTS = {"jsonl": "zcor-export.jsonl", "worldinfo": "zcor-worldinfo.json", "lorebook": "zcor-lorebook.json",
           "markdown": "zcor-notes"}
SHOWN_ITEMS = 12


def import_text(answer: dict[str, Any]) -> str:
    """The question the operator confirms: what importing the file creates and changes."""
    lines = [f"Import {answer['name']} ({FORMATS.get(answer['format'], answer['format'])})?",
             f"{answer['created']} to create, {answer['updated']} to update, {answer['unchanged']} unchanged"
             + (f", {len(answer['skipped'])} skipped" if answer.get("skipped") else ""), ""]
    items = [i for i in answer.get("items") or [] if i["action"] != "unchanged"]
    for item in items[:SHOWN_ITEMS]:
        lines.append(f"  {item['action']:<7} {item.get('id') or '':<7} {item['title'][:50]}"
                     + (" *" if item.get("important") else "")
                     + (f"  (under {item['parentId']})" if item.get("parentId") else ""))
    unlisted = answer.get("itemsTotal", 0) - len(answer.get("items") or [])  # past what zcord lists
    if len(items) + unlisted > SHOWN_ITEMS:
        lines.append(f"  … and {len(items) + unlisted - SHOWN_ITEMS:,} more")
    for s in (answer.get("skipped") or [])[:4]:
        lines.append(f"  skipped {s['entry']}: {s['reason']}")
    if answer.get("notMarked"):
        lines.append(f"  {len(answer['notMarked'])} constant entr{'y' if len(answer['notMarked']) == 1 else 'ies'} "
                     f"not marked important (the list holds 5)")
    if answer.get("unkept"):
        lines.append("  Not kept: " + ", ".join(f"{k} ({n})" for k, n in answer["unkept"].items()))
    lines += ["", "One operation: History reverts it as one (origin " + answer["origin"] + ")."]
    return "\n".join(lines)


async def _run(app: Any, steps: Any, what: str) -> Any:
    if not app.client.connected:
        app.notify("zcord is not connected; the status line shows when it is back", severity="warning")
        return None
    try:
        return await arun_steps(app.client, steps)
    except ClientError as e:
        app.show_error(e, what)
        return None


async def import_flow(app: Any) -> bool:
    """Ask for a file, preview its import, import it on yes; True when something was imported."""
    text = await app.push_screen_wait(PromptDialog(
        "Import which file? A SillyTavern World Info .json, a character card (.json or .png), a lorebook_v3 "
        "or a zcor .jsonl export.", placeholder="~/SillyTavern/data/default-user/worlds/world.json"))
    if not text:
        return False
    path = Path(text).expanduser()
    try:
        raw = await asyncio.to_thread(path.read_bytes)
    except OSError as e:
        app.notify(f"Cannot read {path}: {e.strerror or e}", severity="error")
        return False
    preview = await _run(app, import_steps(raw, path.name, preview=True), "import")
    if preview is None:
        return False
    if not await app.push_screen_wait(ConfirmDialog(import_text(preview), yes="Import")):
        return False
    result = await _run(app, import_steps(raw, path.name), "import")
    if result is None:
        return False
    app.notify(f"Imported {path.name}: {result['created']} created, {result['updated']} updated, "
               f"{result['unchanged']} unchanged (operation {result['seq']}).", title="Imported", timeout=15)
    persona = result.get("persona")
    if persona and await app.push_screen_wait(ConfirmDialog(
            "The card also proposes this PERSONA.md (its description, personality and scenario):\n\n"
            f"{persona[:1500]}\n\nReplace PERSONA.md with it?", yes="Replace PERSONA.md")):
        if await app.rpc(app.client.persona_set(persona)) is not None:
            app.notify("PERSONA.md replaced by the card's text.")
    return True


async def export_flow(app: Any) -> None:
    """Ask for a format and a path, then export."""
    fmt = await app.push_screen_wait(PromptDialog(
        "Export as jsonl (zcor, everything), worldinfo (SillyTavern), lorebook (lorebook_v3) or markdown "
        "(a folder, one file per memory)?", value="jsonl"))
    if not fmt:
        return
    fmt = fmt.strip().lower()
    if fmt not in EXPORTS:
        app.notify(f"{fmt!r} is not a format: jsonl, worldinfo, lorebook or markdown", severity="error")
        return
    out = await app.push_screen_wait(PromptDialog(
        "Write the folder:" if fmt == "markdown" else "Write the file:", value=str(Path.home() / EXPORTS[fmt])))
    if not out:
        return
    got = await _run(app, export_steps(fmt), "export")
    if got is None:
        return
    summary, files = got
    try:
        await asyncio.to_thread(write_export, fmt, files, out)
    except (OSError, ValueError) as e:
        app.notify(f"Cannot write {out}: {getattr(e, 'strerror', None) or e}", severity="error")
        return
    app.notify(f"Exported {summary['memories']} memories as {fmt} to {out}.", title="Exported", timeout=15)
