"""The daemon's warm-up lets calls in often (a short switch interval while it builds
indexes on the interpreter), and gives the interpreter's setting back afterwards."""

from __future__ import annotations

import sys

import pytest

from zcord.transport import server


class FakeService:
    def __init__(self, fail: bool = False):
        self.fail, self.seen = fail, None

    def warm(self) -> None:
        self.seen = sys.getswitchinterval()
        if self.fail:
            raise RuntimeError("disk gone")


@pytest.mark.parametrize("fail", [False, True])
def test_the_warm_up_runs_with_a_short_switch_interval_and_restores_it(fail):
    before = sys.getswitchinterval()
    svc = FakeService(fail)
    server._warm_up(svc)  # a failure is logged, not raised: the first real call retries
    assert svc.seen is not None and svc.seen <= server.WARM_UP_SWITCH_INTERVAL < before
    assert sys.getswitchinterval() == before


class FakeRecallService:
    def __init__(self, nodes: int, cached: bool, fail: bool = False):
        self.index_cache_used, self.fail, self.calls = cached, fail, []
        self.state = type("S", (), {"nodes": dict.fromkeys(range(nodes))})()

    def warm_recall(self) -> None:
        self.calls.append("warm_recall")
        if self.fail:
            raise RuntimeError("jieba gone")


@pytest.mark.parametrize("nodes,cached,extended", [(20_000, False, True), (20_000, True, False), (50, False, False)])
def test_before_ready_recall_is_prepared_and_systemd_given_time_for_an_index_build(monkeypatch, nodes, cached,
                                                                                   extended):
    sent: list[tuple[str, ...]] = []
    monkeypatch.setattr(server.systemd, "notify", lambda *lines: sent.append(lines) or True)
    svc = FakeRecallService(nodes, cached)
    server._ready_to_recall(svc)
    assert svc.calls == ["warm_recall"]
    if extended:
        assert len(sent) == 1 and sent[0][0] == f"EXTEND_TIMEOUT_USEC={60_000_000 + 1_200 * nodes}"
    else:
        assert sent == []


@pytest.mark.parametrize("fail", [False, True])
def test_what_the_load_freed_goes_back_to_the_system_before_ready(monkeypatch, fail):
    """malloc's free pages are handed back once recall is prepared (before READY=1), not only
    after the whole background warm-up: what the load and jieba's dictionary read freed."""
    monkeypatch.setattr(server.systemd, "notify", lambda *lines: True)
    svc = FakeRecallService(10, True, fail=fail)
    monkeypatch.setattr(server, "_trim_heap", lambda: svc.calls.append("trim") or True)
    server._ready_to_recall(svc)
    assert svc.calls == ["warm_recall", "trim"]


def test_a_failure_preparing_recall_is_logged_and_the_daemon_goes_on(monkeypatch, caplog):
    monkeypatch.setattr(server.systemd, "notify", lambda *lines: True)
    server._ready_to_recall(FakeRecallService(10, False, fail=True))  # does not raise
    assert "preparing recall failed" in caplog.text and "jieba gone" in caplog.text


def test_warm_recall_leaves_the_indexes_built_and_jieba_taught(memdir, clock, jieba_words):
    from zcord.core import text
    from zcord.service import Service

    with Service(memdir, clock=clock) as svc:
        svc.call("zcor_memory_write", {"title": "嘎嘣脆鸡店", "content": "x", "keywords": ["嘎嘣脆鸡"]},
                 actor="operator")
    svc = Service(memdir, clock=clock).open()
    try:
        assert not svc.state.indexed
        svc.warm_recall()
        assert svc.state.indexed and not svc.state.pending_words
        assert "嘎嘣脆鸡" in text.analyzer.user_words
    finally:
        svc.close()


def test_the_background_build_gives_way_while_calls_come_and_not_otherwise(memdir, clock, monkeypatch):
    """Service.warm's pause between batches of the query text (issue 24): no wait when no
    call came since the last pause; while calls keep coming, a wait per call seen, and at
    most `most` waits when they never stop."""
    from zcord.service import Service
    from zcord.service import service as service_mod

    svc = Service(memdir, clock=clock).open()
    try:
        waits: list[float] = []
        calls = iter([2, 1, 0, 0, 0])  # calls seen at each of the next waits

        def sleep(s: float) -> None:
            waits.append(s)
            svc.calls.seq += next(calls, 0)

        monkeypatch.setattr(service_mod.time, "sleep", sleep)
        pause = svc.warmup.giving_way(wait=0.004, most=5)
        pause()
        assert waits == []  # nothing came: the build goes straight on
        svc.calls.seq += 1  # a call
        pause()
        assert waits == [0.004] * 3  # +2 during the first wait, +1 during the second, then quiet
        svc.calls.seq += 1
        calls = iter([1] * 100)  # a bot that never stops
        waits.clear()
        pause()
        assert waits == [0.004] * 5
    finally:
        svc.close()


def test_the_warm_up_builds_the_query_text_outside_the_lock(memdir, clock):
    """Service.warm builds every piece of the query text, and zcor_memory_query's answers
    are those of a text built by the query itself."""
    from zcord.service import Service

    with Service(memdir, clock=clock) as svc:
        for i in range(30):
            svc.call("zcor_memory_write", {"title": f"記憶{i}", "content": f"喜歡 {i} 後來"}, actor="operator")
        expected = svc.call("zcor_memory_query", {"keywords": ["喜欢"]}, actor="operator")
    svc = Service(memdir, clock=clock).open()
    try:
        svc.warm()
        assert svc.state._text and all(c.blob is not None for c in svc.state._text.values())
        assert svc.call("zcor_memory_query", {"keywords": ["喜欢"]}, actor="operator")["items"] == \
            expected["items"] != []
    finally:
        svc.close()


def test_a_piece_changed_while_the_warm_up_built_it_is_left_to_the_next_query(memdir, clock, monkeypatch):
    """The warm-up tries each piece of the query text once: a piece whose memories a call
    changed while it was being built (the lock is free meanwhile) is not built again in the
    background (a Memory written all the time would have its pieces built over and over);
    the next query that needs it builds it, and answers with the change."""
    from zcord.core import indexes
    from zcord.service import Service, warmup

    monkeypatch.setattr(indexes, "TEXT_CHUNK", 8)
    with Service(memdir, clock=clock) as svc:
        for i in range(20):
            svc.call("zcor_memory_write", {"title": f"t{i}", "content": f"old {i}"}, actor="operator")
    svc = Service(memdir, clock=clock).open()
    built: list[tuple[str, ...]] = []

    def build(nodes, ids, pause=None):
        built.append(ids)
        if len(built) == 1:  # a write lands in the first piece while it is being built
            svc.call("zcor_memory_write", {"id": ids[0], "title": "t0", "content": "new 0"}, actor="operator")
        return indexes.build_text_piece(nodes, ids, pause)

    monkeypatch.setattr(warmup, "build_text_piece", build)
    try:
        svc.warm()
        assert len(built) == len(set(built)) == len(svc.state._text)  # each piece tried once
        assert svc.call("zcor_memory_query", {"keywords": ["new 0"]}, actor="operator")["total"] == 1
        assert svc.call("zcor_memory_query", {"keywords": ["old 0"]}, actor="operator")["total"] == 0
    finally:
        svc.close()
