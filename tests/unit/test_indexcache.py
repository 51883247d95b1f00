"""memory-state.recall.cache: a start loads the retrieval indexes from it only when it belongs
to the snapshot just loaded (through memory-state.cache) and to the same indexing rules;
changes replayed from the journal then update the loaded indexes. Otherwise (stale,
truncated, another Memory's, a symbolic link, left by a killed writer, other rules) it is
ignored and the indexes are built. Either way the indexes and every recall answer are the
same as a build's (seeded comparisons over random Memories and random batches)."""

from __future__ import annotations

import json
import os
import random
import shutil

import pytest

import zcord.core.indexcache as indexcache
import zcord.core.nodecache as nodecache
from zcord.core import text
from zcord.core.layout import STATE_FILE
from zcord.core.store import Store
from zcord.service import Service

CJK_WORDS = ["奶茶", "篮球", "电影", "猫咪", "火锅", "旅行", "考试", "加班", "生日", "咖啡", "周末", "音乐会",
             "小明", "阿珍", "王老师", "后端", "爬山", "包厢", "ktv包厢", "iphone15"]
LATIN_WORDS = ["Bob", "likes", "running", "studies", "dogs", "tea", "coffee", "mp3", "Caroline", "hiking",
               "ＡＢＣ", "Straße"]


@pytest.fixture(autouse=True)
def small_memories_cached(monkeypatch):
    monkeypatch.setattr(nodecache, "MIN_NODES", 3)


def phrase(rng: random.Random, n: int) -> str:
    parts = []
    for _ in range(n):
        parts.append(rng.choice(CJK_WORDS) if rng.random() < 0.6 else rng.choice(LATIN_WORDS))
        parts.append(rng.choice(["", " ", "的", "，", "了"]))
    return "".join(parts).strip() or "空"


def build_random(memdir, clock, seed: int, nodes: int = 60) -> None:
    """A random Memory, snapshotted: creates (some under a parent, some with keywords),
    updates, supersedes and deletes."""
    rng = random.Random(seed)
    with Service(memdir, clock=clock) as svc:
        ids: list[str] = []

        def call(tool, args):
            return svc.call(tool, args, actor="operator")

        for _ in range(nodes):
            args = {"title": phrase(rng, rng.randint(1, 4)), "content": phrase(rng, 6)}
            if ids and rng.random() < 0.3:
                args["parentId"] = rng.choice(ids)
            if rng.random() < 0.5:
                args["keywords"] = [rng.choice(CJK_WORDS + LATIN_WORDS) for _ in range(rng.randint(1, 3))]
            ids.append(call("zcor_memory_write", args)["id"])
        mutate(svc, rng, ids, 20)
        svc.snapshot()


def mutate(svc, rng: random.Random, ids: list[str], n: int) -> None:
    from zcord.core.errors import ZcorError

    for _ in range(n):
        k = rng.random()
        target = rng.choice(ids)
        if target not in svc.state.nodes or svc.state.nodes[target].superseded_by is not None:
            continue
        if k < 0.5:
            svc.call("zcor_memory_write", {"id": target, "title": phrase(rng, 3), "content": "改过",
                                           "keywords": [rng.choice(CJK_WORDS)]}, actor="operator")
        elif k < 0.7:
            svc.call("zcor_memory_write", {"title": phrase(rng, 2), "content": "新的"}, actor="operator")
        elif k < 0.85:
            other = rng.choice(ids)
            if other != target:
                try:
                    svc.call("zcor_memory_supersede", {"ids": [target], "replacementId": other, "reason": "旧了"},
                             actor="operator")
                except ZcorError:
                    pass  # the replacement is superseded, or a cycle: refused, as it should be
        else:
            try:
                svc.call("zcor_memory_delete", {"id": target}, actor="operator")
            except ZcorError:
                pass  # has children or is linked: refused, as it should be


def indexes(state) -> dict:
    """The retrieval indexes in a comparable form (ids as sets, not by how they are held)."""
    state.ensure_index()
    tables = {}
    for name in ("title_grams", "title_words", "keyword_ids", "title_keys", "title_stems", "keyword_stems",
                 "title_stem_keys"):
        table = getattr(state, name)
        tables[name] = {k: frozenset(table.get(k)) for k in dict.keys(table)}
    return {"index": {i: (x.updated, x.title_len, x.norm_title, x.title_seq) for i, x in state.index.items()},
            **tables, "mixed": dict(state.mixed_keywords), "count": state.current_count,
            "lensum": state.title_len_sum, "words": set(state.pending_words),
            "stems": state.stem_count}


def built(memdir) -> dict:
    """The indexes as a build makes them (the state file parsed, the journal replayed)."""
    svc = Service(memdir)
    real = indexcache.read
    indexcache.read = lambda *a: False
    try:
        svc.open()
    finally:
        indexcache.read = real
    try:
        assert not svc.index_cache_used
        return indexes(svc.state)
    finally:
        svc.snapshots.changes = 0  # leave the directory as it is (no snapshot at close)
        svc.close()


def opened(memdir) -> tuple[bool, dict]:
    svc = Service(memdir).open()
    try:
        return svc.index_cache_used, indexes(svc.state)
    finally:
        svc.snapshots.changes = 0
        svc.close()


def batches(seed: int, n: int = 12) -> list[list[dict]]:
    rng = random.Random(seed)
    return [[{"text": phrase(rng, rng.randint(2, 12)), "origin": "external"} for _ in range(rng.randint(1, 4))]
            for _ in range(n)]


def answers(memdir, seed: int) -> tuple[bool, list]:
    """Recall answers (both rankings, and the context header) for random batches."""
    svc = Service(memdir).open()
    try:
        used = svc.index_cache_used
        out = []
        for ranking in ("weighted", "seed"):
            svc.update_config({"recallRanking": ranking})
            for i, events in enumerate(batches(seed)):
                out.append(svc.recall(f"s{i}", events))
                out.append(json.dumps(svc.context(f"s{i}"), sort_keys=True, ensure_ascii=False))
        return used, out
    finally:
        svc.snapshots.changes = 0
        svc.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_start_loads_the_indexes_a_build_would_make_and_replays_the_journal_into_them(memdir, clock, seed):
    build_random(memdir, clock, seed)
    assert (memdir / indexcache.CACHE_FILE).exists()
    # changes journaled after the snapshot (as after a crash): replayed into the loaded indexes
    rng = random.Random(seed + 100)
    svc = Service(memdir, clock=clock).open()
    ids = list(svc.state.nodes)
    mutate(svc, rng, ids, 15)
    svc.snapshots.changes = 0  # no snapshot at close: the next start replays these
    svc.close()
    used, got = opened(memdir)
    assert used
    want = built(memdir)
    assert got == want
    used_a, recall_a = answers(memdir, seed)
    (memdir / indexcache.CACHE_FILE).unlink()
    used_b, recall_b = answers(memdir, seed)
    assert (used_a, used_b) == (True, False)
    assert recall_a == recall_b
    assert any(recall_a[::2])  # the batches do recall something


@pytest.mark.parametrize("damage", ["stale", "truncated", "bit flip", "garbage", "empty", "another Memory",
                                    "symlink", "killed writer", "other rules", "other code", "state by JSON"])
def test_a_stale_damaged_or_foreign_cache_is_ignored_and_the_indexes_are_built(memdir, clock, damage, tmp_path,
                                                                                monkeypatch):
    build_random(memdir, clock, 7)
    cache = memdir / indexcache.CACHE_FILE
    data = cache.read_bytes()
    if damage == "stale":  # left by an older snapshot (a crash before the new one was written)
        with Service(memdir, clock=clock) as svc:
            svc.call("zcor_memory_write", {"id": "m2", "title": "完全不同的标题", "content": "x"}, actor="operator")
            svc.snapshot()
        cache.write_bytes(data)
    elif damage == "truncated":
        cache.write_bytes(data[: len(data) - 30])
    elif damage == "bit flip":
        i = len(data) - 50
        cache.write_bytes(data[:i] + bytes([data[i] ^ 4]) + data[i + 1:])
    elif damage == "garbage":
        cache.write_bytes(b"zcor memory-state.recall.cache 1\n{}\nnothing")
    elif damage == "empty":
        cache.write_bytes(b"")
    elif damage == "another Memory":  # the same kind of Memory elsewhere: its cache names its own files
        other = tmp_path / "other"
        build_random(other, clock, 7)
        shutil.copyfile(other / indexcache.CACHE_FILE, cache)
    elif damage == "symlink":
        (tmp_path / "elsewhere").write_bytes(data)
        cache.unlink()
        cache.symlink_to(tmp_path / "elsewhere")
    elif damage == "killed writer":
        # killed while writing: a temporary file (removed at the next start), and the state file
        # of a snapshot whose caches were never written (the old ones name the old state file)
        (memdir / f".{indexcache.CACHE_FILE}.999999.0123abcd.tmp").write_bytes(data[: len(data) // 2])
        real = indexcache.write
        monkeypatch.setattr(indexcache, "write", lambda *a: None)
        monkeypatch.setattr(nodecache, "write", lambda *a: None)
        with Service(memdir, clock=clock) as svc:
            svc.call("zcor_memory_write", {"id": "m3", "title": "杀掉以前写的", "content": "y"}, actor="operator")
            svc.snapshot()
        monkeypatch.setattr(indexcache, "write", real)
        assert cache.read_bytes() == data
    elif damage == "other rules":  # the folding rules changed (FOLDING_VERSION bumped)
        monkeypatch.setattr(indexcache, "FOLDING_VERSION", text.FOLDING_VERSION + 1)
    elif damage == "other code":  # zcord/core/text.py or indexes.py changed (an upgrade)
        monkeypatch.setattr(indexcache, "_code", [12345])
    elif damage == "state by JSON":  # the memories were not read from memory-state.cache
        (memdir / nodecache.CACHE_FILE).unlink()
    used, got = opened(memdir)
    assert not used
    assert got == built(memdir)
    assert not list(memdir.glob(f".{indexcache.CACHE_FILE}.*.tmp"))
    used_a, recall_a = answers(memdir, 7)
    assert not used_a
    if damage not in ("state by JSON", "other rules"):
        return
    # once rewritten (a snapshot of the same state), it is used, and answers the same
    monkeypatch.undo()
    monkeypatch.setattr(nodecache, "MIN_NODES", 3)
    with Service(memdir) as svc:
        svc.state.ensure_index()
        svc.snapshot()
    used_b, recall_b = answers(memdir, 7)
    assert used_b and recall_a == recall_b


def test_a_large_memory_started_without_the_cache_writes_it_after_its_warm_up(memdir, clock):
    build_random(memdir, clock, 11)
    (memdir / indexcache.CACHE_FILE).unlink()
    svc = Service(memdir, clock=clock).open()
    try:
        assert svc.store.cache_used and not svc.index_cache_used
        svc.warm()
        svc.snapshots.settle()
    finally:
        svc.close()
    used, got = opened(memdir)
    assert used and got == built(memdir)


def test_a_snapshot_of_a_state_whose_indexes_are_not_built_removes_the_old_cache(memdir, clock):
    build_random(memdir, clock, 12)
    svc = Service(memdir, clock=clock).open()
    try:
        real = indexcache.read
        assert svc.index_cache_used
        svc.state._unindexed = list(svc.state.nodes)  # as right after a load without the cache
        svc.snapshots.save(svc.snapshots.pos())
        assert not (memdir / indexcache.CACHE_FILE).exists()
        assert real is indexcache.read
    finally:
        svc.snapshots.changes = 0
        svc.close()


def test_the_cache_is_bound_to_the_node_cache_and_smaller_than_the_state_file(memdir, clock):
    build_random(memdir, clock, 13, nodes=200)
    raw = (memdir / indexcache.CACHE_FILE).read_bytes()
    assert raw.startswith(indexcache.MAGIC)
    header = json.loads(raw[len(indexcache.MAGIC):raw.index(b"\n", len(indexcache.MAGIC))])
    node_raw = (memdir / nodecache.CACHE_FILE).read_bytes()
    node_header = json.loads(node_raw[len(nodecache.MAGIC):node_raw.index(b"\n", len(nodecache.MAGIC))])
    assert header["nodes"] == node_header
    assert header["fingerprint"] == indexcache.fingerprint()
    assert header["fingerprint"]["folding"] == text.FOLDING_VERSION and header["fingerprint"]["code"]
    assert len(raw) <= os.path.getsize(memdir / STATE_FILE)


def test_a_cache_that_cannot_be_written_does_not_fail_the_snapshot(memdir, clock, monkeypatch, caplog):
    build_random(memdir, clock, 14)

    def full(path, data, mode=0o640, sync=True):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(indexcache, "atomic_write", full)
    with Service(memdir, clock=clock) as svc:
        svc.call("zcor_memory_write", {"id": "m2", "title": "又改了", "content": "z"}, actor="operator")
        svc.state.ensure_index()
        assert svc.snapshot()["changeId"] > 0
    assert "could not write memory-state.recall.cache (No space left on device)" in caplog.text
    assert not (memdir / indexcache.CACHE_FILE).exists()
    assert Store(memdir).load().nodes["m2"].title == "又改了"


def test_every_attribute_of_the_retrieval_indexes_is_restored_by_the_cache():
    """A table added to RetrievalIndexes must be written and read by indexcache too (else a
    start would load indexes without it)."""
    from zcord.core.indexes import RetrievalIndexes

    held = set(RetrievalIndexes.__annotations__) - {"nodes", "rank"}
    assert held <= set(indexcache.COVERED), held - set(indexcache.COVERED)
