"""Rules of the operation log and its history index found open by mutation (issue 16): the
character-pair document (`bi`: a record's last character found, halves of neighbouring
characters no match), text after a NUL, lines longer than a read chunk, errors naming their
byte offset, no silent fallback to the scan, one note per indexing failure, the largest seq
of the tail taken at open."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from zcord.core.errors import StateFileInvalid
from zcord.core.history_index import READ_CHUNK
from zcord.core.oplog import OpLog


def seqs(d: Path, keywords: list[str]) -> tuple[list[int], int]:
    log = OpLog(d / "operations.jsonl")
    log.open()
    try:
        items, total = log.query(keywords, None, None, 100, 0)
    finally:
        log.close()
    return [i["seq"] for i in items], total


def write_lines(d: Path, records: list[dict]) -> None:
    # compact, as zcord writes them
    text = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records)
    (d / "operations.jsonl").write_text(text)


def line(seq: int, content: str, minute: int | None = None) -> dict:
    # as an older or hand-edited log may hold it: no "recovered" (or any field) after params,
    # so the record's text ends with the content's last character
    return {"seq": seq, "at": f"2026-05-01T10:{seq if minute is None else minute:02d}:00+08:00",
            "actor": "operator", "tool": "zcor_memory_write", "status": "ok", "params": {"content": content}}


@pytest.mark.parametrize("minutes", [None, [5, 1]], ids=["time-ordered", "clock-went-back"])
def test_last_character_of_a_record_is_found(tmp_path, minutes):
    write_lines(tmp_path, [line(1, "爬山Ж", None if minutes is None else minutes[0]),
                           line(2, "ЖЖ猫", None if minutes is None else minutes[1])])
    assert seqs(tmp_path, ["ж"]) == ([2, 1] if minutes is None else [1, 2], 2)  # normalized: lower case
    assert seqs(tmp_path, ["猫"]) == ([2], 1)  # only ever the very last character
    assert seqs(tmp_path, ["山ж"]) == ([1], 1)


@pytest.mark.parametrize("minutes", [None, [5, 1]], ids=["time-ordered", "clock-went-back"])
def test_halves_of_neighbouring_characters_are_no_match(tmp_path, minutes):
    # "abc" in UTF-32-BE hex is 00000061 00000062 00000063: read 2 hex digits off the
    # boundaries it would spell U+6100 U+6200 (愀戀), which the record does not hold
    write_lines(tmp_path, [line(1, "abc", None if minutes is None else minutes[0]),
                           line(2, "愀戀x", None if minutes is None else minutes[1])])
    assert seqs(tmp_path, ["愀戀"]) == ([2], 1)
    assert seqs(tmp_path, ["愀"]) == ([2], 1)
    assert seqs(tmp_path, ["ab"]) == ([1], 1)


def test_scan_reads_a_record_longer_than_its_read_chunk(tmp_path):
    # a keyword holding NUL is answered by scanning the log, in chunks of READ_CHUNK bytes
    long = "x" * (READ_CHUNK + 1000) + "a\x00b"
    write_lines(tmp_path, [line(1, "a\x00b"), line(2, long), line(3, "xx a\x00b")])
    assert seqs(tmp_path, ["a\x00b"]) == ([3, 2, 1], 3)
    assert seqs(tmp_path, ["x" * 10]) == ([2], 1)  # the index, for comparison


@pytest.mark.parametrize("minutes", [None, [5, 1]], ids=["time-ordered", "clock-went-back"])
def test_text_after_a_nul_is_found_by_the_index(tmp_path, minutes):
    # FTS5 reads a text only up to a NUL: the index holds U+FFFD in its place (a bug until
    # index format 3: whatever followed a NUL in a record was never found)
    write_lines(tmp_path, [line(1, "pla\x00in tail", None if minutes is None else minutes[0]),
                           line(2, "pla\ufffdin", None if minutes is None else minutes[1])])
    assert seqs(tmp_path, ["in tail"]) == ([1], 1)
    assert seqs(tmp_path, ["ta"]) == ([1], 1)
    assert seqs(tmp_path, ["a\x00i"]) == ([1], 1)  # NUL and U+FFFD stay apart (scanned)
    assert seqs(tmp_path, ["a\ufffdi"]) == ([2], 1)
    assert seqs(tmp_path, ["plain"]) == ([], 0)


def test_index_answers_short_and_long_keywords_itself(tmp_path, caplog):
    # the pair table, the trigram table, both at once: no fallback to the scan
    write_lines(tmp_path, [line(1, "爬山 ab"), line(2, "爬山"), line(3, "ab")])
    assert seqs(tmp_path, ["ab"]) == ([3, 1], 2)
    assert seqs(tmp_path, ["爬山 "]) == ([1], 1)
    assert seqs(tmp_path, ["爬山 ", "ab"]) == ([1], 1)
    assert seqs(tmp_path, ["爬山 a", "b"]) == ([1], 1)
    assert "query failed" not in caplog.text


def test_invalid_line_met_while_indexing_is_named_by_its_byte_offset(tmp_path):
    write_lines(tmp_path, [line(1, "a"), line(3, "b")])
    good, last = (tmp_path / "operations.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "operations.jsonl").write_text(good + "not json\n" + last)
    with pytest.raises(StateFileInvalid) as ei:
        seqs(tmp_path, ["abc"])
    assert ei.value.message.startswith(f"operations.jsonl at byte {len(good)} holds an invalid record (")


def test_background_indexing_failure_is_noted_once(tmp_path, caplog):
    write_lines(tmp_path, [line(1, "a")])
    log = OpLog(tmp_path / "operations.jsonl")
    log.open()
    calls = []

    def failing_build():
        calls.append(1)
        raise OSError(5, "Input/output error")

    log.index.build_steps = failing_build  # what the background thread runs
    try:
        for n in (1, 2, 3):
            log.warm(background=True)
            deadline = time.monotonic() + 10
            while len(calls) < n and time.monotonic() < deadline:
                time.sleep(0.005)
            assert len(calls) == n
    finally:
        log.close()
    err = "".join(f"{r.name}: {r.getMessage()}\n" for r in caplog.records)  # logger zcord.core.history_index
    assert err.count("indexing stopped: [Errno 5] Input/output error") == 1, err


def test_open_takes_the_largest_seq_of_the_tail_not_the_last_lines(tmp_path):
    # an older zcord appended a late search record out of order: seq 5 before seq 3
    first = {**line(1, "a"), "changes": [{"changeId": 1, "kind": "node.create", "target": "m1"}]}
    write_lines(tmp_path, [first, line(5, "late"), line(3, "b")])
    log = OpLog(tmp_path / "operations.jsonl")
    log.open()
    try:
        assert (log.last_seq, log.last_change_id) == (5, 1)
    finally:
        log.close()


def test_index_that_cannot_be_created_is_said_and_queries_scan(tmp_path, caplog):
    write_lines(tmp_path, [line(1, "爬山"), line(2, "ab")])
    (tmp_path / "operations.index.sqlite").mkdir()  # in the way: cannot be removed or opened
    assert seqs(tmp_path, ["爬山"]) == ([1], 1)
    err = "".join(f"{r.name}: {r.getMessage()}\n" for r in caplog.records)  # logger zcord.core.history_index
    assert "zcord.core.history_index: operations.index.sqlite: cannot be created (" in err
    assert "); history queries will scan the log" in err


def test_a_new_index_is_built_without_a_word_and_an_unreadable_one_is_named(tmp_path, caplog):
    """A fresh index is known by its missing meta table (sqlite_master), not by the words of
    sqlite's error; any other failure to read it is said."""
    write_lines(tmp_path, [line(1, "爬山"), line(2, "ab")])
    assert seqs(tmp_path, ["爬山"]) == ([1], 1)  # builds operations.index.sqlite
    assert [r for r in caplog.records if r.name.startswith("zcord")] == []
    index = tmp_path / "operations.index.sqlite"
    with sqlite3.connect(index) as db:  # meta a view of a table that is gone: "no such table"
        db.executescript("DROP TABLE meta; CREATE TABLE t (k, v); CREATE VIEW meta AS SELECT k, v FROM t; "
                         "DROP TABLE t;")
    assert seqs(tmp_path, ["爬山"]) == ([1], 1)
    said = [r.getMessage() for r in caplog.records if r.name == "zcord.core.history_index"]
    assert len(said) == 1 and "operations.index.sqlite: unusable (" in said[0], said
