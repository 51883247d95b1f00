"""What the bot was shown (issue 38): from a History record of the bot's change, `w` opens the
recall log of the record's session up to the change, with each batch's memories and why."""

from __future__ import annotations

from textual.widgets import DataTable

from zcor_tui.screens.history import HistoryScreen
from zcor_tui.screens.recall_log import RecallLogScreen

from .conftest import press, screen_text, settle, text_of, until

GROUP = "qq:group:1"


async def test_history_opens_what_the_bot_was_shown_before_its_change(memory, app_for):
    d, ids = memory
    with d.client() as bot:
        bot.recall(GROUP, [{"text": "今天好累啊", "origin": "external", "senderKey": "qq:7"}])
        recalled = bot.recall(GROUP, [{"text": "爸爸最近怎么样", "origin": "external", "senderKey": "qq:42"}])
        assert ids["dad"] in recalled
        # the change whose origin is that batch (inferred from the connection's latest recall)
        bot.call_tool("zcor_memory_write", {"id": ids["dad"], "title": "爸爸", "content": "爸爸爱钓鱼。"})
        bot.recall(GROUP, [{"text": "后来的消息 爸爸", "origin": "external", "senderKey": "qq:99"}])
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "3")
        assert isinstance(app.screen, HistoryScreen)
        table = app.screen.query_one("#records", DataTable)
        await until(pilot, lambda: table.row_count > 0, what="history records")
        table.focus()
        table.move_cursor(row=0)
        await settle(pilot)
        assert app.screen.selected is not None and app.screen.selected.get("actor") == "model"
        await press(pilot, "w")
        assert isinstance(app.screen, RecallLogScreen)
        batches = app.screen.query_one("#recall-batches", DataTable)
        # the batch after the change is not shown; the two before it are, newest first
        await until(pilot, lambda: batches.row_count == 2, what="the two batches before the change")
        text = screen_text(app)
        assert "What the bot was shown" in text and GROUP in text and "qq:99" not in text
        detail = text_of(app.screen.query_one("#recall-batch").content)
        assert f"[{ids['dad']}]" in detail and "qq:42" in detail and "爸爸" in detail
        assert "Header" in detail
        await press(pilot, "down")
        detail = text_of(app.screen.query_one("#recall-batch").content)
        assert "qq:7" in detail and "Nothing was recalled" in detail
        await press(pilot, "escape")
        assert isinstance(app.screen, HistoryScreen)


async def test_a_record_without_a_session_says_so(memory, app_for):
    d, ids = memory
    with d.client("operator") as op:
        op.call_tool("zcor_memory_write", {"title": "运营备注", "content": "无"})
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "3")
        table = app.screen.query_one("#records", DataTable)
        await until(pilot, lambda: table.row_count > 0, what="history records")
        table.focus()
        table.move_cursor(row=0)
        await settle(pilot)
        await press(pilot, "w")
        assert isinstance(app.screen, HistoryScreen)
        assert "names no chat session" in app.noted("warning")
