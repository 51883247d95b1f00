"""Issue 34 in the TUI: Relationships `F` previews exactly what forgetting a person removes
and erases only on `y`; History `F` forgets the sender of the selected record."""

from __future__ import annotations

from textual.widgets import DataTable, Input

from zcor_tui.screens.forget import ForgetScreen
from zcor_tui.screens.history import HistoryScreen

from .conftest import press, settle, text_of, until

GROUP = "qq:group:1"


async def test_forget_from_history_previews_then_erases(memory, app_for):
    d, _ids = memory
    with d.client() as bot:
        mid = bot.call_tool("zcor_memory_write", {"title": "Carol秘密", "content": "carol private words"},
                            origin={"session": GROUP, "senders": ["qq:carol"]})["id"]
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "3")
        assert isinstance(app.screen, HistoryScreen)
        app.screen.query_one("#origin", Input).value = "QQ:CAROL"
        table = app.screen.query_one("#records", DataTable)
        await until(pilot, lambda: table.row_count == 1, what="Carol's record")
        table.focus()
        await press(pilot, "F")
        assert isinstance(app.screen, ForgetScreen)
        screen = app.screen
        await until(pilot, lambda: not screen.busy, what="the preview")
        body = text_of(screen.query_one("#forget-body").content, width=200)
        assert f"memory {mid} Carol秘密" in body and "cannot be reverted" in body
        assert "operations.jsonl" in body
        await press(pilot, "n")
        with d.client("operator") as op:
            assert op.call_tool("zcor_memory_read", {"id": mid})["title"] == "Carol秘密"
        await press(pilot, "F")
        screen = app.screen
        assert isinstance(screen, ForgetScreen)
        await until(pilot, lambda: not screen.busy, what="the preview")
        await press(pilot, "y")
        await until(pilot, lambda: "Erased qq:carol" in app.noted(), what="the erasure")
    assert b"carol private words" not in (d.memdir / "operations.jsonl").read_bytes()


async def test_forget_from_relationships_erases_the_selected_person(memory, app_for):
    d, _ids = memory
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "4")
        table = app.screen.query_one("#rels", DataTable)
        await until(pilot, lambda: table.row_count == 2, what="the relationships")
        table.focus()
        await press(pilot, "down")
        person = app.screen.selected
        assert person in ("qq:10001", "qq:10002")
        await press(pilot, "F")
        screen = app.screen
        assert isinstance(screen, ForgetScreen)
        await until(pilot, lambda: not screen.busy, what="the preview")
        body = text_of(screen.query_one("#forget-body").content, width=200)
        assert f"relationship {person}" in body and "cannot be reverted" in body
        await press(pilot, "y")
        await until(pilot, lambda: f"Erased {person}" in app.noted(), what="the erasure")
        await until(pilot, lambda: table.row_count == 1, what="the list without them")
    assert person.encode() not in (d.memdir / "memory-state.json").read_bytes()
