"""The change history is sealed into segment files under history/ once the inline part
grows past a size, so snapshots stay bounded; the history itself stays complete and exact."""

from __future__ import annotations

import json

import pytest

import zcord.core.store as store_mod
from zcord.core.errors import StateFileInvalid
from zcord.service import Service


@pytest.fixture
def small_seal(monkeypatch):
    """Seal after ~2 KB of inline history so a handful of writes produces segments."""
    monkeypatch.setattr(store_mod, "SEAL_BYTES", 2000)


def _write_many(svc, n, snapshot=True):
    """n writes, each followed by a snapshot (where sealing happens) unless snapshot=False."""
    ids = []
    for i in range(n):
        ids.append(svc.call("zcor_memory_write", {"title": f"note {i}", "content": "x" * 300, "keywords": ["k"]})["id"])
        if snapshot:
            svc.snapshot()
    return ids


def test_segments_are_written_and_the_state_stays_small(small_seal, svc, memdir):
    _write_many(svc, 30)
    segs = sorted(p.name for p in (memdir / "history").iterdir())
    assert len(segs) >= 3
    doc = json.loads((memdir / "memory-state.json").read_bytes())
    assert doc["historySegments"] == segs
    assert len(doc["history"]) < 10
    ids = [c.change_id for c in svc.store.iter_history(svc.state)]
    assert ids == list(range(1, 31)), "every change once, in order, across segments and inline"


def test_reopen_continues_change_ids_after_sealed_history(small_seal, memdir, clock):
    with Service(memdir, clock=clock) as svc:
        _write_many(svc, 12)
        last = svc.state.next_change_id() - 1
    with Service(memdir, clock=clock) as svc:
        svc.call("zcor_memory_write", {"title": "after", "content": "y"})
        history = list(svc.store.iter_history(svc.state))
        assert [c.change_id for c in history] == list(range(1, last + 2))
        assert history[-1].after["title"] == "after"


def test_history_tool_sees_sealed_changes(small_seal, t, svc):
    _write_many(svc, 12)
    res = t.history(keywords=["note 0"])
    assert res["total"] == 1 and res["items"][0]["changes"][0]["after"]["title"] == "note 0"


def test_missing_segment_refuses_to_start_and_touches_nothing(small_seal, memdir, clock):
    with Service(memdir, clock=clock) as svc:
        _write_many(svc, 12)
    seg = sorted((memdir / "history").iterdir())[0]
    seg.unlink()
    before = (memdir / "memory-state.json").read_bytes()
    with pytest.raises(StateFileInvalid, match=seg.name):
        Service(memdir, clock=clock).open()
    assert (memdir / "memory-state.json").read_bytes() == before


def test_backup_is_self_contained_and_restorable(small_seal, t, svc, memdir):
    _write_many(svc, 12)
    name = t.backup()["backupFile"]
    doc = json.loads((memdir / "backups" / name).read_bytes())
    assert doc["historySegments"] == []
    assert [c["changeId"] for c in doc["history"]] == list(range(1, 13))
    t.write(title="later", content="z")
    res = t.restore(backupFile=name)
    assert res["nodes"] == 12
    assert "later" not in [n.title for n in svc.state.nodes.values()]


@pytest.mark.parametrize("how", ["write", "replace"])
def test_failed_seal_changes_nothing_and_loses_nothing(small_seal, svc, memdir, clock, failing_disk, how):
    _write_many(svc, 3)
    before = (memdir / "memory-state.json").read_bytes()
    # the segment file is written, the state file that would name it is refused
    failing_disk.on(how, only=lambda target: target.name == "memory-state.json")
    from zcord.core.errors import StorageError
    _write_many(svc, 10, snapshot=False)  # acknowledged: they are in the journal
    with pytest.raises(StorageError, match="operation log still holds every change"):
        svc.snapshot()
    assert (memdir / "memory-state.json").read_bytes() == before
    assert failing_disk.failures == 1
    failing_disk.off()
    ids = [c.change_id for c in svc.store.iter_history(svc.state)]
    assert ids == list(range(1, 14))
    svc.close()
    with Service(memdir, clock=clock) as again:  # the journal replays what the snapshot lacks
        assert [c.change_id for c in again.store.iter_history(again.state)] == list(range(1, 14))
        assert len(again.state.nodes) == 13
        again.snapshot()
        assert [c.change_id for c in again.store.iter_history(again.state)] == list(range(1, 14))
