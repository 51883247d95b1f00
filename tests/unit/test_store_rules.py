"""Store rules found open by mutation (issue 16): a backup's restore limits at their
boundary and the field each refusal names; history segments named out of order; unknown
format versions; the migration's change and kept originals; the fast loader's refusals
(null keywords, short times, errors naming the file)."""

from __future__ import annotations

import json
import re

import pytest

import zcord.core.store as store_mod
from zcord.core.errors import InvalidArgument, StateFileInvalid
from zcord.core.parsing import RestoreLimits, parse_state
from zcord.service import Service


def nested(levels: int) -> list:
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


def backup_with_after(svc, after) -> str:
    svc.call("zcor_memory_write", {"title": "t", "content": "c"})
    name = svc.call("zcor_memory_backup", {})["backupFile"]
    path = svc.dir / "backups" / name
    doc = json.loads(path.read_bytes())
    doc["history"][-1]["after"] = after
    path.write_text(json.dumps(doc))
    return name


def test_change_history_nested_exactly_to_the_depth_limit_is_restorable(svc):
    # the document, the history array and the change are levels 1-3: `after` starts at 4
    name = backup_with_after(svc, nested(3))  # levels 4, 5, 6
    state = svc.store.read_backup(name, RestoreLimits(depth=6))
    assert state.history[-1].after == nested(3)


def test_change_history_nested_one_deeper_is_refused_naming_the_setting(svc):
    name = backup_with_after(svc, nested(4))  # levels 4 to 7
    with pytest.raises(InvalidArgument) as ei:
        svc.store.read_backup(name, RestoreLimits(depth=6))
    assert "more than 6 deep" in ei.value.message and "maxRestoreDepth" in ei.value.message
    assert ei.value.field == "backupFile"


def test_backup_over_the_byte_limit_is_refused_naming_the_field(svc):
    svc.call("zcor_memory_write", {"title": "t", "content": "c"})
    name = svc.call("zcor_memory_backup", {})["backupFile"]
    size = (svc.dir / "backups" / name).stat().st_size
    assert svc.store.read_backup(name, RestoreLimits(bytes=size)).nodes  # exactly the limit: read
    with pytest.raises(InvalidArgument) as ei:
        svc.store.read_backup(name, RestoreLimits(bytes=size - 1))
    assert "maxRestoreBytes" in ei.value.message
    assert ei.value.field == "backupFile"


@pytest.mark.parametrize("edit", ["swap", "misname"])
def test_state_naming_its_history_segments_out_of_order_is_refused(monkeypatch, memdir, clock, edit):
    monkeypatch.setattr(store_mod, "SEAL_BYTES", 2000)
    with Service(memdir, clock=clock) as svc:
        for i in range(12):
            svc.call("zcor_memory_write", {"title": f"note {i}", "content": "x" * 300})
            svc.snapshot()
    path = memdir / "memory-state.json"
    doc = json.loads(path.read_bytes())
    segs = doc["historySegments"]
    assert len(segs) >= 2
    wrong = segs[1], segs[0]
    if edit == "misname":
        (memdir / "history" / segs[0]).rename(memdir / "history" / "changes-1.jsonl")
        wrong = "changes-1.jsonl", *segs[1:]
    doc["historySegments"] = list(wrong)
    path.write_text(json.dumps(doc))
    before = path.read_bytes()
    with pytest.raises(StateFileInvalid) as ei:
        Service(memdir, clock=clock).open()
    assert ei.value.message == f"memory-state.json: history segment {wrong[0]!r} is misnamed or out of order"
    assert path.read_bytes() == before


def test_state_file_of_an_unknown_format_version_is_named(memdir, clock):
    memdir.mkdir()
    (memdir / "memory-state.json").write_text('{"version": 7, "nodes": []}')
    with pytest.raises(StateFileInvalid) as ei:
        Service(memdir, clock=clock).open()
    assert ei.value.message == ("memory-state.json: unsupported format version 7 "
                                "(this zcord reads versions 1, 2 and 3)")


def test_migration_is_the_first_change_naming_the_old_version_and_file(memdir, clock):
    memdir.mkdir()
    (memdir / "memory-state.json").write_text(json.dumps({
        "version": 2, "history": [], "relationships": [], "important": [],
        "memories": [{"id": "m1", "title": "Trip", "content": "spring", "keywords": ["trip"],
                      "createdAt": "2025-04-01T10:00:00+08:00", "updatedAt": "2025-04-02T10:00:00+08:00"}]}))
    with Service(memdir, clock=clock) as svc:
        svc.call("zcor_memory_write", {"title": "new", "content": "x"})
    history = json.loads((memdir / "memory-state.json").read_bytes())["history"]
    assert [c["kind"] for c in history] == ["state.migrate", "node.create"]
    assert history[0]["before"] == {"version": "2", "file": "memory-state.json"}
    assert history[0]["after"] == {"version": 3}


def test_second_migrated_original_kept_beside_the_first_with_a_time_stamp(memdir, clock):
    memdir.mkdir()
    earlier = memdir / "memory-state.v2.json"
    earlier.write_bytes(b'{"version": 2, "memories": []}')  # kept from an earlier migration
    raw = json.dumps({"version": 2, "memories": [], "relationships": [], "important": [], "history": []}).encode()
    (memdir / "memory-state.json").write_bytes(raw)
    with Service(memdir, clock=clock) as svc:
        svc.call("zcor_memory_write", {"title": "new", "content": "x"})
    assert earlier.read_bytes() == b'{"version": 2, "memories": []}'
    kept = [p.name for p in memdir.iterdir() if p.name.startswith("memory-state.v2.") and p != earlier]
    assert len(kept) == 1 and re.fullmatch(r"memory-state\.v2\.\d{8}T\d{12}Z\.json", kept[0]), kept
    assert (memdir / kept[0]).read_bytes() == raw


def test_old_format_backup_over_the_memory_limit_is_refused_naming_the_field(svc):
    (svc.dir / "backups").mkdir(exist_ok=True)
    memories = [{"id": f"m{i}", "title": f"t{i}", "content": "c", "createdAt": "2025-04-01T10:00:00+08:00",
                 "updatedAt": "2025-04-01T10:00:00+08:00"} for i in (1, 2)]
    (svc.dir / "backups" / "old.json").write_text(json.dumps({"version": 2, "memories": memories}))
    assert len(svc.store.read_backup("old.json", RestoreLimits(nodes=2)).nodes) == 2
    with pytest.raises(InvalidArgument) as ei:
        svc.store.read_backup("old.json", RestoreLimits(nodes=1))
    assert ei.value.message == ("backup cannot be restored: backups/old.json holds 2 memories; at most 1 can be "
                                "restored (maxRestoreNodes in config.json)")
    assert ei.value.field == "backupFile"


def test_state_file_with_null_keywords_is_refused(memdir, clock):
    with Service(memdir, clock=clock) as svc:
        svc.call("zcor_memory_write", {"title": "a", "content": "x", "keywords": ["k"]})
        svc.snapshot()
    path = memdir / "memory-state.json"
    raw = path.read_bytes()
    assert raw.index(b'"keywords":["k"]') < raw.index(b'"history"')
    path.write_bytes(raw.replace(b'"keywords":["k"]', b'"keywords":null', 1))  # the node, laid out as zcord writes it
    with pytest.raises(StateFileInvalid) as ei:
        Service(memdir, clock=clock).open()
    assert "keywords" in ei.value.message


def test_state_file_errors_name_the_file_on_the_fast_path_too(svc):
    # a file laid out as zcord writes it is read by the fast loader; its errors name the file
    svc.call("zcor_memory_write", {"title": "a", "content": "x"})
    svc.snapshot()
    raw = (svc.dir / "memory-state.json").read_bytes()
    assert b'"historySegments":[]' in raw
    bad = raw.replace(b'"historySegments":[]', b'"historySegments":["changes-1.jsonl"]')
    with pytest.raises(StateFileInvalid) as ei:
        parse_state(bad, "copy.json")
    assert ei.value.message == "copy.json: history segment 'changes-1.jsonl' is misnamed or out of order"


@pytest.mark.parametrize("created", ["2026-01-01", "2026-01-01T09"])
def test_state_file_with_a_short_time_is_refused_never_crashes(svc, created):
    svc.call("zcor_memory_write", {"title": "a", "content": "x"})
    svc.snapshot()
    raw = (svc.dir / "memory-state.json").read_bytes()
    i = raw.index(b'"createdAt":"') + len(b'"createdAt":"')
    bad = raw[:i] + created.encode() + raw[raw.index(b'"', i):]
    with pytest.raises(StateFileInvalid) as ei:
        parse_state(bad, "copy.json")
    assert ei.value.message.startswith("copy.json fails validation: nodes.0.createdAt: ")
