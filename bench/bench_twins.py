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

speed: a 100,000-memory Memory (bench/common.build_memory), zcor_memory_write (create) p50
/ p99 over a real zcord's socket with the code at --before (a PYTHONPATH; the check absent)
and with this code, after each daemon's warm-up (the twin index built); and in process, the
check alone (features + lookup) per create.

Usage: python bench/bench_twins.py [--quality] [--speed --before /path/to/old/tree]
       [--size 100000] [--samples 300] [--threshold 0.4]
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


def _daemon_writes(memdir: Path, root: Path, pythonpath: str, samples: int) -> list[float]:
    from bench_daemon import start_daemon
    from bench_memory import wait_quiet

    from zcord.client import Client

    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = pythonpath
    try:
        proc, _ready = start_daemon(memdir, root / "s.sock", root / "notify")
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
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


def speed(size: int, samples: int, before: str) -> None:
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="zctw"))
    try:
        base = root / "base"
        build_memory(base, size, size, size)
        with Service(base) as svc:
            svc.snapshot()
        rows = []
        after_path = str(Path(__file__).resolve().parent.parent)
        for label, path in (("before", before), ("after", after_path), ("before again", before),
                            ("after again", after_path)):
            mem = root / "mem"
            shutil.rmtree(mem, ignore_errors=True)
            shutil.copytree(base, mem)
            w = _daemon_writes(mem, root, path, samples)
            rows.append([label, lat(w)])
            print(f"{label} done", file=sys.stderr)
        # in process: the check alone, on the same Memory
        mem = root / "mem"
        shutil.rmtree(mem, ignore_errors=True)
        shutil.copytree(base, mem)
        with Service(mem) as svc:
            svc.warm_recall()
            svc.build_twins()
            rng = random.Random(9)
            texts = [(title(rng, 0), content(rng)) for _ in range(samples)]
            it = iter(texts)

            def check() -> None:
                t, c = next(it)
                with svc.lock:
                    svc.twins.similar(svc.twins.folding.features(t, c))

            alone = timed(check, samples)
            n = len(svc.twins.entries)
        print(f"zcor_memory_write (create) over a real zcord's socket, {size:,} memories, {samples} writes each, "
              f"after the warm-up; before = {before}")
        print(table(rows, ["code", "write (create) ms p50 / p99"]))
        print(f"the check alone in process ({n:,} memories indexed): p50 {pct(alone, 50) * 1e6:.0f} µs, "
              f"p99 {pct(alone, 99) * 1e6:.0f} µs")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quality", action="store_true")
    ap.add_argument("--speed", action="store_true")
    ap.add_argument("--before", default="", help="PYTHONPATH of the code without the check (speed)")
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--threshold", type=float, default=None)
    args = ap.parse_args()
    from zcord.retrieval.twins import THRESHOLD

    t = time.perf_counter()
    if args.quality or not args.speed:
        quality(args.threshold if args.threshold is not None else THRESHOLD)
    if args.speed:
        if not args.before:
            ap.error("--speed needs --before PATH (a tree of the code without the check)")
        speed(args.size, args.samples, args.before)
    print(f"run time {time.perf_counter() - t:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
