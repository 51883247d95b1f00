"""The write path with the journal (issue 13): write cost by Memory size, writes while a
snapshot is being written, snapshot time, and start after a crash (journal replay).

For each size (a Memory from bench/common.build_memory, one change record and one log
line per node), over a real zcord's Unix socket from one client:

- create / update p50 and p99 with the default snapshot policy, from right after READY
  (while the daemon's warm-up builds its indexes in the background), and creates again once
  the warm-up is over;
- create p50 and p99 while background snapshots run back to back (ZCOR_SNAPSHOT_CHANGES=20:
  a snapshot starts every 20 changes, and at 100,000 memories one takes longer than 20
  writes), with the number of snapshots that completed during the samples;
- `zcor/snapshot` (a synchronous snapshot) and the clean-shutdown time;
- ready time (spawn → READY=1) on a clean snapshot, and after a SIGKILL with 2,000
  changes journaled since the last snapshot (their replay included).

Prints a table; never asserts. Usage: python bench/bench_journal.py [--sizes 1000,10000,100000]
[--samples 300] [--cache DIR] (DIR keeps the built Memories between runs).
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
from bench_daemon import rss_kib, start_daemon  # noqa: E402
from bench_memory import wait_quiet  # noqa: E402
from common import build_memory, content, lat, pct, table, timed, title  # noqa: E402

from zcord.client import Client  # noqa: E402


def memory(n: int, cache: Path | None, root: Path) -> Path:
    target = root / f"m{n}"
    if cache is not None:
        built = cache / f"m{n}"
        if not (built / "memory-state.json").exists():
            shutil.rmtree(built, ignore_errors=True)
            build_memory(built, n, n, n)
        shutil.copytree(built, target)
    else:
        build_memory(target, n, n, n)
    return target


class Daemon:
    def __init__(self, memdir: Path, root: Path):
        self.memdir, self.root = memdir, root
        self.sock = root / "run" / "zcord.sock"
        self.proc = None
        self.k = 0

    def start(self, env: dict[str, str] | None = None) -> float:
        self.k += 1
        saved = dict(os.environ)
        os.environ.update(env or {})
        try:
            self.proc, ready = start_daemon(self.memdir, self.sock, self.root / f"notify{self.k}")
        finally:
            os.environ.clear()
            os.environ.update(saved)
        return ready

    def stop(self) -> float:
        t = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(120)
        return time.perf_counter() - t

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)


def bench(n: int, samples: int, cache: Path | None) -> dict[str, str]:
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="zcj"))
    rng = random.Random(n)
    try:
        memdir = memory(n, cache, root)
        d = Daemon(memdir, root)
        d.start()  # the first start migrates nothing but may reconcile; time the second
        with Client(d.sock, role="operator", timeout=300) as c:
            c.request("zcor/snapshot", {})  # as zcord writes it: with memory-state.cache from 5,000 memories
        d.stop()
        ready = d.start()
        ids = [f"m{i}" for i in range(1, n + 1)]
        with Client(d.sock, role="operator", timeout=120) as c:
            for _ in range(20):
                c.call_tool("zcor_memory_read", {"id": rng.choice(ids)})
            c.call_tool("zcor_memory_write", {"title": "预热", "content": "warm-up"})
            create = timed(lambda: c.call_tool("zcor_memory_write", {"title": title(rng, 0), "content": content(rng)}),
                           samples)
            update = timed(lambda: c.call_tool("zcor_memory_write", {"id": rng.choice(ids), "title": title(rng, 0),
                                                                     "content": content(rng)}), samples)
            wait_quiet(d.proc.pid)  # the warm-up is over: indexes, jieba, the history index
            steady = timed(lambda: c.call_tool("zcor_memory_write", {"title": title(rng, 0), "content": content(rng)}),
                           samples)
            snap = timed(lambda: c.request("zcor/snapshot", {}), 3)
            rss = rss_kib(d.proc.pid)[0] / 1024
        stop = d.stop()
        # writes while snapshots run back to back
        d.start({"ZCOR_SNAPSHOT_CHANGES": "20"})
        pos = memdir / "memory-state.pos"
        seen: set[int] = set()

        def watch() -> None:
            try:
                seen.add(pos.stat().st_mtime_ns)
            except FileNotFoundError:
                pass

        with Client(d.sock, role="operator", timeout=120) as c:
            watch()
            during = timed(lambda: c.call_tool("zcor_memory_write", {"title": title(rng, 0), "content": content(rng)}),
                           samples, between=watch)
            # 2,000 changes journaled after the last snapshot, then a crash
        d.stop()
        d.start({"ZCOR_SNAPSHOT_CHANGES": "1000000", "ZCOR_SNAPSHOT_SECONDS": "1000000"})
        with Client(d.sock, role="operator", timeout=120) as c:
            for _ in range(2000):
                c.call_tool("zcor_memory_write", {"id": rng.choice(ids), "title": title(rng, 0), "content": content(rng)})
        d.kill()
        replay_ready = d.start()
        d.stop()
        (memdir / "memory-state.cache").unlink(missing_ok=True)  # as after an upgrade: the JSON is parsed
        json_ready = d.start()
        d.stop()
        return {
            "memories": f"{n:,}",
            "create p50 / p99 ms": lat(create),
            "update p50 / p99 ms": lat(update),
            "create after the warm-up ms": lat(steady),
            "create while snapshotting ms": lat(during),
            "snapshots done meanwhile": f"{max(0, len(seen) - 1)}",
            "zcor/snapshot s": f"{pct(snap, 50):.2f}",
            "state file MiB": f"{(memdir / 'memory-state.json').stat().st_size / 2**20:.1f}",
            "clean stop s": f"{stop:.2f}",
            "ready s": f"{ready:.2f}",
            "ready after crash, 2,000 to replay s": f"{replay_ready:.2f}",
            "ready without memory-state.cache s": f"{json_ready:.2f}",
            "RSS MiB": f"{rss:.0f}",
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--cache", type=Path, default=None)
    args = ap.parse_args()
    results = [bench(int(s), args.samples, args.cache) for s in args.sizes.split(",")]
    keys = list(results[0])
    rows = [[k] + [r[k] for r in results] for k in keys[1:]]
    print(f"zcord write path (journal + background snapshots), one client over the Unix socket, "
          f"{os.cpu_count()} CPUs; p50 / p99")
    print(table(rows, ["memories"] + [r["memories"] for r in results]))


if __name__ == "__main__":
    main()
