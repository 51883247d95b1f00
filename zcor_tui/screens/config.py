"""Config: recall budget and ranking, relationship memory, and the LLM provider, applied at once
through `zcor/config/set` (no restart). The API key is never shown, only whether the
daemon has one. PERSONA.md is edited here too (`zcor/persona/get|set`)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Button, Input, Label, Select, Static, Switch

from zcord.client import ClientError, Config, ToolError, for_operator

from ..messages import MemoryChanged
from ..widgets.field import Field
from .base import ZcorScreen
from .dialogs import PersonaForm

PROTOCOLS = [("OpenAI-compatible Chat Completions", "openai"), ("Anthropic Messages", "anthropic")]
FIELD_WIDGETS = {"recallBudget": "budget", "recallRanking": "ranking", "recallSenders": "senders",
                 "relationshipMemory": "relationships", "protocol": "protocol", "baseUrl": "base-url",
                 "model": "model", "timeoutSeconds": "timeout"}
"""zcord's field names (in a refusal) → the widget to focus."""
RANKINGS = [("weighted (rare words count)", "weighted"), ("seed (number of words)", "seed")]


def row(label: str, *widgets: Any, hint: str = "") -> Horizontal:
    children = [Label(label, classes="field-label"), *widgets]
    if hint:
        children.append(Static(hint, classes="hint"))
    return Horizontal(*children, classes="field-row")


class ConfigScreen(ZcorScreen):
    MODE = "config"
    MAIN = "#config-body"
    HELP = "Recall budget and ranking, relationship memory, LLM provider, persona"
    WATCHES = ("config.", "persona.")
    BINDINGS = [
        # priority: a field has focus on this screen, and Input binds ^z (undo) and ^e (end) itself
        Binding("ctrl+s", "apply", "Apply", id="config.apply", tooltip="Save and apply the changes now",
                priority=True),
        Binding("ctrl+z", "revert", "Revert", id="config.revert", tooltip="Show the daemon's values again",
                priority=True),
        Binding("ctrl+r", "reload_files", "Reload files", id="config.reload",
                tooltip="Make zcord re-read config.json and synonyms.json (like SIGHUP)", priority=True),
        Binding("ctrl+e", "edit_persona", "Edit persona", id="config.persona",
                tooltip="Edit PERSONA.md, the persona at the top of the bot's system prefix", priority=True),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.config: dict[str, Any] | None = None
        self.unapplied = False

    def compose_body(self) -> ComposeResult:
        with VerticalScroll(id="config-body"):
            yield Static("Persona", classes="section")
            yield row("PERSONA.md", Static("", id="persona-state"),
                      Button("Edit (^e)", id="edit-persona", compact=True))
            yield Static("Auto-recall", classes="section")
            yield row("Recall budget", Field("", id="budget", type="integer", compact=True),
                      hint="characters of the context header; 0 turns auto-recall off")
            yield row("Ranking", Select(RANKINGS, id="ranking", allow_blank=False, compact=True),
                      hint="how recall and search order memories")
            yield row("Relationships", Switch(id="relationships"),
                      hint="relationship tools and guidance for the model")
            yield row("Speakers", Switch(id="senders"),
                      hint="the header starts with each speaker's relationship (needs relationships on)")
            yield Static("LLM provider (zcor_memory_search and zcor chat)", classes="section")
            yield row("Protocol", Select(PROTOCOLS, id="protocol", allow_blank=False, compact=True))
            yield row("Base URL", Field("", id="base-url", compact=True))
            yield row("Model", Field("", id="model", compact=True, placeholder="empty: not configured"))
            yield row("Timeout", Field("", id="timeout", type="number", compact=True), hint="seconds per request")
            yield row("API key", Static("", id="api-key"))
            with Horizontal(id="config-buttons"):
                yield Button("Apply (^s)", id="apply", variant="primary", compact=True)
                yield Button("Revert (^z)", id="revert", compact=True)
                yield Button("Reload files (^r)", id="reload-files", compact=True)
            yield Static("", id="config-note", classes="summary")

    def reload(self, changed: MemoryChanged | None = None) -> None:
        self.fetch()

    def on_screen_resume(self) -> None:
        # the form, not a field: a screen-number key pressed on arrival switches screens
        # instead of being typed into the budget (Tab or a click enters the fields)
        self.query_one("#config-body").focus()

    UNAPPLIED = "Changed, not applied: ^s applies · ^z reverts to zcord's values."

    @on(Input.Changed)
    @on(Switch.Changed)
    @on(Select.Changed)
    def _edited(self) -> None:
        """Mark the form changed and unapplied as soon as a field differs from zcord's value
        (an "Applied …" line from before must not stand under new, unsaved values)."""
        if self.config is None:
            return
        note = self.query_one("#config-note", Static)
        try:
            changed = bool(self.patch())
        except ValueError:
            changed = True
        if changed:
            note.update(Text(self.UNAPPLIED, style="bold yellow"))
            self.unapplied = True
        elif self.unapplied:
            note.update("")
            self.unapplied = False

    @work(exclusive=True, group="config")
    async def fetch(self) -> None:
        config = await self.app.rpc(self.app.client.config_get())
        if config is not None:
            self.show(config)
        persona = await self.app.rpc(self.app.client.persona_get(), quiet=True)
        if persona is not None:
            self.show_persona(dict(persona))

    def show_persona(self, persona: dict[str, Any]) -> None:
        if persona.get("empty"):
            state = Text("empty", style="bold yellow")
            state.append(" (the bot gets a default identity)", style="dim")
        else:
            lines = len(persona.get("text", "").splitlines())
            state = Text("written", style="bold green")
            state.append(f" ({lines} lines)", style="dim")
        self.query_one("#persona-state", Static).update(state)

    @on(Button.Pressed, "#edit-persona")
    def action_edit_persona(self) -> None:
        self.edit_persona()

    @work(exclusive=True, group="config-persona")
    async def edit_persona(self) -> None:
        persona = await self.app.rpc(self.app.client.persona_get())
        if persona is None:
            return

        async def save(args: dict[str, Any]) -> dict[str, Any]:
            return dict(await self.app.client.persona_set(args["text"]))

        def done(result: dict[str, Any] | None) -> None:
            if result is not None:
                self.show_persona(result)
                self.notify("PERSONA.md saved; the bot gets it from its next request on.")

        self.app.push_screen(PersonaForm(save, persona.get("text", "")), done)

    def show(self, config: Config | dict[str, Any]) -> None:
        self.config = dict(config)
        llm = config.get("llm") or {}
        self.query_one("#budget", Input).value = str(config.get("recallBudget", ""))
        self.query_one("#relationships", Switch).value = bool(config.get("relationshipMemory"))
        self.query_one("#ranking", Select).value = config.get("recallRanking", "weighted")
        self.query_one("#senders", Switch).value = bool(config.get("recallSenders", True))
        self.query_one("#protocol", Select).value = llm.get("protocol", "openai")
        self.query_one("#base-url", Input).value = llm.get("baseUrl", "")
        self.query_one("#model", Input).value = llm.get("model", "")
        self.query_one("#timeout", Input).value = f"{llm.get('timeoutSeconds', 30):g}"
        if llm.get("apiKeyWithheld"):
            # the deployment has not confirmed this base URL: requests go out without the key
            key = Text("set, withheld from this base URL", style="bold red")
            key.append(f" ({llm.get('apiKeyWithheldReason') or 'base URL not confirmed by the deployment'})",
                       style="dim")
        else:
            key = Text("set", style="bold green") if llm.get("apiKeySet") else Text("not set", style="bold yellow")
            key.append(" (ZCOR_LLM_API_KEY or credential llm-api-key; never shown)", style="dim")
        self.query_one("#api-key", Static).update(key)

    def patch(self) -> dict[str, Any]:
        """The fields that differ from the daemon's values; ValueError for unreadable numbers."""
        assert self.config is not None
        old, old_llm = self.config, self.config.get("llm") or {}
        out: dict[str, Any] = {}
        llm: dict[str, Any] = {}
        try:
            budget = int(self.query_one("#budget", Input).value.strip())
        except ValueError:
            raise ValueError("The recall budget is a whole number of characters (0 turns recall off).") from None
        try:
            timeout = float(self.query_one("#timeout", Input).value.strip())
        except ValueError:
            raise ValueError("The timeout is a number of seconds.") from None
        if budget != old.get("recallBudget"):
            out["recallBudget"] = budget
        ranking = self.query_one("#ranking", Select).value
        if ranking != old.get("recallRanking"):
            out["recallRanking"] = ranking
        senders = self.query_one("#senders", Switch).value
        if senders != old.get("recallSenders"):
            out["recallSenders"] = senders
        relationships = self.query_one("#relationships", Switch).value
        if relationships != old.get("relationshipMemory"):
            out["relationshipMemory"] = relationships
        for key, value in (("protocol", self.query_one("#protocol", Select).value),
                           ("baseUrl", self.query_one("#base-url", Input).value.strip()),
                           ("model", self.query_one("#model", Input).value.strip()),
                           ("timeoutSeconds", timeout)):
            if value != old_llm.get(key):
                llm[key] = value
        if llm:
            out["llm"] = llm
        return out

    @on(Button.Pressed, "#apply")
    def action_apply(self) -> None:
        self.apply()

    @on(Button.Pressed, "#revert")
    def action_revert(self) -> None:
        if self.config is not None:
            self.show(self.config)
            self.unapplied = False
            self.query_one("#config-note", Static).update(Text("Reverted to zcord's values.", style="dim"))

    @on(Button.Pressed, "#reload-files")
    def action_reload_files(self) -> None:
        self.reload_files()

    @work(exclusive=True, group="config-apply")
    async def apply(self) -> None:
        note = self.query_one("#config-note", Static)
        if self.config is None:
            return
        try:
            patch = self.patch()
        except ValueError as e:
            note.update(Text(str(e), style="bold red"))
            return
        if not patch:
            note.update(Text("Nothing changed.", style="dim"))
            return
        if not self.app.client.connected:
            note.update(Text("Not applied: zcord is not connected.", style="bold red"))
            return
        try:
            config = await self.app.client.config_set(patch)
        except ToolError as e:
            note.update(Text(f"Not applied: {for_operator(e.code, e.message, data=e.data)}", style="bold red"))
            field = FIELD_WIDGETS.get((e.field or "").removeprefix("llm."))
            if field:
                self.query_one(f"#{field}").focus()
            return
        except ClientError as e:
            note.update(Text(f"Not applied: {e}", style="bold red"))
            return
        self.show(config)
        self.unapplied = False
        changed = ", ".join(k if k != "llm" else "provider" for k in patch)
        note.update(Text(f"Applied ({changed}); zcord uses the new values from now on.", style="green"))
        self.notify(f"Config applied: {changed}.")

    @work(exclusive=True, group="config-apply")
    async def reload_files(self) -> None:
        config = await self.app.rpc(self.app.client.reload())
        if config is not None:
            self.show(config)
            self.notify("zcord re-read config.json and synonyms.json.")
