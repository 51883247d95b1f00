"""Service rules found open by mutation (issue 16): the result fields of tools and operator
actions (an interface, SPEC §2), the bot's backups (rate limit, names), refusals worded and
recorded (persona, disk errors, lone surrogates in a call's parameters), the status, the
operator's history paging and backup preview, and the seal of a snapshot written by a
forked child."""

from __future__ import annotations

import errno
import re

import pytest

import zcord.core.store as store_mod
import zcord.service.snapshots as snapshots_mod
from tests.conftest import log_records
from zcord.core.errors import InvalidArgument, RateLimited, StorageError


def test_important_result_says_whether_anything_changed(t):
    t.write(title="a", content="x")
    assert t.important(id="m1", important=True) == {"id": "m1", "important": True, "changed": True,
                                                     "importantIds": ["m1"]}
    assert t.important(id="m1", important=True) == {"id": "m1", "important": True, "changed": False,
                                                     "importantIds": ["m1"]}
    assert t.important(id="m1", important=False) == {"id": "m1", "important": False, "changed": True,
                                                      "importantIds": []}
    assert t.important(id="m1", important=False)["changed"] is False


def test_merge_result_names_the_superseded_and_the_important_mark(t):
    for title in ("a", "b"):
        t.write(title=title, content="x")
    t.important(id="m2", important=True)
    res = t.merge(ids=["m2", "m1"], title="ab", content="xy", reason="same")
    assert res["id"] == "m3" and res["superseded"] == ["m2", "m1"]
    assert res["important"] is True and res["importantIds"] == ["m3"]
    assert set(res) == {"id", "node", "superseded", "movedChildren", "relinkedRelationships", "important",
                        "importantIds"}


def test_relationship_delete_result(t):
    t.relationship_write(personId="qq:1", name="A", relationship="friend", affinity=5, reason="met")
    assert t.relationship_delete(personId="qq:1") == {"personId": "qq:1", "deleted": True}


def test_synonym_group_set_result_and_its_log_record(svc):
    n = len(svc.synonyms.groups)
    assert svc.set_synonym_group(None, ["qa", "qb"]) == {"groups": n + 1}
    rec = log_records(svc.dir)[-1]
    assert rec["tool"] == "zcor/synonyms/set" and rec["params"] == {"index": None, "terms": ["qa", "qb"]}
    assert svc.set_synonym_group(n, None) == {"groups": n}
    assert log_records(svc.dir)[-1]["params"] == {"index": n, "terms": None}


def test_persona_with_a_lone_surrogate_refused_in_a_sentence(svc):
    before = svc.persona_get()["text"]
    with pytest.raises(InvalidArgument) as ei:
        svc.persona_set("hi \ud800")
    assert ei.value.message == "text contains a lone surrogate code point, which is not valid Unicode"
    assert ei.value.field == "text"
    assert svc.persona_get()["text"] == before


def test_second_bot_backup_within_the_interval_is_rate_limited(svc):
    svc.call("zcor_memory_write", {"title": "a", "content": "x"})
    first = svc.call("zcor_memory_backup", {}, actor="model")["backupFile"]
    with pytest.raises(RateLimited) as ei:
        svc.call("zcor_memory_backup", {}, actor="model")
    interval = svc.config.bot_backup_interval_seconds
    m = re.fullmatch(rf"The bot may back up the Memory at most once every {interval} s \(botBackupIntervalSeconds\); "
                     r"the last backup was (\d+) s ago\. Try again in (\d+) s\.", ei.value.message)
    assert m, ei.value.message
    assert int(m[1]) + int(m[2]) == interval and ei.value.data == {"retryAfterSeconds": int(m[2])}
    assert sorted(p.name for p in (svc.dir / "backups").iterdir()) == [first]
    assert svc.call("zcor_memory_backup", {})["backupFile"] != first  # operators are not limited


def test_pre_restore_backup_of_a_bot_restore_is_the_bots(svc):
    svc.call("zcor_memory_write", {"title": "a", "content": "x"})
    name = svc.call("zcor_memory_backup", {})["backupFile"]
    assert "-bot" not in name
    auto = svc.call("zcor_memory_restore", {"backupFile": name}, actor="model")["backupFile"]
    assert "-bot" in auto
    auto2 = svc.call("zcor_memory_restore", {"backupFile": name})["backupFile"]
    assert "-bot" not in auto2


def test_seal_of_a_snapshot_written_by_a_forked_child_is_taken_in(monkeypatch, svc):
    monkeypatch.setattr(store_mod, "SEAL_BYTES", 2000)
    monkeypatch.setattr(snapshots_mod, "SYNC_FORK_NODES", 1)  # every snapshot by a forked child
    for i in range(10):
        svc.call("zcor_memory_write", {"title": f"note {i}", "content": "x" * 300})
        svc.snapshot()
    segments = sorted(p.name for p in (svc.dir / "history").iterdir())
    assert len(segments) >= 2 and svc.state.history_segments == segments
    assert [c.change_id for c in svc.store.iter_history(svc.state)] == list(range(1, 11))


def test_operation_failing_on_the_disk_is_a_storage_error_and_recorded(svc):
    def fn(ctx):
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(StorageError) as ei:
        svc.run_operation("zcor/history/revert", {"seq": 1}, fn)
    assert ei.value.message == "zcor/history/revert could not be completed (No space left on device); nothing changed."
    rec = log_records(svc.dir)[-1]
    assert rec["tool"] == "zcor/history/revert" and rec["status"] == "error"
    assert rec["error"]["code"] == "storage_error"


def test_call_with_lone_surrogates_is_logged_with_replacement_characters(svc):
    with pytest.raises(InvalidArgument):
        svc.call("zcor_memory_query", {"keywords": ["a\ud800b"], "x\udfff": 1})
    rec = log_records(svc.dir)[-1]
    assert rec["tool"] == "zcor_memory_query" and rec["status"] == "error"
    assert rec["params"] == {"keywords": ["a\ufffdb"], "x\ufffd": 1}


def test_restore_whose_snapshot_the_disk_refuses_says_check_the_disk(svc, failing_disk):
    svc.call("zcor_memory_write", {"title": "a", "content": "x"})
    name = svc.call("zcor_memory_backup", {})["backupFile"]
    svc.call("zcor_memory_write", {"title": "b", "content": "y"})
    failing_disk.on("write", only=lambda p: p.name == "memory-state.json")
    with pytest.raises(StorageError) as ei:
        svc.call("zcor_memory_restore", {"backupFile": name})
    failing_disk.off()
    assert ei.value.message == ("The Memory could not be saved (No space left on device); nothing changed. "
                                "Check the disk and try again.")
    assert sorted(svc.state.nodes) == ["m1", "m2"]


def test_status_names_the_memory_directory(svc, memdir):
    status = svc.status()
    assert status["memoryDir"] == str(memdir)
    assert status["nodes"] == 0 and status["relationships"] == 0


def test_operator_history_query_pages_by_its_limit(svc):
    for i in range(3):
        svc.call("zcor_memory_write", {"title": f"t{i}", "content": "x"})
    res = svc.history_query({"limit": 2})
    assert [i["seq"] for i in res["items"]] == [3, 2] and res["total"] == 3 and res["nextOffset"] == 2


def test_backup_preview_counts_what_a_restore_would_change(svc):
    svc.call("zcor_memory_write", {"title": "a", "content": "x"})
    name = svc.call("zcor_memory_backup", {})["backupFile"]
    svc.call("zcor_memory_write", {"title": "b", "content": "y"})
    svc.call("zcor_memory_important", {"id": "m2", "important": True})
    assert svc.backup_preview(name) == {
        "backupFile": name,
        "memories": {"now": 2, "after": 1, "added": 0, "removed": 1, "changed": 0},
        "relationships": {"now": 0, "after": 0, "added": 0, "removed": 0, "changed": 0},
        "important": {"now": ["m2"], "after": [], "changed": True}}
