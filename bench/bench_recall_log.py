"""What the recall log (issue 38) costs auto-recall: zcor/recall p50 / p99 over a real
zcord's socket with the log off (recallLogEntries 0) and on (200), in alternating rounds on
the same daemon (the machine's drift falls on both alike; the daemon quiet between rounds, so
the log's writing of one round's entries does not fall in the next), after the warm-up; with
the log off recall does not explain its hits either. The Memory is
bench/common.build_memory's, the batches bench_all's chat lines. Also the log's own figures:
entries written and the folder's size.

Usage: python bench/bench_recall_log.py [--sizes 10000,100000] [--rounds 4] [--per-round 100]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_all import CHAT  # noqa: E402
from bench_daemon import start_daemon  # noqa: E402
from bench_memory import wait_quiet  # noqa: E402
from common import THINGS, build_memory, lat, pct, table, timed  # noqa: E402

from zcord.client import Client  # noqa: E402
from zcord.service import Service  # noqa: E402


def one(size: int, rounds: int, per_round: int) -> list[list[str]]:
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="zcrl"))
    proc = None
    try:
        mem = root / "mem"
        build_memory(mem, size, size, size)
        with Service(mem) as svc:
            svc.snapshot()
        proc, _ready = start_daemon(mem, root / "s.sock", root / "notify")
        rng = random.Random(size)

        def chat() -> str:
            return CHAT.format(rng.choice(THINGS), rng.choice(THINGS), rng.choice(THINGS))

        off: list[float] = []
        on: list[float] = []
        with Client(root / "s.sock", timeout=300, role="operator") as c:
            c.recall("bench", chat())
            wait_quiet(proc.pid, limit=900)
            for _ in range(50):
                c.recall("bench", chat())
            for _ in range(rounds):
                for entries, out in ((0, off), (200, on)):
                    c.config_set({"recallLogEntries": entries})
                    out += timed(lambda: c.recall("bench", [{"text": chat(), "origin": "external",
                                                             "senderKey": "qq:42"}]), per_round)
                    # the log's thread writes the round's entries once recalls pause: let it
                    # finish here, not during the next round (which would charge them to "off")
                    wait_quiet(proc.pid, quiet=0.5, limit=30)
            kept = c.recall_log("bench", limit=1)["total"]
        size_kib = sum(p.stat().st_size for p in (mem / "recall-log").iterdir()) / 1024
        added = (pct(on, 50) / pct(off, 50) - 1) * 100
        return [[f"{size:,}", lat(off), lat(on), f"{added:+.1f} %", f"{kept} kept, {size_kib:.0f} KiB"]]
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(120)
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--per-round", type=int, default=100)
    args = ap.parse_args()
    t = time.perf_counter()
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        rows += one(n, args.rounds, args.per_round)
        print(f"{n:,} done", file=sys.stderr)
    print(f"zcor/recall over a real zcord's socket, {args.rounds} alternating rounds of {args.per_round} "
          f"batches each way; ms p50 / p99")
    print(table(rows, ["memories", "log off", "log on", "p50 added", "recall log"]))
    print(f"run time {time.perf_counter() - t:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
