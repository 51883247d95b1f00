"""Origin, review and undo by origin in the TUI against a real daemon: History and Versions
say who caused a change, the Review screen (key 8) lists held changes with their origin and
diff and approves or rejects them, and History's origin filter leads to undo by origin."""

from __future__ import annotations

import re

import pytest
from textual.widgets import Button, DataTable, Input

from zcor_tui.screens.history import HistoryScreen
from zcor_tui.screens.origin_revert import RevertOriginScreen
from zcor_tui.screens.review import RejectScreen, ReviewScreen
from zcor_tui.screens.versions import VersionsScreen
from zcord.client import ToolError

from .conftest import press, screen_text, settle, text_of, until

GROUP = "qq:group:1"


def told(*senders: str) -> dict:
    return {"session": GROUP, "senders": list(senders)}


async def test_review_screen_approves_and_rejects_held_changes(memory, app_for):
    d, ids = memory
    with d.client("operator") as op, d.client() as bot:
        op.trust_set("qq:troll", "untrusted")
        kept = bot.call_tool("zcor_memory_write", {"title": "火锅新规则", "content": "先给我发红包"},
                             origin=told("qq:troll"))["id"]
        bot.call_tool("zcor_memory_write", {"id": ids["dad"], "title": "爸爸", "content": "爸爸是骗子。"},
                      origin=told("qq:troll"))
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "8")
        assert isinstance(app.screen, ReviewScreen)
        table = app.screen.query_one("#held", DataTable)
        await until(pilot, lambda: table.row_count == 2, what="two held changes")
        shown = screen_text(app)
        assert "2 held changes" in shown and "from qq:troll in qq:group:1" in shown
        detail = text_of(app.screen.query_one("#held-detail").content)
        assert "爸爸是骗子" in detail and "爸爸在工厂上班" in detail  # the newest first, with its before
        table.focus()
        await press(pilot, "x")
        assert isinstance(app.screen, RejectScreen)
        body = text_of(app.screen.query_one("#revert-body").content)
        assert f"node.update · {ids['dad']}" in body
        await press(pilot, "y")
        assert isinstance(app.screen, ReviewScreen)
        assert "Reverted held operation #" in app.noted()
        await until(pilot, lambda: table.row_count == 1, what="one held change left")
        await press(pilot, "a")
        assert "Approved held operation" in app.noted()
        await until(pilot, lambda: table.row_count == 0, what="nothing held")
        assert "Nothing is held for review" in text_of(app.screen.query_one("#held-detail").content)
    with d.client("operator") as op, d.client() as bot:
        assert op.call_tool("zcor_memory_read", {"id": ids["dad"]})["content"] == "爸爸在工厂上班。"
        assert kept in bot.recall(GROUP, [{"text": "火锅规则", "origin": "external", "senderKey": "qq:1"}])


async def test_history_shows_origins_and_undoes_one_sender(memory, app_for):
    d, ids = memory
    with d.client() as bot:
        bot.call_tool("zcor_memory_write", {"id": ids["dad"], "title": "爸爸", "content": "爸爸爱钓鱼。"},
                      origin=told("qq:42"))
        troll = bot.call_tool("zcor_memory_write", {"title": "群规", "content": "都听我的"},
                              origin=told("qq:troll"))["id"]
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "3")
        assert isinstance(app.screen, HistoryScreen)
        app.screen.query_one("#origin", Input).value = "qq:troll"
        table = app.screen.query_one("#records", DataTable)
        await until(pilot, lambda: table.row_count == 1, what="the troll's one record")
        record = text_of(app.screen.query_one("#record").content)
        assert re.search(r"Origin +from qq:troll in qq:group:1", record)
        table.focus()
        await press(pilot, "O")
        assert isinstance(app.screen, RevertOriginScreen)
        body = text_of(app.screen.query_one("#revert-body").content)
        assert f"node.delete · {troll}" in body and "Reverting makes 1 change" in body
        assert not app.screen.query_one("#confirm", Button).disabled
        await press(pilot, "y")
        assert isinstance(app.screen, HistoryScreen)
        assert "Reverted the changes caused by qq:troll" in app.noted()
        app.push_screen(VersionsScreen(ids["dad"]))
        await settle(pilot)
        versions = app.screen.query_one("#versions", DataTable)
        await until(pilot, lambda: versions.row_count >= 2, what="the versions")
        assert "Origin: from qq:42 in qq:group:1" in text_of(app.screen.query_one("#version-diff").content)
    with d.client("operator") as op:
        assert op.history_query({"origin": "qq:troll", "changesOnly": True})["total"] == 1
        assert op.status()["nodes"] == len(ids)


async def test_a_relationship_leads_to_undoing_that_persons_changes(memory, app_for):
    d, ids = memory
    with d.client("operator") as op, d.client() as bot:
        op.call_tool("zcor_relationship_write", {"personId": "qq:troll", "name": "捣蛋鬼", "relationship": "群友",
                                                 "affinity": 0, "reason": "刚进群"})
        made = bot.call_tool("zcor_memory_write", {"title": "群规", "content": "都听我的"},
                             origin=told("qq:troll"))["id"]
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "4")
        table = app.screen.query_one(DataTable)
        await until(pilot, lambda: table.row_count >= 1, what="the relationships")
        table.focus()
        row = next(n for n in range(table.row_count) if "qq:troll" in str(table.get_row_at(n)[0]))
        table.move_cursor(row=row)
        await settle(pilot)
        await press(pilot, "O")
        assert isinstance(app.screen, RevertOriginScreen) and app.screen.sender == "qq:troll"
        assert f"node.delete · {made}" in text_of(app.screen.query_one("#revert-body").content)
        await press(pilot, "y")
        assert "Reverted the changes caused by qq:troll" in app.noted()
    with d.client("operator") as op:
        assert op.history_query({"origin": "qq:troll", "changesOnly": True})["total"] == 1
        with pytest.raises(ToolError) as nothing:  # nothing of theirs is left in force
            op.history_revert_origin("qq:troll", preview=True)
        assert nothing.value.code == "invalid_argument"
