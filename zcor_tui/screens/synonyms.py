"""Synonyms: filter, add, edit and remove synonym groups, and preview what auto-recall
would do with a message (`zcor/recall/explain`): segmentation, expansion, the memories
it would pick and the header it would render under the current budget."""

from __future__ import annotations

import asyncio
import unicodedata
from collections.abc import Iterable
from typing import Any

from rich.console import Group, RenderableType
from rich.rule import Rule
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Input, Static

from ..format import one_line, plain, shown
from ..messages import MemoryChanged
from ..widgets.rows import add_columns, move_to, row_table
from .base import ZcorScreen
from .dialogs import ConfirmDialog, SynonymForm


def fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


class SynonymsScreen(ZcorScreen):
    MODE = "synonyms"
    MAIN = "#groups"
    HELP = "Synonym groups and an auto-recall preview"
    BINDINGS = [
        Binding("a", "add", "Add", id="syn.add", tooltip="Add a synonym group"),
        Binding("e", "edit", "Edit", id="syn.edit", tooltip="Edit the selected group"),
        Binding("d,delete", "remove", "Remove", id="syn.remove", tooltip="Remove the selected group"),
        Binding("p", "focus_preview", "Preview", id="syn.preview",
                tooltip="Type a message and see what auto-recall would do"),
        Binding("y", "accept_held", "Accept held", show=False, id="syn.accept",
                tooltip="Add the selected held group (the bot's) to the table"),
        Binding("x", "discard_bot", "Discard", show=False, id="syn.discard",
                tooltip="Discard the selected held group, or a group the bot added"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.groups: list[list[str]] = []
        self.selected: int | None = None
        self.bot_added: set[int] = set()  # indexes of the groups the bot added
        self.held: list[list[str]] = []  # the bot's groups kept apart until an operator decides
        self.selected_held: int | None = None

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="syn-body"):
            with Vertical(id="syn-left"):
                yield Input(placeholder="filter groups", id="filter", classes="bar-input")
                yield Static("", id="syn-summary", classes="summary")
                yield row_table("groups")
            with Vertical(id="syn-right"):
                yield Input(placeholder="type a message to preview auto-recall", id="preview-text", classes="bar-input")
                yield Input(placeholder="from (a personId or alias; optional)", id="preview-sender", classes="bar-input")
                with VerticalScroll(id="preview-scroll"):
                    yield Static(Text("The preview shows segmentation, expanded terms, the memories auto-recall "
                                      "would pick and the header the bot would get.", style="dim italic"),
                                 id="preview")

    def on_mount(self) -> None:
        table = self.query_one("#groups", DataTable)
        add_columns(table, [("#", "index", 5), ("Terms", "terms", None)])
        table.focus()

    def reload(self, changed: MemoryChanged | None = None) -> None:
        if changed is None or changed.event.get("tool") in ("zcor/synonyms/set", "zcor_synonyms_add") \
                or changed.touches("synonyms."):
            self.fetch()
        text = self.query_one("#preview-text", Input).value
        if text.strip():
            self.preview(text, delay=0.1)

    @work(exclusive=True, group="groups")
    async def fetch(self) -> None:
        listing = await self.app.rpc(self.app.client.synonym_listing())
        if listing is not None:
            self.groups = listing["groups"]
            self.bot_added = set(listing.get("botAdded") or ())
            self.held = listing.get("held") or []
            self._fill()

    @on(Input.Changed, "#filter")
    def _filter_changed(self) -> None:
        self._fill()

    def _fill(self) -> None:
        needle = fold(self.query_one("#filter", Input).value.strip())
        table = self.query_one("#groups", DataTable)
        keep = self.selected
        table.clear()
        matching = 0
        for i, terms in enumerate(self.held):  # first: they wait for the operator
            if not needle or any(needle in fold(t) for t in terms):
                table.add_row(Text(f"h{i}", style="bold yellow"), self._terms_cell(terms, "held"), key=f"h{i}")
        for index, terms in enumerate(self.groups):
            if needle and not any(needle in fold(t) for t in terms):
                continue
            matching += 1
            table.add_row(Text(str(index), style="dim"),
                          self._terms_cell(terms, "bot" if index in self.bot_added else None), key=str(index))
        summary = Text(f"{len(self.groups):,} groups", style="bold")
        if self.bot_added:
            summary.append(f" · {len(self.bot_added):,} by the bot")
        if self.held:
            summary.append(f" · {len(self.held):,} held (y accepts, x discards)", style="yellow")
        if needle:
            summary.append(f" · {matching:,} match")
        self.query_one("#syn-summary", Static).update(summary)
        move_to(table, None if keep is None else str(keep))

    @staticmethod
    def _terms_cell(terms: list[str], mark: str | None) -> Text:
        """A group's terms as literal text (never markup), after a mark: `held` or `bot`."""
        cell = Text()
        if mark:
            cell.append(f"{mark} ", style="bold yellow" if mark == "held" else "bold magenta")
        cell.append_text(plain(" · ".join(terms), lines=False))
        return cell

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value
        held = key is not None and key.startswith("h")
        self.selected_held = int(key[1:]) if held and key is not None else None
        self.selected = int(key) if key is not None and not held else None

    @on(DataTable.RowSelected)
    def _row_selected(self) -> None:
        self.action_edit()

    async def _set(self, index: int | None, terms: list[str] | None) -> dict[str, Any]:
        return dict(await self.app.client.synonyms_set(index, terms))

    def action_add(self) -> None:
        async def add(args: dict[str, Any]) -> dict[str, Any]:
            return await self._set(None, args["terms"])

        def done(result: dict[str, Any] | None) -> None:
            if result:
                self.selected = result.get("groups", 1) - 1
                self.notify("Synonym group added.")

        self.app.push_screen(SynonymForm(add), done)

    def _current(self) -> int | None:
        if self.selected_held is not None:
            self.notify("A held group: y adds it to the table, x discards it.", severity="warning")
            return None
        if self.selected is None or not 0 <= self.selected < len(self.groups):
            self.notify("Select a group first.", severity="warning")
            return None
        return self.selected

    def action_edit(self) -> None:
        index = self._current()
        if index is None:
            return

        async def edit(args: dict[str, Any]) -> dict[str, Any]:
            return await self._set(index, args["terms"])

        def saved(result: dict[str, Any] | None) -> None:
            if result:
                self.notify(f"Synonym group {index} saved.")

        self.app.push_screen(SynonymForm(edit, self.groups[index], index), saved)

    @work(exclusive=True, group="action")
    async def action_remove(self) -> None:
        index = self._current()
        if index is None:
            return
        terms = self.groups[index]
        if not await self.app.push_screen_wait(ConfirmDialog(
                f"Remove synonym group {index}: {shown(' · '.join(terms), lines=False)}?", yes="Remove")):
            return
        if await self.app.rpc(self.app.client.synonyms_set(index, None)) is not None:
            self.selected = None
            self.notify(f"Synonym group {index} removed.")

    async def _decide(self, action: str, question: str, done: str, **which: int) -> None:
        """Ask, then send the decision (`zcor/synonyms/held`); the question holds no terms."""
        if not await self.app.push_screen_wait(ConfirmDialog(question, yes=action.capitalize())):
            return
        if await self.app.rpc(self.app.client.synonyms_held(action, which.get("held"), which.get("index"))) is not None:
            self.selected = self.selected_held = None
            self.notify(done)

    @work(exclusive=True, group="action")
    async def action_accept_held(self) -> None:
        i = self.selected_held
        if i is None or not 0 <= i < len(self.held):
            self.notify("Select a held group (h0, h1, …) first.", severity="warning")
            return
        await self._decide("accept", f"Accept held group h{i}? It joins the table and expands.",
                           f"Held group h{i} accepted.", held=i)

    @work(exclusive=True, group="action")
    async def action_discard_bot(self) -> None:
        if self.selected_held is not None and 0 <= self.selected_held < len(self.held):
            i = self.selected_held
            await self._decide("discard", f"Discard held group h{i}?", f"Held group h{i} discarded.", held=i)
        elif self.selected is not None and self.selected in self.bot_added:
            i = self.selected
            await self._decide("discard", f"Discard the bot's group {i}?", f"The bot's group {i} discarded.",
                               index=i)
        else:
            self.notify("Select a held group or one the bot added (marked bot) first.", severity="warning")

    def action_focus_preview(self) -> None:
        self.query_one("#preview-text", Input).focus()

    @on(Input.Changed, "#preview-text")
    def _preview_changed(self, event: Input.Changed) -> None:
        self.preview(event.value)

    @on(Input.Changed, "#preview-sender")
    def _sender_changed(self, event: Input.Changed) -> None:
        self.preview(self.query_one("#preview-text", Input).value)

    @work(exclusive=True, group="preview")
    async def preview(self, text: str, delay: float = 0.3) -> None:
        if delay:
            await asyncio.sleep(delay)
        out = self.query_one("#preview", Static)
        if not text.strip():
            out.update(Text("Type a message above.", style="dim italic"))
            return
        sender = self.query_one("#preview-sender", Input).value.strip() or None
        explained = await self.app.rpc(self.app.client.recall_explain(text, sender))
        config = await self.app.rpc(self.app.client.config_get(), quiet=True)
        if explained is not None:
            out.update(self.render_explain(dict(explained), config["recallBudget"] if config else None))

    @staticmethod
    def render_explain(ex: dict[str, Any], budget: int | None) -> RenderableType:
        def terms(label: str, values: list[str]) -> Text:
            line = Text()
            line.append(f"{label}: ", style="bold")
            line.append(shown(" · ".join(values), lines=False) if values else "—", style="" if values else "dim")
            return line

        parts: list[RenderableType] = [
            terms("Segmented", ex.get("segmented") or []),
            terms("Synonym terms in the text", ex.get("synonymTerms") or []),
            terms("Expanded", ex.get("expanded") or []),
            terms("Speaker's relationship in the header", ex.get("senders") or []),
            Rule(f"would recall {len(ex.get('hits') or [])} · ranking {ex.get('ranking', 'seed')}",
                 style="dim", align="left"),
        ]
        hits = ex.get("hits") or []
        if not hits:
            parts.append(Text("No memory matches: auto-recall would add nothing.", style="dim italic"))
        for hit in hits:
            line = Text()
            line.append(hit["id"], style="bold cyan")
            line.append(f" {one_line(hit.get('title'), 60)} ")
            line.append(f"score {hit.get('score')}", style="yellow")
            for m in hit.get("matches") or ():
                via = f" ← {m['from']}" if m.get("from") and m["from"] != m["term"] else ""
                weight = f" {m['weight']:g}" if m.get("weight") is not None else ""
                line.append(shown(f"\n    {m['term']}{via} ({m.get('where')}{weight})"), style="dim")
            parts.append(line)
        header = ex.get("header") or ""
        budget_text = f"budget {budget:,} chars" if budget is not None else "budget"
        parts.append(Rule(f"header · {len(header):,} chars · {budget_text}", style="dim", align="left"))
        if budget == 0:
            parts.append(Text("Auto-recall is off (budget 0).", style="dim italic"))
        else:
            parts.append(plain(header or "(empty)", style="" if header else "dim"))
        return Group(*parts)

    def palette_commands(self) -> Iterable[SystemCommand]:
        yield SystemCommand("Add synonym group", "Two or more terms that mean the same", self.action_add)
        if self.selected is not None and 0 <= self.selected < len(self.groups):
            yield SystemCommand(f"Edit synonym group {self.selected}", shown(" · ".join(self.groups[self.selected]), lines=False),
                                self.action_edit)
            yield SystemCommand(f"Remove synonym group {self.selected}",
                                shown(" · ".join(self.groups[self.selected]), lines=False),
                                self.action_remove)
