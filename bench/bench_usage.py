"""Token-usage reports and Prometheus metrics (issues 32.5 and 35.18). Prints tables; never asserts.

1. In process, the usage book at its bounds: --sessions sessions (default 500, the most kept)
   reporting every day for 90 days, --per-day reports each a day: what one report costs
   (p50/p99, the rewrites included), the size of usage.jsonl and how long a start takes to
   read it, and the `zcor/usage` query over 30 and 90 days.
2. Against a real zcord: `zcor/usage/report` from a bot client and `zcor/metrics` (with
   every session reporting), round trips p50/p99, and the size of the metrics text.

Usage: python bench/bench_usage.py [--sessions 500] [--per-day 4] [--samples 2000]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_daemon import start_daemon  # noqa: E402
from common import pct, table  # noqa: E402

from zcord.client import Client  # noqa: E402
from zcord.service import usage as U  # noqa: E402


class Days:
    def __init__(self) -> None:
        self.t = datetime(2026, 9, 1, 12, tzinfo=timezone(timedelta(hours=8)))

    def __call__(self) -> datetime:
        return self.t


def report(n: int) -> dict:
    return {"inputTokens": 12000 + n, "cachedTokens": 11000, "cacheWriteTokens": 0, "outputTokens": 200,
            "prefixChars": 4000, "headerChars": 900, "frontEnd": "endpoint", "model": "gpt-x"}


def ms(values: list[float]) -> str:
    return f"{pct(values, 50) * 1000:.3f} / {pct(values, 99) * 1000:.3f}"


def in_process(tmp: Path, sessions: int, per_day: int) -> None:
    clock = Days()
    book = U.UsageBook(tmp / U.USAGE_FILE, clock, max_sessions=sessions)
    book.load()
    times: list[float] = []
    for _day in range(U.KEEP_DAYS):
        for k in range(per_day):
            for s in range(sessions):
                t = time.perf_counter()
                book.record(f"qq:group:{s}", report(k))
                times.append(time.perf_counter() - t)
        clock.t += timedelta(days=1)
    clock.t -= timedelta(days=1)
    book.close()
    size = (tmp / U.USAGE_FILE).stat().st_size
    t, c = time.perf_counter(), time.thread_time()
    again = U.UsageBook(tmp / U.USAGE_FILE, clock, max_sessions=sessions)
    again.load()
    load, load_cpu = time.perf_counter() - t, time.thread_time() - c
    queries = {}
    for days in (30, 90):
        runs, cpu = [], []
        for _ in range(20):
            t, c = time.perf_counter(), time.thread_time()
            again.query(days=days)
            runs.append(time.perf_counter() - t)
            cpu.append(time.thread_time() - c)
        queries[days] = runs, cpu
    print(f"usage book: {sessions} sessions × {per_day} reports a day × {U.KEEP_DAYS} days = {len(times):,} reports "
          f"({again.rows:,} session-day rows kept)")
    print(table([
        ["one report (ms p50 / p99)", ms(times)],
        ["slowest report (a rewrite, ms)", f"{max(times) * 1000:.1f}"],
        ["usage.jsonl", f"{size / 1024:,.0f} KiB"],
        ["read at start (ms; CPU ms)", f"{load * 1000:.1f}; {load_cpu * 1000:.1f}"],
        ["zcor/usage, 30 days (ms p50 / p99; CPU ms p50)", f"{ms(queries[30][0])}; {pct(queries[30][1], 50) * 1000:.1f}"],
        ["zcor/usage, 90 days (ms p50 / p99; CPU ms p50)", f"{ms(queries[90][0])}; {pct(queries[90][1], 50) * 1000:.1f}"],
    ], ["", "value"]))


def over_socket(tmp: Path, sessions: int, samples: int) -> None:
    proc, _ = start_daemon(tmp / "mem", tmp / "zcord.sock", tmp / "notify")
    try:
        with Client(tmp / "zcord.sock", role="bot", timeout=60).connect() as bot:
            for s in range(sessions):
                bot.usage_report(f"qq:group:{s}", 12000, 11000, 200, prefix_chars=4000, header_chars=900)
            reports = []
            for n in range(samples):
                t = time.perf_counter()
                bot.usage_report(f"qq:group:{n % sessions}", 12000, 11000, 200, prefix_chars=4000, header_chars=900)
                reports.append(time.perf_counter() - t)
            metrics = []
            for _ in range(max(20, samples // 20)):
                t = time.perf_counter()
                text = bot.metrics()
                metrics.append(time.perf_counter() - t)
        print(f"\nreal zcord, bot client, {sessions} sessions reporting")
        print(table([
            ["zcor/usage/report (ms p50 / p99)", ms(reports)],
            ["zcor/metrics (ms p50 / p99)", ms(metrics)],
            ["metrics text", f"{len(text) / 1024:,.0f} KiB, {text.count(chr(10)):,} lines"],
        ], ["", "value"]))
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=U.MAX_SESSIONS)
    ap.add_argument("--per-day", type=int, default=4)
    ap.add_argument("--samples", type=int, default=2000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(dir="/tmp", prefix="zcbu"))
    try:
        in_process(tmp, args.sessions, args.per_day)
        # the bot's reports are limited to botUsageReportsPerMinute (600): raise it for the run
        (tmp / "mem").mkdir(mode=0o750)
        (tmp / "mem" / "config.json").write_text('{"botUsageReportsPerMinute": 1000000}')
        over_socket(tmp, args.sessions, args.samples)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
