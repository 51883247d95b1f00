"""The pure helpers behind the screens: local dates, term lists, affinity bars and diffs."""

from __future__ import annotations

from datetime import datetime

import pytest
from rich.text import Text

from zcor_tui.diff import change_view, unified, word_diff
from zcor_tui.format import affinity_bar, parse_local, split_keywords, split_terms, when

from .conftest import text_of


def test_local_dates_get_the_local_offset_and_whole_days():
    start = parse_local("2026-01-31")
    end = parse_local("2026-01-31", end=True)
    assert start.startswith("2026-01-31T00:00:00.000") and end.startswith("2026-01-31T23:59:59.999")
    assert datetime.fromisoformat(start).utcoffset() == datetime(2026, 1, 31).astimezone().utcoffset()
    assert parse_local("2026-01-31 20:00", end=True).startswith("2026-01-31T20:00:59.999")
    assert parse_local("2026-01-31T20:00:00+08:00") == "2026-01-31T20:00:00.000+08:00"
    assert parse_local("  ") is None
    with pytest.raises(ValueError, match="not a date"):
        parse_local("yesterday")


def test_term_lists():
    assert split_terms("猫, 猫咪，cat、喵 ; ice cream") == ["猫", "猫咪", "cat", "喵", "ice cream"]
    assert split_keywords(" 项目  截止,日期 ") == ["项目", "截止", "日期"]


def test_affinity_bar_is_signed():
    assert affinity_bar(0).plain == "··········│··········  0"
    assert affinity_bar(-30).plain == "·······███│·········· -30"
    assert affinity_bar(100).plain == "··········│██████████ +100"
    assert affinity_bar(1).plain.count("█") == 1


def test_times_keep_their_offset():
    assert when("2026-01-01T09:00:05.123+08:00") == "2026-01-01 09:00:05 +08:00"
    assert when(None) == "—"


def styled(text: Text, style: str) -> list[str]:
    return [text.plain[s.start:s.end] for s in text.spans if style in str(s.style)]


def test_word_diff_lights_only_the_changed_words():
    before, after = word_diff("爸爸周末喜欢钓鱼。", "爸爸周末喜欢去河边钓鱼。")
    assert before.plain == "爸爸周末喜欢钓鱼。" and after.plain == "爸爸周末喜欢去河边钓鱼。"
    assert styled(after, "on #5fd75f") == ["去河边"] and styled(before, "on #8b1a1a") == []
    before, after = word_diff("meet Bob at noon", "meet Alice at noon")
    assert styled(before, "on #8b1a1a") == ["Bob"] and styled(after, "on #5fd75f") == ["Alice"]


def test_unified_diff_of_lines():
    out = unified("one\ntwo\nthree", "one\n2\nthree").plain
    assert out.splitlines() == ["  one", "- two", "+ 2", "  three"]
    long = "\n".join(str(n) for n in range(20))
    assert "unchanged lines" in unified(long, long.replace("10", "ten")).plain


def test_change_views():
    node = {"id": "m1", "title": "旧", "content": "a", "keywords": ["x"]}
    update = {"changeId": 3, "kind": "node.update", "target": "m1", "before": node,
              "after": {**node, "title": "新", "keywords": ["x", "y"]}}
    text = text_of(change_view(update, side_by_side=False))
    assert text.startswith("node.update · m1") and "change 3" not in text and "- 旧" in text and "+ 新" in text and "+ x, y" in text
    assert "content" not in text  # unchanged fields are left out
    text = text_of(change_view(update, side_by_side=True))
    assert "before" in text and "after" in text
    text = text_of(change_view({"kind": "node.delete", "target": "m1", "before": node}, side_by_side=False))
    assert "Deleted. The full record before the delete" in text and "content: a" in text
    receipt = {"kind": "important.mark", "target": "m6", "before": ["m1"], "after": ["m6"],
               "receipt": {"replaced": {"id": "m1", "title": "旧"}, "reminder": "At most 5…"}}
    assert "m1 (旧) is no longer important" in text_of(change_view(receipt, side_by_side=False))
