"""Round trips to a real zcord over its Unix socket (issue 3). Prints a table; never asserts.

Builds a Memory of 10,000 nodes in-process (bench/common.build_memory, then one Service
open/close to check it loads), starts `zcord` on it as a subprocess, and measures:
ready time (spawn to READY=1), read/query/write latency from one blocking client, total
read throughput of 8 client processes, and the daemon's RSS.

Usage: python bench/bench_daemon.py [--nodes 10000] [--history 10000] [--samples 2000]
       [--clients 8] [--seconds 3]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import THINGS, VERBS, build_memory, content, pct, table, timed, title  # noqa: E402

from zcord.client import Client  # noqa: E402
from zcord.service import Service  # noqa: E402

DAEMON = [sys.executable, "-c", "import sys; from zcord.cli import daemon_main; sys.exit(daemon_main())"]

TARGETS = {
    "read": "p50 ≤ 1 ms",
    "query": "p50 ≤ 25 ms",
    "throughput": "≥ 2,000 calls/s",
    "ready": "≤ 2 s",
}


def start_daemon(memdir: Path, sock: Path, notify: Path) -> tuple[subprocess.Popen, float]:
    """Spawn zcord and wait for READY=1 on our own NOTIFY_SOCKET; returns (process, seconds)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(notify))
    listener.settimeout(60)
    env = {**os.environ, "NOTIFY_SOCKET": str(notify)}
    # as installed: Python caches its compiled modules (a shell that sets
    # PYTHONDONTWRITEBYTECODE would make every start compile them again, some 0.3 s)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    t = time.perf_counter()
    proc = subprocess.Popen(DAEMON + ["--memory-dir", str(memdir), "--socket", str(sock), "--log-level", "warning"],
                            env=env, stdin=subprocess.DEVNULL)
    try:
        while True:
            msg = listener.recv(4096).decode()
            if "READY=1" in msg.split("\n"):
                return proc, time.perf_counter() - t
    finally:
        listener.close()


def reader(sock: str, ids: list[str], seconds: float, start: float, out: mp.Queue) -> None:
    rng = random.Random(os.getpid())
    with Client(sock, timeout=30) as c:
        while time.time() < start:
            time.sleep(0.001)
        end = start + seconds
        n = 0
        while time.time() < end:
            c.call_tool("zcor_memory_read", {"id": rng.choice(ids)})
            n += 1
    out.put(n)


def throughput(sock: Path, ids: list[str], clients: int, seconds: float) -> float:
    ctx = mp.get_context("spawn")
    q: mp.Queue = ctx.Queue()
    start = time.time() + 2.0  # every process connected before the clock starts
    procs = [ctx.Process(target=reader, args=(str(sock), ids, seconds, start, q)) for _ in range(clients)]
    for p in procs:
        p.start()
    total = sum(q.get(timeout=seconds + 60) for _ in procs)
    for p in procs:
        p.join()
    return total / seconds


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> tuple[int, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--history", type=int, default=10_000, help="change records in the state (creates first)")
    ap.add_argument("--samples", type=int, default=2000, help="reads timed; queries and writes get fewer")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=3.0, help="length of the throughput run")
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="zcb"))
    proc = None
    try:
        memdir, sock = root / "mem", root / "run" / "zcord.sock"
        t = time.perf_counter()
        build_memory(memdir, args.nodes, args.history, args.history)
        Service(memdir).open().close()  # loads, validates and reconciles once, as the daemon will
        build = time.perf_counter() - t
        state_mb = (memdir / "memory-state.json").stat().st_size / 1e6

        proc, ready = start_daemon(memdir, sock, root / "notify")
        rng = random.Random(1)
        with Client(sock, timeout=60) as c:
            ids = [f"m{i}" for i in range(1, args.nodes + 1)]
            for _ in range(200):  # warm-up: connection, caches, jieba
                c.call_tool("zcor_memory_read", {"id": rng.choice(ids)})
            c.call_tool("zcor_memory_write", {"title": "预热", "content": "warm-up"})
            read = timed(lambda: c.call_tool("zcor_memory_read", {"id": rng.choice(ids)}), args.samples)
            ping = timed(c.ping, args.samples)
            query = timed(lambda: c.call_tool("zcor_memory_query", {"keywords": [rng.choice(THINGS)]}),
                          max(args.samples // 10, 20))
            query2 = timed(lambda: c.call_tool("zcor_memory_query", {
                "keywords": [rng.choice(VERBS), rng.choice(THINGS)],
                "from": "2026-01-01T00:00:00+08:00", "to": "2027-01-01T00:00:00+08:00"}),
                max(args.samples // 10, 20))
            write = timed(lambda: c.call_tool("zcor_memory_write", {"title": title(rng, 0),
                                                                    "content": content(rng)}),
                          max(args.samples // 20, 20))
            update = timed(lambda: c.call_tool("zcor_memory_write", {"id": rng.choice(ids), "title": title(rng, 0),
                                                                     "content": content(rng)}),
                           max(args.samples // 20, 20))
            recall = timed(lambda: c.recall("bench", f"{rng.choice(THINGS)}和{rng.choice(THINGS)}怎么样"),
                           max(args.samples // 10, 20))
            prefix = timed(c.prefix, max(args.samples // 10, 20))
        cpu0 = cpu_seconds(proc.pid)
        rate = throughput(sock, ids, args.clients, args.seconds)
        # includes the clients' connect/initialize, so a slight overestimate
        cpu_per_call = (cpu_seconds(proc.pid) - cpu0) / (rate * args.seconds)
        rss, hwm = rss_kib(proc.pid)

        def lat(name: str, values: list[float], target: str = "") -> list[str]:
            return [name, f"{pct(values, 50) * 1000:.3f} ms", f"{pct(values, 99) * 1000:.3f} ms", target]

        rows = [
            lat("ping (transport only)", ping),
            lat("read (zcor_memory_read)", read, TARGETS["read"]),
            lat("query, 1 keyword", query, TARGETS["query"]),
            lat("query, 2 keywords + time range", query2, TARGETS["query"]),
            lat("write, create", write),
            lat("write, update", update),
            lat("zcor/recall", recall),
            lat("zcor/prefix", prefix),
            [f"{args.clients} clients, reads", f"{rate:,.0f} calls/s", "", TARGETS["throughput"]],
            ["  daemon CPU per read call", f"{cpu_per_call * 1e6:.0f} µs",
             f"≈ {1 / cpu_per_call:,.0f}/s on one core", ""],
            ["daemon ready (spawn → READY=1)", f"{ready:.3f} s", "", TARGETS["ready"]],
            ["daemon RSS (now / peak)", f"{rss / 1024:.1f} MiB", f"{hwm / 1024:.1f} MiB", ""],
        ]
        print(f"zcord over a Unix socket: {args.nodes:,} nodes, {args.history:,} history changes, "
              f"state file {state_mb:.1f} MB (built in {build:.1f} s), {os.cpu_count()} CPUs")
        print(table(rows, ["measure", "p50 / value", "p99", "target"]))
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            proc.wait(30)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
