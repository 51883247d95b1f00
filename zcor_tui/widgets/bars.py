"""The bars every screen shows: the screen switcher on top and the status line below."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Static

from ..format import plural

SCREENS = [("browse", "Browse"), ("search", "Search"), ("history", "History"),
           ("relationships", "Relationships"), ("synonyms", "Synonyms"), ("config", "Config"), ("backups", "Backups"),
           ("review", "Review")]
NARROW = 90
"""Below this width the bar drops its padding and shortens a name so all eight screens fit 80
columns, and the status line keeps only what is not on a screen of its own."""
SHORT = {"relationships": "Relations"}


class NavBar(Static):
    """`1 Browse  2 Search …`: the current screen lit; click or press the number to switch."""

    def __init__(self, current: str):
        super().__init__(self._markup(current), id="nav", markup=True)
        self.current = current

    def on_mount(self) -> None:
        self.watch(self.app, "status", self._redraw, init=False)

    def on_resize(self) -> None:
        self._redraw()

    def _redraw(self, *_: Any) -> None:
        pending = int((getattr(self.app, "status", None) or {}).get("pendingReview") or 0)
        self.update(self._markup(self.current, narrow=self.size.width < NARROW, pending=pending))

    @staticmethod
    def _markup(current: str, narrow: bool = False, pending: int = 0) -> str:
        parts = []
        pad = "" if narrow else " "
        for n, (mode, title) in enumerate(SCREENS, 1):
            style = "bold $text on $primary" if mode == current else "$text-muted"
            if narrow:
                title = SHORT.get(mode, title)
            if mode == "review" and pending:
                if mode != current:
                    style = "bold $warning"  # changes wait for the operator: the bar says so
                if not narrow:
                    title += f" ({pending:,})"
            parts.append(f"[@click=app.switch_mode('{mode}')][{style}]{pad}{n} {title}{pad}[/][/]")
        return (" " if narrow else "").join(parts) + ("" if narrow else "  [$text-muted]? help[/]")


class StatusLine(Static):
    """Connection state, Memory directory and counts (nothing that changes by itself, like
    uptime: the line changes only when the Memory or the connection does)."""

    def on_mount(self) -> None:
        for attr in ("link_state", "link_detail", "status"):
            self.watch(self.app, attr, self._changed, init=False)
        self._changed()

    def on_resize(self) -> None:
        self._changed()

    def _changed(self, *_: Any) -> None:
        app: Any = self.app  # a ZcorApp, read by name (its reactives)
        state = getattr(app, "link_state", "connecting")
        status = getattr(app, "status", None) or {}
        self.set_class(state != "connected", "-down")
        line = Text(no_wrap=True, overflow="ellipsis")
        if state == "connected":
            line.append("● connected", style="bold green")
        elif state == "connecting":
            line.append("… connecting to zcord", style="bold")
        elif state == "unreachable":
            line.append("○ zcord not answering — retrying", style="bold")
            line.append("  start it: zcor-tui --with-daemon, or systemctl start zcord (the service)", style="yellow")
        else:
            line.append("○ connection lost — reconnecting", style="bold")
        if status:
            narrow = 0 < self.size.width < NARROW
            pending = int(status.get("pendingReview") or 0)
            if pending:
                line.append(f"  {pending:,} held for review (8)", style="bold yellow")
            nodes, current = status.get("nodes", 0), status.get("currentNodes", 0)
            line.append(f"  {plural(nodes, 'memory', 'memories')}")
            if current != nodes and not narrow:
                line.append(f" ({current:,} current)")
            line.append(f" · ★ {len(status.get('important') or [])}/5")
            if not narrow:  # at 80 columns the counts their own screens show give way to the path
                line.append(f" · {plural(status.get('relationships', 0), 'relationship')}")
                line.append(f" · {plural(status.get('synonymGroups', 0), 'synonym group')}")
            line.append("  ")
            path = app.display_path(str(status.get("memoryDir", "")))
            room = self.size.width - 2 - line.cell_len
            if narrow and len(path) > room > 8:  # the end of a path names the Memory: keep it
                path = "…" + path[len(path) - room + 1:]
            line.append(path, style="bold")
        elif state != "connected" and getattr(app, "link_detail", ""):
            line.append(f"  {app.link_detail}")
        self.update(line)
