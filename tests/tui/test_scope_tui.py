"""Issue 34 in the TUI: Browse, Search and History show a private conversation's memory with
its scope, and `p` in Browse changes the scope through zcord (a logged operation)."""

from __future__ import annotations

from textual.widgets import DataTable, Input, Static

from zcor_tui.screens.dialogs import PromptDialog
from zcor_tui.widgets.memory_tree import MemoryTree

from .conftest import press, settle, text_of

PRIVATE = {"session": "qq:private:42", "senders": ["qq:42"], "private": True}


async def test_scope_shows_and_changes_in_browse_search_and_history(memory, app_for):
    d, ids = memory
    with d.client() as bot:
        mid = bot.call_tool("zcor_memory_write", {"title": "小王的私事", "content": "只在私聊说过"}, origin=PRIVATE)["id"]
    app = app_for(d)
    async with app.run_test(size=(130, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "g", *mid, "enter")
        assert app.screen.query_one(MemoryTree).cursor_item.id == mid
        await settle(pilot)
        assert "private to session qq:private:42" in text_of(app.screen.query_one("#detail").content)

        await press(pilot, "p")
        assert isinstance(app.screen, PromptDialog)
        field = app.screen.query_one(Input)
        assert field.value == "qq:private:42"
        field.value = "everywhere"
        await press(pilot, "enter")
        assert "is now visible everywhere" in app.noted()
        assert "private to session" not in text_of(app.screen.query_one("#detail").content)
        with d.client("operator") as op:
            assert "scope" not in op.call_tool("zcor_memory_read", {"id": mid})
            (rec,) = op.history_query({"tool": "zcor/scope/set"})["items"]
            op.history_revert(rec["seq"])  # private again
        await settle(pilot)

        await press(pilot, "2")  # Search
        app.screen.query_one("#q", Input).value = "私事"
        await settle(pilot)
        table = app.screen.query_one("#results", DataTable)
        assert "[private: qq:private:42]" in str(table.get_row(mid)[2])

        await press(pilot, "escape", "3")  # History
        await settle(pilot)
        screen = app.screen
        (write,) = [k for k, r in screen.records.items() if r["tool"] == "zcor_memory_write"
                    and (r.get("origin") or {}).get("private")]
        assert "private" in str(screen.query_one("#records", DataTable).get_row(write)[4])
        screen._select(write)
        await settle(pilot)
        shown = text_of(screen.query_one("#record", Static).content)
        assert "(private)" in shown and f"{mid}: private to session qq:private:42" in shown
