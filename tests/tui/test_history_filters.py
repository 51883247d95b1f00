"""History's server-side filters (actor, tool, target, changes only), its keys, and the rule
that the TUI's own display reads are not recorded."""

from __future__ import annotations

import json

from textual.widgets import Checkbox, DataTable, Input, Select

from zcord.core.history_index import targets_of

from .conftest import press, settle, text_of


def log_lines(d) -> list[dict]:
    return [json.loads(x) for x in (d.memdir / "operations.jsonl").read_bytes().splitlines()]


async def test_history_filters_run_in_zcord_and_the_tuis_reads_are_not_logged(memory, app_for):
    d, ids = memory
    with d.client() as bot:
        for _ in range(120):  # a chatty bot: its reads would fill pages of a client-side filter
            bot.call_tool("zcor_memory_read", {"id": ids["mom"]})
        bot.call_tool("zcor_memory_write", {"id": ids["mom"], "title": "妈妈", "content": "退休了"})
    logged = len(log_lines(d))
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.show_node(ids["dad"])  # Browse reads and traces it: display reads
        await settle(pilot)
        await press(pilot, "3")
        screen = app.screen
        assert screen.focused is screen.query_one("#q", Input)  # the first field has the focus on entry
        await pilot.press("4")  # so a digit is typed there, not taken as "Relationships"
        await settle(pilot)
        assert app.current_mode == "history" and screen.query_one("#q", Input).value == "4"
        screen.query_one("#q", Input).value = ""
        await settle(pilot)

        table = screen.query_one("#records", DataTable)
        summary = screen.query_one("#history-summary")
        assert table.row_count == 19  # every change, although the newest 120 records are reads
        assert "19 records with changes" in text_of(summary.content)

        by_model = [r for r in log_lines(d) if r["actor"] == "model"]
        screen.query_one("#actor", Select).value = "model"
        await settle(pilot)
        assert table.row_count == sum(1 for r in by_model if r["changes"])
        assert {str(table.get_row_at(i)[1]) for i in range(table.row_count)} == {"model"}

        screen.query_one("#changes-only", Checkbox).value = False
        await settle(pilot)
        assert f"of {len(by_model)} records" in text_of(summary.content)  # the bot's reads, counted exactly
        screen.query_one("#tool", Input).value = "zcor_memory_read"
        await settle(pilot)
        assert "of 120 records" in text_of(summary.content)
        assert {table.get_row_at(i)[2] for i in range(table.row_count)} == {"zcor_memory_read"}
        screen.query_one("#actor", Select).value = "any"
        screen.query_one("#tool", Input).value = ""
        screen.query_one("#target", Input).value = ids["mom"]
        await settle(pilot)
        rows = [table.get_row_at(i) for i in range(table.row_count)]
        about_mom = sum(1 for r in log_lines(d) if ids["mom"] in targets_of(r))  # its changes, 120 reads
        assert about_mom > 120 and len(rows) == 50 and f"of {about_mom} records" in text_of(summary.content)

        await pilot.press("escape")  # out of the field: the table, then ^f back to the keywords
        await settle(pilot)
        assert screen.focused is table
        await pilot.press("ctrl+f")
        assert screen.focused is screen.query_one("#q", Input)

        screen.query_one("#target", Input).value = "x" * 300
        await settle(pilot)
        assert table.row_count == 0 and "target" in text_of(summary.content)
    # the TUI read the log, Browse and History many times; none of it was recorded
    assert len(log_lines(d)) == logged
