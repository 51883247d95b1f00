"""Review (key 8): the changes zcord held back because an untrusted sender caused them
(`zcor/review/list`), newest first, each with its origin and before/after; approve one
(`a`: it is recalled from then on) or reject it (`x`: zcord's preview of the revert, then
confirm — the revert dialog, asking about the held operation).

Held changes are named by their operation's seq, the number History shows.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from zcord.client import ClientError, ToolError

from ..diff import change_view
from ..format import change_targets, diff_mode, origin_text, plural, when
from ..messages import MemoryChanged
from ..widgets.diffshow import show_view
from ..widgets.rows import Column, add_columns, cursor_key, move_to, row_table
from .base import ZcorScreen
from .revert import RevertScreen
from .trust import TrustList, ask_trust


def held_origin(origin: Any) -> str:
    """Who a held change came from; one that names no sender was held by the default level
    (config defaultTrust), which is what the operator can change."""
    text = origin_text(origin)
    if (origin or {}).get("senders"):
        return text
    return (f"{text}: " if text else "") + "no sender named, held by the default trust level (Config, defaultTrust)"

PAGE = 100
SHOWN = 500
"""The Review screen lists the newest SHOWN held changes, PAGE per request."""


class RejectScreen(RevertScreen):
    """Preview and run `zcor/review/reject` of one held operation; dismisses with the result or None."""

    def __init__(self, seq: int, record: dict[str, Any] | None = None):
        super().__init__(seq, record)
        self.subject = f"held operation #{seq}"

    def _title(self) -> Text:
        title = Text(f"Reject held operation #{self.seq}")
        if self.record.get("tool"):
            title.append(f" · {self.record['tool']}", style="bold cyan")
        origin = origin_text(self.record.get("origin"))
        if origin:
            title.append(f" {origin}", style="yellow")
        return title

    async def _request(self, **kwargs: Any) -> dict[str, Any]:
        return dict(await self.app.client.review_reject([self.seq], **kwargs))


class ReviewScreen(ZcorScreen):
    MODE = "review"
    MAIN = "#held"
    HELP = "Changes held back because an untrusted sender caused them: approve or reject each"
    BINDINGS = [
        Binding("a", "approve", "Approve", id="review.approve",
                tooltip="Approve the selected change: it is recalled and shown to the model from now on"),
        Binding("x", "reject", "Reject…", id="review.reject",
                tooltip="Reject the selected change: preview its revert, then confirm"),
        Binding("v", "toggle_view", "Diff", id="review.view",
                tooltip="Show changes as a unified diff or side by side"),
        Binding("r", "reload", "Refresh", id="review.reload", tooltip="List the held changes again"),
        Binding("t", "trust", "Trust…", id="review.trust",
                tooltip="Set the trust level of the selected change's sender (trusted: no longer held)"),
        Binding("L", "trust_list", "Levels", id="review.levels",
                tooltip="Every sender with a trust level of its own; change or reset them"),
    ]

    COLUMNS: ClassVar[list[Column]] = [("Seq", "seq", 7), ("Time", "time", 19), ("Tool", "tool", 24),
                                       ("Target", "target", 12), ("Origin", "origin", None)]

    def __init__(self) -> None:
        super().__init__()
        self.items: dict[str, dict[str, Any]] = {}
        self.side_by_side = False
        self.narrow = False

    def compose_body(self) -> ComposeResult:
        yield Static("", id="review-summary", classes="summary")
        yield row_table("held")
        with VerticalScroll(id="held-scroll"):
            yield Static("", id="held-detail")

    def on_mount(self) -> None:
        # under 100 columns the time drops its seconds and the target narrows: the origin shows at 80
        self.narrow = self.app.size.width < 100
        narrow = {"time": 16, "tool": 23, "target": 8} if self.narrow else {}
        add_columns(self.query_one("#held", DataTable), [(label, key, narrow.get(key, width))
                                                         for label, key, width in self.COLUMNS])
        super().on_mount()

    def reload(self, changed: MemoryChanged | None = None) -> None:
        self.load()

    def action_reload(self) -> None:
        self.load()

    @work(exclusive=True, group="review")
    async def load(self) -> None:
        summary = self.query_one("#review-summary", Static)
        if not self.app.connected:
            summary.update(Text("zcord is not connected; the status line shows when it is back", style="bold red"))
            return
        try:  # a page at a time (zcor/review/list), the newest SHOWN at most
            listing = await self.app.client.review_list(limit=PAGE)
            while "nextOffset" in listing and len(listing["items"]) < SHOWN:
                more = await self.app.client.review_list(offset=listing["nextOffset"], limit=PAGE)
                listing = {**more, "items": listing["items"] + more["items"]}
        except ClientError as e:
            summary.update(Text(getattr(e, "message", None) or str(e), style="bold red"))
            return
        table = self.query_one("#held", DataTable)
        keep = cursor_key(table)
        table.clear()
        self.items = {}
        for item in listing["items"]:
            key = str(item["seq"])
            self.items[key] = item
            table.add_row(f"#{item['seq']}", when(item.get("at"))[:16 if self.narrow else 19], item.get("tool", ""), change_targets(item),
                          Text(held_origin(item.get("origin")), style="yellow"), key=key)
        move_to(table, keep)
        total = listing["total"]
        line = Text(plural(total, "held change"), style="bold")
        if total > len(listing["items"]):
            line.append(f" (the newest {len(listing['items'])} shown)", style="bold")
        line.append("  a approve · x reject · ", style="dim")
        line.append_text(diff_mode(self.side_by_side))
        summary.update(line)
        self._show()

    @property
    def selected(self) -> dict[str, Any] | None:
        return self.items.get(cursor_key(self.query_one("#held", DataTable)) or "")

    @on(DataTable.RowHighlighted)
    def _highlighted(self) -> None:
        self._show()

    def _show(self) -> None:
        item = self.selected
        detail = self.query_one("#held-detail", Static)
        if item is None:
            show_view(self, detail, lambda: Text("Nothing is held for review.", style="dim italic"))
        else:  # a large diff is built off the UI thread (zcor_tui.diff is bounded besides)
            show_view(self, detail, lambda: self.render_item(item), item.get("changes"))

    def render_item(self, item: dict[str, Any]) -> RenderableType:
        head = Table.grid(padding=(0, 1))
        head.add_column(style="bold", no_wrap=True)
        head.add_column(ratio=1)
        head.add_row("Operation", Text.assemble((f"#{item['seq']} ", "dim"), (item.get("tool", ""), "bold cyan")))
        head.add_row("When", when(item.get("at")))
        head.add_row("Origin", Text(held_origin(item.get("origin")), style="yellow"))
        parts: list[RenderableType] = [head]
        for change in item.get("changes") or ():
            parts.append(Text(""))
            parts.append(change_view(change, side_by_side=self.side_by_side))
        return Group(*parts)

    def action_toggle_view(self) -> None:
        self.side_by_side = not self.side_by_side
        self.load()  # the summary line says which view is on

    def action_approve(self) -> None:
        item = self.selected
        if item is None:
            self.notify("Nothing is held for review.", severity="warning")
            return
        self._approve(item["seq"])

    @work(exclusive=True, group="review-act")
    async def _approve(self, seq: int) -> None:
        try:
            await self.app.client.review_approve([seq])
        except (ToolError, ClientError) as e:
            self.notify(getattr(e, "message", None) or str(e), severity="error")
            return
        self.notify(f"Approved held operation #{seq}: it is recalled from now on.", title="Approved")
        self.load()

    def action_reject(self) -> None:
        item = self.selected
        if item is None:
            self.notify("Nothing is held for review.", severity="warning")
            return
        def reload(_result: dict[str, Any] | None) -> None:
            self.load()

        self.app.push_screen(RejectScreen(item["seq"], item), reload)

    def action_trust(self) -> None:
        item = self.selected
        senders = [s for s in ((item or {}).get("origin") or {}).get("senders") or [] if isinstance(s, str)]
        if not senders:
            self.notify("Nothing is held for review." if item is None else "This change's origin names no "
                        "sender: the default level (Config, defaultTrust) held it.", severity="warning")
            return
        ask_trust(self.app, senders)

    def action_trust_list(self) -> None:
        self.app.push_screen(TrustList())
