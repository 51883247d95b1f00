"""A synonym add without re-deriving everything (issue 23 item 10): the groups' lines kept
encoded, the classes extended by a group that merges nothing, jieba taught only the new
terms. Whatever path an add takes, the result must equal a fresh build from the file, and
a failed write must leave the file and the table as they were."""

from __future__ import annotations

import pytest

from zcord.core import text as T
from zcord.retrieval import recall as R
from zcord.retrieval import synonyms as S
from zcord.retrieval.recall import Retriever
from zcord.retrieval.synonyms import SynonymClasses, Synonyms, parse_bot_lists, parse_groups


def _same_as_fresh(syn: Synonyms) -> None:
    raw = syn.path.read_bytes()
    assert parse_groups(raw, "s") == syn.groups
    assert parse_bot_lists(raw) == syn.bot
    assert syn.classes.of == SynonymClasses(syn.groups).of
    fresh = Synonyms(syn.path)
    fresh.load()
    assert fresh.groups == syn.groups and fresh.classes.of == syn.classes.of and fresh.bot == syn.bot
    assert fresh.bot_indexes() == syn.bot_indexes()


def test_every_kind_of_add_leaves_what_a_fresh_load_builds(tmp_path):
    syn = Synonyms(tmp_path / "synonyms.json")
    syn.replace_groups([["昨天", "昨日"], ["pizza", "披萨"]])
    old = syn.classes
    assert syn.add_group(["Quokka", "短尾矮袋鼠"]) is True          # a new class: extended
    assert syn.classes.base is old and syn.classes.new_terms == {"quokka", "短尾矮袋鼠"}
    assert syn.add_group(["quokka", "袋鼠"]) is True                # merges: derived again
    assert syn.classes.base is None and not syn.classes.new_terms
    assert syn.add_bot_group(["zorblax", "zorbie"]) == (True, False)
    assert syn.add_bot_group(["披萨", "毒药"]) == (True, True)       # held: classes untouched
    classes = syn.classes
    assert syn.add_bot_group(["披萨", "毒药"]) == (False, False)
    assert syn.add_group(["QUOKKA", "袋鼠"]) is False               # the same group, normalized
    assert syn.classes is classes
    _same_as_fresh(syn)
    assert syn.take_held(0, accept=True) == ["披萨", "毒药"]
    assert "毒药" in syn.classes.of["pizza"]
    _same_as_fresh(syn)
    [mine] = syn.bot_indexes()
    assert syn.discard_bot_group(mine) == ["zorblax", "zorbie"]
    assert "zorblax" not in syn.classes.of and syn.bot["botAdded"] == []
    _same_as_fresh(syn)


def test_a_failed_write_changes_nothing(tmp_path, monkeypatch):
    syn = Synonyms(tmp_path / "synonyms.json")
    syn.replace_groups([["pizza", "披萨"]])
    syn.add_bot_group(["披萨", "毒药"])
    before = syn.path.read_bytes()
    state = (list(syn.groups), dict(syn.bot), dict(syn.classes.of))

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(S, "atomic_write", full)
    for attempt in (lambda: syn.add_group(["a1", "a2"]), lambda: syn.add_bot_group(["b1", "b2"]),
                    lambda: syn.add_bot_group(["pizza", "c1"]), lambda: syn.take_held(0, accept=True),
                    lambda: syn.take_held(0, accept=False)):
        with pytest.raises(OSError):
            attempt()
        assert syn.path.read_bytes() == before
        assert (syn.groups, syn.bot, syn.classes.of) == state
        assert syn.add_group(["pizza", "披萨"]) is False  # the keys did not move either


def test_jieba_learns_the_terms_of_an_extending_add(tmp_path, monkeypatch):
    syn = Synonyms(tmp_path / "synonyms.json")
    syn.replace_groups([["昨天", "昨日"]])
    state = type("State", (), {"ensure_index": lambda self: None, "pending_words": []})()
    r = Retriever(lambda: state, syn)
    taught: list[list[str]] = []
    real = T.add_user_words
    monkeypatch.setattr(R, "add_user_words", lambda words: taught.append(sorted(words)) or real(words))
    r.teach_jieba()
    syn.add_group(["犰狳兽甲", "铠鼠兽甲"])
    r.teach_jieba()
    syn.add_group(["犰狳兽甲", "穿山甲兽"])  # merges: everything again
    r.teach_jieba()
    assert taught[1] == ["犰狳兽甲", "铠鼠兽甲"]
    assert set(taught[2]) == set(syn.classes.of)
    assert "铠鼠兽甲" in T.analyzer.user_words
