"""The Backups screen's Import… (a preview to confirm, then one operation, then the card's
PERSONA.md offered) and Export… (format and path asked, the file written)."""

from __future__ import annotations

import json

from textual.widgets import Input

from tests.lorefiles import book_entry, card, dumps, png_card
from tests.tui.conftest import press, settle
from zcor_tui.screens.dialogs import ConfirmDialog, PromptDialog


async def _answer(pilot, app, text: str) -> None:
    assert isinstance(app.screen, PromptDialog)
    field = app.screen.query_one(Input)
    field.value = text
    await press(pilot, "enter")


async def test_import_with_a_preview_then_export(make_daemon, app_for, tmp_path):
    d = make_daemon().start()
    png = tmp_path / "aster.png"
    png.write_bytes(png_card({"ccv3": card([book_entry(["marsh"], "Fog every morning.", comment="Marsh",
                                                       constant=True),
                                            book_entry(["inn"], "Eel pie.", comment="Inn")], version=3)}))
    app = app_for(d)
    async with app.run_test(size=(110, 36)) as pilot:
        await settle(pilot)
        await press(pilot, "7")
        await press(pilot, "i")
        await _answer(pilot, app, str(png))
        dialog = app.screen
        assert isinstance(dialog, ConfirmDialog)
        assert "Import aster.png (character card)?" in dialog.question
        assert "2 to create, 0 to update, 0 unchanged" in dialog.question
        assert "create  m1      Marsh *" in dialog.question and "origin import:aster.png" in dialog.question
        with d.client("operator") as op:
            assert op.call_tool("zcor_memory_children", {})["items"] == []  # the preview changed nothing
        await press(pilot, "y")
        persona = app.screen
        assert isinstance(persona, ConfirmDialog) and "Replace PERSONA.md" in persona.question
        await press(pilot, "y")
        assert "Imported aster.png: 2 created" in app.noted() and "PERSONA.md replaced" in app.noted()
        with d.client("operator") as op:
            assert [i["title"] for i in op.call_tool("zcor_memory_children", {})["items"]] == ["Marsh", "Inn"]
            assert op.persona_get()["text"].startswith("# Aster")

        out = tmp_path / "book.json"
        await press(pilot, "e")
        await _answer(pilot, app, "worldinfo")
        await _answer(pilot, app, str(out))
        await settle(pilot)
        assert "Exported 2 memories as worldinfo" in app.noted()
        entries = json.loads(out.read_text())["entries"]
        assert [(e["comment"], e["constant"]) for e in entries.values()] == [("Marsh", True), ("Inn", False)]

        await press(pilot, "i")
        await _answer(pilot, app, str(tmp_path / "missing.json"))
        assert "Cannot read" in app.noted("error")
        bad = tmp_path / "bad.json"
        bad.write_bytes(dumps({"entries": {"0": {"uid": 0, "key": [1], "content": "x"}}}))
        await press(pilot, "i")
        await _answer(pilot, app, str(bad))
        assert 'entries["0"].key[0] must be a string' in app.noted("error")
