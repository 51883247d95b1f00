"""zcor_tui.widgets.rows, the list screens' table helpers, on a real DataTable (no daemon)."""

from __future__ import annotations

from typing import Any

from textual.app import App, ComposeResult
from textual.widgets import DataTable

from zcor_tui.widgets.rows import add_columns, cursor_key, move_to, row_table


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield row_table("t")

    def on_mount(self) -> None:
        add_columns(self.query_one("#t", DataTable), [("Seq", "seq", 7), ("Text", "text", None)])


async def test_columns_cursor_and_keeping_the_row():
    app = TableApp()
    async with app.run_test(size=(60, 12)) as pilot:
        table: DataTable[Any] = app.query_one("#t", DataTable)
        assert table.cursor_type == "row" and table.zebra_stripes
        assert [c.key.value for c in table.columns.values()] == ["seq", "text"]
        assert [c.label.plain for c in table.columns.values()] == ["Seq", "Text"]
        assert cursor_key(table) is None  # empty: nothing under the cursor
        assert move_to(table, "2") is False
        for n in range(1, 5):
            table.add_row(f"#{n}", f"row {n}", key=str(n))
        await pilot.pause()
        assert cursor_key(table) == "1"
        assert move_to(table, "3") is True
        assert cursor_key(table) == "3"
        table.clear()  # a refill, as the screens do it, with row 3 still there
        for n in (4, 3, 1):
            table.add_row(f"#{n}", f"row {n}", key=str(n))
        assert move_to(table, "3") and cursor_key(table) == "3" and table.cursor_row == 1
        assert move_to(table, "2") is False and cursor_key(table) == "3"  # gone: the cursor stays
        assert move_to(table, None) is False
