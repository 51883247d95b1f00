"""Recall's ranking CPU time at SIZE memories when another session's private memories
exist (`hide`, zcord.service.scope): none hidden; 1,000 hidden with the bounded scoring off
(as before 4a1e03f, when any hidden id turned it off); 1,000 hidden, bounded. Alternating in
one process, time.process_time, bench_all's chat lines; asserts the two hidden rows give the
same hits. The Memory is kept in /tmp/rcpu/SIZE.

Usage: PYTHONPATH=. python bench/bench_recall_hidden.py [SIZE]
"""
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench_recall_cpu as B
from common import THINGS, build_memory, pct

from zcord.retrieval import ranking
from zcord.service import Service

size = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
d = Path(f"/tmp/rcpu/{size}")
if not d.exists():
    build_memory(d, size, size, size)
with Service(d) as svc:
    r = svc.retriever
    rng = random.Random(size)
    hide = frozenset(rng.sample(sorted(svc.state.nodes), 1000))
    texts_all = [[B.CHAT.format(rng.choice(THINGS), rng.choice(THINGS), rng.choice(THINGS))] for _ in range(100)]
    for texts in texts_all[:5]:
        r.ranking.hits(r.words(texts, "weighted").terms, keyword_equality=True, limit=10, mode="weighted", hide=hide)
    runs = {"no private memory": (10, frozenset()), "1,000 hidden, bound off (before)": (10**9, hide),
            "1,000 hidden, bounded (after)": (10, hide)}
    cpu = {k: [] for k in runs}
    for k, texts in enumerate(texts_all):
        terms = r.words(texts, "weighted").terms
        got = {}
        for name in (list(runs) if k % 2 else list(runs)[::-1]):
            bf, h = runs[name]
            ranking.BOUNDED_FROM = bf
            t = time.process_time()
            got[name] = r.ranking.hits(terms, keyword_equality=True, limit=10, mode="weighted", hide=h)
            cpu[name].append(time.process_time() - t)
        assert got["1,000 hidden, bound off (before)"] == got["1,000 hidden, bounded (after)"]
    for name in runs:
        print(f"{size:,}  {name:34s} {pct(cpu[name],50)*1000:.2f} / {pct(cpu[name],99)*1000:.2f} ms")
