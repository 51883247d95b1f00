"""The clock going backwards between writes (NTP step, a VM restored from a snapshot, a
wrong RTC fixed by hand), in-process through the Service's clock: nothing fails, no id or
backup name is reused, and recorded times never go backwards (issue 23 item 9: the
operation clock repeats the last recorded instant until the wall clock passes it), so
time travel, time filters and orders stay true."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.conftest import FakeClock
from zcord.service import Service

pytestmark = pytest.mark.fault


def history_order_ok(items: list[dict]) -> bool:
    """Newest operation time first; equal times: later-logged (higher seq) first."""
    keys = [(i["at"], i["seq"]) for i in items]
    from datetime import datetime

    parsed = [(datetime.fromisoformat(a).timestamp(), s) for a, s in keys]
    return parsed == sorted(parsed, reverse=True)


def test_clock_going_backwards_between_writes(memdir):
    clock = FakeClock()
    start = clock.t
    svc = Service(memdir, clock=clock).open()
    call = svc.call
    a = call("zcor_memory_write", {"title": "时钟甲", "content": "a", "keywords": ["时钟"]})
    b = call("zcor_memory_write", {"title": "时钟乙", "content": "b", "keywords": ["时钟"]})
    first_backup = call("zcor_memory_backup")["backupFile"]
    # an hour back: updates, creates, marks, relationships, merges all still work
    clock.set(start - timedelta(hours=1))
    clock.step = timedelta(0)  # and frozen: every call in the same millisecond
    upd = call("zcor_memory_write", {"id": a["id"], "title": "时钟甲改", "content": "a2"})
    assert upd["updatedAt"] >= upd["createdAt"]  # was below it before the clamp
    c = call("zcor_memory_write", {"title": "时钟丙", "content": "c", "keywords": ["时钟"]})
    d = call("zcor_memory_write", {"title": "时钟丁", "content": "d", "keywords": ["时钟"]})
    assert len({a["id"], b["id"], c["id"], d["id"]}) == 4
    call("zcor_memory_important", {"id": c["id"], "important": True})
    call("zcor_relationship_write", {"personId": "qq:1", "name": "小明", "relationship": "朋友", "affinity": 1,
                                     "reason": "r", "memoryNodeId": c["id"]})
    merged = call("zcor_memory_merge", {"ids": [c["id"], d["id"]], "title": "时钟合并", "content": "cd",
                                        "reason": "同一件事"})
    # backups in the same millisecond, and at the instant of an existing one, get new names
    clock.set(start + timedelta(seconds=2))  # the first backup's instant
    names = {first_backup, *(call("zcor_memory_backup")["backupFile"] for _ in range(3))}
    assert len(names) == 4
    # a day back, then restore the first backup: its automatic backup gets a fresh name too
    clock.set(start - timedelta(days=1))
    restored = call("zcor_memory_restore", {"backupFile": first_backup})
    assert restored["backupFile"] not in names
    after_restore = call("zcor_memory_write", {"title": "时钟戊", "content": "e", "keywords": ["时钟"]})
    assert after_restore["id"] not in {a["id"], b["id"], c["id"], d["id"], merged["id"]}

    # query: newest updatedAt first, whatever order the writes came in
    items = call("zcor_memory_query", {"keywords": ["时钟"], "limit": 100})["items"]
    stamps = [i["updatedAt"] for i in items]
    assert stamps == sorted(stamps, reverse=True)
    # nothing is recorded a day back: a time filter from the last good instant finds the later writes
    window = call("zcor_memory_query", {"from": (start - timedelta(days=2)).isoformat(),
                                        "to": (start - timedelta(hours=12)).isoformat()})
    assert window["items"] == []
    later = call("zcor_memory_query", {"from": upd["updatedAt"], "limit": 100})
    assert after_restore["id"] in [i["id"] for i in later["items"]]

    # history: newest operation time first, same-time records newest-logged first
    hist = call("zcor_memory_history", {"limit": 100})["items"]
    assert history_order_ok(hist)
    # times never go backwards in the order operations were logged
    by_seq = sorted(hist, key=lambda i: i["seq"])
    assert [i["at"] for i in by_seq] == sorted(i["at"] for i in by_seq)
    svc.close()

    # the next start: loads, keeps counting ids upwards, same history order
    with Service(memdir, clock=FakeClock(start - timedelta(days=3))) as svc2:
        again = svc2.call("zcor_memory_history", {"limit": 100})["items"]
        assert history_order_ok(again)
        seen = {i["seq"] for i in hist}
        assert [i["seq"] for i in again if i["seq"] in seen] == [i["seq"] for i in hist]
        e = svc2.call("zcor_memory_write", {"title": "时钟己", "content": "f", "keywords": ["时钟"]})
        assert int(e["id"][1:]) > int(after_restore["id"][1:])
        assert e["createdAt"] >= max(i["at"] for i in hist)  # the clamp survives a restart
        ids = [c.change_id for c in svc2.store.iter_history(svc2.state)]
        assert ids == list(range(1, len(ids) + 1))


def test_time_travel_tells_the_truth_when_the_clock_steps_back(memdir):
    """The attack (issue 23 item 9): zcord's clock stepped back an hour between two versions;
    time travel to an instant between them showed the later version and a memory created
    later, updatedAt fell below createdAt, and time filters missed the later changes."""
    clock = FakeClock()
    start = clock.t
    with Service(memdir, clock=clock) as svc:
        a = svc.call("zcor_memory_write", {"title": "版本一", "content": "v1"})
        first = a["updatedAt"]
        clock.set(start + timedelta(minutes=10))
        svc.call("zcor_memory_write", {"id": a["id"], "title": "版本二", "content": "v2"})
        clock.set(start - timedelta(hours=1))  # stepped back
        v3 = svc.call("zcor_memory_write", {"id": a["id"], "title": "版本三", "content": "v3"})
        b = svc.call("zcor_memory_write", {"title": "后来的", "content": "x"})
        assert v3["updatedAt"] >= v3["createdAt"] and b["createdAt"] >= v3["updatedAt"]
        # between version one and two: version one, and no memory made later
        from zcord.service import undo

        between = undo.state_at(svc, start + timedelta(minutes=5))
        assert [(n["id"], n["title"]) for n in between["nodes"]] == [(a["id"], "版本一")]
        assert undo.state_at(svc, start - timedelta(minutes=30))["nodes"] == []  # before anything
        # a time filter from the second version finds the third and the later memory
        found = svc.call("zcor_memory_query", {"from": (start + timedelta(minutes=10)).isoformat(), "limit": 100})
        assert {i["id"] for i in found["items"]} == {a["id"], b["id"]}
        # every change's time is at or after the one before it
        times = [c.at for c in svc.store.iter_history(svc.state)]
        assert times == sorted(times) and first <= v3["updatedAt"]
