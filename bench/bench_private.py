"""What scoping private conversations costs (issue 34): auto-recall and the model's
zcor_memory_query on a --nodes Memory in process, with `privateScope: "everywhere"` (no
scoping: what recall did before) and `"session"`, with --scoped memories written by the bot
in 50 private sessions (their titles use the same words as the rest, so they are hits that
recall must leave out). Recall is timed from a group session (every scoped memory hidden)
and from one of the private sessions (its own recalled, the others hidden). The
configurations take turns, --rounds times, so a busy machine's drift falls on all alike.
Prints p50 / p99 wall and CPU milliseconds per call. Never asserts.

Run it with another checkout's zcord on PYTHONPATH (one without issue 34) and it measures
that one's recall alone, for a before/after.

Usage: python bench/bench_private.py [--nodes 20000] [--scoped 1000] [--samples 300] [--rounds 3]
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

PRIVATE_SESSIONS = 50


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=20_000)
    ap.add_argument("--scoped", type=int, default=1_000)
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(dir="/tmp", prefix="zcpv"))
    rng = random.Random(7)
    try:
        mem = tmp / "mem"
        build_memory(mem, args.nodes, 0, 0)
        texts = [f"{rng.choice(SURNAMES)}明{rng.choice(VERBS)}{rng.choice(THINGS)}，周末{rng.choice(THINGS)}吗"
                 for _ in range(50)]
        with Service(mem) as svc:
            svc.warm()
            scoping = hasattr(svc.state, "scopes")
            if scoping:
                for k in range(args.scoped):
                    s = k % PRIVATE_SESSIONS
                    claim = {"session": f"qq:private:{s}", "senders": [f"qq:{s}"], "private": True}
                    svc.call("zcor_memory_write", {"title": f"{rng.choice(SURNAMES)}的{rng.choice(THINGS)}私事{k}",
                                                   "content": "只在私聊说过"}, actor="model", claim=claim)
                assert len(svc.state.scopes) == args.scoped
            configs = [("everywhere", "qq:group:1"), ("session", "qq:group:1"), ("session", "qq:private:0")] \
                if scoping else [("(no scoping)", "qq:group:1")]
            it = iter(range(10**9))
            results: dict[tuple[str, str, str], tuple[list[float], list[float]]] = {}
            for _ in range(args.rounds):
                for mode, session in configs:
                    if scoping:
                        svc.update_config({"privateScope": mode})
                    claim = {"session": session, "senders": ["qq:1"]}
                    for name, fn in (
                            ("auto-recall", lambda s=session: svc.recall(s, [{
                                "text": texts[next(it) % len(texts)], "origin": "external", "senderKey": "qq:1"}])),
                            ("query (model)", lambda c=claim: svc.call(
                                "zcor_memory_query", {"keywords": [THINGS[next(it) % len(THINGS)]], "limit": 20},
                                actor="model", claim=c))):
                        wall, cpu = results.setdefault((mode, session, name), ([], []))
                        wall += timed(fn, args.samples // args.rounds, cpu=cpu)
        scoped = args.scoped if scoping else 0
        print(f"{args.nodes:,} memories, {scoped:,} of them scoped to {PRIVATE_SESSIONS} private sessions; "
              f"{args.samples} calls each (ms, p50 / p99)\n")
        print(table([[mode, session, name, lat(w), lat(c)] for (mode, session, name), (w, c) in results.items()],
                    ["privateScope", "session", "call", "wall", "CPU"]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
