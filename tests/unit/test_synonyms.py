"""zcor_synonyms_add and synonyms.json (SPEC §2 synonyms_add row, §3.1)."""

from __future__ import annotations

import json

import pytest

from zcord.core.errors import InvalidArgument, ZcorError
from zcord.core.text import normalize
from zcord.retrieval.synonyms import SynonymClasses
from zcord.service import Service


def groups_on_disk(memdir) -> list[list[str]]:
    doc = json.loads((memdir / "synonyms.json").read_bytes())
    return doc["groups"] if isinstance(doc, dict) else doc


def norm_set(terms) -> set[str]:
    return {normalize(t) for t in terms}


def test_add_group_written_to_disk(t, svc):
    r = t.synonyms_add(terms=["Quokka", "短尾矮袋鼠"])
    assert r["added"] is True
    assert norm_set(r["class"]) >= norm_set(["Quokka", "短尾矮袋鼠"])
    assert ["Quokka", "短尾矮袋鼠"] in groups_on_disk(svc.dir)


def test_added_group_survives_reopen(memdir, clock):
    with Service(memdir, clock=clock) as s:
        s.call("zcor_synonyms_add", {"terms": ["zorblax", "zorb"]})
    assert ["zorblax", "zorb"] in groups_on_disk(memdir)
    with Service(memdir, clock=clock) as s:
        again = s.call("zcor_synonyms_add", {"terms": ["zorb", "zorblax"]})
        assert again["added"] is False
        assert norm_set(again["class"]) == {"zorblax", "zorb"}
        # and the class is used: a group sharing a term joins it
        joined = s.call("zcor_synonyms_add", {"terms": ["ZORB", "zorbie"]})
        assert norm_set(joined["class"]) == {"zorblax", "zorb", "zorbie"}
    assert groups_on_disk(memdir).count(["zorblax", "zorb"]) == 1


def test_default_groups_kept_when_adding(t, svc):
    before = groups_on_disk(svc.dir)
    assert before, "the default synonyms.json has groups"
    t.synonyms_add(terms=["flurbo", "flurb"])
    after = groups_on_disk(svc.dir)
    assert after[:len(before)] == before
    assert len(after) == len(before) + 1


@pytest.mark.parametrize("terms", [[], ["solo"], ["", "x"], ["  ", "x"], "abc", None, [1, 2]])
def test_fewer_than_two_or_bad_terms_refused(t, svc, terms):
    raw = (svc.dir / "synonyms.json").read_bytes()
    with pytest.raises(InvalidArgument) as ei:
        t.synonyms_add(terms=terms)
    assert ei.value.field is not None and ei.value.field.startswith("terms")
    assert (svc.dir / "synonyms.json").read_bytes() == raw


def test_missing_terms_refused(t):
    with pytest.raises(InvalidArgument) as ei:
        t.synonyms_add()
    assert ei.value.field == "terms"


@pytest.mark.parametrize("terms", [
    ["ABC", "ａｂｃ"],          # NFKC: full-width = half-width, and case
    ["abc", "abc"],
    ["Straße", "STRASSE"],     # casefold
    ["xyzzy", "plugh", "XYZZY"],
])
def test_duplicate_terms_after_normalization_refused(t, svc, terms):
    raw = (svc.dir / "synonyms.json").read_bytes()
    with pytest.raises(InvalidArgument) as ei:
        t.synonyms_add(terms=terms)
    assert ei.value.field == "terms"
    assert (svc.dir / "synonyms.json").read_bytes() == raw


def test_same_group_twice_not_added_again(t, svc):
    first = t.synonyms_add(terms=["blorp", "blorpy"])
    raw = (svc.dir / "synonyms.json").read_bytes()
    second = t.synonyms_add(terms=["blorp", "blorpy"])
    assert first["added"] is True
    assert second["added"] is False
    assert norm_set(second["class"]) == norm_set(first["class"])
    assert (svc.dir / "synonyms.json").read_bytes() == raw
    # the same group in another order and another case is the same group
    third = t.synonyms_add(terms=["BLORPY", "ｂｌｏｒｐ"])
    assert third["added"] is False
    assert (svc.dir / "synonyms.json").read_bytes() == raw


def test_groups_sharing_a_term_form_one_transitive_class(t):
    t.synonyms_add(terms=["qa1", "qa2"])
    r = t.synonyms_add(terms=["qa2", "qa3"])
    assert r["added"] is True
    assert norm_set(r["class"]) == {"qa1", "qa2", "qa3"}
    # transitive through a chain, matched after normalization
    r = t.synonyms_add(terms=["ＱＡ3", "qa4"])
    assert norm_set(r["class"]) == {"qa1", "qa2", "qa3", "qa4"}
    # a group joining two classes merges them
    t.synonyms_add(terms=["qb1", "qb2"])
    r = t.synonyms_add(terms=["qb2", "qa1"])
    assert norm_set(r["class"]) == {"qa1", "qa2", "qa3", "qa4", "qb1", "qb2"}


@pytest.mark.parametrize("first, second", [
    (["qa", "qshared"], ["qb", "qshared"]),   # the shared term last in both groups
    (["qshared", "qa"], ["qb", "qshared"]),
    (["qa", "qshared"], ["qshared", "qb"]),
    (["qa", "qshared", "qc"], ["qb", "qd", "qshared"]),
])
def test_transitive_whatever_the_shared_terms_position(t, first, second):
    t.synonyms_add(terms=first)
    r = t.synonyms_add(terms=second)
    everyone = set(first) | set(second)
    assert norm_set(r["class"]) == everyone
    classes = SynonymClasses([first, second])
    for term in everyone:
        assert classes.expand([term]) == everyone, f"{term} does not reach the whole class"


def test_chain_joined_through_later_terms(t):
    """Three groups chained through their last terms; then a group whose shared term is in the
    middle joins a separate class."""
    groups = [["c1", "c2"], ["c3", "c2"], ["c4", "c3"], ["d1", "d2"], ["x", "d2", "c4", "y"]]
    classes = SynonymClasses(groups)
    everyone = {term for g in groups for term in g}
    for term in everyone:
        assert classes.expand([term]) == everyone
    for g in groups:
        t.synonyms_add(terms=g)
    assert norm_set(t.synonyms_add(terms=["c1", "z"])["class"]) == everyone | {"z"}


def test_unrelated_group_is_its_own_class(t):
    t.synonyms_add(terms=["wub1", "wub2"])
    r = t.synonyms_add(terms=["wib1", "wib2"])
    assert norm_set(r["class"]) == {"wib1", "wib2"}


def test_joining_a_default_group(t, svc):
    group = groups_on_disk(svc.dir)[0]
    r = t.synonyms_add(terms=[group[0], "自定义称呼"])
    assert norm_set(r["class"]) >= norm_set(group) | {normalize("自定义称呼")}


def test_hand_edit_is_picked_up(t, svc):
    path = svc.dir / "synonyms.json"
    doc = json.loads(path.read_bytes())
    doc["groups"].append(["handmade1", "handmade2"])
    path.write_text(json.dumps(doc, ensure_ascii=False, indent=1), encoding="utf-8")
    r = t.synonyms_add(terms=["handmade2", "handmade3"])
    assert norm_set(r["class"]) == {"handmade1", "handmade2", "handmade3"}
    on_disk = groups_on_disk(svc.dir)
    assert ["handmade1", "handmade2"] in on_disk and ["handmade2", "handmade3"] in on_disk


def test_broken_hand_edit_not_overwritten(t, svc):
    path = svc.dir / "synonyms.json"
    broken = b'{"version": 1, "groups": [["a", "b"],'
    path.write_bytes(broken)
    with pytest.raises(ZcorError):
        t.synonyms_add(terms=["kept1", "kept2"])
    assert path.read_bytes() == broken


def test_synonym_edit_recorded_in_history(svc):
    svc.call("zcor_synonyms_add", {"terms": ["histo1", "histo2"]}, actor="model")
    rec = svc.call("zcor_memory_history", {"keywords": ["histo1"]})["items"]
    assert len(rec) == 1
    assert rec[0]["tool"] == "zcor_synonyms_add"
    assert rec[0]["actor"] == "model"
    assert rec[0]["status"] == "ok"
    assert rec[0]["params"] == {"terms": ["histo1", "histo2"]}


def test_refused_synonym_edit_recorded_in_history(t):
    with pytest.raises(InvalidArgument):
        t.synonyms_add(terms=["dupe", "DUPE"])
    rec = t.history(keywords=["dupe"])["items"]
    assert len(rec) == 1 and rec[0]["status"] == "error"



def test_operator_can_replace_and_remove_a_group_and_it_is_recorded(svc, memdir):
    from zcord.core.errors import InvalidArgument
    from zcord.retrieval.synonyms import parse_groups

    n = len(svc.synonym_groups())
    svc.set_synonym_group(None, ["阿猫", "小猫咪咪"])
    assert svc.synonym_groups()[-1] == ["阿猫", "小猫咪咪"]
    svc.set_synonym_group(n, ["阿猫", "喵喵酱"])
    on_disk = parse_groups((memdir / "synonyms.json").read_bytes(), "synonyms.json")
    assert on_disk[-1] == ["阿猫", "喵喵酱"]
    assert "小猫咪咪" not in svc.synonyms.classes.of
    svc.set_synonym_group(n, None)
    assert len(svc.synonym_groups()) == n and "阿猫" not in svc.synonyms.classes.of
    kinds = [r["changes"][0]["kind"] for r in svc.call("zcor_memory_history", {"keywords": ["阿猫"]})["items"]]
    assert kinds == ["synonyms.remove", "synonyms.update", "synonyms.add"]
    before = (memdir / "synonyms.json").read_bytes()
    for index, terms in [(n + 5, ["a", "b"]), (0, ["same", "SAME"]), (None, None), (0, ["only"])]:
        with pytest.raises(InvalidArgument):
            svc.set_synonym_group(index, terms)
    assert (memdir / "synonyms.json").read_bytes() == before
