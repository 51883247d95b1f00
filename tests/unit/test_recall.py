"""Auto-recall and the context header (SPEC §3.3, §5 zcor/recall and zcor/context).

Words of the external events (jieba words and synonym terms found as substrings) are
expanded; a current node is hit when a term occurs in its title or equals a keyword.
Score desc, updatedAt desc, id asc (natural), one quota of 10 per batch, never padded.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from zcord.core.errors import InvalidArgument
from zcord.retrieval.recall import NOTE, render_header
from zcord.service import Service


@pytest.fixture(autouse=True)
def seed_ranking(request):
    """These tests pin the seed rule of SPEC §3.3 (recallRanking "seed"); the weighted
    ranking has its own tests in test_recall_weighted.py."""
    if "svc" in request.fixturenames:
        request.getfixturevalue("svc").update_config({"recallRanking": "seed"})


SESSION = "qq:group:123"


def node(t, title: str, content: str = "一些细节。", keywords: list[str] | None = None) -> str:
    """Create a node; keywords are empty unless given, so only the title takes part."""
    return t.write(title=title, content=content, keywords=keywords if keywords is not None else [])["id"]


def ev(text: str, origin: str = "external", **extra) -> dict:
    return {"text": text, "origin": origin, **extra}


def recall(svc, *texts: str, session: str = SESSION) -> list[str]:
    return svc.recall(session, [ev(x) for x in texts])


@pytest.fixture(autouse=True)
def _jieba_knows_xiaoming(jieba_words):
    """These tests talk about 小明, a name jieba's own dictionary lacks (recall segments
    without HMM guessing); a Memory with 小明 as a node keyword teaches it. Taught here for
    every test, so none relies on a word another test taught."""
    jieba_words("小明")


def has_id(text: str, node_id: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(node_id)}(?![0-9])", text) is not None


# -- words: jieba, synonym substrings, keywords, titles -----------------------------------


def test_word_found_only_by_jieba(t, svc):
    """小明 is no synonym term (jieba knows it as a user word, see _jieba_knows_xiaoming):
    only segmentation can find it."""
    assert "小明" not in svc.synonyms.terms()
    target = node(t, "小明的生日")
    node(t, "同事聚餐")
    text = "我昨天和小明去吃火锅了"
    ex = svc.recall_explain(text)
    assert "小明" in ex["segmented"]
    assert "小明" not in ex["synonymTerms"]
    assert recall(svc, text) == [target]


def test_synonym_term_found_as_substring(t, svc):
    """jieba keeps 看电影 whole; 电影 is found only as a substring, and its class brings 影片."""
    target = node(t, "好看的影片推荐")
    text = "今晚想去看电影"
    ex = svc.recall_explain(text)
    assert "电影" not in ex["segmented"]
    assert "电影" in ex["synonymTerms"]
    assert recall(svc, text) == [target]


def test_single_character_synonym_term_found_as_substring(t, svc):
    """猫 is never a jieba word here (words have ≥ 2 characters) but is a synonym term."""
    target = node(t, "Cat Café 探店")
    text = "我想养一只猫"
    ex = svc.recall_explain(text)
    assert "猫" in ex["synonymTerms"]
    assert "猫" not in ex["segmented"]
    assert recall(svc, text) == [target]


def test_single_character_term_hits_title(t, svc):
    a = node(t, "邻居家的猫")
    b = node(t, "Cat Café 探店")
    assert set(recall(svc, "我想养一只猫")) == {a, b}


def test_synonym_term_with_a_space_found_as_substring(t, svc):
    """ice cream cannot be a jieba word (it holds a space); substring search still finds it."""
    cn = node(t, "雪糕铺子")
    en = node(t, "Ice Cream 小店")
    assert set(recall(svc, "I want some ice cream")) == {cn, en}
    assert set(recall(svc, "好想吃冰淇淋")) == {cn, en}


def test_keyword_equality_hit(t, svc):
    target = node(t, "周六的安排", keywords=["火锅", "小红"])
    node(t, "周六的计划", keywords=["烧烤"])
    assert recall(svc, "我昨天去吃火锅了") == [target]


def test_keyword_hit_through_expansion(t, svc):
    """The keyword 涮锅 equals a term of 火锅's class."""
    target = node(t, "周六的安排", keywords=["涮锅"])
    assert recall(svc, "我昨天去吃火锅了") == [target]


def test_removed_keyword_no_longer_hits(t, svc):
    a = node(t, "周六的安排", keywords=["火锅"])
    assert recall(svc, "好想吃火锅") == [a]
    t.write(id=a, title="周六的安排", content="改成去爬山。", keywords=["爬山"])
    assert recall(svc, "好想吃火锅") == []
    assert recall(svc, "周末去爬山吗") == [a]


def test_changed_title_no_longer_hits(t, svc):
    a = node(t, "小明的生日")
    assert recall(svc, "小明生日快乐") == [a]
    t.write(id=a, title="同事的生日", content="三月五号。")
    assert recall(svc, "小明你好") == []
    assert recall(svc, "同事们好") == [a]


def test_restored_nodes_are_recalled(t, svc):
    a = node(t, "小明的生日", keywords=["巧克力蛋糕"])
    backup = t.backup()["backupFile"]
    t.delete(id=a)
    assert recall(svc, "小明要巧克力蛋糕") == []
    t.restore(backupFile=backup)
    assert recall(svc, "小明生日快乐") == [a]
    assert recall(svc, "买了巧克力蛋糕") == [a]


def test_keyword_must_equal_not_contain(t, svc):
    """A keyword is hit by equality only: 火锅 does not hit the keyword 火锅店老板."""
    node(t, "周六的安排", keywords=["火锅店老板"])
    assert recall(svc, "我昨天去吃火锅了") == []


def test_keyword_taught_to_jieba_is_hit(t, svc):
    """A keyword jieba would split (蓝莓/芝士/蛋糕) is known as a user word and hit by equality."""
    target = node(t, "她最爱的甜点", keywords=["蓝莓芝士蛋糕"])
    text = "下次给她带蓝莓芝士蛋糕吧"
    assert "蓝莓芝士蛋糕" in svc.recall_explain(text)["segmented"]
    assert recall(svc, text) == [target]


def test_keyword_added_by_update_is_hit(t, svc):
    target = node(t, "她的口味", keywords=["甜食"])
    assert recall(svc, "周末去吃抹茶千层蛋糕") == []
    t.write(id=target, title="她的口味", content="喜欢抹茶。", keywords=["抹茶千层蛋糕"])
    assert recall(svc, "周末去吃抹茶千层蛋糕") == [target]


def test_keyword_compared_normalized(t, svc):
    target = node(t, "唱歌的地方", keywords=["ＫＴＶ"])
    assert recall(svc, "今晚去ktv嗨一下") == [target]


def test_mixed_latin_keyword_segmented_whole_in_any_case(t, svc):
    """The text is segmented in its normalized form, so KTV包厢 meets the keyword ＫＴＶ包厢."""
    target = node(t, "周五的安排", keywords=["ＫＴＶ包厢"])
    text = "今晚订了KTV包厢"
    assert "ktv包厢" in svc.recall_explain(text)["segmented"]
    assert recall(svc, text) == [target]


def test_title_substring_hit(t, svc):
    target = node(t, "重庆火锅店打卡")
    node(t, "公司年会")
    assert recall(svc, "我昨天去吃火锅了") == [target]


def test_content_alone_does_not_hit(t, svc):
    node(t, "周末", content="和小明去吃了火锅", keywords=[])
    assert recall(svc, "小明说火锅太辣了") == []


def test_derived_keywords_from_title_hit(t, svc):
    """Without keywords the title's words become keywords; the title hits anyway."""
    target = t.write(title="小明搬家", content="搬到了城东。")["id"]
    assert recall(svc, "小明今天搬家") == [target]


# -- ranking and tie-breaks -----------------------------------------------------------


def test_ranking_by_number_of_distinct_terms(t, svc):
    three = node(t, "昨天小明吃火锅")
    two = node(t, "小明和火锅")
    one = node(t, "小明的狗")          # newest, but fewest terms
    assert recall(svc, "我昨天和小明去吃火锅了") == [three, two, one]


def test_same_term_many_times_counts_once(t, svc):
    two = node(t, "小明吃火锅")
    once = node(t, "火锅火锅火锅店")      # newer; 火锅 three times is still one term
    assert recall(svc, "我昨天和小明去吃火锅了") == [two, once]


def test_keyword_and_title_terms_add_up(t, svc):
    both = node(t, "小明的近况", keywords=["火锅"])   # 小明 by title, 火锅 by keyword
    title_only = node(t, "小明近况")                   # newer
    assert recall(svc, "我昨天和小明去吃火锅了") == [both, title_only]


def test_synonyms_of_one_class_are_distinct_terms(t, svc):
    """Score counts distinct expanded terms: 昨天 and 昨日 are two terms."""
    two = node(t, "昨天也就是昨日")
    one = node(t, "昨天的事")           # newer
    assert recall(svc, "昨天") == [two, one]


def test_equal_score_newer_updated_first(t, svc):
    older = node(t, "小明的猫")
    newer = node(t, "小明的工作")
    assert recall(svc, "小明最近怎么样") == [newer, older]
    t.write(id=older, title="小明的猫", content="猫叫咪咪。")
    assert recall(svc, "小明最近怎么样") == [older, newer]


def test_equal_score_and_time_id_ascending_natural(t, svc, clock):
    clock.step = timedelta(0)
    ids = [node(t, f"小明相册第{i}卷") for i in range(11)]
    assert ids[8:] == ["m9", "m10", "m11"]
    got = recall(svc, "把小明的照片发我")
    nat = sorted(ids, key=lambda i: (len(i), i))
    assert got == nat[:10]
    assert got.index("m9") < got.index("m10")


def test_id_tie_break_m9_before_m10(t, svc, clock):
    clock.step = timedelta(0)
    for i in range(8):
        node(t, f"无关记录{i}")
    a = node(t, "小明的爱好")
    b = node(t, "小明的口头禅")
    assert (a, b) == ("m9", "m10")
    assert recall(svc, "小明又来了") == ["m9", "m10"]


# -- the batch and its quota ------------------------------------------------------------


def test_quota_of_ten_shared_by_the_whole_batch(t, svc):
    for i in range(6):
        node(t, f"小明旧事{i}")
    for i in range(6):
        node(t, f"重庆火锅{i}号店")
    for i in range(3):
        node(t, f"周末计划{i}")
    events = [ev("小明来了"), ev("晚上吃火锅吗"), ev("这个周末有空吗")]
    got = svc.recall(SESSION, events)
    assert len(got) == 10
    assert len(set(got)) == 10


def test_quota_with_many_events_each_matching(t, svc):
    for i in range(14):
        node(t, f"火锅记录{i}")
    got = svc.recall(SESSION, [ev("吃火锅") for _ in range(5)])
    assert len(got) == 10


def test_batch_uses_words_of_every_external_event(t, svc):
    a = node(t, "小明的工作")
    b = node(t, "火锅底料配方")
    got = svc.recall(SESSION, [ev("小明说"), ev("好想吃火锅")])
    assert set(got) == {a, b}


def test_internal_events_of_a_mixed_batch_do_not_add_words(t, svc):
    a = node(t, "小明的工作")
    node(t, "火锅底料配方")
    got = svc.recall(SESSION, [ev("小明说"), ev("好想吃火锅", origin="internal")])
    assert got == [a]


def test_no_hit_is_empty_never_padded(t, svc):
    for title in ("公司年会", "体检报告", "旅行清单"):
        node(t, title)
    assert recall(svc, "我昨天和小明去吃火锅了") == []
    assert svc.context(SESSION) == {"text": "", "ids": []}


def test_few_hits_not_padded(t, svc):
    target = node(t, "小明的生日")
    for i in range(12):
        node(t, f"无关记录{i}")
    assert recall(svc, "小明生日快乐") == [target]


# -- the session's set ------------------------------------------------------------------


def test_internal_only_batch_leaves_set_unchanged(t, svc):
    a = node(t, "小明的生日")
    node(t, "火锅底料配方")
    assert recall(svc, "小明生日快乐") == [a]
    before = svc.context(SESSION)
    got = svc.recall(SESSION, [ev("好想吃火锅", origin="internal"), ev("火锅", origin="internal")])
    assert got == [a]
    assert svc.context(SESSION) == before


def test_internal_only_batch_on_new_session_is_empty(t, svc):
    node(t, "火锅底料配方")
    assert svc.recall(SESSION, [ev("好想吃火锅", origin="internal")]) == []
    assert svc.context(SESSION)["ids"] == []


def test_empty_batch_leaves_set_unchanged(t, svc):
    a = node(t, "小明的生日")
    recall(svc, "小明生日快乐")
    assert svc.recall(SESSION, []) == [a]


def test_new_external_batch_replaces_set(t, svc):
    a = node(t, "小明的生日")
    b = node(t, "火锅底料配方")
    assert recall(svc, "小明生日快乐") == [a]
    assert recall(svc, "好想吃火锅") == [b]
    assert svc.context(SESSION)["ids"] == [b]
    assert recall(svc, "今天天气不错") == []
    assert svc.context(SESSION) == {"text": "", "ids": []}


def test_superseded_nodes_excluded(t, svc):
    old = node(t, "小明住在城西")
    new = node(t, "小明搬去城东")
    t.supersede(ids=[old], replacementId=new, reason="搬家了")
    assert recall(svc, "小明现在住哪") == [new]


def test_merged_sources_excluded(t, svc):
    a = node(t, "小明喜欢火锅")
    b = node(t, "小明喜欢烧烤")
    merged = t.merge(ids=[a, b], title="小明的口味", content="火锅和烧烤都爱。", keywords=[], reason="合并")["id"]
    assert recall(svc, "小明想吃什么") == [merged]


def test_deleted_nodes_not_recalled(t, svc):
    a = node(t, "小明的生日")
    t.delete(id=a)
    assert recall(svc, "小明生日快乐") == []


def test_sessions_are_independent(t, svc):
    a = node(t, "小明的生日")
    b = node(t, "火锅底料配方")
    assert recall(svc, "小明生日快乐", session="qq:group:1") == [a]
    assert recall(svc, "好想吃火锅", session="qq:group:2") == [b]
    assert svc.context("qq:group:1")["ids"] == [a]
    assert svc.context("qq:group:2")["ids"] == [b]
    assert svc.context("console") == {"text": "", "ids": []}
    svc.recall("qq:group:2", [ev("今天天气不错")])
    assert svc.context("qq:group:1")["ids"] == [a]


# -- the context header -----------------------------------------------------------------


def test_context_shows_title_and_content(t, svc):
    a = t.write(title="小明的生日", content="小明的生日是三月五号，喜欢巧克力蛋糕。", keywords=[])["id"]
    recall(svc, "小明生日快乐")
    ctx = svc.context(SESSION)
    assert ctx["ids"] == [a]
    assert "小明的生日" in ctx["text"]
    assert "小明的生日是三月五号，喜欢巧克力蛋糕。" in ctx["text"]
    assert has_id(ctx["text"], a)
    assert NOTE not in ctx["text"]


def test_context_follows_ranking(t, svc):
    three = node(t, "昨天小明吃火锅", content="甲")
    one = node(t, "小明的狗", content="乙")
    recall(svc, "我昨天和小明去吃火锅了")
    ctx = svc.context(SESSION)
    assert ctx["ids"] == [three, one]
    assert ctx["text"].index("昨天小明吃火锅") < ctx["text"].index("小明的狗")


def test_updated_node_shows_new_content(t, svc):
    a = t.write(title="小明的工作", content="小明在银行上班。", keywords=[])["id"]
    recall(svc, "小明最近忙吗")
    t.write(id=a, title="小明的新工作", content="小明跳槽去了游戏公司。")
    text = svc.context(SESSION)["text"]
    assert "小明跳槽去了游戏公司。" in text
    assert "小明的新工作" in text
    assert "银行" not in text


def test_deleted_node_disappears(t, svc):
    a = node(t, "小明的生日", content="三月五号")
    b = node(t, "小明的工作", content="银行")
    recall(svc, "小明生日那天上班吗")
    assert set(svc.context(SESSION)["ids"]) == {a, b}
    t.delete(id=a)
    ctx = svc.context(SESSION)
    assert ctx["ids"] == [b]
    assert not has_id(ctx["text"], a)
    assert "三月五号" not in ctx["text"]


def test_only_node_deleted_gives_empty_text(t, svc):
    a = node(t, "小明的生日")
    recall(svc, "小明生日快乐")
    t.delete(id=a)
    assert svc.context(SESSION) == {"text": "", "ids": []}


def test_superseded_node_disappears(t, svc):
    old = node(t, "小明住在城西", content="城西老小区")
    recall(svc, "小明住哪")
    new = node(t, "新住址", content="城东")
    t.supersede(ids=[old], replacementId=new, reason="搬家了")
    ctx = svc.context(SESSION)
    assert ctx == {"text": "", "ids": []}


def test_each_node_once_in_header(t, svc):
    a = node(t, "小明的生日", content="三月五号")
    recall(svc, "小明生日快乐", "小明你好", "生日蛋糕买好了")
    ctx = svc.context(SESSION)
    assert ctx["ids"] == [a]
    assert ctx["text"].count("三月五号") == 1


def test_render_header_deduplicates_ids(t, svc):
    a = node(t, "小明的生日", content="三月五号")
    b = node(t, "火锅底料", content="牛油")
    text, ids = render_header(svc.state, [a, b, a, a], 6000)
    assert ids == [a, b]
    assert text.count("三月五号") == 1
    assert text.count("牛油") == 1


@pytest.mark.parametrize("budget", [1000, 300, 150, 120])
def test_budget_truncation_keeps_every_id(t, svc, budget):
    ids = [t.write(title=f"小明的长篇回忆第{i}章" + "很长的标题" * 4, content=("我们一起去吃火锅，聊了很久。" * 40),
                   keywords=[])["id"] for i in range(10)]
    assert recall(svc, "还记得小明吗") != []
    svc.update_config({"recallBudget": budget})
    ctx = svc.context(SESSION)
    assert sorted(ctx["ids"]) == sorted(ids)
    assert len(ctx["text"]) <= budget
    for i in ids:
        assert has_id(ctx["text"], i), f"{i} missing from the truncated header"
    assert "zcor_memory_read" in ctx["text"]


def test_truncation_keeps_part_of_each_title_and_body(t, svc):
    ids = [t.write(title=f"小明回忆{i}", content=f"第{i}段：" + "火锅" * 300, keywords=[])["id"] for i in range(3)]
    recall(svc, "小明")
    svc.update_config({"recallBudget": 600})
    text = svc.context(SESSION)["text"]
    assert len(text) <= 600
    for i in range(3):
        assert f"小明回忆{i}" in text
        assert f"第{i}段" in text
    assert "zcor_memory_read" in text
    assert sorted(svc.context(SESSION)["ids"]) == sorted(ids)


def test_default_budget_is_6000(t, svc):
    for i in range(10):
        node(t, f"小明回忆{i}", content="回" * 1000)
    recall(svc, "小明")
    text = svc.context(SESSION)["text"]
    assert 5000 < len(text) <= 6000
    assert "zcor_memory_read" in text


def test_budget_is_read_at_render_time(t, svc):
    node(t, "小明的长回忆", content="火" * 2000)
    recall(svc, "小明")
    assert "火" * 2000 in svc.context(SESSION)["text"]
    svc.update_config({"recallBudget": 300})
    assert len(svc.context(SESSION)["text"]) <= 300


def test_budget_zero_turns_recall_and_header_off(t, svc):
    node(t, "小明的生日")
    assert recall(svc, "小明生日快乐") != []
    svc.update_config({"recallBudget": 0})
    assert svc.context(SESSION)["text"] == ""
    assert recall(svc, "小明生日快乐") == []
    assert svc.context(SESSION) == {"text": "", "ids": []}


def test_state_gone_after_restart(memdir, clock):
    with Service(memdir, clock=clock) as s:
        a = s.call("zcor_memory_write", {"title": "小明的生日", "content": "三月五号", "keywords": ["提拉米苏"]})["id"]
        assert s.recall(SESSION, [ev("小明生日快乐")]) == [a]
        assert s.context(SESSION)["ids"] == [a]
    with Service(memdir, clock=clock) as s:
        assert s.context(SESSION) == {"text": "", "ids": []}
        assert s.recall(SESSION, [ev("好的", origin="internal")]) == []
        assert s.context(SESSION) == {"text": "", "ids": []}
        assert s.recall(SESSION, [ev("小明生日快乐")]) == [a]
        assert "三月五号" in s.context(SESSION)["text"]
        assert s.recall(SESSION, [ev("今天吃了提拉米苏")]) == [a]


def test_recall_and_context_write_no_history(t, svc):
    node(t, "小明的生日")
    node(t, "火锅底料配方")
    oplog = svc.dir / "operations.jsonl"
    state = svc.dir / "memory-state.json"
    total = t.history()["total"]
    size, state_bytes = oplog.stat().st_size, state.read_bytes()
    recall(svc, "小明生日快乐")
    svc.context(SESSION)
    svc.recall(SESSION, [ev("吃火锅", origin="internal")])
    recall(svc, "好想吃火锅", session="console")
    svc.context("console")
    assert oplog.stat().st_size == size
    assert state.read_bytes() == state_bytes
    assert t.history()["total"] == total + 1   # only the first history call itself


# -- explain ----------------------------------------------------------------------------


def test_explain_lists_terms_and_their_class(t, svc):
    t.synonyms_add(terms=["阿福", "福仔"])
    a = node(t, "福仔的新玩具")
    b = node(t, "小区周边", keywords=["遛狗"])
    ex = svc.recall_explain("阿福今天出去遛狗了")
    assert "阿福" in ex["segmented"] and "遛狗" in ex["segmented"]
    hits = {h["id"]: h for h in ex["hits"]}
    assert set(hits) == {a, b}
    m = hits[a]["matches"]
    assert [x["term"] for x in m] == ["福仔"]
    assert m[0]["from"] == "阿福"
    assert set(m[0]["class"]) == {"阿福", "福仔"}
    assert any(x["term"] == "遛狗" for x in hits[b]["matches"])
    assert ex["ids"] == [h["id"] for h in ex["hits"]]


def test_explain_segmentation_listed(svc):
    ex = svc.recall_explain("我昨天和小明去吃火锅了")
    assert {"昨天", "小明", "火锅"} <= set(ex["segmented"])
    assert all(len(w) >= 2 for w in ex["segmented"])
    assert {"昨天", "火锅"} <= set(ex["synonymTerms"])
    assert {"昨日", "涮锅"} <= set(ex["expanded"])


def test_explain_does_not_change_sessions(t, svc):
    node(t, "小明的生日")
    svc.recall_explain("小明生日快乐")
    assert svc.context(SESSION) == {"text": "", "ids": []}


# -- malformed input ---------------------------------------------------------------------


@pytest.mark.parametrize("events", [None, "小明你好", {"text": "小明", "origin": "external"}, 3])
def test_events_not_a_list_refused(svc, events):
    with pytest.raises(InvalidArgument) as ei:
        svc.recall(SESSION, events)
    assert ei.value.field == "events"


@pytest.mark.parametrize("event, word", [
    ({"origin": "external"}, "text"),
    ({"text": None, "origin": "external"}, "text"),
    ({"text": 12, "origin": "external"}, "text"),
    ({"text": "小明", "origin": "other"}, "origin"),
    ({"text": "小明"}, "origin"),
    ("小明你好", None),
])
def test_bad_event_refused_naming_the_field(t, svc, event, word):
    a = node(t, "小明的生日")
    recall(svc, "小明生日快乐")
    with pytest.raises(InvalidArgument) as ei:
        svc.recall(SESSION, [ev("好想吃火锅"), event])
    assert ei.value.field is not None and ei.value.field.startswith("events[1]")
    if word:
        assert word in ei.value.message or word in ei.value.field
    assert svc.context(SESSION)["ids"] == [a], "a refused batch changes nothing"


@pytest.mark.parametrize("session", ["", None, 5])
def test_bad_session_refused(svc, session):
    with pytest.raises(InvalidArgument) as ei:
        svc.recall(session, [ev("小明")])
    assert ei.value.field == "session"
    with pytest.raises(InvalidArgument) as ei:
        svc.context(session)
    assert ei.value.field == "session"


def test_extra_event_fields_accepted(t, svc):
    a = node(t, "小明的生日")
    got = svc.recall(SESSION, [ev("小明生日快乐", ts="2026-01-01T09:00:00+08:00", source="qq",
                                  senderKey="qq:user:42", platform="qq")])
    assert got == [a]


# -- jieba's user words from the start -----------------------------------------------------


def test_synonym_terms_known_before_the_first_recall(memdir, clock):
    """jieba knows every synonym term once the Memory is open, so a title's derived keywords
    do not depend on whether a recall has happened yet in this process.
    (喵喵拳大师 is a term only this test uses; untaught, jieba drops most of it.)"""
    import json

    memdir.mkdir(parents=True)
    (memdir / "synonyms.json").write_text(
        json.dumps({"version": 1, "groups": [["喵喵拳大师", "拳皇喵"]]}, ensure_ascii=False), encoding="utf-8")
    with Service(memdir, clock=clock) as s:
        first = s.call("zcor_memory_write", {"title": "喵喵拳大师来了", "content": ""})["keywords"]
        s.recall(SESSION, [ev("你好")])
        second = s.call("zcor_memory_write", {"title": "喵喵拳大师来了", "content": ""})["keywords"]
        assert "喵喵拳大师" in second
        assert first == second, "derived keywords changed after the first recall taught jieba"


def test_with_the_recall_log_off_recall_explains_nothing(svc, t):
    """recallLogEntries 0: the recall log is not told, and recall does not work out its hits'
    reasons for it (the same ids either way)."""
    node(t, "小明喜欢猫")
    told: list[list[str]] = []
    explained: list[bool] = []
    real = svc.retriever.visible_hits

    def visible_hits(*args, **kwargs):
        explained.append(kwargs.get("explain", False))
        return real(*args, **kwargs)

    svc.retriever.visible_hits = visible_hits
    svc.sessions.observer = lambda session, events, words, hits: told.append([h.id for h in hits])
    on = recall(svc, "小明的猫")
    svc.update_config({"recallLogEntries": 0})
    off = recall(svc, "小明的猫", session="other")
    assert on == off and len(on) == 1
    assert told == [on] and explained == [True, False]
