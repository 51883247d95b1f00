"""Search: `zcor_memory_query` with keywords, a local from/to range and superseded on or
off, a page at a time; Enter shows the memory in Browse."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Checkbox, DataTable, Input, Static

from zcord.client import QueryArgs, ToolError, for_operator

from ..format import SUPERSEDED_MARK, one_line, plain, when_short
from ..messages import MemoryChanged, NodeRequested
from ..widgets.rows import add_columns, cursor_key, row_table
from .base import ZcorScreen

PAGE_SIZE = 50


class SearchScreen(ZcorScreen):
    MODE = "search"
    MAIN = "#results"
    HELP = "Find memories by keywords and time"
    WATCHES = ("node.", "state.")
    BINDINGS = [
        Binding("ctrl+n", "page(1)", "Next page", id="search.next", tooltip="The next page of results"),
        Binding("ctrl+b", "page(-1)", "Prev page", id="search.prev", tooltip="The previous page of results"),
        Binding("ctrl+o", "open", "Open in Browse", id="search.open", tooltip="Show the memory in the tree"),
        Binding("ctrl+f", "focus_query", "Keywords", id="search.focus", tooltip="Back to the keywords field"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.page_offset = 0
        self.next_offset: int | None = None
        self.total = 0

    def compose_body(self) -> ComposeResult:
        # the same bordered filter bar as History's (one line each on a short terminal, app.tcss)
        with Horizontal(id="search-form", classes="form-bar"):
            yield Input(placeholder="keywords (all match)", id="q")
            yield Input(placeholder="from YYYY-MM-DD", id="from", classes="date")
            yield Input(placeholder="to YYYY-MM-DD", id="to", classes="date")
            yield Checkbox("superseded", id="superseded")
        yield Static("", id="search-summary", classes="summary")
        yield row_table("results")

    def on_mount(self) -> None:
        add_columns(self.query_one("#results", DataTable), [("Updated", "updated", 16), ("ID", "id", 7),
                    ("Title", "title", 28), ("Content", "content", None)])
        self.query_one("#q", Input).focus()

    def reload(self, changed: MemoryChanged | None = None) -> None:
        self.search(self.page_offset, delay=0.1 if changed else 0.0)

    @on(Input.Changed)
    def _typed(self, event: Input.Changed) -> None:
        self.search(0, delay=0.35)

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.search(0)

    @on(Checkbox.Changed)
    def _toggled(self) -> None:
        self.search(0)

    def _args(self) -> dict[str, Any]:
        """The query arguments; ValueError names a date it could not read."""
        args = self.keyword_time_args()
        if self.query_one("#superseded", Checkbox).value:
            args["includeSuperseded"] = True
        return args

    @work(exclusive=True, group="search")
    async def search(self, offset: int = 0, delay: float = 0.0) -> None:
        if delay:
            await asyncio.sleep(delay)  # typing: query once the operator pauses
        summary = self.query_one("#search-summary", Static)
        table = self.query_one("#results", DataTable)
        try:
            args = self._args()
        except ValueError as e:
            self._failed(str(e))
            return
        table.loading = True
        try:
            page, err = await self.app.try_tool(self.app.client.zcor_memory_query(cast(QueryArgs, {**args, "limit": PAGE_SIZE, "offset": offset})))
        finally:
            table.loading = False
        if page is None:
            message = for_operator(err.code, err.message, data=err.data) if isinstance(err, ToolError) else str(err)
            self._failed(f"The search failed: {message}")
            return
        if offset and not page["items"] and page["total"]:
            self.search(max(0, page["total"] - PAGE_SIZE))  # the page emptied under us
            return
        self.page_offset, self.next_offset, self.total = offset, page.get("nextOffset"), page["total"]
        table.clear()
        for item in page["items"]:
            style = "dim" if item.get("supersededBy") else ""
            title = Text(one_line(item["title"], 80), style=style)
            if item.get("supersededBy"):
                title = Text.assemble((SUPERSEDED_MARK, "bold red"), title, (f" → {item['supersededBy']}", "red"))
            scope = item.get("scope")
            if isinstance(scope, dict) and scope.get("session"):  # a private conversation's memory (issue 34)
                title.append_text(plain(f" [private: {one_line(scope['session'], 30)}]", style="magenta"))
            table.add_row(Text(when_short(item.get("updatedAt")), style=style), Text(item["id"], style="cyan"),
                          title,
                          Text(one_line(item.get("content"), 60), style="dim"), key=item["id"])
        if not self.total:
            summary.update(Text("No memory matches.", style="italic"))
            return
        text = Text()
        text.append(f"{self.total:,} ", style="bold")
        text.append(f"match{'es' if self.total != 1 else ''} · showing {offset + 1:,}–{offset + len(page['items']):,}")
        hints = [h for h, ok in (("^n next page", self.next_offset is not None), ("^b previous", offset > 0)) if ok]
        text.append("  " + " · ".join(hints + ["Enter opens in Browse"]), style="dim")
        summary.update(text)

    def _failed(self, message: str) -> None:
        """No rows from an earlier query stay under an error: they would pass for its answer."""
        self.query_one("#results", DataTable).clear()
        self.page_offset, self.next_offset, self.total = 0, None, 0
        self.query_one("#search-summary", Static).update(Text(message, style="bold red"))

    def action_page(self, step: int) -> None:
        if step > 0 and self.next_offset is not None:
            self.search(self.next_offset)
        elif step < 0 and self.page_offset > 0:
            self.search(max(0, self.page_offset - PAGE_SIZE))

    def action_focus_query(self) -> None:
        self.query_one("#q", Input).focus()

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value:
            self.post_message(NodeRequested(str(event.row_key.value)))

    def action_open(self) -> None:
        key = cursor_key(self.query_one("#results", DataTable))
        if key:
            self.post_message(NodeRequested(key))
