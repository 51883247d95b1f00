"""Consolidate (key 9, issue 38): zcord's proposals with their members side by side; `m`
merges a cluster through zcor_memory_merge (prefilled from the newest member, edited by the
operator), `f` folds a superseded chain, `d` dismisses a proposal for good."""

from __future__ import annotations

from textual.widgets import DataTable, Input

from zcor_tui.screens.consolidate import ConsolidateScreen
from zcor_tui.screens.dialogs import ConfirmDialog, MergeForm

from .conftest import press, screen_text, settle, text_of, until

BANK = {"title": "小王在银行上班", "content": "小王在工商银行上班，做柜员，每天早上八点半到岗。"}
BANK_REWORDED = {"title": "小王是银行柜员", "content": "小王在工商银行做柜员，早上八点半就要到岗上班。"}
CAT = {"title": "晓雯喜欢猫", "content": "晓雯最喜欢猫，家里养了一只英短叫团子。"}
CAT_TRADITIONAL = {"title": "曉雯喜歡貓", "content": "曉雯最喜歡貓，家裡養了一隻英短叫團子。"}


async def test_consolidate_merges_dismisses_and_folds(memory, app_for):
    d, _ids = memory
    with d.client() as bot:
        a = bot.call_tool("zcor_memory_write", BANK)["id"]
        b = bot.call_tool("zcor_memory_write", BANK_REWORDED)["id"]
        c = bot.call_tool("zcor_memory_write", CAT)["id"]
        e = bot.call_tool("zcor_memory_write", CAT_TRADITIONAL)["id"]
    with d.client("operator") as op:
        v1 = op.call_tool("zcor_memory_write", {"title": "晓雯住在北京", "content": "朝阳区"})["id"]
        v2 = op.call_tool("zcor_memory_write", {"title": "晓雯搬到上海", "content": "浦东"})["id"]
        v3 = op.call_tool("zcor_memory_write", {"title": "晓雯现在住杭州", "content": "西湖区"})["id"]
        op.call_tool("zcor_memory_supersede", {"ids": [v1], "replacementId": v2, "reason": "搬家"})
        op.call_tool("zcor_memory_supersede", {"ids": [v2], "replacementId": v3, "reason": "又搬家"})
        before = op.consolidate_list()
    assert before["total"] == 3, before
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "0")
        assert isinstance(app.screen, ConsolidateScreen)
        table = app.screen.query_one("#proposals", DataTable)
        await until(pilot, lambda: table.row_count == 3, what="three proposals")
        assert "3 proposals" in screen_text(app)
        table.focus()
        # the bank cluster: side by side, newest first
        table.move_cursor(row=[k.value for k in table.rows].index(f"{b},{a}"))
        await settle(pilot)
        detail = text_of(app.screen.query_one("#proposal").content)
        assert f"{b} (newest)" in detail and "小王是银行柜员" in detail and "小王在银行上班" in detail
        await press(pilot, "m")
        assert isinstance(app.screen, MergeForm)
        assert app.screen.query_one("#title", Input).value == BANK_REWORDED["title"]  # prefilled from the newest
        app.screen.query_one("#title", Input).value = "小王的工作"
        app.screen.query_one("#reason", Input).value = "同一件事"
        await press(pilot, "ctrl+s")
        await until(pilot, lambda: isinstance(app.screen, ConsolidateScreen), what="the form closing")
        await until(pilot, lambda: table.row_count == 2, what="two proposals left")
        assert "Merged" in app.noted()
        # dismiss the cat cluster
        table.move_cursor(row=[k.value for k in table.rows].index(f"{e},{c}"))
        await settle(pilot)
        await press(pilot, "d")
        await until(pilot, lambda: table.row_count == 1, what="one proposal left")
        # fold the chain
        await settle(pilot)
        await press(pilot, "f")
        assert isinstance(app.screen, ConfirmDialog)
        await press(pilot, "y")
        await until(pilot, lambda: table.row_count == 0, what="nothing left")
        assert "Nothing to consolidate" in text_of(app.screen.query_one("#proposal").content)
    with d.client("operator") as op:
        merged = op.call_tool("zcor_memory_read", {"id": a})["supersededBy"]
        node = op.call_tool("zcor_memory_read", {"id": merged})
        assert node["title"] == "小王的工作" and node["content"] == BANK_REWORDED["content"]
        assert op.consolidate_list()["total"] == 0
        listing = op.call_tool("zcor_memory_query", {"keywords": ["晓雯"], "includeSuperseded": True})
        assert {i["id"] for i in listing["items"]} >= {v3} and not {v1, v2} & {i["id"] for i in listing["items"]}
