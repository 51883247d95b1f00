"""In-process benchmark of the Foundation (issue 2): load, read, children, query, write,
history at 1,000 / 10,000 / 50,000 nodes. Prints a table; never asserts times.

Usage: python bench/bench_store.py [--sizes 1000,10000,50000] [--history 50000] [--samples 300]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import THINGS, VERBS, build_memory, content, ms, table, timed, title  # noqa: E402

from zcord.core.text import tokenizer  # noqa: E402
from zcord.service import Service  # noqa: E402


def bench(nodes: int, history: int, oplog: int, samples: int) -> dict[str, str]:
    rng = random.Random(nodes)
    with tempfile.TemporaryDirectory(dir=os.environ.get("ZCOR_BENCH_DIR")) as tmp:
        memdir = Path(tmp) / "memory"
        # built in a child process, so this process's peak RSS is the Service's alone
        subprocess.run([sys.executable, __file__, "--build", f"{memdir}:{nodes}:{history}:{oplog}"], check=True)
        size = (memdir / "memory-state.json").stat().st_size
        log_size = (memdir / "operations.jsonl").stat().st_size
        t = time.perf_counter()
        svc = Service(memdir).open()
        load = time.perf_counter() - t
        ids = list(svc.state.nodes)
        parents = [i for i in ids if svc.state.child_ids(i)]
        call = svc.call
        read = timed(lambda: call("zcor_memory_read", {"id": rng.choice(ids)}), samples)
        children = timed(lambda: call("zcor_memory_children", {"parentId": rng.choice(parents)}), samples)
        query = timed(lambda: call("zcor_memory_query", {"keywords": [rng.choice(THINGS)]}), samples // 3)
        query2 = timed(lambda: call("zcor_memory_query", {
            "keywords": [rng.choice(VERBS), rng.choice(THINGS)],
            "from": "2026-01-01T00:00:00+08:00", "to": "2026-12-31T00:00:00+08:00"}), samples // 3)
        write = timed(lambda: call("zcor_memory_write", {"id": rng.choice(ids), "title": title(rng, 0),
                                                         "content": content(rng)}), samples // 3)
        create = timed(lambda: call("zcor_memory_write", {"title": title(rng, 0), "content": content(rng)}),
                       samples // 3)
        t = time.perf_counter()
        call("zcor_memory_history", {"keywords": ["奶茶"]})
        first_hist = time.perf_counter() - t
        hist = timed(lambda: call("zcor_memory_history", {"keywords": [rng.choice(THINGS)]}), samples // 10)
        svc.close()
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "nodes": f"{nodes:,}", "changes": f"{history:,}", "log lines": f"{oplog:,}",
        "state MiB": f"{size / 2**20:.1f}", "log MiB": f"{log_size / 2**20:.1f}",
        "load s": f"{load:.3f}", "read": ms(read), "children": ms(children), "query 1kw": ms(query),
        "query 2kw+time": ms(query2), "update": ms(write), "create": ms(create),
        "history (1st)": f"{first_hist * 1000:.0f}", "history": ms(hist),
        "peak RSS MiB": f"{rss:.0f}",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="1000,10000,50000")
    ap.add_argument("--history", type=int, default=50_000, help="operation-log lines per Memory")
    ap.add_argument("--changes", default="", help="change records in the state per size (default: "
                                                  "one create per node plus one update per node)")
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: one size in a child process
    ap.add_argument("--build", help=argparse.SUPPRESS)  # internal: build a Memory in a child process
    args = ap.parse_args()
    if args.build:
        where, *numbers = args.build.rsplit(":", 3)
        build_memory(Path(where), *(int(x) for x in numbers))
        return
    tokenizer()  # jieba loads once per process; not part of any figure
    if args.one:
        n, c = (int(x) for x in args.one.split(":"))
        print(json.dumps(bench(n, c, max(args.history, c), args.samples)))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    changes = [int(c) for c in args.changes.split(",")] if args.changes else [2 * n for n in sizes]
    rows = []
    for n, c in zip(sizes, changes):
        # each size in its own process, so its peak RSS is its own
        out = subprocess.run([sys.executable, __file__, "--one", f"{n}:{c}", "--history", str(args.history),
                              "--samples", str(args.samples)], capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"done {n}", file=sys.stderr)
    keys = list(rows[0])
    print(f"zcor store benchmark, in-process; {os.cpu_count()} CPUs; times in ms as 'p50 p99' unless "
          f"named; load in seconds; RSS is the Service process's (jieba, state, indexes, the history index)")
    print(table([[k, *[r[k] for r in rows]] for k in keys], ["metric", *[r["nodes"] for r in rows]]))


if __name__ == "__main__":
    main()
