"""Undo (issue 12): revert, versions and the Memory at an instant, in process.

A Memory of --nodes memories whose history holds --history changes (creates, then updates
of random memories; most of it sealed into history/ segments) and as many log lines, built
by bench/common.build_memory. Then, on an open Service: `zcor/history/revert` of a recent
update (each sample reverts the update made just before it), a revert preview,
`zcor/history/versions` of random memories, and `zcor/history/at` for instants 99 %, 90 %
and 50 % of the way through the history (the further back, the more changes to undo).
Prints a table; never asserts.

Usage: python bench/bench_undo.py [--nodes 10000] [--history 50000] [--samples 50]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import build_memory, content, lat, table, timed, title  # noqa: E402

from zcord.service import (
    Service,  # noqa: E402
    undo,  # noqa: E402
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--history", type=int, default=50_000)
    ap.add_argument("--samples", type=int, default=50)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="zcu"))
    try:
        memdir = root / "mem"
        build_memory(memdir, args.nodes, args.history, args.history)
        rng = random.Random(3)
        with Service(memdir) as svc:
            t = time.perf_counter()
            svc.warm()  # what a daemon does after READY: indexes, jieba, the history index
            svc.oplog.query([], None, None, 1, 0)
            warm = time.perf_counter() - t
            ids = list(svc.state.nodes)

            def update_then_revert() -> float:
                svc.call("zcor_memory_write", {"id": rng.choice(ids), "title": title(rng, 0), "content": content(rng)})
                seq = svc.seq
                t = time.perf_counter()
                undo.revert(svc, seq, False, False, {"seq": seq})
                return time.perf_counter() - t

            revert = [update_then_revert() for _ in range(args.samples)]
            svc.call("zcor_memory_write", {"id": ids[0], "title": "预览", "content": "x"})
            seq = svc.seq
            preview = timed(lambda: undo.revert(svc, seq, False, True, {"seq": seq, "preview": True}), args.samples)
            versions = timed(lambda: undo.versions(svc, rng.choice(ids)), args.samples)
            first = datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=8)))
            span = max(args.nodes, args.history)  # build_memory: one change per second
            at = {}
            for frac in (0.99, 0.9, 0.5):
                when = first + timedelta(seconds=span * frac)
                undone = undo.state_at(svc, when)["undoneChanges"]
                at[frac] = (timed(lambda when=when: undo.state_at(svc, when), max(3, args.samples // 10)), undone)
            segments = len(svc.state.history_segments)
        rows = [
            ["revert of an update", lat(revert), "≤ 50 ms p50"],
            ["revert preview", lat(preview), ""],
            ["versions of a memory", lat(versions), "≤ 20 ms"],
        ]
        for frac, (values, undone) in at.items():
            rows.append([f"at: {frac:.0%} through ({undone:,} changes undone)", lat(values), "≤ 1 s"])
        print(f"undo, in process: {args.nodes:,} memories, {args.history:,} changes ({segments} sealed segments), "
              f"{args.history:,} log lines; warm-up (indexes, jieba, history index) {warm:.1f} s; p50 / p99 ms")
        print(table(rows, ["measure", "p50 / p99 ms", "target"]))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
