"""Consolidate (key 9): zcord's proposals (`zcor/consolidate/list`) — clusters of
near-duplicate memories and superseded chains that can be folded — each with its members
side by side, the words that differ lit. `m` merges a cluster through `zcor_memory_merge`
(the form prefilled with the newest member's title and content, for the operator to edit),
`f` folds a chain (its old versions deleted with `zcor_memory_delete`, oldest first, after a
confirmation), `d` dismisses a proposal for good. Merges and deletes are ordinary logged
operations: History reverts them."""

from __future__ import annotations

from typing import Any, cast

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from zcord.client import ClientError, MergeArgs, ToolError

from ..diff import word_diff
from ..format import plural, shown, when
from ..messages import MemoryChanged
from ..widgets.rows import add_columns, cursor_key, move_to, row_table
from .base import ZcorScreen
from .dialogs import ConfirmDialog, MergeForm

PAGE = 100


def members_view(item: dict[str, Any]) -> RenderableType:
    """The newest member beside each other one, field by field, the differing words lit."""
    members = item.get("members") or []
    if not members:
        return Text("")
    newest, others = members[0], members[1:]
    head = Text()
    if item.get("kind") == "chain":
        head.append("Superseded chain: ", style="bold")
        head.append(" ← ".join(item.get("ids") or []), style="cyan")
        head.append(f"  (f folds it: deletes {', '.join(item.get('fold') or [])}, oldest first)", style="dim")
    else:
        head.append("Near-duplicates: ", style="bold")
        head.append(", ".join(item.get("ids") or []), style="cyan")
        pairs = ", ".join(f"{'~'.join(p['ids'])} {p['score']}" for p in item.get("pairs") or [])
        head.append(f"  (similarity {pairs})", style="dim")
    parts: list[RenderableType] = [head]
    for other in others:
        table = Table(expand=True, show_lines=True, padding=(0, 1), header_style="bold")
        table.add_column("", no_wrap=True, ratio=1)
        table.add_column(Text(f"{newest['id']} (newest)"), ratio=4)
        table.add_column(Text(other["id"] + (" (superseded)" if other.get("supersededBy") else "")), ratio=4)
        for key in ("title", "content"):
            left, right = word_diff(shown(newest.get(key) or ""), shown(other.get(key) or ""))
            table.add_row(Text(key, style="bold"), left, right)
        table.add_row(Text("updated", style="bold"), Text(when(newest.get("updatedAt"))),
                      Text(when(other.get("updatedAt"))))
        parts.append(table)
    return Group(*parts)


class ConsolidateScreen(ZcorScreen):
    MODE = "consolidate"
    MAIN = "#proposals"
    HELP = "Near-duplicate memories and superseded chains zcord proposes to merge or fold"
    WATCHES = ("node.",)
    BINDINGS = [
        Binding("m", "merge", "Merge…", id="consolidate.merge",
                tooltip="Merge the selected cluster into one memory (title and content from the newest, editable)"),
        Binding("f", "fold", "Fold…", id="consolidate.fold",
                tooltip="Fold the selected chain: delete its superseded versions (History keeps them)"),
        Binding("d", "dismiss_proposal", "Dismiss", id="consolidate.dismiss",
                tooltip="Dismiss the selected proposal: it is not proposed again"),
        Binding("r", "reload", "Refresh", id="consolidate.reload", tooltip="Ask zcord for the proposals again"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.items: dict[str, dict[str, Any]] = {}

    def compose_body(self) -> ComposeResult:
        yield Static("", id="consolidate-summary", classes="summary")
        yield row_table("proposals")
        with VerticalScroll(id="proposal-scroll"):
            yield Static("", id="proposal")

    def on_mount(self) -> None:
        add_columns(self.query_one("#proposals", DataTable), [("Kind", "kind", 7), ("Memories", "ids", 22),
                                                               ("Best", "score", 5), ("Newest title", "title", None)])
        super().on_mount()

    def reload(self, changed: MemoryChanged | None = None) -> None:
        self.load()

    def action_reload(self) -> None:
        self.load()

    @work(exclusive=True, group="consolidate")
    async def load(self) -> None:
        summary = self.query_one("#consolidate-summary", Static)
        if not self.app.connected:
            summary.update(Text("zcord is not connected; the status line shows when it is back", style="bold red"))
            return
        try:
            listing = await self.app.client.consolidate_list(limit=PAGE)
        except ClientError as e:
            summary.update(Text(getattr(e, "message", None) or str(e), style="bold red"))
            return
        table = self.query_one("#proposals", DataTable)
        keep = cursor_key(table)
        table.clear()
        self.items = {}
        for item in listing["items"]:
            key = ",".join(item["ids"])
            self.items[key] = item
            newest = (item.get("members") or [{}])[0]
            table.add_row(Text(item["kind"], style="magenta" if item["kind"] == "chain" else "cyan"),
                          Text(" ".join(item["ids"])), Text(str(item.get("score", "")) if item["kind"] == "twins"
                                                            else "—"),
                          Text(shown(newest.get("title", ""), lines=False)), key=key)
        move_to(table, keep)
        total = listing["total"]
        line = Text(plural(total, "proposal"), style="bold")
        if total > len(listing["items"]):
            line.append(f" (the first {len(listing['items'])})")
        scan = listing.get("scan") or {}
        if not scan.get("complete"):
            line.append(f" · still scanning: {scan.get('pending', 0):,} memories left, r refreshes", style="yellow")
        line.append("  m merge · f fold · d dismiss", style="dim")
        summary.update(line)
        self._show()

    @property
    def selected(self) -> dict[str, Any] | None:
        return self.items.get(cursor_key(self.query_one("#proposals", DataTable)) or "")

    @on(DataTable.RowHighlighted)
    def _highlighted(self) -> None:
        self._show()

    def _show(self) -> None:
        item = self.selected
        self.query_one("#proposal", Static).update(
            members_view(item) if item is not None else
            Text("Nothing to consolidate: no near-duplicates or superseded chains to fold.", style="dim italic"))

    @work(exclusive=True, group="action")
    async def action_merge(self) -> None:
        item = self.selected
        if item is None or item["kind"] != "twins":
            self.notify("Select a cluster of near-duplicates to merge (a chain is folded with f).", severity="warning")
            return
        newest = item["members"][0]

        async def merge(args: dict[str, Any]) -> dict[str, Any]:
            return dict(await self.app.client.zcor_memory_merge(cast(MergeArgs, args)))

        result = await self.app.push_screen_wait(MergeForm(merge, list(item["ids"]), newest["title"],
                                                           newest["content"]))
        if result:
            self.notify(f"Merged {', '.join(result['superseded'])} into {result['id']} (History can revert it).")
            self.load()

    @work(exclusive=True, group="action")
    async def action_fold(self) -> None:
        item = self.selected
        if item is None or item["kind"] != "chain":
            self.notify("Select a superseded chain to fold (a cluster is merged with m).", severity="warning")
            return
        fold = list(item.get("fold") or [])
        ok = await self.app.push_screen_wait(ConfirmDialog(
            f"Delete the superseded versions {', '.join(fold)} of {item['newest']}? History keeps each "
            f"one and can revert the deletes.", yes="Fold"))
        if not ok:
            return
        done: list[str] = []
        for node_id in fold:
            try:
                await self.app.client.zcor_memory_delete({"id": node_id})
            except (ToolError, ClientError) as e:
                self.notify(f"Stopped at {node_id}: {getattr(e, 'message', None) or e}", severity="error")
                break
            done.append(node_id)
        if done:
            self.notify(f"Folded: deleted {', '.join(done)}.")
        self.load()

    @work(exclusive=True, group="action")
    async def action_dismiss_proposal(self) -> None:
        item = self.selected
        if item is None:
            self.notify("Nothing to dismiss.", severity="warning")
            return
        try:
            await self.app.client.consolidate_dismiss(list(item["ids"]))
        except ClientError as e:
            self.notify(getattr(e, "message", None) or str(e), severity="error")
            return
        self.notify(f"Dismissed {', '.join(item['ids'])}: not proposed again.")
        self.load()
