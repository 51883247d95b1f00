"""Forms when zcord refuses or is away (issue 35): a save while zcord is down says so at once
and is never made later behind the operator's back; after a refusal the keys still reach the
form, and the refusal names fields as the form labels them."""

from __future__ import annotations

from textual.widgets import Input

from zcor_tui.screens.dialogs import NodeForm, SupersedeForm

from .conftest import press, settle, text_of, until


def titles(d) -> list[str]:
    with d.client("operator") as op:
        return [n["title"] for n in op.call_tool("zcor_memory_query", {"limit": 100})["items"]]


async def test_saving_while_zcord_is_down_says_so_and_saves_nothing_later(memory, app_for):
    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        d.stop()
        await until(pilot, lambda: not app.connected, what="the connection to drop")
        await press(pilot, "n")
        form = app.screen
        assert isinstance(form, NodeForm)
        await press(pilot, *"离线时写的")
        await press(pilot, "ctrl+s")
        assert app.screen is form  # still open, with what was typed
        error = text_of(form.query_one("#dialog-error").content)
        assert "Not saved: zcord is not connected" in error
        assert form.query_one("#title", Input).value == "离线时写的"
        assert app.focused is form.query_one("#title")
        d.start()
        await until(pilot, lambda: app.connected, timeout=30, what="the reconnect")
        await settle(pilot)
        assert "离线时写的" not in titles(d)  # nothing was queued and sent on the reconnect
        await press(pilot, "ctrl+s")  # saved now that it is back
        await until(pilot, lambda: not isinstance(app.screen, NodeForm), what="the form to close")
    assert "离线时写的" in titles(d)


async def test_a_refusal_keeps_the_keys_in_the_form_and_uses_its_labels(memory, app_for):
    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.show_node(ids["dad"])
        await settle(pilot)
        await press(pilot, "S")  # supersede the selection
        form = app.screen
        assert isinstance(form, SupersedeForm)
        form.query_one("#replacement", Input).value = ids["dad"]  # replaced by itself: refused
        form.query_one("#reason", Input).value = "重复"
        while app.focused is not form.query_one("#save"):  # Tab to the Save button, then Enter
            await press(pilot, "tab")
        await press(pilot, "enter")
        assert app.screen is form
        error = text_of(form.query_one("#dialog-error").content)
        assert "replacementId" not in error and "“By”" in error and "“Replace ids”" in error, error
        assert app.focused is not None and app.focused not in form.query("Button")
        focused = app.focused
        assert isinstance(focused, Input)
        before = focused.value
        await press(pilot, "z")  # the next key lands in a field
        assert focused.value == before + "z"

        form.query_one("#replacement", Input).value = ""  # refused by the form itself, naming no field
        while app.focused is not form.query_one("#save"):
            await press(pilot, "tab")
        await press(pilot, "enter")
        assert "Give the ids to replace" in text_of(form.query_one("#dialog-error").content)
        assert isinstance(app.focused, Input)
        focused = app.focused
        await press(pilot, "q")  # typed, not lost on a button (nor quitting)
        assert focused.value.endswith("q") and app.screen is form
        other = form.query_one("#reason" if focused.id != "reason" else "#ids", Input)
        assert focused.styles.background != other.styles.background  # the focused field is lit


async def test_versions_are_named_by_operation_number_only(memory, app_for):
    """Issue 35 item 7: one counter — Versions, its diff, History and the restore prompt all
    say `operation #N`, never the change counter besides."""
    from zcor_tui.screens.dialogs import ConfirmDialog
    from zcor_tui.screens.versions import VersionsScreen

    from .conftest import screen_text

    d, ids = memory
    with d.client("operator") as op:
        for _ in range(3):  # operations without changes: the operation numbers run ahead
            op.call_tool("zcor_memory_read", {"id": ids["dad"]})
        op.call_tool("zcor_memory_write", {"id": ids["dad"], "title": "老爸", "content": "爸爸退休了。"})
        seqs = [v["seq"] for v in op.history_versions(ids["dad"])["items"]]
        change_ids = [v["changeId"] for v in op.history_versions(ids["dad"])["items"]]
    assert seqs != change_ids  # the two counters differ here, so the text tells which one is shown
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.show_node(ids["dad"])
        await settle(pilot)
        await press(pilot, "h")
        assert isinstance(app.screen, VersionsScreen)
        text = screen_text(app)
        assert f"operation #{seqs[0]}" in text and f"operation #{seqs[1]}" in text
        assert f"change {change_ids[1]}" not in text
        app.screen.query_one("#versions").move_cursor(row=0)
        await settle(pilot)
        await press(pilot, "R")
        assert isinstance(app.screen, ConfirmDialog)
        assert f"as it was after operation #{seqs[0]}" in app.screen.question
        await press(pilot, "n")
        await press(pilot, "escape")
        await press(pilot, "3")
        assert "change " not in text_of(app.screen.query_one("#record").content).replace("1 change", "")
