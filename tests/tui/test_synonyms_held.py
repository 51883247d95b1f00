"""The Synonyms screen shows the groups the bot added and its held ones, and accepts or
discards them (issue 23 item 10), against a real daemon. The bot's terms look like markup:
they must show as written."""

from __future__ import annotations

from textual.widgets import DataTable

from zcor_tui.screens.dialogs import ConfirmDialog

from .conftest import press, settle, text_of, until

PLANTED = "[/]毒药"  # markup that would raise if rendered as markup
LOOKS = "[bold]红[/bold]"


def _row(table: DataTable, key: str) -> str:
    return " ".join(text_of(cell).strip() for cell in table.get_row(key))


async def _decide(pilot, key: str) -> None:
    await pilot.press(key)
    await until(pilot, lambda: isinstance(pilot.app.screen, ConfirmDialog), what="the confirmation")
    await press(pilot, "y")


async def test_held_and_bot_groups_shown_accepted_and_discarded(memory, app_for):
    d, _ids = memory
    with d.client() as bot:
        assert bot.call_tool("zcor_synonyms_add", {"terms": ["妈妈", PLANTED]})["held"] is True
        assert bot.call_tool("zcor_synonyms_add", {"terms": ["爸爸", LOOKS]})["held"] is True
        assert "held" not in bot.call_tool("zcor_synonyms_add", {"terms": ["zorblax", "[red]zorbie"]})
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "5")
        screen = app.screen
        table = screen.query_one("#groups", DataTable)
        await until(pilot, lambda: table.row_count == 10, what="7 groups, 1 by the bot, 2 held")
        assert [str(k.value) for k in table.rows][:2] == ["h0", "h1"]
        assert _row(table, "h0") == f"h0 held 妈妈 · {PLANTED}"
        assert _row(table, "h1") == f"h1 held 爸爸 · {LOOKS}"
        assert _row(table, "7") == "7 bot zorblax · [red]zorbie"
        assert _row(table, "0").startswith("0 妈妈")  # the operator's groups carry no mark
        summary = text_of(screen.query_one("#syn-summary").content)
        assert "8 groups · 1 by the bot · 2 held" in summary

        # y on an ordinary group: nothing to accept
        table.move_cursor(row=table.get_row_index("0"))
        await press(pilot, "y")
        assert "Select a held group" in app.noted("warning")

        table.move_cursor(row=table.get_row_index("h0"))
        await _decide(pilot, "x")  # discard h0: 妈妈 · [/]毒药
        await until(pilot, lambda: len(screen.held) == 1, what="the discard")
        with d.client("operator") as op:
            listing = op.synonym_listing()
        assert listing["held"] == [["爸爸", LOOKS]] and ["妈妈", PLANTED] not in listing["groups"]

        table.move_cursor(row=table.get_row_index("h0"))
        await _decide(pilot, "y")  # accept 爸爸 · [bold]红[/bold]
        await until(pilot, lambda: not screen.held, what="the acceptance")
        with d.client("operator") as op:
            listing = op.synonym_listing()
        assert listing["held"] == [] and listing["groups"][-1] == ["爸爸", LOOKS]
        assert _row(table, "8") == f"8 爸爸 · {LOOKS}"  # the operator's group now: no mark

        table.move_cursor(row=table.get_row_index("7"))
        await _decide(pilot, "x")  # discard the bot's group
        await until(pilot, lambda: len(screen.groups) == 8 and not screen.bot_added, what="the bot's group gone")
        with d.client("operator") as op:
            assert ["zorblax", "[red]zorbie"] not in op.synonym_groups()
        assert "accepted" in app.noted() and "discarded" in app.noted()
        assert not app.noted("error")
