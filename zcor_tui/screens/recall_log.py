"""What the bot was shown (History, `w`): the recall log of the selected record's chat
session (`zcor/recall-log` with `before` = the record's time), newest first — each batch's
senders, the memories recalled with why (term, the word it came from, where it matched,
what it weighed) and the context header's size and what the budget cut."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from zcord.client import ClientError

from ..format import plural, shown, when
from ..widgets.rows import add_columns, cursor_key, row_table

if TYPE_CHECKING:
    from ..host import ZcorHost

BATCHES = 50


def batch_view(entry: dict[str, Any]) -> RenderableType:
    """One recall batch: who spoke, the header's size, and each memory recalled with why."""
    head = Table.grid(padding=(0, 1))
    head.add_column(style="bold", no_wrap=True)
    head.add_column(ratio=1)
    head.add_row("Recalled", when(entry.get("at")))
    head.add_row("Senders", Text(shown(", ".join(entry.get("senders") or []) or "—", lines=False)))
    if entry.get("people"):
        head.add_row("People", Text(shown(", ".join(entry["people"]), lines=False), style="cyan"))
    header = Text(f"{entry.get('headerChars', 0):,} characters (budget {entry.get('budget', 0):,})")
    if entry.get("truncated"):
        cut = entry.get("fullChars", 0) - entry.get("headerChars", 0)
        header.append(f" · the budget cut {cut:,} of {entry.get('fullChars', 0):,}", style="yellow")
    head.add_row("Header", header)
    if entry.get("notShown"):
        head.add_row("Left out", Text(", ".join(entry["notShown"]) + " (deleted, superseded or held)", style="red"))
    parts: list[RenderableType] = [head, Text("")]
    hits = entry.get("hits") or []
    if not hits:
        parts.append(Text("Nothing was recalled for this batch.", style="dim italic"))
    for h in hits:
        line = Text()
        line.append(f"[{h.get('id', '')}] ", style="bold cyan")
        line.append(shown(h.get("title", ""), lines=False), style="bold")
        line.append(f"  score {h.get('score', 0)}", style="dim")
        parts.append(line)
        for r in h.get("reasons") or []:
            why = Text("    ← ", style="dim")
            why.append(shown(r.get("term", ""), lines=False), style="green")
            if r.get("from") and r.get("from") != r.get("term"):
                why.append(shown(f" (from {r['from']})", lines=False), style="dim")
            if r.get("where"):
                why.append(f" in {r['where']}")
            if r.get("weight") is not None:
                why.append(f"  {r['weight']}", style="dim")
            parts.append(why)
    return Group(*parts)


class RecallLogScreen(ModalScreen[None]):
    """The recall batches of `session` at or before `before` (an ISO time), newest first."""

    BINDINGS = [Binding("escape,q", "close", "Close", id="recall_log.close", tooltip="Back to History")]

    app: ZcorHost

    def __init__(self, session: str, before: str | None = None):
        super().__init__()
        self.session = session
        self.before = before
        self.entries: dict[str, dict[str, Any]] = {}

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="revert"):
            title = Text("What the bot was shown · ")
            title.append(shown(self.session, lines=False), style="bold cyan")
            if self.before:
                title.append(f" · up to {when(self.before)}", style="dim")
            yield Static(title, id="dialog-title")
            yield Static(Text("Reading the recall log…", style="dim italic"), id="recall-log-summary")
            yield row_table("recall-batches")
            with VerticalScroll(id="recall-batch-scroll"):
                yield Static("", id="recall-batch")

    def on_mount(self) -> None:
        add_columns(self.query_one("#recall-batches", DataTable), [
            ("Time", "time", 19), ("Senders", "senders", 20), ("Recalled", "ids", None), ("Header", "header", 8)])
        self.fetch()

    @work(exclusive=True, group="recall-log")
    async def fetch(self) -> None:
        summary = self.query_one("#recall-log-summary", Static)
        try:
            answer = await self.app.client.recall_log(self.session, limit=BATCHES, before=self.before)
        except ClientError as e:
            summary.update(Text(getattr(e, "message", None) or str(e), style="bold red"))
            return
        table = self.query_one("#recall-batches", DataTable)
        table.clear()
        self.entries = {}
        for n, entry in enumerate(answer.get("items") or []):
            key = str(n)
            self.entries[key] = entry
            ids = entry.get("ids") or []
            table.add_row(when(entry.get("at"))[:19], Text(shown(", ".join(entry.get("senders") or []),
                                                                 lines=False)),
                          Text(", ".join(ids) if ids else "nothing", style="" if ids else "dim"),
                          Text(f"{entry.get('headerChars', 0):,}", style="yellow" if entry.get("truncated") else ""),
                          key=key)
        total = answer.get("total", 0)
        line = Text(f"{plural(total, 'batch', 'batches')} kept (at most {answer.get('kept')} per session)")
        if self.before:
            line.append(", the newest first: the first is the one before the change", style="dim")
        summary.update(line)
        if not self.entries:
            self.query_one("#recall-batch", Static).update(
                Text("No recall batch of this session is kept from before then (the log keeps the latest "
                     "ones; zcord may have been started since, or the log is off).", style="dim italic"))
        else:
            table.focus()
            self._select(cursor_key(table))

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._select(event.row_key.value)

    def _select(self, key: str | None) -> None:
        entry = self.entries.get(key or "")
        if entry is not None:
            self.query_one("#recall-batch", Static).update(batch_view(entry))

    def action_close(self) -> None:
        self.dismiss(None)
