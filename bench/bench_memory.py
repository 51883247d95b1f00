"""Load time and memory of large Memories (issue 13): 1,000 / 10,000 / 100,000 memories.

For each size (a Memory built by bench/common.build_memory: titles of ~12 CJK characters,
contents of 150, two keywords, one change record and one operation-log line per memory;
cached under --cache, built once):

- in process: the whole load from memory-state.cache (from 5,000 memories), and the load
  from the JSON split into the fast loader (JSON parse, checks, node objects), the
  state (tree, ranks, invariants), the retrieval indexes and the query text blob (process
  CPU seconds and wall seconds);
- a real daemon: spawn → READY=1 (over NOTIFY_SOCKET) and the CPU time it used until then
  (what a busy machine does not inflate), its RSS right after READY, after the
  background warm-up (retrieval indexes, jieba, log index: waited for until its CPU time
  stops growing), after a query and a recall; the first recall's latency right after READY;
  and the RSS of a process that does the same without the operation log's in-RAM search
  index (which issue 13 moves to SQLite);
- with --trace (in process, slow): what each structure costs, measured as the bytes of the
  objects reachable from it that no structure listed before it holds (so a string shared by
  a node and an index counts once, with the node), and tracemalloc's total per stage.

Prints tables; never asserts.

Usage: python bench/bench_memory.py [--sizes 1000,10000,100000] [--cache DIR] [--trace]
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_daemon import cpu_seconds, rss_kib, start_daemon  # noqa: E402
from common import build_memory, table  # noqa: E402

from zcord.client import Client  # noqa: E402

CHAT = "昨天和小明去吃火锅了，他说周末想跑步，还提到他的猫咪最近怎么样"


def memory_dir(cache: Path, n: int) -> Path:
    d = cache / f"mem{n}"
    if not (d / "memory-state.json").exists():
        shutil.rmtree(d, ignore_errors=True)
        t = time.perf_counter()
        build_memory(d, n, n, n)
        from zcord.service import Service

        with Service(d) as svc:  # a snapshot as zcord writes it (with memory-state.cache from 5,000 memories)
            svc.snapshot()
        print(f"  built {n:,} memories in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return d


def load_split(memdir: Path) -> dict[str, tuple[float, float]]:
    """(CPU s, wall s) of each load phase, in this process."""
    from zcord.core.fastload import fast_state
    from zcord.core.invariants import check_invariants
    from zcord.core.layout import STATE_FILE
    from zcord.core.state import MemoryState

    raw = (memdir / STATE_FILE).read_bytes()
    out = {}

    def timed(name, fn):
        c, w = time.process_time(), time.perf_counter()
        r = fn()
        out[name] = (time.process_time() - c, time.perf_counter() - w)
        return r

    from zcord.core.store import Store

    store = Store(memdir)  # Store.load, as the daemon loads (the collector paused meanwhile)
    cached = timed("whole load from memory-state.cache", store.load)
    if not store.cache_used:  # fewer than 5,000 memories: no cache is written
        out["whole load from memory-state.cache"] = None
    del cached
    fast = timed("parse + check + nodes", lambda: fast_state(raw))
    assert fast is not None, "the fast loader refused the bench's own file"
    nodes, head, rels, history, tree = fast
    del fast
    st = timed("state (tree, invariants)", lambda: MemoryState(
        nodes, head["important"], rels, history, head["nextId"], head["historySegments"],
        tree=(tree.children, tree.replaced) if tree.children is not None else None))
    timed("state (tree, invariants)+", lambda: check_invariants(st, STATE_FILE, nodes_checked=tree.checked))
    a, b = out.pop("state (tree, invariants)"), out.pop("state (tree, invariants)+")
    out["state (tree, invariants)"] = (a[0] + b[0], a[1] + b[1])
    timed("indexes", st.ensure_index)
    timed("text blob", lambda: st.text_matches("奶茶"))
    return out


def wait_quiet(pid: int, quiet: float = 1.0, limit: float = 120.0) -> float:
    """Seconds until the process's CPU time stops growing for `quiet` seconds."""
    t0 = time.perf_counter()
    last, since = cpu_seconds(pid), time.perf_counter()
    while time.perf_counter() - t0 < limit:
        time.sleep(0.1)
        now = cpu_seconds(pid)
        if now != last:
            last, since = now, time.perf_counter()
        elif time.perf_counter() - since >= quiet:
            return since - t0
    return time.perf_counter() - t0


def daemon_figures(memdir: Path, root: Path) -> dict[str, str]:
    sock, notify = root / "run" / "zcord.sock", root / "notify"
    for p in (notify,):
        p.unlink(missing_ok=True)
    out: dict[str, str] = {}
    proc, ready = start_daemon(memdir, sock, notify)
    try:
        out["ready s"] = f"{ready:.2f}"
        out["CPU at ready s"] = f"{cpu_seconds(proc.pid):.2f}"
        out["RSS ready"] = f"{rss_kib(proc.pid)[0] / 1024:.0f}"
        with Client(sock, timeout=120) as c:
            t = time.perf_counter()
            c.recall("early", CHAT)
            out["1st recall ms"] = f"{(time.perf_counter() - t) * 1000:.0f}"
        warm = wait_quiet(proc.pid, limit=900)  # the warm-up ends with the twin index (issue 38)
        out["warm s"] = f"{warm:.1f}"
        out["RSS warm"] = f"{rss_kib(proc.pid)[0] / 1024:.0f}"
        with Client(sock, timeout=120) as c:
            t = time.perf_counter()
            c.call_tool("zcor_memory_query", {"keywords": ["奶茶"], "limit": 10})
            out["1st query ms"] = f"{(time.perf_counter() - t) * 1000:.0f}"
            t = time.perf_counter()
            c.call_tool("zcor_memory_query", {"keywords": ["奶茶"], "limit": 10})
            out["query ms"] = f"{(time.perf_counter() - t) * 1000:.1f}"
            c.recall("bench", CHAT)
            t = time.perf_counter()
            c.recall("bench", CHAT + "。")
            out["recall ms"] = f"{(time.perf_counter() - t) * 1000:.1f}"
        rss, hwm = rss_kib(proc.pid)
        out["RSS used"] = f"{rss / 1024:.0f}"
        out["peak"] = f"{hwm / 1024:.0f}"
    finally:
        proc.terminate()
        proc.wait(60)
    return out


def rss_without_log_index(memdir: Path) -> str:
    """RSS (MiB) of a fresh process that loads the Memory, builds the indexes and the query
    text, loads jieba and teaches it, then runs a query and a recall, all as the daemon's
    warm-up would, except the operation log's search index (kept in RAM today; issue 13
    moves it to SQLite)."""
    out = subprocess.run([sys.executable, __file__, "--rss-child", str(memdir)], capture_output=True, text=True,
                         check=True)
    return out.stdout.strip()


def _rss_child(memdir: Path) -> None:
    from zcord.service import Service

    svc = Service(memdir).open()
    svc.oplog.warm = lambda: None  # type: ignore[method-assign]
    svc.warm()
    svc.call("zcor_memory_query", {"keywords": ["奶茶"], "limit": 10})
    svc.recall("bench", [{"text": CHAT, "origin": "external"}])
    print(f"{rss_kib(os.getpid())[0] / 1024:.0f}")


def deep_size(obj, seen: set[int]) -> int:
    """Bytes of obj and everything reachable from it (containers, strings, numbers, times)
    not already in seen."""
    total = 0
    stack = [obj]
    while stack:
        o = stack.pop()
        if id(o) in seen or o is None or isinstance(o, (bool, type)):
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, (list, tuple, set, frozenset)):
            stack.extend(o)
        elif hasattr(o, "__slots__") and not isinstance(o, (str, bytes)):
            for k in getattr(type(o), "__slots__", ()):
                v = getattr(o, k, None)
                if v is not None:
                    stack.append(v)
    return total


def structure_costs(memdir: Path) -> list[list[str]]:
    import tracemalloc

    from zcord.core.text import tokenizer
    from zcord.service import Service

    tokenizer()  # jieba's own memory is not the Memory's
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    svc = Service(memdir).open()
    loaded = tracemalloc.get_traced_memory()[0]
    svc.state.ensure_index()
    indexed = tracemalloc.get_traced_memory()[0]
    svc.state.text_matches("奶茶")
    blob = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    st = svc.state
    seen: set[int] = set()
    rows = []
    parts = [
        ("nodes (Node tuples, texts, keywords, times)", st.nodes),
        ("rank", st.rank),
        ("children", st.children),
        ("replaced + links", (st.replaced, st.links)),
        ("history (inline changes)", st.history),
        ("index (NodeIndex: updated, title length, normalized title, words)", st.index),
        ("title_grams", st.title_grams),
        ("title_words", st.title_words),
        ("keyword_ids", st.keyword_ids),
        ("title_keys", st.title_keys),
        ("mixed_keywords + pending_words", (st.mixed_keywords, st.pending_words)),
        ("query text blob", st._text),
    ]
    for name, obj in parts:
        rows.append([name, f"{deep_size(obj, seen) / 2**20:.1f}"])
    rows.append(["tracemalloc: Service.open (load)", f"{(loaded - base) / 2**20:.1f}"])
    rows.append(["tracemalloc: + retrieval indexes", f"{(indexed - loaded) / 2**20:.1f}"])
    rows.append(["tracemalloc: + query text blob", f"{(blob - indexed) / 2**20:.1f}"])
    svc.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--cache", type=Path, help="keep the built Memories here (default: a temporary directory)")
    ap.add_argument("--trace", action="store_true", help="also measure what each structure costs (slow)")
    ap.add_argument("--rss-child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rss_child:
        return _rss_child(args.rss_child)
    sizes = [int(s) for s in args.sizes.split(",")]
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="zcbm"))
    cache = args.cache or root / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    try:
        split_rows, daemon_rows, cost_tables = [], [], {}
        for n in sizes:
            memdir = memory_dir(cache, n)
            split = load_split(memdir)
            gc.collect()
            split_rows.append([f"{n:,}", *("—" if v is None else f"{v[0]:.3f} / {v[1]:.3f}" for v in split.values())])
            d = daemon_figures(memdir, root)
            d["RSS no log index"] = rss_without_log_index(memdir)
            daemon_rows.append([f"{n:,}", *d.values()])
            if args.trace:
                cost_tables[n] = structure_costs(memdir)
        print("Load split, in process (CPU s / wall s):")
        print(table(split_rows, ["memories", *split.keys()]))
        print()
        print("Daemon (RSS in MiB: right after READY=1, after the background warm-up, after a query "
              "and a recall; peak; and a process that does all that without the log's in-RAM search index):")
        print(table(daemon_rows, ["memories", *d.keys()]))
        for n, rows in cost_tables.items():
            print()
            print(f"What each structure costs at {n:,} memories (MiB, jieba excluded):")
            print(table(rows, ["structure", "MiB"]))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
