"""The operation log's on-disk search index (operations.index.sqlite): exact substring
semantics, filters, paging, and that it is only ever derived from operations.jsonl."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from zcord.core.history_index import record_search_text
from zcord.core.models import OpRecord
from zcord.core.oplog import OpLog
from zcord.core.text import normalize

TZ = timezone(timedelta(hours=8))
T0 = datetime(2026, 5, 1, 10, 0, tzinfo=TZ)
WORDS = ["小王", "爬山", "周末", "香山", "王", "山", "喜欢", "Hiking", "Straße", "ＡＢＣ", "tea", "m1", "m12",
         "qq:42", "a", "é", "猫", "小", "去爬山了", "Bob's", "x\"y", "日本語"]


def record(seq: int, *, minutes: float | None = None, actor: str = "model", tool: str = "zcor_memory_read",
           params: dict | None = None, changes: list | None = None, status: str = "ok") -> OpRecord:
    at = T0 + timedelta(minutes=seq if minutes is None else minutes)
    return OpRecord(seq=seq, at=at, actor=actor, tool=tool, params=params or {}, status=status,
                    changes=changes or [])


def random_records(rng: random.Random, n: int, monotone: bool = False) -> list[OpRecord]:
    """n records; times random (the clock went back and forth), or never going back (ties kept)."""
    out = []
    times = sorted(rng.randint(0, 50) for _ in range(n)) if monotone else [rng.randint(0, 50) for _ in range(n)]
    for seq in range(1, n + 1):
        text = "".join(rng.choice(WORDS) + rng.choice(["", " ", "，", "\n"]) for _ in range(rng.randint(1, 6)))
        if rng.random() < 0.3:
            node = {"id": f"m{seq}", "title": text[:10], "content": text}
            out.append(record(seq, minutes=times[seq - 1], tool="zcor_memory_write", actor=rng.choice(["model", "operator"]),
                              params={"title": text[:10], "content": text},
                              changes=[{"changeId": seq, "kind": "node.create", "target": f"m{seq}", "after": node}]))
        else:
            out.append(record(seq, minutes=times[seq - 1], params={"keywords": [text]},
                              actor=rng.choice(["model", "operator"]),
                              tool=rng.choice(["zcor_memory_query", "zcor_memory_read"])))
    return out


def oracle(records: list[dict], keywords: list[str], start=None, end=None, **f) -> list[int]:
    """The seqs a query must return, in order, by brute force over the records."""
    keys = [normalize(k) for k in keywords]
    hits = []
    for i, r in enumerate(records):
        at = datetime.fromisoformat(r["at"]).timestamp()
        if start is not None and at < start or end is not None and at > end:
            continue
        if f.get("changes_only") and not r["changes"]:
            continue
        if f.get("actor") and r["actor"] != f["actor"] or f.get("tool") and r["tool"] != f["tool"]:
            continue
        if f.get("target") and f["target"] not in {c.get("target") for c in r["changes"]} | {
                r["params"].get("id"), r["params"].get("personId")}:
            continue
        text = record_search_text(r)
        if all(k in text for k in keys):
            hits.append((at, i, r["seq"]))
    return [s for _, _, s in sorted(hits, reverse=True)]


@pytest.fixture
def logdir(tmp_path) -> Path:
    return tmp_path


def open_log(d: Path) -> OpLog:
    log = OpLog(d / "operations.jsonl")
    log.open()
    return log


def fill(d: Path, records: list[OpRecord]) -> list[dict]:
    log = open_log(d)
    try:
        for r in records:
            log.append(r, durable=False)
    finally:
        log.close()
    return [json.loads(x) for x in (d / "operations.jsonl").read_bytes().splitlines()]


def seqs(log: OpLog, keywords: list[str], start=None, end=None, limit: int = 10**6, offset: int = 0,
         **f) -> tuple[list[int], int]:
    items, total = log.query(keywords, start, end, limit, offset, **f)
    return [i["seq"] for i in items], total


@pytest.mark.parametrize("monotone", [True, False], ids=["time-ordered", "clock-went-back"])
def test_substrings_of_every_length_match_exactly_as_the_scan_did(logdir, monotone):
    rng = random.Random(13)
    dumped = fill(logdir, random_records(rng, 150, monotone))
    texts = [record_search_text(r) for r in dumped]
    probes = set(WORDS) | {"小王 爬", "山，", "ss", "STRASSE", "ｍ1", "王爬", "q", "zcor_memory_w", "不在", "\n",
                           "2026-05-01", "zz", "é", "E"}
    for t in rng.sample(texts, 20):  # random substrings of real texts, 1 to 5 characters
        for n in (1, 2, 3, 5):
            i = rng.randrange(max(1, len(t) - n))
            probes.add(t[i:i + n])
    log = open_log(logdir)
    try:
        for p in sorted(probes):
            want = oracle(dumped, [p])
            assert seqs(log, [p]) == (want, len(want)), repr(p)
        for a, b in [("小王", "山"), ("hiking", "王"), ("m1", "tea"), ("爬山", "去爬山了"), ("a", "é")]:
            want = oracle(dumped, [a, b])
            assert seqs(log, [a, b]) == (want, len(want)), (a, b)
    finally:
        log.close()


def test_normalized_keywords_and_text(logdir):
    fill(logdir, [record(1, params={"content": "Große Straße"}), record(2, params={"content": "ＡＢＣ全角"}),
                  record(3, params={"content": "pla\x00in"}), record(4, params={"content": "pla"})])
    log = open_log(logdir)
    try:
        assert seqs(log, ["STRASSE"]) == ([1], 1)
        assert seqs(log, ["abc"]) == ([2], 1)  # full-width text, half-width keyword
        assert seqs(log, ["ａｂｃ全"]) == ([2], 1)
        assert seqs(log, ["Ss"]) == ([1], 1)  # two characters: the pair table
        assert seqs(log, ["ß"]) == ([1], 1)  # folds to "ss"
        assert seqs(log, [" "]) == ([1], 1)  # a space is a character like any other
        assert seqs(log, ["   "]) == ([], 0)
        assert seqs(log, ["a\x00i"]) == ([3], 1) and seqs(log, ["pla"]) == ([4, 3], 2)
    finally:
        log.close()


@pytest.mark.parametrize("monotone", [True, False], ids=["time-ordered", "clock-went-back"])
def test_filters_time_and_paging_totals(logdir, monotone):
    rng = random.Random(7)
    dumped = fill(logdir, random_records(rng, 200, monotone))
    log = open_log(logdir)
    start, end = (T0 + timedelta(minutes=10)).timestamp(), (T0 + timedelta(minutes=30)).timestamp()
    try:
        for kw, f in [([], {"changes_only": True}), ([], {"actor": "operator"}), (["山"], {"tool": "zcor_memory_query"}),
                      ([], {"target": "m7"}), (["小王"], {"changes_only": True, "actor": "model"}), ([], {}),
                      (["hiking"], {}), (["hiking", "王"], {}), (["去爬山了"], {"changes_only": True}),
                      (["tea"], {"actor": "model", "tool": "zcor_memory_write"}), ([], {"tool": "no such tool"})]:
            want = oracle(dumped, kw, start, end, **f)
            got, total = seqs(log, kw, start, end, **f)
            assert (got, total) == (want, len(want)), (kw, f)
            for s_, e_ in ((None, None), (start, None), (None, end), (end, start)):
                want_all = oracle(dumped, kw, s_, e_, **f)
                assert seqs(log, kw, s_, e_, **f) == (want_all, len(want_all)), (kw, f, s_, e_)
            assert log.index.meta["monotone"] == int(monotone)  # so both query paths are exercised
            pages = []
            for off in range(0, total + 7, 7):
                page, t = seqs(log, kw, start, end, limit=7, offset=off, **f)
                assert t == total
                pages += page
            assert pages == want
    finally:
        log.close()


def test_totals_stay_exact_as_the_log_grows(logdir):
    """A query's total is remembered and later only the rows logged since are counted: asked
    again after more records (as every history query is itself logged), paged or bounded by
    time, it still gives the brute-force answer."""
    rng = random.Random(21)
    recs = random_records(rng, 240, monotone=True)
    fill(logdir, recs[:90])
    log = open_log(logdir)
    start, end = (T0 + timedelta(minutes=12)).timestamp(), (T0 + timedelta(minutes=35)).timestamp()
    queries = [([], {"changes_only": True}), (["山"], {}), (["hiking"], {}), (["hiking", "王"], {}),
               (["小王"], {"actor": "model"}), (["去爬山了"], {"changes_only": True}), (["tea", "m1"], {})]
    try:
        for upto in (90, 120, 121, 180, 240):
            for r in recs[log.last_seq:upto]:
                log.append(r, durable=False)
            dumped = [json.loads(x) for x in (logdir / "operations.jsonl").read_bytes().splitlines()]
            for kw, f in queries:
                for s_, e_ in ((None, None), (start, None), (None, end), (start, end)):
                    want = oracle(dumped, kw, s_, e_, **f)
                    assert seqs(log, kw, s_, e_, **f) == (want, len(want)), (upto, kw, f, s_, e_)
                    page, total = seqs(log, kw, s_, e_, limit=5, offset=5, **f)
                    assert (page, total) == (want[5:10], len(want)), (upto, kw, f, s_, e_)
        assert log.index.meta["monotone"] == 1 and log.queries.totals  # the remembering path was the one taken
    finally:
        log.close()


def test_the_index_is_a_file_beside_the_log_and_survives_a_restart(logdir):
    dumped = fill(logdir, [record(i, params={"id": f"m{i}"}) for i in range(1, 30)])
    log = open_log(logdir)
    assert seqs(log, ["m2"])[1] == len(oracle(dumped, ["m2"]))
    log.close()
    index = logdir / "operations.index.sqlite"
    assert index.is_file() and oct(index.stat().st_mode & 0o777) == "0o640"
    rows = sqlite3.connect(index).execute("SELECT count(*) FROM ops").fetchone()[0]
    assert rows == 29
    log = open_log(logdir)
    try:
        assert log.count() == 29 and log.last_seq == 29
        log.append(record(30, params={"id": "m2x"}), durable=False)
        assert seqs(log, ["m2"])[0][0] == 30  # caught up before the query
        assert log.count() == 30
    finally:
        log.close()


def changed(seq: int, change_id: int) -> OpRecord:
    return record(seq, tool="zcor_memory_write",
                  changes=[{"changeId": change_id, "kind": "node.create", "target": f"m{seq}", "after": {"t": "x"}}])


def test_open_takes_last_seq_and_change_id_from_the_index_and_the_tail(logdir):
    fill(logdir, [changed(1, 1), changed(2, 2), *[record(i) for i in range(3, 200)]])
    log = open_log(logdir)
    log.warm()  # indexed
    log.append(changed(200, 3), durable=True)
    log.append(record(201), durable=False)
    log.close()  # the last two are not indexed yet (no indexer thread, no query)
    log = open_log(logdir)
    try:
        assert (log.last_seq, log.last_change_id) == (201, 3)
    finally:
        log.close()
    # everything after the index's last change is reads: the change id comes from the index
    fill(logdir, [record(i) for i in range(202, 260)])
    log = open_log(logdir)
    log.warm()
    log.close()
    log = open_log(logdir)
    try:
        assert (log.last_seq, log.last_change_id, log.count()) == (259, 3, 259)
    finally:
        log.close()


@pytest.mark.parametrize("damage", ["delete", "garbage", "truncate_log", "other_log", "rewrite_last"])
def test_a_missing_damaged_or_foreign_index_is_rebuilt(logdir, damage, caplog):
    rng = random.Random(3)
    records = random_records(rng, 80)
    dumped = fill(logdir, records)
    log = open_log(logdir)
    log.warm()
    log.close()
    path = logdir / "operations.jsonl"
    index = logdir / "operations.index.sqlite"
    if damage == "delete":
        for p in logdir.glob("operations.index.sqlite*"):
            p.unlink()
    elif damage == "garbage":
        for p in logdir.glob("operations.index.sqlite-*"):
            p.unlink()
        index.write_bytes(b"this is not a database" * 100)
    elif damage == "truncate_log":  # the log lost its tail (the index covered more)
        lines = path.read_bytes().splitlines(keepends=True)[:50]
        path.write_bytes(b"".join(lines))
        dumped = dumped[:50]
    elif damage == "other_log":  # another log, longer, at the same path
        (logdir.parent / "other").mkdir()
        dumped = fill(logdir.parent / "other", random_records(random.Random(4), 120))
        os.replace(logdir.parent / "other" / "operations.jsonl", path)
    elif damage == "rewrite_last":  # same length and head, the last indexed record differs
        data = bytearray(path.read_bytes())
        i = data.rindex(b'"tool":"zcor_memory_')
        data[i + 20:i + 24] = b"READ" if data[i + 20:i + 24] != b"READ" else b"QUER"
        path.write_bytes(bytes(data))
        dumped = [json.loads(x) for x in path.read_bytes().splitlines()]
    log = open_log(logdir)
    try:
        for kw in ([], ["山"], ["小王"], ["hiking"]):
            want = oracle(dumped, kw)
            assert seqs(log, kw) == (want, len(want)), kw
        assert log.count() == len(dumped)
        assert log.last_seq == max(r["seq"] for r in dumped)
    finally:
        log.close()
    assert index.is_file() and not index.is_symlink()
    if damage != "delete":
        assert "rebuilding" in caplog.text


def test_a_symlinked_index_is_never_followed(logdir, tmp_path_factory):
    dumped = fill(logdir, [record(i, params={"id": f"m{i}"}) for i in range(1, 20)])
    victim = tmp_path_factory.mktemp("elsewhere") / "victim.db"
    victim.write_bytes(b"keep me")
    for p in logdir.glob("operations.index.sqlite*"):
        p.unlink()
    (logdir / "operations.index.sqlite").symlink_to(victim)
    (logdir / "operations.index.sqlite-wal").symlink_to(victim)
    log = open_log(logdir)
    try:
        assert seqs(log, ["m1"]) == (oracle(dumped, ["m1"]), len(oracle(dumped, ["m1"])))
    finally:
        log.close()
    assert victim.read_bytes() == b"keep me"
    assert not (logdir / "operations.index.sqlite").is_symlink()
    assert (logdir / "operations.index.sqlite").is_file()


def test_an_index_that_cannot_be_written_falls_back_to_scanning(logdir, monkeypatch, caplog):
    dumped = fill(logdir, random_records(random.Random(5), 60))
    log = open_log(logdir)
    try:
        def full(*a):
            raise sqlite3.OperationalError("database or disk is full")

        monkeypatch.setattr(log.index, "_catch_up", full)
        for kw, f in [(["山"], {}), ([], {"changes_only": True}), (["m1"], {"actor": "model"})]:
            want = oracle(dumped, kw, **f)
            assert seqs(log, kw, **f) == (want, len(want))
        assert "cannot be updated" in caplog.text
    finally:
        log.close()


KILLED_WRITER = r"""
import sys, time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zcord.core.models import OpRecord
from zcord.core.oplog import OpLog
log = OpLog(Path(sys.argv[1]))
log.open()
t0 = datetime(2026, 5, 1, tzinfo=timezone.utc)
seq = log.last_seq
for i in range(int(sys.argv[2])):
    seq += 1
    changes = [{"changeId": seq, "kind": "node.create", "target": f"m{seq}", "after": {"c": "爬山" * 30}}] \
        if seq % 10 == 0 else []
    log.append(OpRecord(seq=seq, at=t0 + timedelta(seconds=seq), actor="model", tool="zcor_memory_read",
                        params={"id": f"m{seq}", "note": "小王去爬山了 hiking"}, status="ok", changes=changes),
               durable=False)
print("appended", flush=True)
log.warm()  # indexing: killed somewhere in here
print("indexed", flush=True)
time.sleep(60)
"""


def test_catch_up_after_a_kill_mid_way(logdir):
    path = logdir / "operations.jsonl"
    for n, delay in ((4000, 0.05), (2000, 0.2)):
        child = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(path), str(n)],
                                 stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "appended"
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    dumped = [json.loads(x) for x in path.read_bytes().splitlines()]
    assert len(dumped) == 6000
    log = open_log(logdir)
    try:
        assert (log.last_seq, log.last_change_id) == (6000, 6000)
        assert log.count() == 6000
        for kw, f in [(["小王"], {}), (["爬山"], {"changes_only": True}), (["m123"], {}), ([], {"target": "m5990"})]:
            want = oracle(dumped, kw, **f)
            got, total = seqs(log, kw, limit=50, **f)
            assert (got, total) == (want[:50], len(want)), (kw, f)
    finally:
        log.close()


def test_a_query_during_a_long_build_is_told_to_come_back(logdir, monkeypatch):
    """The first start on a large log: the index builds in the background, in steps; a history
    query meanwhile gets `busy` at once instead of holding zcord up, then answers."""

    from zcord.core import history_index as H
    from zcord.core import oplog as O

    dumped = fill(logdir, random_records(random.Random(9), 400, monotone=True))
    for p in logdir.glob("operations.index.sqlite*"):
        p.unlink()
    monkeypatch.setattr(H, "QUERY_CATCH_UP", 2000)
    monkeypatch.setattr(H, "BUILD_STEP", 5000)
    monkeypatch.setattr(H, "READ_CHUNK", 4000)
    monkeypatch.setattr(O, "READ_CHUNK", 4000)
    real = H.HistoryIndex._index_block

    def slow(self, *a):  # a step of the build takes a while
        time.sleep(0.03)
        return real(self, *a)

    monkeypatch.setattr(H.HistoryIndex, "_index_block", slow)
    log = open_log(logdir)
    try:
        log.warm(background=True)
        t = time.monotonic()
        with pytest.raises(H.IndexBuilding) as busy:
            log.query(["山"], None, None, 20, 0)
        assert time.monotonic() - t < 5  # at most one step waited for, not the whole build
        assert busy.value.code == "busy" and "% done" in busy.value.message
        assert busy.value.data["retryAfterSeconds"] > 0
        log.warm()  # waits for the build (in steps)
        want = oracle(dumped, ["山"])
        assert seqs(log, ["山"]) == (want, len(want))
    finally:
        log.close()


def test_close_while_warm_starts_its_thread_waits_for_the_start(logdir, monkeypatch):
    """A SIGTERM racing the indexer's start: close() joined a thread not yet started
    ("cannot join thread before it is started") and the daemon died on its way out."""
    import threading

    from zcord.core import history_index

    started = threading.Event()
    real_thread = threading.Thread
    real_start = threading.Thread.start

    def slow_start(self):
        started.set()
        time.sleep(0.3)  # close() runs in this window
        real_start(self)

    class SlowThread(real_thread):
        start = slow_start

    log = open_log(logdir)
    log.append(record(1), durable=False)
    warmer = real_thread(target=log.warm, kwargs={"background": True})
    monkeypatch.setattr(history_index.threading, "Thread", SlowThread)  # the indexer's thread only
    warmer.start()
    assert started.wait(5)
    log.close()  # raised RuntimeError before the fix
    warmer.join(5)
    assert not warmer.is_alive()
