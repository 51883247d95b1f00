"""Synonym expansion as auto-recall uses it (SPEC §3.1): bidirectional, transitive,
normalized (NFKC + casefold), extended through zcor_synonyms_add and by hand edits of
<memdir>/synonyms.json (reloaded on change; a broken edit keeps the last good groups)."""

from __future__ import annotations

import json
import os

import pytest

from zcord.core.text import normalize
from zcord.retrieval.synonyms import SynonymClasses


@pytest.fixture(autouse=True)
def seed_ranking(request):
    """These tests pin the seed rule of SPEC §3.3 (recallRanking "seed"); the weighted
    ranking has its own tests in test_recall_weighted.py."""
    if "svc" in request.fixturenames:
        request.getfixturevalue("svc").update_config({"recallRanking": "seed"})



def node(t, title: str, content: str = "一些细节。", keywords: list[str] | None = None) -> str:
    """Create a node whose keywords do not interfere (empty unless given)."""
    return t.write(title=title, content=content, keywords=keywords if keywords is not None else [])["id"]


def recall(svc, text: str, session: str = "console") -> list[str]:
    return svc.recall(session, [{"text": text, "origin": "external"}])


def read_groups(svc) -> list[list[str]]:
    doc = json.loads((svc.dir / "synonyms.json").read_bytes())
    return doc["groups"] if isinstance(doc, dict) else doc


_bump = [0]


def hand_edit(svc, payload: bytes | str) -> None:
    """Write synonyms.json as an operator would, and make sure its mtime moves."""
    path = svc.dir / "synonyms.json"
    if isinstance(payload, str):
        payload = payload.encode()
    path.write_bytes(payload)
    st = os.stat(path)
    _bump[0] += 1
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + _bump[0] * 1_000_000_000))


def hand_edit_groups(svc, groups: list[list[str]]) -> None:
    hand_edit(svc, json.dumps({"version": 1, "groups": groups}, ensure_ascii=False, indent=1))


# -- direction ------------------------------------------------------------------------


def test_expansion_a_to_b(t, svc):
    t.synonyms_add(terms=["阿福", "福仔"])
    target = node(t, "福仔的新玩具")
    node(t, "楼下的便利店")
    assert recall(svc, "阿福今天在家好乖") == [target]


def test_expansion_b_to_a(t, svc):
    t.synonyms_add(terms=["阿福", "福仔"])
    target = node(t, "阿福打疫苗")
    node(t, "楼下的便利店")
    assert recall(svc, "福仔明天要去打针了") == [target]


def test_default_group_both_directions(t, svc):
    """A shipped group (昨天/昨日) works from either side."""
    yesterday = node(t, "昨天的约定")
    yesterday_alt = node(t, "昨日往事")
    assert set(recall(svc, "昨日我们说好了")) == {yesterday, yesterday_alt}
    assert set(recall(svc, "昨天你答应我的")) == {yesterday, yesterday_alt}


def test_explain_lists_the_whole_class(t, svc):
    t.synonyms_add(terms=["阿福", "福仔", "福福"])
    expanded = set(svc.recall_explain("阿福来了")["expanded"])
    assert {"阿福", "福仔", "福福"} <= expanded


# -- transitivity ---------------------------------------------------------------------


def test_transitive_across_groups_sharing_a_term(t, svc):
    t.synonyms_add(terms=["阿福", "福仔"])
    t.synonyms_add(terms=["福仔", "福宝"])
    far = node(t, "福宝的狗粮品牌")
    assert recall(svc, "阿福又挑食了") == [far]
    near = node(t, "阿福体检报告")
    assert set(recall(svc, "福宝又挑食了")) == {far, near}


def test_transitive_chain_of_three_groups(t, svc):
    t.synonyms_add(terms=["糖糖", "小糖"])
    t.synonyms_add(terms=["小糖", "糖宝"])
    t.synonyms_add(terms=["糖宝", "甜甜圈"])
    end = node(t, "甜甜圈的生日礼物")
    assert recall(svc, "糖糖说她想要新裙子") == [end]


def test_adding_a_bridging_group_merges_classes(t, svc):
    t.synonyms_add(terms=["阿福", "福仔"])
    t.synonyms_add(terms=["旺旺仔", "汪汪"])
    other = node(t, "汪汪的项圈")
    assert recall(svc, "阿福在叫") == []
    r = t.synonyms_add(terms=["福仔", "旺旺仔"])
    assert {normalize(x) for x in r["class"]} == {"阿福", "福仔", "旺旺仔", "汪汪"}
    assert recall(svc, "阿福在叫") == [other]
    assert svc.recall_explain("汪汪") and {"阿福", "福仔", "旺旺仔", "汪汪"} <= set(
        svc.recall_explain("汪汪在叫")["expanded"])


def test_classes_shared_term_after_normalization_merge():
    """ＦＵＺＩ and fuzi are the same term, so these two groups are one class."""
    classes = SynonymClasses([["ＦＵＺＩ", "福子"], ["fuzi", "富子"]])
    assert classes.expand(["福子"]) == {"fuzi", "福子", "富子"}
    assert classes.expand(["富子"]) == {"fuzi", "福子", "富子"}
    assert classes.expand(["Fuzi"]) == {"fuzi", "福子", "富子"}


# -- normalization --------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["ＣＡＴ", "Cat", "cat", "CAT", "ｃａｔ"])
def test_full_width_and_case_variants_expand(t, svc, spelling):
    """The shipped pet group holds 猫, 猫咪 and cat: every spelling of cat reaches 猫咪."""
    target = node(t, "猫咪日记")
    assert recall(svc, f"今天我的{spelling}又把杯子打翻了") == [target]


@pytest.mark.parametrize("title", ["ＣＡＴ咖啡馆", "Cat 咖啡馆", "cat咖啡馆"])
def test_titles_in_any_width_or_case_are_matched(t, svc, title):
    target = node(t, title)
    assert recall(svc, "我想去撸猫咪") == [target]


def test_full_width_group_term_added_by_tool(t, svc):
    t.synonyms_add(terms=["ＺＯＲＢ", "佐布"])
    target = node(t, "佐布的来历")
    assert recall(svc, "zorb是谁") == [target]
    assert recall(svc, "Zorb是谁") == [target]
    other = node(t, "zorb bot 配置")
    assert set(recall(svc, "佐布在线吗")) == {target, other}


# -- hand edits of synonyms.json ------------------------------------------------------


def test_reload_after_hand_edit(t, svc):
    target = node(t, "豆豆的猫爬架")
    assert recall(svc, "球球今天好调皮") == []
    hand_edit_groups(svc, read_groups(svc) + [["球球", "豆豆"]])
    assert recall(svc, "球球今天好调皮") == [target]
    assert recall(svc, "豆豆今天好调皮") == [target]


def test_hand_edit_removing_a_group_takes_effect(t, svc):
    t.synonyms_add(terms=["球球", "豆豆"])
    target = node(t, "豆豆的猫爬架")
    assert recall(svc, "球球今天好调皮") == [target]
    hand_edit_groups(svc, [g for g in read_groups(svc) if g != ["球球", "豆豆"]])
    assert recall(svc, "球球今天好调皮") == []


def test_hand_edit_bare_array_is_read(t, svc):
    target = node(t, "可乐的体检")
    hand_edit(svc, json.dumps([["雪碧", "可乐"]], ensure_ascii=False))
    assert recall(svc, "雪碧病了") == [target]


def test_hand_edit_then_tool_add_keeps_hand_group(t, svc):
    hand_edit_groups(svc, read_groups(svc) + [["球球", "豆豆"]])
    t.synonyms_add(terms=["豆豆", "小豆子"])
    target = node(t, "小豆子的疫苗本")
    assert recall(svc, "球球该打疫苗了") == [target]
    assert ["球球", "豆豆"] in read_groups(svc)


@pytest.mark.parametrize("broken", [
    b"{\"version\": 1, \"groups\": [[\"a\", ",      # truncated JSON
    b"\xff\xfe not utf-8",                            # not text
    b"{\"version\": 1, \"groups\": \"nope\"}",       # wrong shape
    b"{\"version\": 1, \"groups\": [[\"\", 1]]}",    # bad terms
])
def test_broken_hand_edit_keeps_last_good_groups(t, svc, broken):
    hand_edit_groups(svc, read_groups(svc) + [["球球", "豆豆"]])
    target = node(t, "豆豆的猫爬架")
    assert recall(svc, "球球今天好调皮") == [target]
    hand_edit(svc, broken)
    # no exception, and the last good groups still expand
    assert recall(svc, "球球今天好调皮") == [target]
    assert "豆豆" in svc.recall_explain("球球")["expanded"]
    # once fixed, the file is read again
    hand_edit_groups(svc, [["球球", "团子"]])
    other = node(t, "团子的窝")
    assert recall(svc, "球球今天好调皮") == [other]


def test_broken_file_at_start_does_not_lose_groups_after_fix(t, svc):
    """A broken edit followed by a good one: the good one wins, defaults included."""
    hand_edit(svc, b"not json at all")
    recall(svc, "随便说点什么")
    hand_edit_groups(svc, [["昨天", "昨日"], ["阿福", "福仔"]])
    target = node(t, "福仔和昨日")
    assert recall(svc, "阿福") == [target]


def test_reload_method_picks_up_hand_edit(t, svc):
    """SIGHUP path: Service.reload() re-reads synonyms.json."""
    target = node(t, "豆豆的猫爬架")
    (svc.dir / "synonyms.json").write_text(
        json.dumps({"version": 1, "groups": [["球球", "豆豆"]]}, ensure_ascii=False), encoding="utf-8")
    svc.reload()
    assert recall(svc, "球球今天好调皮") == [target]


def test_reload_method_with_broken_file_keeps_groups(t, svc):
    t.synonyms_add(terms=["球球", "豆豆"])
    target = node(t, "豆豆的猫爬架")
    (svc.dir / "synonyms.json").write_bytes(b"{ broken")
    try:
        svc.reload()
    except Exception:
        pass  # the daemon logs it; what matters is the groups kept
    assert recall(svc, "球球今天好调皮") == [target]
