"""Papercuts a new operator hit in the TUI (issue 35): the revert dialog's wording and
buttons, the affinity sparkline, Search's inputs, 80×24 layouts, keys right after Esc."""

from __future__ import annotations

from textual.widgets import Button

from zcor_tui.screens.revert import RevertScreen

from .conftest import press, screen_text, settle, text_of


def last_seq(op) -> int:
    return op.history_query({"limit": 1})["items"][0]["seq"]


async def test_a_force_that_changes_nothing_says_so(memory, app_for):
    d, ids = memory
    with d.client() as bot, d.client("operator") as op:
        bot.call_tool("zcor_memory_write", {"id": ids["dad"], "title": "爸爸", "content": "爸爸退休了。"})
        bot_seq = last_seq(op)
        op.call_tool("zcor_memory_write", {"id": ids["dad"], "title": "爸爸", "content": "爸爸在工厂上班。"})
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.push_screen(RevertScreen(bot_seq))
        await settle(pilot)
        dialog = app.screen
        body = text_of(dialog.query_one("#revert-body").content)
        assert "1 conflict" in body
        assert f"node.update · {ids['dad']} — nothing would change but its time (updatedAt)" in body
        assert "no field" not in body
        assert not dialog.query_one("#confirm", Button).display
        await press(pilot, "escape")


async def test_search_shows_a_bad_date_as_typed_and_its_inputs_match_the_other_screens(memory, app_for):
    from textual.widgets import Input

    from zcor_tui.screens.search import SearchScreen

    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await press(pilot, "2")
        assert isinstance(app.screen, SearchScreen)
        text = screen_text(app)
        assert "keywords (all match)" in text  # the placeholder whole at 80 columns
        await press(pilot, "tab", *"yesterday")
        box = app.screen.query_one("#from", Input)
        assert box.has_class("-invalid")
        text = screen_text(app)
        assert "yesterday" in text.splitlines()[1]  # what was typed stays on show in the box
        assert "from: 'yesterday' is not a date" in text
        assert box.styles.background != app.screen.query_one("#to", Input).styles.background  # and is lit
        await press(pilot, "escape", "5")  # Synonyms' inputs: one line here, like the filter bars
        assert app.screen.MODE == "synonyms"
        assert not any(w.has_class("-textual-compact") for w in app.screen.query(Input))
    async with app_for(d).run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "2")
        box = pilot.app.screen.query_one("#q", Input)
        assert box.outer_size.height == 3 and not box.has_class("-textual-compact")  # bordered like History's
        await press(pilot, "3")
        assert pilot.app.screen.query_one("#q", Input).outer_size.height == 3


async def test_a_key_read_with_esc_reaches_what_esc_made_current(memory, app_for):
    """Esc then a digit in the same read (both queued before Esc's focus change ran): the
    digit switches screens instead of landing in the field Esc left."""
    from textual import events
    from textual.widgets import Input

    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await press(pilot, "3")
        assert isinstance(app.focused, Input)
        app.post_message(events.Key("escape", "\x1b"))
        app.post_message(events.Key("4", "4"))
        await settle(pilot)
        assert app.screen.MODE == "relationships"
        app.post_message(events.Key("alt+q", None))  # ESC q parsed as one key: Esc, then q (quit)
        await settle(pilot)
    assert app.return_code == 0


async def test_the_diff_view_reads_as_a_state_not_an_action(memory, app_for):
    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "3")
        summary = lambda: text_of(app.screen.query_one("#history-summary").content)  # noqa: E731
        assert "diff unified (v: side by side)" in summary() and "v: unified" not in summary()
        await press(pilot, "escape", "v")
        assert "diff side by side (v: unified)" in summary()
        await press(pilot, "8", "v")
        assert "diff side by side (v: unified)" in text_of(app.screen.query_one("#review-summary").content)


async def test_80x24_history_relationships_and_the_status_line_fit(memory, app_for):
    from zcor_tui.app import ZcorApp

    d, ids = memory
    with d.client("bot") as bot:
        for affinity, reason in ((30, "一起吃饭"), (35, "帮我搬家"), (20, "迟到了")):
            bot.call_tool("zcor_relationship_write", {"personId": "qq:10001", "name": "小王", "relationship": "同事",
                                                      "affinity": affinity, "reason": reason})
    app = app_for(d)
    assert isinstance(app, ZcorApp)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        memdir = str(d.memdir)
        status = [line for line in screen_text(app).splitlines() if "connected" in line][0]
        assert memdir in status or status.rstrip().endswith(memdir[-20:])  # the path is not cut off
        await press(pilot, "3")
        await press(pilot, "escape")
        lines = screen_text(app).splitlines()
        rows = [line for line in lines if line.startswith(" 20") and "zcor_relationship_write" in line]
        assert len(rows) >= 5 and all("ok · 1 change" in r for r in rows)  # the status column shows
        assert "q Quit" in lines[-1] and "u Revert" in lines[-1]  # the footer is whole
        await press(pilot, "4")
        table = app.screen.query_one("#rels")
        table.move_cursor(row=table.get_row_index("qq:10001"))
        await settle(pilot)
        text = screen_text(app)
        for reason in ("一起吃饭", "帮我搬家", "迟到了"):  # every affinity change above the fold
            assert reason in text, text
