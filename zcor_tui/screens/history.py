"""History: the operation log newest first (`zcor/history/query`), filtered by keywords,
time, actor, tool, target id and "changes only" on the server (so totals and pages are
exact however many reads the log holds), with each record's actor, tool, parameters and
status, and a before/after view of what it changed (unified or side by side; the full
record for deletes).

The log grows while it is read (the bot keeps working), so pages are fetched by offset and
records already shown (by `seq`) are skipped. This screen's own queries are not recorded.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Checkbox, DataTable, Input, Select, Static

from zcord.client import ClientError

from ..diff import change_view
from ..format import cell, change_targets, compact_json, diff_mode, origin_text, plain, when
from ..messages import MemoryChanged, NodeRequested
from ..widgets.diffshow import show_view
from ..widgets.rows import add_columns, cursor_key, move_to, row_table
from .base import ZcorScreen
from .origin_revert import RevertOriginScreen
from .recall_log import RecallLogScreen
from .revert import RevertScreen
from .trust import ask_trust

PAGE_SIZE = 50
ACTORS = [("any actor", "any"), ("model (the bot)", "model"), ("operator", "operator"), ("system", "system")]


@dataclass
class PageStart:
    """Where a page starts: an offset into the matching records, and the records already seen
    before it (new records push old ones to higher offsets, so an offset may point at seen ones)."""

    offset: int
    seen: frozenset[int] = frozenset()


class HistoryScreen(ZcorScreen):
    MODE = "history"
    MAIN = "#records"
    HELP = "Every operation, newest first, with before/after diffs"
    BINDINGS = [
        Binding("v", "toggle_view", "Diff", id="history.view",
                tooltip="Show changes as a unified diff or side by side"),
        Binding("ctrl+n", "page(1)", "Older", id="history.next", tooltip="The next page: older records"),
        Binding("ctrl+b", "page(-1)", "Newer", id="history.prev", tooltip="The previous page: newer records"),
        Binding("ctrl+o", "open", "Open", id="history.open", tooltip="Show the changed memory in Browse"),
        Binding("r", "reload", "Refresh", show=False, id="history.reload", tooltip="Load the newest records"),
        Binding("u", "revert", "Revert", id="history.revert",
                tooltip="Undo the selected operation: preview what changes, then confirm"),
        Binding("ctrl+f", "focus_keywords", "Keywords", show=False, id="history.find",
                tooltip="Type keywords to find records"),
        Binding("O", "revert_origin", "Undo sender", id="history.revert_origin",
                tooltip="Undo everything the sender in the origin filter (or of the selected record) caused"),
        Binding("F", "forget", "Forget sender", show=False, id="history.forget",
                tooltip="Erase the sender in the origin filter (or of the selected record): preview, then confirm"),
        Binding("t", "trust", "Trust…", show=False, id="history.trust",
                tooltip="Set the trust level of the selected record's sender (untrusted: held for review)"),
        Binding("w", "shown", "Bot was shown", show=False, id="history.shown",
                tooltip="What the bot was shown before this change: the recall batches of its session"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.side_by_side = False
        self.pages: list[PageStart] = [PageStart(0)]
        self.next_start: PageStart | None = None
        self.records: dict[str, dict[str, Any]] = {}
        self.selected: dict[str, Any] | None = None
        self.summary = Text()
        self.narrow = False
        self.origins = OriginActions(self)

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="history-form", classes="form-bar"):
            yield Input(placeholder="keywords (anywhere in the record)", id="q")
            yield Input(placeholder="from YYYY-MM-DD", id="from", classes="date")
            yield Input(placeholder="to YYYY-MM-DD", id="to", classes="date")
        with Horizontal(id="history-filters", classes="form-bar"):
            yield Select(ACTORS, value="any", allow_blank=False, id="actor")
            yield Input(placeholder="tool", id="tool")
            yield Input(placeholder="target id", id="target")
            yield Input(placeholder="origin sender", id="origin")
            yield Checkbox("changes only", True, id="changes-only")
        yield Static("", id="history-summary", classes="summary")
        yield row_table("records")
        with VerticalScroll(id="record-scroll"):
            yield Static("", id="record")

    def on_mount(self) -> None:
        # under 100 columns the time drops its seconds and the target narrows, so the status shows at 80
        self.narrow = self.app.size.width < 100
        add_columns(self.query_one("#records", DataTable), [
            ("Time", "time", 16 if self.narrow else 19), ("Actor", "actor", 8), ("Tool", "tool", 23 if self.narrow else 24),
            ("Target", "target", 8 if self.narrow else 14), ("Status", "status", None)])
        self.query_one("#q", Input).focus()  # the first field: typed digits go there, not to the screen keys

    def action_focus_keywords(self) -> None:
        self.query_one("#q", Input).focus()

    def reload(self, changed: MemoryChanged | None = None) -> None:
        if len(self.pages) == 1:  # on the first page new records appear; deeper pages stay put
            self.fetch(delay=0.2 if changed else 0.0)

    def action_reload(self) -> None:
        self.pages = [PageStart(0)]
        self.fetch()

    @on(Input.Changed)
    def _typed(self) -> None:
        self.pages = [PageStart(0)]
        self.fetch(delay=0.35)

    @on(Input.Submitted)
    @on(Checkbox.Changed)
    @on(Select.Changed)
    def _submitted(self) -> None:
        self.pages = [PageStart(0)]
        self.fetch()

    def _filters(self) -> dict[str, Any]:
        """The query's parameters from the form; ValueError names a date it could not read."""
        args = self.keyword_time_args()
        actor = self.query_one("#actor", Select).value
        if actor in ("model", "operator", "system"):
            args["actor"] = actor
        for name in ("tool", "target", "origin"):
            value = self.query_one(f"#{name}", Input).value.strip()
            if value:
                args[name] = value
        if self.query_one("#changes-only", Checkbox).value:
            args["changesOnly"] = True
        return args

    @work(exclusive=True, group="history")
    async def fetch(self, delay: float = 0.0) -> None:
        if delay:
            await asyncio.sleep(delay)
        summary = self.query_one("#history-summary", Static)
        try:
            filters = self._filters()
        except ValueError as e:
            summary.update(Text(str(e), style="bold red"))
            return
        start = self.pages[-1]
        offset, seen = start.offset, set(start.seen)
        items: list[dict[str, Any]] = []
        total, at_end = 0, False
        while len(items) < PAGE_SIZE:
            if not self.app.connected:
                self._failed(ClientError("zcord is not connected; the status line shows when it is back"))
                return
            try:
                page = await self.app.client.history_query({**filters, "limit": PAGE_SIZE, "offset": offset})
            except ClientError as e:
                self._failed(e)
                return
            total = page["total"]
            for record in page["items"]:
                offset += 1
                if record["seq"] in seen:
                    continue  # seen already: the log grew meanwhile
                seen.add(record["seq"])
                items.append(record)
                if len(items) == PAGE_SIZE:
                    break
            if page.get("nextOffset") is None and offset >= total:
                at_end = True
                break
        self.next_start = None if at_end else PageStart(offset, frozenset(seen))
        self._show(items, total, bool(filters.get("changesOnly")))

    def _failed(self, err: Exception) -> None:
        """A refused or failed query: say why, and show no stale rows under the new filters."""
        self.query_one("#records", DataTable).clear()
        self.records, self.selected, self.next_start = {}, None, None
        self.summary = Text(getattr(err, "message", None) or str(err), style="bold red")
        self._show_mode()
        self.query_one("#record", Static).update(Text("No records.", style="dim italic"))

    def _show(self, items: list[dict[str, Any]], total: int, changes_only: bool) -> None:
        table = self.query_one("#records", DataTable)
        keep = self.selected.get("seq") if self.selected else None
        table.clear()
        self.records = {}
        for record in items:
            key = str(record["seq"])
            self.records[key] = record
            ok = record.get("status") == "ok"
            status = Text("ok", style="green") if ok else Text(
                f"error {record.get('error', {}).get('code', '')}", style="bold red")
            if record.get("changes"):
                status.append(f" · {len(record['changes'])} change{'s' if len(record['changes']) != 1 else ''}",
                              style="cyan")
            if (record.get("origin") or {}).get("private") is True:  # a private conversation's call (issue 34)
                status.append(" · private", style="magenta")
            table.add_row(when(record.get("at"))[:16 if self.narrow else 19], Text(record.get("actor", ""),
                                                            style="magenta" if record.get("actor") == "model" else ""),
                          cell(record.get("tool", "")), Text(change_targets(record)), status, key=key)
        move_to(table, None if keep is None else str(keep))
        summary = Text()
        page_no = len(self.pages)
        summary.append(f"page {page_no}", style="bold")
        summary.append(f" · {len(items)} of {total:,} record{'s' if total != 1 else ''}")
        if changes_only:
            summary.append(" with changes")
        hints = [h for h, ok in (("^n older", self.next_start is not None), ("^b newer", page_no > 1)) if ok]
        summary.append("  " + " · ".join(hints), style="dim")
        self.summary = summary
        self._show_mode()
        if not items:
            self.selected = None
            self.query_one("#record", Static).update(Text("No records.", style="dim italic"))
        elif table.row_count:
            self._select(cursor_key(table))

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._select(event.row_key.value)

    def _select(self, key: str | None) -> None:
        record = self.records.get(key or "")
        if record is None:
            return
        self.selected = record
        self._show_record(record)

    def _show_record(self, record: dict[str, Any]) -> None:
        """The record and its changes' diffs: a large diff is built off the UI thread."""
        show_view(self, self.query_one("#record", Static), lambda: self.render_record(record), record.get("changes"))

    def render_record(self, record: dict[str, Any]) -> RenderableType:
        head = Table.grid(padding=(0, 1))
        head.add_column(style="bold", no_wrap=True)
        head.add_column(ratio=1)
        head.add_row("Operation", Text.assemble((f"#{record['seq']} ", "dim"), (record.get("tool", ""), "bold cyan"),
                                                ("  (recovered)" if record.get("recovered") else "", "yellow")))
        head.add_row("When", when(record.get("at")))
        head.add_row("Actor", Text(record.get("actor", "")))
        origin = origin_text(record.get("origin"))
        if origin:
            head.add_row("Origin", Text(origin, style="yellow" if record["origin"].get("inferred") else ""))
        for change in record.get("changes") or ():  # the scope a change gave a memory (issue 34)
            if change.get("kind") == "scope.set":
                after = change.get("after")
                head.add_row("Scope", plain(f"{change.get('target')}: " + (
                    f"private to session {after}" if isinstance(after, str) else "visible everywhere"),
                    style="magenta"))
        if record.get("status") == "ok":
            head.add_row("Status", Text("ok", style="green"))
        else:
            error = record.get("error") or {}
            head.add_row("Status", plain(f"error {error.get('code', '')}: {error.get('message', '')}", style="red"))
        head.add_row("Params", Text(compact_json(record.get("params") or {}, 2000)))
        if record.get("result"):
            head.add_row("Result", Text(compact_json(record["result"], 600)))
        parts: list[RenderableType] = [head]
        for change in record.get("changes") or ():
            parts.append(Text(""))
            parts.append(change_view(change, side_by_side=self.side_by_side))
        return Group(*parts)

    @on(DataTable.RowSelected)
    def _row_selected(self) -> None:
        self.action_open()

    def _show_mode(self) -> None:
        line = self.summary.copy()
        line.append(" · ", style="dim")
        line.append_text(diff_mode(self.side_by_side))
        self.query_one("#history-summary", Static).update(line)

    def action_toggle_view(self) -> None:
        self.side_by_side = not self.side_by_side
        if self.selected is not None:
            self._show_record(self.selected)
        self._show_mode()

    def action_page(self, step: int) -> None:
        if step > 0 and self.next_start is not None:
            self.pages.append(self.next_start)
            self.fetch()
        elif step < 0 and len(self.pages) > 1:
            self.pages.pop()
            self.fetch()

    def action_open(self) -> None:
        record = self.selected
        if record is None:
            return
        for change in record.get("changes") or ():
            if str(change.get("kind", "")).startswith("node.") and change.get("target") \
                    and not str(change["kind"]).endswith(".delete"):
                self.post_message(NodeRequested(change["target"]))
                return
        target = (record.get("params") or {}).get("id")
        if isinstance(target, str):
            self.post_message(NodeRequested(target))
        else:
            self.notify("This record names no memory to open.", severity="warning")

    def action_revert(self) -> None:
        if self.selected is None:
            self.notify("Select the operation to revert.", severity="warning")
        elif not self.selected.get("changes"):
            self.notify(f"Operation #{self.selected['seq']} changed nothing; there is nothing to revert.",
                        severity="warning")
        else:
            self.app.push_screen(RevertScreen(self.selected["seq"], self.selected))

    def action_revert_origin(self) -> None:
        """Undo what a sender caused (OriginActions.revert_origin)."""
        self.origins.revert_origin()

    def action_trust(self) -> None:
        """Set a sender's trust level (OriginActions.trust)."""
        self.origins.trust()

    def action_shown(self) -> None:
        """What the bot was shown before a change (OriginActions.shown)."""
        self.origins.shown()

    def action_forget(self) -> None:
        """Erase a sender (OriginActions.forget)."""
        self.origins.forget()


class OriginActions:
    """History's actions on the selected record's origin (a part of HistoryScreen, `origins`):
    undo or erase what a sender caused, set its trust, and what the bot was shown before
    the change."""

    def __init__(self, screen: HistoryScreen) -> None:
        self.screen = screen

    def revert_origin(self) -> None:
        """Undo everything the sender in the origin filter (or of the selected record) caused."""
        host = self.screen
        sender = host.query_one("#origin", Input).value.strip()
        if not sender and host.selected is not None:
            origin = host.selected.get("origin") or {}
            senders = origin.get("senders") or []
            # the speaker (told, else the last sender): the one whose message led to the change
            speaker = origin.get("speaker") if isinstance(origin.get("speaker"), str) else None
            if speaker or senders:
                sender = speaker or senders[-1]
        if not sender:
            host.notify("Type the sender in the origin filter (or select a record with a sender) first.",
                        severity="warning")
            return
        host.app.push_screen(RevertOriginScreen(sender))

    def trust(self) -> None:
        """Set the trust level of the selected record's sender."""
        host = self.screen
        senders = [s for s in ((host.selected or {}).get("origin") or {}).get("senders") or [] if isinstance(s, str)]
        if not senders:
            host.notify("Select a record whose origin names a sender (the bot's calls on a chat message).",
                        severity="warning")
            return
        ask_trust(host.app, senders)

    def shown(self) -> None:
        """What the bot was shown before the selected change: its session's recall log."""
        host = self.screen
        record = host.selected
        if record is None:
            host.notify("Select a change the bot made.", severity="warning")
            return
        session = (record.get("origin") or {}).get("session")
        if not isinstance(session, str) or not session:
            host.notify("This record names no chat session (its origin has none), so there is no recall log "
                        "to show.", severity="warning")
            return
        host.app.push_screen(RecallLogScreen(session, record.get("at")))

    def forget(self) -> None:
        """Erase the sender in the origin filter (or of the selected record): preview, then confirm."""
        host = self.screen
        sender = host.query_one("#origin", Input).value.strip()
        if not sender and host.selected is not None:
            origin = host.selected.get("origin") or {}
            senders = origin.get("senders") or []
            speaker = origin.get("speaker")
            sender = speaker if isinstance(speaker, str) else str(senders[-1]) if senders else ""
        if not sender:
            host.notify("Type the sender in the origin filter (or select a record with a sender) first.",
                        severity="warning")
            return
        from .forget import ForgetScreen

        host.app.push_screen(ForgetScreen(sender), lambda _r: host.reload())
