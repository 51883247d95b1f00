"""Every version of one memory (Browse, `h`), from zcord's change history
(`zcor/history/versions`): when, who, what kind of change, through which tool; the diff
between any two versions; and "restore this version" (`zcor/history/reinstate`), which
makes an earlier version current again as one new change.

The diff compares the highlighted version with the base: the version before it, unless
the operator marked another one with `b`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from ..diff import fields_diff, record_text
from ..format import diff_mode, one_line, origin_text, plural, when
from ..messages import MemoryChanged
from ..widgets.diffshow import show_view
from ..widgets.rows import add_columns, row_table
from .dialogs import ConfirmDialog

if TYPE_CHECKING:
    from ..app import ZcorApp

TIME_FIELDS = ("updatedAt",)
"""Left out of the diff when other fields changed (every edit moves them)."""



def op_name(version: dict[str, Any]) -> str:
    """A version named by the operation that wrote it (`operation #46`), the number History,
    Review and revert use; the change counter zcord keeps besides is not shown to operators."""
    return f"operation #{version['seq']}" if version.get("seq") else f"change {version.get('changeId')}"

class VersionsScreen(Screen[None]):
    """The versions of memory `node_id`, oldest first."""

    BINDINGS = [
        Binding("b", "base", "Mark base", id="versions.base",
                tooltip="Compare the other versions with the highlighted one (again: back to the one before)"),
        Binding("R", "restore", "Restore this version", id="versions.restore",
                tooltip="Make the highlighted version current again, as a new change"),
        Binding("v", "toggle_view", "Diff", id="versions.view",
                tooltip="Show the diff unified or side by side"),
        Binding("r", "reload", "Refresh", show=False, id="versions.reload", tooltip="Read the versions again"),
        Binding("escape,q", "close", "Close", id="versions.close", tooltip="Back to Browse"),
    ]

    app: ZcorApp

    def __init__(self, node_id: str, title: str = ""):
        super().__init__()
        self.node_id = node_id
        self.node_title = title
        self.items: list[dict[str, Any]] = []
        self.base: int | None = None
        """changeId of the version marked as base, or None: the one before the highlighted."""
        self.side_by_side = False
        self.follow_newest = False

    def _head(self) -> Text:
        return Text.assemble(("Versions of ", "bold"), (self.node_id, "bold cyan"),
                             (f" “{one_line(self.node_title, 60)}”" if self.node_title else "", "bold"))

    def compose(self) -> ComposeResult:
        yield Static(self._head(), id="versions-title", classes="banner")
        yield Static("", id="versions-summary", classes="summary")
        yield row_table("versions")
        with VerticalScroll(id="version-scroll"):
            yield Static("", id="version-diff")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#versions", DataTable)
        add_columns(table, [("", "mark", 4), ("Time", "time", 19), ("Actor", "actor", 8), ("Change", "kind", 18),
                            ("Tool", "tool", 24), ("Op", "seq", None)])
        table.focus()
        self.app.memory_changed.subscribe(self, self._memory_changed)
        self.load()

    def _memory_changed(self, message: MemoryChanged) -> None:
        if any(c.get("target") == self.node_id for c in message.event.get("changes", ())):
            self.load()

    def action_reload(self) -> None:
        self.load()

    @work(exclusive=True, group="versions")
    async def load(self) -> None:
        result = await self.app.rpc(self.app.client.history_versions(self.node_id))
        if result is None:
            self.query_one("#version-diff", Static).update(
                Text(f"No versions of {self.node_id} could be read.", style="dim italic"))
            return
        self.items = result["items"]
        self._retitle()
        if self.base is not None and not any(v["changeId"] == self.base for v in self.items):
            self.base = None
        self._fill()

    def _fill(self) -> None:
        table = self.query_one("#versions", DataTable)
        keep = self.highlighted["changeId"] if self.highlighted and not self.follow_newest else None
        self.follow_newest = False
        table.clear()
        for n, v in enumerate(self.items):
            mark = Text()
            if v["changeId"] == self.base:
                mark.append("base", style="bold magenta")
            elif n == len(self.items) - 1:
                mark.append("now", style="bold green")
            kind = str(v.get("kind", ""))
            table.add_row(mark, when(v.get("at"))[:19],
                          Text(v.get("actor", ""), style="magenta" if v.get("actor") == "model" else ""),
                          Text(kind, style="red" if kind.endswith(".delete") else ""), Text(v.get("tool") or ""),
                          f"#{v['seq']}" if v.get("seq") else "", key=str(v["changeId"]))
        if self.items:
            row = next((n for n, v in enumerate(self.items) if v["changeId"] == keep), len(self.items) - 1)
            table.move_cursor(row=row)
        self._show()

    @property
    def highlighted(self) -> dict[str, Any] | None:
        table = self.query_one("#versions", DataTable)
        if not self.items or table.row_count == 0 or table.cursor_row < 0:
            return None
        return self.items[min(table.cursor_row, len(self.items) - 1)]

    def _base_for(self, version: dict[str, Any]) -> dict[str, Any] | None:
        if self.base is not None:
            return next((v for v in self.items if v["changeId"] == self.base), None)
        index = self.items.index(version)
        return self.items[index - 1] if index > 0 else None

    @on(DataTable.RowHighlighted)
    def _highlighted(self) -> None:
        self._show()

    def _show(self) -> None:
        summary = Text(f"{plural(len(self.items), 'version')}, oldest first", style="bold")
        summary.append(" · b: mark base · R: restore · ", style="dim")
        summary.append_text(diff_mode(self.side_by_side))
        self.query_one("#versions-summary", Static).update(summary)
        version = self.highlighted
        if version is not None:
            origin = origin_text(version.get("origin"))  # who caused it: "from qq:42 in qq:group:1"

            def build() -> RenderableType:
                diff = self.render_diff(version)
                return Group(Text(f"Origin: {origin}", style="yellow"), diff) if origin else diff

            base = self._base_for(version)  # a large diff is built off the UI thread
            show_view(self, self.query_one("#version-diff", Static), build, version.get("record"),
                      base.get("record") if base is not None else None)

    def render_diff(self, version: dict[str, Any]) -> RenderableType:
        base = self._base_for(version)
        head = Text()
        def label(v: dict[str, Any]) -> str:
            return f"{op_name(v)} ({when(v.get('at'))[:19]}, {v.get('kind')})"

        record = version.get("record")
        if base is None:
            head.append(f"{label(version)}: the first version", style="bold")
            body: RenderableType = record_text(record) if isinstance(record, dict) else Text("∅")
            return Group(head, body)
        if base is version:
            head.append(f"{label(version)} is the base; highlight another version to compare.", style="bold")
            return Group(head, record_text(record) if isinstance(record, dict) else Text("deleted", style="red"))
        head.append("from ", style="dim")
        head.append(label(base), style="bold magenta" if base["changeId"] == self.base else "bold")
        head.append(" to ", style="dim")
        head.append(label(version), style="bold")
        old = base.get("record")
        if record is None:
            return Group(head, Text("Deleted by this change. The record before:", style="bold red"),
                         record_text(old) if isinstance(old, dict) else Text("∅"))
        if old is None:
            return Group(head, Text("The base is a delete; the whole record of this version:", style="bold"),
                         record_text(record))
        before, after = dict(old), dict(record)
        if [k for k in set(before) | set(after) if k not in TIME_FIELDS and before.get(k) != after.get(k)]:
            for k in TIME_FIELDS:
                before.pop(k, None)
                after.pop(k, None)
        return Group(head, fields_diff(before, after, side_by_side=self.side_by_side))

    # -- actions ----------------------------------------------------------------------------

    def action_base(self) -> None:
        version = self.highlighted
        if version is None:
            return
        self.base = None if self.base == version["changeId"] else version["changeId"]
        self._fill()

    def action_toggle_view(self) -> None:
        self.side_by_side = not self.side_by_side
        self._show()

    def action_close(self) -> None:
        self.dismiss(None)

    @work(exclusive=True, group="action")
    async def action_restore(self) -> None:
        version = self.highlighted
        if version is None:
            return
        if version.get("record") is None:
            self.notify("This version is a delete; restore a version from before it.", severity="warning")
            return
        if version is self.items[-1]:
            self.notify("This is the current version already.", severity="warning")
            return
        if not await self.app.push_screen_wait(ConfirmDialog(
                f"Make {self.node_id} as it was after {op_name(version)} "
                f"({when(version.get('at'))}) current again?\nThis is recorded as a new change; the current "
                f"version stays in the history.", yes="Restore")):
            return
        result = await self.app.rpc(self.app.client.history_reinstate(self.node_id, version["changeId"]))
        if result is None:
            return
        self.notify(f"{self.node_id} is back to the version of {op_name(version)}, "
                    f"recorded as operation #{result['seq']}.", title="Restored")
        self.follow_newest = True  # the cursor goes to the new current version, not the restored row
        self.load()

    def _retitle(self) -> None:
        """The banner names the memory by its current title (a restore may have changed it)."""
        record = self.items[-1].get("record") if self.items else None
        if isinstance(record, dict) and record.get("title") and record["title"] != self.node_title:
            self.node_title = record["title"]
            self.query_one("#versions-title", Static).update(self._head())
