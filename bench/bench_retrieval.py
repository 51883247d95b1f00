"""Retrieval benchmark (issue 4), in-process: auto-recall of a 2,000-character Chinese
batch, context-header rendering, synonym expansion of 50 words, at 10,000 and 100,000
nodes; plus daemon ready time on a 10,000-node Memory (jieba warms up after READY).

Recall rows give wall time and, below, the calling thread's CPU time.

Usage: python bench/bench_retrieval.py [--sizes 10000,100000] [--samples 200] [--no-ready]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import FILLER, THINGS, VERBS, build_memory, diverse_vocabulary, ms, table, timed  # noqa: E402

from zcord.core.text import tokenizer  # noqa: E402
from zcord.service import Service  # noqa: E402

CHAT = ("昨天和小明去吃火锅了，他说周末想去看电影，还提到他的猫咪最近生病了。我们聊了很多关于工作和考试的事情，"
        "他推荐了一家奶茶店，说下次一起去。今天天气很好，我打算去跑步，然后练一会儿钢琴。")


def batch(rng: random.Random, chars: int = 2000) -> str:
    parts = []
    n = 0
    while n < chars:
        piece = rng.choice([CHAT, "".join(rng.choice(FILLER) for _ in range(40)),
                            rng.choice(THINGS) + rng.choice(VERBS) + "了"])
        parts.append(piece)
        n += len(piece)
    return "".join(parts)[:chars]


def deep_size(obj, seen: set[int]) -> int:
    """Bytes of an object and everything it holds (containers and strings), each once."""
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(deep_size(k, seen) + deep_size(v, seen) for k, v in obj.items())
    elif isinstance(obj, (list, tuple, set, frozenset)):
        size += sum(deep_size(x, seen) for x in obj)
    return size


def weighting_index_bytes(st) -> int:
    """What weighted ranking adds to the state: the title word and whole-title indexes and
    each node's folded title words and title length (strings the node texts already hold
    are counted as shared; keyword keys are derived from the node when needed, not held)."""
    st.ensure_index()
    seen: set[int] = set()
    for idx in st.index.values():  # texts the state holds anyway
        seen.add(id(idx.norm_title))
    for node_id in st.nodes:
        seen.add(id(node_id))
    total = deep_size(st.title_words, seen) + deep_size(st.title_keys, seen)
    for idx in st.index.values():
        total += deep_size(idx.title_seq, seen) + 8
    return total


def one(nodes: int, samples: int, diverse: bool) -> dict[str, str]:
    rng = random.Random(nodes)
    vocab = diverse_vocabulary() if diverse else None
    with tempfile.TemporaryDirectory() as tmp:
        memdir = Path(tmp) / "memory"
        build_memory(memdir, nodes, nodes, nodes, vocab=vocab)
        svc = Service(memdir).open()
        t = time.perf_counter()
        svc.warm()
        warm = time.perf_counter() - t
        # every sample a batch never seen before (segmentation is cached per message text)
        texts = iter([batch(rng) for _ in range(2 * samples + 2)])
        events = lambda: [{"text": next(texts), "origin": "external"}]  # noqa: E731
        svc.update_config({"recallRanking": "seed"})
        svc.recall("s", events())  # first call pays nothing more than later ones (warm)
        recall_seed = timed(lambda: svc.recall("s", events()), samples)
        first = batch(rng)
        hit = len(svc.retriever.hits(list(svc.retriever.words(first).expanded), keyword_equality=True))
        svc.update_config({"recallRanking": "weighted"})
        recall_cpu: list[float] = []
        recall = timed(lambda: svc.recall("s", events()), samples, cpu=recall_cpu)
        ids = svc.recall("s", events())
        # a bot sending the dialogue so far: 20 messages of 100 characters, one new per call
        dialogue = [batch(rng, 100) for _ in range(samples + 20)]
        step = iter(range(20, samples + 20))
        dialogue_cpu: list[float] = []
        recall_dialogue = timed(lambda: svc.recall("s", [{"text": m, "origin": "external"}
                                                         for m in dialogue[next(step) - 20:][:20]]), samples,
                                cpu=dialogue_cpu)
        index_mib = weighting_index_bytes(svc.state) / 2**20
        context = timed(lambda: svc.context("s"), samples)
        svc.update_config({"recallBudget": 800})
        context_cut = timed(lambda: svc.context("s"), samples)
        words = [w for g in svc.synonyms.groups[:50] for w in g[:1]]
        expand = timed(lambda: svc.synonyms.classes.expand(words), samples)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        svc.close()
    return {"nodes": f"{nodes:,}", "titles": "diverse" if diverse else "30-word",
            "nodes hit by a batch": f"{hit:,}", "recalled ids": str(len(ids)), "warm-up s (jieba + words + log)": f"{warm:.2f}",
            "recall 2,000 new chars, weighted": ms(recall), "… CPU time": ms(recall_cpu),
            "recall 2,000 new chars, seed": ms(recall_seed),
            "recall dialogue so far (20 × 100 chars, 1 new), weighted": ms(recall_dialogue),
            "… CPU time ": ms(dialogue_cpu),
            "weighting index MiB": f"{index_mib:.1f}", "context (6,000 budget)": ms(context),
            "context (800 budget, cut)": ms(context_cut), "expand 50 words": ms(expand),
            "peak RSS MiB": f"{rss:.0f}"}


def ready_time(nodes: int) -> str:
    """Spawn zcord on a built Memory and time READY=1 over NOTIFY_SOCKET."""
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        memdir = Path(tmp) / "m"
        build_memory(memdir, nodes, nodes, nodes)
        note = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        note.bind(f"{tmp}/n")
        note.settimeout(60)
        env = dict(os.environ, NOTIFY_SOCKET=f"{tmp}/n")
        t = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", "import sys; from zcord.cli import daemon_main; "
                                 "sys.exit(daemon_main())", "--memory-dir", str(memdir),
                                 "--socket", f"{tmp}/s"], env=env, stderr=subprocess.DEVNULL)
        try:
            while b"READY=1" not in note.recv(4096):
                pass
            return f"{time.perf_counter() - t:.2f}"
        finally:
            proc.terminate()
            proc.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--no-ready", action="store_true", help="skip the daemon ready time")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        tokenizer()
        n, mode = args.one.split(":")
        print(json.dumps(one(int(n), args.samples, mode == "diverse")))
        return
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        for mode in ("diverse", "narrow"):
            out = subprocess.run([sys.executable, __file__, "--one", f"{n}:{mode}", "--samples",
                                  str(args.samples)], capture_output=True, text=True, check=True)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"done {n} {mode}", file=sys.stderr)
    keys = list(rows[0])
    print(f"zcor retrieval benchmark, in-process; {os.cpu_count()} CPUs; times in ms as 'p50 p99'. "
          f"'30-word' titles all share words with the batch (worst case); 'diverse' titles are a name "
          f"and two of ~3,000 chat words")
    print(table([[k, *[r[k] for r in rows]] for k in keys], ["metric", *["" for r in rows]]))
    if args.no_ready:
        return
    print(f"daemon ready (spawn → READY=1) on 10,000 nodes: {ready_time(10_000)} s "
          f"(jieba and the log index warm up after READY)")


if __name__ == "__main__":
    main()
