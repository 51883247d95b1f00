"""The pure rules of forgetting a person (issue 34): what names them (other spellings of
their key and texts), the cheap line test never missing what the full test finds, how a
record, a change and a state document are rewritten, and that a second pass changes nothing."""

from __future__ import annotations

import json

import orjson
import pytest

from zcord.service.erasure import REDACTED, Scrubber

PLAN = {"key": "qq:alice", "keys": ["qq:alice", "QQ:Alice", "alice"], "memories": ["m2", "m5"],
        "lift": {"m2": "m1", "m5": None}, "needles": ["爱丽丝的电话号码", "depression notes"]}


@pytest.fixture
def sc() -> Scrubber:
    return Scrubber(PLAN)


@pytest.mark.parametrize("text", [
    "qq:alice", "QQ:ALICE", "ｑｑ:ａｌｉｃｅ", "qq:al\u200bice", " qq:alice ", "qq:private:qq:alice",
    "m2", "Alice", "ALICE", "ask Alice later", "her 爱丽丝的电话号码 is", "her 愛麗絲的電話號碼 is", "DEPRESSION NOTES here",
])
def test_other_spellings_name_them(sc, text):
    assert sc.names(text)
    line = orjson.dumps({"params": {"x": text}}) + b"\n"
    assert sc.maybe(line), "the cheap test must not miss what the full test finds"


@pytest.mark.parametrize("text", ["qq:alice2", "qq:malice", "Malice in wonderland", "m21", "bob", "depression",
                                  "爱丽"])
def test_others_are_not_them(sc, text):
    assert not sc.names(text)


def test_a_record_about_them_keeps_only_its_frame_and_a_second_pass_changes_nothing(sc):
    rec = {"seq": 7, "at": "2026-12-06T08:00:00.000+00:00", "actor": "model", "tool": "zcor_memory_write",
           "params": {"title": "x", "content": "depression notes"}, "status": "ok", "error": None,
           "changes": [{"changeId": 3, "at": "t", "actor": "model", "tool": "zcor_memory_write", "opSeq": 7,
                        "kind": "node.update", "target": "m2", "before": {"id": "m2"}, "after": {"id": "m2"},
                        "receipt": None},
                       {"changeId": 4, "at": "t", "actor": "model", "tool": "zcor_memory_write", "opSeq": 7,
                        "kind": "node.update", "target": "m9", "before": {"id": "m9", "parentId": "m2"},
                        "after": {"id": "m9", "parentId": "m5", "supersededBy": "m2", "supersedeReason": "r"},
                        "receipt": None}],
           "result": {"id": "m2"}, "recovered": False,
           "origin": {"session": "qq:private:qq:alice", "senders": ["qq:bob", "qq:alice"], "speaker": "qq:alice"}}
    out = sc.record(rec)
    assert out["params"] == REDACTED and out["result"] is None
    assert out["changes"][0] == {"changeId": 3, "at": "t", "actor": "model", "tool": "zcor_memory_write",
                                 "opSeq": 7, "kind": "erased", "target": None, "before": None, "after": None,
                                 "receipt": None}
    assert out["changes"][1]["before"]["parentId"] == "m1" and out["changes"][1]["after"]["parentId"] is None
    assert out["changes"][1]["after"]["supersededBy"] is None
    assert out["origin"] == {"senders": ["qq:bob"]}
    assert sc.record(out) == out
    assert "alice" not in json.dumps(out).lower() and "depression" not in json.dumps(out)


def test_a_record_of_someone_else_is_left_alone(sc):
    rec = {"seq": 8, "actor": "model", "tool": "zcor_memory_write", "params": {"title": "tea", "content": "green"},
           "changes": [{"changeId": 5, "kind": "node.create", "target": "m9", "after": {"id": "m9", "parentId": None}}],
           "result": None, "origin": {"session": "qq:group:1", "senders": ["qq:bob"]}}
    assert sc.record(rec) == rec
    assert not sc.maybe(orjson.dumps(rec) + b"\n")


def test_a_state_document_loses_their_memories_relationship_and_marks(sc):
    doc = {"version": 3, "nextId": 10, "important": ["m2", "m9"],
           "nodes": [{"id": "m1"}, {"id": "m2", "parentId": "m1"}, {"id": "m9", "parentId": "m2"}],
           "relationships": [{"personId": "QQ:Alice", "memoryNodeId": "m2"}, {"personId": "qq:bob", "memoryNodeId": "m2"}],
           "historySegments": [], "history": [{"changeId": 1, "kind": "relationship.create", "target": "QQ:Alice",
                                               "after": {"personId": "QQ:Alice"}}]}
    out = sc.state(doc)
    assert [n["id"] for n in out["nodes"]] == ["m1", "m9"] and out["nodes"][1]["parentId"] == "m1"
    assert out["important"] == ["m9"]
    assert out["relationships"] == [{"personId": "qq:bob", "memoryNodeId": None}]
    assert out["history"][0]["kind"] == "erased" and out["history"][0]["changeId"] == 1
    assert sc.state(out) == out
