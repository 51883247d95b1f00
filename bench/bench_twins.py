"""The twin check of zcor_memory_write (issue 38): its quality and its cost.

quality: bench/twins_eval/pairs.json (hand-written pairs: rewordings, the same fact in the
other script, the same fact in the other language where the synonym table links it, and
partial overlaps that are not the same fact). One in-process Memory holds the recall eval
sets' 637 memories and every pair's first memory; each pair's second memory is checked
against it (not written). A pair of the same fact counts as found when the check names its
first memory; a partial pair counts as a false alarm when it does. Then, for each recall
eval Memory, its memories are written through zcor_memory_write in file order (as the bot
would) and the creates that carry `similar` are counted: how often the note fires on
distinct memories.

in process (--in-process): at --size memories (bench/common.build_memory), the twin index's
background build (time, memory), zcor_memory_write (create) with and without the check in
alternating rounds, the check alone, and a consolidation list.

speed (--speed): zcor_memory_write (create) p50 / p99 over a real zcord's socket with the
code at --before (a PYTHONPATH; the check absent) and with this code, after each daemon's
warm-up, at --daemon-size memories.

`--before off` compares this code with ZCOR_TWIN_CHECK=off and with the check instead.

Usage: python bench/bench_twins.py [--quality] [--in-process] [--speed --before /old/tree|off]
       [--size 100000] [--daemon-size 10000] [--samples 300] [--threshold 0.4]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import build_memory, content, lat, pct, table, timed, title  # noqa: E402

from zcord.service import Service  # noqa: E402

HERE = Path(__file__).parent
EVAL = HERE / "recall_eval"
SETS = ["en_companion", "en_discord", "zh_companion", "zh_hiking"]


def _memory_with_synonyms(extra: list[list[str]]) -> Path:
    d = Path(tempfile.mkdtemp(dir="/tmp", prefix="zctw"))
    groups = json.loads((HERE.parent / "synonyms.json").read_text())
    groups["groups"] = groups["groups"] + extra
    (d / "synonyms.json").write_text(json.dumps(groups, ensure_ascii=False))
    return d


def quality(threshold: float) -> None:
    data = json.loads((HERE / "twins_eval" / "pairs.json").read_text())
    d = _memory_with_synonyms(data["synonyms"])
    try:
        with Service(d) as svc:
            for name in SETS:
                for n in json.loads((EVAL / f"{name}.memory.json").read_text())["nodes"]:
                    svc.call("zcor_memory_write", {"title": n["title"], "content": n["content"]}, actor="model")
            first: dict[tuple[str, str], str] = {}
            for p in data["pairs"]:
                key = (p["a"]["title"], p["a"]["content"])
                if key not in first:
                    first[key] = svc.call("zcor_memory_write", dict(p["a"]), actor="model")["id"]
            scores: dict[str, list[float]] = {k: [] for k in ("reword", "script", "language", "partial")}
            for p in data["pairs"]:
                a_id = first[(p["a"]["title"], p["a"]["content"])]
                with svc.lock:
                    feats = svc.twins.folding.features(p["b"]["title"], p["b"]["content"])
                    found = {t.id: t.score for t in svc.twins.similar(feats, limit=50, threshold=0.0)}
                scores[p["kind"]].append(found.get(a_id, 0.0))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    distinct: list[float] = []  # per recall eval memory written, its best twin score (0: none)
    fired = []
    for name in SETS:
        d = _memory_with_synonyms([])
        try:
            with Service(d) as svc:
                nodes = json.loads((EVAL / f"{name}.memory.json").read_text())["nodes"]
                ids: dict[str, str] = {}
                hits = []
                for n in nodes:
                    args = {"title": n["title"], "content": n["content"]}
                    if n.get("parent") in ids:
                        args["parentId"] = ids[n["parent"]]
                    if n.get("keywords"):
                        args["keywords"] = n["keywords"]
                    with svc.lock:
                        near = svc.twins.similar(svc.twins.folding.features(n["title"], n["content"]),
                                                 limit=1, threshold=0.0)
                    distinct.append(near[0].score if near else 0.0)
                    r = svc.call("zcor_memory_write", args, actor="model")
                    ids[n["id"]] = r["id"]
                    if r.get("similar"):
                        hits.append((n["title"], [s["title"] for s in r["similar"]]))
                fired.append([name, str(len(nodes)), str(len(hits)), f"{len(hits) / len(nodes):.1%}"])
                for t, s in hits:
                    print(f"  {name}: {t!r} ~ {s!r}")
        finally:
            shutil.rmtree(d, ignore_errors=True)
    print(f"twin check over bench/twins_eval/pairs.json; the chosen threshold is {threshold}")
    rows = []
    for t in (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6):
        got = {k: sum(s >= t for s in v) for k, v in scores.items()}
        rw, false = got["reword"], got["partial"]
        rows.append([f"{t:.2f}" + (" *" if abs(t - threshold) < 1e-9 else ""),
                     f"{rw}/{len(scores['reword'])}", f"{got['script']}/{len(scores['script'])}",
                     f"{got['language']}/{len(scores['language'])}", f"{false}/{len(scores['partial'])}",
                     f"{rw / max(1, rw + false):.2f}", f"{rw / len(scores['reword']):.2f}",
                     f"{sum(s >= t for s in distinct) / len(distinct):.2%}"])
    print(table(rows, ["threshold", "rewordings", "other script", "other language", "partial (false)",
                       "precision", "recall", "distinct flagged"]))
    print(table(fired, ["recall eval Memory", "memories written", "creates with similar", "share"]))


def _daemon_writes(memdir: Path, root: Path, pythonpath: str, samples: int, check: bool = True) -> list[float]:
    from bench_daemon import start_daemon
    from bench_memory import wait_quiet

    from zcord.client import Client

    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "ZCOR_TWIN_CHECK")}
    os.environ["PYTHONPATH"] = pythonpath
    os.environ["ZCOR_TWIN_CHECK"] = "on" if check else "off"
    try:
        proc, _ready = start_daemon(memdir, root / "s.sock", root / "notify")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    (root / "notify").unlink(missing_ok=True)
    try:
        rng = random.Random(5)
        with Client(root / "s.sock", timeout=300) as c:
            c.recall("bench", "小明 奶茶")
            wait_quiet(proc.pid, limit=600)
            for _ in range(20):
                c.call_tool("zcor_memory_write", {"title": title(rng, 0), "content": content(rng)})
            return timed(lambda: c.call_tool("zcor_memory_write", {"title": title(rng, 0), "content": content(rng)}),
                         samples)
    finally:
        proc.terminate()
        proc.wait(120)


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def index_size(tw: object) -> int:
    """Bytes of the twin index's own objects (containers, arrays, numbers; not the strings and
    nodes it shares with the state, nor the synonym tables and the small feature cache)."""
    from zcord.core.models import Node

    seen: set[int] = set()

    def deep(obj: object) -> int:
        if id(obj) in seen or isinstance(obj, (str, Node)) or callable(obj):
            return 0
        seen.add(id(obj))
        n = sys.getsizeof(obj)
        if isinstance(obj, dict):
            n += sum(deep(k) + deep(v) for k, v in obj.items())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            n += sum(deep(v) for v in obj)
        return n

    skip = {"_state_ref", "folding", "_cache", "on_pending", "on_change", "_nodes_ref", "_seen_change",
            "_synonyms_for", "todo"}
    fields = {**vars(tw), **vars(vars(tw)["postings"])}  # the postings' arrays (TwinIndex.postings) counted as the index's
    del fields["postings"]
    return sum(deep(v) for k, v in fields.items() if k not in skip)


def in_process(size: int, samples: int, rounds: int = 4) -> None:
    """At `size` memories, in one process: the twin index's build (time, memory), then
    zcor_memory_write (create) with the check and without it in alternating rounds (the
    machine's drift falls on both alike), the check alone, and a consolidation list."""
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="zctw"))
    try:
        mem = root / "mem"
        build_memory(mem, size, size, size)
        with Service(mem) as svc:
            svc.warm_recall()
            rss0 = _rss_mib()
            t = time.perf_counter()
            svc.build_twins()
            build = time.perf_counter() - t
            rss1 = _rss_mib()
            rng = random.Random(9)
            tw = svc.twins

            def write() -> None:
                svc.call("zcor_memory_write", {"title": title(rng, 0), "content": content(rng)}, actor="model")

            on: list[float] = []
            off: list[float] = []
            for _ in range(rounds):
                tw.check = True
                with svc.lock:
                    tw.ready()  # the off round's creates indexed here, not in the first timed check
                on += timed(write, samples // rounds)
                tw.check = False  # as ZCOR_TWIN_CHECK=off: the index is kept by the background only
                off += timed(write, samples // rounds)
            tw.check = True
            texts = iter([(title(rng, 0), content(rng)) for _ in range(samples)])

            def check() -> None:
                t_, c_ = next(texts)
                with svc.lock:
                    tw.similar(tw.folding.features(t_, c_))

            alone = timed(check, samples)
            index_mib = index_size(tw) / 2**20
            t = time.perf_counter()
            listing = svc.consolidate_list()
            listed = time.perf_counter() - t
        added = (pct(on, 50) / pct(off, 50) - 1) * 100
        print(f"in process, {size:,} memories (bench/common.build_memory), {rounds} alternating rounds, "
              f"{samples} creates each way")
        print(table([["write (create) without the check", lat(off)], ["write (create) with the check", lat(on)],
                     ["p50 added", f"{added:+.1f} %"],
                     ["the check alone (features + lookup)", lat(alone)],
                     ["twin index + neighbourhoods built (background)", f"{build:.1f} s"],
                     ["memory the index took (RSS)", f"{rss1 - rss0:.0f} MiB"],
                     ["twin index (its objects and arrays)", f"{index_mib:.1f} MiB"],
                     ["zcor/consolidate/list after it", f"{listed * 1000:.1f} ms, {listing['total']} proposals"]],
                    ["", "ms p50 / p99"]))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def speed(size: int, samples: int, before: str, once: bool = False) -> None:
    """Over a real zcord's socket: write (create) p50 / p99 with the code at `before` and
    with this code, twice each, alternating."""
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="zctw"))
    try:
        base = root / "base"
        build_memory(base, size, size, size)
        with Service(base) as svc:
            svc.snapshot()
        rows = []
        after_path = str(Path(__file__).resolve().parent.parent)
        # --before off: this code with ZCOR_TWIN_CHECK=off against this code with the check
        runs = (("before", before, True), ("after", after_path, True)) if before != "off" else \
            (("check off", after_path, False), ("check on", after_path, True))
        again = tuple((f"{label} again", path, check) for label, path, check in runs)
        for label, path, check in runs if once else (*runs, *again):
            mem = root / "mem"
            shutil.rmtree(mem, ignore_errors=True)
            shutil.copytree(base, mem)
            w = _daemon_writes(mem, root, path, samples, check)
            rows.append([label, lat(w)])
            print(f"{label} done", file=sys.stderr)
        print(f"zcor_memory_write (create) over a real zcord's socket, {size:,} memories, {samples} writes each, "
              f"after the warm-up; before = {before}")
        print(table(rows, ["code", "write (create) ms p50 / p99"]))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quality", action="store_true")
    ap.add_argument("--speed", action="store_true")
    ap.add_argument("--before", default="", help="PYTHONPATH of the code without the check (speed)")
    ap.add_argument("--in-process", action="store_true", help="the check's cost in process at --size")
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--daemon-size", type=int, default=10_000, help="--speed: the Memory's size")
    ap.add_argument("--once", action="store_true", help="--speed: before and after once each (not twice)")
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--threshold", type=float, default=None)
    args = ap.parse_args()
    from zcord.retrieval.twins import THRESHOLD

    t = time.perf_counter()
    if args.quality or not (args.speed or args.in_process):
        quality(args.threshold if args.threshold is not None else THRESHOLD)
    if args.in_process:
        in_process(args.size, args.samples)
    if args.speed:
        if not args.before:
            ap.error("--speed needs --before PATH (a tree of the code without the check)")
        speed(args.daemon_size, args.samples, args.before, args.once)
    print(f"run time {time.perf_counter() - t:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
