"""Forget a person (Relationships and History, `F`): zcord's preview of exactly what goes
(`zcor/erase` with `preview: true`: their memories, relationship, trust entry and every
file that keeps their words), then erase or cancel. Erasure cannot be reverted; the dialog
says so and erases only on `y`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from zcord.client import ClientError, ErasureResult, ToolError

from ..format import shown

if TYPE_CHECKING:
    from ..host import ZcorHost


def preview_text(p: ErasureResult) -> RenderableType:
    """The preview as the dialog shows it."""
    counts = p.get("counts") or {}
    parts: list[RenderableType] = [Text(
        f"Erasing {p.get('person')} removes {counts.get('memories', 0)} memories, {counts.get('relationships', 0)} "
        f"relationship(s) and {counts.get('trustEntries', 0)} trust entr(y/ies), and redacts them from "
        f"{counts.get('recordsAbout', 0)}+ history records, every backup and the review record.", style="bold")]
    for m in p.get("memories") or []:
        line = Text("• memory ", style="dim")
        line.append(shown(m["id"], lines=False), style="bold")
        line.append(shown(f" {m.get('title') or ''}", lines=False))
        if not m.get("current"):
            line.append(" (deleted; in the history)", style="dim")
        parts.append(line)
    for person in p.get("relationships") or []:
        parts.append(Text("• relationship ", style="dim") + Text(shown(person, lines=False), style="bold"))
    for t in p.get("trust") or []:
        parts.append(Text("• trust entry ", style="dim") + Text(shown(t, lines=False), style="bold"))
    places = p.get("places") or {}
    if places:
        parts.append(Text("Files that keep their words:", style="bold"))
        for name, n in places.items():
            parts.append(Text(f"• {name}: " + ("deleted and rebuilt" if n < 0 else f"{n} record(s) rewritten")))
    for at in p.get("erasedBefore") or []:
        parts.append(Text(f"This person was erased before, at {at}.", style="yellow"))
    parts.append(Text("This cannot be reverted: the history keeps only a tombstone.", style="bold red"))
    return Group(*parts)


class ForgetScreen(ModalScreen[ErasureResult | None]):
    """Preview and run `zcor/erase` for a sender or personId; dismisses with the result or None."""

    BINDINGS = [
        Binding("y", "erase", "Erase", id="forget.confirm", tooltip="Erase this person for good"),
        Binding("escape,n", "cancel", "Cancel", id="forget.cancel", tooltip="Close without erasing"),
    ]

    app: ZcorHost

    def __init__(self, person: str, person_id: bool = False):
        super().__init__()
        self.person = person
        self.person_id = person_id
        self.preview: ErasureResult | None = None
        self.busy = True

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="revert"):
            yield Static(Text("Forget ") + Text(shown(self.person, lines=False), style="bold cyan"), id="dialog-title")
            with VerticalScroll(id="revert-scroll"):
                yield Static(Text("Asking zcord what would go…", style="dim italic"), id="forget-body")
            yield Static("", id="dialog-error")
            with Horizontal(id="dialog-buttons"):
                yield Button("Erase (y)", variant="error", id="confirm", compact=True, disabled=True)
                yield Button("Cancel (esc)", id="cancel", compact=True)

    def on_mount(self) -> None:
        self.query_one("#dialog-error").display = False
        self.query_one("#cancel", Button).focus()
        self.load_preview()

    async def _call(self, preview: bool) -> ErasureResult | None:
        who = {"person_id": self.person} if self.person_id else {"sender": self.person}
        try:
            return await self.app.client.erase(**who, preview=preview)
        except ToolError as e:
            self._error(e.message)
        except ClientError as e:
            self._error(str(e))
        return None

    def _error(self, message: str) -> None:
        error = self.query_one("#dialog-error", Static)
        error.update(Text(message, style="bold red"))
        error.display = bool(message)

    @work(exclusive=True, group="forget")
    async def load_preview(self) -> None:
        self.preview = await self._call(True)
        self.busy = False
        body = self.query_one("#forget-body", Static)
        if self.preview is None:
            body.update(Text("Nothing can be shown.", style="dim italic"))
            return
        body.update(preview_text(self.preview))
        self.query_one("#confirm", Button).disabled = False

    @on(Button.Pressed, "#confirm")
    def _confirm_pressed(self) -> None:
        self.action_erase()

    @on(Button.Pressed, "#cancel")
    def _cancel_pressed(self) -> None:
        self.action_cancel()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_erase(self) -> None:
        if self.busy or self.preview is None:
            return
        self._run()

    @work(exclusive=True, group="forget")
    async def _run(self) -> None:
        self.busy = True
        self.query_one("#confirm", Button).disabled = True
        result = await self._call(False)
        self.busy = False
        if result is None:
            return
        self.app.notify(f"Erased {result.get('person')}: tombstone is operation #{result.get('seq')}.",
                        title="Erased")
        self.dismiss(result)
