"""The Usage screen (key 9, or "Go to Usage" in the palette) against a real daemon: the
sessions and days the front ends reported, the cache-hit share, and the window key."""

from __future__ import annotations

from textual.widgets import DataTable

from zcor_tui.screens.usage import UsageScreen

from .conftest import press, screen_text, settle, text_of, until


async def test_usage_screen_shows_sessions_days_and_the_cache_hit_share(make_daemon, app_for):
    d = make_daemon().start()
    with d.client() as bot:
        bot.usage_report("qq:group:1", 10000, 9000, 200, prefix_chars=4000, header_chars=600, front_end="endpoint")
        bot.usage_report("console\u202e", 2000, 0, 100, front_end="chat")  # a bidi override in a session name
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Go to Usage" in titles
        await press(pilot, "9")
        assert isinstance(app.screen, UsageScreen)
        sessions = app.screen.query_one("#usage-sessions", DataTable)
        days = app.screen.query_one("#usage-days", DataTable)
        await until(pilot, lambda: sessions.row_count == 2 and days.row_count == 1, what="the usage rows")
        summary = text_of(app.screen.query_one("#usage-summary").content)
        assert "Last 30 days" in summary and "2 provider calls" in summary and "75% from the cache" in summary
        shown = screen_text(app)
        assert "qq:group:1" in shown and "90%" in shown and "endpoint" in shown
        assert "\u202e" not in shown  # the override is shown as a mark, never sent to the terminal
        await press(pilot, "d")
        await until(pilot, lambda: "Last 90 days" in text_of(app.screen.query_one("#usage-summary").content),
                    what="the 90-day window")
        with d.client() as bot:
            bot.usage_report("qq:group:2", 100, 0, 1)
        await press(pilot, "r")
        await until(pilot, lambda: sessions.row_count == 3, what="the new session after r")
        assert "No" not in app.noted("error")
