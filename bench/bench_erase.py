"""Forgetting one person in a large Memory (issue 34): `zcor/erase` over a real zcord's
socket, with many history records and 20 backups.

The Memory is written directly (bench/common.build_memory: nodes, change records in sealed
history segments, operation-log lines), then zcord is started and one person ("qq:victim")
talks to the bot: memories written, updated, a relationship and a trust level; then 20
backups are taken. The erasure is timed (preview and the erasure itself), and the Memory
directory's size is sampled every 20 ms meanwhile: the extra disk it needs while running is
the peak above the size before (the rewritten files exist beside the old ones until each
rename). Prints a table; never asserts (a byte scan for the victim's text is printed too).

Usage: python bench/bench_erase.py [--nodes 20000] [--history 200000] [--oplog 400000]
       [--backups 20] [--victim 50]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_daemon import start_daemon  # noqa: E402
from common import build_memory, table  # noqa: E402

from zcord.client import Client, ToolError  # noqa: E402

VICTIM = "qq:victim"
SECRET = "victim-secret-words"


def du(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except FileNotFoundError:
                pass
    return total


def history_ready(op: Client) -> int:
    while True:
        try:
            return int(op.history_query({"keywords": ["zcor_memory_write"]})["total"])
        except ToolError:
            time.sleep(0.5)


def mib(n: float) -> str:
    return f"{n / (1 << 20):,.1f} MiB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=20_000)
    ap.add_argument("--history", type=int, default=200_000)
    ap.add_argument("--oplog", type=int, default=400_000)
    ap.add_argument("--backups", type=int, default=20)
    ap.add_argument("--victim", type=int, default=50, help="memories the person's messages wrote")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="zcer"))
    memdir, sock = root / "mem", root / "zcord.sock"
    memdir.mkdir()
    try:
        t = time.perf_counter()
        build_memory(memdir, args.nodes, args.history, args.oplog)
        build_s = time.perf_counter() - t
        print(f"built in {build_s:.0f} s", flush=True)
        proc, _ = start_daemon(memdir, sock, root / "notify")
        try:
            origin = {"session": "qq:group:1", "senders": ["qq:other", VICTIM]}
            with Client(sock, timeout=600) as bot, Client(sock, role="operator", timeout=3600) as op:
                ids = [bot.call_tool("zcor_memory_write", {"title": f"victim note {i}",
                                                           "content": f"{SECRET} {i} 受害者的秘密"},
                                     origin=origin)["id"] for i in range(args.victim)]
                for mid in ids[: args.victim // 2]:
                    bot.call_tool("zcor_memory_write", {"id": mid, "title": "victim note", "content": SECRET + " again"},
                                  origin=origin)
                bot.call_tool("zcor_relationship_write", {"personId": VICTIM, "name": "Victim", "relationship": "member",
                                                          "affinity": 1, "reason": SECRET + " reason",
                                                          "memoryNodeId": ids[0]}, origin=origin)
                op.trust_set(VICTIM, "trusted")
                for _ in range(args.backups):
                    op.call_tool("zcor_memory_backup", {})
                op.request("zcor/snapshot")
                print("person and backups written", flush=True)
                history_ready(op)  # zcord builds its history index in the background after start
                before = du(memdir)
                files = sum(len(f) for _r, _d, f in os.walk(memdir))
                t = time.perf_counter()
                preview = op.erase(sender=VICTIM, preview=True)
                preview_s = time.perf_counter() - t
                peak = [before]
                stop = threading.Event()

                def sample() -> None:
                    while not stop.is_set():
                        peak[0] = max(peak[0], du(memdir))
                        stop.wait(0.02)

                sampler = threading.Thread(target=sample, daemon=True)
                sampler.start()
                t = time.perf_counter()
                done = op.erase(sender=VICTIM)
                erase_s = time.perf_counter() - t
                stop.set()
                sampler.join()
                after = du(memdir)
                t = time.perf_counter()
                total = history_ready(op)  # the index is rebuilt from the rewritten log, in the background
                reindex_s = time.perf_counter() - t
        finally:
            proc.terminate()
            proc.wait(60)
        leaks = [str(p.relative_to(memdir)) for p in memdir.rglob("*")
                 if p.is_file() and SECRET.encode() in p.read_bytes()]
        print(f"Memory: {args.nodes:,} memories, {args.history:,} changes, {args.oplog:,} log records, "
              f"{args.backups} backups, {files} files, {mib(before)} (built in {build_s:.0f} s)")
        print(table([
            ["preview", f"{preview_s:.2f} s", f"{preview['counts']['memories']} memories, "
                                              f"{sum(v for v in preview['places'].values() if v > 0)} records/files"],
            ["erase", f"{erase_s:.2f} s", f"{done['records']} log records, {done['backups']} backups, "
                                          f"{done['historySegments']} segments rewritten"],
            ["extra disk while running", mib(peak[0] - before), f"peak {mib(peak[0])}; after {mib(after)}"],
            ["history queries answer again", f"{reindex_s:.2f} s later", f"index rebuilt ({total:,} records matched)"],
            ["steps of the preview", "", ", ".join(f"{k} {v:.1f} s" for k, v in preview["seconds"].items())],
            ["steps of the erasure", "", ", ".join(f"{k} {v:.1f} s" for k, v in done["seconds"].items())],
            ["byte scan for the secret", "none" if not leaks else ", ".join(leaks), ""],
        ], ["step", "time / size", "what"]))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
