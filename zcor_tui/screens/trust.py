"""Per-sender trust in the TUI (issue 35): `TrustForm`, which gives a sender a level (or
takes theirs away), opened from a History record's sender, a Review item's and a
relationship's person (`t` on each); and `TrustList`, every sender with a level of its own
(`zcor/trust/get`), opened from Review (`L`) and the command palette.

A level is set with `zcor/trust/set`; the levels mean what docs/reference.md says: trusted
and normal change nothing, untrusted holds the changes a sender causes for review, blocked
refuses them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input, Select, Static

from zcord.client import ClientError

from ..format import invisible_marked, shown
from ..widgets.field import Field
from ..widgets.rows import add_columns, cursor_key, move_to, row_table
from .dialogs import FormDialog, field_row

if TYPE_CHECKING:
    from ..app import ZcorApp

LEVELS = (("trusted", "trusted: as without levels"),
          ("normal", "normal: as without levels"),
          ("untrusted", "untrusted: their changes are held for review"),
          ("blocked", "blocked: their changes are refused, their messages recall nothing"))
DEFAULT = ""
"""The Select value for "no level of its own" (zcor/trust/set level null)."""


class TrustForm(FormDialog):
    """Give one sender a trust level; dismisses with zcord's answer {sender, level, explicit}."""

    FIELDS = {"sender": "sender", "level": "level"}

    def __init__(self, senders: list[str], listing: dict[str, Any]):
        """Args:
            senders: the senders to choose from (the first is chosen; [] : typed in).
            listing: zcord's `zcor/trust/get` answer (the current levels and the default).
        """
        super().__init__("Trust level of a sender", self._save, save_label="Set")
        self.senders = senders
        self.default = str(listing.get("default") or "normal")
        self.levels = {s["sender"]: s["level"] for s in listing.get("senders") or []}

    def compose_fields(self) -> ComposeResult:
        if len(self.senders) > 1:
            yield field_row("Sender", Select([(invisible_marked(s), s) for s in self.senders], value=self.senders[0],
                                             allow_blank=False, id="sender", compact=True))
        else:
            yield field_row("Sender", Field(self.senders[0] if self.senders else "", id="sender", compact=True,
                                            disabled=bool(self.senders), placeholder="a sender key, e.g. qq:42"))
        yield field_row("Level", Select([*((label, level) for level, label in LEVELS),
                                         (f"the default ({self.default}, config defaultTrust)", DEFAULT)],
                                        value=DEFAULT, allow_blank=False, id="level", compact=True))
        yield Static("", id="trust-now", classes="hint")

    def on_mount(self) -> None:
        self.query_one("#dialog-error").display = False
        self._show_current()
        self.query_one("#level" if self.senders else "#sender").focus()

    def sender(self) -> str:
        box = self.query_one("#sender")
        return str(box.value if isinstance(box, (Select, Input)) else "").strip()

    @on(Select.Changed, "#sender")
    @on(Input.Changed, "#sender")
    def _show_current(self) -> None:
        sender = self.sender()
        own = self.levels.get(sender)
        self.query_one("#level", Select).value = own or DEFAULT
        now = (f"{invisible_marked(sender)} is {own} now." if own else
               f"{invisible_marked(sender)} has the default level now, {self.default}." if sender else "")
        self.query_one("#trust-now", Static).update(Text(now))

    def collect(self) -> dict[str, Any]:
        sender = self.sender()
        if not sender:
            raise ValueError("Type the sender key (as History shows it, e.g. qq:42).")
        level = self.query_one("#level", Select).value
        return {"sender": sender, "level": None if level in (DEFAULT, Select.BLANK) else str(level)}

    async def _save(self, args: dict[str, Any]) -> Any:
        app: ZcorApp = self.app
        if not app.client.connected:
            raise ClientError("zcord is not connected; nothing was changed (the status line shows when it is back)")
        return await app.client.trust_set(args["sender"], args["level"])


def said(answer: dict[str, Any]) -> str:
    """What a `zcor/trust/set` answer means, for a notification."""
    who = shown(str(answer.get("sender", "")), lines=False)
    if answer.get("explicit"):
        return f"{who} is {answer.get('level')} from now on."
    return f"{who} has the default level from now on ({answer.get('level')})."


def ask_trust(app: ZcorApp, senders: list[str], done: Any = None) -> None:
    """Read the levels, then open the TrustForm for these senders (notify what was set)."""

    async def run() -> None:
        listing = await app.rpc(app.client.trust_get())
        if listing is None:
            return

        def saved(answer: dict[str, Any] | None) -> None:
            if answer is not None:
                app.notify(said(answer), title="Trust")
            if done is not None:
                done(answer)

        await app.push_screen(TrustForm(senders, dict(listing)), saved)

    app.run_worker(run(), group="trust", exclusive=True)


class TrustList(ModalScreen[None]):
    """Every sender with a trust level of its own, and the default for everyone else."""

    BINDINGS = [
        Binding("escape", "close", "Close", id="trust.close", tooltip="Close the list"),
        Binding("t,enter", "set_level", "Set level…", id="trust.set", tooltip="Change the selected sender's level"),
        Binding("n", "new", "New…", id="trust.new", tooltip="Give another sender a level"),
        Binding("d,delete", "reset", "Default", id="trust.reset",
                tooltip="Take the selected sender's own level away: they get the default"),
    ]

    app: ZcorApp

    def __init__(self) -> None:
        super().__init__()
        self.listing: dict[str, Any] = {}

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="trust"):
            yield Static("Trust levels", id="dialog-title")
            yield Static("", id="trust-default")
            yield row_table("trust-levels")
            yield Static("t set level · n another sender · d back to the default · Esc close", classes="hint")

    def on_mount(self) -> None:
        table = self.query_one("#trust-levels", DataTable)
        add_columns(table, [("Sender", "sender", None), ("Level", "level", 10)])
        table.focus()
        self.load()

    @work(exclusive=True, group="trust-list")
    async def load(self) -> None:
        listing = await self.app.rpc(self.app.client.trust_get())
        if listing is None:
            self.query_one("#trust-default", Static).update(Text("The levels could not be read.", style="bold red"))
            return
        self.listing = dict(listing)
        table = self.query_one("#trust-levels", DataTable)
        keep = cursor_key(table)
        table.clear()
        for item in listing.get("senders") or []:
            style = {"blocked": "bold red", "untrusted": "yellow", "trusted": "green"}.get(item["level"], "")
            table.add_row(Text(invisible_marked(item["sender"]), style="cyan"), Text(item["level"], style=style),
                          key=item["sender"])
        move_to(table, keep)
        count = len(listing.get("senders") or [])
        line = Text(f"Default level: {listing.get('default')} ", style="bold")
        line.append("(config defaultTrust) for every sender not listed; "
                    + (f"{count} with a level of their own." if count else "no sender has a level of its own."),
                    style="dim")
        self.query_one("#trust-default", Static).update(line)

    def _selected(self) -> str | None:
        return cursor_key(self.query_one("#trust-levels", DataTable))

    def action_set_level(self) -> None:
        sender = self._selected()
        if sender is None:
            self.action_new()
            return
        ask_trust(self.app, [sender], lambda _answer: self.load())

    def action_new(self) -> None:
        ask_trust(self.app, [], lambda _answer: self.load())

    def action_reset(self) -> None:
        sender = self._selected()
        if sender is None:
            self.notify("No sender has a level of its own.", severity="warning")
            return
        self._reset(sender)

    @work(exclusive=True, group="trust-reset")
    async def _reset(self, sender: str) -> None:
        answer = await self.app.rpc(self.app.client.trust_set(sender, None))
        if answer is not None:
            self.app.notify(said(dict(answer)), title="Trust")
        self.load()

    def action_close(self) -> None:
        self.dismiss(None)
