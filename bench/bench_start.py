"""Serving right after a start (issue 24), over the Unix socket, from spawn.

For each size (a Memory from bench/common.build_memory, one change record and one log line
per node, snapshotted once by zcord as a running zcord leaves it), three starts of a fresh
copy of that Memory:

1. ready: spawn → READY=1; first recall: spawn → the first `zcor/recall` (a chat batch,
   sent the moment READY=1 arrives) answered;
   (and the daemon's CPU time by then: the figure a loaded machine changes least);
2. writes (creates) back to back from READY=1 for 5 s, p50 / p99, then, once the daemon's
   CPU time has been still for a second (warm), the same number of writes again;
3. RSS once warm: of the first start before any write (the Memory of that size), and of
   the second after its writes (the Memory grown by them); the size of the state file and
   of the derived files beside it.

Prints a table; never asserts. Usage: python bench/bench_start.py [--sizes 1000,10000,100000]
[--cache DIR] (DIR keeps the built Memories between runs) [--repeat N] [--starts N] (the
first-recall rows are the p50 of N starts, 5 by default, with their range).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_daemon import cpu_seconds, rss_kib, start_daemon  # noqa: E402
from bench_memory import wait_quiet  # noqa: E402
from common import build_memory, content, lat, pct, table, title  # noqa: E402

from zcord.client import Client  # noqa: E402

CHAT = "昨天和小明去吃火锅了，他说周末想跑步，还提到他的猫咪最近怎么样"
WRITE_SECONDS = 5.0


def prepared(n: int, cache: Path) -> Path:
    """The built Memory of n nodes, snapshotted once by zcord (memory-state.cache and the
    other derived files as a running zcord leaves them)."""
    built = cache / f"m{n}"
    if not (built / "memory-state.json").exists():
        shutil.rmtree(built, ignore_errors=True)
        build_memory(built, n, n, n)
    if not (built / ".snapshotted").exists():
        root = Path(tempfile.mkdtemp(dir="/tmp", prefix="zcs"))
        try:
            proc, _ = start_daemon(built, root / "s", root / "n")
            with Client(root / "s", role="operator", timeout=600) as c:
                c.recall("prepare", CHAT)  # the warm-up is done: what it builds can be kept
                wait_quiet(proc.pid)
                c.request("zcor/snapshot", {})
            proc.send_signal(signal.SIGTERM)
            proc.wait(300)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        (built / ".snapshotted").touch()
    return built


class Run:
    def __init__(self, built: Path):
        self.root = Path(tempfile.mkdtemp(dir="/tmp", prefix="zcs"))
        self.memdir = self.root / "m"
        # the snapshot's files are hard links (zcord replaces them, never writes into them), so
        # the derived caches still belong to the state file (same inode); the rest is copied
        linked = {"memory-state.json", "memory-state.cache", "memory-state.recall.cache"}
        shutil.copytree(built, self.memdir, ignore=lambda d, names: [x for x in names if x in linked]
                        if Path(d) == built else [])
        for name in linked & set(os.listdir(built)):
            os.link(built / name, self.memdir / name)
        self.sock = self.root / "zcord.sock"
        self.k = 0

    def start(self):
        self.k += 1
        self.sock.unlink(missing_ok=True)
        t = time.perf_counter()
        proc, ready = start_daemon(self.memdir, self.sock, self.root / f"notify{self.k}")
        return proc, t, ready

    def stop(self, proc) -> None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(300)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def derived_mib(memdir: Path) -> str:
    """MiB of memory-state.json / memory-state.cache / memory-state.recall.cache ("-": none)."""
    sizes = []
    for name in ("memory-state.json", "memory-state.cache", "memory-state.recall.cache"):
        path = memdir / name
        sizes.append(f"{path.stat().st_size / 2**20:.1f}" if path.exists() else "-")
    return " / ".join(sizes)


def first_recall(built: Path, last: bool) -> tuple[float, float, float, float | None]:
    """One start of a fresh copy: (ready s, first recall answered s, daemon CPU s by then,
    RSS MiB once the background warm-up is done — measured on the last start only)."""
    run = Run(built)
    try:
        proc, t0, ready = run.start()
        with Client(run.sock, timeout=600) as c:
            c.recall("first", CHAT)
            first = time.perf_counter() - t0
            cpu = cpu_seconds(proc.pid)
            rss = None
            if last:
                wait_quiet(proc.pid)  # the background warm-up done: the Memory as it was, served
                c.recall("rss", CHAT)
                rss = rss_kib(proc.pid)[0] / 1024
        run.stop(proc)
        return ready, first, cpu, rss
    finally:
        run.close()


def bench(n: int, cache: Path, starts: int) -> dict[str, str]:
    built = prepared(n, cache)
    rng = random.Random(n)
    out: dict[str, str] = {}
    runs = [first_recall(built, i == starts - 1) for i in range(starts)]

    def median(k: int) -> str:
        got = [r[k] for r in runs]
        return f"{pct(got, 50):.2f}" + (f" ({min(got):.2f}–{max(got):.2f})" if len(got) > 1 else "")

    out[f"ready s, p50 of {starts} (range)"] = median(0)
    out["first recall answered s"] = median(1)
    out["daemon CPU s by then"] = median(2)
    out["RSS MiB warm, before any write"] = f"{runs[-1][3]:.0f}"
    run = Run(built)
    try:
        proc, t0, ready = run.start()
        with Client(run.sock, role="operator", timeout=600) as c:
            early: list[float] = []
            end = time.perf_counter() + WRITE_SECONDS
            while time.perf_counter() < end:
                t = time.perf_counter()
                c.call_tool("zcor_memory_write", {"title": title(rng, 0), "content": content(rng)})
                early.append(time.perf_counter() - t)
            wait_quiet(proc.pid)
            warm: list[float] = []
            for _ in range(max(len(early), 200)):
                t = time.perf_counter()
                c.call_tool("zcor_memory_write", {"title": title(rng, 0), "content": content(rng)})
                warm.append(time.perf_counter() - t)
            c.recall("rss", CHAT)
            rss = rss_kib(proc.pid)[0] / 1024
            grown = n + len(early) + max(len(early), 200)
        run.stop(proc)
        out[f"writes in the first {WRITE_SECONDS:.0f} s ms (n)"] = f"{lat(early)} ({len(early)})"
        out["writes once warm ms"] = lat(warm)
        out["early / warm p50"] = f"{pct(early, 50) / pct(warm, 50):.2f}×"
        out["RSS MiB after the writes (memories)"] = f"{rss:.0f} ({grown:,})"
        out["state / node cache / recall cache MiB"] = derived_mib(built)
    finally:
        run.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--cache", type=Path, default=None, help="keep the built Memories here between runs")
    ap.add_argument("--repeat", type=int, default=1, help="runs per size (each a column)")
    ap.add_argument("--starts", type=int, default=5, help="starts per run for the first-recall rows (p50)")
    args = ap.parse_args()
    cache = args.cache or Path(tempfile.mkdtemp(dir="/tmp", prefix="zcsb"))
    cache.mkdir(parents=True, exist_ok=True)
    cols, heads = [], []
    for n in (int(s) for s in args.sizes.split(",")):
        for r in range(args.repeat):
            cols.append(bench(n, cache, args.starts))
            heads.append(f"{n:,}" + (f" #{r + 1}" if args.repeat > 1 else ""))
            print(f"done {n}", file=sys.stderr)
    if args.cache is None:
        shutil.rmtree(cache, ignore_errors=True)
    keys = list(cols[0])
    print(f"zcord from spawn, over its Unix socket; {os.cpu_count()} CPUs; write latencies p50 / p99")
    print(table([[k, *[c[k] for c in cols]] for k in keys], ["memories", *heads]))


if __name__ == "__main__":
    main()
