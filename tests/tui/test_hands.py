"""The operator's hands (issue 27, TUI items): forms that keep what they show, screens that
do not go stale, 80×24, the smaller frictions, affinity over time."""

from __future__ import annotations

from textual.widgets import Input

from zcor_tui.screens.dialogs import ConfirmDialog, NodeForm, SynonymForm

from .conftest import settle


async def test_prefilled_fields_keep_their_value_and_take_keys_at_the_end(memory, app_for):
    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.show_node(ids["dad"])
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        assert isinstance(app.screen, NodeForm)
        await pilot.press("X")
        assert app.screen.query_one("#title", Input).value == "爸爸X"
        await pilot.press("escape")
        await settle(pilot)
        if isinstance(app.screen, ConfirmDialog):  # discard the change
            await pilot.press("y")
            await settle(pilot)

        await pilot.press("5")
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        assert isinstance(app.screen, SynonymForm)
        terms = app.screen.query_one("#terms", Input)
        before = terms.value
        assert before
        await pilot.press("d")
        assert terms.value == before + "d"
        await pilot.press("escape")
