"""The right-hand pane of Browse: everything about one memory, rendered as one Static."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.rule import Rule
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from ..format import SUPERSEDED_MARK, affinity_bar, one_line, plain, shown, shown_id, when

MAX_CHILDREN_SHOWN = 12
PATH_SHOWN = 10
"""Steps of a path shown in full; a deeper one shows its first two and its last eight."""


class NodeDetail(Static):
    """Path, title, keywords, times, children, links, content and source message of a memory."""

    def show_message(self, message: str) -> None:
        self.update(plain(message, style="dim italic"))

    def show(self, node: dict[str, Any], trace: dict[str, Any] | None, links: list[dict[str, Any]]) -> None:
        head = Text()
        head.append(node["id"], style="bold cyan")
        if node.get("important"):
            head.append("  ★ important", style="bold yellow")
        if node.get("supersededBy"):
            head.append(shown(f"  {SUPERSEDED_MARK}superseded by {node['supersededBy']}"), style="bold red")
        parts: list[Any] = [head]

        if trace and trace.get("path"):
            steps = trace["path"]
            path = Text("", style="dim")
            if len(steps) > 1:
                path.append(f"level {len(steps)}: ", style="italic")
            if len(steps) > PATH_SHOWN:  # a deep path: its ends, and how many levels between
                skipped = len(steps) - PATH_SHOWN
                steps = [*steps[:2], {"id": "", "title": f"… {skipped:,} levels …"}, *steps[-(PATH_SHOWN - 2):]]
            for n, step in enumerate(steps):
                if n:
                    path.append(" › ", style="dim")
                last = step["id"] == node["id"]
                # deep paths: every step stays readable, the shown memory in full
                path.append(one_line(step["title"], 40 if last or len(steps) <= 4 else 14),
                            style="bold" if last else "")
            parts.append(path)

        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(ratio=1)
        grid.add_row("Title", plain(node.get("title", "")))
        keywords = node.get("keywords") or []
        grid.add_row("Keywords", plain(" · ".join(keywords) if keywords else "—"))
        if node.get("parentId"):
            grid.add_row("Parent", plain(f"{node['parentId']} {one_line(node.get('parentTitle'))}".rstrip()))
        else:
            grid.add_row("Parent", Text("— (a root)", style="dim"))
        children = (trace or {}).get("children") or []
        count = node.get("childCount", len(children))
        if count:
            listed = Text(f"{count}: ")
            for n, child in enumerate(children[:MAX_CHILDREN_SHOWN]):
                if n:
                    listed.append(", ")
                listed.append(child["id"], style="cyan")
                if child.get("superseded"):
                    listed.append(f" {SUPERSEDED_MARK}{one_line(child['title'], 30)}", style="dim")
                else:
                    listed.append(f" {one_line(child['title'], 30)}")
            if count > MAX_CHILDREN_SHOWN:
                listed.append(f", … {count - MAX_CHILDREN_SHOWN} more", style="dim")
            grid.add_row("Children", listed)
        else:
            grid.add_row("Children", Text("none", style="dim"))
        scope = node.get("scope")
        if isinstance(scope, dict) and scope.get("session"):  # a private conversation's memory (issue 34)
            grid.add_row("Scope", plain(f"private to session {scope['session']} (p: change)", style="bold magenta"))
        grid.add_row("Created", when(node.get("createdAt")))
        grid.add_row("Updated", when(node.get("updatedAt")))
        if node.get("supersededBy"):
            grid.add_row("Superseded", plain(f"by {node['supersededBy']}: {node.get('supersedeReason') or ''}",
                                              style="red"))
        if links:
            people = Text()
            for n, rel in enumerate(links):
                if n:
                    people.append("\n")
                people.append_text(shown_id(rel["personId"]))
                people.append(f" {one_line(rel.get('name'), 60)} ")
                people.append_text(affinity_bar(rel.get("affinity", 0), half=5))
            grid.add_row("People", people)
        parts.append(grid)
        parts.append(Rule("content", style="dim", align="left"))
        parts.append(plain(node.get("content") or "(empty)", style="" if node.get("content") else "dim"))
        parts.append(Rule("source message", style="dim", align="left"))
        source = node.get("sourceMessage")
        parts.append(plain(source if source else "(none)", style="" if source else "dim"))
        self.update(Group(*parts))
