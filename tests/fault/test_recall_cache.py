"""memory-state.recall.cache with a real daemon: a start after SIGKILL loads the indexes of
the last snapshot and replays the journal into them; a damaged cache is ignored and the
indexes are built; recall over the socket answers the same every way."""

from __future__ import annotations

import random

import pytest

from zcord.core import indexcache

pytestmark = pytest.mark.fault

ENV = {"ZCOR_NODE_CACHE_NODES": "3"}  # the node cache (and so the recall cache) from 3 memories
WORDS = ["奶茶", "篮球", "电影", "猫咪", "火锅", "旅行", "考试", "加班", "生日", "咖啡", "小明", "阿珍", "爬山",
         "hiking", "coffee", "Bob", "mp3", "dogs"]


def phrase(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(WORDS) + rng.choice(["", "的", " ", "了"]) for _ in range(n)).strip()


def write(d, rng: random.Random, n: int) -> None:
    with d.client("operator") as c:
        for _ in range(n):
            args = {"title": phrase(rng, rng.randint(1, 3)), "content": phrase(rng, 5)}
            if rng.random() < 0.5:
                args["keywords"] = [rng.choice(WORDS)]
            c.call_tool("zcor_memory_write", args)


def answers(d, tag: str) -> list:
    rng = random.Random(99)
    with d.client() as c:
        return [c.recall(f"{tag}{i}", [{"text": phrase(rng, rng.randint(2, 8)), "origin": "external"}])
                for i in range(15)]


def test_after_a_kill_the_daemon_loads_the_snapshot_s_indexes_replays_the_journal_and_recalls_the_same(
        make_daemon):
    rng = random.Random(5)
    d = make_daemon().start(env=ENV)
    write(d, rng, 40)
    with d.client("operator") as c:
        c.request("zcor/snapshot", {})
    assert (d.memdir / indexcache.CACHE_FILE).exists()
    write(d, rng, 10)  # journaled after the snapshot
    want = answers(d, "a")
    assert any(want)
    d.kill()
    d.start(env=ENV)
    last = [line for line in d.stderr().splitlines() if "recall ready" in line][-1]
    assert last.endswith("(retrieval indexes from memory-state.recall.cache)")
    assert answers(d, "b") == want
    d.stop()
    data = (d.memdir / indexcache.CACHE_FILE).read_bytes()
    (d.memdir / indexcache.CACHE_FILE).write_bytes(data[:len(data) // 2])  # truncated
    d.start(env=ENV)
    last = [line for line in d.stderr().splitlines() if "recall ready" in line][-1]
    assert last.endswith("(retrieval indexes built)")
    assert answers(d, "c") == want
