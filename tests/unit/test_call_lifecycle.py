"""One call lifecycle (zcord.service.dispatcher.Dispatcher.run): every kind of call is
recorded once, in seq order — a plain tool, an operator's display read (not recorded), an
operator's operation, tools that let the lock go while they work (search, backup, restore),
and failing ones at each step."""

from __future__ import annotations

import errno
import json
import threading

import pytest

from tests.conftest import log_records
from tests.fakellm import FakeLLM, openai_text
from tests.fault.holds.sitecustomize import hold_backup
from zcord.core.errors import InvalidArgument, NotFound, ProviderError, StorageError
from zcord.core.store import Store


def _one_record_each(svc, expected: list[tuple[str, str]]) -> list[dict]:
    """The log holds exactly these (tool, status) records in this order, with seqs that
    increase line by line, and the Service's seq is the last of them."""
    records = log_records(svc.dir)
    assert [(r["tool"], r["status"]) for r in records] == expected
    seqs = [r["seq"] for r in records]
    assert seqs == sorted(set(seqs)), seqs
    assert svc.seq == seqs[-1]
    return records


@pytest.fixture
def llm(svc, monkeypatch):
    monkeypatch.setenv("ZCOR_LLM_API_KEY", "sk-test")
    with FakeLLM() as server:
        monkeypatch.setenv("ZCOR_LLM_BASE_URL", server.url)
        svc.update_config({"llm": {"protocol": "openai", "baseUrl": server.url, "model": "fake-model",
                                   "timeoutSeconds": 2}})
        server.protocol = "openai"
        yield server


def test_every_kind_of_call_is_recorded_once_in_seq_order(svc, llm, monkeypatch):
    node = svc.call("zcor_memory_write", {"title": "小明喜欢喝奶茶", "content": "每周五"})["id"]  # a plain tool
    assert svc.call("zcor_memory_read", {"id": node}, view=True)["id"] == node  # a display read: not recorded
    seq_before_view = svc.seq
    svc.call("zcor_memory_read", {"id": node}, view=True)
    assert svc.seq == seq_before_view, "a display read takes no number"
    with pytest.raises(NotFound):  # a failing tool
        svc.call("zcor_memory_read", {"id": "m999"})
    with pytest.raises(InvalidArgument):  # refused before its rule runs: a recorded tool asked as a view
        svc.call("zcor_memory_write", {"title": "x", "content": "y"}, view=True)
    llm.script.append(openai_text(json.dumps([node])))
    assert [i["id"] for i in svc.call("zcor_memory_search", {"keywords": ["小明"]})["items"]] == [node]
    llm.script.append(openai_text("not json"))
    with pytest.raises(ProviderError):  # fails in its unlocked step
        svc.call("zcor_memory_search", {"keywords": ["小明"]})
    backup = svc.call("zcor_memory_backup")["backupFile"]  # its file is written without the lock
    write_seq = svc.seq + 1
    svc.call("zcor_memory_write", {"title": "后来的", "content": "z"})
    restored = svc.call("zcor_memory_restore", {"backupFile": backup})  # prepare, work, finish
    assert restored["restoredFrom"] == backup
    svc.persona_set("I am Juniper.")  # an operator's operation on a file
    with pytest.raises(InvalidArgument):  # an operator's operation refused
        svc.update_config({"recallBudget": "lots"})
    reverted = svc.calls.run_operation("zcor/history/revert", {"seq": write_seq},
                                       lambda ctx: {"seq": ctx.seq})  # an operation on the Memory
    records = _one_record_each(svc, [
        ("zcor/config/set", "ok"),  # the llm fixture's
        ("zcor_memory_write", "ok"), ("zcor_memory_read", "error"), ("zcor_memory_write", "error"),
        ("zcor_memory_search", "ok"), ("zcor_memory_search", "error"), ("zcor_memory_backup", "ok"),
        ("zcor_memory_write", "ok"), ("zcor_memory_restore", "ok"), ("zcor/persona/set", "ok"),
        ("zcor/config/set", "error"), ("zcor/history/revert", "ok")])
    assert records[-1]["seq"] == reverted["seq"]
    assert records[4]["result"] == {"ids": [node], "candidates": [node]}
    assert records[6]["result"] == {"backupFile": backup}
    assert records[8]["changes"][0]["kind"] == "state.restore"
    assert records[8]["changes"][0]["opSeq"] == records[8]["seq"]


def test_a_call_recorded_after_its_unlocked_step_takes_the_next_seq(svc, monkeypatch):
    """A write made while a backup writes its file (without the lock) is recorded first; the
    backup's record then takes the next seq, so the log's seqs still increase line by line."""
    hold = svc.dir.parent / "backup-held"
    hold_backup(str(hold), monkeypatch.setattr)
    done: dict = {}
    backup = threading.Thread(target=lambda: done.setdefault("backup", svc.call("zcor_memory_backup")))
    backup.start()
    while not hold.exists():
        assert backup.is_alive()
        backup.join(0.01)
    svc.call("zcor_memory_write", {"title": "备份中写", "content": "x"})
    hold.unlink()
    backup.join()
    records = _one_record_each(svc, [("zcor_memory_write", "ok"), ("zcor_memory_backup", "ok")])
    assert records[1]["seq"] == records[0]["seq"] + 1
    saved = json.loads((svc.dir / "backups" / done["backup"]["backupFile"]).read_bytes())
    assert saved["nodes"] == [], "the backup holds the Memory as it was when it was asked for"


def test_a_failing_unlocked_step_is_recorded_once_and_puts_back_what_it_took(svc, monkeypatch):
    """The bot's backup fails on the disk in its unlocked step: recorded once as a
    storage_error, and its rate limit is given back (abandon), so the next one may run."""
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Store, "write_backup", full)
    with pytest.raises(StorageError) as ei:
        svc.call("zcor_memory_backup", actor="model")
    assert ei.value.message == "The backup could not be written (No space left on device)."
    monkeypatch.undo()
    assert svc.call("zcor_memory_backup", actor="model")["backupFile"]  # not rate-limited
    records = _one_record_each(svc, [("zcor_memory_backup", "error"), ("zcor_memory_backup", "ok")])
    assert records[0]["error"]["code"] == "storage_error"


def test_a_failing_operation_on_the_memory_is_undone_and_recorded_once(svc):
    node = svc.call("zcor_memory_write", {"title": "甲", "content": "x"})["id"]

    def half_done(ctx):
        tx = svc.begin(ctx)
        tx.remove_node(node)
        raise OSError(errno.EIO, "Input/output error")

    with pytest.raises(StorageError):
        svc.calls.run_operation("zcor/history/revert", {"seq": 1}, half_done)
    assert node in svc.state.nodes, "the transaction was rolled back"
    records = _one_record_each(svc, [("zcor_memory_write", "ok"), ("zcor/history/revert", "error")])
    assert records[1]["changes"] == []
