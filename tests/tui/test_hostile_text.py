"""Memory text that is markup, terminal control or bidi override, on every screen (issue 23.3, 23.6).

A title, a term, a name with `[/]` crashed the app (MarkupError); an OSC 2 / OSC 52 / CSI 2J
or U+202E in a memory reached the operator's terminal. Every field of every kind of record
here carries a corpus of both; the app must show them as text, marked visibly, and never
draw a raw control character.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from textual.widgets import DataTable, Input
from textual.widgets._toast import Toast

from zcor_tui.screens.dialogs import ConfirmDialog, NodeForm, SynonymForm
from zcor_tui.widgets.memory_tree import MemoryTree
from zcord.client import UNSAFE
from zcord.service import Service

from .conftest import press, screen_text, settle, until

MARKUP = "[/] [b]bold[/b] [link=https://x]l[/link] [@click=app.quit]q[/] [$accent]v[/] [red"
CONTROLS = "\x1b]2;PWNED-TITLE\x07 \x1b]52;c;Y3VybCBldmlsLnNofHNo\x07 \x1b[2J \u202eevil\u202c \x9b31m \x7f"
BAD = f"{MARKUP} {CONTROLS}"
SHORT = "[/] [b]x \x1b]2;PWNED\x07 \u202eevil \x9b31m"
"""For fields capped at 100 characters (keywords, aliases, ids, names)."""
CHILD = "child [/] \x1b]2;PWNED-CHILD\x07"
LOOKALIKES = ["qq:10001", "qq:1000\u200b1", "ｑｑ:10001"]


def build_hostile(memdir: Path) -> dict[str, str]:
    memdir.mkdir(parents=True, exist_ok=True)
    (memdir / "synonyms.json").write_text(json.dumps({"version": 1, "groups": [[f"term{BAD}", "同义"]]},
                                                     ensure_ascii=False))
    with Service(memdir) as svc:
        def call(tool: str, **params: Any) -> dict[str, Any]:
            return svc.call(tool, params, actor="model")

        root = call("zcor_memory_write", title=f"root {BAD}", content=f"content {BAD}\nline two {BAD}",
                    keywords=[f"kw{SHORT}"], sourceMessage=f"source {BAD}")["id"]
        child = call("zcor_memory_write", title=CHILD, content=BAD, parentId=root, keywords=["同义"])["id"]
        call("zcor_memory_write", id=child, title=CHILD, content=f"changed {BAD}")
        call("zcor_memory_important", id=root, important=True)
        call("zcor_relationship_write", personId=f"qq:{SHORT}", name=f"name {SHORT}", aliases=[f"alias {SHORT}"],
             relationship=f"rel {BAD}", affinity=-30, reason=f"reason {BAD}", memoryNodeId=root)
        for n, pid in enumerate(LOOKALIKES):
            call("zcor_relationship_write", personId=pid, name="小王", relationship="同事", affinity=n * 10,
                 reason="look-alike ids")
    return {"root": root, "child": child}


def assert_clean(app, where: str) -> str:
    """No raw control or bidi character on the screen; the markup of the Memory shown as text."""
    text = screen_text(app)
    raw = sorted({f"U+{ord(c):04X}" for c in UNSAFE.findall(text) if c not in "\n"})
    assert not raw, f"{where}: raw terminal controls on the screen: {raw}"
    return text


async def test_every_screen_shows_hostile_memory_text_as_text(make_daemon, app_for):
    d = make_daemon()
    ids = build_hostile(d.memdir)
    d.start()
    app = app_for(d)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        tree = app.screen.query_one(MemoryTree)
        await until(pilot, lambda: tree.cursor_item is not None, what="the tree")
        text = assert_clean(app, "Browse")
        assert "root [/] [b]bold[/b]" in text  # markup as text
        assert "␛]2;PWNED-TITLE␇" in text and "\\u202eevil\\u202c" in text and "\\u009b31m" in text
        assert "content [/]" in text and "source [/]" in text

        await pilot.press("d")  # a memory with children: the toast quotes their titles
        await settle(pilot)
        assert "has 1 child" in app.noted("warning")
        assert_clean(app, "Browse d")

        await pilot.press("e")  # the edit form holds the real title
        await settle(pilot)
        assert isinstance(app.screen, NodeForm)
        assert app.screen.query_one("#title", Input).value == f"root {BAD}"
        assert_clean(app, "the edit form")
        await press(pilot, "escape")

        await pilot.press("h")  # versions of the memory
        await settle(pilot)
        assert_clean(app, "Versions")
        await press(pilot, "escape")

        app.show_node(ids["child"])  # the child, then its versions' diff
        await settle(pilot)
        assert tree.cursor_item.id == ids["child"]
        await press(pilot, "h")
        assert "changed" in assert_clean(app, "Versions of the child")
        await press(pilot, "escape")

        await pilot.press("ctrl+p")  # the palette lists commands naming the selection
        await settle(pilot)
        await press(pilot, "escape")

        await press(pilot, "escape", "2")
        assert "root [/]" in assert_clean(app, "Search")
        app.screen.query_one("#q", Input).value = "PWNED"
        await settle(pilot)
        assert_clean(app, "Search PWNED")

        await press(pilot, "escape", "3")
        table = app.screen.query_one("#records", DataTable)
        text = assert_clean(app, "History")
        assert "qq:1000⟨U+20" in text and "⟨U+FF51⟩⟨U+" in text  # look-alike targets told apart
        table.focus()
        for _ in range(table.row_count):
            assert_clean(app, f"History row {table.cursor_row}")
            await press(pilot, "down")
        await pilot.press("v")  # side by side
        await settle(pilot)
        assert_clean(app, "History side by side")

        await press(pilot, "escape", "4")
        rels = app.screen.query_one("#rels", DataTable)
        rels.move_cursor(row=rels.get_row_index(f"qq:{SHORT}"))
        await settle(pilot)
        text = assert_clean(app, "Relationships")
        assert "name [/]" in text and "reason [/]" in text and "alias [/]" in text
        # look-alike ids are told apart
        assert "qq:1000⟨U+200B⟩1" in text and "⟨U+FF51⟩⟨U+FF51⟩:10001" in text
        await pilot.press("ctrl+p")  # the palette: "Edit relationship …" with the name as its help
        await settle(pilot)
        await press(pilot, *"relationship")
        assert "name [/]" in assert_clean(app, "Relationships palette")
        await press(pilot, "escape")
        await press(pilot, "d")
        assert isinstance(app.screen, ConfirmDialog)
        assert_clean(app, "Relationships delete")
        await press(pilot, "n")

        await press(pilot, "escape", "5")
        assert "term[/]" in assert_clean(app, "Synonyms")
        await press(pilot, "e")
        assert isinstance(app.screen, SynonymForm)
        assert_clean(app, "Synonyms edit")
        await press(pilot, "escape")
        await press(pilot, "d")
        assert_clean(app, "Synonyms remove")
        await press(pilot, "n")
        app.screen.query_one("#preview-text", Input).value = "同义 [/] \x1b[2J"
        await settle(pilot)
        assert "PWNED-CHILD" in assert_clean(app, "the recall preview")

        for key, name in (("6", "Config"), ("7", "Backups"), ("1", "Browse again")):
            await press(pilot, "escape", key)
            assert_clean(app, name)

        await pilot.press("T")  # time travel: the tree of an instant
        await settle(pilot)
        assert_clean(app, "Time travel")
    assert app._exception is None


async def test_notifications_are_never_markup(make_daemon, app_for):
    """A toast quoting Memory text is text: its markup does not crash, its controls are marked."""
    d = make_daemon().start()
    app = app_for(d)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await settle(pilot)
        app.screen.notify(f"saved {BAD}", title=f"t {BAD}")  # a screen's notify asks for markup by default
        await settle(pilot)
        await until(pilot, lambda: app.query(Toast), what="the toast")
        toasts = [str(t.render()) for t in app.query(Toast)]
        assert toasts and all(not UNSAFE.search(t.replace("\n", "")) for t in toasts)
        assert any(re.search(r"saved \[/\] \[b\]bold\[/b\]", t) and "␛]2;PWNED-TITLE␇" in t for t in toasts)
