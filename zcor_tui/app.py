"""The zcor operator app: `ZcorApp(client)` (`zcor-tui` starts it: zcor_tui.launcher).

The App owns the daemon client (passed in, so tests drive the real UI against a real
daemon) and the connection: it connects (retrying until zcord answers), subscribes to
`zcor/changed`, keeps the status (`zcor/status`) and a cache of the relationships, and
tells the screens through signals when the Memory changed or the connection came back.
Every daemon call runs in a worker; `tool()` and `rpc()` turn daemon errors into
notifications instead of exceptions.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any

from rich.segment import Segment
from textual import events, work
from textual.app import SystemCommand
from textual.binding import Binding
from textual.color import Color
from textual.filter import LineFilter
from textual.keys import _character_to_key
from textual.markup import escape as escape_markup
from textual.screen import ModalScreen, Screen
from textual.widgets import Checkbox, Input, Select, Switch, TextArea

from zcord.client import (
    UNSAFE,
    AsyncClient,
    ClientError,
    shown,
)

from .host import ZcorHost
from .messages import ConnectionChanged, MemoryChanged, NodeRequested
from .screens.backups import BackupsScreen
from .screens.base import ZcorScreen
from .screens.browse import BrowseScreen
from .screens.config import ConfigScreen
from .screens.consolidate import ConsolidateScreen
from .screens.help import HelpScreen
from .screens.history import HistoryScreen
from .screens.relationships import RelationshipsScreen
from .screens.review import ReviewScreen
from .screens.search import SearchScreen
from .screens.synonyms import SynonymsScreen
from .screens.usage import UsageScreen

SCREENS_IN_ORDER: list[tuple[str, str, type[ZcorScreen]]] = [
    ("browse", "Browse", BrowseScreen),
    ("search", "Search", SearchScreen),
    ("history", "History", HistoryScreen),
    ("relationships", "Relationships", RelationshipsScreen),
    ("synonyms", "Synonyms", SynonymsScreen),
    ("config", "Config", ConfigScreen),
    ("backups", "Backups", BackupsScreen),
    ("review", "Review", ReviewScreen),
]
REL_PAGE = 100
FORM_FIELDS = (Input, TextArea, Select, Switch, Checkbox)
ALT_KEY = re.compile(r"alt\+(shift\+)?(.)")
"""Alt+one character: what Esc and a key typed at once are parsed as (ZcorApp.on_event)."""


class NoTerminalControls(LineFilter):
    """The last guard between Memory text and the terminal: a control character or bidi
    override that reached a drawn line anyway (every screen shows Memory text through
    `format.shown` first, which makes them visible) is dropped. They take no cells, so the
    line keeps its width."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        if not any(not seg.control and UNSAFE.search(seg.text) for seg in segments):
            return segments
        return [seg if seg.control else Segment(UNSAFE.sub("", seg.text), seg.style) for seg in segments]


class ZcorApp(ZcorHost):
    """The operator's view of one zcord: browse, search, history, relationships, synonyms, config, backups."""

    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses live elsewhere
    TITLE = "zcor"
    MODES = {**{mode: cls for mode, _, cls in SCREENS_IN_ORDER}, "usage": UsageScreen,
             "consolidate": ConsolidateScreen}
    DEFAULT_MODE = "browse"
    BINDINGS = [
        *(Binding(str(n), f"screen_key('{mode}')", title, show=False, id=f"app.{mode}",
                  tooltip=f"Show the {title} screen (not while a form field has focus: Esc leaves it)")
          for n, (mode, title, _) in enumerate(SCREENS_IN_ORDER, 1)),
        Binding("9", "screen_key('usage')", "Usage", show=False, id="app.usage",
                tooltip="Show the Usage screen: tokens per session and day, cache hits, what zcor added"),
        Binding("0", "screen_key('consolidate')", "Consolidate", show=False, id="app.consolidate",
                tooltip="Show the Consolidate screen: near-duplicates and superseded chains to merge or fold"),
        Binding("f1,question_mark", "help", "Help", id="app.help", tooltip="Keys and screens"),
        Binding("q", "quit", "Quit", id="app.quit", tooltip="Leave zcor-tui (a zcord it did not start keeps running)"),
    ]

    def __init__(self, client: AsyncClient, *, close_client: bool = True):
        """Args:
            client: an operator AsyncClient, not yet connected (the app connects it).
            close_client: close the client when the app exits.
        """
        super().__init__(client, close_client=close_client)
        self._filters.append(NoTerminalControls())
        self._keys_held = False
        """Keys read before an Esc's focus change took effect wait for it (on_event)."""
        self._was_connected = False

    # -- connection ------------------------------------------------------------------------

    def on_mount(self) -> None:
        self.client.on_connection_change(lambda up: self.post_message(ConnectionChanged(up)))
        self.client.on_notification("zcor/changed", lambda params: self.post_message(MemoryChanged(params)))
        self.connect_daemon()

    @work(exclusive=True, group="connect")
    async def connect_daemon(self) -> None:
        """Connect (retrying with backoff until zcord answers), then subscribe once; the
        client keeps the subscription across its own reconnects."""
        delay = 0.1
        while True:
            try:
                await self.client.connect()
                break
            except ClientError as e:
                self.link_state = "unreachable"
                self.link_detail = str(e)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
        while True:
            try:
                await self.client.subscribe()
                return
            except ClientError:
                await asyncio.sleep(0.5)

    def on_resize(self) -> None:
        # a short terminal (24 rows): one-line filter fields, so tables keep their rows (app.tcss)
        self.set_class(self.size.height < 30, "-short")

    def on_connection_changed(self, message: ConnectionChanged) -> None:
        if message.connected:
            self.link_state = "connected"
            self.link_detail = ""
            if self._was_connected:
                self.notify("Reconnected to zcord; screens refreshed.", title="zcord")
            self._was_connected = True
            self.refresh_status()
            self.load_relationships()
        else:
            self.link_state = "lost"
            self.link_detail = "the connection to zcord was lost; reconnecting…"
        self.connection_changed.publish(message.connected)

    def on_memory_changed(self, message: MemoryChanged) -> None:
        self.refresh_status(delay=0.1)
        if message.touches("relationship.", "state."):  # merges report their relinks as relationship.update
            self.load_relationships(delay=0.1)
        self.memory_changed.publish(message)

    @work(exclusive=True, group="status")
    async def refresh_status(self, delay: float = 0.0) -> None:
        if delay:
            await asyncio.sleep(delay)  # several changes in a burst: one status call
        status = await self.rpc(self.client.status(), quiet=True)
        if status is not None:
            self.status = dict(status)

    @work(exclusive=True, group="relationships")
    async def load_relationships(self, delay: float = 0.0) -> None:
        """Cache every relationship, so Browse can show which people link to a memory."""
        if delay:
            await asyncio.sleep(delay)
        found: dict[str, dict[str, Any]] = {}
        offset: int | None = 0
        while offset is not None:
            page = await self.tool(self.client.zcor_relationship_query({"limit": REL_PAGE, "offset": offset}), quiet=True)
            if page is None:
                return
            for rel in page["items"]:
                found[rel["personId"]] = rel
            offset = page.get("nextOffset")
        self.relationships = found
        self.relationships_version += 1

    async def on_unmount(self) -> None:
        if self.close_client:
            await self.client.close()

    # -- navigation ---------------------------------------------------------------------

    def on_node_requested(self, message: NodeRequested) -> None:
        self.show_node(message.node_id)

    def show_node(self, node_id: str) -> None:
        """Switch to Browse and reveal the memory there."""
        self.pending_reveal = node_id
        if self.current_mode == "browse":
            self.drop_detail_screens()
        if self.current_mode == "browse" and isinstance(self.screen, BrowseScreen):
            self.screen.take_pending_reveal()
        else:
            self.switch_mode("browse")

    async def on_event(self, event: events.Event) -> None:
        """Keys typed right after Esc, at machine speed, reach what Esc made current.

        Esc runs here, at once, through the bindings of the focus chain (a form field's
        screen moves the focus to its table, a dialog closes); the focus it moves changes in a
        callback queued behind keys already read, so those keys are queued again behind it.
        An Esc that arrives in one read with a letter is parsed as Alt+that letter, which
        nothing here binds: it is taken as the Esc and the letter it was.
        """
        if isinstance(event, events.Key) and not event.is_forwarded:
            if self._keys_held:
                self.post_message(events.Key(event.key, event.character))
                return
            alt = ALT_KEY.fullmatch(event.key)
            if alt or event.key == "escape":
                if not await self._check_bindings("escape"):
                    await super().on_event(events.Key("escape", "\x1b"))
                self._keys_held = True
                if alt:
                    char = alt.group(2).upper() if alt.group(1) else alt.group(2)
                    self.post_message(events.Key(char if char.isalnum() else _character_to_key(char), char))
                self.call_later(self._release_keys)
                return
        await super().on_event(event)

    def _release_keys(self) -> None:
        self._keys_held = False

    def action_screen_key(self, mode: str) -> None:
        self.switch_mode(mode)

    def drop_detail_screens(self) -> None:
        """Close the detail screens (Versions, Time travel) stacked on the current main screen."""
        while len(self.screen_stack) > 1 and not isinstance(self.screen, (ModalScreen, ZcorScreen)):
            self.pop_screen()

    def switch_mode(self, mode: str) -> Any:
        """Go to a main screen; a number key, the bar or the palette always lands on the screen
        named, never on a Versions screen left stacked on it (of another memory, by now)."""
        self.drop_detail_screens()
        if mode == self.current_mode:
            return None
        result = super().switch_mode(mode)
        self.drop_detail_screens()
        return result

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The number keys switch screens, except while a dialog is open or a form field has
        focus (a digit typed into Config's fields, or a switch toggled there, must not leave
        the screen)."""
        if action == "screen_key" and (isinstance(self.screen, ModalScreen) or isinstance(self.focused, FORM_FIELDS)):
            return False
        return super().check_action(action, parameters)

    def action_trust_levels(self) -> None:
        from .screens.trust import TrustList

        if not isinstance(self.screen, TrustList):
            self.push_screen(TrustList())

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(ZcorApp.BINDINGS, SCREENS_IN_ORDER))

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        # the palette reads a command's title and help as markup: both may quote Memory text
        for command in self._system_commands(screen):
            yield command._replace(title=escape_markup(shown(command.title, lines=False)),
                                   help=escape_markup(shown(command.help, lines=False)))

    def _system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        # Textual's own, but "Screenshot": it writes an SVG into whatever directory zcor-tui ran in
        yield from (c for c in super().get_system_commands(screen) if c.title != "Screenshot")
        for mode, title, cls in SCREENS_IN_ORDER:
            if mode != self.current_mode:
                yield SystemCommand(f"Go to {title}", cls.HELP, partial(self.switch_mode, mode))
        if self.current_mode != "usage":
            yield SystemCommand("Go to Usage", UsageScreen.HELP, partial(self.switch_mode, "usage"))
        yield SystemCommand("Trust levels", "Every sender with a trust level of its own; change or reset them",
                            self.action_trust_levels)
        if self.current_mode != "consolidate":
            yield SystemCommand("Go to Consolidate", ConsolidateScreen.HELP, partial(self.switch_mode, "consolidate"))
        yield SystemCommand("Help", "Keys and screens of zcor-tui", self.action_help)
        if isinstance(screen, ZcorScreen):
            yield from screen.palette_commands()
