"""memory-state.cache: a start reads the memories from it only when it belongs to the state
file as it is; otherwise the state file is parsed, and the loaded Memory is the same."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone

import pytest

import zcord.core.fastload as fastload
import zcord.core.nodecache as nodecache
from zcord.core.layout import STATE_FILE
from zcord.core.parsing import parse_state
from zcord.core.serializer import StateSerializer
from zcord.core.store import Store
from zcord.service import Service


@pytest.fixture(autouse=True)
def small_memories_cached(monkeypatch):
    monkeypatch.setattr(nodecache, "MIN_NODES", 3)


@pytest.fixture
def used(monkeypatch):
    """Which way each load went: "cache" or "json"."""
    ways: list[str] = []
    real = fastload.state_of_cache

    def spy(memdir):
        state = real(memdir)
        ways.append("json" if state is None else "cache")
        return state

    monkeypatch.setattr(fastload, "state_of_cache", spy)
    return ways


def build(memdir, clock, child_first: bool = True) -> None:
    """A Memory with what the loader must get right: a tree (parents before and after their
    children in file order), a supersede in both directions, keywords shared between
    memories, times with microseconds and other offsets, relationships, important marks."""
    with Service(memdir, clock=clock) as svc:
        def w(**a):
            return svc.call("zcor_memory_write", a, actor="operator")["id"]

        root = w(title="家人", content="家里的人", keywords=["家人"])
        mom = w(title="妈妈的生日", content="三月十二日，喜欢百合花", parentId=root, keywords=["生日", "家人"])
        old = w(title="Bob likes tea", content="green tea 🍵", keywords=["tea"])
        new = w(title="Bob likes coffee", content="since May", keywords=["coffee", "家人"])
        dup = w(title="Bob likes coffee!", content="a later duplicate")
        svc.call("zcor_memory_supersede", {"ids": [old, dup], "replacementId": new, "reason": "changed"},
                 actor="operator")
        if child_first:  # a child that comes before its parent in the file
            child = w(title="moved", content="y")
            later = w(title="以后的", content="x")
            svc.call("zcor_memory_write", {"id": child, "title": "moved", "content": "y", "parentId": later},
                     actor="operator")
        else:
            later = w(title="以后的", content="x")
            w(title="moved", content="y", parentId=later)
        svc.call("zcor_memory_important", {"id": mom, "important": True}, actor="operator")
        svc.call("zcor_relationship_write", {"personId": "qq:42", "name": "小王", "affinity": 30,
                                             "relationship": "同事", "reason": "帮过忙", "memoryNodeId": mom}, actor="operator")
        svc.state.nodes[new] = svc.state.nodes[new].model_copy(update={
            "created_at": datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=timezone(timedelta(hours=-5, minutes=-30)))})
        svc.snapshot()


def loaded_both_ways(memdir):
    via_cache = Store(memdir).load()
    raw = (memdir / STATE_FILE).read_bytes()
    via_json = parse_state(raw, STATE_FILE, memdir / "history")
    return via_cache, via_json


def same(a, b) -> None:
    assert StateSerializer().encode(a) == StateSerializer().encode(b)
    assert list(a.nodes.values()) == list(b.nodes.values())
    assert [type(n) for n in a.nodes.values()] == [type(n) for n in b.nodes.values()]
    assert [n.created_at.utcoffset() for n in a.nodes.values()] == [n.created_at.utcoffset() for n in b.nodes.values()]
    assert a.children == b.children and a.replaced == b.replaced and a.rank == b.rank


@pytest.mark.parametrize("child_first", [False, True], ids=["parents first", "a child before its parent"])
def test_a_start_reads_the_memories_from_the_cache_and_gets_the_same_memory(memdir, clock, used, child_first):
    build(memdir, clock, child_first)
    assert (memdir / nodecache.CACHE_FILE).exists()
    a, b = loaded_both_ways(memdir)
    assert used == ["cache"]
    same(a, b)
    with Service(memdir, clock=clock) as svc:  # and a Service works on it as on any
        assert svc.call("zcor_memory_read", {"id": "m2"}, actor="operator")["title"] == "妈妈的生日"
        assert svc.call("zcor_memory_write", {"title": "next", "content": "z"}, actor="operator")["id"] == "m8"


def test_a_cache_left_by_an_older_snapshot_is_not_used(memdir, clock, used):
    """A crash between the state file's rename and the cache's leaves the older cache: it
    names another file (inode, modification time), so the state file is parsed."""
    build(memdir, clock)
    older = (memdir / nodecache.CACHE_FILE).read_bytes()
    with Service(memdir, clock=clock) as svc:
        svc.call("zcor_memory_write", {"id": "m2", "title": "妈妈的生日", "content": "改了"}, actor="operator")
        svc.snapshot()
    (memdir / nodecache.CACHE_FILE).write_bytes(older)
    used.clear()
    a, b = loaded_both_ways(memdir)
    assert used == ["json"]
    assert a.nodes["m2"].content == "改了"
    same(a, b)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "bit flip", "empty", "symlink", "state edited"])
def test_a_damaged_or_foreign_cache_is_ignored(memdir, clock, used, damage, tmp_path):
    build(memdir, clock)
    cache = memdir / nodecache.CACHE_FILE
    data = cache.read_bytes()
    if damage == "garbage":
        cache.write_bytes(b"not a cache at all")
    elif damage == "truncated":
        cache.write_bytes(data[: len(data) - 20])
    elif damage == "bit flip":
        i = len(data) - 40
        cache.write_bytes(data[:i] + bytes([data[i] ^ 1]) + data[i + 1:])
    elif damage == "empty":
        cache.write_bytes(b"")
    elif damage == "symlink":
        (tmp_path / "elsewhere").write_bytes(data)
        cache.unlink()
        cache.symlink_to(tmp_path / "elsewhere")
    elif damage == "state edited":  # by hand, in place: same inode and size, new modification time
        state = memdir / STATE_FILE
        raw = state.read_bytes()
        with open(state, "r+b") as f:
            f.write(raw.replace("百合花".encode(), "玫瑰花".encode(), 1))  # in the memories only
        os.utime(state, ns=(os.stat(state).st_atime_ns, os.stat(state).st_mtime_ns + 1_000_000))
    a, b = loaded_both_ways(memdir)
    assert used == ["json"]
    same(a, b)
    if damage == "state edited":
        assert "玫瑰花" in a.nodes["m2"].content


def test_a_small_memory_writes_no_cache_and_removes_an_old_one(memdir, clock, monkeypatch, used):
    build(memdir, clock)
    assert (memdir / nodecache.CACHE_FILE).exists()
    monkeypatch.setattr(nodecache, "MIN_NODES", 100)
    with Service(memdir, clock=clock) as svc:
        svc.call("zcor_memory_write", {"title": "one more", "content": "z"}, actor="operator")
    assert not (memdir / nodecache.CACHE_FILE).exists()
    assert Store(memdir).load().nodes["m8"].title == "one more"


def test_a_cache_that_cannot_be_written_does_not_fail_the_snapshot(memdir, clock, monkeypatch, caplog, used):
    build(memdir, clock)
    real = nodecache.atomic_write

    def full(path, data, mode=0o640, sync=True):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(nodecache, "atomic_write", full)
    with Service(memdir, clock=clock) as svc:
        svc.call("zcor_memory_write", {"id": "m2", "title": "妈妈的生日", "content": "又改了"}, actor="operator")
        assert svc.snapshot()["changeId"] > 0
    assert "could not write memory-state.cache (No space left on device)" in caplog.text  # logger zcord.core.nodecache
    monkeypatch.setattr(nodecache, "atomic_write", real)
    used.clear()
    assert Store(memdir).load().nodes["m2"].content == "又改了"
    assert used == ["json"]


def test_the_cache_header_names_the_state_file(memdir, clock):
    build(memdir, clock)
    data = (memdir / nodecache.CACHE_FILE).read_bytes()
    assert data.startswith(nodecache.MAGIC)
    header = json.loads(data[len(nodecache.MAGIC):data.index(b"\n", len(nodecache.MAGIC))])
    st = os.stat(memdir / STATE_FILE)
    assert (header["ino"], header["size"], header["mtimeNs"], header["count"]) == \
        (st.st_ino, st.st_size, st.st_mtime_ns, 7)
    raw = (memdir / STATE_FILE).read_bytes()
    assert raw[:header["nodesStart"]].endswith(b'"nodes":[\n')
    assert raw[header["nodesEnd"]:].startswith(b'],\n"relationships":[')


def test_a_large_memory_started_without_a_cache_writes_one_after_its_warm_up(memdir, clock, used):
    build(memdir, clock)
    (memdir / nodecache.CACHE_FILE).unlink()
    svc = Service(memdir, clock=clock).open()
    try:
        assert not svc.store.cache_used
        svc.warm()
        svc.snapshots.settle()
    finally:
        svc.close()
    used.clear()
    a, b = loaded_both_ways(memdir)
    assert used == ["cache"]
    same(a, b)


def test_the_state_file_is_fsynced_and_the_cache_is_not(memdir, clock, monkeypatch):
    """The cache is derived and checks itself, so it is written without forcing it to disk
    (less I/O beside the log's fsyncs while a snapshot is written); the state file is durable."""
    build(memdir, clock)
    synced: list[str] = []
    real = os.fsync

    def fsync(fd):
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with Service(memdir, clock=clock) as svc:
        svc.call("zcor_memory_write", {"id": "m2", "title": "妈妈的生日", "content": "改"}, actor="operator")
        svc.snapshots.save(svc.snapshots.pos())  # in this process (the Memory is below the fork threshold)
    state_tmp = [n for n in synced if n.startswith(".memory-state.json.")]
    assert state_tmp and not [n for n in synced if "memory-state.cache" in n]
    assert (memdir / nodecache.CACHE_FILE).exists()


@pytest.mark.parametrize("setting, cached", [("100", False), ("0", True)])
def test_the_cache_threshold_is_read_from_the_environment_when_a_snapshot_is_written(memdir, clock, monkeypatch,
                                                                                     setting, cached):
    """ZCOR_NODE_CACHE_NODES set after zcord was imported still decides (read at each use)."""
    build(memdir, clock)
    monkeypatch.setenv("ZCOR_NODE_CACHE_NODES", setting)
    (memdir / nodecache.CACHE_FILE).unlink()
    with Service(memdir, clock=clock) as svc:
        svc.call("zcor_memory_write", {"id": "m2", "title": "妈妈的生日", "content": "改"}, actor="operator")
        svc.snapshot()
    assert (memdir / nodecache.CACHE_FILE).exists() == cached


def test_a_threshold_that_is_no_number_is_named_and_the_default_used(monkeypatch, caplog):
    monkeypatch.setenv("ZCOR_NODE_CACHE_NODES", "lots")
    assert nodecache.min_nodes() == nodecache.MIN_NODES
    assert "ZCOR_NODE_CACHE_NODES must be a whole number of memories, got 'lots'" in caplog.text
    monkeypatch.delenv("ZCOR_NODE_CACHE_NODES")
    assert nodecache.min_nodes() == nodecache.MIN_NODES == 3  # this file's small_memories_cached


def test_the_cached_load_shares_each_offset_and_a_node_s_equal_times(memdir, clock):
    """What the cache path keeps per memory is no more than the JSON path's: a node's equal
    created and updated times are one object, and every time of one UTC offset has that
    offset's tzinfo object (fromisoformat makes one per time); the rows are used up."""
    build(memdir, clock)
    a, b = loaded_both_ways(memdir)
    same(a, b)
    nodes = list(a.nodes.values())
    for n in nodes:
        if n.created_at == n.updated_at and n.created_at.utcoffset() == n.updated_at.utcoffset():
            assert n.created_at is n.updated_at
    zones: dict[object, object] = {}
    for t in [x for n in nodes for x in (n.created_at, n.updated_at)]:
        assert zones.setdefault(t.utcoffset(), t.tzinfo) is t.tzinfo
    assert len(zones) == 2  # the clock's offset, and the one build() gave m4
    rows = [("m1", "t", "c", (), None, None, "2026-01-02T03:04:05+08:00", "2026-01-02T03:04:06+08:00", None, None)]
    fastload._cached_nodes(rows)
    assert rows == [()]


@pytest.mark.parametrize("text", ["2026-01-02T03:04:05+08:00", "2026-01-02T03:04:05.123456-05:30",
                                  "2026-03-29T01:30:00+00:00", "2025-12-31T23:59:59.5+14:00",
                                  "2026-01-02T03:04:05+05:30:15", "2026-01-02T03:04:05+05:30:15.250000",
                                  "2026-01-02T03:04:05Z", "2026-01-02T03:04:05"])
def test_a_cached_time_is_the_one_fromisoformat_gives(text):
    times = fastload._Times()
    expected = datetime.fromisoformat(text)
    for first in ("2026-01-01T00:00:00" + text[19:].lstrip(".0123456789"), text):  # after another of its offset, and first
        times.parse(first)
        got = times.parse(text)
        assert got == expected and got.isoformat() == expected.isoformat()
        assert got.utcoffset() == expected.utcoffset() and got.tzname() == expected.tzname()
        assert (got.fold, got.microsecond) == (expected.fold, expected.microsecond)
