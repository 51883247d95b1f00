"""Time travel (Browse, `T`): the memory tree as it was at an instant, read-only.

zcord rebuilds the whole Memory at that instant from today's state and the change
history (`zcor/history/at`); this screen shows it as a tree with the selected memory's
details. Nothing here can change the Memory: to bring an old version back, use the
memory's versions (`h` in Browse) or revert the operation in History (`u`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Input, Static, Tree
from textual.widgets.tree import TreeNode

from ..format import node_label, parse_instant, plural, when
from ..widgets.field import Field
from ..widgets.node_detail import NodeDetail

if TYPE_CHECKING:
    from ..app import ZcorApp


def _order(node_id: str) -> tuple[int, str]:
    return (int(node_id[1:]) if node_id[1:].isdigit() else 0, node_id)


class PastMemory:
    """One `zcor/history/at` answer, indexed for the tree: children by parent, in id order."""

    def __init__(self, answer: dict[str, Any]):
        self.at: str = answer.get("at", "")
        self.undone: int = int(answer.get("undoneChanges", 0))
        self.nodes: dict[str, dict[str, Any]] = {n["id"]: n for n in answer.get("nodes") or []}
        self.important: list[str] = list(answer.get("important") or [])
        self.relationships: list[dict[str, Any]] = list(answer.get("relationships") or [])
        self.children: dict[str | None, list[str]] = {}
        for node_id in sorted(self.nodes, key=_order):
            parent = self.nodes[node_id].get("parentId")
            self.children.setdefault(parent if parent in self.nodes else None, []).append(node_id)

    def path(self, node_id: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        current: str | None = node_id
        while current is not None and current in self.nodes and current not in seen:
            seen.add(current)
            out.append(self.nodes[current])
            current = self.nodes[current].get("parentId")
        return out[::-1]

    def detail(self, node_id: str) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
        """What NodeDetail shows: the node (as `zcor_memory_read` would give it), a trace and links."""
        node = dict(self.nodes[node_id])
        kids = [self.nodes[k] for k in self.children.get(node_id, [])]
        parent = self.nodes.get(node.get("parentId") or "")
        node.update(important=node_id in self.important, childCount=len(kids),
                    parentTitle=parent.get("title") if parent else None)
        trace = {"path": [{"id": n["id"], "title": n.get("title", "")} for n in self.path(node_id)],
                 "children": [{"id": k["id"], "title": k.get("title", ""), "superseded": bool(k.get("supersededBy"))}
                              for k in kids]}
        links = [r for r in self.relationships if r.get("memoryNodeId") == node_id]
        return node, trace, links


class TimeTravelScreen(Screen[None]):
    """The Memory at a chosen instant: a banner, the time box, the tree and one memory."""

    BINDINGS = [
        Binding("escape", "close", "Back to now", id="timetravel.close", tooltip="Close the past view"),
        Binding("ctrl+t", "focus_time", "Time", id="timetravel.time", tooltip="Type another instant"),
    ]

    app: ZcorApp

    def __init__(self, time: str = ""):
        super().__init__()
        self.initial = time
        self.past: PastMemory | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text(" PAST · READ-ONLY · pick an instant to see the Memory as it was then ",
                          style="bold"), id="past-banner")
        with Horizontal(id="past-form", classes="form-bar"):
            yield Field(self.initial, placeholder="2026-01-31 20:00 · 2026-01-31T20:00:00+08:00 · -2h · -3d",
                        id="past-time")
        yield Static("", id="past-summary", classes="summary")
        with Horizontal(id="past-body"):
            tree: Tree[str | None] = Tree("Memory", id="past-tree")
            tree.show_root = False
            tree.guide_depth = 3
            yield tree
            with VerticalScroll(id="past-detail-scroll"):
                yield NodeDetail(id="past-detail")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#past-detail", NodeDetail).show_message(
            "Enter an instant above (Enter loads it). Nothing here changes the Memory.")
        box = self.query_one("#past-time", Input)
        box.focus()
        if self.initial:
            self.load(self.initial)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_focus_time(self) -> None:
        self.query_one("#past-time", Input).focus()

    @on(Input.Submitted, "#past-time")
    def _submitted(self, event: Input.Submitted) -> None:
        self.load(event.value)

    @work(exclusive=True, group="past")
    async def load(self, text: str) -> None:
        box = self.query_one("#past-time", Input)
        summary = self.query_one("#past-summary", Static)
        try:
            instant = parse_instant(text)
        except ValueError as e:
            box.add_class("-invalid")
            summary.update(Text(str(e), style="bold red"))
            return
        box.remove_class("-invalid")
        summary.update(Text(f"Reading the Memory as it was at {when(instant)}…", style="dim italic"))
        answer = await self.app.rpc(self.app.client.history_at(instant))
        if answer is None:
            summary.update(Text("zcord could not show that instant (see the message).", style="bold red"))
            return
        self.show_past(PastMemory(dict(answer)))

    def show_past(self, past: PastMemory) -> None:
        self.past = past
        banner = Text(" PAST · READ-ONLY ", style="bold reverse")
        banner.append(f" the Memory at {when(past.at)} · {plural(past.undone, 'later change')} undone",
                      style="bold")
        self.query_one("#past-banner", Static).update(banner)
        current = [n for n in past.nodes.values() if not n.get("supersededBy")]
        self.query_one("#past-summary", Static).update(Text.assemble(
            (f"{plural(len(past.nodes), 'memory', 'memories')}", "bold"), f" ({len(current):,} current) · ",
            f"{plural(len(past.relationships), 'relationship')} · ",
            f"{len(past.important)} important · ", ("Esc: back to now", "dim")))
        tree = self.query_one("#past-tree", Tree)
        tree.clear()
        self._add_past_children(tree.root, None)
        tree.root.expand()
        detail = self.query_one("#past-detail", NodeDetail)
        if not past.nodes:
            detail.show_message("The Memory was empty at that instant.")
        else:
            detail.show_message("Select a memory to see it as it was.")
            tree.focus()
            tree.move_cursor_to_line(0)

    def _add_past_children(self, parent: TreeNode[str | None], parent_id: str | None) -> None:
        past = self.past
        assert past is not None
        for node_id in past.children.get(parent_id, []):
            node = past.nodes[node_id]
            count = len(past.children.get(node_id, []))
            parent.add(node_label(node_id, node.get("title", ""), superseded=bool(node.get("supersededBy")),
                                  important=node_id in past.important, child_count=count),
                       node_id, allow_expand=count > 0)

    @on(Tree.NodeExpanded, "#past-tree")
    def _expanded(self, event: Tree.NodeExpanded[str | None]) -> None:
        node_id = event.node.data
        if node_id is not None and self.past is not None and not event.node.children:
            self._add_past_children(event.node, node_id)

    @on(Tree.NodeHighlighted, "#past-tree")
    def _highlighted(self, event: Tree.NodeHighlighted[str | None]) -> None:
        node_id = event.node.data
        if node_id is None or self.past is None or node_id not in self.past.nodes:
            return
        self.query_one("#past-detail", NodeDetail).show(*self.past.detail(node_id))
