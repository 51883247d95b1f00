"""Revert one logged operation (History, `u`): zcord's preview of exactly what the revert
would change, the conflicts if a later operation touched the same memories, then revert,
force (when every conflict may be forced) or cancel.

The preview (`zcor/history/revert` with `preview: true`) changes nothing. When there are
conflicts that may be forced, the preview with `force` is shown too, so the operator sees
the values a forced revert would write before choosing it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from zcord.client import ClientError, ToolError

from ..diff import TIME_FIELDS, change_view, changed_fields
from ..format import plural, shown, when

if TYPE_CHECKING:
    from ..app import ZcorApp


def conflict_text(conflicts: list[dict[str, Any]]) -> Text:
    """One line per conflict: the memory, the problem, the fields, whether force helps."""
    out = Text()
    for n, c in enumerate(conflicts):
        if n:
            out.append("\n")
        out.append("• ", style="bold red")
        out.append(shown(c.get("target") or "the Memory", lines=False), style="bold")
        out.append(shown(f": {c.get('problem', '')}"))
        if c.get("fields"):
            out.append(f" ({', '.join(c['fields'])})", style="yellow")
        if c.get("forceable") is False:
            out.append(" — cannot be forced", style="bold red")
    return out


def change_line(change: dict[str, Any]) -> Text:
    """`node.update · m4 — parentId, updatedAt`: one change at a glance."""
    kind = str(change.get("kind", ""))
    before, after = change.get("before"), change.get("after")
    out = Text("• ", style="dim")
    out.append(kind, style="bold red" if kind.endswith(".delete") else "bold cyan")
    if change.get("target"):
        out.append(shown(f" · {change['target']}", lines=False), style="bold")
    if kind.endswith(".delete"):
        out.append(" — removed", style="red")
    elif kind.endswith(".create") and before is None:
        out.append(" — comes back" if isinstance(after, dict) else "", style="green")
    elif isinstance(before, dict) and isinstance(after, dict):
        fields = changed_fields(before, after)
        kept = [f for f in fields if f not in TIME_FIELDS]
        out.append(f" — {', '.join(fields)}" if kept else " — nothing would change"
                   + (f" but its time ({', '.join(fields)})" if fields else ""), style="dim")
    return out


def restore_note(change: dict[str, Any]) -> Text:
    """What undoing a restore does to the whole Memory, in counts."""
    before, after = change.get("before") or {}, change.get("after") or {}
    note = Text("The whole Memory is replaced by the backup ", style="bold yellow")
    note.append(shown(after.get("restoredFrom", "?"), lines=False), style="bold")
    note.append(f": {after.get('nodes', '?')} memories, {after.get('relationships', '?')} relationships, important "
                f"{', '.join(after.get('important') or []) or 'none'} (now {before.get('nodes', '?')}, "
                f"{before.get('relationships', '?')}, {', '.join(before.get('important') or []) or 'none'}). "
                f"The Memory as it is now is backed up first.")
    return note


class RevertScreen(ModalScreen[dict[str, Any] | None]):
    """Preview and run the revert of operation `seq`; dismisses with the revert's result
    (`{seq, reverted, forced, changes}`) or None when cancelled."""

    BINDINGS = [
        Binding("y", "revert(False)", "Revert", id="revert.confirm", tooltip="Revert the operation as previewed"),
        Binding("f", "revert(True)", "Force", id="revert.force",
                tooltip="Revert anyway, writing the old values over the later changes"),
        Binding("v", "toggle_view", "Diff", id="revert.view",
                tooltip="Show changes as a unified diff or side by side"),
        Binding("escape,n", "cancel", "Cancel", id="revert.cancel", tooltip="Close without reverting"),
    ]

    app: ZcorApp

    def __init__(self, seq: int, record: dict[str, Any] | None = None):
        super().__init__()
        self.seq = seq
        self.subject = f"operation #{seq}"
        """What is reverted, as the messages name it."""
        self.record = record or {}
        self.preview: dict[str, Any] | None = None
        self.forced_preview: dict[str, Any] | None = None
        self.error: str | None = None
        self.side_by_side = False
        self.busy = True

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="revert"):
            yield Static(self._title(), id="dialog-title")
            with VerticalScroll(id="revert-scroll"):
                yield Static(Text("Asking zcord what the revert would change…", style="dim italic"),
                             id="revert-body")
            yield Static("", id="dialog-error")
            with Horizontal(id="dialog-buttons"):
                yield Button("Revert (y)", variant="primary", id="confirm", compact=True, disabled=True)
                yield Button("Force (f)", variant="error", id="force", compact=True, disabled=True)
                yield Button("Cancel (esc)", id="cancel", compact=True)

    def _title(self) -> Text:
        title = Text(f"Revert operation #{self.seq}")
        rec = self.record
        if rec.get("tool"):
            title.append(f" · {rec['tool']}", style="bold cyan")
        if rec.get("actor"):
            title.append(f" by {rec['actor']}")
        if rec.get("at"):
            title.append(f" at {when(rec['at'])}", style="")
        return title

    def on_mount(self) -> None:
        self.query_one("#dialog-error").display = False
        self.query_one("#cancel", Button).focus()
        self.load_preview()

    # -- the preview ----------------------------------------------------------------------

    async def _call(self, **kwargs: Any) -> dict[str, Any] | None:
        """`zcor/history/revert` for this seq; a refusal is shown in the dialog, None returned."""
        if not self.app.client.connected:
            self._show_error("zcord is not connected; the status line shows when it is back.")
            return None
        try:
            return await self._request(**kwargs)
        except ToolError as e:
            self._show_error(e.message)
        except ClientError as e:
            self._show_error(str(e))
        return None

    async def _request(self, **kwargs: Any) -> dict[str, Any]:
        return dict(await self.app.client.history_revert(self.seq, **kwargs))

    def _show_error(self, message: str) -> None:
        error = self.query_one("#dialog-error", Static)
        error.update(Text(message, style="bold red"))
        error.display = bool(message)

    @work(exclusive=True, group="revert")
    async def load_preview(self) -> None:
        self.busy = True
        self._set_buttons()
        self.preview = await self._call(preview=True)
        self.forced_preview = None
        if self.preview is not None and self.forced_possible:
            self.forced_preview = await self._call(preview=True, force=True)
        self.busy = False
        self._show_preview()

    @property
    def conflicts(self) -> list[dict[str, Any]]:
        return list((self.preview or {}).get("conflicts") or [])

    @property
    def forced_possible(self) -> bool:
        """Conflicts that force would write over (and none it refuses)."""
        conflicts = self.conflicts
        return bool(conflicts) and all(c.get("forceable", True) is not False for c in conflicts)

    @property
    def clean(self) -> bool:
        return bool(self.preview and self.preview.get("ok") and not self.conflicts)

    def _set_buttons(self) -> None:
        confirm = self.query_one("#confirm", Button)
        confirm.disabled = self.busy or not self.clean
        # offered only when it can be done: never a "Revert (y)" over conflicts that prevent it
        confirm.display = self.busy or self.clean
        force = self.query_one("#force", Button)
        force.disabled = self.busy or not (
            self.forced_possible and self.forced_preview is not None and self.forced_preview.get("ok"))
        force.display = self.forced_possible  # offered only when there is a conflict force can write over
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "revert" and parameters == (True,) and not self.forced_possible:
            return False  # no Force in the footer either
        if action == "revert" and parameters == (False,) and not self.busy and not self.clean:
            return False  # nor Revert when the preview says it cannot be done
        return super().check_action(action, parameters)

    def _show_preview(self) -> None:
        self._set_buttons()
        body = self.query_one("#revert-body", Static)
        if self.preview is None:
            body.update(Text("Nothing can be shown for this operation.", style="dim italic"))
            return
        self._show_error("")
        body.update(self.render_preview())
        if self.clean:
            self.query_one("#confirm", Button).focus()

    def render_preview(self) -> RenderableType:
        preview = self.preview or {}
        parts: list[RenderableType] = []
        conflicts = self.conflicts
        if self.clean:
            changes = preview.get("changes") or []
            parts.append(Text(f"Reverting makes {plural(len(changes), 'change')} as a new operation "
                              f"(it can be reverted too):", style="bold"))
            parts.extend(self._changes(changes))
            return Group(*parts)
        parts.append(Text(f"Later operations changed what {self.subject} changed: "
                          f"{plural(len(conflicts), 'conflict')}.", style="bold red"))
        parts.append(conflict_text(conflicts))
        if not self.forced_possible:
            parts.append(Text(""))
            parts.append(Text("It cannot be reverted while these hold (not even forced). Revert the later "
                              "operations first, or change the memories by hand.", style="italic"))
        elif self.forced_preview is not None and self.forced_preview.get("ok"):
            changes = self.forced_preview.get("changes") or []
            parts.append(Text(""))
            parts.append(Text(f"Force (f) writes the old values over the later changes — "
                              f"{plural(len(changes), 'change')}:", style="bold yellow"))
            parts.extend(self._changes(changes))
        return Group(*parts)

    def _changes(self, changes: list[dict[str, Any]]) -> list[RenderableType]:
        out: list[RenderableType] = [change_line(c) for c in changes]
        for change in changes:
            out.append(Text(""))
            if change.get("kind") == "state.restore":
                out.append(restore_note(change))
            out.append(change_view(change, side_by_side=self.side_by_side))
        return out

    # -- actions --------------------------------------------------------------------------

    @on(Button.Pressed, "#confirm")
    def _confirm_pressed(self) -> None:
        self.action_revert(False)

    @on(Button.Pressed, "#force")
    def _force_pressed(self) -> None:
        self.action_revert(True)

    @on(Button.Pressed, "#cancel")
    def _cancel_pressed(self) -> None:
        self.action_cancel()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_toggle_view(self) -> None:
        self.side_by_side = not self.side_by_side
        if self.preview is not None:
            self.query_one("#revert-body", Static).update(self.render_preview())

    def action_revert(self, force: bool) -> None:
        button = self.query_one("#force" if force else "#confirm", Button)
        if button.disabled:
            if not self.busy:
                self.notify("Force applies only when every conflict may be forced." if force else
                            "Resolve the conflicts first, or force the revert (f)." if self.forced_possible
                            else "This operation cannot be reverted now.", severity="warning")
            return
        self._run(force)

    @work(exclusive=True, group="revert")
    async def _run(self, force: bool) -> None:
        self.busy = True
        self._set_buttons()
        result = await self._call(force=force)
        self.busy = False
        if result is None:
            # something changed since the preview: show the new preview under the refusal
            message = str(self.query_one("#dialog-error", Static).content)
            self.preview = await self._call(preview=True)
            self.forced_preview = await self._call(preview=True, force=True) \
                if self.preview is not None and self.forced_possible else None
            self._show_preview()
            self._show_error(message)
            return
        changes = result.get("changes") or []
        self.app.notify(f"Reverted {self.subject}{' (forced)' if result.get('forced') else ''}: "
                        f"{plural(len(changes), 'change')}, recorded as operation #{result['seq']}.",
                        title="Reverted")
        self.dismiss(result)
