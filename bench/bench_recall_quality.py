"""Recall-quality evaluation (issue 10 item 5): how often auto-recall finds the memories that
answer a message, on hand-written persona-bot Memories in English and Chinese.

Each Memory in bench/recall_eval/ (<name>.memory.json) is written into a fresh temporary
Memory directory through the real tools (its PERSONA.md first, which names the bot), the way a bot files facts (person node first,
facts under it with parentId, keywords only where the file gives them). Each item of
<name>.items.json is a message or a dialogue so far (one external event per message) with
the ids of all memories that answer it; negative controls have none and should recall
nothing. Every ranking mode is scored, plus a BM25-over-titles baseline on the same data
(Okapi k1 1.2, b 0.75; English tokens: lowercase [a-z0-9]+ words; Chinese tokens: jieba's
lcut_for_search words from zcord's process-wide tokenizer, which by then knows the synonym
terms and the Memory's keywords as user words; the query is all messages of the batch;
top 10 with score > 0). Each Memory is scored in its own process so one Memory's keywords
never change how jieba segments another's messages. Write times come from a fixed clock,
so the run is deterministic.

Metrics per (language, split, method): recall@5 / recall@10 (fraction of an item's relevant
memories among the first k, averaged over items), hit@5 (any relevant in the first 5), MRR
(1 / rank of the first relevant one, 0 when none is returned), the negative controls'
zero-hit rate (fraction that recall nothing) and the p50 recall latency. A second table
splits hit@5 / recall@10 into single messages and dialogues. The data format and what
makes the set hard: bench/recall_eval/README.md.

`--traditional messages|memories|both` writes that side of the Chinese sets in Traditional
characters (OpenCC's s2t, from the `opencc-python-reimplemented` dev package) to see recall
across scripts (issue 25 item 4); the other side stays Simplified.

Usage: python bench/bench_recall_quality.py [--lang en|zh|all] [--split dev|test|all]
                                            [--modes seed,weighted] [--sets NAME,...] [--verbose]
                                            [--traditional messages|memories|both]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import table  # noqa: E402

from zcord.core.text import tokenizer  # noqa: E402
from zcord.service import Service  # noqa: E402

DATA = Path(__file__).parent / "recall_eval"
QUOTA = 10
BASELINE = "bm25"


class Clock:
    """Deterministic write times: one minute apart, in file order (ties then follow ids)."""

    def __init__(self) -> None:
        self.t = datetime(2026, 1, 1, 9, 0, tzinfo=timezone(timedelta(hours=8)))

    def __call__(self) -> datetime:
        self.t += timedelta(minutes=1)
        return self.t


def load_sets(lang: str) -> list[tuple[dict, list[dict]]]:
    """(memory file, its items) for every Memory of the language(s), checked for consistency."""
    out = []
    for mem_path in sorted(DATA.glob("*.memory.json")):
        mem = json.loads(mem_path.read_text(encoding="utf-8"))
        if lang != "all" and mem["lang"] != lang:
            continue
        items_path = mem_path.with_name(mem_path.name.replace(".memory.json", ".items.json"))
        items = json.loads(items_path.read_text(encoding="utf-8"))["items"]
        ids = set()
        for n in mem["nodes"]:
            if n["id"] in ids:
                sys.exit(f"{mem_path.name}: duplicate node id {n['id']}")
            if n.get("parent") is not None and n["parent"] not in ids:
                sys.exit(f"{mem_path.name}: {n['id']} names parent {n['parent']} before it exists")
            ids.add(n["id"])
        seen = set()
        for it in items:
            if it["id"] in seen:
                sys.exit(f"{items_path.name}: duplicate item id {it['id']}")
            seen.add(it["id"])
            bad = [r for r in it["relevant"] if r not in ids]
            if bad:
                sys.exit(f"{items_path.name}: item {it['id']} names unknown memories {bad}")
            if it.get("split") not in ("dev", "test"):
                sys.exit(f"{items_path.name}: item {it['id']} has no split")
            if not it["messages"] or not all(isinstance(m, str) and m for m in it["messages"]):
                sys.exit(f"{items_path.name}: item {it['id']} needs non-empty messages")
        out.append((mem, items))
    return out


def build(svc: Service, mem: dict) -> dict[str, str]:
    """Write the Memory's PERSONA.md (its `persona`, naming the bot in the first heading) and
    its nodes through the tools; returns file id → zcor id."""
    if mem.get("persona"):
        svc.persona_set(mem["persona"])
    real: dict[str, str] = {}
    for n in mem["nodes"]:
        params = {"title": n["title"], "content": n["content"]}
        if n.get("parent") is not None:
            params["parentId"] = real[n["parent"]]
        if "keywords" in n:
            params["keywords"] = n["keywords"]
        real[n["id"]] = svc.call("zcor_memory_write", params, actor="model")["id"]
    return real


# -- the BM25 baseline -------------------------------------------------------------------------

LATIN = re.compile(r"[a-z0-9]+")


def bm25_tokens(text: str, lang: str) -> list[str]:
    if lang == "en":
        return LATIN.findall(text.lower())
    return [w.lower() for w in tokenizer().lcut_for_search(text) if re.search(r"\w", w)]


class BM25:
    """Okapi BM25 (k1 1.2, b 0.75, idf = ln(1 + (N - df + 0.5) / (df + 0.5))) over titles."""

    def __init__(self, docs: dict[str, str], lang: str, k1: float = 1.2, b: float = 0.75):
        self.lang, self.k1, self.b = lang, k1, b
        self.tf = {i: Counter(bm25_tokens(t, lang)) for i, t in docs.items()}
        self.len = {i: sum(c.values()) for i, c in self.tf.items()}
        self.avg = statistics.fmean(self.len.values()) if self.len else 1.0
        df: Counter[str] = Counter()
        for c in self.tf.values():
            df.update(c.keys())
        n = len(docs)
        self.idf = {w: math.log(1 + (n - d + 0.5) / (d + 0.5)) for w, d in df.items()}
        self.order = list(docs)  # creation order breaks ties

    def top(self, text: str, k: int = QUOTA) -> list[str]:
        q = set(bm25_tokens(text, self.lang))
        scores = []
        for pos, i in enumerate(self.order):
            tf, s = self.tf[i], 0.0
            for w in q:
                f = tf.get(w)
                if f:
                    norm = self.k1 * (1 - self.b + self.b * self.len[i] / self.avg)
                    s += self.idf[w] * f * (self.k1 + 1) / (f + norm)
            if s > 0:
                scores.append((-s, pos, i))
        return [i for _, _, i in sorted(scores)[:k]]


# -- scoring ---------------------------------------------------------------------------------


def score(ranked: list[str], relevant: list[str]) -> dict[str, float]:
    rel = set(relevant)
    first = next((r for r, i in enumerate(ranked, 1) if i in rel), None)
    return {"r5": len(rel & set(ranked[:5])) / len(rel), "r10": len(rel & set(ranked[:10])) / len(rel),
            "hit5": float(first is not None and first <= 5), "mrr": 1 / first if first else 0.0}


def to_traditional(mem: dict, items: list[dict], side: str) -> tuple[dict, list[dict]]:
    """The Memory's titles, contents and keywords and/or the items' messages in Traditional
    characters (Chinese Memories only)."""
    if mem["lang"] != "zh" or not side:
        return mem, items
    import opencc

    s2t = opencc.OpenCC("s2t").convert
    if side in ("memories", "both"):
        mem = {**mem, "nodes": [{**n, "title": s2t(n["title"]), "content": s2t(n["content"]),
                                 **({"keywords": [s2t(k) for k in n["keywords"]]} if "keywords" in n else {})}
                                for n in mem["nodes"]]}
    if side in ("messages", "both"):
        items = [{**it, "messages": [s2t(m) for m in it["messages"]]} for it in items]
    return mem, items


def run_memory(mem: dict, items: list[dict], modes: list[str]) -> dict:
    """Score one Memory: per item and method the ranked file ids and the recall time."""
    results = []
    notes = []
    with tempfile.TemporaryDirectory() as tmp:
        svc = Service(Path(tmp) / "memory", clock=Clock()).open()
        try:
            real = build(svc, mem)
            inv = {v: k for k, v in real.items()}
            svc.warm()
            can_switch = "recallRanking" in svc.public_config()
            if not can_switch:
                notes.append("this zcord has no recallRanking setting: only its current ranking is "
                             "scored, labelled 'seed'")
            for mode in (modes if can_switch else ["seed"]):
                if can_switch:
                    svc.update_config({"recallRanking": mode})
                svc.recall("warm-up", [{"text": items[0]["messages"][-1], "origin": "external"}])
                for n, it in enumerate(items):
                    events = [{"text": m, "origin": "external"} for m in it["messages"]]
                    t = time.perf_counter()
                    ids = svc.recall(f"eval:{mode}:{n}", events)
                    dt = time.perf_counter() - t
                    results.append({"item": it["id"], "method": mode, "ranked": [inv.get(i, i) for i in ids],
                                    "seconds": dt})
            titles = {inv[i]: svc.state.nodes[i].title for i in real.values()
                      if svc.state.nodes[i].superseded_by is None}
        finally:
            svc.close()
    bm = BM25(titles, mem["lang"])
    for it in items:
        t = time.perf_counter()
        ranked = bm.top("\n".join(it["messages"]))
        results.append({"item": it["id"], "method": BASELINE, "ranked": ranked, "seconds": time.perf_counter() - t})
    return {"results": results, "titles": titles, "notes": notes}


def run_isolated(mem_name: str, split: str, modes: list[str], traditional: str = "") -> dict:
    """run_memory in a fresh process: jieba's user words (synonym terms, node keywords) are
    process-wide, so one Memory's keywords must not change how the next one is segmented."""
    out = subprocess.run([sys.executable, __file__, "--one", mem_name, "--split", split,
                          "--modes", ",".join(modes), "--traditional", traditional], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"scoring {mem_name} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def chosen_items(items: list[dict], split: str) -> list[dict]:
    return [it for it in items if split == "all" or it["split"] == split]


def summarize(rows: list[dict]) -> list[str]:
    pos = [r for r in rows if r["item"]["relevant"]]
    neg = [r for r in rows if not r["item"]["relevant"]]
    s = [score(r["ranked"], r["item"]["relevant"]) for r in pos]
    mean = lambda k: f"{statistics.fmean(x[k] for x in s):.3f}" if s else "-"  # noqa: E731
    zero = f"{sum(1 for r in neg if not r['ranked']) / len(neg):.3f}" if neg else "-"
    p50 = statistics.median(r["seconds"] for r in rows) * 1000
    return [str(len(pos)), mean("r5"), mean("r10"), mean("hit5"), mean("mrr"), str(len(neg)), zero, f"{p50:.2f}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lang", choices=["en", "zh", "all"], default="all")
    ap.add_argument("--split", choices=["dev", "test", "all"], default="all")
    ap.add_argument("--modes", default="seed,weighted", help="ranking modes to score, comma-separated")
    ap.add_argument("--sets", default="", help="score only these Memories (comma-separated names, e.g. zh_assistant)")
    ap.add_argument("--verbose", action="store_true", help="list failing items with the top 5 titles returned")
    ap.add_argument("--traditional", choices=["", "messages", "memories", "both"], default="",
                    help="write this side of the Chinese sets in Traditional characters")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # child process: score one Memory, print JSON
    args = ap.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if args.one:
        tokenizer()
        mem, items = next((m, i) for m, i in load_sets("all") if m["name"] == args.one)
        mem, items = to_traditional(mem, items, args.traditional)
        print(json.dumps(run_memory(mem, chosen_items(items, args.split), modes), ensure_ascii=False))
        return
    t0 = time.perf_counter()
    sets = load_sets(args.lang)
    if not sets:
        sys.exit(f"no data for --lang {args.lang} in {DATA}")
    notes: list[str] = []
    results: list[dict] = []
    counts = []
    only = {x.strip() for x in args.sets.split(",") if x.strip()}
    for mem, items in sets:
        if only and mem["name"] not in only:
            continue
        chosen = chosen_items(items, args.split)
        if not chosen:
            continue
        out = run_isolated(mem["name"], args.split, modes, args.traditional)
        by_id = {it["id"]: it for it in chosen}
        for r in out["results"]:
            results.append({**r, "item": by_id[r["item"]], "mem": mem, "titles": out["titles"]})
        notes += [n for n in out["notes"] if n not in notes]
        counts.append(f"{mem['name']} ({mem['lang']}): {len(mem['nodes'])} memories, "
                      f"{sum(1 for i in chosen if i['relevant'])} questions "
                      f"({sum(1 for i in chosen if i['relevant'] and len(i['messages']) > 1)} dialogues), "
                      f"{sum(1 for i in chosen if not i['relevant'])} negatives")
    methods = list(dict.fromkeys(r["method"] for r in results))
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in results:
        lang = r["mem"]["lang"]
        splits = [r["item"]["split"]] + (["all"] if args.split == "all" else [])
        for sp in splits:
            groups[(lang, sp, r["method"])].append(r)
    order = {"dev": 0, "test": 1, "all": 2}
    rows = []
    for key in sorted(groups, key=lambda k: (k[0], order[k[1]], methods.index(k[2]))):
        rows.append([*key, *summarize(groups[key])])
    print("zcor recall quality: hand-written persona Memories (bench/recall_eval), auto-recall "
          "through Service.recall, one external event per message, quota 10; "
          "bm25 = Okapi BM25 over titles (baseline); each Memory scored in its own process")
    for c in counts:
        print("  " + c)
    for n in notes:
        print("note: " + n)
    print(table(rows, ["lang", "split", "method", "questions", "recall@5", "recall@10", "hit@5", "MRR",
                       "negatives", "neg zero-hit", "p50 ms"]))
    # single messages vs dialogues (hit@5), to see which kind of item a change helps
    kinds = []
    for key in sorted(groups, key=lambda k: (k[0], order[k[1]], methods.index(k[2]))):
        if key[1] != ("all" if args.split == "all" else args.split):
            continue
        pos = [r for r in groups[key] if r["item"]["relevant"]]
        cells = []
        for dialogue in (False, True):
            sub = [score(r["ranked"], r["item"]["relevant"]) for r in pos
                   if (len(r["item"]["messages"]) > 1) == dialogue]
            cells += [str(len(sub)), f"{statistics.fmean(x['hit5'] for x in sub):.3f}" if sub else "-",
                      f"{statistics.fmean(x['r10'] for x in sub):.3f}" if sub else "-"]
        kinds.append([*key, *cells])
    print()
    print(table(kinds, ["lang", "split", "method", "single n", "hit@5", "recall@10", "dialogue n", "hit@5",
                        "recall@10"]))
    # per Memory (hit@5, recall@10, negatives recalling nothing), to see each set apart
    per: dict[tuple, list[dict]] = defaultdict(list)
    for r in results:
        for sp in [r["item"]["split"]] + (["all"] if args.split == "all" else []):
            per[(r["mem"]["name"], sp, r["method"])].append(r)
    rows = []
    for key in sorted(per, key=lambda k: (k[0], order[k[1]], methods.index(k[2]))):
        pos = [score(r["ranked"], r["item"]["relevant"]) for r in per[key] if r["item"]["relevant"]]
        neg = [r for r in per[key] if not r["item"]["relevant"]]
        rows.append([*key, str(len(pos)), f"{statistics.fmean(x['hit5'] for x in pos):.3f}" if pos else "-",
                     f"{statistics.fmean(x['r10'] for x in pos):.3f}" if pos else "-", str(len(neg)),
                     f"{sum(1 for r in neg if not r['ranked']) / len(neg):.3f}" if neg else "-"])
    print()
    print(table(rows, ["memory", "split", "method", "questions", "hit@5", "recall@10", "negatives", "neg zero-hit"]))
    if args.verbose:
        for r in results:
            it, ranked = r["item"], r["ranked"]
            rel = it["relevant"]
            if rel and set(rel) <= set(ranked[:5]):
                continue
            if not rel and not ranked:
                continue
            what = "NEG" if not rel else ("MISS" if not set(rel) & set(ranked) else "LOW")
            print(f"\n[{r['method']}] {what} {it['id']} ({it['split']}): " + " / ".join(it["messages"])[-300:])
            for i in rel:
                print(f"    want {i}: {r['titles'].get(i, '?')}")
            for rank, i in enumerate(ranked[:5], 1):
                print(f"    {rank}. {'*' if i in rel else ' '} {i}: {r['titles'].get(i, '?')}")
    print(f"\ntotal {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
