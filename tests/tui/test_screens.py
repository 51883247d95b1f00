"""Search, History, Relationships, Synonyms, Config and Help against a real daemon."""

from __future__ import annotations

import re

from textual.widgets import Checkbox, DataTable, Input, Select, Switch, TextArea

from zcor_tui.screens.browse import BrowseScreen
from zcor_tui.screens.dialogs import (
    ConfirmDialog,
    NodePicker,
    PersonaForm,
    RelationshipForm,
    SynonymForm,
)
from zcor_tui.screens.help import HelpScreen
from zcor_tui.widgets.memory_tree import MemoryTree

from .conftest import press, screen_text, settle, text_of, until

REL_TOOLS = {"zcor_relationship_read", "zcor_relationship_query", "zcor_relationship_write",
             "zcor_relationship_delete"}


def row_keys(table: DataTable) -> list[str]:
    return [str(k.value) for k in table.rows]


async def test_search_with_a_time_range_and_jump_to_browse(memory, app_for):
    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "2")
        table = app.screen.query_one("#results", DataTable)
        assert row_keys(table)[0] == ids["deadline"] and len(row_keys(table)) == 9  # newest first, current only

        app.screen.query_one("#from", Input).value = "2026-01-04"
        app.screen.query_one("#to", Input).value = "2026-01-06"
        await settle(pilot)
        assert set(row_keys(table)) == {ids["work"], ids["colleague"]}
        app.screen.query_one("#superseded", Checkbox).value = True
        await settle(pilot)
        assert set(row_keys(table)) == {ids["work"], ids["colleague"], ids["old_plan"]}
        assert "3 matches" in text_of(app.screen.query_one("#search-summary").content)

        app.screen.query_one("#q", Input).value = "小王"
        await settle(pilot)
        assert row_keys(table) == [ids["colleague"]]

        app.screen.query_one("#to", Input).value = "2026-13-01"
        await settle(pilot)
        assert "to:" in text_of(app.screen.query_one("#search-summary").content)
        assert app.screen.query_one("#to", Input).has_class("-invalid")
        app.screen.query_one("#to", Input).value = ""
        await settle(pilot)

        table.focus()
        await press(pilot, "enter")
        assert isinstance(app.screen, BrowseScreen)
        assert app.screen.query_one(MemoryTree).cursor_item.id == ids["colleague"]


async def test_history_filters_and_shows_the_deleted_record(memory, app_for):
    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "3")
        table = app.screen.query_one("#records", DataTable)
        assert table.row_count == 18  # every change of build_memory, no reads
        app.screen.query_one("#q", Input).value = "临时记录"
        await settle(pilot)
        assert table.row_count == 2  # its create and its delete
        table.focus()
        await press(pilot, "home")
        record = text_of(app.screen.query_one("#record").content)
        assert "zcor_memory_delete" in record and "Deleted. The full record before the delete" in record
        assert "content: 稍后删除。" in record

        app.screen.query_one("#changes-only", Checkbox).value = False
        app.screen.query_one("#q", Input).value = ""
        app.screen.query_one("#from", Input).value = "2026-01-05"
        app.screen.query_one("#to", Input).value = "2026-01-05"
        await settle(pilot)
        tools = {table.get_row(k)[2] for k in table.rows}
        assert tools == {"zcor_memory_write", "zcor_memory_supersede"}
        # the supersede record shows what changed
        supersede = next(k for k in table.rows if table.get_row(k)[2] == "zcor_memory_supersede")
        table.move_cursor(row=table.get_row_index(supersede))
        await settle(pilot)
        record = text_of(app.screen.query_one("#record").content)
        assert f"node.supersede · {ids['old_plan']}" in record and "supersededBy" in record


async def test_history_pages_stay_whole_while_the_log_grows(memory, app_for):
    d, ids = memory
    with d.client() as bot:
        for _ in range(130):  # reads between the changes, as a chatty bot makes them
            bot.call_tool("zcor_memory_read", {"id": ids["mom"]})
        bot.call_tool("zcor_memory_write", {"id": ids["mom"], "title": "妈妈", "content": "退休了"})
    app = app_for(d)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "3")
        table = app.screen.query_one("#records", DataTable)
        assert table.row_count == 19
        app.screen.query_one("#changes-only", Checkbox).value = False
        await settle(pilot)
        first = set(row_keys(table))
        assert len(first) == 50
        await press(pilot, "ctrl+n")
        second = set(row_keys(table))
        assert len(second) == 50 and not first & second
        assert max(int(k) for k in second) < min(int(k) for k in first)
        await press(pilot, "ctrl+b")
        assert "page 1" in text_of(app.screen.query_one("#history-summary").content)


async def test_relationship_create_edit_link_and_jump(memory, app_for):
    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "4")
        table = app.screen.query_one("#rels", DataTable)
        assert row_keys(table) == ["qq:10002", "qq:10001"]
        await press(pilot, "n")
        form = app.screen
        assert isinstance(form, RelationshipForm)
        for field, value in (("person", "qq:20001"), ("name", "李雷"), ("aliases", "雷雷, 小李"),
                             ("relationship", "同学"), ("affinity", "55"), ("reason", "一起打球")):
            form.query_one(f"#{field}", Input).value = value
        await press(pilot, "ctrl+s")
        assert "qq:20001" in row_keys(table)
        assert "+55" in str(table.get_row("qq:20001")[2])

        table.move_cursor(row=table.get_row_index("qq:20001"))
        await press(pilot, "e")
        app.screen.query_one("#affinity", Input).value = "-30"
        await press(pilot, "ctrl+s")
        with d.client("operator") as c:
            rel = c.call_tool("zcor_relationship_read", {"personId": "qq:20001"})
        assert rel["affinity"] == -30 and rel["aliases"] == ["雷雷", "小李"]
        await until(pilot, lambda: "-30" in str(table.get_row("qq:20001")[2]), what="the edit in the table")

        await press(pilot, "l")
        picker = app.screen
        assert isinstance(picker, NodePicker)
        picker.query_one("#picker-query", Input).value = "爸爸"
        await settle(pilot)
        await pilot.press("enter")  # Enter in the keywords box picks the highlighted (first) entry
        await settle(pilot)
        with d.client("operator") as c:
            assert c.call_tool("zcor_relationship_read", {"personId": "qq:20001"})["memoryNodeId"] == ids["dad"]

        await press(pilot, "o")
        assert isinstance(app.screen, BrowseScreen)
        assert app.screen.query_one(MemoryTree).cursor_item.id == ids["dad"]
        await until(pilot, lambda: "qq:20001 李雷" in text_of(app.screen.query_one("#detail").content),
                    what="the link in the detail pane")

        await press(pilot, "4")
        await press(pilot, "u")
        await press(pilot, "d")
        assert isinstance(app.screen, ConfirmDialog)
        await press(pilot, "y")
        await until(pilot, lambda: "qq:20001" not in row_keys(table), what="the delete")


async def test_synonym_add_edit_remove_and_preview(memory, app_for):
    d, ids = memory
    with d.client() as bot:
        cat = bot.call_tool("zcor_memory_write", {"title": "小猫的名字", "content": "叫年糕", "keywords": []})
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "5")
        table = app.screen.query_one("#groups", DataTable)
        assert table.row_count == 7
        await press(pilot, "a")
        assert isinstance(app.screen, SynonymForm)
        app.screen.query_one("#terms", Input).value = "小猫, 喵星人, 猫咪"
        await press(pilot, "ctrl+s")
        await until(pilot, lambda: table.row_count == 8, what="the new group")
        with d.client("operator") as c:
            assert ["小猫", "喵星人", "猫咪"] in c.synonym_groups()

        app.screen.query_one("#preview-text", Input).value = "我家的喵星人今天很乖"
        await settle(pilot)
        preview = text_of(app.screen.query_one("#preview").content)
        assert "Expanded:" in preview and "小猫" in preview
        assert f"{cat['id']} 小猫的名字" in preview
        assert f"[{cat['id']}] 小猫的名字" in preview and "budget 6,000" in preview

        app.screen.query_one("#filter", Input).value = "喵"
        await settle(pilot)
        assert row_keys(table) == ["7"]
        table.focus()
        await press(pilot, "e")
        app.screen.query_one("#terms", Input).value = "小猫, 喵星人"
        await press(pilot, "ctrl+s")
        with d.client("operator") as c:
            assert c.synonym_groups()[7] == ["小猫", "喵星人"]
        await press(pilot, "d", "y")
        await until(pilot, lambda: len(app.screen.groups) == 7, what="the removal")


async def test_config_change_takes_effect_for_the_bot(memory, app_for):
    d, ids = memory
    app = app_for(d)
    with d.client() as bot:
        assert REL_TOOLS <= {t["name"] for t in bot.list_tools()}
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            await press(pilot, "6")
            screen = app.screen
            assert "not set" in text_of(screen.query_one("#api-key").content)
            assert screen.query_one("#relationships", Switch).value is True
            screen.query_one("#relationships", Switch).value = False
            screen.query_one("#budget", Input).value = "3000"
            screen.query_one("#model", Input).value = "qwen-test"
            await press(pilot, "ctrl+s")
            assert "Applied" in text_of(screen.query_one("#config-note").content)
            assert not REL_TOOLS & {t["name"] for t in bot.list_tools()}
            with d.client("operator") as op:
                config = op.config_get()
            assert config["recallBudget"] == 3000 and config["relationshipMemory"] is False
            assert config["llm"]["model"] == "qwen-test"

            # a refused apply replaces the "Applied" line with the reason
            screen.query_one("#budget", Input).value = "-5"
            await press(pilot, "ctrl+s")
            note = text_of(screen.query_one("#config-note").content)
            assert note.startswith("Not applied:") and "recallBudget" in note and "Applied (" not in note
            assert app.focused is screen.query_one("#budget", Input)
            screen.query_one("#budget", Input).value = "lots"
            await press(pilot, "ctrl+s")
            assert "whole number" in text_of(screen.query_one("#config-note").content)

            screen.query_one("#budget", Input).value = "3000"
            screen.query_one("#relationships", Switch).value = True
            await press(pilot, "ctrl+s")
            assert REL_TOOLS <= {t["name"] for t in bot.list_tools()}


async def test_config_says_the_key_is_withheld_from_a_base_url_the_deployment_did_not_confirm(
        make_daemon, app_for, tmp_path):
    key = "sk-tui-never-shown"
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "llm-api-key").write_text(key + "\n")
    (creds / "llm-base-url").write_text("http://127.0.0.1:9/v1\n")  # the deployment's (LoadCredential=)
    d = make_daemon()
    d.memdir.mkdir(mode=0o750)
    (d.memdir / "config.json").write_text('{"llm": {"baseUrl": "http://127.0.0.1:9/v1", "model": "m"}}')
    d.start(env={"CREDENTIALS_DIRECTORY": str(creds)})
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "6")
        screen = app.screen
        key_line = screen.query_one("#api-key")
        await until(pilot, lambda: "never shown" in text_of(key_line.content), what="the config")
        assert "withheld" not in text_of(key_line.content)
        screen.query_one("#base-url", Input).value = "http://127.0.0.1:8/v1"
        await press(pilot, "ctrl+s")
        await until(pilot, lambda: "withheld" in text_of(key_line.content), what="the key withheld")
        shown = text_of(key_line.content)
        assert "set, withheld from this base URL" in shown and "http://127.0.0.1:8/v1" in shown
        assert key not in screen_text(app)


async def test_config_starts_in_its_first_field_and_digits_stay_in_the_form(memory, app_for):
    """Issue 27.3 changed the entry: the form has the focus, not the budget, so a screen
    number pressed on arrival switches screens instead of turning 6000 into 7; a changed
    field marks the form unapplied (and an old "Applied" line goes)."""
    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "6")
        screen = app.screen
        budget = screen.query_one("#budget", Input)
        assert app.focused is not budget
        await until(pilot, lambda: budget.value == "6000", what="the config")
        await press(pilot, "7")
        assert app.current_mode == "backups"
        await press(pilot, "6")
        assert budget.value == "6000" and "not applied" not in text_of(screen.query_one("#config-note").content)
        budget.focus()
        await pilot.press("3")  # the value stays, the cursor at its end
        await settle(pilot)
        assert app.screen is screen and budget.value == "60003"
        assert "Changed, not applied" in text_of(screen.query_one("#config-note").content)
        await press(pilot, "backspace")
        assert "not applied" not in text_of(screen.query_one("#config-note").content)
        await press(pilot, "3")
        screen.query_one("#relationships", Switch).focus()  # a switch takes no digits: still no switching
        await press(pilot, "3")
        assert app.screen is screen
        await pilot.press("escape", "3")  # Esc leaves the field; then the number keys switch again
        await settle(pilot)
        assert app.current_mode == "history"
        await pilot.press("escape", "6")  # History's keyword box has the focus on entry too: leave it first
        await settle(pilot)
        assert app.focused is app.screen.query_one("#config-body")  # again on every entry


async def test_help_and_palette_commands(memory, app_for):
    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await press(pilot, "question_mark")
        assert isinstance(app.screen, HelpScreen)
        await press(pilot, "escape")
        assert isinstance(app.screen, BrowseScreen)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Go to Search" in titles and "Go to Browse" not in titles
        assert f"Edit {ids['family']}" in titles and "Merge marked memories" not in titles
        await press(pilot, "ctrl+p")
        await press(pilot, *"Go to Hist", "enter")
        assert app.current_mode == "history"


async def test_config_edits_persona_through_the_daemon(memory, app_for):
    d, ids = memory
    app = app_for(d)
    with d.client("operator") as op:
        assert op.persona_get()["empty"] is True  # the commented template zcord wrote
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "6")
        screen = app.screen
        await until(pilot, lambda: "empty" in text_of(screen.query_one("#persona-state").content),
                    what="the persona state")
        await pilot.press("ctrl+e")
        await until(pilot, lambda: isinstance(app.screen, PersonaForm), what="the persona form")
        area = app.screen.query_one("#persona-text", TextArea)
        assert "<!--" in area.text  # the template's comment is there to read
        area.text = "你是小雪，一个温柔的猫娘。"
        await pilot.press("ctrl+s")
        await until(pilot, lambda: app.screen is screen, what="the form to close")
        await until(pilot, lambda: "written" in text_of(screen.query_one("#persona-state").content),
                    what="the new persona state")
    with d.client("operator") as op:
        assert op.persona_get() == {"text": "你是小雪，一个温柔的猫娘。", "empty": False,
                                    "path": str(d.memdir / "PERSONA.md")}
        assert op.prefix().startswith("你是小雪，一个温柔的猫娘。\n")
        history = op.call_tool("zcor_memory_history", {"keywords": ["zcor/persona/set"]})
    assert history["items"][0]["actor"] == "operator"


async def test_recall_ranking_speakers_and_weights_in_the_preview(memory, app_for):
    """Config switches the ranking and the speaker lines; the preview shows weights and the speaker."""
    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "6")
        screen = app.screen
        assert screen.query_one("#ranking", Select).value == "weighted"
        assert screen.query_one("#senders", Switch).value is True
        screen.query_one("#ranking", Select).value = "seed"
        screen.query_one("#senders", Switch).value = False
        await press(pilot, "ctrl+s")
        with d.client("operator") as op:
            config = op.config_get()
        assert config["recallRanking"] == "seed" and config["recallSenders"] is False
        screen.query_one("#ranking", Select).value = "weighted"
        screen.query_one("#senders", Switch).value = True
        await press(pilot, "ctrl+s")

        await pilot.press("escape", "5")  # Esc leaves Config's field first
        await settle(pilot)
        app.screen.query_one("#preview-text", Input).value = "小王今天喝咖啡了吗"
        app.screen.query_one("#preview-sender", Input).value = "王同学"
        await settle(pilot)
        await until(pilot, lambda: "[person qq:10001]" in text_of(app.screen.query_one("#preview").content),
                    what="the speaker in the preview")
        preview = text_of(app.screen.query_one("#preview").content)
        assert "ranking weighted" in preview and "qq:10001" in preview
        assert f"{ids['colleague']} 同事小王" in preview
        assert re.search(r"\((title|keyword|title\+keyword|parent) \d+(\.\d+)?\)", preview), preview


async def test_rederive_keywords_of_a_subtree(memory, app_for):
    d, ids = memory
    with d.client() as bot:
        parent = bot.call_tool("zcor_memory_write", {"title": "阿珍", "content": "大学室友", "keywords": ["x"]})
        child = bot.call_tool("zcor_memory_write", {"title": "阿珍在腾讯做后端开发", "content": "三年了",
                                                    "keywords": ["工作"], "parentId": parent["id"]})
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.show_node(parent["id"])
        await settle(pilot)
        await press(pilot, "K")
        assert isinstance(app.screen, ConfirmDialog) and "2 memories" in screen_text(app)
        await press(pilot, "y")
        await until(pilot, lambda: "Keywords derived again for 2 of 2" in app.noted(), what="the re-derivation")
    with d.client("operator") as op:
        assert op.call_tool("zcor_memory_read", {"id": parent["id"]})["keywords"] == ["阿珍"]
        kws = op.call_tool("zcor_memory_read", {"id": child["id"]})["keywords"]
    assert {"阿珍", "腾讯", "后端", "开发"} <= set(kws) and "做后" not in kws and "工作" not in kws


async def test_search_fields_fit_80_columns_and_a_failed_query_leaves_no_stale_rows(memory, app_for):
    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await press(pilot, "2")
        screen = app.screen
        assert screen.query_one("#q", Input).content_region.width >= 20
        screen.query_one("#from", Input).value = "2025-12-31 00:00:00"
        screen.query_one("#to", Input).value = "2026-01-31 23:59:59"
        screen.query_one("#superseded", Checkbox).value = True
        await settle(pilot)
        screen.query_one("#results", DataTable).focus()
        await settle(pilot)
        shown = screen_text(app)
        assert "2025-12-31 00:00:00" in shown and "2026-01-31 23:59:59" in shown  # whole values
        table = screen.query_one("#results", DataTable)
        assert table.row_count == 10
        old = str(table.get_row(ids["old_plan"])[2])
        assert old.startswith("⊘ ") and old.endswith(f"→ {ids['deadline']}")  # superseded, in words
        assert not str(table.get_row(ids["deadline"])[2]).startswith("⊘")

        screen.query_one("#q", Input).value = "x" * 101  # zcord refuses a keyword this long
        await settle(pilot)
        summary = text_of(screen.query_one("#search-summary").content)
        assert summary.startswith("The search failed:") and "keywords" in summary
        assert table.row_count == 0  # no rows of the earlier query under the error


async def test_backups_create_and_restore_with_a_preview(memory, app_for):
    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "7")
        screen = app.screen
        table = screen.query_one("#backups", DataTable)
        assert table.row_count == 0 and "No backups yet" in text_of(screen.query_one("#backups-summary").content)
        await press(pilot, "c")
        assert table.row_count == 1 and "Backup written" in app.noted()
        name = row_keys(table)[0]
        row = [str(cell) for cell in table.get_row(name)]
        size = (d.memdir / "backups" / name).stat().st_size
        assert row[1] == f"{size / 1024:.1f} KB" and row[2] == "operator" and re.match(r"\d{4}-\d\d-\d\d ", row[0])

        with d.client("operator") as op:
            op.call_tool("zcor_memory_delete", {"id": ids["apple"]})
            op.call_tool("zcor_memory_write", {"title": "新的", "content": "备份之后写的"})
        with d.client() as bot:
            bot.call_tool("zcor_memory_backup")
        await press(pilot, "r")
        assert table.row_count == 2 and "bot" in [str(table.get_row(k)[2]) for k in table.rows]
        table.move_cursor(row=table.get_row_index(name))
        await press(pilot, "enter")
        dialog = app.screen
        assert isinstance(dialog, ConfirmDialog)
        assert f"Restore {name}" in dialog.question
        assert "Memories      10 now → 10 after: 1 added, 1 removed, 0 changed" in dialog.question
        assert f"Important     {ids['mom']} → {ids['mom']}, {ids['apple']}" in dialog.question
        await press(pilot, "n")
        with d.client("operator") as op:
            assert op.status()["important"] == [ids["mom"]]  # nothing changed
        await press(pilot, "R", "y")
        assert f"Restored {name}" in app.noted()
        with d.client("operator") as op:
            status = op.status()
            assert status["important"] == [ids["mom"], ids["apple"]] and status["nodes"] == 10
        await until(pilot, lambda: table.row_count == 3, what="the pre-restore backup in the list")

        await press(pilot, "question_mark")
        assert "7 Backups" in screen_text(app)


async def test_a_failed_relationship_query_leaves_no_stale_rows(memory, app_for):
    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "4")
        table = app.screen.query_one("#rels", DataTable)
        assert table.row_count == 2
        app.screen.query_one("#q", Input).value = "x" * 101  # zcord refuses a keyword this long
        await settle(pilot)
        assert table.row_count == 0
        assert text_of(app.screen.query_one("#rel-summary").content).startswith("The query failed:")
