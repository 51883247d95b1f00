"""Browse: the memory forest on the left, the selected memory on the right, and every
edit an operator makes to memories (new, edit, move, delete, important, merge, supersede).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, cast

from textual import on, work
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.css.query import NoMatches
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from zcord.client import (
    ChildrenArgs,
    ClientError,
    MergeArgs,
    SupersedeArgs,
    ToolError,
    WriteArgs,
    for_operator,
)

from ..format import invisible_marked, one_line
from ..messages import MemoryChanged
from ..widgets.memory_tree import DEEP, LEVELS_ABOVE, Item, MemoryTree, More, Slot, slot_of
from ..widgets.node_detail import NodeDetail
from .base import ZcorScreen
from .dialogs import ConfirmDialog, MergeForm, NodeForm, NodePicker, PromptDialog, SupersedeForm
from .timetravel import TimeTravelScreen
from .versions import VersionsScreen

DETAIL_DELAY = 0.12
"""Seconds the cursor must rest on a memory before it is read (each read is logged)."""
EMPTY_HINT = ("The Memory is empty. Press N to write the first memory (a new root); n then adds one under "
              "the selected memory. What the bot remembers appears here by itself.")


class BrowseScreen(ZcorScreen):
    MODE = "browse"
    MAIN = "#tree"
    HELP = "The memory tree and the selected memory"
    BINDINGS = [
        Binding("n", "new_child", "New", id="browse.new_child", tooltip="New memory under the selected one"),
        # the footer keeps to what fits 80 columns; N, M and the rest are in Help (f1) and the palette
        Binding("N", "new_root", "New root", show=False, id="browse.new_root", tooltip="New memory at the top level"),
        Binding("e", "edit", "Edit", id="browse.edit", tooltip="Edit title, content, keywords, parent, source"),
        Binding("m", "move", "Move", id="browse.move", tooltip="Give the selected memory another parent"),
        Binding("d,delete", "delete", "Delete", id="browse.delete",
                tooltip="Delete (a memory with children: says so and keeps it; zcord refuses while people link it)"),
        Binding("i", "important", "★", id="browse.important", tooltip="Mark or unmark important (max 5)"),
        Binding("x", "mark", "Mark", show=False, id="browse.mark", tooltip="Mark memories to merge or supersede"),
        Binding("M", "merge", "Merge", show=False, id="browse.merge", tooltip="Merge the marked memories into a new one"),
        Binding("S", "supersede", "Supersede", id="browse.supersede",
                tooltip="Mark the marked memories as replaced by another"),
        Binding("g", "goto", "Go to", id="browse.goto", tooltip="Show a memory by its id"),
        Binding("K", "rederive", "Re-derive keywords", show=False, id="browse.rederive",
                tooltip="Derive the keywords of the selected memory and everything under it from their titles again"),
        Binding("r", "reload", "Refresh", show=False, id="browse.reload", tooltip="Reload the tree"),
        Binding("h", "versions", "Versions", show=False, id="browse.versions",
                tooltip="Every version of the selected memory: diffs between any two, restore one"),
        Binding("backspace", "up", "Up a level", show=False, id="browse.up",
                tooltip="After a deep memory was shown: start the tree one level higher"),
        Binding("T", "time_travel", "Time travel", show=False, id="browse.time_travel",
                tooltip="The tree as it was at an instant you give (read-only)"),
        Binding("p", "scope", "Scope", show=False, id="browse.scope",
                tooltip="Where the selected memory is visible: everywhere, or one (private) session only"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.shown_node: dict[str, Any] | None = None
        """The memory shown in the detail pane (a `zcor_memory_read` result)."""
        self.trace: dict[str, Any] | None = None
        self.edits = BrowseEdits(self)
        self.paths = TreePaths(self)

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="browse-body"):
            yield MemoryTree(id="tree")
            with VerticalScroll(id="detail-scroll"):
                yield NodeDetail(id="detail")

    @property
    def tree(self) -> MemoryTree:  # type: ignore[override]  # the memory tree; DOMNode.tree (a debug view of the DOM) is not used on screens
        return self.query_one("#tree", MemoryTree)

    def on_mount(self) -> None:
        self.query_one("#detail", NodeDetail).show_message("Select a memory to see it here.")
        self.watch(self.app, "status", self._status_changed, init=False)
        self.watch(self.app, "relationships_version", self._links_changed, init=False)
        self.tree.focus()

    def on_screen_resume(self) -> None:
        self.take_pending_reveal()

    def take_pending_reveal(self) -> None:
        node_id, self.app.pending_reveal = self.app.pending_reveal, None
        if node_id:
            self.reveal(node_id)

    def _status_changed(self, status: dict[str, Any] | None) -> None:
        important = set(self.app.important)
        if important != self.tree.important:
            self.tree.important = important
            self.tree.relabel()

    def _links_changed(self, _: int) -> None:
        if self.shown_node is not None:
            self._render_detail()

    # -- loading --------------------------------------------------------------------------

    def reload(self, changed: MemoryChanged | None = None) -> None:
        self.sync_tree(delay=0.15 if changed else 0.0)

    def action_reload(self) -> None:
        self.sync_tree()

    async def _fetch_children(self, tree_node: TreeNode[Any]) -> list[Item] | None:
        slot = slot_of(tree_node)
        args = {"parentId": slot.item.id} if slot.item else {}
        result, err = await self.app.try_tool(self.app.client.zcor_memory_children(cast(ChildrenArgs, args)))
        if result is None:
            if err is not None and not (slot.item and getattr(err, "code", "") == "not_found"):
                self.app.show_error(err, "zcor_memory_children")
            return None
        return [Item.from_dict(d) for d in result["items"]]

    async def load_children(self, tree_node: TreeNode[Any]) -> bool:
        slot = slot_of(tree_node)
        slot.loading = True
        try:
            items = await self._fetch_children(tree_node)
        finally:
            slot.loading = False
        if items is None:
            return False
        self.tree.set_children(tree_node, items)
        return True

    @work(exclusive=True, group="sync")
    async def sync_tree(self, delay: float = 0.0) -> None:
        """Refetch every level the operator has open and fold the answer into the tree."""
        await self.paths.sync(delay)

    @on(Tree.NodeExpanded)
    def _expanded(self, event: Tree.NodeExpanded[Any]) -> None:
        slot = event.node.data
        if isinstance(slot, Slot) and slot.item is not None and not slot.loaded and not slot.loading:
            self.run_worker(self.load_children(event.node), group="children")

    @on(Tree.NodeHighlighted)
    def _highlighted(self, event: Tree.NodeHighlighted[Any]) -> None:
        slot = event.node.data
        if isinstance(slot, Slot) and slot.item is not None:
            self.app.selected_node = (slot.item.id, slot.item.title)
            self.load_detail(slot.item.id)

    @on(Tree.NodeSelected)
    def _selected(self, event: Tree.NodeSelected[Any]) -> None:
        if isinstance(event.node.data, More):
            self.tree.show_more(event.node)

    @work(exclusive=True, group="detail")
    async def load_detail(self, node_id: str, delay: float = DETAIL_DELAY) -> None:
        if delay:
            await asyncio.sleep(delay)  # the cursor is still moving: read only where it rests
        node, err = await self.app.try_tool(self.app.client.zcor_memory_read({"id": node_id}))
        detail = self._detail()
        if detail is None:
            return
        if node is None:
            self.shown_node = self.trace = None
            message = for_operator(err.code, err.message, data=err.data) if isinstance(err, ToolError) else str(err)
            detail.show_message(f"{node_id}: {message}")
            return
        self.shown_node = dict(node)
        trace = await self.app.tool(self.app.client.zcor_memory_trace({"id": node_id}), quiet=True)
        self.trace = None if trace is None else dict(trace)
        self._render_detail()

    def _detail(self) -> NodeDetail | None:
        """The detail pane, or None while the screen is being torn down (a late worker)."""
        try:
            return self.query_one("#detail", NodeDetail)
        except NoMatches:
            return None

    def _render_detail(self) -> None:
        detail = self._detail()
        if self.shown_node is None or detail is None:
            return
        detail.show(self.shown_node, self.trace, self.app.links_for(self.shown_node["id"]))

    @work(exclusive=True, group="reveal")
    async def reveal(self, node_id: str) -> None:
        """Open the path to a memory and put the cursor on it (TreePaths.reveal)."""
        await self.paths.reveal(node_id)

    @work(exclusive=True, group="reveal")
    async def action_up(self) -> None:
        """The tree starts one level higher (after a deep memory was shown)."""
        await self.paths.up()

    # -- actions ----------------------------------------------------------------------------

    def _current(self) -> Item | None:
        return self.tree.cursor_item

    def _need_current(self) -> Item | None:
        item = self._current()
        if item is None:
            self.notify("Select a memory first.", severity="warning")
        return item

    async def _write(self, args: dict[str, Any]) -> dict[str, Any]:
        return dict(await self.app.client.zcor_memory_write(cast(WriteArgs, args)))

    def _after_write(self, result: dict[str, Any] | None) -> None:
        if result:
            verb = "Created" if result.get("created") else "Saved"
            self.notify(f"{verb} {result['id']} “{one_line(result['title'], 40)}”.")
            self.reveal(result["id"])

    def action_new_child(self) -> None:
        item = self._current()
        self.app.push_screen(NodeForm(self._write, parent_id=item.id if item else None), self._after_write)

    def action_new_root(self) -> None:
        self.app.push_screen(NodeForm(self._write), self._after_write)

    @work(exclusive=True, group="action")
    async def action_edit(self) -> None:
        await self.edits.edit()

    @work(exclusive=True, group="action")
    async def action_move(self) -> None:
        await self.edits.move()

    @work(exclusive=True, group="action")
    async def action_delete(self) -> None:
        await self.edits.delete()

    @work(exclusive=True, group="action")
    async def action_rederive(self) -> None:
        """Re-derive keywords from titles for the selected subtree (`keywords: null` per memory)."""
        await self.edits.rederive()

    @work(exclusive=True, group="action")
    async def action_important(self) -> None:
        await self.edits.important()

    def action_mark(self) -> None:
        item = self._need_current()
        if item is None:
            return
        marked = self.tree.marked
        if item.id in marked:
            marked.remove(item.id)
        else:
            marked.append(item.id)
        self.tree.relabel()
        self.notify(f"Marked: {', '.join(marked)}" if marked else "No memories marked.", timeout=3)

    def _selection(self) -> list[str]:
        marked = list(self.tree.marked)
        if marked:
            return marked
        item = self._current()
        return [item.id] if item else []

    @work(exclusive=True, group="action")
    async def action_merge(self) -> None:
        await self.edits.merge()

    @work(exclusive=True, group="action")
    async def action_supersede(self) -> None:
        await self.edits.supersede()

    @work(exclusive=True, group="action")
    async def action_goto(self) -> None:
        node_id = await self.app.push_screen_wait(PromptDialog("Go to memory id", placeholder="e.g. m17, or 17"))
        if node_id:
            bare = node_id.isascii() and node_id.isdigit()  # `12` means m12
            self.reveal(f"m{node_id}" if bare else node_id)

    @work(exclusive=True, group="action")
    async def action_scope(self) -> None:
        """Where the selected memory is visible (BrowseEdits.scope)."""
        await self.edits.scope()

    def action_versions(self) -> None:
        item = self._need_current()
        if item is not None:
            self.app.push_screen(VersionsScreen(item.id, item.title))

    def action_time_travel(self) -> None:
        self.app.push_screen(TimeTravelScreen())

    def palette_commands(self) -> Iterable[SystemCommand]:
        yield SystemCommand("New root memory", "Create a memory at the top level", self.action_new_root)
        yield SystemCommand("Go to memory id", "Reveal a memory in the tree by its id", self.action_goto)
        item = self._current()
        if item is None:
            return
        yield SystemCommand(f"New memory under {item.id}", "Create a child of the selected memory",
                            self.action_new_child)
        yield SystemCommand(f"Edit {item.id}", "Edit the selected memory", self.action_edit)
        yield SystemCommand(f"Move {item.id}", "Give the selected memory another parent", self.action_move)
        yield SystemCommand(f"Delete {item.id}", "Delete the selected memory", self.action_delete)
        yield SystemCommand(f"Scope of {item.id}", "Visible everywhere, or in one session only", self.action_scope)
        important = item.id in self.app.important
        yield SystemCommand(f"{'Unmark' if important else 'Mark'} {item.id} important",
                            "At most 5 important memories", self.action_important)
        if len(self.tree.marked) >= 2:
            yield SystemCommand("Merge marked memories", ", ".join(self.tree.marked), self.action_merge)
        if self.tree.marked:
            yield SystemCommand("Supersede marked memories", ", ".join(self.tree.marked), self.action_supersede)


class TreePaths:
    """Opening Browse's tree down to a memory (a part of BrowseScreen, `paths`): the path to
    it, loaded level by level, with the tree started a few levels above a deep one; and
    starting it one level higher again. Runs in the screen's reveal worker."""

    def __init__(self, screen: BrowseScreen) -> None:
        self.screen = screen

    async def reveal(self, node_id: str) -> None:
        """Open the path to a memory and put the cursor on it."""
        host = self.screen
        trace = await host.app.tool(host.app.client.zcor_memory_trace({"id": node_id}))
        if trace is None:
            return
        tree = host.tree
        path = trace["path"]
        start = self._base_for(path)
        parent: TreeNode[Any] = tree.root
        target: TreeNode[Any] | None = None
        for n, step in enumerate(path[start:], start):
            if not slot_of(parent).loaded and not await host.load_children(parent):
                return
            target = tree.ensure_shown(parent, step["id"])
            if target is None:  # new since the parent was loaded
                if not await host.load_children(parent):
                    return
                target = tree.ensure_shown(parent, step["id"])
            if target is None:
                host.notify(f"{step['id']} is not under its parent any more; press r to refresh.",
                            severity="warning")
                return
            if n < len(path) - 1:
                if not slot_of(target).loaded and not await host.load_children(target):
                    return
                target.expand()
                parent = target
        if target is not None:
            tree.go_to(target)
            tree.focus()
            host.load_detail(node_id, delay=0)

    def _base_for(self, path: list[dict[str, Any]]) -> int:
        """Where in `path` the tree must start so that no more than DEEP levels are open:
        the current start when the memory is not too far below it, else a few levels above
        the memory (or the roots for a shallow one). Returns the index of the first step
        the tree shows as a top line."""
        host = self.screen
        tree = host.tree
        base = tree.base
        at = next((n for n, step in enumerate(path[:-1]) if base is not None and step["id"] == base.id), None)
        if at is not None and len(path) - at <= DEEP:
            return at + 1
        if len(path) <= DEEP:
            tree.set_base(None)
            return 0
        n = len(path) - 1 - LEVELS_ABOVE
        tree.set_base(Item(path[n]["id"], str(path[n].get("title", "")), child_count=1), depth=n)
        return n + 1

    async def sync(self, delay: float = 0.0) -> None:
        """Refetch every level the operator has open and fold the answer into the tree."""
        host = self.screen
        if delay:
            await asyncio.sleep(delay)  # a burst of changes (a merge) needs one pass
        tree = host.tree
        first = not slot_of(tree.root).loaded
        level: list[TreeNode[Any]] = [tree.root]
        while level:
            results = await asyncio.gather(*(host._fetch_children(n) for n in level))
            next_level: list[TreeNode[Any]] = []
            for tree_node, items in zip(level, results):
                if items is None or not tree.attached(tree_node):
                    continue
                tree.set_children(tree_node, items)
                for child in tree_node.children:
                    slot = child.data
                    if isinstance(slot, Slot) and slot.loaded:
                        if child.is_expanded:
                            next_level.append(child)
                        else:
                            slot.loaded = False  # stale: refetched when it is expanded again
            level = next_level
        if first and tree.cursor_line < 0 and tree.root.children:
            tree.go_to(tree.root.children[0])
        if host.app.pending_reveal:
            host.take_pending_reveal()
            return
        current = tree.cursor_item
        if current is not None and (first or host.shown_node is not None):
            # the cursor's memory, which is a neighbour when the one shown was deleted
            host.app.selected_node = (current.id, current.title)
            host.load_detail(current.id, delay=0)
        elif current is None:
            host.shown_node = host.trace = None
            detail = host._detail()
            if detail is not None:
                detail.show_message(EMPTY_HINT if not tree.root.children else "Select a memory to see it here.")

    async def up(self) -> None:
        """The tree starts one level higher (after a deep memory was shown)."""
        host = self.screen
        base = host.tree.base
        if base is None:
            return
        trace = await host.app.tool(host.app.client.zcor_memory_trace({"id": base.id}))
        if trace is None:
            return
        path = trace["path"]
        above = path[-2] if len(path) > 1 else None
        current = host.tree.cursor_item
        host.tree.set_base(Item(above["id"], str(above.get("title", "")), child_count=1) if above else None,
                           depth=len(path) - 2)
        host.reveal(current.id if current is not None else base.id)


class BrowseEdits:
    """Browse's edits of memories (a part of BrowseScreen, `edits`): edit, move, delete,
    re-derive keywords, mark important, merge, supersede. Each runs in the screen's action
    worker (BrowseScreen.action_*), so it may wait for a dialog."""

    def __init__(self, screen: BrowseScreen) -> None:
        self.screen = screen

    async def edit(self) -> None:
        host = self.screen
        item = host._need_current()
        if item is None:
            return
        node = await host.app.tool(host.app.client.zcor_memory_read({"id": item.id}))
        if node is None:
            return
        if node.get("supersededBy"):
            host.notify(f"{item.id} was superseded by {node['supersededBy']}; edit that one instead.",
                        severity="warning")
            return
        host._after_write(await host.app.push_screen_wait(NodeForm(host._write, node=dict(node))))

    async def move(self) -> None:
        host = self.screen
        item = host._need_current()
        if item is None:
            return
        node = await host.app.tool(host.app.client.zcor_memory_read({"id": item.id}))
        if node is None:
            return
        parent = node.get("parentId")
        target = await host.app.push_screen_wait(  # not itself, nor where it already is
            NodePicker(f"Move {item.id} “{one_line(item.title, 30)}” under…", allow_root=parent is not None,
                       exclude={item.id, parent} if parent else {item.id}))
        if target is None or target == (parent or ""):
            return
        result = await host.app.tool(host.app.client.zcor_memory_write({"id": item.id, "title": node["title"],
                                                           "content": node["content"], "parentId": target or None}))
        if result:
            host.notify(f"Moved {item.id} " + (f"under {target}." if target else "to the top level."))
            host.reveal(item.id)

    async def delete(self) -> None:
        host = self.screen
        item = host._need_current()
        if item is None:
            return
        children = await host.app.tool(host.app.client.zcor_memory_children({"parentId": item.id}))
        if children is None:
            return
        if children["items"]:
            kids = children["items"]
            shown = ", ".join(f"{c['id']} “{one_line(c['title'], 20)}”" for c in kids[:5])
            more = f" and {len(kids) - 5} more" if len(kids) > 5 else ""
            host.notify(f"{item.id} “{one_line(item.title, 30)}” has {len(kids)} "
                        f"{'child' if len(kids) == 1 else 'children'}: {shown}{more}. Move (m) or delete them "
                        f"first; zcord deletes only memories without children.",
                        title="Not deleted", severity="warning", timeout=15)
            return
        links = host.app.links_for(item.id)
        if links:  # zcord refuses the delete: say so before asking
            people = ", ".join(f"{invisible_marked(r['personId'])} ({one_line(r.get('name'), 20)})" for r in links[:5])
            host.notify(f"{item.id} “{one_line(item.title, 30)}” is linked from {people}. Unlink it in "
                        f"Relationships (4) first; zcord deletes only memories no relationship links to.",
                        title="Not deleted", severity="warning", timeout=10)
            return
        neighbour = self._neighbour(item.id)
        if not await host.app.push_screen_wait(ConfirmDialog(
                f"Delete {item.id} “{one_line(item.title, 50)}”?\nThe history keeps a full copy.", yes="Delete")):
            return
        result, err = await host.app.try_tool(host.app.client.zcor_memory_delete({"id": item.id}))
        if err is not None:
            # say the refusal plainly: "Memory m1 cannot be deleted: it has 3 children (…)"
            message = for_operator(err.code, err.message, data=err.data) if isinstance(err, ToolError) else str(err)
            host.notify(message, title="Not deleted", severity="error", timeout=15)
            return
        assert result is not None  # try_tool gives a result or an error
        host.notify(f"Deleted {item.id}." + (" It was important; its mark is gone." if result.get("wasImportant")
                                            else ""))
        tree = host.tree
        if neighbour is not None and tree.attached(neighbour):
            tree.go_to(neighbour)  # the tree keeps the cursor on it when the deleted line goes
        host.sync_tree()

    def _neighbour(self, node_id: str) -> TreeNode[Any] | None:
        """Where the cursor goes when a memory is deleted: the next sibling, else the previous, else the parent."""
        host = self.screen
        tree_node = host.tree.nodes_by_id.get(node_id)
        if tree_node is None or tree_node.parent is None:
            return None
        siblings = [c for c in tree_node.parent.children if isinstance(c.data, Slot)]
        at = siblings.index(tree_node)
        if at + 1 < len(siblings):
            return siblings[at + 1]
        if at > 0:
            return siblings[at - 1]
        return tree_node.parent if tree_node.parent is not host.tree.root else None

    async def rederive(self) -> None:
        """Re-derive keywords from titles for the selected subtree (`keywords: null` per memory)."""
        host = self.screen
        item = host._need_current()
        if item is None:
            return
        ids, queue = [], [item.id]
        while queue:
            node_id = queue.pop(0)
            ids.append(node_id)
            children = await host.app.tool(host.app.client.zcor_memory_children({"parentId": node_id}))
            if children is None:
                return
            queue += [c["id"] for c in children.get("items", []) if not c.get("superseded")]
        if not await host.app.push_screen_wait(ConfirmDialog(
                f"Derive the keywords of {len(ids)} memor{'y' if len(ids) == 1 else 'ies'} under and including "
                f"{item.id} “{one_line(item.title, 40)}” from their titles again?\nHand-picked keywords are "
                f"replaced; the history keeps the old ones.", yes="Re-derive")):
            return
        done = 0
        for node_id in ids:
            node = await host.app.tool(host.app.client.zcor_memory_read({"id": node_id}))
            if node is None or node.get("supersededBy"):
                continue
            if await host.app.tool(host.app.client.zcor_memory_write({"id": node_id, "title": node["title"],
                                                         "content": node["content"], "keywords": None})) is None:
                break
            done += 1
        host.notify(f"Keywords derived again for {done} of {len(ids)} memories.")
        host.load_detail(item.id, delay=0)

    async def important(self) -> None:
        host = self.screen
        item = host._need_current()
        if item is None:
            return
        mark = item.id not in host.app.important
        result = await host.app.tool(host.app.client.zcor_memory_important({"id": item.id, "important": mark}))
        if result is None:
            return
        if result.get("replaced"):
            replaced = result["replaced"]
            host.notify(result.get("reminder") or "", severity="warning", timeout=20,
                        title=f"★ {item.id} marked; {replaced['id']} “{one_line(replaced['title'], 30)}” unmarked")
        elif not result.get("changed"):
            host.notify(f"{item.id} was already {'marked' if mark else 'not marked'}.")
        else:
            host.notify(f"★ {item.id} marked important." if mark else f"{item.id} is no longer important.")

    async def merge(self) -> None:
        host = self.screen
        ids = host._selection()
        if len(ids) < 2:
            host.notify("Mark two or more memories with x, then merge.", severity="warning")
            return
        nodes = [n for n in await asyncio.gather(*(host.app.tool(host.app.client.zcor_memory_read({"id": i})) for i in ids)) if n]
        title = nodes[0]["title"] if nodes else ""
        content = "\n\n".join(n["content"] for n in nodes)

        async def merge(args: dict[str, Any]) -> dict[str, Any]:
            return dict(await host.app.client.zcor_memory_merge(cast(MergeArgs, args)))

        result = await host.app.push_screen_wait(MergeForm(merge, ids, title, content))
        if result:
            host.tree.marked.clear()
            host.tree.relabel()
            moved = result.get("movedChildren") or []
            host.notify(f"Merged {', '.join(result['superseded'])} into {result['id']}"
                        + (f"; moved {len(moved)} children" if moved else "") + ".")
            host.reveal(result["id"])

    async def supersede(self) -> None:
        host = self.screen
        ids = host._selection()
        if not ids:
            host.notify("Mark the memories to supersede with x (or select one).", severity="warning")
            return

        async def supersede(args: dict[str, Any]) -> dict[str, Any]:
            return dict(await host.app.client.zcor_memory_supersede(cast(SupersedeArgs, args)))

        result = await host.app.push_screen_wait(SupersedeForm(supersede, ids))
        if result:
            host.tree.marked.clear()
            host.tree.relabel()
            host.notify(f"{', '.join(result['superseded'])} superseded by {result['replacementId']}.")

    async def scope(self) -> None:
        """Where the selected memory is visible: everywhere, or one (private) session only."""
        host = self.screen
        item = host._need_current()
        if item is None:
            return
        now = (host.shown_node or {}).get("scope") if (host.shown_node or {}).get("id") == item.id else None
        current = now.get("session", "") if isinstance(now, dict) else ""
        answer = await host.app.push_screen_wait(PromptDialog(
            f"Scope of {item.id}: a session name keeps it to that session; `everywhere` shares it",
            value=current or "everywhere", placeholder="everywhere, or a session such as qq:private:42"))
        if not answer:
            return
        scope: Any = "everywhere" if answer == "everywhere" else {"session": answer}
        try:
            result = await host.app.client.scope_set(item.id, scope)
        except ClientError as e:
            host.app.show_error(e, "zcor/scope/set")
            return
        where = "visible everywhere" if result["scope"] == "everywhere" else \
            f"private to session {result['scope']['session']}"
        host.notify(f"{item.id} is now {where} (operation {result['seq']}; History can revert it).")
        host.load_detail(item.id, delay=0)
