"""Every screen at 80x24 and 120x40, as SVG snapshots (pytest-textual-snapshot).

The Memory is built with fixed times before the daemon starts, the status line shows no
changing values and a fixed path, and no test here changes the Memory, so one daemon
serves them all. Regenerate with `pytest tests/tui --snapshot-update` and look at them.
"""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Input

from tests.integration.conftest import Factory
from zcor_tui.widgets.memory_tree import MemoryTree

from .conftest import SnapshotApp, build_memory, settle, steady_cursors

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 40), id="120x40")]


@pytest.fixture(scope="module")
def snap_memory():
    """One daemon on the standard Memory for every snapshot (they only read)."""
    f = Factory()
    d = f()
    ids = build_memory(d.memdir)
    d.start()
    yield d, ids
    problems = f.cleanup()
    assert not problems, "zcord logged a crash:\n" + "\n---\n".join(problems)


def snapshot_app(daemon) -> SnapshotApp:
    from zcord.client import AsyncClient

    return SnapshotApp(AsyncClient(daemon.sock, role="operator", timeout=20, client_name="zcor-tui-snapshot"))


def prepare(screen: str, ids: dict[str, str]):
    async def run_before(pilot) -> None:
        app = pilot.app
        await settle(pilot)
        if screen == "browse":
            app.show_node(ids["birthday"])
        elif screen == "help":
            await pilot.press("question_mark")
        elif screen == "edit":
            app.show_node(ids["mom"])
            await settle(pilot)
            await pilot.press("e")
        else:
            number = ["search", "history", "relationships", "synonyms", "config"].index(screen) + 2
            await pilot.press(str(number))
        await settle(pilot)
        if screen == "history":
            table = app.screen.query_one("#records", DataTable)
            for key in table.rows:
                if table.get_row(key)[2] == "zcor_memory_write" and ids["deadline"] in str(table.get_row(key)[3]) \
                        and "1 change" in str(table.get_row(key)[4]):
                    if "2026-01-10" in str(table.get_row(key)[0]):
                        table.move_cursor(row=table.get_row_index(key))
            await settle(pilot)
        if screen == "synonyms":
            app.screen.query_one("#preview-text", Input).value = "我妈妈喜欢吃苹果"
            await settle(pilot)
        if screen == "browse":
            assert app.screen.query_one(MemoryTree).cursor_item.id == ids["birthday"]
        steady_cursors(app)
        await settle(pilot)

    return run_before


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("screen", ["browse", "search", "history", "relationships", "synonyms", "config", "help",
                                    "edit"])
def test_screen(screen, size, snap_memory, snap_compare):
    d, ids = snap_memory
    assert snap_compare(snapshot_app(d), run_before=prepare(screen, ids), terminal_size=size)


def test_history_side_by_side(snap_memory, snap_compare):
    d, ids = snap_memory
    before = prepare("history", ids)

    async def run_before(pilot) -> None:
        await before(pilot)
        await pilot.press("escape", "v")  # out of the keyword field (focused on entry)
        await settle(pilot)

    assert snap_compare(snapshot_app(d), run_before=run_before, terminal_size=(120, 40))
