"""The usage book (zcord.service.usage): sums per session and day, kept in usage.jsonl across
a reload, bounded in days and sessions, rewritten compactly, and a torn line skipped."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from tests.conftest import TZ
from zcord.core.errors import InvalidArgument
from zcord.service import usage as U


class Day:
    """A clock that stays on one day until moved."""

    def __init__(self) -> None:
        self.t = datetime(2026, 12, 6, 10, 0, tzinfo=TZ)

    def __call__(self) -> datetime:
        return self.t

    def forward(self, days: int) -> None:
        self.t += timedelta(days=days)


def report(inp: int = 1000, cached: int = 600, out: int = 50, **kw) -> dict:
    return {"inputTokens": inp, "cachedTokens": cached, "outputTokens": out, "cacheWriteTokens": kw.pop("write", 0),
            "prefixChars": kw.pop("prefix", 0), "headerChars": kw.pop("header", 0), **kw}


def book(tmp_path, clock, **kw) -> U.UsageBook:
    b = U.UsageBook(tmp_path / U.USAGE_FILE, clock, **kw)
    b.load()
    return b


def test_reports_are_summed_per_session_and_day_and_survive_a_reload(tmp_path):
    clock = Day()
    b = book(tmp_path, clock)
    b.record("qq:1", report(prefix=3000, header=800, frontEnd="chat", model="m1"))
    b.record("qq:1", report(inp=2000, cached=1900, out=10, model="m2"))
    b.record("qq:2", report(inp=500, cached=0, write=400))
    clock.forward(1)
    b.record("qq:2", report(inp=100, cached=100))
    got = b.query()
    one = next(s for s in got["sessions"] if s["session"] == "qq:1")
    assert (one["requests"], one["inputTokens"], one["cachedTokens"], one["outputTokens"]) == (2, 3000, 2500, 60)
    assert one["hitShare"] == round(2500 / 3000, 4) and one["frontEnd"] == "chat" and one["model"] == "m2"
    assert one["prefixTokens"] == round(3000 / U.CHARS_PER_TOKEN) and one["headerTokens"] == round(800 / U.CHARS_PER_TOKEN)
    assert [d["day"] for d in got["days"]] == ["2026-12-07", "2026-12-06"]
    assert [d["requests"] for d in got["days"]] == [1, 3]
    assert got["totals"]["requests"] == 4 and got["totals"]["cacheWriteTokens"] == 400
    assert b.today_line()["requests"] == 1 and b.today_line()["day"] == "2026-12-07"
    only = b.query("qq:2", days=1)
    assert [s["session"] for s in only["sessions"]] == ["qq:2"] and only["totals"]["inputTokens"] == 100
    b.close()
    again = book(tmp_path, clock)
    assert again.query() == got


def test_a_torn_last_line_is_skipped_and_the_file_rewritten(tmp_path):
    clock = Day()
    b = book(tmp_path, clock)
    b.record("a", report())
    b.close()
    path = tmp_path / U.USAGE_FILE
    path.write_bytes(path.read_bytes() + b'{"day":"2026-12-06","session":"a","inputTok')  # killed mid-write
    b = book(tmp_path, clock)
    assert b.query()["totals"]["requests"] == 1
    b.record("a", report())
    b.close()
    assert all(json.loads(line) for line in path.read_text().splitlines())  # rewritten whole
    assert book(tmp_path, clock).query()["totals"]["requests"] == 2


def test_sessions_are_bounded_least_recently_reported_first_and_day_totals_keep_them(tmp_path):
    clock = Day()
    b = book(tmp_path, clock, max_sessions=3)
    for name in ("a", "b", "c"):
        b.record(name, report())
    b.record("a", report())  # a is now the most recent: b goes first
    b.record("d", report())
    b.record("e", report())
    assert sorted(s["session"] for s in b.query()["sessions"]) == ["a", "d", "e"]
    assert b.query()["totals"]["requests"] == 6  # the day's totals count the dropped sessions too
    b.close()
    again = book(tmp_path, clock, max_sessions=3)
    assert sorted(s["session"] for s in again.query()["sessions"]) == ["a", "d", "e"]
    assert again.query()["totals"]["requests"] == 6


def test_days_are_bounded_and_sessions_gone_quiet_are_dropped(tmp_path):
    clock = Day()
    b = book(tmp_path, clock, keep_days=5)
    b.record("old", report())
    b.record("both", report())
    clock.forward(3)
    b.record("both", report())
    assert {d["day"] for d in b.query(days=5)["days"]} == {"2026-12-06", "2026-12-09"}
    clock.forward(2)  # 2026-12-11: the 6th is out of the 5 days kept
    b.record("new", report())
    got = b.query(days=5)
    assert {s["session"] for s in got["sessions"]} == {"both", "new"}
    assert {d["day"] for d in got["days"]} == {"2026-12-09", "2026-12-11"}
    assert b.rows == 2
    with pytest.raises(InvalidArgument) as e:
        b.query(days=6)
    assert e.value.field == "days"


def test_the_file_is_compacted_once_reports_outnumber_the_aggregates(tmp_path, monkeypatch):
    monkeypatch.setattr(U, "COMPACT_LINES", 20)
    clock = Day()
    b = book(tmp_path, clock)
    for n in range(100):
        b.record(f"s{n % 3}", report(inp=n + 10, cached=n))
    lines = (tmp_path / U.USAGE_FILE).read_text().splitlines()
    assert len(lines) < 30  # not 100: rewritten as one line per aggregate, then appended to
    before = b.query()
    assert before["totals"]["requests"] == 100 and before["totals"]["inputTokens"] == sum(range(10, 110))
    b.close()
    assert book(tmp_path, clock).query() == before


def test_an_unwritable_file_counts_nothing(tmp_path):
    clock = Day()
    b = book(tmp_path, clock)
    b.record("a", report())
    b.close()
    (tmp_path / U.USAGE_FILE).unlink()
    (tmp_path / U.USAGE_FILE).mkdir()  # any open for writing fails
    with pytest.raises(U.StorageError):
        b.record("a", report())
    assert b.query()["totals"]["requests"] == 1
