"""What the origin of every change costs on the write path (issue 22): zcor_memory_write
(create and update) as the bot, in process, on a Memory of --size memories, timed by wall
clock and by CPU time of the calling thread (CPU time is what the origin adds to; on a busy
shared machine it is also the steadier of the two). With a zcord that knows origins, each
call tells one (`claim`, as `_meta` "zcor/origin" does over the socket); run the same
script on an older checkout for the figures before. Prints a table; never asserts.

Usage: python bench/bench_origin.py [--size 10000] [--samples 2000]
"""

from __future__ import annotations

import argparse
import inspect
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import build_memory, content, pct, table, title  # noqa: E402

from zcord.service import Service  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=10_000)
    ap.add_argument("--samples", type=int, default=2000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(dir="/tmp", prefix="zcbo"))
    try:
        build_memory(tmp / "mem", args.size, args.size, args.size)
        with Service(tmp / "mem") as svc:
            svc.warm()
            knows = "claim" in inspect.signature(svc.call).parameters
            extra = {"claim": {"session": "qq:group:1", "senders": ["qq:42"]}} if knows else {}
            rng = random.Random(7)
            rows = {}
            for name in ("create", "update"):
                wall, cpu = [], []
                ids = list(svc.state.nodes)[:args.samples]
                for n in range(args.samples):
                    params = {"title": title(rng, 0), "content": content(rng)}
                    if name == "update":
                        params["id"] = ids[n % len(ids)]
                    w0, c0 = time.perf_counter(), time.thread_time()
                    svc.call("zcor_memory_write", params, actor="model", **extra)
                    cpu.append((time.thread_time() - c0) * 1000)
                    wall.append((time.perf_counter() - w0) * 1000)
                rows[name] = (wall, cpu)
        print(f"zcor_memory_write as the bot, {args.size:,} memories, {args.samples} calls each, "
              f"{'with' if knows else 'without'} origins")
        print(table([
            ["wall ms p50 / p99", *(f"{pct(rows[k][0], 50):.3f} / {pct(rows[k][0], 99):.3f}" for k in rows)],
            ["CPU ms p50 / p99", *(f"{pct(rows[k][1], 50):.3f} / {pct(rows[k][1], 99):.3f}" for k in rows)],
        ], ["", "create", "update"]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
