"""Modal dialogs. Each is a `ModalScreen[...]` that returns its result with `dismiss()`.

Forms take an optional `submit` coroutine: they call it themselves (in a worker) and stay
open showing zcord's refusal, e.g. a title that is too long, or dismiss with its result.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar, cast

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Button, Input, Label, OptionList, Static, TextArea
from textual.widgets.option_list import Option

from zcord.client import ClientError, DaemonUnavailable, QueryArgs, ToolError, for_operator

from ..format import invisible_marked, one_line, plain, shown, split_keywords, split_terms
from ..widgets.field import Field

if TYPE_CHECKING:
    from ..app import ZcorApp

Submit = Callable[[dict[str, Any]], Awaitable[Any]]


class ConfirmDialog(ModalScreen[bool]):
    """Yes or no."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes", tooltip="Go ahead"),
        Binding("n,escape", "answer(False)", "No", id="confirm.no", tooltip="Leave it as it is"),
    ]

    def __init__(self, question: str, yes: str = "Yes"):
        super().__init__()
        self.question = question
        self.yes = yes

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="small"):
            yield Static(shown(self.question), id="dialog-question", markup=False)
            with Horizontal(id="dialog-buttons"):
                yield Button(f"{self.yes} (y)", variant="error", id="yes", compact=True)
                yield Button("No (n)", id="no", compact=True)

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


class PromptDialog(ModalScreen[str | None]):
    """One line of text."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="prompt.cancel", tooltip="Close without an answer")]

    def __init__(self, question: str, value: str = "", placeholder: str = ""):
        super().__init__()
        self.question = question
        self.value = value
        self.placeholder = placeholder

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="small"):
            yield Static(shown(self.question), id="dialog-title", markup=False)
            yield Field(self.value, placeholder=self.placeholder, id="prompt")

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


def field_row(label: str, widget: Widget) -> Horizontal:
    return Horizontal(Label(label, classes="field-label"), widget, classes="field-row")


class FormDialog(ModalScreen[Any]):
    """A form that saves through `submit` and closes only when zcord accepted it."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="form.cancel", tooltip="Close without saving"),
        Binding("ctrl+s", "submit", "Save", id="form.save", tooltip="Save; the form stays open if zcord refuses"),
    ]
    FIELDS: ClassVar[dict[str, str]] = {}
    """zcord's field names (from a refusal) → the widget id to focus."""

    app: ZcorApp

    def __init__(self, title: str, submit: Submit | None = None, save_label: str = "Save"):
        super().__init__()
        self.form_title = title
        self.submit_fn = submit
        self.save_label = save_label

    COMPACT: ClassVar[bool] = False
    """No gap between rows (forms with many rows, so they fit 80x24)."""

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="compact-rows" if self.COMPACT else ""):
            yield Static(shown(self.form_title), id="dialog-title", markup=False)
            with VerticalScroll(id="dialog-fields"):
                yield from self.compose_fields()
            yield Static("", id="dialog-error")
            with Horizontal(id="dialog-buttons"):
                yield Button(f"{self.save_label} (^s)", variant="primary", id="save", compact=True)
                yield Button("Cancel (esc)", id="cancel", compact=True)

    def compose_fields(self) -> ComposeResult:
        yield from ()

    def collect(self) -> dict[str, Any]:
        """The arguments from the fields; ValueError for what can be told without zcord."""
        raise NotImplementedError

    @on(Button.Pressed, "#save")
    def _save_pressed(self) -> None:
        self.action_submit()

    @on(Button.Pressed, "#cancel")
    def _cancel_pressed(self) -> None:
        self.action_cancel()

    def on_mount(self) -> None:  # after the form's own on_mount: handlers run down the class tree
        self.initial_values = self.field_values()

    def field_values(self) -> list[str]:
        """What the text fields hold now (to tell whether the operator typed anything)."""
        return [w.value if isinstance(w, Input) else w.text
                for w in self.query("#dialog-fields Input, #dialog-fields TextArea")
                if isinstance(w, (Input, TextArea))]

    def action_cancel(self) -> None:
        if self.field_values() == getattr(self, "initial_values", None):
            self.dismiss(None)
            return

        def answered(discard: bool | None) -> None:
            if discard:
                self.dismiss(None)

        self.app.push_screen(ConfirmDialog("Close the form and discard what you typed?", yes="Discard"), answered)

    def action_submit(self) -> None:
        self._submit()

    def labels(self) -> dict[str, str]:
        """zcord's field names → the labels this form shows them under ("replacementId" → "By")."""
        out: dict[str, str] = {}
        for name, widget_id in self.FIELDS.items():
            try:
                row = self.query_one(f"#{widget_id}").parent
                label = row.query_one(".field-label", Label) if row is not None else None
            except Exception:
                continue
            if label is not None and widget_id not in out.values():
                out[name] = str(label.content).strip()
        return out

    def in_form_words(self, message: str) -> str:
        """A refusal with zcord's field names put as the form names them: `replacementId m2 is
        also listed in ids` reads `“By” m2 is also listed in “Replace ids”`."""
        labels = self.labels()
        if not labels:
            return message
        pattern = re.compile(r"(?<![\w.])(" + "|".join(re.escape(n) for n in sorted(labels, key=len, reverse=True))
                             + r")(?![\w])")
        named: set[str] = set()

        def label(m: re.Match[str]) -> str:  # the first mention names the field; later ones are words
            if m.group(1) in named:
                return m.group(1)
            named.add(m.group(1))
            return f"“{labels[m.group(1)]}”"

        return pattern.sub(label, message)

    def show_error(self, message: str, field: str | None = None) -> None:
        error = self.query_one("#dialog-error", Static)
        error.update(plain(message, style="bold red"))
        error.display = bool(message)
        target = self.FIELDS.get(field or "")
        if target:
            try:
                self.query_one(f"#{target}").focus()
            except Exception:
                pass
        self.keep_focus()

    def keep_focus(self) -> None:
        """After a refusal the typed keys must reach a field: Save pressed from the keyboard
        keeps the focus on a button (and while Save is disabled, waiting for zcord, the focus
        moves on to Cancel), so the first field takes it back."""
        if self.focused is None or isinstance(self.focused, Button):
            for widget in self.query("#dialog-fields Input, #dialog-fields TextArea, #dialog-fields Select"):
                if widget.focusable:
                    widget.focus()
                    return

    @work(exclusive=True, group="form")
    async def _submit(self) -> None:
        try:
            args = self.collect()
        except ValueError as e:
            self.show_error(str(e))
            return
        if self.submit_fn is None:
            self.dismiss(args)
            return
        if not self.app.client.connected:  # never queue a save for a zcord that may come back much later
            self.show_error("Not saved: zcord is not connected. The form keeps what you typed; save again when "
                            "the status line says connected.")
            return
        save = self.query_one("#save", Button)
        save.disabled = True
        try:
            result = await self.submit_fn(args)
        except ToolError as e:
            save.disabled = False
            self.show_error(self.in_form_words(for_operator(e.code, e.message, data=e.data)), e.field)
            return
        except DaemonUnavailable as e:
            save.disabled = False
            self.show_error(f"Not saved: {e}")
            return
        except ClientError as e:  # it may have reached zcord before the connection went
            save.disabled = False
            self.show_error(f"{e}. It may have been saved before that: History shows whether it was.")
            return
        finally:
            save.disabled = False
        self.dismiss(result)


class NodeForm(FormDialog):
    """Create or edit a memory: title, content, keywords, parent, source message."""

    COMPACT = True

    FIELDS = {"title": "title", "content": "content", "keywords": "keywords", "parentId": "parent",
              "sourceMessage": "source", "id": "title"}

    def __init__(self, submit: Submit, node: dict[str, Any] | None = None, parent_id: str | None = None):
        title = f"Edit {node['id']}" if node else ("New memory under " + parent_id if parent_id else "New root memory")
        super().__init__(title, submit)
        self.node = node
        self.parent_id = node.get("parentId") if node else parent_id
        self.keywords_text = ", ".join(node.get("keywords") or []) if node else ""

    def compose_fields(self) -> ComposeResult:
        node = self.node or {}
        yield field_row("Title", Field(node.get("title", ""), id="title", compact=True,
                                       placeholder="required, at most 200 characters"))
        yield field_row("Content", TextArea(node.get("content", ""), id="content", compact=True, soft_wrap=True))
        yield field_row("Keywords", Field(self.keywords_text, id="keywords", compact=True,
                                          placeholder="comma-separated; empty on create: from the title"))
        yield field_row("Parent", Field(self.parent_id or "", id="parent", compact=True,
                                        placeholder="a memory id; empty: a root"))
        yield field_row("Source", TextArea(node.get("sourceMessage") or "", id="source", compact=True,
                                           soft_wrap=True))

    def on_mount(self) -> None:
        self.query_one("#title", Input).focus()
        self.query_one("#dialog-error").display = False

    def collect(self) -> dict[str, Any]:
        title = self.query_one("#title", Input).value.strip()
        if not title:
            raise ValueError("A memory needs a title.")
        args: dict[str, Any] = {"title": title, "content": self.query_one("#content", TextArea).text}
        keywords = self.query_one("#keywords", Input).value
        parent = self.query_one("#parent", Input).value.strip()
        source = self.query_one("#source", TextArea).text
        if self.node is None:
            if keywords.strip():
                args["keywords"] = split_terms(keywords)
            if parent:
                args["parentId"] = parent
            if source.strip():
                args["sourceMessage"] = source
            return args
        args["id"] = self.node["id"]
        if keywords.strip() != self.keywords_text:
            args["keywords"] = split_terms(keywords)
        if parent != (self.node.get("parentId") or ""):
            args["parentId"] = parent or None
        if source != (self.node.get("sourceMessage") or ""):
            args["sourceMessage"] = source if source.strip() else None
        return args


class MergeForm(FormDialog):
    """Merge memories into a new one (the sources become superseded by it)."""

    COMPACT = True

    FIELDS = {"ids": "ids", "title": "title", "content": "content", "keywords": "keywords", "reason": "reason"}

    def __init__(self, submit: Submit, ids: list[str], title: str = "", content: str = ""):
        super().__init__("Merge memories into a new one", submit, save_label="Merge")
        self.ids, self.title_text, self.content_text = ids, title, content

    def compose_fields(self) -> ComposeResult:
        yield field_row("Merge ids", Field(", ".join(self.ids), id="ids", compact=True,
                                           placeholder="two or more current memories"))
        yield field_row("Title", Field(self.title_text, id="title", compact=True))
        yield field_row("Content", TextArea(self.content_text, id="content", compact=True, soft_wrap=True))
        yield field_row("Keywords", Field("", id="keywords", compact=True, placeholder="empty: from the title"))
        yield field_row("Reason", Field("", id="reason", compact=True, placeholder="why they are one memory"))

    def on_mount(self) -> None:
        self.query_one("#dialog-error").display = False
        self.query_one("#title", Input).focus()

    def collect(self) -> dict[str, Any]:
        ids = split_keywords(self.query_one("#ids", Input).value)
        if len(ids) < 2:
            raise ValueError("Merging needs at least two memory ids.")
        args: dict[str, Any] = {"ids": ids, "title": self.query_one("#title", Input).value.strip(),
                                "content": self.query_one("#content", TextArea).text,
                                "reason": self.query_one("#reason", Input).value.strip()}
        keywords = self.query_one("#keywords", Input).value
        if keywords.strip():
            args["keywords"] = split_terms(keywords)
        return args


class SupersedeForm(FormDialog):
    """Mark memories as replaced by another existing memory."""

    FIELDS = {"ids": "ids", "replacementId": "replacement", "reason": "reason"}

    def __init__(self, submit: Submit, ids: list[str], replacement: str = ""):
        super().__init__("Supersede memories", submit, save_label="Supersede")
        self.ids, self.replacement = ids, replacement

    def compose_fields(self) -> ComposeResult:
        yield field_row("Replace ids", Field(", ".join(self.ids), id="ids", compact=True))
        yield Horizontal(Label("By", classes="field-label"),
                         Field(self.replacement, id="replacement", compact=True, placeholder="the replacing memory id"),
                         Button("Pick…", id="pick", compact=True), classes="field-row")
        yield field_row("Reason", Field("", id="reason", compact=True, placeholder="why they are replaced"))

    def on_mount(self) -> None:
        self.query_one("#dialog-error").display = False
        self.query_one("#replacement", Input).focus()

    @on(Button.Pressed, "#pick")
    def _pick(self) -> None:
        def picked(node_id: str | None) -> None:
            if node_id:
                self.query_one("#replacement", Input).value = node_id
        self.app.push_screen(NodePicker("Pick the replacing memory"), picked)

    def collect(self) -> dict[str, Any]:
        ids = split_keywords(self.query_one("#ids", Input).value)
        replacement = self.query_one("#replacement", Input).value.strip()
        if not ids or not replacement:
            raise ValueError("Give the ids to replace and the id that replaces them.")
        return {"ids": ids, "replacementId": replacement, "reason": self.query_one("#reason", Input).value.strip()}


class RelationshipForm(FormDialog):
    """Create or edit a relationship record."""

    COMPACT = True

    FIELDS = {"personId": "person", "name": "name", "aliases": "aliases", "relationship": "relationship",
              "affinity": "affinity", "reason": "reason", "memoryNodeId": "node"}

    def __init__(self, submit: Submit, rel: dict[str, Any] | None = None):
        super().__init__(f"Edit relationship {invisible_marked(rel['personId'])}" if rel else "New relationship",
                         submit)
        self.rel = rel

    def compose_fields(self) -> ComposeResult:
        rel = self.rel or {}
        yield field_row("Person id", Field(rel.get("personId", ""), id="person", compact=True, disabled=bool(rel),
                                           placeholder="stable id, e.g. qq:12345"))
        yield field_row("Name", Field(rel.get("name", ""), id="name", compact=True))
        yield field_row("Aliases", Field(", ".join(rel.get("aliases") or []), id="aliases", compact=True,
                                         placeholder="comma-separated"))
        yield field_row("Relation", Field(rel.get("relationship", ""), id="relationship", compact=True,
                                          placeholder="free text, e.g. classmate, close friend"))
        yield field_row("Affinity", Field(str(rel.get("affinity", 0)), id="affinity", compact=True,
                                          type="integer", placeholder="-100 … 100"))
        yield field_row("Reason", Field(rel.get("reason", ""), id="reason", compact=True,
                                        placeholder="the evidence for this affinity"))
        yield field_row("Memory", Field(rel.get("memoryNodeId") or "", id="node", compact=True,
                                        placeholder="linked person memory id (optional)"))

    def on_mount(self) -> None:
        self.query_one("#dialog-error").display = False
        self.query_one("#name" if self.rel else "#person", Input).focus()

    def collect(self) -> dict[str, Any]:
        value = {k: self.query_one(f"#{w}", Input).value.strip() for k, w in self.FIELDS.items()}
        if not value["personId"]:
            raise ValueError("A relationship needs a person id.")
        try:
            affinity = int(value["affinity"] or "0")
        except ValueError:
            raise ValueError("Affinity is a whole number from -100 to 100.") from None
        args: dict[str, Any] = {"personId": value["personId"], "name": value["name"],
                                "relationship": value["relationship"], "affinity": affinity,
                                "reason": value["reason"], "aliases": split_terms(value["aliases"])}
        old_node = (self.rel or {}).get("memoryNodeId") or ""
        if value["memoryNodeId"] != old_node:
            args["memoryNodeId"] = value["memoryNodeId"] or None
        return args


class SynonymForm(FormDialog):
    """Add or edit one synonym group."""

    FIELDS = {"terms": "terms"}

    def __init__(self, submit: Submit, terms: list[str] | None = None, index: int | None = None):
        super().__init__(f"Edit synonym group {index}" if index is not None else "New synonym group", submit)
        self.terms = terms or []

    def compose_fields(self) -> ComposeResult:
        yield field_row("Terms", Field(", ".join(self.terms), id="terms", compact=True,
                                       placeholder="two or more, comma-separated: 猫, 猫咪, cat"))
        yield Static("Groups that share a term are one class: every term expands to all of them.",
                     classes="hint")

    def on_mount(self) -> None:
        self.query_one("#dialog-error").display = False
        self.query_one("#terms", Input).focus()

    def collect(self) -> dict[str, Any]:
        terms = split_terms(self.query_one("#terms", Input).value)
        if len(terms) < 2:
            raise ValueError("A synonym group needs at least two terms.")
        return {"terms": terms}


class PersonaForm(FormDialog):
    """Edit PERSONA.md, the persona text at the top of the bot's system prefix."""

    FIELDS = {"text": "persona-text"}

    def __init__(self, submit: Submit, text: str):
        super().__init__("PERSONA.md — who the bot is (comments <!-- … --> are not sent)", submit)
        self.text = text

    def compose_fields(self) -> ComposeResult:
        yield TextArea(self.text, id="persona-text", compact=True, soft_wrap=True)

    def on_mount(self) -> None:
        self.query_one("#dialog-error").display = False
        self.query_one("#persona-text", TextArea).focus()

    def collect(self) -> dict[str, Any]:
        return {"text": self.query_one("#persona-text", TextArea).text}


ROOT_CHOICE = "\x00root"


class NodePicker(ModalScreen[str | None]):
    """Pick a memory by searching (or Browse's current one); returns its id, "" for "no
    parent" when `allow_root`, None when cancelled. Enter picks the highlighted entry,
    from the keywords box as from the list (the first entry until another is highlighted)."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="picker.cancel", tooltip="Close without picking"),
        Binding("down", "to_list", "List", show=False, id="picker.list", tooltip="Move into the results"),
    ]

    app: ZcorApp

    def __init__(self, title: str = "Pick a memory", *, allow_root: bool = False, exclude: set[str] | None = None):
        super().__init__()
        self.picker_title = title
        self.allow_root = allow_root
        self.exclude = exclude or set()
        self.results_for: str | None = None
        """The keywords the list shows results for (None while a search is due)."""

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(shown(self.picker_title), id="dialog-title", markup=False)
            yield Field(placeholder="keywords in title or content (all must occur)", id="picker-query", compact=True)
            yield OptionList(id="picker-options")
            yield Static("Enter picks the highlighted entry · ↓ moves into the list · Esc cancels", classes="hint")

    def on_mount(self) -> None:
        self.query_one("#picker-query", Input).focus()
        self.search("", delay=0)

    @on(Input.Changed, "#picker-query")
    def _changed(self, event: Input.Changed) -> None:
        self.results_for = None
        self.search(event.value)

    @on(Input.Submitted, "#picker-query")
    def _submitted(self, event: Input.Submitted) -> None:
        if self.results_for == event.value:
            self._pick_highlighted()
        else:  # typed faster than the search: search now, then pick
            self.search(event.value, delay=0, pick=True)

    def _pick_highlighted(self) -> None:
        options = self.query_one("#picker-options", OptionList)
        if options.option_count:
            self._choose(options.get_option_at_index(options.highlighted or 0).id or "")

    def action_to_list(self) -> None:
        options = self.query_one("#picker-options", OptionList)
        if options.option_count:
            options.focus()
            options.highlighted = options.highlighted or 0

    @work(exclusive=True, group="picker")
    async def search(self, text: str, delay: float = 0.25, pick: bool = False) -> None:
        if delay:
            await asyncio.sleep(delay)  # typing: one query when the operator pauses
        args: dict[str, Any] = {"limit": 30}
        keywords = split_keywords(text)
        if keywords:
            args["keywords"] = keywords
        page = await self.app.tool(self.app.client.zcor_memory_query(cast(QueryArgs, args)))
        options: list[Option] = []
        if not keywords:
            if self.allow_root:
                options.append(Option(Text("(no parent: make it a root)", style="italic"), id=ROOT_CHOICE))
            selected = self.app.selected_node
            if selected and selected[0] not in self.exclude:
                options.append(Option(Text.assemble(("Browse selection: ", "italic"), (selected[0], "cyan"),
                                                    " ", one_line(selected[1], 60)), id=f"sel:{selected[0]}"))
        for item in page["items"] if page else []:
            if item["id"] in self.exclude:
                continue
            options.append(Option(Text.assemble((item["id"], "cyan"), " ", one_line(item["title"], 70)),
                                  id=item["id"]))
        option_list = self.query_one("#picker-options", OptionList)
        option_list.clear_options()
        option_list.add_options(options)
        if options:
            option_list.highlighted = 0
        self.results_for = text
        if pick:
            self._pick_highlighted()

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self._choose(event.option.id or "")

    def _choose(self, choice: str) -> None:
        if choice == ROOT_CHOICE:
            self.dismiss("")
        else:
            self.dismiss(choice.removeprefix("sel:"))

    def action_cancel(self) -> None:
        self.dismiss(None)
