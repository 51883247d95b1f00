"""zcord.retrieval.synonyms on its own: synonyms.json's format (readable and editable by hand), its
parsing, the equivalence classes, and picking up hand edits (SPEC §3.1)."""

from __future__ import annotations

import json
import os

import pytest

from zcord.core.errors import StateFileInvalid
from zcord.retrieval.synonyms import SynonymClasses, Synonyms, encode_groups, parse_groups


def test_file_is_one_group_per_line_with_the_terms_unescaped(tmp_path):
    syn = Synonyms(tmp_path / "synonyms.json")
    syn.replace_groups([["昨天", "昨日"], ["Quokka", "短尾矮袋鼠"]])
    text = (tmp_path / "synonyms.json").read_text(encoding="utf-8")
    assert text == ('{\n  "version": 1,\n  "groups": [\n'
                    '    ["昨天", "昨日"],\n'
                    '    ["Quokka", "短尾矮袋鼠"]\n'
                    '  ]\n}\n')
    assert parse_groups(text.encode(), "synonyms.json") == [["昨天", "昨日"], ["Quokka", "短尾矮袋鼠"]]


def test_encoded_groups_read_back_whatever_the_characters():
    groups = [['quote"d', "back\\slash"], ["tab\there", "😀", "line\u2028sep"]]
    assert parse_groups(encode_groups(groups), "x") == groups
    assert json.loads(encode_groups([])) == {"version": 1, "groups": []}


def test_bare_array_of_groups_is_read():
    assert parse_groups(b'[["a", "b"]]', "s.json") == [["a", "b"]]


@pytest.mark.parametrize("raw, message", [
    (b"{", "s.json is not valid JSON"),
    (b"\xff\xfe", "s.json is not valid JSON"),
    (b'{"version": 1}', 's.json: expected {"version": 1, "groups": [[term, ...], ...]}'),
    (b'"groups"', 's.json: expected {"version": 1, "groups": [[term, ...], ...]}'),
    (b'{"groups": [["a", "b"], "c"]}', "s.json: groups[1] must be an array of non-empty strings"),
    (b'{"groups": [["a", " "]]}', "s.json: groups[0] must be an array of non-empty strings"),
    (b'{"groups": [["a", 1]]}', "s.json: groups[0] must be an array of non-empty strings"),
])
def test_broken_files_named_precisely(raw, message):
    with pytest.raises(StateFileInvalid) as e:
        parse_groups(raw, "s.json")
    assert e.value.message.startswith(message)


def test_classes_are_normalized_and_expand_unknown_terms_to_themselves():
    classes = SynonymClasses([["Ａpple", "苹果"]])
    assert classes.expand(["APPLE"]) == {"apple", "苹果"}
    assert classes.expand(["pear"]) == {"pear"}
    assert classes.expand([]) == set()


def test_long_chains_compress_into_one_class():
    groups = [[f"t{i}", f"t{i + 1}"] for i in range(50)] + [["t50", "t0"]]
    classes = SynonymClasses(groups)
    assert classes.expand(["t25"]) == {f"t{i}" for i in range(51)}


def test_reload_only_when_the_file_changed(tmp_path):
    path = tmp_path / "synonyms.json"
    syn = Synonyms(path)
    syn.load()
    assert syn.groups == [] and syn.reload_if_changed() is False
    assert syn.add_group(["zorb", "zorblax"]) is True
    assert syn.reload_if_changed() is False  # our own write is not a hand edit
    path.write_text('{"version": 1, "groups": [["zorb", "zorblax", "zorbie"]]}\n', encoding="utf-8")
    os.utime(path, ns=(1, 1))  # a different stamp even within the file system's time granularity
    assert syn.reload_if_changed() is True
    assert syn.groups == [["zorb", "zorblax", "zorbie"]]
    assert syn.terms() == {"zorb", "zorblax", "zorbie"}
    assert syn.reload_if_changed() is False
    path.unlink()
    assert syn.reload_if_changed() is True
    assert syn.groups == [] and syn.terms() == set()


def test_broken_hand_edit_keeps_the_last_good_groups(tmp_path):
    path = tmp_path / "synonyms.json"
    syn = Synonyms(path)
    syn.replace_groups([["a", "b"]])
    path.write_text("{broken", encoding="utf-8")
    os.utime(path, ns=(1, 1))
    with pytest.raises(StateFileInvalid) as e:
        syn.reload_if_changed()
    assert e.value.message.startswith("synonyms.json is not valid JSON")
    assert syn.groups == [["a", "b"]] and syn.classes.expand(["a"]) == {"a", "b"}


def test_add_group_ignores_an_existing_group_in_any_order_or_form(tmp_path):
    syn = Synonyms(tmp_path / "synonyms.json")
    assert syn.add_group(["Alpha", "beta"]) is True
    before = (tmp_path / "synonyms.json").read_bytes()
    assert syn.add_group(["BETA", "alpha"]) is False
    assert (tmp_path / "synonyms.json").read_bytes() == before
    assert syn.add_group(["alpha", "beta", "gamma"]) is True
    assert syn.groups == [["Alpha", "beta"], ["alpha", "beta", "gamma"]]


def test_synonym_expansion_of_several_terms_is_their_union():
    classes = SynonymClasses([["apple", "苹果"], ["pear", "梨"]])
    assert classes.expand(["APPLE", "pear", "fig"]) == {"apple", "苹果", "pear", "梨", "fig"}


def test_before_loading_there_are_no_groups_and_no_change_to_pick_up(tmp_path):
    syn = Synonyms(tmp_path / "synonyms.json")
    assert syn.terms() == set() and syn.classes.expand(["x"]) == {"x"}
    assert syn.reload_if_changed() is False  # no file, nothing loaded: nothing changed
