"""The one benchmark table (issue 7): for each Memory size, over a real zcord's Unix socket.

For 1,000 / 10,000 / 100,000 nodes (each with one change record and one operation-log
line per node, built directly by bench/common.build_memory, then snapshotted once by zcord,
as a running zcord leaves it): load time (Service.open in
process: parse, validate, reconcile; the retrieval indexes are built after READY), daemon
ready time (spawn → READY=1), p50 and p99 of read / query / write / recall / context /
history query from one client (after the daemon's warm-up), read throughput of 8
concurrent client processes, and the daemon's RSS after the warm-up and at the end (see
bench/bench_memory.py for the load and memory split). Prints a table; never asserts.

Usage: python bench/bench_all.py [--sizes 1000,10000,100000] [--samples 1000] [--clients 8]
       [--seconds 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_daemon import rss_kib, start_daemon, throughput  # noqa: E402
from bench_memory import wait_quiet  # noqa: E402
from common import THINGS, VERBS, build_memory, content, lat, table, timed, title  # noqa: E402

from zcord.client import Client, ToolError  # noqa: E402
from zcord.service import Service  # noqa: E402

CHAT = "昨天和小明去吃{}了，他说周末想{}，还提到他的{}最近怎么样。我们聊了很多关于工作和考试的事情。"


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs ({model}), Python {platform.python_version()}, {platform.system()} {platform.release()}"


def one(nodes: int, samples: int, clients: int, seconds: float) -> dict[str, str]:
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="zcb"))
    proc = None
    try:
        memdir, sock = root / "mem", root / "run" / "zcord.sock"
        t = time.perf_counter()
        build_memory(memdir, nodes, nodes, nodes)
        build = time.perf_counter() - t
        with Service(memdir) as svc:  # the snapshot as zcord writes it (memory-state.cache from 5,000 memories)
            svc.snapshot()
        t = time.perf_counter()
        Service(memdir).open().close()
        load = time.perf_counter() - t
        state_mib = (memdir / "memory-state.json").stat().st_size / 2**20
        proc, ready = start_daemon(memdir, sock, root / "notify")
        rng = random.Random(nodes)
        ids = [f"m{i}" for i in range(1, nodes + 1)]

        def chat() -> str:
            return CHAT.format(rng.choice(THINGS), rng.choice(THINGS), rng.choice(THINGS))

        with Client(sock, timeout=120) as c:
            # the daemon warms jieba and the log index after READY: wait for both, then measure
            c.recall("bench", chat())
            while True:  # the log index is built in the background on a first start: wait for it
                try:
                    c.call_tool("zcor_memory_history", {"keywords": ["奶茶"], "limit": 20})
                    break
                except ToolError as e:
                    if e.code != "busy":
                        raise
                    time.sleep(1)
            wait_quiet(proc.pid, limit=900)  # and the rest of the warm-up (the query text blob, the twin index)
            warm_rss = rss_kib(proc.pid)[0]
            for _ in range(100):
                c.call_tool("zcor_memory_read", {"id": rng.choice(ids)})
            few = max(samples // 5, 20)
            read = timed(lambda: c.call_tool("zcor_memory_read", {"id": rng.choice(ids)}), samples)
            query = timed(lambda: c.call_tool("zcor_memory_query", {"keywords": [rng.choice(THINGS)]}), few)
            query2 = timed(lambda: c.call_tool("zcor_memory_query", {
                "keywords": [rng.choice(VERBS), rng.choice(THINGS)],
                "from": "2026-01-01T00:00:00+08:00", "to": "2027-01-01T00:00:00+08:00"}), few)
            write = timed(lambda: c.call_tool("zcor_memory_write", {"title": title(rng, 0), "content": content(rng)}),
                          few)
            update = timed(lambda: c.call_tool("zcor_memory_write", {
                "id": rng.choice(ids), "title": title(rng, 0), "content": content(rng)}), few)
            recall = timed(lambda: c.recall("bench", chat()), few)
            context = timed(lambda: c.context("bench"), few)
            history = timed(lambda: c.call_tool("zcor_memory_history", {"keywords": [rng.choice(THINGS)]}),
                            max(samples // 20, 10))
        rate = throughput(sock, ids, clients, seconds)
        rss, hwm = rss_kib(proc.pid)
        return {
            "nodes": f"{nodes:,}",
            "state file MiB (built in s)": f"{state_mib:.1f} ({build:.1f} s)",
            "load s (Service.open)": f"{load:.3f}",
            "daemon ready s (spawn → READY=1)": f"{ready:.3f}",
            "read ms p50 / p99": lat(read),
            "query 1 keyword ms": lat(query),
            "query 2 keywords + time ms": lat(query2),
            "write (create) ms": lat(write),
            "write (update) ms": lat(update),
            "recall ms": lat(recall),
            "context ms": lat(context),
            "history query ms": lat(history),
            f"{clients} clients, reads/s": f"{rate:,.0f}",
            "daemon RSS MiB after warm-up": f"{warm_rss / 1024:.0f}",
            "daemon RSS MiB (now / peak)": f"{rss / 1024:.0f} / {hwm / 1024:.0f}",
        }
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            proc.wait(60)
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--samples", type=int, default=1000, help="reads timed; the others get a fifth, history a 20th")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=3.0, help="length of the throughput run")
    args = ap.parse_args()
    started = time.perf_counter()
    cols = []
    for n in (int(s) for s in args.sizes.split(",")):
        t = time.perf_counter()
        cols.append(one(n, args.samples, args.clients, args.seconds))
        print(f"{n:,} nodes done in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    keys = list(cols[0])[1:]
    print(f"zcord over its Unix socket, one client unless stated; each Memory has as many change records "
          f"and log lines as nodes. {machine()}.")
    print(table([[k, *[c[k] for c in cols]] for k in keys], ["nodes", *[c["nodes"] for c in cols]]))
    print(f"total run time: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
