"""The review record of issue 33 as files: holds appended to review.log, compacted into
review.json; a crash during compaction (new snapshot, old record) or during an append (a torn
last line) leaves the same pending set; the model's view of held changes."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from zcord.core.errors import StateFileInvalid, UntrustedSender
from zcord.service import review as R


def ctx(seq: int, target: str, by: str = "qq:troll", kind: str = "node.create", size: int = 10) -> SimpleNamespace:
    return SimpleNamespace(seq=seq, at=datetime(2026, 12, 6, tzinfo=UTC), tool="zcor_memory_write",
                           origin={"senders": [by]}, hold_by=[by],
                           changes=[{"changeId": seq, "kind": kind, "target": target, "before": None,
                                     "after": {"id": target, "content": "x" * size}}])


def book(tmp_path) -> R.ReviewBook:
    return R.ReviewBook(tmp_path / "review.json", threading.RLock())


def test_holds_append_and_a_replayed_record_gives_the_same_set(tmp_path):
    b = book(tmp_path)
    b.load(0, lambda s: None)
    for seq in range(1, 6):
        c = ctx(seq, f"m{seq}")
        b.hold(c, c.changes)
    b.approve([2])
    b.start_reverting([3], 9)
    assert not (tmp_path / "review.json").exists()
    record = (tmp_path / "review.log").read_bytes()
    assert len(record.splitlines()) == 7
    # a crash during compaction: the new snapshot written, the record not yet emptied
    b._compact(dict(b.items))
    (tmp_path / "review.log").write_bytes(record)
    again = book(tmp_path)
    again.load(10, lambda s: None)  # operation 9 is not in the log: seq 3 is pending again
    assert sorted(again.items) == [1, 3, 4, 5] and again.hidden_nodes == {"m1", "m3", "m4", "m5"}
    assert (tmp_path / "review.log").read_bytes() == b""
    assert [e["seq"] for e in json.loads((tmp_path / "review.json").read_text())["pending"]] == [1, 3, 4, 5]


def test_a_torn_last_line_is_ignored_and_a_broken_one_inside_stops_zcord(tmp_path):
    b = book(tmp_path)
    b.load(0, lambda s: None)
    c = ctx(1, "m1")
    b.hold(c, c.changes)
    with open(tmp_path / "review.log", "ab") as f:
        f.write(b'{"hold": {"seq": 2, "chan')
    again = book(tmp_path)
    again.load(5, lambda s: None)
    assert sorted(again.items) == [1]
    (tmp_path / "review.log").write_bytes(b'{"drop": [1]\n{"drop": [2]}\n')
    with pytest.raises(StateFileInvalid) as bad:
        book(tmp_path).load(5, lambda s: None)
    assert "review.log line 1" in bad.value.message


def test_per_sender_caps_refuse_with_a_clear_message(tmp_path, monkeypatch):
    monkeypatch.setattr(R, "MAX_HELD_PER_SENDER", 3)
    b = book(tmp_path)
    b.load(0, lambda s: None)
    for seq in (1, 2, 3):
        c = ctx(seq, f"m{seq}")
        b.hold(c, c.changes)
    with pytest.raises(UntrustedSender) as full:
        c = ctx(4, "m4")
        b.hold(c, c.changes)
    assert "qq:troll" in full.value.message and "operator's review" in full.value.message
    c = ctx(5, "m5", by="qq:other")
    b.hold(c, c.changes)  # another sender has room
    monkeypatch.setattr(R, "MAX_HELD_BYTES_PER_SENDER", 2_000)
    with pytest.raises(UntrustedSender):
        c = ctx(6, "m6", by="qq:other", size=5_000)
        b.hold(c, c.changes)
    assert sorted(b.items) == [1, 2, 3, 5]


def test_the_approved_important_list_undoes_held_moves():
    b = R.ReviewBook.__new__(R.ReviewBook)
    b.held_important = [(["m1", "m2"], ["m3", "m2"]),   # a held supersede of m1 by m3
                        (["m3", "m2"], ["m3"])]          # then a held delete of m2
    # m1 back in m3's slot, m2 back at the end (m5 was marked by an ordinary change since)
    assert b.approved_important(["m3", "m5"]) == ["m1", "m5", "m2"]
    assert b.approved_important(["m3", "m2"]) == ["m1", "m2"]
