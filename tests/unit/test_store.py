"""The Memory directory (SPEC §1, §2 backup/restore, §4): state file, lock, corruption,
migrations, backups and restore, and what happens when a write fails."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tests.conftest import FailingDisk, persisted_bytes
from zcord.core.errors import (
    InvalidArgument,
    MayHaveTakenEffect,
    MemoryDirInUse,
    NotFound,
    StateFileInvalid,
    StorageError,
)
from zcord.service import Service

REPO = Path(__file__).resolve().parents[2]
TZ = timezone(timedelta(hours=8))
T0 = datetime(2026, 2, 1, 8, 0, tzinfo=TZ)

NODE_KEYS = {"id", "title", "content", "keywords", "parentId", "sourceMessage", "createdAt", "updatedAt",
             "supersededBy", "supersedeReason"}
REL_KEYS = {"personId", "name", "aliases", "relationship", "affinity", "reason", "memoryNodeId", "createdAt",
            "updatedAt"}


def call(s: Service, tool: str, **params):
    name = tool if tool.startswith("zcor_") else (
        f"zcor_{tool}" if tool.startswith(("relationship_", "synonyms_")) else f"zcor_memory_{tool}")
    return s.call(name, params)


def snapshot(s: Service) -> dict:
    """Everything a caller can see of the state (reads only)."""
    nodes = call(s, "query", includeSuperseded=True, limit=100)["items"]
    return {
        "nodes": nodes,
        "important": [n["id"] for n in nodes if call(s, "read", id=n["id"])["important"]],
        "roots": call(s, "children")["items"],
        "relationships": call(s, "relationship_query", limit=100)["items"],
    }


def populate(s: Service) -> dict:
    """A small Memory: a tree, an important mark, a relationship linked to a node."""
    root = call(s, "write", title="Family", content="my family", keywords=["family"])
    mom = call(s, "write", title="Mom", content="likes gardening", parentId=root["id"],
               sourceMessage="my mom loves her garden")
    call(s, "write", title="Work", content="a bakery")
    call(s, "important", id=mom["id"], important=True)
    call(s, "important", id=root["id"], important=True)
    call(s, "relationship_write", personId="qq:1", name="Mom", aliases=["Ma"], relationship="mother",
         affinity=90, reason="family", memoryNodeId=mom["id"])
    return {"root": root["id"], "mom": mom["id"]}


def state_bytes(memdir: Path) -> bytes:
    """The persisted Memory (snapshot plus journal), as a snapshot would write it."""
    return persisted_bytes(memdir)


def make_v3_file(tmp_path: Path, name: str, build) -> bytes:
    """The bytes of a real version 3 state produced by a separate Service."""
    other = tmp_path / name
    with Service(other) as s:
        build(s)
    return (other / "memory-state.json").read_bytes()


LEGACY = [
    {"id": "m1", "title": "Trip to Paris", "content": "in spring", "createdAt": "2025-04-01T10:00:00+08:00",
     "updatedAt": "2025-04-02T10:00:00+08:00"},
    {"id": "m7", "title": "Favourite food", "content": "dumplings", "keywords": ["food", "dumplings"],
     "createdAt": "2025-05-01T10:00:00+08:00", "updatedAt": "2025-05-01T10:00:00+08:00"},
]

V1 = {
    "version": 1,
    "memories": [
        {"id": "m1", "title": "Trip to Paris", "content": "in spring", "createdAt": "2025-04-01T10:00:00+08:00",
         "updatedAt": "2025-04-02T10:00:00+08:00"},
        {"id": "m2", "title": "Dog named Biscuit", "content": "a beagle",
         "createdAt": "2025-04-03T10:00:00+08:00", "updatedAt": "2025-04-03T10:00:00+08:00"},
        {"id": "m3", "title": "Birthday", "content": "in June", "createdAt": "2025-04-04T10:00:00+08:00",
         "updatedAt": "2025-04-04T10:00:00+08:00"},
    ],
    "important": ["m2", "m1"],
    "history": [],
}

V2 = {
    "version": 2,
    "memories": [
        {"id": "m1", "title": "Trip to Paris", "content": "in spring", "keywords": ["paris", "trip", "旅行"],
         "createdAt": "2025-04-01T10:00:00+08:00", "updatedAt": "2025-04-02T10:00:00+08:00"},
        {"id": "m2", "title": "Dog", "content": "a beagle", "keywords": ["dog"],
         "createdAt": "2025-04-03T10:00:00+08:00", "updatedAt": "2025-04-03T10:00:00+08:00"},
    ],
    "important": ["m1"],
    "history": [],
    "relationships": [
        {"personId": "qq:5", "name": "Lin", "aliases": ["Linny"], "relationship": "classmate", "affinity": 30,
         "reason": "study group", "createdAt": "2025-04-05T10:00:00+08:00",
         "updatedAt": "2025-04-06T10:00:00+08:00"},
    ],
}


def dump(doc) -> bytes:
    return json.dumps(doc, ensure_ascii=False, indent=1).encode()


def same_instant(a: str, b: str) -> bool:
    return datetime.fromisoformat(a) == datetime.fromisoformat(b)


# -- the state file -------------------------------------------------------------------------------------


def test_state_file_is_version_3_with_camel_case_fields(svc):
    ids = populate(svc)
    doc = json.loads(state_bytes(svc.dir))
    assert doc["version"] == 3
    assert {n["id"] for n in doc["nodes"]} == {ids["root"], ids["mom"], "m3"}
    mom = next(n for n in doc["nodes"] if n["id"] == ids["mom"])
    assert NODE_KEYS <= set(mom)
    assert mom["parentId"] == ids["root"]
    assert mom["sourceMessage"] == "my mom loves her garden"
    assert datetime.fromisoformat(mom["createdAt"]).utcoffset() is not None
    assert doc["important"] == [ids["mom"], ids["root"]]
    (rel,) = doc["relationships"]
    assert REL_KEYS <= set(rel)
    assert rel["personId"] == "qq:1" and rel["memoryNodeId"] == ids["mom"] and rel["affinity"] == 90
    # the change history with full before/after
    assert isinstance(doc["history"], list) and doc["history"]
    creates = [c for c in doc["history"] if c.get("after") and isinstance(c["after"], dict)
               and c["after"].get("id") == ids["mom"]]
    assert creates and creates[0]["after"]["title"] == "Mom"
    # no snake_case names anywhere in the node and relationship records
    assert not any("_" in k for n in doc["nodes"] for k in n)
    assert not any("_" in k for r in doc["relationships"] for k in r)


def test_state_file_holds_update_before_and_after(svc):
    call(svc, "write", title="old title", content="old")
    call(svc, "write", id="m1", title="new title", content="new")
    doc = json.loads(state_bytes(svc.dir))
    updates = [c for c in doc["history"] if c.get("before") and c.get("after")]
    assert updates[-1]["before"]["title"] == "old title"
    assert updates[-1]["after"]["title"] == "new title"


def test_reopen_gives_same_state(memdir, clock):
    with Service(memdir, clock=clock) as s:
        ids = populate(s)
        call(s, "write", title="Later", content="x", parentId=ids["root"])
        before = snapshot(s)
        before_children = call(s, "children", parentId=ids["root"])
        before_rel = call(s, "relationship_read", personId="qq:1")
        before_read = call(s, "read", id=ids["mom"])
    with Service(memdir, clock=clock) as s:
        assert snapshot(s) == before
        assert call(s, "children", parentId=ids["root"]) == before_children
        assert call(s, "relationship_read", personId="qq:1") == before_rel
        assert call(s, "read", id=ids["mom"]) == before_read
        # important order is kept: a 4th..6th mark pushes out the first-marked (mom) first
        for i in range(4):
            call(s, "important", id=call(s, "write", title=f"x{i}", content="")["id"], important=True)
        assert not call(s, "read", id=ids["mom"])["important"]
        assert call(s, "read", id=ids["root"])["important"]


def test_ids_never_reused_after_delete_and_reopen(memdir, clock):
    with Service(memdir, clock=clock) as s:
        call(s, "write", title="a", content="")
        b = call(s, "write", title="b", content="")
        call(s, "delete", id=b["id"])
        c = call(s, "write", title="c", content="")
        assert c["id"] not in ("m1", b["id"])
        issued = {"m1", b["id"], c["id"]}
        call(s, "delete", id=c["id"])
    with Service(memdir, clock=clock) as s:
        d = call(s, "write", title="d", content="")
    assert d["id"] not in issued
    assert int(d["id"][1:]) > max(int(i[1:]) for i in issued)


def test_first_open_creates_layout(memdir):
    assert not memdir.exists()
    with Service(memdir):
        assert (memdir / "backups").is_dir()
        assert (memdir / "blobs").is_dir()
        syn = memdir / "synonyms.json"
        assert syn.is_file()
        assert syn.read_bytes() == (REPO / "synonyms.json").read_bytes()
        assert json.loads(syn.read_bytes())["groups"]


def test_existing_synonyms_file_not_overwritten(memdir):
    memdir.mkdir()
    own = b'{"version": 1, "groups": [["aa", "bb"]]}\n'
    (memdir / "synonyms.json").write_bytes(own)
    with Service(memdir):
        pass
    assert (memdir / "synonyms.json").read_bytes() == own


# -- the lock ---------------------------------------------------------------------------------------------


def test_second_open_in_process_refused(svc, memdir):
    with pytest.raises(MemoryDirInUse) as ei:
        Service(memdir).open()
    assert str(svc.dir) in ei.value.message
    # the first one still works
    assert call(svc, "write", title="still mine", content="")["id"]


def test_lock_released_on_close(memdir):
    s1 = Service(memdir).open()
    s1.close()
    s2 = Service(memdir).open()
    try:
        assert call(s2, "children")["items"] == []
    finally:
        s2.close()


def _open_in_subprocess(memdir: Path) -> subprocess.CompletedProcess:
    code = "import sys; from zcord.service import Service; Service(sys.argv[1]).open(); print('OPENED')"
    return subprocess.run([sys.executable, "-c", code, str(memdir)], capture_output=True, text=True,
                          cwd=REPO, timeout=60)


def test_second_process_refused_with_message(svc, memdir):
    r = _open_in_subprocess(memdir)
    assert r.returncode != 0
    assert "OPENED" not in r.stdout
    assert "MemoryDirInUse" in r.stderr
    assert str(svc.dir) in r.stderr
    assert "in use" in r.stderr


def test_lock_held_by_other_process(memdir):
    code = ("import sys; from zcord.service import Service; s = Service(sys.argv[1]).open(); "
            "print('OPENED', flush=True); sys.stdin.read(); s.close()")
    p = subprocess.Popen([sys.executable, "-c", code, str(memdir)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert p.stdout.readline().strip() == "OPENED"
        with pytest.raises(MemoryDirInUse) as ei:
            Service(memdir).open()
        assert str(p.pid) in ei.value.message or "in use" in ei.value.message
    finally:
        p.stdin.close()
        p.wait(timeout=60)
        p.stdout.close()
        p.stderr.close()
    with Service(memdir):
        pass


# -- a broken state file ----------------------------------------------------------------------------------


def _valid_v3(tmp_path) -> dict:
    def build(s):
        call(s, "write", title="root", content="r")
        call(s, "write", title="child", content="c", parentId="m1")
        call(s, "relationship_write", personId="p", name="P", relationship="r", affinity=1, reason="x",
             memoryNodeId="m1")

    return json.loads(make_v3_file(tmp_path, "valid", build))


def _broken_cases(tmp_path) -> dict[str, bytes]:
    good = _valid_v3(tmp_path)
    raw = dump(good)
    cases = {"truncated": raw[: len(raw) // 2], "empty": b"", "not-utf8": b"\xff\xfe{]"}

    def variant(fn):
        doc = json.loads(raw)
        fn(doc)
        return dump(doc)

    cases["node-without-title"] = variant(lambda d: d["nodes"][0].pop("title"))
    cases["affinity-out-of-range"] = variant(lambda d: d["relationships"][0].update(affinity=500))
    cases["time-without-offset"] = variant(lambda d: d["nodes"][0].update(createdAt="2026-01-01T00:00:00"))
    cases["time-a-year-string"] = variant(lambda d: d["nodes"][0].update(createdAt="2026"))
    cases["time-a-number"] = variant(lambda d: d["nodes"][1].update(updatedAt=1767225600))
    cases["relationship-time-digits"] = variant(lambda d: d["relationships"][0].update(createdAt="1767225600.5"))
    cases["unknown-version"] = variant(lambda d: d.update(version=9))
    cases["array-of-numbers"] = b"[1, 2, 3]"
    cases["dangling-parent"] = variant(lambda d: d["nodes"][1].update(parentId="m99"))
    cases["dangling-link"] = variant(lambda d: d["relationships"][0].update(memoryNodeId="m99"))
    cases["important-unknown"] = variant(lambda d: d.update(important=["m42"]))
    cases["duplicate-id"] = variant(lambda d: d["nodes"].append(dict(d["nodes"][0])))
    cases["parent-cycle"] = variant(lambda d: d["nodes"][0].update(parentId="m2"))
    return cases


CASES = ["truncated", "empty", "not-utf8", "node-without-title", "affinity-out-of-range", "time-without-offset",
         "time-a-year-string", "time-a-number", "relationship-time-digits", "unknown-version", "array-of-numbers", "dangling-parent", "dangling-link", "important-unknown",
         "duplicate-id", "parent-cycle"]


@pytest.mark.parametrize("case", CASES)
def test_invalid_state_file_refused_and_untouched(tmp_path, case):
    bad = _broken_cases(tmp_path)[case]
    memdir = tmp_path / "mem"
    memdir.mkdir()
    path = memdir / "memory-state.json"
    path.write_bytes(bad)
    mtime = os.stat(path).st_mtime_ns
    with pytest.raises(StateFileInvalid) as ei:
        Service(memdir).open()
    assert "memory-state.json" in ei.value.message
    assert path.read_bytes() == bad
    assert os.stat(path).st_mtime_ns == mtime
    # the lock was released: trying again gives the same clear error, not "in use"
    with pytest.raises(StateFileInvalid):
        Service(memdir).open()
    assert path.read_bytes() == bad
    assert not list(memdir.glob("memory-state.v*.json"))


@pytest.mark.parametrize("case,field", [("time-a-year-string", "createdAt"), ("time-a-number", "updatedAt"),
                                        ("relationship-time-digits", "createdAt")])
def test_a_number_for_a_time_is_refused_by_name_not_read_as_epoch_seconds(tmp_path, case, field):
    """Version 3 times are ISO 8601 strings; "2026" or 1767225600 is not read as seconds since 1970."""
    memdir = tmp_path / "mem"
    memdir.mkdir()
    (memdir / "memory-state.json").write_bytes(_broken_cases(tmp_path)[case])
    with pytest.raises(StateFileInvalid) as ei:
        Service(memdir).open()
    assert field in ei.value.message and "ISO 8601" in ei.value.message


def test_invalid_state_file_exits_nonzero_in_subprocess(tmp_path):
    memdir = tmp_path / "mem"
    memdir.mkdir()
    (memdir / "memory-state.json").write_bytes(b'{"version": 3, "nodes": [')
    r = _open_in_subprocess(memdir)
    assert r.returncode != 0
    assert "memory-state.json" in r.stderr
    assert (memdir / "memory-state.json").read_bytes() == b'{"version": 3, "nodes": ['


# -- migrations -----------------------------------------------------------------------------------------------


def test_legacy_memories_json_imported(memdir, clock):
    memdir.mkdir()
    raw = dump(LEGACY)
    (memdir / "memories.json").write_bytes(raw)
    with Service(memdir, clock=clock) as s:
        paris = call(s, "read", id="m1")
        assert paris["title"] == "Trip to Paris" and paris["content"] == "in spring"
        assert paris["parentId"] is None
        assert same_instant(paris["createdAt"], "2025-04-01T10:00:00+08:00")
        assert same_instant(paris["updatedAt"], "2025-04-02T10:00:00+08:00")
        # keywords derived from the title when absent, kept when present
        assert "Paris" in paris["keywords"]
        assert all(k in paris["title"] and len(k) >= 2 for k in paris["keywords"])
        assert call(s, "read", id="m7")["keywords"] == ["food", "dumplings"]
        assert call(s, "query")["total"] == 2
        # reads do not write the new format
        assert not (memdir / "memory-state.json").exists()
        new = call(s, "write", title="New one", content="x")
        assert new["id"] not in ("m1", "m7")
    doc = json.loads(state_bytes(memdir))
    assert doc["version"] == 3
    assert {n["id"] for n in doc["nodes"]} == {"m1", "m7", new["id"]}
    assert (memdir / "memories.json").read_bytes() == raw
    with Service(memdir, clock=clock) as s:
        assert call(s, "query")["total"] == 3
    assert (memdir / "memories.json").read_bytes() == raw


def test_legacy_file_untouched_without_mutation(memdir):
    memdir.mkdir()
    raw = dump(LEGACY)
    (memdir / "memories.json").write_bytes(raw)
    with Service(memdir) as s:
        call(s, "query")
        call(s, "history")
    assert not (memdir / "memory-state.json").exists()
    assert (memdir / "memories.json").read_bytes() == raw


def test_version_1_migrated(memdir, clock):
    memdir.mkdir()
    raw = dump(V1)
    path = memdir / "memory-state.json"
    path.write_bytes(raw)
    with Service(memdir, clock=clock) as s:
        assert path.read_bytes() == raw
        paris = call(s, "read", id="m1")
        assert paris["keywords"] and "Paris" in paris["keywords"]
        assert all(k in paris["title"] for k in paris["keywords"])
        assert "Biscuit" in call(s, "read", id="m2")["keywords"]
        assert call(s, "relationship_query")["total"] == 0
        roots = [i["id"] for i in call(s, "children")["items"]]
        assert roots == ["m1", "m2", "m3"]
        assert all(call(s, "read", id=i)["parentId"] is None for i in roots)
        assert call(s, "read", id="m2")["important"] and call(s, "read", id="m1")["important"]
        assert not call(s, "read", id="m3")["important"]
        new = call(s, "write", title="after migration", content="x")
        assert new["id"] not in ("m1", "m2", "m3")
    kept = memdir / "memory-state.v1.json"
    assert kept.read_bytes() == raw
    doc = json.loads(path.read_bytes())
    assert doc["version"] == 3
    assert doc["important"] == ["m2", "m1"]
    assert doc["relationships"] == []
    with Service(memdir, clock=clock) as s:
        assert [i["id"] for i in call(s, "children")["items"]] == ["m1", "m2", "m3", new["id"]]
        assert call(s, "read", id="m2")["important"]
    assert kept.read_bytes() == raw


def test_version_1_important_order_kept(memdir):
    memdir.mkdir()
    (memdir / "memory-state.json").write_bytes(dump(V1))
    with Service(memdir) as s:
        # 4 more marks: first-marked order is m2, m1, so m2 goes first, then m1
        ids = [call(s, "write", title=f"n{i}", content="")["id"] for i in range(4)]
        r = None
        for i in ids:
            r = call(s, "important", id=i, important=True)
            if r.get("replaced"):
                break
        assert r["replaced"]["id"] == "m2"


def test_version_2_migrated(memdir, clock):
    memdir.mkdir()
    raw = dump(V2)
    path = memdir / "memory-state.json"
    path.write_bytes(raw)
    with Service(memdir, clock=clock) as s:
        assert call(s, "read", id="m1")["keywords"] == ["paris", "trip", "旅行"]
        assert call(s, "read", id="m2")["keywords"] == ["dog"]
        assert call(s, "read", id="m1")["important"]
        rel = call(s, "relationship_read", personId="qq:5")
        assert rel["name"] == "Lin" and rel["aliases"] == ["Linny"] and rel["affinity"] == 30
        assert rel["relationship"] == "classmate" and rel["reason"] == "study group"
        assert rel["memoryNodeId"] is None
        assert same_instant(rel["createdAt"], "2025-04-05T10:00:00+08:00")
        assert same_instant(rel["updatedAt"], "2025-04-06T10:00:00+08:00")
        assert [i["id"] for i in call(s, "children")["items"]] == ["m1", "m2"]
        assert path.read_bytes() == raw
        call(s, "relationship_write", personId="qq:5", name="Lin", relationship="classmate", affinity=35,
             reason="helped me", memoryNodeId="m2")
    assert (memdir / "memory-state.v2.json").read_bytes() == raw
    doc = json.loads(path.read_bytes())
    assert doc["version"] == 3
    assert doc["relationships"][0]["memoryNodeId"] == "m2"
    with Service(memdir, clock=clock) as s:
        assert call(s, "relationship_read", personId="qq:5")["affinity"] == 35


# 2025-04-01T10:00:00+08:00 and 2025-04-02T10:00:00+08:00 as epoch numbers
EPOCH_S_1, EPOCH_S_2 = 1743472800, 1743559200
ISO_1, ISO_2 = "2025-04-01T10:00:00+08:00", "2025-04-02T10:00:00+08:00"


def _with_epoch_times(fmt: str, scale: int, fraction: float = 0.0) -> bytes:
    first = EPOCH_S_1 * scale + fraction
    second = EPOCH_S_2 * scale
    if fmt == "legacy":
        doc = json.loads(dump(LEGACY))
        memories = doc
    else:
        doc = json.loads(dump(V1 if fmt == "v1" else V2))
        memories = doc["memories"]
    memories[0].update(createdAt=first, updatedAt=second)
    if fmt == "v2":
        doc["relationships"][0].update(createdAt=first, updatedAt=second)
    return dump(doc)


@pytest.mark.parametrize("scale", [1000, 1], ids=["milliseconds", "seconds"])
@pytest.mark.parametrize("fmt", ["legacy", "v1", "v2"])
def test_old_files_with_epoch_times(memdir, fmt, scale):
    """Old files may carry epoch numbers: above 1e11 they are milliseconds, else seconds."""
    memdir.mkdir()
    raw = _with_epoch_times(fmt, scale, fraction=0.5 if scale == 1000 else 0.0)
    (memdir / ("memories.json" if fmt == "legacy" else "memory-state.json")).write_bytes(raw)
    with Service(memdir) as s:
        m1 = call(s, "read", id="m1")
        assert datetime.fromisoformat(m1["createdAt"]) - datetime.fromisoformat(ISO_1) \
            == timedelta(milliseconds=0.5 if scale == 1000 else 0)
        assert same_instant(m1["updatedAt"], ISO_2)
        # the time filters see the same instants
        day = call(s, "query", **{"from": "2025-04-02T00:00:00+08:00", "to": "2025-04-02T23:59:59+08:00"})
        assert [n["id"] for n in day["items"]] == ["m1"]
        if fmt == "v2":
            rel = call(s, "relationship_read", personId="qq:5")
            assert same_instant(rel["updatedAt"], ISO_2)


@pytest.mark.parametrize("value, instant", [
    ("2025-04-01T02:00:00Z", "2025-04-01T10:00:00+08:00"),
    ("2025-04-01T02:00:00", "2025-04-01T10:00:00+08:00"),            # no offset: UTC
    ("2025-04-01T10:00:00+08:00", "2025-04-01T10:00:00+08:00"),
    (100_000_000_000, "5138-11-16T09:46:40+00:00"),                   # 1e11 itself is seconds
    (100_000_000_001, "1973-03-03T09:46:40.001+00:00"),               # above it, milliseconds
])
def test_old_file_time_forms(memdir, value, instant):
    memdir.mkdir()
    doc = json.loads(dump(LEGACY))
    doc[0].update(createdAt=value, updatedAt=value)
    (memdir / "memories.json").write_bytes(dump(doc))
    with Service(memdir) as s:
        m1 = call(s, "read", id="m1")
    assert same_instant(m1["createdAt"], instant) and same_instant(m1["updatedAt"], instant)


def test_invalid_state_message_lists_three_problems_and_counts_the_rest(tmp_path):
    doc = _valid_v3(tmp_path)
    for node in doc["nodes"]:
        node.pop("title")
        node.pop("content")
    memdir = tmp_path / "mem"
    memdir.mkdir()
    (memdir / "memory-state.json").write_bytes(dump(doc))
    with pytest.raises(StateFileInvalid) as ei:
        Service(memdir).open()
    assert ei.value.message == ("memory-state.json fails validation: nodes.0.title: Field required; "
                                "nodes.0.content: Field required; nodes.1.title: Field required; and 1 more")
    doc["nodes"][1]["content"] = "back"
    (memdir / "memory-state.json").write_bytes(dump(doc))
    with pytest.raises(StateFileInvalid) as ei:
        Service(memdir).open()
    assert ei.value.message.endswith("nodes.1.title: Field required"), "exactly three: no 'and 0 more'"


@pytest.mark.parametrize("bad", [1e300, -1e300, 10 ** 40, float("nan"), float("inf")])
@pytest.mark.parametrize("fmt", ["legacy", "v1", "v2"])
def test_old_files_with_impossible_epoch_times_refused(memdir, fmt, bad):
    memdir.mkdir()
    doc = json.loads(dump(LEGACY if fmt == "legacy" else V1 if fmt == "v1" else V2))
    memories = doc if fmt == "legacy" else doc["memories"]
    memories[0]["updatedAt"] = bad
    raw = json.dumps(doc).encode()
    name = "memories.json" if fmt == "legacy" else "memory-state.json"
    (memdir / name).write_bytes(raw)
    with pytest.raises(StateFileInvalid) as ei:
        Service(memdir).open()
    assert name in ei.value.message and "updatedAt" in ei.value.message and "not a time" in ei.value.message
    assert (memdir / name).read_bytes() == raw
    assert sorted(p.name for p in memdir.iterdir() if p.suffix == ".json" and "memor" in p.name) == [name]


@pytest.mark.parametrize("doc, first_new", [
    ([], "m1"),
    ({"version": 1, "memories": [], "important": [], "history": []}, "m1"),
    ({"version": 2, "memories": [], "relationships": []}, "m1"),
    ([{"id": "note", "title": "t", "content": "", "createdAt": ISO_1}], "m1"),
    ([{"id": 12, "title": "t", "content": "", "createdAt": ISO_1},
      {"id": "m9", "title": "u", "content": "", "createdAt": ISO_1}], "m10"),
])
def test_ids_after_an_old_file(memdir, doc, first_new):
    memdir.mkdir()
    name = "memories.json" if isinstance(doc, list) else "memory-state.json"
    (memdir / name).write_bytes(dump(doc))
    with Service(memdir) as s:
        assert call(s, "write", title="new", content="")["id"] == first_new
        for rec in doc if isinstance(doc, list) else []:
            assert call(s, "read", id=str(rec["id"]))["title"] == rec["title"], "a numeric id is read as a string"


def test_version_2_relationship_defaults(memdir):
    """Old relationship records may lack the optional parts: no aliases, empty texts, 0 affinity."""
    doc = json.loads(dump(V2))
    doc["relationships"] = [{"personId": "qq:7", "name": "Bo", "createdAt": ISO_1}]
    memdir.mkdir()
    (memdir / "memory-state.json").write_bytes(dump(doc))
    with Service(memdir) as s:
        rel = call(s, "relationship_read", personId="qq:7")
    assert (rel["aliases"], rel["relationship"], rel["affinity"], rel["reason"]) == ([], "", 0, "")
    assert rel["memoryNodeId"] is None
    assert same_instant(rel["updatedAt"], ISO_1), "updatedAt falls back to createdAt"


@pytest.mark.parametrize("change, needle", [
    (lambda d: d.update(relationships={"personId": "x"}), "relationships: expected an array of relationships"),
    (lambda d: d["relationships"].append("qq:6"), "relationships[1]: expected an object"),
    (lambda d: d["relationships"][0].pop("personId"), "relationships[0].personId: expected a string"),
    (lambda d: d["relationships"][0].update(name=5), "relationships[0].name: expected a string, got 5"),
    (lambda d: d["relationships"][0].update(affinity=500), "relationships[0]: affinity"),
    (lambda d: d["relationships"][0].update(createdAt="yesterday"), "relationships[0].createdAt"),
    (lambda d: d["relationships"][0].update(updatedAt="soon"), "relationships[0].updatedAt: 'soon' is not"),
    (lambda d: d["memories"][0].update(updatedAt=True), "memories[0].updatedAt: expected a time, got True"),
    (lambda d: d["memories"][0].update(createdAt=None), "memories[0].createdAt: expected a time, got None"),
    (lambda d: d["memories"][1].update(keywords="dog"), "memories[1].keywords: expected an array of strings"),
    (lambda d: d["memories"][1].update(keywords=["dog", 5]), "memories[1].keywords: expected an array of strings"),
    (lambda d: d["memories"][0].update(title=5), "memories[0].title: expected a string, got 5"),
    (lambda d: d["memories"].append(7), "memories[2]: expected an object"),
    (lambda d: d.update(memories={}), "memories: expected an array of memories"),
])
def test_broken_version_2_file_named_precisely(memdir, change, needle):
    doc = json.loads(dump(V2))
    change(doc)
    raw = dump(doc)
    memdir.mkdir()
    (memdir / "memory-state.json").write_bytes(raw)
    with pytest.raises(StateFileInvalid) as ei:
        Service(memdir).open()
    assert ei.value.message.startswith("memory-state.json: ")
    assert needle in ei.value.message
    assert (memdir / "memory-state.json").read_bytes() == raw


def test_version_2_parent_fields_ignored_nodes_are_roots(memdir):
    doc = json.loads(dump(V2))
    doc["memories"][1]["parentId"] = "m1"
    memdir.mkdir()
    (memdir / "memory-state.json").write_bytes(dump(doc))
    with Service(memdir) as s:
        assert call(s, "read", id="m2")["parentId"] is None


@pytest.mark.parametrize("failing", ["memory-state.json", "memory-state.v1.json"])
def test_failed_first_write_keeps_old_version_file(memdir, failing_disk, failing):
    memdir.mkdir()
    raw = dump(V1)
    path = memdir / "memory-state.json"
    path.write_bytes(raw)
    with Service(memdir) as s:
        failing_disk.on("write", only=lambda target: target.name == failing)
        with pytest.raises(StorageError):
            call(s, "write", title="x", content="")
        failing_disk.off()
        assert path.read_bytes() == raw
        call(s, "write", title="y", content="")
    assert (memdir / "memory-state.v1.json").read_bytes() == raw
    assert json.loads(path.read_bytes())["version"] == 3


# -- backup ---------------------------------------------------------------------------------------------------


def test_backup_returns_timestamped_file_in_backups(svc, clock):
    populate(svc)
    clock.set(T0)
    r = call(svc, "backup")
    name = r["backupFile"]
    assert "/" not in name
    path = svc.dir / "backups" / name
    assert path.is_file()
    # the timestamp is the call's time (UTC or local form)
    assert "20260201" in name.replace("-", "")
    doc = json.loads(path.read_bytes())
    assert doc["version"] == 3
    assert {n["title"] for n in doc["nodes"]} == {"Family", "Mom", "Work"}
    assert len(doc["relationships"]) == 1


def test_two_backups_same_millisecond_distinct(svc, clock):
    call(svc, "write", title="x", content="")
    clock.set(T0)
    clock.step = timedelta(0)
    a = call(svc, "backup")["backupFile"]
    b = call(svc, "backup")["backupFile"]
    c = call(svc, "backup")["backupFile"]
    assert len({a, b, c}) == 3
    for name in (a, b, c):
        assert (svc.dir / "backups" / name).is_file()


def test_backup_recorded_in_history_with_name(svc):
    name = call(svc, "backup")["backupFile"]
    assert call(svc, "history", keywords=[name])["total"] == 1


# -- restore --------------------------------------------------------------------------------------------------


def test_restore_own_backup(svc, clock):
    ids = populate(svc)
    saved = snapshot(svc)
    name = call(svc, "backup")["backupFile"]
    call(svc, "write", title="after backup", content="x")
    call(svc, "relationship_delete", personId="qq:1")
    call(svc, "important", id=ids["mom"], important=False)
    pre = snapshot(svc)
    r = call(svc, "restore", backupFile=name)
    auto = r["backupFile"]
    assert auto != name and (svc.dir / "backups" / auto).is_file()
    assert snapshot(svc) == saved
    # the automatic backup holds the pre-restore state
    r2 = call(svc, "restore", backupFile=auto)
    assert snapshot(svc) == pre
    assert r2["backupFile"] not in (auto, name)


def test_restore_takes_automatic_backup_of_pre_restore_state(svc, tmp_path):
    populate(svc)
    def build(s):  # an empty Memory (a state file is written at the first change)
        call(s, "write", title="temp", content="")
        call(s, "delete", id="m1")

    (svc.dir / "backups" / "empty.json").write_bytes(make_v3_file(tmp_path, "empty", build))
    r = call(svc, "restore", backupFile="empty.json")
    auto = json.loads((svc.dir / "backups" / r["backupFile"]).read_bytes())
    assert auto["version"] == 3
    assert {n["title"] for n in auto["nodes"]} == {"Family", "Mom", "Work"}
    assert [x["personId"] for x in auto["relationships"]] == ["qq:1"]
    assert len(auto["important"]) == 2
    assert call(svc, "query")["total"] == 0
    assert call(svc, "relationship_query")["total"] == 0


def test_restore_hand_placed_v3(svc, tmp_path, memdir, clock):
    def build(s):
        call(s, "write", title="Other A", content="a")
        call(s, "write", title="Other B", content="b", parentId="m1")
        call(s, "important", id="m2", important=True)
        call(s, "relationship_write", personId="zz", name="Z", relationship="r", affinity=-5, reason="x",
             memoryNodeId="m1")

    (svc.dir / "backups" / "other.json").write_bytes(make_v3_file(tmp_path, "other", build))
    call(svc, "write", title="mine", content="")
    call(svc, "restore", backupFile="other.json")
    assert {n["title"] for n in call(svc, "query")["items"]} == {"Other A", "Other B"}
    assert call(svc, "read", id="m2")["parentId"] == "m1"
    assert call(svc, "read", id="m2")["important"]
    assert call(svc, "relationship_read", personId="zz")["memoryNodeId"] == "m1"
    # written to disk: survives reopen
    svc.close()
    with Service(memdir, clock=clock) as s:
        assert {n["title"] for n in call(s, "query")["items"]} == {"Other A", "Other B"}
        assert call(s, "relationship_read", personId="zz")["affinity"] == -5


def test_restore_hand_placed_v1(svc):
    call(svc, "write", title="mine", content="")
    (svc.dir / "backups" / "old-v1.json").write_bytes(dump(V1))
    r = call(svc, "restore", backupFile="old-v1.json")
    assert (svc.dir / "backups" / r["backupFile"]).is_file()
    assert [i["id"] for i in call(svc, "children")["items"]] == ["m1", "m2", "m3"]
    assert "Paris" in call(svc, "read", id="m1")["keywords"]
    assert call(svc, "read", id="m2")["important"]
    assert call(svc, "relationship_query")["total"] == 0
    doc = json.loads(state_bytes(svc.dir))
    assert doc["version"] == 3
    assert doc["important"] == ["m2", "m1"]
    # restoring does not create memory-state.v1.json (that is only for the loaded file)
    assert (svc.dir / "backups" / "old-v1.json").read_bytes() == dump(V1)


def test_restore_hand_placed_v2(svc):
    (svc.dir / "backups" / "old-v2.json").write_bytes(dump(V2))
    call(svc, "restore", backupFile="old-v2.json")
    assert call(svc, "read", id="m1")["keywords"] == ["paris", "trip", "旅行"]
    rel = call(svc, "relationship_read", personId="qq:5")
    assert rel["memoryNodeId"] is None and rel["affinity"] == 30
    assert json.loads(state_bytes(svc.dir))["version"] == 3


def test_restore_legacy_array(svc):
    (svc.dir / "backups" / "legacy.json").write_bytes(dump(LEGACY))
    call(svc, "restore", backupFile="legacy.json")
    assert {n["id"] for n in call(svc, "query")["items"]} == {"m1", "m7"}


def test_ids_never_reused_after_restoring_older_backup(svc, memdir, clock):
    call(svc, "write", title="a", content="")
    name = call(svc, "backup")["backupFile"]
    issued = {"m1"}
    for title in "bcd":
        issued.add(call(svc, "write", title=title, content="")["id"])
    call(svc, "delete", id=max(issued, key=lambda i: int(i[1:])))
    call(svc, "restore", backupFile=name)
    assert [n["id"] for n in call(svc, "query")["items"]] == ["m1"]
    new = call(svc, "write", title="after restore", content="")["id"]
    assert new not in issued
    assert int(new[1:]) > max(int(i[1:]) for i in issued)
    issued.add(new)
    svc.close()
    with Service(memdir, clock=clock) as s:
        newer = call(s, "write", title="after reopen", content="")["id"]
    assert int(newer[1:]) > max(int(i[1:]) for i in issued)


def test_ids_above_restored_file_ids(svc):
    call(svc, "write", title="a", content="")
    doc = json.loads(dump(V1))
    doc["memories"][0]["id"] = "m50"
    doc["important"] = []
    (svc.dir / "backups" / "big.json").write_bytes(dump(doc))
    call(svc, "restore", backupFile="big.json")
    new = call(svc, "write", title="new", content="")["id"]
    assert int(new[1:]) > 50


def _nothing_changed(svc, before_state: bytes, before_backups: set[str], before_snap: dict):
    assert state_bytes(svc.dir) == before_state
    assert set(os.listdir(svc.dir / "backups")) == before_backups
    assert snapshot(svc) == before_snap


@pytest.mark.parametrize("name", ["../x", "../memory-state.json", "a/b", "..", ".", "/etc/passwd",
                                  "backups/x.json", "..\\x", "./x.json"])
def test_restore_path_traversal_refused(svc, name):
    populate(svc)
    call(svc, "backup")
    # make sure the targets exist, so refusal is not just "not found"
    (svc.dir / "backups" / "a").mkdir()
    (svc.dir / "backups" / "a" / "b").write_bytes(state_bytes(svc.dir))
    (svc.dir.parent / "x").write_bytes(state_bytes(svc.dir))
    before = (state_bytes(svc.dir), set(os.listdir(svc.dir / "backups")), snapshot(svc))
    with pytest.raises(InvalidArgument) as ei:
        call(svc, "restore", backupFile=name)
    assert ei.value.field == "backupFile"
    assert "backupFile" in ei.value.message
    _nothing_changed(svc, *before)


def test_restore_symlink_leaving_backups_refused(svc, tmp_path):
    populate(svc)
    outside = tmp_path / "outside.json"
    outside.write_bytes(make_v3_file(tmp_path, "elsewhere", lambda s: call(s, "write", title="evil", content="")))
    (svc.dir / "backups" / "evil.json").symlink_to(outside)
    # also a relative link up to the Memory directory itself
    (svc.dir / "backups" / "state.json").symlink_to(Path("..") / "memory-state.json")
    before = (state_bytes(svc.dir), set(os.listdir(svc.dir / "backups")), snapshot(svc))
    for name in ("evil.json", "state.json"):
        with pytest.raises(InvalidArgument) as ei:
            call(svc, "restore", backupFile=name)
        assert ei.value.field == "backupFile"
        _nothing_changed(svc, *before)


def test_restore_unknown_name_not_found(svc):
    populate(svc)
    before = (state_bytes(svc.dir), set(os.listdir(svc.dir / "backups")), snapshot(svc))
    with pytest.raises(NotFound) as ei:
        call(svc, "restore", backupFile="memory-state-20990101T000000.000Z.json")
    assert ei.value.field == "backupFile"
    _nothing_changed(svc, *before)


def test_restore_invalid_backup_refused(svc):
    populate(svc)
    (svc.dir / "backups" / "broken.json").write_bytes(b'{"version": 3, "nodes": [')
    before = (state_bytes(svc.dir), set(os.listdir(svc.dir / "backups")), snapshot(svc))
    with pytest.raises(InvalidArgument) as ei:
        call(svc, "restore", backupFile="broken.json")
    assert ei.value.field == "backupFile"
    _nothing_changed(svc, *before)


def test_restore_recorded_in_history(svc):
    populate(svc)
    name = call(svc, "backup")["backupFile"]
    r = call(svc, "restore", backupFile=name)
    rec = call(svc, "history", limit=1)["items"][0]
    assert rec["tool"] == "zcor_memory_restore" and rec["status"] == "ok"
    assert rec["changes"]
    text = json.dumps(rec)
    assert name in text and r["backupFile"] in text


# -- a state write that fails -------------------------------------------------------------------------------------


def _enospc(*args, **kwargs):
    raise OSError(28, "No space left on device")


MUTATIONS = {
    "create": lambda s, ids: call(s, "write", title="never saved", content="x"),
    "update": lambda s, ids: call(s, "write", id=ids["mom"], title="never saved", content="changed"),
    "move-to-root": lambda s, ids: call(s, "write", id=ids["mom"], title="Mom", content="likes gardening",
                                        parentId=None),
    "delete": lambda s, ids: call(s, "delete", id="m3"),
    "important-mark": lambda s, ids: call(s, "important", id="m3", important=True),
    "important-unmark": lambda s, ids: call(s, "important", id=ids["mom"], important=False),
    "relationship-create": lambda s, ids: call(s, "relationship_write", personId="qq:2", name="N",
                                               relationship="r", affinity=0, reason="x"),
    "relationship-update": lambda s, ids: call(s, "relationship_write", personId="qq:1", name="Mum",
                                               relationship="r", affinity=-50, reason="x", memoryNodeId=None),
    "relationship-delete": lambda s, ids: call(s, "relationship_delete", personId="qq:1"),
    "merge": lambda s, ids: call(s, "merge", ids=[ids["mom"], "m3"], title="merged", content="m",
                                 reason="same"),
    "supersede": lambda s, ids: call(s, "supersede", ids=[ids["mom"]], replacementId="m3", reason="old"),
}


@pytest.mark.parametrize("how", ["write", "fsync"])
@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_failed_state_write_changes_nothing(svc, monkeypatch, failing_disk, mutation, how):
    """The disk refuses the change's journal record at os.write or os.fsync (below the
    append, so a write that bypassed the journal would be caught)."""
    ids = populate(svc)
    before = snapshot(svc)
    raw = state_bytes(svc.dir)
    files = sorted(os.listdir(svc.dir))
    failing_disk.on(how)
    with pytest.raises(StorageError) as ei:
        MUTATIONS[mutation](svc, ids)
    assert FailingDisk.ERRORS[how][1] in ei.value.message
    assert "nothing changed" in ei.value.message
    assert failing_disk.failures >= 1
    failing_disk.off()
    assert snapshot(svc) == before
    assert state_bytes(svc.dir) == raw
    assert sorted(os.listdir(svc.dir)) == files, "a temporary file was left behind"
    monkeypatch.undo()
    if how == "fsync":  # the written record was cut off again; the failure itself is logged
        rec = call(svc, "history", keywords=["storage_error"])["items"]
        assert rec and rec[0]["status"] == "error" and rec[0]["changes"] == []
    # and the same call now works
    MUTATIONS[mutation](svc, ids)
    assert state_bytes(svc.dir) != raw


def test_failed_create_does_not_leave_a_node(svc, failing_disk):
    call(svc, "write", title="a", content="")
    failing_disk.on("write")
    with pytest.raises(StorageError):
        call(svc, "write", title="ghost", content="")
    failing_disk.off()
    assert call(svc, "query", keywords=["ghost"])["total"] == 0
    assert [i["title"] for i in call(svc, "children")["items"]] == ["a"]
    new = call(svc, "write", title="real", content="")
    assert call(svc, "read", id=new["id"])["title"] == "real"
    assert [i["title"] for i in call(svc, "children")["items"]] == ["a", "real"]


def test_after_failed_write_state_file_history_is_right(memdir, clock, failing_disk):
    """The next successful save must store the change that happened, not the one that failed."""
    with Service(memdir, clock=clock) as s:
        call(s, "write", title="original", content="v1")
        failing_disk.on("fsync")
        with pytest.raises(StorageError):
            call(s, "write", id="m1", title="FAILED-TITLE", content="v2")
        failing_disk.off()
        call(s, "write", id="m1", title="good title", content="v3")
    doc = json.loads(state_bytes(memdir))
    assert [n["title"] for n in doc["nodes"]] == ["good title"]
    text = json.dumps(doc["history"])
    assert "FAILED-TITLE" not in text
    updates = [c for c in doc["history"] if c.get("before") and c.get("after")]
    assert updates[-1]["before"]["title"] == "original"
    assert updates[-1]["after"]["title"] == "good title"
    with Service(memdir, clock=clock) as s:
        hist = call(s, "history", keywords=["good title"])["items"]
        assert any(c["after"]["title"] == "good title" for h in hist for c in h["changes"])


@pytest.mark.parametrize("how", ["write", "fsync", "replace"])
def test_failed_backup_is_storage_error(svc, failing_disk, how):
    populate(svc)
    failing_disk.on(how)
    with pytest.raises(StorageError):
        call(svc, "backup")
    failing_disk.off()
    assert os.listdir(svc.dir / "backups") == []


@pytest.mark.parametrize("target,words", [("backups", "pre-restore backup could not be written"),
                                          ("memory-state.json", "could not be saved")])
def test_failed_restore_changes_nothing_and_lets_changes_through_again(svc, failing_disk, memdir, target, words):
    """A restore whose pre-restore backup or new snapshot cannot be written (its slow
    phase, without the lock) changes nothing, and changes are no longer held after it."""
    populate(svc)
    name = call(svc, "backup")["backupFile"]
    call(svc, "write", title="after the backup", content="")
    raw = state_bytes(memdir)
    nodes = dict(svc.state.nodes)
    failing_disk.on("write", only=lambda p: p.name == target or p.parent.name == target)
    with pytest.raises(StorageError) as ei:
        call(svc, "restore", backupFile=name)
    assert words in ei.value.message and "EMFILE" not in ei.value.message
    failing_disk.off()
    assert svc.state.nodes == nodes and state_bytes(memdir) == raw
    assert "restore" not in [c.kind.split(".")[-1] for c in svc.state.history]
    assert call(svc, "write", title="still writable", content="")["id"]
    assert call(svc, "restore", backupFile=name)["restoredFrom"] == name


# -- a log write that fails after the state was written ------------------------------------------------------------


def _failing_append(*args, **kwargs):
    raise OSError(5, "Input/output error")


def _recovered(items: list[dict], node_id: str) -> list[dict]:
    return [i for i in items if i.get("recovered") and any(c.get("target") == node_id for c in i["changes"])]


def test_journal_failure_changes_nothing(svc, monkeypatch, memdir, clock):
    """Past the first write, a change's log record is its only durable copy until the next
    snapshot: when it cannot be appended, the change is undone and nothing changed."""
    call(svc, "write", title="first", content="")
    raw = state_bytes(memdir)
    monkeypatch.setattr(svc.oplog, "append", _failing_append)
    with pytest.raises(StorageError) as ei:
        call(svc, "write", title="unlogged", content="secret-content")
    assert "nothing changed" in ei.value.message
    monkeypatch.undo()
    assert state_bytes(memdir) == raw
    with pytest.raises(NotFound):
        call(svc, "read", id="m2")
    assert call(svc, "write", title="second", content="")["id"] == "m2"
    svc.close()
    with Service(memdir, clock=clock) as s:
        assert [n.title for n in s.state.nodes.values()] == ["first", "second"]


def test_log_failure_after_state_write(svc, monkeypatch, memdir, clock):
    """The first write of a new Memory creates memory-state.json before its log record (as
    a restore does): when the record then fails, the change stands and is logged later."""
    monkeypatch.setattr(svc.oplog, "append", _failing_append)
    with pytest.raises(MayHaveTakenEffect) as ei:
        call(svc, "write", title="unlogged", content="secret-content")
    assert "may have taken effect" in ei.value.message.lower()
    # it did take effect
    assert call(svc, "read", id="m1")["title"] == "unlogged"
    assert "unlogged" in state_bytes(memdir).decode()
    monkeypatch.undo()

    call(svc, "read", id="m1")  # the next call, with the log working again
    hist = call(svc, "history")["items"]
    rec = _recovered(hist, "m1")
    assert len(rec) == 1
    assert rec[0]["status"] == "ok"
    assert rec[0]["tool"] == "zcor_memory_write"
    assert any(c.get("after") and c["after"]["content"] == "secret-content" for c in rec[0]["changes"])
    assert call(svc, "history", keywords=["secret-content"])["total"] >= 1

    svc.close()
    with Service(memdir, clock=clock) as s:
        hist = call(s, "history", limit=100)["items"]
        assert len(_recovered(hist, "m1")) == 1
        assert call(s, "read", id="m1")["title"] == "unlogged"


def test_history_right_after_log_failure_shows_the_change(svc, monkeypatch):
    """A history query as the first call after the log recovers must already list the change."""
    monkeypatch.setattr(svc.oplog, "append", _failing_append)
    with pytest.raises(MayHaveTakenEffect):
        call(svc, "write", title="unlogged", content="secret-content")
    monkeypatch.undo()
    hist = call(svc, "history", keywords=["secret-content"])
    assert hist["total"] == 1
    assert hist["items"][0]["changes"][0]["after"]["title"] == "unlogged"


def test_log_failure_then_reopen_recovers(svc, monkeypatch, memdir, clock):
    monkeypatch.setattr(svc.oplog, "append", _failing_append)
    with pytest.raises(MayHaveTakenEffect):
        call(svc, "write", title="lost log", content="only-in-state")
    svc.close()
    with Service(memdir, clock=clock) as s:
        hist = call(s, "history")["items"]
        rec = _recovered(hist, "m1")
        assert len(rec) == 1
        assert rec[0]["changes"][0]["after"]["content"] == "only-in-state"
        assert call(s, "read", id="m1")["title"] == "lost log"
    with Service(memdir, clock=clock) as s:
        assert len(_recovered(call(s, "history", limit=100)["items"], "m1")) == 1


def test_log_failure_on_read_is_not_an_error(svc, monkeypatch):
    call(svc, "write", title="x", content="")
    monkeypatch.setattr(svc.oplog, "append", _failing_append)
    assert call(svc, "read", id="m1")["title"] == "x"


# -- more on loading ----------------------------------------------------------------------------------------------


def test_state_file_preferred_over_legacy(memdir, clock):
    with Service(memdir, clock=clock) as s:
        call(s, "write", title="current", content="")
    raw = dump(LEGACY)
    (memdir / "memories.json").write_bytes(raw)
    with Service(memdir, clock=clock) as s:
        assert [n["title"] for n in call(s, "query")["items"]] == ["current"]
        call(s, "write", title="another", content="")
    assert (memdir / "memories.json").read_bytes() == raw


def test_invalid_legacy_file_refused_and_untouched(memdir):
    memdir.mkdir()
    bad = b'[{"id": "m1", "title": "no content or times"}]'
    (memdir / "memories.json").write_bytes(bad)
    with pytest.raises(StateFileInvalid) as ei:
        Service(memdir).open()
    assert "memories.json" in ei.value.message
    assert (memdir / "memories.json").read_bytes() == bad
    assert not (memdir / "memory-state.json").exists()


def test_change_missing_from_log_after_crash_is_recovered(memdir, clock):
    """A crash between the state write and the log append: the change is logged at the next start."""
    with Service(memdir, clock=clock) as s:
        call(s, "write", title="logged", content="")
        call(s, "write", title="crash-before-log", content="")
    log = next(p for p in memdir.iterdir() if p.is_file() and b"crash-before-log" in p.read_bytes()
               and p.name != "memory-state.json")
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:-1]))
    with Service(memdir, clock=clock) as s:
        assert call(s, "read", id="m2")["title"] == "crash-before-log"
        hist = call(s, "history", keywords=["crash-before-log"])["items"]
        assert len(hist) == 1 and hist[0]["changes"][0]["after"]["title"] == "crash-before-log"
        # the next id is fresh
        assert call(s, "write", title="next", content="")["id"] == "m3"


def test_torn_last_log_line_dropped(memdir, clock):
    with Service(memdir, clock=clock) as s:
        call(s, "write", title="fine", content="")
        log = s.oplog.path
    with open(log, "ab") as f:
        f.write(b'{"seq": 99, "at": "2026-')
    with Service(memdir, clock=clock) as s:
        call(s, "read", id="m1")
        items = call(s, "history")["items"]
        assert [i["tool"] for i in items] == ["zcor_memory_read", "zcor_memory_write"]
    for line in log.read_bytes().splitlines():
        json.loads(line)


def test_corrupt_log_line_reported_not_rewritten(memdir, clock):
    with Service(memdir, clock=clock) as s:
        call(s, "write", title="one", content="")
        call(s, "write", title="two", content="")
        call(s, "read", id="m1")
        log = s.oplog.path
    lines = log.read_bytes().splitlines(keepends=True)
    lines[1] = b"this is not json\n"
    bad = b"".join(lines)
    log.write_bytes(bad)
    try:
        s = Service(memdir, clock=clock).open()
    except StateFileInvalid as e:
        assert log.name in e.message
    else:
        try:
            with pytest.raises(StateFileInvalid) as ei:
                call(s, "history")
            assert log.name in ei.value.message
        finally:
            s.close()
    assert log.read_bytes().startswith(bad)


def test_restore_symlink_inside_backups_allowed(svc):
    populate(svc)
    name = call(svc, "backup")["backupFile"]
    (svc.dir / "backups" / "latest.json").symlink_to(name)
    call(svc, "write", title="after", content="")
    call(svc, "restore", backupFile="latest.json")
    assert call(svc, "query", keywords=["after"])["total"] == 0


def test_stale_lock_file_from_dead_process_does_not_block(memdir):
    memdir.mkdir()
    (memdir / "zcord.lock").write_text("999999\n")
    with Service(memdir) as s:
        assert call(s, "children")["items"] == []


def test_temporary_files_left_by_an_interrupted_write_are_removed_and_counted_in_the_log(memdir, caplog):
    """The count goes to the store's logger, a child of "zcord" (stderr under zcord's logging set-up),
    at the next open."""
    with Service(memdir):
        pass
    left = [memdir / ".memory-state.json.123.0badc0de.tmp", memdir / "backups" / ".memory-state-x.json.9.00000000.tmp"]
    for path in left:
        path.write_bytes(b"half")
    with caplog.at_level(logging.WARNING, logger="zcord"), Service(memdir):
        pass
    assert not any(p.exists() for p in left)
    assert [(r.name, r.getMessage()) for r in caplog.records] == \
        [("zcord.core.store", "removed 2 temporary file(s) left by an interrupted write")]
