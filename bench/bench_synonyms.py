"""The bot's synonym adds (issue 23 item 10), measured against a real daemon: 755
`zcor_synonyms_add` calls by the bot (one in five shares a term with an existing group, so
it is held), each group at the caps (10 terms of 32 characters). Run with PYTHONPATH
pointing at the code to measure (e.g. before and after a change) and compare the tables.
Prints the latency of the first and the last 100 adds (p50/p99), the total and the size of
synonyms.json at the end."""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fault.wire import Wire  # noqa: E402
from tests.integration.conftest import Daemon  # noqa: E402

ADDS = 755


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def group(i: int) -> list[str]:
    # ten distinct terms of 32 characters: Latin and CJK, as a bot might plant
    terms = [f"t{i:04d}x{k}".ljust(32, "q") if k % 2 else ("词" * 27 + f"{i:04d}{k}")[:32] for k in range(10)]
    if i % 5 == 4:
        terms[0] = "披萨"  # shares a term with a default group: held
    return terms


def main() -> None:
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="zsy"))
    d = Daemon(root)
    d.memdir.mkdir(mode=0o750)
    (d.memdir / "config.json").write_text(json.dumps({"maxBotSynonymGroups": 10_000}))
    d.start(env={"WATCHDOG_USEC": "30000000"})
    try:
        bot = Wire(d.sock, "bot", timeout=600)
        bot.call("tools/call", {"name": "zcor_memory_write", "arguments": {"title": "披萨店", "content": "x"}})
        times = []
        held = 0
        for i in range(ADDS):
            t0 = time.perf_counter()
            r = bot.call("tools/call", {"name": "zcor_synonyms_add", "arguments": {"terms": group(i)}})
            times.append((time.perf_counter() - t0) * 1000)
            sc = r["result"]["structuredContent"]
            assert sc["added"], r
            held += bool(sc.get("held"))
        size = (d.memdir / "synonyms.json").stat().st_size
    finally:
        d.stop()
    rows = [("first 100 adds", pct(times[:100], 50), pct(times[:100], 99)),
            ("last 100 adds", pct(times[-100:], 50), pct(times[-100:], 99)),
            (f"all {ADDS} adds", pct(times, 50), pct(times, 99))]
    print(f"| {ADDS} bot synonym adds ({held} held) | p50 ms | p99 ms |")
    print("| --- | --- | --- |")
    for name, p50, p99 in rows:
        print(f"| {name} | {p50:.1f} | {p99:.1f} |")
    print(f"\ntotal {sum(times) / 1000:.2f} s, mean {statistics.mean(times):.1f} ms; "
          f"synonyms.json {size / 1024:.0f} KiB at the end")


if __name__ == "__main__":
    main()
