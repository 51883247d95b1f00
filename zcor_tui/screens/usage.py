"""Usage (key 9): the tokens the front ends reported (`zcor/usage`): input, cached and output
tokens and the cache-hit share per session and per day, and what zcor added to the prompts
(its system prefix and recall header, estimated in tokens). `d` cycles the window (7, 30, 90
days); reports change no memory, so `r` (or coming back to the screen) fetches them again.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from ..format import plain, plural, shown_id
from ..messages import MemoryChanged
from ..widgets.rows import add_columns, row_table
from .base import ZcorScreen

WINDOWS = (7, 30, 90)
NUMBERS = [("Calls", "calls", 6), ("Input", "input", 11), ("Cached", "cached", 11), ("Hit", "hit", 4),
           ("Written", "written", 9), ("Output", "output", 9), ("~Prefix", "prefix", 9), ("~Header", "header", 9)]


def _cells(row: dict[str, Any]) -> list[Text]:
    hit = "—" if row.get("hitShare") is None else f"{row['hitShare']:.0%}"
    values = [f"{row['requests']:,}", f"{row['inputTokens']:,}", f"{row['cachedTokens']:,}", hit,
              f"{row['cacheWriteTokens']:,}", f"{row['outputTokens']:,}", f"{row['prefixTokens']:,}",
              f"{row['headerTokens']:,}"]
    return [Text(v, justify="right") for v in values]


def summary_text(usage: dict[str, Any]) -> Text:
    """The lines above the tables: the window's totals and zcor's estimated share."""
    t = usage["totals"]
    head = Text.assemble((f"Last {plural(t['days'], 'day')}", "bold"), f" (since {t['since']})")
    if not t["requests"]:
        head.append(" · no provider calls reported yet: zcor chat, zcor serve-openai and the AstrBot plugin "
                    "report after each call", style="italic")
        return head
    share = "—" if t["hitShare"] is None else f"{t['hitShare']:.0%}"
    head.append(f" · {plural(t['requests'], 'provider call')} · {t['inputTokens']:,} input tokens, ")
    head.append(f"{share} from the cache", style="bold green" if (t["hitShare"] or 0) >= 0.5 else "bold yellow")
    head.append(f" · {t['outputTokens']:,} output")
    head.append(f"\nzcor added ≈{t['prefixTokens']:,} prefix and ≈{t['headerTokens']:,} header tokens "
                f"(at {usage['charsPerToken']:g} characters a token)", style="dim")
    head.append("   d window · r refresh", style="dim")
    return head


class UsageScreen(ZcorScreen):
    MODE = "usage"
    MAIN = "#usage-sessions"
    HELP = "Tokens the front ends reported per session and day: cache hits, and what zcor added"
    WATCHES = ("usage.",)  # no change notification is about usage: fetched on show and on r
    BINDINGS = [
        Binding("d", "window", "Days", id="usage.window", tooltip="Show the last 7, 30 or 90 days"),
        Binding("r", "reload", "Refresh", id="usage.reload", tooltip="Fetch the usage again"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.days = 30

    def compose_body(self) -> ComposeResult:
        yield Static("", id="usage-summary", classes="summary")
        yield row_table("usage-sessions")
        yield row_table("usage-days")

    def on_mount(self) -> None:
        add_columns(self.query_one("#usage-sessions", DataTable),
                    [("Session", "session", 24), *NUMBERS, ("Front end", "frontEnd", None)])
        add_columns(self.query_one("#usage-days", DataTable), [("Day", "day", 24), *NUMBERS])
        self.query_one("#usage-sessions", DataTable).focus()

    def on_screen_resume(self) -> None:
        if self.app.connected:
            self.fetch()

    def reload(self, changed: MemoryChanged | None = None) -> None:
        self.fetch()

    def action_reload(self) -> None:
        self.fetch()

    def action_window(self) -> None:
        self.days = WINDOWS[(WINDOWS.index(self.days) + 1) % len(WINDOWS)] if self.days in WINDOWS else 30
        self.fetch()

    @work(exclusive=True, group="usage")
    async def fetch(self) -> None:
        usage = await self.app.rpc(self.app.client.usage(None, self.days))
        summary = self.query_one("#usage-summary", Static)
        sessions = self.query_one("#usage-sessions", DataTable)
        days = self.query_one("#usage-days", DataTable)
        sessions.clear()
        days.clear()
        if usage is None:
            summary.update(Text("Usage could not be read (see the message).", style="bold red"))
            return
        summary.update(summary_text(dict(usage)))
        for s in usage["sessions"]:
            sessions.add_row(shown_id(s["session"], style=""), *_cells(s), plain(s.get("frontEnd") or ""),
                             key=s["session"])
        for d in usage["days"]:
            days.add_row(Text(d["day"]), *_cells(d), key=d["day"])
