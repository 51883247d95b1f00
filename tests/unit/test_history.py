"""zcor_memory_history and the operation log behind it (SPEC §2 history row, §4)."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone

import pytest

from zcord.core.errors import InvalidArgument, NotFound
from zcord.service import Service

TZ = timezone(timedelta(hours=8))
T0 = datetime(2026, 5, 1, 10, 0, tzinfo=TZ)


def node_fields(result: dict) -> dict:
    """A node as stored, from a write/read result."""
    keys = ("id", "title", "content", "keywords", "parentId", "sourceMessage", "createdAt", "updatedAt",
            "supersededBy", "supersedeReason")
    return {k: result[k] for k in keys}


def tools(items: list[dict]) -> list[str]:
    return [i["tool"] for i in items]


def at(item: dict) -> datetime:
    return datetime.fromisoformat(item["at"])


# -- what is recorded ---------------------------------------------------------------------------


def test_reads_and_queries_are_recorded_with_params(t):
    n = t.write(title="Tea", content="likes oolong")
    t.read(id=n["id"])
    t.query(keywords=["oolong"])
    t.children()
    t.trace(id=n["id"])
    t.relationship_query(keywords=["x"])
    items = t.history()["items"]
    assert tools(items) == ["zcor_relationship_query", "zcor_memory_trace", "zcor_memory_children",
                            "zcor_memory_query", "zcor_memory_read", "zcor_memory_write"]
    read = items[4]
    assert read["params"] == {"id": n["id"]}
    assert read["status"] == "ok"
    assert read["actor"] == "operator"
    assert items[3]["params"] == {"keywords": ["oolong"]}
    assert all(datetime.fromisoformat(i["at"]).utcoffset() is not None for i in items)


def test_failed_calls_recorded_with_error_message(t):
    with pytest.raises(NotFound) as ei:
        t.read(id="m999")
    with pytest.raises(InvalidArgument) as bad:
        t.write(title="", content="x")
    items = t.history()["items"]
    assert tools(items) == ["zcor_memory_write", "zcor_memory_read"]
    w, r = items
    assert r["status"] == "error"
    assert r["error"]["message"] == ei.value.message
    assert r["error"]["code"] == "not_found"
    assert r["params"] == {"id": "m999"}
    assert w["status"] == "error"
    assert w["error"]["message"] == bad.value.message
    assert w["changes"] == []


def test_failed_call_by_model_to_unknown_tool_recorded(svc):
    from zcord.core.errors import ZcorError

    with pytest.raises(ZcorError):
        svc.call("zcor_no_such_tool", {"a": 1}, actor="model")
    items = svc.call("zcor_memory_history", {})["items"]
    assert items[0]["tool"] == "zcor_no_such_tool"
    assert items[0]["status"] == "error"
    assert items[0]["actor"] == "model"
    assert items[0]["error"]["message"]


def test_history_query_recorded_after_its_result(t):
    t.write(title="A", content="a")
    first = t.history(keywords=["needle-in-params"])
    # its own record would match its own keyword, but it is written after the result
    assert first["total"] == 0 and first["items"] == []
    second = t.history(keywords=["needle-in-params"])
    assert second["total"] == 1
    rec = second["items"][0]
    assert rec["tool"] == "zcor_memory_history"
    assert rec["params"] == {"keywords": ["needle-in-params"]}
    assert rec["status"] == "ok"
    # an unfiltered query sees both earlier history calls but not itself
    everything = t.history()
    assert tools(everything["items"]) == ["zcor_memory_history", "zcor_memory_history", "zcor_memory_write"]


def test_actor_model_and_operator(svc):
    svc.call("zcor_memory_write", {"title": "by model", "content": "x"}, actor="model")
    svc.call("zcor_memory_read", {"id": "m1"}, actor="model")
    svc.call("zcor_memory_read", {"id": "m1"})
    items = svc.call("zcor_memory_history", {})["items"]
    assert [(i["tool"], i["actor"]) for i in items] == [
        ("zcor_memory_read", "operator"), ("zcor_memory_read", "model"), ("zcor_memory_write", "model")]
    # the actor is part of the record, so keywords find it
    by_model = svc.call("zcor_memory_history", {"keywords": ["model"]})["items"]
    assert {("zcor_memory_read", "model"), ("zcor_memory_write", "model")} <= {
        (i["tool"], i["actor"]) for i in by_model}


# -- mutation records --------------------------------------------------------------------------------


def test_create_record_carries_after(t):
    n = t.write(title="Cats", content="has two cats", keywords=["cat"])
    rec = t.history()["items"][0]
    assert rec["tool"] == "zcor_memory_write" and rec["status"] == "ok"
    creates = [c for c in rec["changes"] if c["target"] == n["id"]]
    assert len(creates) == 1
    assert creates[0]["after"] == node_fields(n)
    assert creates[0].get("before") is None


def test_update_record_carries_both_nodes(t):
    old = t.write(title="Cats", content="has two cats")
    new = t.write(id=old["id"], title="Cats!", content="has three cats now")
    rec = t.history()["items"][0]
    ch = [c for c in rec["changes"] if c["target"] == old["id"]]
    assert len(ch) == 1
    assert ch[0]["before"] == node_fields(old)
    assert ch[0]["after"] == node_fields(new)


def test_delete_record_carries_full_before(t):
    n = t.write(title="Temporary", content="to delete", sourceMessage="the original words")
    t.delete(id=n["id"])
    rec = t.history()["items"][0]
    assert rec["tool"] == "zcor_memory_delete"
    ch = [c for c in rec["changes"] if c["target"] == n["id"] and c.get("before")]
    assert len(ch) == 1
    assert ch[0]["before"] == node_fields(n)
    assert ch[0].get("after") is None
    # the deleted content is still findable through history
    found = t.history(keywords=["the original words"])["items"]
    assert "zcor_memory_delete" in tools(found)


def test_sixth_important_mark_records_the_receipt(t):
    ids = [t.write(title=f"n{i}", content="c")["id"] for i in range(6)]
    for i in ids[:5]:
        t.important(id=i, important=True)
    r = t.important(id=ids[5], important=True)
    assert r["replaced"] == {"id": ids[0], "title": "n0"}
    assert r["reminder"]
    rec = t.history()["items"][0]
    assert rec["tool"] == "zcor_memory_important"
    receipts = [c["receipt"] for c in rec["changes"] if c.get("receipt")]
    assert len(receipts) == 1
    assert receipts[0]["replaced"] == {"id": ids[0], "title": "n0"}
    assert receipts[0]["reminder"] == r["reminder"]


def test_relationship_update_record_carries_before_and_after(t):
    t.relationship_write(personId="p", name="Al", relationship="friend", affinity=1, reason="r1")
    t.relationship_write(personId="p", name="Al", relationship="friend", affinity=9, reason="r2")
    ch = t.history()["items"][0]["changes"]
    assert len(ch) == 1
    assert ch[0]["before"]["affinity"] == 1 and ch[0]["before"]["reason"] == "r1"
    assert ch[0]["after"]["affinity"] == 9 and ch[0]["after"]["reason"] == "r2"


# -- keyword search --------------------------------------------------------------------------------


def test_keyword_anywhere_in_record_content_after_update(t):
    n = t.write(title="Weekend", content="went hiking")
    t.write(id=n["id"], title="Weekend", content="went hiking and saw a Zebrafish")
    t.read(id=n["id"])
    hits = t.history(keywords=["ZEBRAFISH"])
    assert hits["total"] == 1
    assert hits["items"][0]["tool"] == "zcor_memory_write"
    assert hits["items"][0]["changes"][0]["after"]["content"].endswith("Zebrafish")
    # NFKC: full-width letters find the same record
    wide = t.history(keywords=["ｚｅｂｒａ"])["items"]
    # the update, and the previous history call (its params hold the word now)
    assert tools(wide) == ["zcor_memory_history", "zcor_memory_write"]
    # every keyword must match
    assert t.history(keywords=["zebrafish", "nonexistent-word"])["total"] == 0


def test_keyword_matches_error_messages_and_params(t):
    with pytest.raises(NotFound):
        t.read(id="m4242")
    hits = t.history(keywords=["m4242"])["items"]
    assert len(hits) == 1 and hits[0]["status"] == "error"


# -- time filter and ordering ----------------------------------------------------------------------------


@pytest.fixture
def timed(t, clock):
    """Four calls at T0, T0+1m, T0+2m, T0+3m; history queries run at T0+1h and later."""
    for i in range(4):
        clock.set(T0 + timedelta(minutes=i))
        t.write(title=f"t{i}", content="x")
    clock.set(T0 + timedelta(hours=1))
    return t


def titles(items):
    return [c["after"]["title"] for i in items for c in i["changes"]]


def test_from_to_filter_operation_time_inclusive(timed):
    r = timed.history(**{"from": (T0 + timedelta(minutes=1)).isoformat(),
                         "to": (T0 + timedelta(minutes=2)).isoformat()})
    assert titles(r["items"]) == ["t2", "t1"]
    assert r["total"] == 2


def test_from_to_with_other_offsets(timed):
    # T0 is 10:00+08:00 = 02:00Z = 21:00-05:00 the day before
    r = timed.history(**{"from": "2026-05-01T02:01:00Z", "to": "2026-04-30T21:02:00-05:00"})
    assert titles(r["items"]) == ["t2", "t1"]
    r = timed.history(**{"to": "2026-05-01T02:00:00+00:00"})
    assert titles(r["items"]) == ["t0"]


@pytest.mark.parametrize("name", ["from", "to"])
def test_time_without_offset_refused(timed, name):
    with pytest.raises(InvalidArgument) as ei:
        timed.history(**{name: "2026-05-01T10:00:00"})
    assert ei.value.field == name


def test_time_not_iso_refused(timed):
    with pytest.raises(InvalidArgument) as ei:
        timed.history(**{"from": "yesterday"})
    assert ei.value.field == "from"


def test_newest_first(timed):
    items = timed.history()["items"]
    times = [at(i) for i in items]
    assert times == sorted(times, reverse=True)
    assert titles(items) == ["t3", "t2", "t1", "t0"]


def test_paging_total_next_offset(timed):
    p1 = timed.history(limit=3)
    assert p1["total"] == 4 and p1["nextOffset"] == 3
    assert titles(p1["items"]) == ["t3", "t2", "t1"]
    # the first history query is now part of the log (newest); totals move by one
    p2 = timed.history(limit=3, offset=3)
    assert p2["total"] == 5
    assert [i["tool"] for i in p2["items"]] == ["zcor_memory_write", "zcor_memory_write"]
    assert titles(p2["items"]) == ["t1", "t0"]
    assert p2["nextOffset"] is None


@pytest.mark.parametrize("params, field", [
    ({"limit": 0}, "limit"), ({"limit": 101}, "limit"), ({"offset": -1}, "offset"),
    ({"limit": "5"}, "limit"),
])
def test_paging_bounds(t, params, field):
    with pytest.raises(InvalidArgument) as ei:
        t.history(**params)
    assert ei.value.field == field


def test_default_limit_is_20(t):
    for _i in range(25):
        t.children()
    r = t.history()
    assert len(r["items"]) == 20 and r["total"] == 25 and r["nextOffset"] == 20


def unclamped(svc) -> None:
    """Let the next operation take the clock's time even if it is earlier than the last
    recorded one, as zcord did before it clamped the operation clock (issue 23 item 9): logs
    written then are not in time order, and the history must still read them right."""
    svc.last_at = None


def test_clock_going_backwards_still_orders_by_time(t, svc, clock):
    clock.set(T0 + timedelta(hours=2))
    t.write(title="late", content="x")
    clock.set(T0 + timedelta(hours=1))
    unclamped(svc)
    t.write(title="early", content="x")
    clock.set(T0 + timedelta(hours=3))
    items = t.history()["items"]
    assert titles(items) == ["late", "early"]


def test_clock_going_backwards_after_index_built(t, svc, clock):
    clock.set(T0)
    t.write(title="first", content="x")
    clock.set(T0 + timedelta(hours=5))
    t.history()  # builds the index; logged at T0+5h
    clock.set(T0 + timedelta(hours=2))
    unclamped(svc)
    t.write(title="second-but-earlier", content="x")
    clock.set(T0 + timedelta(hours=9))
    items = t.history()["items"]
    times = [at(i) for i in items]
    assert times == sorted(times, reverse=True)
    assert tools(items) == ["zcor_memory_history", "zcor_memory_write", "zcor_memory_write"]
    assert titles(items) == ["second-but-earlier", "first"]
    # time filter still works on a log that is not in time order
    r = t.history(**{"from": (T0 + timedelta(hours=1)).isoformat(),
                     "to": (T0 + timedelta(hours=3)).isoformat()})
    assert titles(r["items"]) == ["second-but-earlier"]


def test_clock_backwards_order_survives_reopen(memdir, clock):
    with Service(memdir, clock=clock) as s:
        clock.set(T0 + timedelta(hours=2))
        s.call("zcor_memory_write", {"title": "late", "content": "x"})
        clock.set(T0)
        unclamped(s)
        s.call("zcor_memory_write", {"title": "early", "content": "x"})
    clock.set(T0 + timedelta(hours=4))
    with Service(memdir, clock=clock) as s:
        items = s.call("zcor_memory_history", {})["items"]
    assert titles(items) == ["late", "early"]


# -- persistence and the state file ---------------------------------------------------------------------


def test_history_survives_reopen(memdir, clock):
    with Service(memdir, clock=clock) as s:
        s.call("zcor_memory_write", {"title": "kept", "content": "x"}, actor="model")
        s.call("zcor_memory_read", {"id": "m1"})
    with Service(memdir, clock=clock) as s:
        items = s.call("zcor_memory_history", {})["items"]
        assert tools(items) == ["zcor_memory_read", "zcor_memory_write"]
        assert items[1]["actor"] == "model"
        # the log continues: a new call is newest
        s.call("zcor_memory_children", {})
        assert tools(s.call("zcor_memory_history", {"limit": 2})["items"]) == [
            "zcor_memory_children", "zcor_memory_history"]


def test_reading_never_rewrites_state_file(t, svc):
    n = t.write(title="Stable", content="x")
    t.important(id=n["id"], important=True)
    t.relationship_write(personId="p", name="P", relationship="r", affinity=0, reason="x")
    path = svc.dir / "memory-state.json"
    raw, mtime = path.read_bytes(), os.stat(path).st_mtime_ns
    ino = os.stat(path).st_ino

    t.read(id=n["id"])
    t.query(keywords=["stable"])
    t.children()
    t.trace(id=n["id"])
    t.relationship_read(personId="p")
    t.relationship_query()
    t.history()
    t.history(keywords=["stable"])
    t.important(id=n["id"], important=True)  # already marked: changes nothing
    t.backup()
    with pytest.raises(NotFound):
        t.read(id="m77")
    with pytest.raises(InvalidArgument):
        t.query(limit=0)

    st = os.stat(path)
    assert path.read_bytes() == raw
    assert st.st_mtime_ns == mtime
    assert st.st_ino == ino
    # but all of them are in the history
    assert t.history()["total"] == 15


def test_oplog_is_beside_the_state(t, svc):
    t.write(title="x", content="y")
    t.read(id="m1")
    files = set(os.listdir(svc.dir))
    assert "memory-state.json" in files
    others = files - {"memory-state.json", "synonyms.json", "backups", "blobs"}
    # some file beside the state holds the log (append-only), not the state itself
    assert any((svc.dir / f).is_file() and b"zcor_memory_read" in (svc.dir / f).read_bytes() for f in others)
    assert b"zcor_memory_read" not in (svc.dir / "memory-state.json").read_bytes()


def test_same_time_later_logged_first(t, clock):
    clock.set(T0)
    clock.step = timedelta(0)
    t.write(title="one", content="x")
    t.write(title="two", content="x")
    t.write(title="three", content="x")
    clock.step = timedelta(seconds=1)
    clock.set(T0 + timedelta(hours=1))
    assert titles(t.history()["items"]) == ["three", "two", "one"]


def test_from_after_to_refused(timed):
    with pytest.raises(InvalidArgument):
        timed.history(**{"from": (T0 + timedelta(minutes=3)).isoformat(), "to": T0.isoformat()})


def test_keywords_casefold_in_history(t):
    t.write(title="Street", content="Große Straße")
    assert "zcor_memory_write" in tools(t.history(keywords=["STRASSE"])["items"])


def test_status_counts_operations_from_the_log(memdir, clock):
    """zcor/status reports the number of logged operations; after a restart it is counted
    from the log file itself."""
    with Service(memdir, clock=clock) as s:
        s.call("zcor_memory_write", {"title": "one", "content": ""})
        s.call("zcor_memory_read", {"id": "m1"})
        with pytest.raises(NotFound):
            s.call("zcor_memory_read", {"id": "m9"})
        st = s.status()
        assert st["operations"] == 3
        assert (st["nodes"], st["currentNodes"], st["historyChanges"]) == (1, 1, 1)
    lines = (memdir / "operations.jsonl").read_bytes().count(b"\n")
    with Service(memdir, clock=clock) as s:
        assert s.status()["operations"] == lines == 3
        s.call("zcor_memory_children", {})
        assert s.status()["operations"] == 4


def test_backups_listed_sorted_json_files_only(svc):
    first = svc.call("zcor_memory_backup", {})["backupFile"]
    (svc.dir / "backups" / "a-hand-placed.json").write_bytes(b"{}")
    (svc.dir / "backups" / "notes.txt").write_text("not a backup")
    (svc.dir / "backups" / "sub.json").mkdir()
    assert svc.store.list_backups() == sorted(["a-hand-placed.json", first])
