"""What reading as if held changes had not been made costs (issue 33): auto-recall, search
candidates and the model's zcor_memory_query on a --nodes Memory, with nothing held and
then with --held held changes (rewrites, supersedes and deletes of random memories by
untrusted senders, spread so the per-sender caps do not refuse them), in process. Prints
p50 / p99 wall and CPU milliseconds per call. Never asserts.

Usage: python bench/bench_held_recall.py [--nodes 20000] [--held 100] [--samples 200]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import SURNAMES, THINGS, VERBS, build_memory, lat, table, timed  # noqa: E402

from zcord.service import Service  # noqa: E402


def measure(svc: Service, batches: list[list[dict]], samples: int) -> list[str]:
    it = iter(range(10**9))
    rows = []
    for name, fn in (
            ("auto-recall", lambda: svc.recall("qq:group:1", batches[next(it) % len(batches)])),
            ("search candidates", lambda: svc.retriever.visible_hits(
                [THINGS[next(it) % len(THINGS)]], False, 20, svc.config.recall_ranking, floor=False)),
            ("query (model)", lambda: svc.call("zcor_memory_query", {"keywords": [THINGS[next(it) % len(THINGS)]],
                                                                     "limit": 20}, actor="model"))):
        cpu: list[float] = []
        wall = timed(fn, samples, cpu=cpu)
        rows.append([name, lat(wall), lat(cpu)])
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=20_000)
    ap.add_argument("--held", type=int, default=100)
    ap.add_argument("--samples", type=int, default=200)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(dir="/tmp", prefix="zchr"))
    rng = random.Random(7)
    try:
        mem = tmp / "mem"
        build_memory(mem, args.nodes, 0, 0)
        batches = [[{"text": f"{rng.choice(SURNAMES)}明{rng.choice(VERBS)}{rng.choice(THINGS)}，"
                             f"周末{rng.choice(THINGS)}吗", "origin": "external", "senderKey": "qq:alice"}]
                   for _ in range(50)]
        with Service(mem) as svc:
            svc.warm()
            svc.recall("qq:group:1", batches[0])
            rows = [["0 held", *r] for r in measure(svc, batches, args.samples)]
            ids = list(svc.state.nodes)
            senders = max(1, args.held // 40 + 1)
            for k in range(senders):
                svc.trust_set({"sender": f"qq:t{k}", "level": "untrusted"})
            done = 0
            while done < args.held:
                claim = {"session": "qq:group:1", "senders": [f"qq:t{done % senders}"]}
                target = rng.choice(ids)
                node = svc.state.nodes.get(target)
                if node is None or node.superseded_by is not None:
                    continue
                kind = done % 3
                if kind == 0:
                    call = ("zcor_memory_write", {"id": target, "title": f"held {done}", "content": "x"})
                elif kind == 1:
                    other = rng.choice(ids)
                    if other == target or svc.state.nodes.get(other) is None or \
                            svc.state.nodes[other].superseded_by is not None:
                        continue
                    call = ("zcor_memory_supersede", {"ids": [target], "replacementId": other, "reason": "x"})
                else:
                    if svc.state.child_ids(target) or svc.state.replaced.get(target):
                        continue
                    call = ("zcor_memory_delete", {"id": target})
                out = svc.call(call[0], call[1], actor="model", claim=claim)
                assert out.get("review") == "pending", out
                done += 1
            svc.recall("qq:group:1", batches[0])
            rows += [[f"{args.held} held", *r] for r in measure(svc, batches, args.samples)]
        print(f"{args.nodes} memories, {args.samples} calls each (ms, p50 / p99)\n")
        print(table([[r[0], r[1], r[2], r[3]] for r in rows], ["held", "call", "wall", "CPU"]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
