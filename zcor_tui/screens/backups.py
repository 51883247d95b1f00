"""Backups: the files in backups/ with their time and size, `c` to write one, and restore
with a preview of what would change (`zcor/backups/preview`) before the operator confirms.
The restore itself is `zcor_memory_restore`, which first backs up the current state.
`i` imports a lore file and `e` exports the Memory (screens/interop.py)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from ..format import human_size, plural, when
from ..messages import MemoryChanged
from ..widgets.rows import add_columns, cursor_key, move_to, row_table
from .base import ZcorScreen
from .dialogs import ConfirmDialog
from .interop import export_flow, import_flow


def counts_line(label: str, part: dict[str, Any]) -> str:
    """`Memories   12 now → 10 after: 1 added, 3 removed, 2 changed`."""
    return (f"{label:<14}{part['now']:,} now → {part['after']:,} after: {part['added']:,} added, "
            f"{part['removed']:,} removed, {part['changed']:,} changed")


def preview_text(item: dict[str, Any], preview: dict[str, Any]) -> str:
    """The question the operator confirms: what restoring this backup changes."""
    important = preview["important"]
    marks = (f"{', '.join(important['now']) or 'none'} → {', '.join(important['after']) or 'none'}"
             if important["changed"] else "unchanged")
    return "\n".join([
        f"Restore {item['backupFile']}",
        f"written {when(item.get('modifiedAt'))}, {human_size(item.get('size', 0))}?",
        "",
        counts_line("Memories", preview["memories"]),
        counts_line("Relationships", preview["relationships"]),
        f"{'Important':<14}{marks}",
        "",
        "zcord backs up the current state first; restoring that file undoes this.",
    ])


class BackupsScreen(ZcorScreen):
    MODE = "backups"
    MAIN = "#backups"
    HELP = "Backups in backups/: write one, or restore one after a preview of what changes"
    WATCHES = ("state.",)
    BINDINGS = [
        Binding("c", "create", "Create", id="backups.create", tooltip="Write a backup of the Memory now"),
        Binding("enter,R", "restore", "Restore…", id="backups.restore",
                tooltip="Restore the selected backup (shows what would change and asks first)"),
        Binding("r", "reload", "Refresh", id="backups.reload", tooltip="List the files again"),
        Binding("i", "import_file", "Import…", id="backups.import",
                tooltip="Import a World Info file, character card, lorebook or zcor JSONL (after a preview)"),
        Binding("e", "export", "Export…", id="backups.export",
                tooltip="Export the Memory as JSONL, SillyTavern World Info, lorebook_v3 or Markdown"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.items: dict[str, dict[str, Any]] = {}

    def compose_body(self) -> ComposeResult:
        yield Static("", id="backups-summary", classes="summary")
        yield row_table("backups")

    def on_mount(self) -> None:
        table = self.query_one("#backups", DataTable)
        add_columns(table, [("Written", "time", 26), ("Size", "size", 9), ("By", "by", 8), ("File", "file", None)])
        table.focus()

    def on_screen_resume(self) -> None:
        if self.app.connected:
            self.fetch()  # the bot's backups change no memory, so no notification tells of them

    def reload(self, changed: MemoryChanged | None = None) -> None:
        self.fetch()

    def action_reload(self) -> None:
        self.fetch()

    @work(exclusive=True, group="backups")
    async def fetch(self, select: str | None = None) -> None:
        items = await self.app.rpc(self.app.client.backups())
        table = self.query_one("#backups", DataTable)
        summary = self.query_one("#backups-summary", Static)
        if items is None:
            table.clear()
            self.items = {}
            summary.update(Text("The backups could not be listed (see the message).", style="bold red"))
            return
        items.sort(key=lambda b: (b.get("modifiedAt") or "", b["backupFile"]), reverse=True)
        keep = select or self._selected()
        table.clear()
        self.items = {b["backupFile"]: dict(b) for b in items}
        for b in items:
            table.add_row(when(b.get("modifiedAt")), Text(human_size(b.get("size", 0)), justify="right"),
                          Text("bot", style="yellow") if b.get("bot") else Text("operator", style="dim"),
                          Text(b["backupFile"]), key=b["backupFile"])
        move_to(table, keep)
        if not items:
            summary.update(Text("No backups yet. c writes one.", style="italic"))
        else:
            summary.update(Text.assemble((plural(len(items), "backup"), "bold"), " · newest first",
                                         ("  c create · Enter restore… · r refresh · i import… · e export…", "dim")))

    def _selected(self) -> str | None:
        return cursor_key(self.query_one("#backups", DataTable)) or None

    @work(exclusive=True, group="action")
    async def action_create(self) -> None:
        result = await self.app.tool(self.app.client.zcor_memory_backup({}))
        if result:
            self.notify(f"Backup written: {result['backupFile']}.")
            self.fetch(select=result["backupFile"])

    @work(exclusive=True, group="action")
    async def action_import_file(self) -> None:
        await import_flow(self.app)

    @work(exclusive=True, group="action")
    async def action_export(self) -> None:
        await export_flow(self.app)

    @on(DataTable.RowSelected, "#backups")
    def _row_selected(self) -> None:
        self.action_restore()

    @work(exclusive=True, group="action")
    async def action_restore(self) -> None:
        name = self._selected()
        if name is None:
            self.notify("No backup to restore; c writes one.", severity="warning")
            return
        preview = await self.app.rpc(self.app.client.backup_preview(name))
        if preview is None:
            return
        if not await self.app.push_screen_wait(ConfirmDialog(preview_text(self.items[name], dict(preview)),
                                                             yes="Restore")):
            return
        result = await self.app.tool(self.app.client.zcor_memory_restore({"backupFile": name}))
        if result:
            self.notify(f"Restored {name}. The state before it is saved as {result['backupFile']}.",
                        title="Restored", timeout=15)
            self.fetch(select=name)
