"""Issue 33, attack #10: one held 14,000-character rewrite froze the Review screen for a
minute (a character-level diff on the UI thread). Diffs are now bounded in work and time and
built off the UI thread; past the bound the view says so and shows before and after. Review,
History and Versions, against a real daemon."""

from __future__ import annotations

import random
import threading

from textual.widgets import DataTable

from zcor_tui.diff import change_view, word_diff
from zcor_tui.screens.history import HistoryScreen
from zcor_tui.screens.review import ReviewScreen
from zcor_tui.screens.versions import VersionsScreen

from .conftest import press, settle, text_of, until

TOO_LARGE = "diff too large — showing before/after"
CHARS = "的一是不了人我在有他这中大来上个国到说们为子和你地出道也时年"


def rewrite(seed: int, n: int = 14_000) -> str:
    rnd = random.Random(seed)
    return "".join(rnd.choice(CHARS) for _ in range(n))


def test_a_large_diff_is_refused_within_its_budget_and_a_small_edit_of_it_is_lit():
    before, after = rewrite(1), rewrite(2)
    view = text_of(change_view({"kind": "node.update", "target": "m1", "before": {"content": before},
                                "after": {"content": after}}, side_by_side=False), width=200)
    assert TOO_LARGE in view and before[:100] in view and after[:100] in view
    # a one-character edit of the same long text: the common head and tail cost nothing
    edited = before[:7000] + "改" + before[7001:]
    left, right = word_diff(before, edited)
    lit = [s for s in right.spans if "5fd75f" in str(s.style)]
    assert len(lit) == 1 and right.plain[lit[0].start:lit[0].end] == "改"


async def test_review_history_and_versions_stay_responsive_on_a_huge_rewrite(memory, app_for):
    d, ids = memory
    big_before, big_after = rewrite(3), rewrite(4)
    with d.client("operator") as op, d.client() as bot:
        op.call_tool("zcor_memory_write", {"id": ids["dad"], "title": "爸爸", "content": big_before})
        op.trust_set("qq:troll", "untrusted")
        bot.call_tool("zcor_memory_write", {"id": ids["dad"], "title": "爸爸", "content": big_after},
                      origin={"session": "qq:group:1", "senders": ["qq:troll"]})
    app = app_for(d)
    ui_thread = threading.get_ident()
    built_on: list[int] = []
    original = ReviewScreen.render_item

    def spy(self, item):
        built_on.append(threading.get_ident())
        return original(self, item)

    ReviewScreen.render_item = spy
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            await press(pilot, "8")
            assert isinstance(app.screen, ReviewScreen)
            detail = app.screen.query_one("#held-detail")
            await until(pilot, lambda: TOO_LARGE in text_of(detail.content), what="the bounded review diff")
            assert built_on and ui_thread not in built_on  # built in a worker thread
            assert big_after[:50] in text_of(detail.content, width=200)
            await press(pilot, "v")  # side by side: bounded too
            await until(pilot, lambda: "too large" in text_of(detail.content, width=400), what="side by side")

            await press(pilot, "3")
            assert isinstance(app.screen, HistoryScreen)
            record = app.screen.query_one("#record")
            table = app.screen.query_one("#records", DataTable)
            await until(pilot, lambda: table.row_count > 0, what="history rows")
            await until(pilot, lambda: TOO_LARGE in text_of(record.content), what="the bounded history diff")
    finally:
        ReviewScreen.render_item = original


async def test_versions_diff_of_a_huge_rewrite_is_bounded(memory, app_for):
    d, ids = memory
    with d.client("operator") as op:
        op.call_tool("zcor_memory_write", {"id": ids["dad"], "title": "爸爸", "content": rewrite(5)})
        op.call_tool("zcor_memory_write", {"id": ids["dad"], "title": "爸爸", "content": rewrite(6)})
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.push_screen(VersionsScreen(ids["dad"]))
        await settle(pilot)
        diff = app.screen.query_one("#version-diff")
        await until(pilot, lambda: TOO_LARGE in text_of(diff.content), what="the bounded versions diff")
