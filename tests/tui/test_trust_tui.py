"""Issue 33 in the TUI: History's origin filter takes a sender in any form (the one sender
key), and undo by origin leaves alone what the sender was only present at, saying so."""

from __future__ import annotations

from textual.widgets import DataTable, Input

from zcor_tui.screens.history import HistoryScreen
from zcor_tui.screens.origin_revert import RevertOriginScreen

from .conftest import press, settle, text_of, until

GROUP = "qq:group:1"


async def test_undo_by_origin_in_any_form_leaves_shared_changes_alone(memory, app_for):
    d, ids = memory
    with d.client() as bot:
        own = bot.call_tool("zcor_memory_write", {"title": "群规", "content": "都听我的"},
                            origin={"session": GROUP, "senders": ["Troll"]})["id"]
        shared = bot.call_tool("zcor_memory_write", {"title": "Alice的猫", "content": "橘猫"},
                               origin={"session": GROUP, "senders": ["troll", "qq:alice"], "speaker": "qq:alice"})["id"]
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "3")
        assert isinstance(app.screen, HistoryScreen)
        app.screen.query_one("#origin", Input).value = "ＴＲＯＬＬ"
        table = app.screen.query_one("#records", DataTable)
        await until(pilot, lambda: table.row_count == 2, what="both records naming the troll")
        assert "from qq:alice (with troll)" in text_of(app.screen.query_one("#record").content)
        table.focus()
        await press(pilot, "O")
        assert isinstance(app.screen, RevertOriginScreen)
        body = text_of(app.screen.query_one("#revert-body").content, width=200)
        assert f"node.delete · {own}" in body and "Reverting makes 1 change" in body
        assert "Left alone: 1 operation(s)" in body and f"node.delete · {shared}" not in body
        await press(pilot, "y")
        assert "Reverted the changes caused by" in app.noted()
    with d.client("operator") as op:
        assert op.call_tool("zcor_memory_read", {"id": shared})["title"] == "Alice的猫"
        assert op.status()["nodes"] == len(ids) + 1
