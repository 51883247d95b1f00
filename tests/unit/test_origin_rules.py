"""The pure rules of origin, trust and review (issue 22): validating a bot's origin claim,
the origin inferred from a batch, how an origin reads, the strictest level of an origin,
trust.json and review.json as files, and the history index's origin filter on every path
(full-text, rows ordered by time, scanning the log) and across an index format change."""

from __future__ import annotations

import json
import sqlite3
import threading

import pytest

from zcord.core import origin as O
from zcord.core.errors import InvalidArgument, StateFileInvalid
from zcord.core.history_index import INDEX_VERSION
from zcord.core.oplog import OpLog
from zcord.service.review import ReviewBook, WithoutHeld
from zcord.service.trust import TrustBook


def test_a_claim_keeps_session_and_distinct_senders_in_order():
    assert O.parse_claim({"session": "qq:group:1", "senders": ["qq:2", "qq:1", "qq:2"]}) == \
        {"session": "qq:group:1", "senders": ["qq:2", "qq:1"]}
    assert O.parse_claim({"senders": []}) == {"senders": []}
    assert O.parse_claim({}) == {"senders": []}
    assert O.parse_claim({"session": None, "senders": ["a" * O.MAX_SENDER]})["senders"] == ["a" * 200]


@pytest.mark.parametrize("claim", [
    None, [], "qq:1", {"operator": True}, {"inferred": True}, {"senders": None}, {"senders": [None]},
    {"senders": [" "]}, {"senders": ["a" * 201]}, {"session": "s" * 201}, {"session": 5},
    {"senders": ["x\u2028y"]}, {"senders": ["\ud800"]}, {"senders": [str(i) for i in range(51)]},
])
def test_a_bad_claim_names_meta(claim):
    with pytest.raises(InvalidArgument) as bad:
        O.parse_claim(claim)
    assert bad.value.field == "_meta" and "zcor/origin" in bad.value.message


def test_resolve_never_gives_the_bot_the_operators_mark():
    assert O.resolve("operator", {"senders": ["qq:1"]}, ("s", ["qq:2"]), True) == {"operator": True}
    assert O.resolve("model", O.NO_CLAIM, ("s", ["qq:2"]), False) == {"session": "s", "senders": ["qq:2"],
                                                                      "inferred": True}
    assert O.resolve("model", O.NO_CLAIM, None, False) == {"senders": [], "inferred": True}
    assert O.resolve("model", {"senders": ["qq:1"]}, ("s", ["qq:2"]), True) == {"senders": ["qq:1"]}
    with pytest.raises(InvalidArgument):
        O.resolve("model", {"operator": True}, None, True)


def test_batch_senders_are_the_external_ones_latest_last():
    events = [{"origin": "external", "senderKey": "a"}, {"origin": "internal", "senderKey": "bot"},
              {"origin": "external"}, {"origin": "external", "senderKey": "b"}, {"origin": "external", "senderKey": "a"},
              {"origin": "external", "senderKey": 7}, {"origin": "external", "senderKey": "x\ny"}, "junk"]
    assert O.batch_senders(events) == ["b", "a"]
    assert O.batch_senders("nope") == []
    many = [{"origin": "external", "senderKey": f"s{i}"} for i in range(60)]
    assert O.batch_senders(many) == [f"s{i}" for i in range(10, 60)]


def test_describe_reads_as_the_tui_shows_it():
    assert O.describe({"session": "qq:group:1", "senders": ["qq:42"]}) == "from qq:42 in qq:group:1"
    assert O.describe({"session": "g", "senders": ["a", "b", "c", "d"], "inferred": True}) == \
        "from a, b, c +1 in g (inferred)"
    assert O.describe({"operator": True}) == "operator"
    assert O.describe({"senders": [], "inferred": True}) == ""
    assert O.describe(None) == ""


def test_the_strictest_level_of_an_origin_counts(tmp_path):
    book = TrustBook(tmp_path / "trust.json")
    book.load()
    book.set("qq:1", "untrusted")
    book.set("qq:2", "blocked")
    book.set("qq:3", "trusted")
    assert book.judge({"senders": ["qq:3", "qq:1"]}, "normal") == ("untrusted", ["qq:1"])
    assert book.judge({"senders": ["qq:1", "qq:2", "qq:9"]}, "blocked") == ("blocked", ["qq:2", "qq:9"])
    assert book.judge({"senders": ["qq:3"]}, "untrusted") == ("trusted", ["qq:3"])
    assert book.judge({"senders": []}, "untrusted") == ("untrusted", [])
    assert book.judge({"operator": True}, "normal") == ("normal", [])
    again = TrustBook(tmp_path / "trust.json")
    again.load()
    assert again.levels == {"qq:1": "untrusted", "qq:2": "blocked", "qq:3": "trusted"}
    assert book.set("qq:1", None) == ("untrusted", None) and "qq:1" not in book.levels


@pytest.mark.parametrize("text", ["{", '{"version": 2, "senders": {}}', '{"version": 1, "senders": {"a": "god"}}',
                                  '{"version": 1, "senders": []}', "[]"])
def test_a_broken_trust_file_stops_with_its_name(tmp_path, text):
    (tmp_path / "trust.json").write_text(text)
    with pytest.raises(StateFileInvalid) as bad:
        TrustBook(tmp_path / "trust.json").load()
    assert "trust.json" in bad.value.message


def test_bad_trust_input_changes_nothing(tmp_path):
    book = TrustBook(tmp_path / "trust.json")
    for sender, level, field in (("", "blocked", "sender"), (5, "blocked", "sender"), ("a" * 201, "normal", "sender"),
                                 ("qq:1", "admin", "level")):
        with pytest.raises(InvalidArgument) as bad:
            book.set(sender, level)
        assert bad.value.field == field
    assert not (tmp_path / "trust.json").exists()


def entry(seq: int, target: str, kind: str = "node.create", **more) -> dict:
    return {"seq": seq, "at": "2026-12-01T10:00:00+08:00", "tool": "zcor_memory_write",
            "origin": {"senders": ["qq:troll"]}, "changes": [{"changeId": seq, "kind": kind, "target": target,
                                                              "before": None, "after": {}}], **more}


def test_review_load_settles_what_a_crash_left_half_done(tmp_path):
    path = tmp_path / "review.json"
    records = {7: {"seq": 7, "status": "ok", "changes": [{"changeId": 9}]},
               8: {"seq": 8, "status": "error", "changes": []}}
    path.write_text(json.dumps({"version": 1, "pending": [
        entry(3, "m3"),                       # held, logged: stays
        entry(4, "m4", reverting=7),          # its revert was logged: gone
        entry(5, "m5", reverting=8),          # its revert failed: held again
        entry(6, "m6", reverting=12),         # its revert never reached the log: held again
        entry(11, "m11"),                     # its own operation never reached the log: gone
        entry(2, "m2", kind="node.delete"),   # held, hides nothing
    ]}))
    book = ReviewBook(path, threading.RLock())
    book.load(10, records.get)
    assert sorted(book.items) == [2, 3, 5, 6]
    assert all("reverting" not in e for e in book.items.values())
    assert book.hidden == {"m3", "m5", "m6"}
    on_disk = json.loads(path.read_text())["pending"]
    assert [e["seq"] for e in on_disk] == [2, 3, 5, 6]


def test_a_broken_review_file_stops_with_its_name(tmp_path):
    (tmp_path / "review.json").write_text('{"version": 1, "pending": [{"seq": "x"}]}')
    with pytest.raises(StateFileInvalid) as bad:
        ReviewBook(tmp_path / "review.json", threading.RLock()).load(10, lambda s: None)
    assert "review.json" in bad.value.message


def test_the_prefix_view_leaves_out_only_held_important_memories():
    class State:
        important = ["m1", "m2", "m3"]
        nodes = {"m1": 1}

    view = WithoutHeld(State(), frozenset({"m2"}))
    assert view.important == ["m1", "m3"] and view.nodes == {"m1": 1}


def rec(seq: int, minute: int, senders: list[str] | None) -> dict:
    out = {"seq": seq, "at": f"2026-05-01T10:{minute:02d}:00+08:00", "actor": "model", "tool": "zcor_memory_write",
           "status": "ok", "params": {"title": f"t{seq}"}, "changes": []}
    if senders is not None:
        out["origin"] = {"session": "g", "senders": senders}
    return out


@pytest.mark.parametrize("path", ["index", "clock-went-back", "scan"])
def test_the_origin_filter_is_exact_on_every_path(tmp_path, path):
    minutes = [1, 2, 3, 4, 5, 6] if path != "clock-went-back" else [6, 1, 5, 2, 4, 3]
    who = [["qq:1"], ["qq:2"], ["qq:1", "qq:2"], None, ["qq:10"], ["qq:1"]]
    (tmp_path / "operations.jsonl").write_text("".join(json.dumps(rec(i + 1, m, w)) + "\n"
                                                       for i, (m, w) in enumerate(zip(minutes, who))))
    log = OpLog(tmp_path / "operations.jsonl")
    log.open()
    try:
        if path == "scan":
            log.index.close_db()  # no index: the log is scanned
        items, total = log.query([], None, None, 2, 0, origin="qq:1")
        everything, _ = log.query([], None, None, 10, 0, origin="qq:1")
        assert total == 3 and len(items) == 2
        assert sorted(i["seq"] for i in everything) == [1, 3, 6]
        assert [i["seq"] for i in log.query(["t3"], None, None, 10, 0, origin="qq:2")[0]] == [3]
        assert log.query([], None, None, 10, 0, origin="qq:")[1] == 0
    finally:
        log.close()


def test_an_index_of_the_older_format_is_rebuilt_with_origins(tmp_path):
    (tmp_path / "operations.jsonl").write_text(json.dumps(rec(1, 1, ["qq:1"])) + "\n")
    log = OpLog(tmp_path / "operations.jsonl")
    log.open()
    log.query([], None, None, 10, 0)
    log.close()
    db = sqlite3.connect(tmp_path / "operations.index.sqlite")
    db.execute("UPDATE meta SET v = ? WHERE k = 'version'", (INDEX_VERSION - 1,))
    db.execute("DROP TABLE origins")
    db.commit()
    db.close()
    log = OpLog(tmp_path / "operations.jsonl")
    log.open()
    try:
        assert log.query([], None, None, 10, 0, origin="qq:1")[1] == 1
    finally:
        log.close()
