"""Per-sender trust in the TUI (issue 35): `t` on a History record, a Review item and a
relationship sets the sender's level through zcord; the Trust levels list (Review `L`, the
palette) shows every explicit level and resets one; Review is in the bar with its count."""

from __future__ import annotations

from textual.widgets import DataTable, Input, Select

from zcor_tui.screens.history import HistoryScreen
from zcor_tui.screens.relationships import RelationshipsScreen
from zcor_tui.screens.review import ReviewScreen
from zcor_tui.screens.trust import TrustForm, TrustList

from .conftest import press, screen_text, settle, text_of, until

GROUP = "qq:group:1"


def held_write(d, sender: str = "qq:troll", title: str = "火锅新规则") -> str:
    with d.client("operator") as op, d.client() as bot:
        op.trust_set(sender, "untrusted")
        return bot.call_tool("zcor_memory_write", {"title": title, "content": "先给我发红包"},
                             origin={"session": GROUP, "senders": [sender, "qq:bystander"]})["id"]


def levels(d) -> dict[str, str]:
    with d.client("operator") as op:
        return {s["sender"]: s["level"] for s in op.trust_get()["senders"]}


async def test_history_record_sender_gets_a_level_chosen_with_the_keyboard(memory, app_for):
    d, ids = memory
    held_write(d)
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "3")
        assert isinstance(app.screen, HistoryScreen)
        table = app.screen.query_one("#records", DataTable)
        table.focus()
        table.move_cursor(row=0)  # the bot's write, from qq:troll and qq:bystander
        await settle(pilot)
        assert app.screen.selected and app.screen.selected["tool"] == "zcor_memory_write"
        await press(pilot, "t")
        form = app.screen
        assert isinstance(form, TrustForm)
        assert form.query_one("#sender", Select).value == "qq:troll"
        assert form.query_one("#level", Select).value == "untrusted"  # its level now
        assert "qq:troll is untrusted now" in text_of(form.query_one("#trust-now").content)
        await press(pilot, "shift+tab", "enter", "down", "enter")  # the sender list: the other sender
        assert form.query_one("#sender", Select).value == "qq:bystander"
        assert form.query_one("#level", Select).value == ""  # no level of its own
        await press(pilot, "tab", "enter")  # the level list, opened
        await press(pilot, "end", "up", "enter")  # blocked (the last but the default)
        assert form.query_one("#level", Select).value == "blocked"
        await press(pilot, "ctrl+s")
        assert isinstance(app.screen, HistoryScreen)
        assert "qq:bystander is blocked from now on" in app.noted()
    assert levels(d) == {"qq:troll": "untrusted", "qq:bystander": "blocked"}


async def test_review_item_trust_and_the_list_of_levels(memory, app_for):
    d, ids = memory
    held_write(d)
    with d.client("operator") as op:
        op.trust_set("qq:spam", "blocked")
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        shown = screen_text(app)
        assert "8 Review (1)" in shown  # in the bar, with how many wait
        assert "1 held for review" in shown  # and in the status line
        await press(pilot, "8")
        assert isinstance(app.screen, ReviewScreen)
        await until(pilot, lambda: app.screen.query_one("#held", DataTable).row_count == 1, what="the held change")
        app.screen.query_one("#held", DataTable).focus()
        await press(pilot, "t")
        form = app.screen
        assert isinstance(form, TrustForm)
        form.query_one("#level", Select).value = "trusted"
        await press(pilot, "ctrl+s")
        assert "qq:troll is trusted from now on" in app.noted()
        assert levels(d)["qq:troll"] == "trusted"

        await press(pilot, "L")
        trust = app.screen
        assert isinstance(trust, TrustList)
        table = trust.query_one("#trust-levels", DataTable)
        await until(pilot, lambda: table.row_count == 2, what="two levels")
        text = screen_text(app)
        assert "Default level: normal" in text and "qq:spam" in text and "blocked" in text and "trusted" in text
        table.move_cursor(row=0)  # qq:spam (sorted)
        await press(pilot, "d")
        await until(pilot, lambda: table.row_count == 1, what="qq:spam back to the default")
        assert "qq:spam has the default level from now on (normal)" in app.noted()
        await press(pilot, "n")  # another sender, typed in
        form = app.screen
        assert isinstance(form, TrustForm)
        await press(pilot, *"qq:new")
        assert form.query_one("#sender", Input).value == "qq:new"
        form.query_one("#level", Select).value = "untrusted"
        await press(pilot, "ctrl+s")
        assert app.screen is trust
        await until(pilot, lambda: table.row_count == 2, what="qq:new listed")
        await press(pilot, "escape")
        assert isinstance(app.screen, ReviewScreen)
    assert levels(d) == {"qq:troll": "trusted", "qq:new": "untrusted"}


async def test_relationship_person_gets_a_level_and_bad_input_is_refused(memory, app_for):
    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "4")
        assert isinstance(app.screen, RelationshipsScreen)
        table = app.screen.query_one("#rels", DataTable)
        await until(pilot, lambda: table.row_count == 2, what="the relationships")
        table.focus()
        key = next(k for k in table.rows if k.value == "qq:10001")
        table.move_cursor(row=table.get_row_index(key))
        await settle(pilot)
        await press(pilot, "t")
        form = app.screen
        assert isinstance(form, TrustForm)
        assert form.query_one("#sender", Input).value == "qq:10001" and form.query_one("#sender").disabled
        form.query_one("#level", Select).value = "untrusted"
        await press(pilot, "ctrl+s")
        assert "qq:10001 is untrusted from now on" in app.noted()

        app.action_trust_levels()  # the palette's "Trust levels"
        await settle(pilot)
        await press(pilot, "n")
        form = app.screen
        assert isinstance(form, TrustForm)
        await press(pilot, "ctrl+s")  # no sender typed: refused here, nothing sent
        assert isinstance(app.screen, TrustForm) and "Type the sender key" in text_of(
            form.query_one("#dialog-error").content)
        assert app.focused is form.query_one("#sender")  # focus stays in the form
        await press(pilot, *(" " * 3))
        form.query_one("#sender", Input).value = "x" * 300
        form.query_one("#level", Select).value = "blocked"
        await press(pilot, "ctrl+s")  # zcord refuses: the form stays, naming the field
        assert isinstance(app.screen, TrustForm)
        assert "“Sender” must be a sender key" in text_of(form.query_one("#dialog-error").content)
        assert app.focused is form.query_one("#sender")
    assert levels(d) == {"qq:10001": "untrusted"}


async def test_a_held_change_without_a_sender_says_what_held_it(memory, app_for):
    d, ids = memory
    with d.client("operator") as op, d.client() as bot:
        op.config_set({"defaultTrust": "untrusted"})
        assert bot.call_tool("zcor_memory_write", {"title": "无名氏", "content": "谁说的"})["review"] == "pending"
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "8")
        await until(pilot, lambda: app.screen.query_one("#held", DataTable).row_count == 1, what="the held change")
        detail = text_of(app.screen.query_one("#held-detail").content)
        assert "unknown" not in detail
        assert "no sender named, held by the default trust level (Config, defaultTrust)" in detail
        app.screen.query_one("#held", DataTable).focus()
        await press(pilot, "t")
        assert "names no sender" in app.noted("warning")
