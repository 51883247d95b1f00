"""The operator's hands (issue 27, TUI items): forms that keep what they show, screens that
do not go stale, 80×24, the smaller frictions, affinity over time."""

from __future__ import annotations

import re

from textual.widgets import Button, DataTable, Input

from zcor_tui.host import TOAST_SECONDS
from zcor_tui.screens.browse import BrowseScreen
from zcor_tui.screens.dialogs import ConfirmDialog, NodeForm, SynonymForm
from zcor_tui.screens.revert import RevertScreen
from zcor_tui.screens.versions import VersionsScreen
from zcord.service import Service

from .conftest import press, screen_text, settle, text_of, until


async def test_prefilled_fields_keep_their_value_and_take_keys_at_the_end(memory, app_for):
    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.show_node(ids["dad"])
        await settle(pilot)
        await press(pilot, "e")
        assert isinstance(app.screen, NodeForm)
        await pilot.press("X")
        assert app.screen.query_one("#title", Input).value == "爸爸X"
        await press(pilot, "escape")
        if isinstance(app.screen, ConfirmDialog):  # discard the change
            await press(pilot, "y")

        await press(pilot, "5")
        await press(pilot, "e")
        assert isinstance(app.screen, SynonymForm)
        terms = app.screen.query_one("#terms", Input)
        before = terms.value
        assert before
        await pilot.press("d")
        assert terms.value == before + "d"
        await pilot.press("escape")


async def test_number_keys_go_to_the_screen_named_and_versions_follow_a_restore(memory, app_for):
    d, ids = memory
    with d.client("operator") as op:
        op.call_tool("zcor_memory_write", {"id": ids["dad"], "title": "老爸", "content": "爸爸退休了。"})
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.show_node(ids["dad"])
        await settle(pilot)
        await press(pilot, "h")
        assert isinstance(app.screen, VersionsScreen)
        await pilot.press("5", "1")  # Synonyms, then Browse: the tree, not the Versions screen again
        await settle(pilot)
        assert isinstance(app.screen, BrowseScreen)
        await press(pilot, "h")
        await press(pilot, "4")
        app.show_node(ids["mom"])  # Relationships' `o` and friends: Browse, no leftover Versions
        await settle(pilot)
        assert isinstance(app.screen, BrowseScreen) and app.screen.tree.cursor_item.id == ids["mom"]

        app.show_node(ids["dad"])
        await settle(pilot)
        await press(pilot, "h")
        screen = app.screen
        assert "老爸" in text_of(screen.query_one("#versions-title").content)
        table = screen.query_one("#versions", DataTable)
        table.move_cursor(row=0)  # the first version: 爸爸
        await settle(pilot)
        await press(pilot, "R")
        await press(pilot, "y")
        await until(pilot, lambda: "爸爸" in text_of(screen.query_one("#versions-title").content)
                    and "老爸" not in text_of(screen.query_one("#versions-title").content), what="the new title")
        assert table.cursor_row == table.row_count - 1  # on the new current version
        await pilot.press("R")  # so a second R is not refused as "already is that version"
        await settle(pilot)
        assert "current version already" in app.noted("warning")


async def test_80x24_keeps_ids_whole_and_the_essential_keys(make_daemon, app_for):
    d = make_daemon()
    with Service(d.memdir) as svc:
        first = svc.call("zcor_memory_write", {"title": "Mike (friend from college) who moved to Berlin and "
                                                        "now teaches physics at a school", "content": "x"})["id"]
        svc.call("zcor_memory_important", {"id": first, "important": True})
        for n in range(11):
            svc.call("zcor_memory_write", {"title": f"note {n} " + "long words " * 8, "content": "x"})
    d.start()
    app = app_for(d)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        lines = screen_text(app).splitlines()
        mike = next(line for line in lines if "★ Mike" in line)
        assert re.search(r"… m1\b", mike), mike  # the title is cut, the id whole
        assert all(re.search(rf"… m{n}\b", "\n".join(lines)) for n in range(2, 13))
        footer = lines[-1]
        assert all(key in footer for key in ("S Supersede", "g Go to", "f1 Help", "q Quit")), footer
        await press(pilot, "3")
        assert app.screen.query_one("#records", DataTable).size.height >= 7  # was 3 rows at 80×24


async def test_the_smaller_frictions(memory, app_for, make_daemon):
    """Issue 27.9: linked memories say so before the question; Force only on a conflict;
    short toasts; no Screenshot in the palette; no daemon says how to start one."""
    d, ids = memory
    with d.client("operator") as op:
        op.call_tool("zcor_memory_write", {"id": ids["dad"], "title": "爸爸", "content": "爸爸退休了。"})
        seq = op.call_tool("zcor_memory_history", {"limit": 1})["items"][0]["seq"]
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.show_node(ids["colleague"])  # qq:10001 links to it
        await settle(pilot)
        await press(pilot, "d")
        assert not isinstance(app.screen, ConfirmDialog)
        assert "linked from qq:10001" in app.noted("warning") and "Relationships (4)" in app.noted("warning")

        app.push_screen(RevertScreen(seq))  # nothing changed it since: no Force offered
        await settle(pilot)
        force = app.screen.query_one("#force", Button)
        assert not force.display and "Force" not in screen_text(app).splitlines()[-1]
        await press(pilot, "escape")

        app.notify("a long one", timeout=600)
        assert max(n.timeout for n in app._notifications) <= TOAST_SECONDS
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Screenshot" not in titles and "Quit" in titles

    nobody = make_daemon()  # never started: nothing answers on its socket
    app = app_for(nobody)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.link_state == "unreachable", what="the first failed connect")
        await pilot.pause(0.1)
        status = text_of(app.screen.query_one("#status").content)
        assert "zcor-tui --with-daemon" in status and "systemctl start zcord" in status


async def test_relationships_draw_affinity_over_time_with_the_reasons(memory, app_for):
    d, ids = memory
    with d.client("bot") as bot:
        for affinity, reason in ((10, "吵了一架"), (-30, "背后说坏话")):
            bot.call_tool("zcor_relationship_write", {"personId": "qq:10001", "name": "小王", "relationship": "同事",
                                                      "affinity": affinity, "reason": reason})
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "4")
        table = app.screen.query_one("#rels", DataTable)
        table.move_cursor(row=table.get_row_index("qq:10001"))
        await settle(pilot)
        await until(pilot, lambda: "Affinity over time" in text_of(app.screen.query_one("#rel-series").content),
                    what="the series")
        series = text_of(app.screen.query_one("#rel-series").content)
        assert "Affinity over time █▅▁  -30 ▁ … █ +40" in series and "3 changes" in series
        lines = [line for line in series.splitlines()[1:] if "█" in line or "│" in line]
        assert "+40" in lines[0] and "经常一起吃午饭" in lines[0]
        assert "+10" in lines[1] and "吵了一架" in lines[1]
        assert "-30" in lines[2] and "背后说坏话" in lines[2] and "model" in lines[2]
