"""Lore files, generated (hypothesis): World Info entries, card books and zcor JSONL lines
whose fields hold any JSON value, and PNGs cut, flipped or padded at random. Reading one
either gives a Book or refuses it with an InvalidArgument naming the file (`data`) and,
in `data.where`, the entry and field — never another exception. An import of a refused
file changes nothing."""

from __future__ import annotations

import json
import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.strategies import json_values
from tests.lorefiles import book_entry, card, png_card, wi_entry
from zcord.core.errors import InvalidArgument
from zcord.interop import readers
from zcord.service import Service
from zcord.service import interop as X

pytestmark = pytest.mark.fuzz

EXAMPLES = int(os.environ.get("ZCOR_FUZZ_EXAMPLES", "150"))
WI_FIELDS = ["uid", "key", "keysecondary", "comment", "content", "constant", "disable", "group", "extensions"]
BOOK_FIELDS = ["keys", "secondary_keys", "comment", "name", "content", "constant", "enabled", "id", "extensions"]
NODE_FIELDS = ["id", "title", "content", "keywords", "parentId", "supersededBy", "createdAt", "type"]


def _read(raw: bytes) -> None:
    try:
        readers.read(raw)
    except InvalidArgument as e:
        assert e.field == "data" and e.message.endswith("nothing was imported."), e.message
        assert isinstance(e.data.get("where"), str)


@settings(max_examples=EXAMPLES, deadline=None)
@given(field=st.sampled_from(WI_FIELDS), value=json_values, where=st.sampled_from(["entry", "zcor"]))
def test_world_info_entries_with_any_value(field, value, where):
    e = wi_entry(1, ["k"], "c", "t")
    if where == "zcor":
        e["extensions"] = {"zcor": {"id": value, "parentId": value}}
    else:
        e[field] = value
    _read(json.dumps({"entries": {"1": e, "2": wi_entry(2, ["j"], "d")}}).encode())


@settings(max_examples=EXAMPLES, deadline=None)
@given(field=st.sampled_from(BOOK_FIELDS), value=json_values, version=st.sampled_from([2, 3]),
       book=st.booleans())
def test_card_books_with_any_value(field, value, version, book):
    c = card([book_entry(["k"], "c", id=1), book_entry(["j"], "d", id=2)], version=version)
    if book:
        c["data"]["character_book"]["entries"][0][field] = value
    else:
        c["data"][field] = value
    _read(json.dumps(c).encode())


@settings(max_examples=EXAMPLES, deadline=None)
@given(field=st.sampled_from(NODE_FIELDS), value=json_values, extra=json_values)
def test_jsonl_lines_with_any_value(field, value, extra):
    node = {"type": "memory", "id": "m1", "title": "t", "content": "", "keywords": [], "parentId": None,
            "createdAt": "2026-01-01T00:00:00+00:00", "updatedAt": "2026-01-01T00:00:00+00:00"}
    node[field] = value
    lines = [{"type": "zcor-export", "version": 1}, node, {"type": "important", "ids": extra},
             {"type": "synonyms", "terms": extra}]
    _read("\n".join(json.dumps(x) for x in lines).encode())


GOOD_PNG = png_card({"chara": card([book_entry(["k"], "c")])})


@settings(max_examples=EXAMPLES, deadline=None)
@given(cut=st.integers(0, len(GOOD_PNG)), flips=st.lists(st.tuples(st.integers(8, len(GOOD_PNG) - 1),
                                                                  st.integers(0, 255)), max_size=4),
       tail=st.binary(max_size=40))
def test_pngs_cut_flipped_or_padded(cut, flips, tail):
    raw = bytearray(GOOD_PNG)
    for at, byte in flips:
        raw[at] = byte
    _read(bytes(raw[:cut]) + tail)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(WI_FIELDS), value=json_values)
def test_a_refused_import_changes_nothing(field, value):
    e = wi_entry(1, ["k"], "c", "t")
    e[field] = value
    raw = json.dumps({"entries": {"1": e}}).encode()
    with Service(tempfile.mkdtemp(dir="/tmp", prefix="zf")) as svc:
        try:
            X.import_file(svc, raw, X.Options(name="f.json"))
        except InvalidArgument:
            assert svc.state.nodes == {} and svc.seq <= 1


@pytest.mark.parametrize("raw,where", [
    (b'{"entries": {"1": {"uid": "\\ud800", "key": ["k"], "content": "c"}}}', 'entries["1"].uid'),
    (b'{"entries": {"1": {"uid": 1, "key": ["k"], "content": "c", "\\udfff": 1}}}', 'entries["1"]["\\udfff"]'),
    (b'{"type": "zcor-export", "version": 1}\n{"type": "relationship", "personId": "\\ud801", "name": "n"}\n',
     "line 2.personId"),
])
def test_a_lone_surrogate_anywhere_is_named(raw, where):
    with pytest.raises(InvalidArgument) as e:
        readers.read(raw)
    assert e.value.data["where"] == where and "lone surrogate" in e.value.message
    # a pair (an astral character written as two escapes) is fine
    assert readers.read(b'{"entries": {"1": {"uid": 1, "key": ["\\ud83d\\ude00"], "content": "c"}}}').entries[0] \
        .keywords == ["\U0001f600"]
