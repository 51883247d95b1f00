"""What every zcor screen shares: the bars, the refresh rules and palette commands.

A screen reloads when the connection comes (back) up and when zcord announces a change it
cares about (`WATCHES`); a screen that is not on display only marks itself stale and
reloads when it is shown again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Input

from ..format import parse_local, split_keywords
from ..messages import MemoryChanged
from ..widgets.bars import NavBar, StatusLine

if TYPE_CHECKING:
    from ..host import ZcorHost


class ZcorScreen(Screen[None]):
    """Base of the main screens."""

    BINDINGS = [Binding("escape", "focus_main", "Leave field", show=False, id="screen.focus_main",
                        tooltip="Leave the text field (so 1-7 switch screens again)")]
    MAIN: ClassVar[str] = ""
    """The selector of the widget that gets focus on Escape (the tree or the table)."""

    MODE: ClassVar[str] = ""
    HELP: ClassVar[str] = ""
    WATCHES: ClassVar[tuple[str, ...]] = ()
    """Change-kind prefixes (`node.`, `relationship.`…) that make this screen reload; () = all."""

    app: ZcorHost

    def __init__(self) -> None:
        super().__init__()
        self._stale = False

    def compose(self) -> ComposeResult:
        yield NavBar(self.MODE)
        yield from self.compose_body()
        yield StatusLine(id="status")
        # the screen's keys first: ^p (the palette) is in Help and needs no room at 80 columns
        yield Footer(show_command_palette=False)

    def compose_body(self) -> ComposeResult:
        yield from ()

    def on_mount(self) -> None:
        self.app.memory_changed.subscribe(self, self._memory_changed)
        self.app.connection_changed.subscribe(self, self._connection_changed)
        if self.app.connected:
            self.reload()

    def _memory_changed(self, message: MemoryChanged) -> None:
        if self.WATCHES and not message.touches(*self.WATCHES):
            return
        if self.is_current:
            self.reload(changed=message)
        else:
            self._stale = True

    def _connection_changed(self, up: bool) -> None:
        if not up:
            return
        if self.is_current:
            self.reload()
        else:
            self._stale = True

    def on_screen_resume(self) -> None:
        if self._stale and self.app.connected:
            self._stale = False
            self.reload()

    def action_focus_main(self) -> None:
        if self.MAIN:
            self.query_one(self.MAIN).focus()

    def keyword_time_args(self) -> dict[str, Any]:
        """keywords / from / to read from this screen's #q, #from and #to inputs (dates are
        local, sent with the UTC offset); ValueError names a date it could not read and
        marks its box invalid."""
        args: dict[str, Any] = {}
        keywords = split_keywords(self.query_one("#q", Input).value)
        if keywords:
            args["keywords"] = keywords
        for field, end in (("from", False), ("to", True)):
            box = self.query_one(f"#{field}", Input)
            try:
                value = parse_local(box.value, end=end)
            except ValueError as e:
                box.add_class("-invalid")
                raise ValueError(f"{field}: {e}") from None
            box.remove_class("-invalid")
            if value:
                args[field] = value
        return args

    def reload(self, changed: MemoryChanged | None = None) -> None:
        """Fetch what the screen shows (in a worker). `changed` is set for live updates."""

    def palette_commands(self) -> Iterable[SystemCommand]:
        """Commands for the palette that apply to this screen right now."""
        return ()
