"""zcord.oplog's text helpers: what history keywords are matched against (found untested by
mutation testing, docs/testing.md)."""

from __future__ import annotations

from zcord.core.history_index import _indexable, record_search_text


def test_record_search_text_is_every_value_normalized_one_per_line():
    record = {"tool": "zcor_memory_write", "params": {"title": "ＫＴＶ Night", "keywords": ["A", None, 3]},
              "error": None}
    assert record_search_text(record) == "zcor_memory_write\nktv night\na\n3"
    assert record_search_text({}) == ""


def test_lone_surrogates_of_a_hand_edited_log_become_replacement_characters():
    assert _indexable("ok \u4e2d") == "ok \u4e2d"
    assert _indexable("a\ud800b\udfff") == "a\ufffdb\ufffd"
