"""Recall's CPU time in process, on bench_all's Memories and chat lines: `Service.recall` of
one external event like bench_all's `recall ms` row (the same CHAT template, three random
THINGS), timed with time.process_time (the machine is shared: wall time under load swings;
CPU time of the calling process moves less). No daemon, no socket.

Run it with PYTHONPATH set to another checkout to time that code: the Memory is written by
this directory's common.build_memory and read by the code under test (kept between runs in
--keep DIR, one directory per size).

`--compare` times the weighted ranking alone (Retriever.hits on the same terms), every
candidate scored (ranking.BOUNDED_FROM out of reach) against the bounded scoring, alternately
in one process, and asserts both give the same hits (limit 10; limit None and 20 with explain).

`--hidden` times the weighted ranking while another session's private memories exist (`hide`,
zcord.service.scope): none hidden; 1,000 hidden with the bounded scoring off (as before
4a1e03f, when any hidden id turned it off); 1,000 hidden, bounded. Alternating in one
process; asserts the two hidden rows give the same hits.

Usage: python bench/bench_recall_cpu.py [--sizes 10000,100000] [--samples 100] [--keep DIR] [--compare] [--hidden]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import THINGS, build_memory, pct, table  # noqa: E402

from zcord.service import Service  # noqa: E402

CHAT = "昨天和小明去吃{}了，他说周末想{}，还提到他的{}最近怎么样。我们聊了很多关于工作和考试的事情。"  # bench_all's


def memory(keep: Path, nodes: int) -> Path:
    memdir = keep / f"mem-{nodes}"
    if not (memdir / "memory-state.json").exists():
        build_memory(memdir, nodes, nodes, nodes)
    return memdir


def recall_row(svc: Service, nodes: int, samples: int) -> list[str]:
    rng = random.Random(nodes)

    def chat() -> list[dict[str, str]]:
        return [{"text": CHAT.format(rng.choice(THINGS), rng.choice(THINGS), rng.choice(THINGS)),
                 "origin": "external"}]

    for _ in range(5):  # jieba's first cuts, the indexes
        svc.recall("bench", chat())
    cpu = []
    for _ in range(samples):
        events = chat()
        t = time.process_time()
        svc.recall("bench", events)
        cpu.append(time.process_time() - t)
    return [f"{nodes:,}", "recall (Service.recall)", f"{pct(cpu, 50) * 1000:.2f} / {pct(cpu, 99) * 1000:.2f}"]


def compare_rows(svc: Service, nodes: int, samples: int) -> list[list[str]]:
    from zcord.retrieval import ranking

    r = svc.retriever
    rng = random.Random(nodes)
    cpu: dict[str, list[float]] = {"every candidate": [], "bounded": []}
    reach = ranking.BOUNDED_FROM
    try:
        for k in range(samples):
            texts = [CHAT.format(rng.choice(THINGS), rng.choice(THINGS), rng.choice(THINGS))]
            terms = r.words(texts, "weighted").terms
            got = {}
            for name in (("every candidate", "bounded") if k % 2 else ("bounded", "every candidate")):
                ranking.BOUNDED_FROM = 10**9 if name == "every candidate" else reach
                t = time.process_time()
                hits = r.hits(terms, keyword_equality=True, limit=10, mode="weighted")
                cpu[name].append(time.process_time() - t)
                got[name] = [hits, r.hits(terms, keyword_equality=True, limit=None, explain=True, mode="weighted"),
                             r.hits(terms, keyword_equality=True, limit=20, explain=True, mode="weighted")]
            assert got["bounded"] == got["every candidate"], texts
    finally:
        ranking.BOUNDED_FROM = reach
    return [[f"{nodes:,}", f"ranking, {name}", f"{pct(v, 50) * 1000:.2f} / {pct(v, 99) * 1000:.2f}"]
            for name, v in cpu.items()]


def hidden_rows(svc: Service, nodes: int, samples: int) -> list[list[str]]:
    from zcord.retrieval import ranking

    r = svc.retriever
    rng = random.Random(nodes)
    hide = frozenset(rng.sample(sorted(svc.state.nodes), 1000))
    reach = ranking.BOUNDED_FROM
    runs = {"no private memory": (reach, frozenset()), "1,000 hidden, bound off (before)": (10**9, hide),
            "1,000 hidden, bounded": (reach, hide)}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    try:
        for k in range(samples + 5):  # the first 5: jieba's first cuts, the indexes
            terms = r.words([CHAT.format(rng.choice(THINGS), rng.choice(THINGS), rng.choice(THINGS))],
                            "weighted").terms
            got = {}
            for name in (list(runs) if k % 2 else list(runs)[::-1]):
                ranking.BOUNDED_FROM, h = runs[name]
                t = time.process_time()
                got[name] = r.ranking.hits(terms, keyword_equality=True, limit=10, mode="weighted", hide=h)
                if k >= 5:
                    cpu[name].append(time.process_time() - t)
            assert got["1,000 hidden, bound off (before)"] == got["1,000 hidden, bounded"]
    finally:
        ranking.BOUNDED_FROM = reach
    return [[f"{nodes:,}", f"ranking, {name}", f"{pct(v, 50) * 1000:.2f} / {pct(v, 99) * 1000:.2f}"]
            for name, v in cpu.items()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--keep", default="/tmp/zcor-bench-recall-cpu", help="where the built Memories are kept")
    ap.add_argument("--compare", action="store_true", help="every candidate scored vs bounded, in one process")
    ap.add_argument("--hidden", action="store_true", help="with and without another session's private memories")
    args = ap.parse_args()
    keep = Path(args.keep)
    keep.mkdir(parents=True, exist_ok=True)
    rows = []
    for nodes in (int(s) for s in args.sizes.split(",")):
        with Service(memory(keep, nodes)) as svc:
            rows.append(recall_row(svc, nodes, args.samples))
            if args.compare:
                rows += compare_rows(svc, nodes, args.samples)
            if args.hidden:
                rows += hidden_rows(svc, nodes, args.samples)
    print(f"CPU ms p50 / p99 (time.process_time), {args.samples} never-seen chat lines each")
    print(table(rows, ["memories", "call", "CPU ms p50 / p99"]))


if __name__ == "__main__":
    main()
