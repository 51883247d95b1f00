"""Relationships: search, create, edit and delete relationship records; affinity as a
signed bar; link a person memory (picked by search or from Browse) and jump to it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, cast

from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Input, Static

from zcord.client import (
    RelQueryArgs,
    RelWriteArgs,
    ToolError,
    affinity_series,
    for_operator,
    sparkline,
    sparkline_scale,
)

from ..format import (
    affinity_bar,
    invisible_marked,
    one_line,
    plain,
    shown,
    shown_id,
    split_keywords,
    when,
    when_short,
)
from ..messages import MemoryChanged, NodeRequested
from ..widgets.rows import add_columns, cursor_key, move_to, row_table
from .base import ZcorScreen
from .dialogs import ConfirmDialog, NodePicker, RelationshipForm

PAGE_SIZE = 100


def series_text(points: list[dict[str, Any]]) -> Text:
    """`Affinity over time ▆▄▂` and one line per change: when, the value as a bar, who, why."""
    out = Text()
    out.append("Affinity over time ", style="bold")
    if not points:
        out.append("(no change in the history)", style="dim")
        return out
    values = [p["affinity"] for p in points]
    out.append(sparkline(values), style="cyan")
    out.append(f"  {sparkline_scale(values)} · {len(points)} change{'s' if len(points) != 1 else ''}, oldest first",
               style="dim")
    for p in points:
        out.append(f"\n{when_short(p.get('at'))}  ", style="dim")
        if p.get("deleted"):
            out.append("deleted", style="red")
            continue
        out.append_text(affinity_bar(p.get("affinity") or 0, half=5))
        out.append(f"  {p.get('actor') or ''}  ", style="magenta" if p.get("actor") == "model" else "dim")
        out.append(shown(p.get("reason") or "", lines=False))
    return out


class RelationshipsScreen(ZcorScreen):
    MODE = "relationships"
    MAIN = "#rels"
    HELP = "People the persona knows: affinity, reason, linked memory"
    WATCHES = ("relationship.", "node.", "state.")
    BINDINGS = [
        Binding("n", "new", "New", id="rel.new", tooltip="Create a relationship record"),
        Binding("e", "edit", "Edit", id="rel.edit", tooltip="Edit the selected record"),
        Binding("d,delete", "delete", "Delete", id="rel.delete", tooltip="Delete the selected record"),
        Binding("l", "link", "Link", id="rel.link", tooltip="Link the record to a person memory"),
        Binding("u", "unlink", "Unlink", id="rel.unlink", tooltip="Remove the link to a memory"),
        Binding("o", "open", "Open node", id="rel.open", tooltip="Show the linked memory in Browse"),
        Binding("O", "revert_origin", "Undo person's changes", show=False, id="rel.revert_origin",
                tooltip="Undo everything this person (their personId as a chat sender) caused: preview, then confirm"),
        Binding("F", "forget", "Forget person", show=False, id="rel.forget",
                tooltip="Erase this person from the Memory and every file under it: preview, then confirm"),
        Binding("t", "trust", "Trust…", show=False, id="rel.trust",
                tooltip="Set the trust level of this person as a chat sender (their personId)"),
        Binding("ctrl+n", "page(1)", "Next page", show=False, id="rel.next", tooltip="More records"),
        Binding("ctrl+b", "page(-1)", "Prev page", show=False, id="rel.prev", tooltip="Previous records"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.rels: dict[str, dict[str, Any]] = {}
        self.page_offset = 0
        self.next_offset: int | None = None
        self.selected: str | None = None

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="rel-form", classes="form-bar"):
            yield Input(placeholder="search names, aliases, relationship, reason", id="q")
        yield Static("", id="rel-summary", classes="summary")
        yield row_table("rels")
        with VerticalScroll(id="rel-scroll"):
            yield Static("", id="rel-detail")
            yield Static("", id="rel-series")

    def on_mount(self) -> None:
        table = self.query_one("#rels", DataTable)
        add_columns(table, [("Person", "person", None),  # as wide as the longest id: ids are never cut
                            ("Name", "name", 10), ("Affinity", "affinity", 25),
                            ("Relationship", "relationship", 18), ("Memory", "memory", None)])
        table.focus()

    def reload(self, changed: MemoryChanged | None = None) -> None:
        self.fetch(self.page_offset, delay=0.1 if changed else 0.0)

    @on(Input.Changed, "#q")
    def _typed(self) -> None:
        self.fetch(0, delay=0.3)

    @on(Input.Submitted, "#q")
    def _submitted(self) -> None:
        self.fetch(0)
        self.query_one("#rels", DataTable).focus()

    @work(exclusive=True, group="relationships")
    async def fetch(self, offset: int = 0, delay: float = 0.0) -> None:
        if delay:
            await asyncio.sleep(delay)
        args: dict[str, Any] = {"limit": PAGE_SIZE, "offset": offset}
        keywords = split_keywords(self.query_one("#q", Input).value)
        if keywords:
            args["keywords"] = keywords
        page, err = await self.app.try_tool(self.app.client.zcor_relationship_query(cast(RelQueryArgs, args)))
        table = self.query_one("#rels", DataTable)
        if page is None:  # no rows of the earlier query under the error: they would pass for its answer
            table.clear()
            self.rels, self.selected, self.page_offset, self.next_offset = {}, None, 0, None
            message = for_operator(err.code, err.message, data=err.data) if isinstance(err, ToolError) else str(err)
            self.query_one("#rel-summary", Static).update(Text(f"The query failed: {message}", style="bold red"))
            self.query_one("#rel-detail", Static).update("")
            return
        self.page_offset, self.next_offset = offset, page.get("nextOffset")
        keep = self.selected
        table.clear()
        self.rels = {}
        for rel in page["items"]:
            self.rels[rel["personId"]] = rel
            node = rel.get("memoryNodeId")
            table.add_row(shown_id(rel["personId"]), Text(one_line(rel.get("name"), 60)),
                          affinity_bar(rel.get("affinity", 0)), Text(one_line(rel.get("relationship"), 60)),
                          Text(node, style="cyan") if node else Text("—", style="dim"), key=rel["personId"])
        total = page["total"]
        summary = Text()
        summary.append(f"{total:,} relationship{'s' if total != 1 else ''}", style="bold")
        if total > len(page["items"]):
            summary.append(f" · showing {offset + 1}–{offset + len(page['items'])} (^n/^b pages)")
        summary.append("  n new · e edit · l link a memory · o open it", style="dim")
        self.query_one("#rel-summary", Static).update(summary)
        move_to(table, keep)
        if table.row_count:
            self._select(cursor_key(table))
        else:
            self.selected = None
            self.query_one("#rel-detail", Static).update(Text("No relationships.", style="dim italic"))

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._select(event.row_key.value)

    @on(DataTable.RowSelected)
    def _row_selected(self) -> None:
        self.action_edit()

    def _select(self, person_id: str | None) -> None:
        rel = self.rels.get(person_id or "")
        if rel is None:
            return
        self.selected = rel["personId"]
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(ratio=1)
        grid.add_row("Person", shown_id(rel["personId"]))
        grid.add_row("Name", plain(rel.get("name", "")))
        grid.add_row("Aliases", plain(" · ".join(rel.get("aliases") or [])) if rel.get("aliases")
                     else Text("—", style="dim"))
        grid.add_row("Relationship", plain(rel.get("relationship", "")))
        grid.add_row("Affinity", affinity_bar(rel.get("affinity", 0)))
        grid.add_row("Reason", plain(rel.get("reason", "")))
        node = rel.get("memoryNodeId")
        grid.add_row("Memory", Text(f"{node} (o opens it)", style="cyan") if node else Text("not linked (l links)",
                                                                                              style="dim"))
        grid.add_row("Updated", Text.assemble(when(rel.get("updatedAt")), ("  created ", "bold"),
                                              when(rel.get("createdAt"))))
        self.query_one("#rel-detail", Static).update(grid)
        self.load_series(rel["personId"], rel.get("updatedAt"))

    @work(exclusive=True, group="rel-series")
    async def load_series(self, person_id: str, updated: str | None) -> None:
        """The person's affinity over time, from the change history, under the record."""
        out = self.query_one("#rel-series", Static)
        if getattr(self, "_series_for", None) != (person_id, updated):
            out.update("")
        await asyncio.sleep(0.1)  # the cursor is still moving: read only where it rests
        versions = await self.app.rpc(self.app.client.history_versions(person_id), quiet=True)
        if self.selected != person_id:
            return
        self._series_for = (person_id, updated)
        out.update(series_text(affinity_series(versions or {})))

    def _current(self) -> dict[str, Any] | None:
        rel = self.rels.get(self.selected or "")
        if rel is None:
            self.notify("Select a relationship first.", severity="warning")
        return rel

    async def _write(self, args: dict[str, Any]) -> dict[str, Any]:
        return dict(await self.app.client.zcor_relationship_write(cast(RelWriteArgs, args)))

    def _after_write(self, result: dict[str, Any] | None) -> None:
        if result:
            self.selected = result["personId"]
            self.notify(f"{'Created' if result.get('created') else 'Saved'} {invisible_marked(result['personId'])}.")

    def action_new(self) -> None:
        self.app.push_screen(RelationshipForm(self._write), self._after_write)

    def action_edit(self) -> None:
        rel = self._current()
        if rel is not None:
            self.app.push_screen(RelationshipForm(self._write, rel), self._after_write)

    @work(exclusive=True, group="action")
    async def action_delete(self) -> None:
        rel = self._current()
        if rel is None:
            return
        if not await self.app.push_screen_wait(ConfirmDialog(
                f"Delete the relationship {invisible_marked(rel['personId'])} ({rel.get('name', '')})?\nThe history keeps a copy.",
                yes="Delete")):
            return
        if await self.app.tool(self.app.client.zcor_relationship_delete({"personId": rel["personId"]})):
            self.notify(f"Deleted {invisible_marked(rel['personId'])}.")

    def _keep_fields(self, rel: dict[str, Any]) -> dict[str, Any]:
        return {k: rel[k] for k in ("personId", "name", "relationship", "affinity", "reason")}

    @work(exclusive=True, group="action")
    async def action_link(self) -> None:
        rel = self._current()
        if rel is None:
            return
        node_id = await self.app.push_screen_wait(NodePicker(f"Link {invisible_marked(rel['personId'])} ({rel.get('name', '')}) to…"))
        if not node_id:
            return
        result = await self.app.tool(self.app.client.zcor_relationship_write(cast(RelWriteArgs, {**self._keep_fields(rel), "memoryNodeId": node_id})))
        if result:
            self.notify(f"{invisible_marked(rel['personId'])} is linked to {node_id}.")

    @work(exclusive=True, group="action")
    async def action_unlink(self) -> None:
        rel = self._current()
        if rel is None:
            return
        if not rel.get("memoryNodeId"):
            self.notify(f"{invisible_marked(rel['personId'])} is not linked to a memory.", severity="warning")
            return
        if await self.app.tool(self.app.client.zcor_relationship_write(cast(RelWriteArgs, {**self._keep_fields(rel), "memoryNodeId": None}))):
            self.notify(f"{invisible_marked(rel['personId'])} is no longer linked to {rel['memoryNodeId']}.")

    def action_open(self) -> None:
        rel = self._current()
        if rel is None:
            return
        if rel.get("memoryNodeId"):
            self.post_message(NodeRequested(rel["memoryNodeId"]))
        else:
            self.notify(f"{invisible_marked(rel['personId'])} is not linked to a memory.", severity="warning")

    def action_page(self, step: int) -> None:
        if step > 0 and self.next_offset is not None:
            self.fetch(self.next_offset)
        elif step < 0 and self.page_offset > 0:
            self.fetch(max(0, self.page_offset - PAGE_SIZE))

    def palette_commands(self) -> Iterable[SystemCommand]:
        yield SystemCommand("New relationship", "Create a relationship record", self.action_new)
        rel = self.rels.get(self.selected or "")
        if rel is None:
            return
        pid = invisible_marked(rel["personId"])
        yield SystemCommand(f"Edit relationship {pid}", rel.get("name", ""), self.action_edit)
        yield SystemCommand(f"Delete relationship {pid}", rel.get("name", ""), self.action_delete)
        yield SystemCommand(f"Link {pid} to a memory", "Pick the person memory", self.action_link)
        if rel.get("memoryNodeId"):
            yield SystemCommand(f"Unlink {pid}", f"from {rel['memoryNodeId']}", self.action_unlink)
            yield SystemCommand(f"Open {rel['memoryNodeId']} in Browse", "The linked memory", self.action_open)

    def action_revert_origin(self) -> None:
        if self.selected is None:
            self.notify("Select the person whose changes to undo.", severity="warning")
            return
        from .origin_revert import RevertOriginScreen

        self.app.push_screen(RevertOriginScreen(self.selected))

    def action_trust(self) -> None:
        if self.selected is None:
            self.notify("Select the person whose trust level to set.", severity="warning")
            return
        from .trust import ask_trust

        ask_trust(self.app, [self.selected])

    def action_forget(self) -> None:
        if self.selected is None:
            self.notify("Select the person to forget.", severity="warning")
            return
        from .forget import ForgetScreen

        self.app.push_screen(ForgetScreen(self.selected, person_id=True), lambda _r: self.reload())
