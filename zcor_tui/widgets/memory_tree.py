"""The memory forest as a Textual Tree that holds only what the operator has opened.

Children are loaded when a node is expanded (the screen does the daemon call and hands
the items to `set_children`). A parent with thousands of children shows them a page at
a time, with a "… N more" line that shows the next page when selected, so no render ever
holds more lines than the operator asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from rich.style import Style
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from ..format import node_label

PAGE = 200
MAX_INDENT = 6
"""Levels that indent; deeper memories line up with the sixth (the detail pane shows their path)."""
DEEP = 40
"""A memory deeper than this is shown in a tree that starts a few levels above it (`set_base`):
Textual's Tree keeps, for every line, the list of nodes above it, so a path of 20,000 open
levels would cost 20,000² steps and hundreds of MiB; this way opening a path costs about
its length (one trace) whatever the depth."""
LEVELS_ABOVE = 4
"""Levels of the path shown above a deep memory (its parent, grandparent…)."""


@dataclass
class Item:
    """One memory as `zcor_memory_children` lists it."""

    id: str
    title: str
    superseded: bool = False
    child_count: int = 0

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Item:
        return cls(str(d["id"]), str(d.get("title", "")), bool(d.get("superseded")), int(d.get("childCount", 0)))


@dataclass
class Slot:
    """The data of a tree node: its memory (None for the invisible forest root) and the
    children the daemon returned for it, of which the first `shown` have tree nodes."""

    item: Item | None
    loaded: bool = False
    loading: bool = False
    items: list[Item] = field(default_factory=list)
    shown: int = 0


@dataclass
class More:
    """The "… N more" line at the end of a long list of children."""

    remaining: int


def slot_of(node: TreeNode[Any]) -> Slot:
    """The Slot a memory's tree node (or the root) holds: every node but a "… more" line."""
    return cast(Slot, node.data)


def item_of(node: TreeNode[Any]) -> Item:
    """The memory a tree node below the root shows."""
    return cast(Item, slot_of(node).item)


class MemoryTree(Tree[Any]):
    """A lazily loaded, paged tree of memories; `nodes_by_id` finds the tree node of a memory."""

    def __init__(self, **kwargs: Any):
        super().__init__("Memory", data=Slot(None), **kwargs)
        self.show_root = False
        self.guide_depth = 3
        self.nodes_by_id: dict[str, TreeNode[Any]] = {}
        self.important: set[str] = set()
        self.marked: list[str] = []
        self.base_depth = 0
        """Levels above the tree's first lines (0: the tree starts at the roots)."""

    # -- deep paths: the tree starts at an ancestor -----------------------------------------

    @property
    def base(self) -> Item | None:
        """The memory whose children are the tree's top lines (None: the roots)."""
        return slot_of(self.root).item

    def set_base(self, item: Item | None, depth: int = 0) -> None:
        """Start the tree at `item` (`depth` levels below the roots), or at the roots (None).

        The tree is emptied; the caller loads the new top level.
        """
        if (item.id if item else None) == (self.base.id if self.base else None):
            return
        self.clear()
        self.nodes_by_id.clear()
        self.root.data = Slot(item)
        self.base_depth = depth if item else 0
        self.show_root = item is not None
        if item is not None:
            label = Text(f"⋮ {depth:,} level{'s' if depth != 1 else ''} above · ", style="italic cyan")
            label.append_text(self.label_for(item))
            label.append("  (backspace: one level up · g: go to any id)", style="dim")
            self.root.set_label(label)
        else:
            self.root.set_label("Memory")

    # -- deep trees: the indentation stops at MAX_INDENT levels ------------------------------

    def _cut(self, y: int) -> int:
        """Cells of guides left out on line y (0 unless it is deeper than MAX_INDENT)."""
        lines = self._tree_lines
        if not 0 <= y < len(lines):
            return 0
        return max(0, len(lines[y].path) - 1 - MAX_INDENT) * self.guide_depth

    def _render_line(self, y: int, x1: int, x2: int, base_style: Style) -> Strip:
        cut = self._cut(y)
        if not cut:
            return super()._render_line(y, x1, x2, base_style)
        return super()._render_line(y, x1 + cut, x2 + cut, base_style).extend_cell_length(x2 - x1, base_style)

    def _get_label_region(self, line: int) -> Region | None:
        region = super()._get_label_region(line)
        return region.translate((-self._cut(line), 0)) if region is not None else None

    # -- labels -------------------------------------------------------------------------

    def label_for(self, item: Item, width: int | None = None) -> Text:
        return node_label(item.id, item.title, superseded=item.superseded, important=item.id in self.important,
                          marked=item.id in self.marked, child_count=item.child_count, width=width)

    def render_label(self, node: TreeNode[Any], base_style: Style, style: Style) -> Text:
        """The label cut to the tree's width at its title, so that the id is always whole."""
        slot = node.data
        if isinstance(slot, Slot) and slot.item is not None and node is not self.root and self.size.width:
            levels = 1 if self.show_root else 0
            parent = node.parent
            while parent is not None and parent is not self.root and levels < MAX_INDENT:
                levels += 1
                parent = parent.parent
            node._label = self.label_for(slot.item, self.size.width - levels * self.guide_depth - 3)
        return super().render_label(node, base_style, style)

    def relabel(self) -> None:
        """Redraw every loaded label (after the important list or the marks changed)."""
        for tree_node in self.nodes_by_id.values():
            slot = tree_node.data
            if isinstance(slot, Slot) and slot.item is not None:
                tree_node.set_label(self.label_for(slot.item))

    @staticmethod
    def more_label(remaining: int) -> Text:
        shown = min(remaining, PAGE)
        return Text(f"… {remaining:,} more — select to show {shown:,}", style="italic cyan")

    # -- structure -----------------------------------------------------------------------

    def set_children(self, parent: TreeNode[Any], items: list[Item]) -> None:
        """Make the children of `parent` match `items` (daemon order), keeping the tree
        nodes (and so the expansion and cursor) of memories that are still there."""
        slot = slot_of(parent)
        slot.items = items
        slot.loaded = True
        slot.shown = min(len(items), max(slot.shown, PAGE))
        target = items[:slot.shown]
        wanted = {it.id for it in target}
        for child in list(parent.children):
            data = child.data
            if isinstance(data, More) or (isinstance(data, Slot) and data.item and data.item.id not in wanted):
                self._forget(child)
                child.remove()
        existing = list(parent.children)
        j = 0
        for i, it in enumerate(target):
            if j < len(existing) and item_of(existing[j]).id == it.id:
                self._update(existing[j], it)
                j += 1
                continue
            stray = self.nodes_by_id.get(it.id)
            if stray is not None and stray.parent is parent:
                # order changed (should not happen: children come in creation order)
                self._forget(stray)
                stray.remove()
                existing = [c for c in existing if c is not stray]
            elif stray is not None:
                # it moved here from another parent that has not been refreshed yet
                self._forget(stray)
                stray.remove()
            node = parent.add(self.label_for(it), Slot(it), before=i, allow_expand=it.child_count > 0)
            self.nodes_by_id[it.id] = node
        remaining = len(items) - slot.shown
        if remaining > 0:
            parent.add(self.more_label(remaining), More(remaining), allow_expand=False)
        if parent.is_root:
            self.root.expand()

    def _update(self, tree_node: TreeNode[Any], item: Item) -> None:
        slot = slot_of(tree_node)
        old = slot.item
        slot.item = item
        if old != item:
            tree_node.set_label(self.label_for(item))
        tree_node.allow_expand = item.child_count > 0
        if item.child_count == 0 and tree_node.children:
            self.unload(tree_node)

    def unload(self, tree_node: TreeNode[Any]) -> None:
        """Drop the children of a node; they are fetched again when it is expanded."""
        for child in list(tree_node.children):
            self._forget(child)
        tree_node.remove_children()
        slot = slot_of(tree_node)
        slot.loaded = False
        slot.items = []
        slot.shown = 0

    def _forget(self, tree_node: TreeNode[Any]) -> None:
        data = tree_node.data
        if isinstance(data, Slot) and data.item is not None:
            if self.nodes_by_id.get(data.item.id) is tree_node:
                del self.nodes_by_id[data.item.id]
        for child in tree_node.children:
            self._forget(child)

    def show_more(self, more_node: TreeNode[Any]) -> None:
        parent = more_node.parent
        if parent is None:
            return
        slot = slot_of(parent)
        first_new = slot.shown
        slot.shown = min(len(slot.items), slot.shown + PAGE)
        self.set_children(parent, slot.items)
        if 0 <= first_new < len(parent.children):
            self.go_to(parent.children[first_new])

    def ensure_shown(self, parent: TreeNode[Any], node_id: str) -> TreeNode[Any] | None:
        """The tree node of child `node_id` of `parent`, paging further if it is not shown yet."""
        node = self.nodes_by_id.get(node_id)
        if node is not None and node.parent is parent:
            return node
        slot = slot_of(parent)
        index = next((n for n, it in enumerate(slot.items) if it.id == node_id), None)
        if index is None:
            return None
        slot.shown = min(len(slot.items), (index // PAGE + 1) * PAGE)
        self.set_children(parent, slot.items)
        return self.nodes_by_id.get(node_id)

    def go_to(self, tree_node: TreeNode[Any]) -> None:
        """Put the cursor on a node, even one added or revealed a moment ago."""
        self._tree_lines  # noqa: B018 - rebuilds the line numbers that move_cursor reads
        self.move_cursor(tree_node)
        self.scroll_to_node(tree_node, animate=False)

    def attached(self, tree_node: TreeNode[Any]) -> bool:
        """Whether the tree node is still in the tree (not removed by a refresh meanwhile)."""
        slot = tree_node.data
        if tree_node is self.root or not isinstance(slot, Slot) or slot.item is None:
            return tree_node is self.root
        return self.nodes_by_id.get(slot.item.id) is tree_node

    @property
    def cursor_item(self) -> Item | None:
        node = self.cursor_node
        if node is not None and isinstance(node.data, Slot):
            return node.data.item
        return None
