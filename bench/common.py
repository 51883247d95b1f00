"""Helpers shared by the benchmarks: synthetic Memories and percentile tables."""

from __future__ import annotations

import json
import random
import statistics
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from zcord.core.layout import OPLOG_FILE
from zcord.core.models import Change, Node, OpRecord
from zcord.core.state import MemoryState
from zcord.core.store import Store

SURNAMES = "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗"
THINGS = ["奶茶", "篮球", "电影", "猫咪", "火锅", "旅行", "考试", "加班", "生日", "咖啡", "周末", "音乐会",
          "游戏", "跑步", "钢琴", "小说", "面试", "搬家", "感冒", "红包"]
VERBS = ["喜欢", "讨厌", "想去", "提到", "计划", "担心", "推荐", "买了", "忘了", "答应"]
FILLER = "今天天气很好我们一起去公园散步聊了很多关于工作和生活的事情他说下次还要再来"


def title(rng: random.Random, n: int) -> str:
    return f"{rng.choice(SURNAMES)}{rng.choice('明红华丽强军')}{rng.choice(VERBS)}{rng.choice(THINGS)}#{n}"


def content(rng: random.Random) -> str:
    return "".join(rng.choice(FILLER) for _ in range(150))


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    k = min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))
    return values[k]


def ms(values: list[float]) -> str:
    return f"{pct(values, 50) * 1000:8.3f} {pct(values, 99) * 1000:8.3f}"


def diverse_vocabulary() -> list[str]:
    """About 3,000 chat words (the default synonym terms), for titles as varied as real ones."""
    from zcord.core.layout import default_synonyms_bytes
    from zcord.retrieval.synonyms import parse_groups

    return sorted({t for g in parse_groups(default_synonyms_bytes(), "synonyms.json") for t in g
                   if len(t) >= 2 and not t.isascii()})


def build_memory(memdir: Path, nodes: int, history: int, oplog: int, seed: int = 7,
                 vocab: list[str] | None = None) -> None:
    """Write a Memory with `nodes` nodes (a tenth of them roots), `history` change records
    (creates first, then updates) and `oplog` operation-log lines, without going through
    the tools (which would fsync every one)."""
    rng = random.Random(seed)
    t0 = datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=8)))
    store = Store(memdir)
    store.open()
    st = MemoryState()
    roots: list[str] = []
    changes: list[Change] = []
    for n in range(1, nodes + 1):
        at = t0 + timedelta(seconds=n)
        parent = rng.choice(roots) if roots and n % 10 else None
        name = title(rng, n) if vocab is None else \
            f"{rng.choice(SURNAMES)}{rng.choice('明红华丽强军')}的{rng.choice(vocab)}{rng.choice(vocab)}#{n}"
        node = Node(id=f"m{n}", title=name, content=content(rng),
                    keywords=[rng.choice(THINGS), rng.choice(VERBS)], parent_id=parent,
                    created_at=at, updated_at=at)
        st._put_node(node)
        if parent is None:
            roots.append(node.id)
        if len(changes) < history:
            changes.append(Change(change_id=len(changes) + 1, at=at, actor="model", tool="zcor_memory_write",
                                  op_seq=len(changes) + 1, kind="node.create", target=node.id,
                                  after=node.dump()))
    st.next_id = nodes + 1
    ids = list(st.nodes)
    k = nodes
    while len(changes) < history:
        k += 1
        node_id = rng.choice(ids)
        old = st.nodes[node_id]
        new = old.model_copy(update={"content": content(rng), "updated_at": t0 + timedelta(seconds=k)})
        st._put_node(new)
        changes.append(Change(change_id=len(changes) + 1, at=new.updated_at, actor="model",
                              tool="zcor_memory_write", op_seq=len(changes) + 1, kind="node.update",
                              target=node_id, before=old.dump(), after=new.dump()))
    st.history = list(changes)  # save() may seal (clear) the inline list
    store.save(st)
    store.close()
    with open(memdir / OPLOG_FILE, "wb") as f:
        for seq in range(1, max(oplog, len(changes)) + 1):
            if seq <= len(changes):
                c = changes[seq - 1]
                rec = OpRecord(seq=seq, at=c.at, actor="model", tool=c.tool, params={"id": c.target},
                               status="ok", changes=[c.dump()])
            else:
                rec = OpRecord(seq=seq, at=t0 + timedelta(seconds=nodes + seq), actor="model",
                               tool="zcor_memory_read", params={"id": rng.choice(ids)}, status="ok")
            f.write(rec.model_dump_json(by_alias=True).encode() + b"\n")


def build_chain(memdir: Path, depth: int) -> None:
    """A Memory that is one chain m1 › m2 › … › m{depth} (each memory the child of the one
    before), written directly like build_memory."""
    t0 = datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=8)))
    store = Store(memdir)
    store.open()
    st = MemoryState()
    parent = None
    for n in range(1, depth + 1):
        at = t0 + timedelta(seconds=n)
        node = Node(id=f"m{n}", title=f"层{n}", content="x", keywords=["层"], parent_id=parent, created_at=at,
                    updated_at=at)
        st._put_node(node)
        parent = node.id
    st.next_id = depth + 1
    store.save(st)
    store.close()


def timed(fn, samples: int, *, between=None, cpu: list[float] | None = None) -> list[float]:
    """Seconds (wall) each of `samples` calls of fn took; `between`, if given, runs untimed
    after each; with `cpu`, each call's CPU time (this thread's) is appended to it too: the
    machine is shared and wall times under load swing 2×."""
    out = []
    for _ in range(samples):
        c = time.thread_time() if cpu is not None else 0.0
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
        if cpu is not None:
            cpu.append(time.thread_time() - c)
        if between is not None:
            between()
    return out


def lat(values: list[float]) -> str:
    """p50 / p99 in milliseconds."""
    return f"{pct(values, 50) * 1000:.2f} / {pct(values, 99) * 1000:.2f}"


def table(rows: list[list[str]], headers: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(out)


__all__ = ["FILLER", "build_chain", "build_memory", "ms", "pct", "table", "json", "statistics", "THINGS", "VERBS", "title", "content"]
