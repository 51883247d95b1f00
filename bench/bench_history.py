"""History search at scale (issue 13 item 4): a large operation log, its on-disk index, and
`zcor/history/query` over a real zcord's socket, first query after a restart and warm.

The log is written directly as JSON lines: ~90 % reads and queries by the bot with small
parameters, ~10 % writes carrying before/after nodes with Chinese and English text, one
record every 1–60 s. The index (operations.index.sqlite) is built once in process (build
time and size on disk reported); then for every query kind zcord is started afresh
(`restarts` times) and the kind's first query is timed, followed by warm queries of the
same kind with varied terms. RSS is the daemon's after READY=1 and after the queries.
Prints a table; never asserts.

Usage: python bench/bench_history.py [--records 1000000] [--restarts 3] [--warm 30] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_daemon import rss_kib, start_daemon  # noqa: E402
from bench_memory import wait_quiet  # noqa: E402
from common import FILLER, SURNAMES, THINGS, VERBS, pct, table  # noqa: E402

from zcord.client import Client  # noqa: E402
from zcord.core.oplog import OpLog  # noqa: E402

TZ = timezone(timedelta(hours=8))
START = datetime(2025, 1, 1, 8, 0, tzinfo=TZ)
ENGLISH = ["went hiking with friends", "prefers green tea", "deadline on Friday", "likes jazz concerts",
           "moved to Shanghai", "learning Japanese", "birthday party next week", "plays basketball"]
READ_TOOLS = ["zcor_memory_read", "zcor_memory_query", "zcor_memory_children", "zcor_memory_trace",
              "zcor_relationship_read", "zcor_memory_history"]


def _node(rng: random.Random, nid: str, at: str) -> dict:
    name = rng.choice(SURNAMES) + rng.choice("明红伟芳军丽强")
    title = f"{name}{rng.choice(VERBS)}{rng.choice(THINGS)}"
    i = rng.randrange(len(FILLER) - 30)
    content = (f"{name}说{rng.choice(THINGS)}很好，{FILLER[i:i + rng.randint(10, 30)]}。"
               f"{rng.choice(ENGLISH)}; {rng.choice(ENGLISH)}. 小王和{name}周末去爬山。" * rng.randint(1, 3))
    return {"id": nid, "title": title, "content": content, "keywords": [rng.choice(THINGS), name],
            "parentId": None, "sourceMessage": f"[qq:{rng.randint(1000, 9999)}] {title}",
            "createdAt": at, "updatedAt": at, "supersededBy": None, "supersedeReason": None}


def generate(path: Path, n: int, seed: int = 13) -> tuple[float, float]:
    """Write n records; returns the first and last record's time (epoch seconds)."""
    rng = random.Random(seed)
    t = START
    change_id = 0
    nodes = 0
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    with open(path, "wb") as f:
        buf = []
        for seq in range(1, n + 1):
            t += timedelta(seconds=rng.randint(1, 60))
            at = t.isoformat(timespec="microseconds")
            rec: dict = {"seq": seq, "at": at}
            if rng.random() < 0.10:
                change_id += 1
                if nodes and rng.random() < 0.5:
                    nid = f"m{rng.randint(1, nodes)}"
                    before, after = _node(rng, nid, at), _node(rng, nid, at)
                    kind = "node.update"
                else:
                    nodes += 1
                    nid = f"m{nodes}"
                    before, after = None, _node(rng, nid, at)
                    kind = "node.create"
                actor = rng.choice(["model"] * 4 + ["operator"])
                rec.update(actor=actor, tool="zcor_memory_write",
                           params={"title": after["title"], "content": after["content"], "id": nid},
                           status="ok", error=None,
                           changes=[{"changeId": change_id, "at": at, "actor": actor, "tool": "zcor_memory_write",
                                     "opSeq": seq, "kind": kind, "target": nid, "before": before,
                                     "after": after}], result=None, recovered=False)
            else:
                tool = rng.choice(READ_TOOLS)
                if tool == "zcor_memory_query":
                    params = {"keywords": [rng.choice(THINGS)], "limit": 10}
                elif tool == "zcor_relationship_read":
                    params = {"personId": f"qq:{rng.randint(1000, 9999)}"}
                elif tool == "zcor_memory_history":
                    params = {"keywords": [rng.choice(THINGS)]}
                else:
                    params = {"id": f"m{rng.randint(1, max(1, nodes))}"}
                ok = rng.random() < 0.97
                rec.update(actor="model", tool=tool, params=params, status="ok" if ok else "error",
                           error=None if ok else {"code": "not_found", "message": "No memory with id", "field": "id"},
                           changes=[], result=None, recovered=False)
            buf.append(dumps(rec))
            if len(buf) >= 10000:
                f.write(("\n".join(buf) + "\n").encode())
                buf = []
        if buf:
            f.write(("\n".join(buf) + "\n").encode())
    return START.timestamp(), t.timestamp()


def kinds(first: float, last: float, rng: random.Random) -> dict[str, callable]:
    """Query kind → a function giving one query's params (varied for the warm runs)."""
    def day() -> dict:
        d = datetime.fromtimestamp(rng.uniform(first, last - 86400), TZ)
        return {"from": d.isoformat(), "to": (d + timedelta(days=1)).isoformat()}

    return {
        "3+ chars, Latin (hiking…)": lambda: {"keywords": [rng.choice(["hiking", "jazz", "green tea", "japanese"])]},
        "3+ chars, CJK (去爬山…)": lambda: {"keywords": [rng.choice(["去爬山", "说奶茶", "讨厌加班", "喜欢咖啡"])]},
        "2-char CJK (小王…)": lambda: {"keywords": [rng.choice(["小王", "爬山", "奶茶", "电影"])]},
        "1-char CJK (猫…)": lambda: {"keywords": [rng.choice(["猫", "茶", "山", "咖"])]},
        "2 keywords (小王 + hiking)": lambda: {"keywords": ["小王", rng.choice(["hiking", "jazz", "tea"])]},
        "time range (one day)": day,
        "changes only": lambda: {"changesOnly": True, "offset": rng.choice([0, 20, 100])},
        "actor model + tool write": lambda: {"actor": "model", "tool": "zcor_memory_write"},
        "target id (m…)": lambda: {"target": f"m{rng.randint(1, 5000)}"},
        "changes only + 2-char + day": lambda: {"changesOnly": True, "keywords": ["小王"], **day()},
        "no filter (newest page)": lambda: {},
        "common term (zcor_memory_read, ~15 %)": lambda: {"keywords": ["zcor_memory_read"]},
    }


def index_size(memdir: Path) -> int:
    return sum(p.stat().st_size for p in memdir.glob("operations.index.sqlite*"))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--restarts", type=int, default=3, help="fresh daemons per query kind (first-query samples)")
    ap.add_argument("--warm", type=int, default=30, help="warm queries per kind and restart")
    ap.add_argument("--keep", type=Path, help="reuse/keep the Memory directory here (skips generating)")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="zcor-bench-history-"))
    memdir = args.keep or root / "memory"
    memdir.mkdir(parents=True, exist_ok=True)
    log_path = memdir / "operations.jsonl"
    rng = random.Random(5)
    try:
        t = time.perf_counter()
        if not log_path.exists():
            first, last = generate(log_path, args.records)
            gen_s = time.perf_counter() - t
        else:
            lines = log_path.read_bytes().splitlines()
            first, last = (datetime.fromisoformat(json.loads(lines[i])["at"]).timestamp() for i in (0, -1))
            gen_s = 0.0
        records = sum(1 for _ in open(log_path, "rb"))
        t = time.perf_counter()
        log = OpLog(log_path)
        log.open()
        log.warm()
        log.close()
        build_s = time.perf_counter() - t
        if not (memdir / "memory-state.json").exists():
            from zcord.service import Service

            with Service(memdir) as svc:  # replays the log's changes once and snapshots them, as a running
                svc.snapshot()            # zcord has long done (each start would replay them all otherwise)
        opens = []
        for _ in range(5):
            t = time.perf_counter()
            log = OpLog(log_path)
            log.open()
            opens.append(time.perf_counter() - t)
            log.close()

        rows = []
        rss_ready, rss_after = [], []
        ready_s = []
        for name, make in kinds(first, last, rng).items():
            firsts, warms, totals = [], [], []
            for r in range(args.restarts):
                sock = root / f"s{r}.sock"
                notify = root / f"n{r}.sock"
                proc, ready = start_daemon(memdir, sock, notify)
                try:
                    ready_s.append(ready)
                    rss_ready.append(rss_kib(proc.pid)[0])
                    with Client(sock, role="operator", timeout=120) as op:
                        params = make()
                        t = time.perf_counter()
                        res = op.history_query(params)
                        firsts.append(time.perf_counter() - t)
                        totals.append(res["total"])
                        wait_quiet(proc.pid)  # warm: after the daemon's warm-up (indexes, jieba) is done
                        for _ in range(args.warm):
                            params = make()
                            t = time.perf_counter()
                            op.history_query(params)
                            warms.append(time.perf_counter() - t)
                    rss_after.append(rss_kib(proc.pid)[0])
                finally:
                    proc.terminate()
                    proc.wait(60)
                    for p in (sock, notify):
                        p.unlink(missing_ok=True)
            rows.append([name, f"{sorted(totals)[len(totals) // 2]:,}",
                         f"{pct(firsts, 50) * 1000:.1f} / {pct(firsts, 99) * 1000:.1f}",
                         f"{pct(warms, 50) * 1000:.1f} / {pct(warms, 99) * 1000:.1f}"])
            print(f"{name} done", file=sys.stderr)
        print(f"operation log: {records:,} records, {log_path.stat().st_size / 2**20:,.0f} MiB "
              f"(generated in {gen_s:.0f} s); index built in {build_s:.1f} s, "
              f"{index_size(memdir) / 2**20:,.0f} MiB on disk")
        print(f"OpLog.open p50 {pct(opens, 50) * 1000:.1f} ms (max {max(opens) * 1000:.1f}); daemon ready p50 "
              f"{pct(ready_s, 50):.2f} s; daemon RSS after READY p50 {pct(rss_ready, 50) / 1024:.0f} MiB, "
              f"after the queries p50 {pct(rss_after, 50) / 1024:.0f} MiB (max {max(rss_after) / 1024:.0f})")
        print(f"zcor/history/query over the socket, limit 20; ms as p50 / p99; first = the first query of a "
              f"freshly started zcord ({args.restarts} starts per kind, while its warm-up runs), warm = {args.warm} "
              f"more per start once the warm-up is over")
        print(table(rows, ["query kind", "total (median)", "first after restart", "warm"]))
        print(f"total run time: {time.perf_counter() - started:.0f} s")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
