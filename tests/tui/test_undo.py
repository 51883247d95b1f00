"""Undo in the TUI against a real daemon: revert from History (preview, confirm, conflicts,
force), a memory's versions from Browse (diff, restore), and the read-only past tree."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest
from textual.widgets import Button, DataTable, Input, Tree

from zcor_tui.format import parse_instant
from zcor_tui.screens.browse import BrowseScreen
from zcor_tui.screens.dialogs import ConfirmDialog
from zcor_tui.screens.help import HelpScreen
from zcor_tui.screens.history import HistoryScreen
from zcor_tui.screens.revert import RevertScreen
from zcor_tui.screens.timetravel import TimeTravelScreen
from zcor_tui.screens.versions import VersionsScreen
from zcor_tui.widgets.memory_tree import MemoryTree
from zcord.client import ToolError

from .conftest import press, screen_text, settle, text_of, until


def test_instants_for_time_travel():
    now = datetime(2026, 1, 5, 12, 0, tzinfo=timezone(timedelta(hours=8)))
    assert parse_instant("-2h", now) == "2026-01-05T10:00:00.000+08:00"
    assert parse_instant(" -1d 6h ", now) == "2026-01-04T06:00:00.000+08:00"
    assert parse_instant("-90M", now) == "2026-01-05T10:30:00.000+08:00"
    assert parse_instant("2026-01-03T10:00:00+08:00") == "2026-01-03T10:00:00.000+08:00"
    local = datetime.fromisoformat(parse_instant("2026-01-03 10:00"))
    assert local.replace(tzinfo=None) == datetime(2026, 1, 3, 10, 0) and local.utcoffset() is not None
    for bad in ("", "yesterday", "2h", "-2x"):
        with pytest.raises(ValueError):
            parse_instant(bad, now)


def last_seq(op) -> int:
    return op.call_tool("zcor_memory_history", {"limit": 1})["items"][0]["seq"]


async def open_revert_of_newest(pilot, app) -> RevertScreen:
    await press(pilot, "3")
    assert isinstance(app.screen, HistoryScreen)
    app.screen.query_one("#records", DataTable).focus()
    await press(pilot, "home", "u")
    assert isinstance(app.screen, RevertScreen)
    return app.screen


async def test_revert_a_merge_from_history_after_its_preview(memory, app_for):
    d, ids = memory
    with d.client() as bot:
        merged = bot.call_tool("zcor_memory_merge", {"ids": [ids["mom"], ids["dad"]], "title": "父母",
                                                     "content": "爸爸妈妈。", "reason": "合在一起"})["id"]
    with d.client("operator") as op:
        merge_seq = last_seq(op)
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        dialog = await open_revert_of_newest(pilot, app)
        assert dialog.seq == merge_seq
        body = text_of(dialog.query_one("#revert-body").content)
        assert "Reverting makes" in body and f"• node.delete · {merged} — removed" in body
        assert f"• node.update · {ids['mom']} — updatedAt, supersededBy, supersedeReason" in body
        assert f"node.delete · {merged}" in body and "title: 父母" in body  # the merged memory goes
        assert f"node.update · {ids['mom']}" in body and f"node.update · {ids['dad']}" in body
        assert "supersededBy" in body and f"- {merged}" in body  # the sources are current again
        assert not dialog.query_one("#confirm", Button).disabled
        assert dialog.query_one("#force", Button).disabled
        preview_text = screen_text(app)
        with d.client("operator") as op:
            assert last_seq(op) > merge_seq
            assert op.call_tool("zcor_memory_read", {"id": merged})["title"] == "父母"  # the preview changed nothing

        await press(pilot, "y")
        assert isinstance(app.screen, HistoryScreen)
        assert f"Reverted operation #{merge_seq}" in app.noted() and "recorded as operation #" in app.noted()
        with d.client() as bot:
            assert bot.call_tool("zcor_memory_read", {"id": ids["mom"]})["supersededBy"] is None
            with pytest.raises(ToolError) as gone:
                bot.call_tool("zcor_memory_read", {"id": merged})
            assert gone.value.code == "not_found"
        # the revert is an operation of its own, newest in History
        table = app.screen.query_one("#records", DataTable)
        await until(pilot, lambda: table.row_count and table.get_row_at(0)[2] == "zcor/history/revert",
                    what="the revert in History")
    print(preview_text)


async def test_a_conflict_is_shown_and_force_writes_the_old_values(memory, app_for):
    d, ids = memory
    with d.client() as bot, d.client("operator") as op:
        bot.call_tool("zcor_memory_write", {"id": ids["dad"], "title": "爸爸", "content": "爸爸退休了。"})
        bot_seq = last_seq(op)
        op.call_tool("zcor_memory_write", {"id": ids["dad"], "title": "父亲", "content": "爸爸退休了。"})
        family_seq = op.call_tool("zcor_memory_history", {"keywords": ["家人"], "limit": 50})["items"][-1]["seq"]
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        # the memory the bot changed was changed again since: forceable
        app.push_screen(RevertScreen(bot_seq))
        await settle(pilot)
        dialog = app.screen
        body = text_of(dialog.query_one("#revert-body").content)
        assert "1 conflict" in body and f"{ids['dad']}: it changed since" in body and "title" in body
        assert "Force (f) writes the old values" in body and "content: 爸爸在工厂上班。" not in body
        assert "- 爸爸退休了。" in body and "+ 爸爸在工厂上班。" in body
        assert dialog.query_one("#confirm", Button).disabled and not dialog.query_one("#force", Button).disabled
        assert not dialog.query_one("#confirm", Button).display  # no "Revert (y)" offered over conflicts
        assert "Revert (y)" not in screen_text(app) and "Force (f)" in screen_text(app)
        await pilot.press("y")  # not while there are conflicts
        await settle(pilot)
        assert app.screen is dialog
        await press(pilot, "f")
        assert not isinstance(app.screen, RevertScreen)
        assert f"Reverted operation #{bot_seq} (forced)" in app.noted()
        with d.client() as bot:
            dad = bot.call_tool("zcor_memory_read", {"id": ids["dad"]})
        assert (dad["title"], dad["content"]) == ("爸爸", "爸爸在工厂上班。")

        # creating 家人 cannot be undone while it has children: not even forced
        app.push_screen(RevertScreen(family_seq))
        await settle(pilot)
        dialog = app.screen
        body = text_of(dialog.query_one("#revert-body").content)
        assert f"{ids['family']}: removing it would orphan children" in body and "cannot be forced" in body
        assert dialog.query_one("#confirm", Button).disabled and dialog.query_one("#force", Button).disabled
        assert "Revert (y)" not in screen_text(app) and "Force (f)" not in screen_text(app)
        await press(pilot, "y", "f")
        assert app.screen is dialog
        await press(pilot, "escape")
        assert not isinstance(app.screen, RevertScreen)
        with d.client() as bot:
            assert bot.call_tool("zcor_memory_read", {"id": ids["family"]})["title"] == "家人"


async def test_versions_diff_between_any_two_and_restore_one(memory, app_for):
    d, ids = memory
    with d.client() as bot:
        bot.call_tool("zcor_memory_write", {"id": ids["deadline"], "title": "项目截止日期", "content": "五月上线。"})
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.show_node(ids["deadline"])
        await settle(pilot)
        await press(pilot, "h")
        screen = app.screen
        assert isinstance(screen, VersionsScreen)
        table = screen.query_one("#versions", DataTable)
        assert table.row_count == 3 and table.cursor_row == 2
        rows = [table.get_row_at(n) for n in range(3)]
        assert [str(r[3]) for r in rows] == ["node.create", "node.update", "node.update"]
        assert [str(r[2]) for r in rows] == ["model", "operator", "model"] and str(rows[2][0]) == "now"
        diff = text_of(screen.query_one("#version-diff").content)
        assert "- 四月中旬上线，三月底提测。" in diff and "+ 五月上线。" in diff

        table.move_cursor(row=0)
        await pilot.press("b")  # the first version is the base
        table.move_cursor(row=2)
        await settle(pilot)
        assert str(table.get_row_at(0)[0]) == "base"
        diff = text_of(screen.query_one("#version-diff").content)
        assert "- 三月底上线。" in diff and "+ 五月上线。" in diff and "from operation #" in diff

        table.move_cursor(row=1)
        await press(pilot, "R")
        assert isinstance(app.screen, ConfirmDialog)
        await press(pilot, "y")
        assert app.screen is screen and "Restored" in app.noted()
        await until(pilot, lambda: table.row_count == 4, what="the restored version listed")
        with d.client() as bot:
            assert bot.call_tool("zcor_memory_read", {"id": ids["deadline"]})["content"] == "四月中旬上线，三月底提测。"
        await press(pilot, "escape")
        assert isinstance(app.screen, BrowseScreen)
        assert "四月中旬上线" in text_of(app.screen.query_one("#detail").content)


async def test_time_travel_shows_the_old_tree_read_only(memory, app_for):
    d, ids = memory
    with d.client() as bot:
        bot.call_tool("zcor_memory_write", {"id": ids["mom"], "title": "母亲", "content": "妈妈退休了。"})
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "question_mark")
        assert isinstance(app.screen, HelpScreen)
        help_text = text_of(app.screen.query_one("#dialog VerticalScroll Static").content)
        for entry in (r"\bu +Revert — Undo", r"\bh +Versions — Every version", r"\bT +Time travel — The tree",
                      r"\bR +Restore this version", r"escape, n +Cancel", r"\bb +Mark base", r"escape +Back to now"):
            assert re.search(entry, help_text), entry
        await pilot.press("escape")
        await press(pilot, "T")
        screen = app.screen
        assert isinstance(screen, TimeTravelScreen)
        box = screen.query_one("#past-time", Input)
        box.value = "yesterday"
        await press(pilot, "enter")
        assert box.has_class("-invalid") and "not a time" in text_of(screen.query_one("#past-summary").content)

        box.value = "-1h"  # before the bot's edit a moment ago
        await press(pilot, "enter")
        banner = text_of(screen.query_one("#past-banner").content)
        assert "PAST · READ-ONLY" in banner and "1 later change undone" in banner
        tree = screen.query_one("#past-tree", Tree)
        family = tree.root.children[0]
        assert str(family.label).startswith("家人")
        family.expand()
        await settle(pilot)
        assert [str(c.label) for c in family.children][0] == f"★ 妈妈 {ids['mom']} (1)"
        tree.move_cursor(family.children[0])
        await settle(pilot)
        detail = text_of(screen.query_one("#past-detail").content)
        assert "妈妈是小学老师" in detail and "家人 › 妈妈" in detail and "★ important" in detail

        await pilot.press("ctrl+t")  # back to the time box
        assert box.has_focus
        box.value = "2026-01-03T12:00:00+08:00"  # before the bot's 工作 and the 爱好 branch
        await press(pilot, "enter")
        assert "2026-01-03 12:00:00 +08:00" in text_of(screen.query_one("#past-banner").content)
        assert [str(c.label).split()[0] for c in tree.root.children] == ["家人"]

        tree.focus()
        await pilot.press("e", "d", "n", "i")  # Browse's edit keys do nothing here
        await settle(pilot)
        assert app.screen is screen
        with d.client() as bot:
            mom = bot.call_tool("zcor_memory_read", {"id": ids["mom"]})
        assert mom["title"] == "母亲" and mom["important"]
        await press(pilot, "escape")
        assert isinstance(app.screen, BrowseScreen)
        assert str(app.screen.query_one(MemoryTree).root.children[0].label).startswith("家人")
