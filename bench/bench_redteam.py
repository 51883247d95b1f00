"""The second red-team round's attacks (issue 23), measured against a real daemon: run with
PYTHONPATH pointing at the code to measure (e.g. before and after a change) and compare the
tables. Prints what each attack cost: RSS growth, another client's longest wait, bytes added
to operations.jsonl."""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fault.wire import Wire  # noqa: E402
from tests.integration.conftest import Daemon  # noqa: E402

CHAT = "我们今天在公园里散步然后去吃了火锅，大家都很开心。"


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(x.split()[1]) for x in f if x.startswith("VmRSS:"))


def main() -> None:
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="zrt"))
    d = Daemon(root).start(env={"WATCHDOG_USEC": "30000000"})
    rows = []
    try:
        bot = Wire(d.sock, "bot", timeout=600)
        bot.call("tools/call", {"name": "zcor_memory_write", "arguments": {"title": "火锅聚会", "content": "x"}})
        # item 4: 20 recalls under new ~1 MiB session names
        before = rss_kib(d.proc.pid)
        for i in range(20):
            bot.call("zcor/recall", {"session": f"{i}" + "x" * 1_000_000, "events": [{"text": "火锅", "origin": "external"}]})
        rows.append(("20 recalls, 1 MB session names: RSS growth", f"{(rss_kib(d.proc.pid) - before) / 1024:.1f} MiB"))
        # item 5: 16 pipelined ~1 MiB CJK recalls; another client's reads meanwhile
        other = Wire(d.sock, "bot", timeout=600)
        big = CHAT * (330_000 // len(CHAT))
        line = lambda n: (json.dumps({"jsonrpc": "2.0", "id": n, "method": "zcor/recall", "params": {  # noqa: E731
            "session": "s", "events": [{"text": big, "origin": "external"}]}}, ensure_ascii=False) + "\n").encode()
        t0 = time.monotonic()
        bot.sock.sendall(b"".join(line(1000 + i) for i in range(16)))
        waits = []
        done = threading.Event()

        def finish() -> None:
            for i in range(16):
                bot.reply(1000 + i, timeout=600)
            done.set()

        th = threading.Thread(target=finish)
        th.start()
        while not done.is_set():
            s = time.monotonic()
            other.call("tools/call", {"name": "zcor_memory_read", "arguments": {"id": "m1"}}, timeout=600)
            waits.append(time.monotonic() - s)
        th.join()
        rows.append(("16 pipelined 1 MB CJK recalls: total", f"{time.monotonic() - t0:.1f} s"))
        rows.append(("  another client's longest read meanwhile", f"{max(waits) * 1000:.0f} ms ({len(waits)} reads)"))
        # item 7: 50 refused writes with 900 kB titles
        log = d.memdir / "operations.jsonl"
        size = log.stat().st_size
        for _ in range(50):
            bot.call("tools/call", {"name": "zcor_memory_write", "arguments": {"title": "标" * 300_000, "content": "x"}})
        rows.append(("50 refused writes, 900 kB titles: log growth", f"{(log.stat().st_size - size) / 1024:.0f} KiB"))
        size = log.stat().st_size
        kw = [f"{k:03d}" + "字" * 97 for k in range(50)]
        t0 = time.monotonic()
        n = 0
        while time.monotonic() - t0 < 5:
            bot.call("tools/call", {"name": "zcor_memory_query", "arguments": {"keywords": kw}})
            n += 1
        rows.append(("bot queries, 50 x 100-char keywords: log growth",
                     f"{(log.stat().st_size - size) / 1024 / (time.monotonic() - t0):.0f} KiB/s ({n} calls)"))
    finally:
        d.stop()
    width = max(len(r[0]) for r in rows)
    print(f"| {'attack'.ljust(width)} | result |")
    print(f"| {'-' * width} | --- |")
    for a, b in rows:
        print(f"| {a.ljust(width)} | {b} |")


if __name__ == "__main__":
    main()
