"""Help: what each screen is for and its keys, built from the screens' own bindings."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

INTRO = ("zcor-tui shows one persona's Memory as zcord serves it. Changes made by the bot appear "
         "by themselves; every edit here goes through zcord and is recorded in History as actor operator.")


def key_name(key: str) -> str:
    return ", ".join(k.replace("ctrl+", "^").replace("question_mark", "?").replace("delete", "del")
                     for k in key.split(","))


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,f1,question_mark", "dismiss", "Close", id="help.close", tooltip="Close help")]

    def compose(self) -> ComposeResult:
        from ..app import SCREENS_IN_ORDER, ZcorApp

        table = Table(expand=True, show_header=False, box=None, padding=(0, 1))
        table.add_column(style="bold cyan", no_wrap=True, width=12)
        table.add_column(ratio=1)

        def section(title: str, note: str, bindings: list[object]) -> None:
            table.add_row(Text(title, style="bold reverse"), Text(note, style="italic"))
            for b in bindings:
                if isinstance(b, Binding) and b.description:
                    table.add_row(key_name(b.key), f"{b.description} — {b.tooltip}" if b.tooltip else b.description)

        section("Everywhere", "1–9 switch screens (Esc first in a form field) · ^p command palette · "
                "Tab moves between fields · ⊘ marks a superseded memory",
                [b for b in ZcorApp.BINDINGS if isinstance(b, Binding) and b.show])
        for n, (_, title, cls) in enumerate(SCREENS_IN_ORDER, 1):
            section(f"{n} {title}", cls.HELP, list(cls.BINDINGS))
        from .usage import UsageScreen

        section("9 Usage", UsageScreen.HELP + " (not in the bar above)", list(UsageScreen.BINDINGS))
        from .consolidate import ConsolidateScreen

        section("0 Consolidate", ConsolidateScreen.HELP + " (not in the bar above)",
                list(ConsolidateScreen.BINDINGS))
        from .revert import RevertScreen
        from .timetravel import TimeTravelScreen
        from .versions import VersionsScreen

        section("Revert", "History u: zcord's preview of the revert, then confirm", list(RevertScreen.BINDINGS))
        section("Versions", "Browse h: every version of a memory, diffs, restore", list(VersionsScreen.BINDINGS))
        section("Time travel", "Browse T: the tree at an instant (2026-01-31 20:00, -2h, -3d), read-only",
                list(TimeTravelScreen.BINDINGS))
        from .trust import TrustList

        section("Trust levels", "Review L or ^p Trust levels: every sender with a level of its own "
                "(t in History, Review and Relationships sets the selected sender's)", list(TrustList.BINDINGS))
        table.add_row(Text("Dialogs", style="bold reverse"), Text("^s saves · Esc cancels · Tab next field",
                                                                   style="italic"))
        with Vertical(id="dialog", classes="help"):
            yield Static("zcor-tui help", id="dialog-title")
            with VerticalScroll():
                yield Static(Group(Text(INTRO), Text(""), table))
            yield Static("Esc closes", classes="hint")

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)
