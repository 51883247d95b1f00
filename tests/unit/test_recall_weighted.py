"""Weighted recall (SPEC §3.3, recallRanking "weighted", the default) and the text handling
both modes share: whole-word Latin matching with inflection folding, CJK substrings,
digits and mixed words, clean derived keywords and people's names.
"""

from __future__ import annotations

import pytest

from zcord.core.errors import InvalidArgument
from zcord.core.text import derive_keywords, fold, term_key
from zcord.service import Service

SESSION = "tg:private:42"


def node(t, title: str, content: str = "details", keywords: list[str] | None = None,
         parent: str | None = None) -> str:
    args = {"title": title, "content": content, "keywords": keywords if keywords is not None else []}
    if parent is not None:
        args["parentId"] = parent
    return t.write(**args)["id"]


def recall(svc, *texts: str) -> list[str]:
    return svc.recall(SESSION, [{"text": x, "origin": "external"} for x in texts])


@pytest.fixture(params=["seed", "weighted"])
def mode(request, svc):
    svc.update_config({"recallRanking": request.param})
    return request.param


# -- config ------------------------------------------------------------------------------


def test_weighted_is_the_default(svc):
    assert svc.public_config()["recallRanking"] == "weighted"
    assert svc.recall_explain("anything")["ranking"] == "weighted"


def test_ranking_set_at_run_time_and_saved(svc, memdir, clock):
    svc.update_config({"recallRanking": "seed"})
    assert svc.recall_explain("x")["ranking"] == "seed"
    assert '"recallRanking": "seed"' in (memdir / "config.json").read_text()


def test_unknown_ranking_refused_naming_the_field(svc):
    with pytest.raises(InvalidArgument) as e:
        svc.update_config({"recallRanking": "semantic"})
    assert "recallRanking" in e.value.message
    assert svc.public_config()["recallRanking"] == "weighted"


# -- Latin words: whole words, folded, both modes ----------------------------------------------


def test_short_latin_word_never_splits_a_longer_one(t, svc, mode):
    """`I like this shirt` once recalled every Mike… and Lily… memory through li·ke·hi·rt."""
    node(t, "Mike plays guitar")
    node(t, "Lily moved to Berlin")
    node(t, "Li Na", keywords=["li"])
    shirt = node(t, "Bought a blue shirt")
    got = recall(svc, "I like this shirt")
    assert shirt in got
    assert all(svc.state.nodes[i].title != "Mike plays guitar" for i in got)
    assert all(svc.state.nodes[i].title != "Lily moved to Berlin" for i in got)


def test_latin_term_hits_title_on_word_boundaries_only(t, svc, mode):
    node(t, "Caroline paints landscapes")
    assert recall(svc, "the car broke down") == []
    assert recall(svc, "line dancing") == []


def test_latin_synonym_term_found_on_word_boundaries_only(t, svc, mode):
    svc.call("zcor_synonyms_add", {"terms": ["cat", "kitty"]})
    target = node(t, "Her kitty is called Mochi")
    node(t, "Vacation in Spain")
    assert recall(svc, "Is the cat ok?") == [target]
    # 'cat' inside 'vacation' or 'education' is no term
    assert target not in recall(svc, "my education")


@pytest.mark.parametrize("message,title", [
    ("does she still have the dogs?", "Adopted a rescue dog"),
    ("how was the race", "Ran two races this spring"),
    ("is he still studying law", "Studies law in Leeds"),
    ("he got married!", "Plans to marry Anna"),
    ("baking again?", "Baked bread for the party"),
    ("she loves running", "Goes for a run every morning"),
])
def test_inflections_fold_together(t, svc, mode, message, title):
    target = node(t, title)
    node(t, "Unrelated note about taxes")
    assert recall(svc, message) == [target]


def test_folding_is_deterministic_and_documented_forms():
    assert [fold(w) for w in ("dogs", "studies", "studied", "studying", "running", "baked", "baking")] == \
        ["dog", "studi", "studi", "studi", "run", "bake", "bake"]
    assert fold("ran") == "ran"  # irregular forms stay apart
    assert fold("bus") == "bus" and fold("class") == "class"
    assert term_key("Ice Creams") == "ice cream"
    assert term_key("冰淇淋") == "冰淇淋"


def test_digits_are_whole_words(t, svc, mode):
    trip = node(t, "Trip to Japan in 2023")
    node(t, "Phone number ends in 20235")
    assert recall(svc, "how was 2023 for you") == [trip]


def test_mixed_word_found_by_its_letter_part(t, svc, mode):
    phone = node(t, "Her iPhone15 screen cracked")
    assert recall(svc, "did she fix the iphone") == [phone]
    assert recall(svc, "iPhone15 again") == [phone]
    assert recall(svc, "I waited 15 minutes") == []


def test_cjk_keeps_substring_matching(t, svc, mode):
    target = node(t, "重庆火锅店打卡")
    assert recall(svc, "周末去吃火锅吧") == [target]


def test_mixed_cjk_latin_text(t, svc, mode):
    target = node(t, "Lisa喜欢去KTV唱歌")
    node(t, "周末爬山")
    assert recall(svc, "今晚和lisa去ktv") == [target]


# -- derived keywords ------------------------------------------------------------------------


@pytest.mark.parametrize("title,want,unwanted", [
    ("She is allergic to peanuts", {"allergic", "peanuts"}, {"she", "is", "to"}),
    ("在腾讯做后端开发", {"腾讯", "后端", "开发"}, {"做后"}),
    ("小李的生日", {"小李", "生日"}, {"的"}),
    ("老张家的狗走丢了", {"老张"}, set()),
    ("阿珍她妈住院了", {"阿珍", "住院"}, {"她妈"}),
    ("王小二最近在学吉他", {"王小二", "吉他"}, {"最近"}),
    ("Lisa started a pottery class", {"lisa", "pottery", "class"}, {"a"}),
])
def test_derived_keywords_are_clean(t, title, want, unwanted):
    kws = {k.casefold() for k in t.write(title=title, content="")["keywords"]}
    assert want <= kws
    assert not (unwanted & kws)


def test_no_derived_keyword_crosses_a_dictionary_word():
    for title in ("在腾讯做后端开发", "他在做后端", "我们在做后期"):
        assert "做后" not in derive_keywords(title)


def test_keywords_null_derives_again(t):
    target = t.write(title="Lisa is allergic to peanuts", content="", keywords=["Lisa", "is"])["id"]
    got = t.write(id=target, title="Lisa is allergic to peanuts", content="", keywords=None)["keywords"]
    assert {k.casefold() for k in got} == {"lisa", "allergic", "peanuts"}


# -- names in messages ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["小李", "老张", "阿珍", "王小二"])
def test_unknown_names_found_in_messages(t, svc, mode, name):
    person = t.write(title=f"{name}的生日", content="五月三日")["id"]
    node(t, "公司年会")
    assert recall(svc, f"{name}最近怎么样") == [person]


def test_relationship_names_are_known_words(t, svc):
    target = node(t, "阿强在深圳开奶茶店")
    t.relationship_write(personId="qq:1", name="阿强", relationship="老同学", affinity=20, reason="一起长大")
    got = svc.recall_explain("阿强最近好吗")
    assert "阿强" in got["segmented"]
    assert got["ids"] == [target]


# -- weighted ranking ----------------------------------------------------------------------------


def test_rare_term_outranks_common_terms(t, svc):
    common = [node(t, f"和朋友去公园散步第{i}次") for i in range(8)]
    rare = node(t, "朋友送的多肉植物")
    got = recall(svc, "朋友的多肉植物怎么样了")
    assert got[0] == rare
    assert not set(common) & set(got)  # 朋友 is in nearly every title: no hit on its own


def test_seed_counts_terms_weighted_weighs_them(t, svc):
    """Seed: more distinct terms first. Weighted: one rare term beats two common ones."""
    for i in range(6):
        node(t, f"Coffee with Sam at the park {i}")
    two_common = node(t, "Coffee at the park")
    rare = node(t, "Sam's espresso machine broke")
    svc.update_config({"recallRanking": "seed"})
    assert recall(svc, "coffee park espresso")[0] == two_common
    svc.update_config({"recallRanking": "weighted"})
    assert recall(svc, "coffee park espresso")[0] == rare


@pytest.mark.parametrize("text", ["哈哈哈好的", "ok thanks", "晚安", "在吗", "lol same", "I want to go now",
                                  "what do you think?", "今天好累啊", "good morning!", "嗯嗯 知道了"])
def test_chit_chat_recalls_nothing(t, svc, text):
    for title in ("I like going to the beach today", "Wants to go to Japan", "今天是小李的生日",
                  "晚上喜欢看电影", "Good friends with Tom", "Thinks the new job is great"):
        node(t, title)
    assert recall(svc, text) == []


def test_common_terms_alone_recall_nothing(t, svc):
    for i in range(10):
        node(t, f"咖啡店打卡 {i}号")
    latte = t.write(title="咖啡拉花课程", content="")["id"]  # derived keywords teach jieba 拉花
    assert recall(svc, "想喝咖啡") == []
    assert recall(svc, "学拉花") == [latte]


def test_whole_title_hit_recalls_a_person_node(t, svc):
    """A name that is in most titles is common, but the person node titled by it is recalled."""
    caroline = node(t, "Caroline")
    facts = [node(t, f"Caroline fact {w}", parent=caroline) for w in ("alpha", "beta", "gamma", "delta")]
    got = recall(svc, "how is Caroline doing")
    # issue 25 (person scoping): her facts now rank ahead of her node, which is still recalled
    assert caroline in got
    assert set(got) <= {caroline, *facts}


def test_synonym_class_counts_once(t, svc):
    """番茄 and 西红柿 are one class: a title holding both is not worth two different words."""
    t.synonyms_add(terms=["番茄", "西红柿"])
    both = node(t, "番茄西红柿合集")
    two = node(t, "番茄土豆泥")
    for i in range(3):
        node(t, f"其他记录{i}")
    got = recall(svc, "西红柿和土豆")
    assert got.index(two) < got.index(both)


def test_title_and_keyword_together_count_more(t, svc):
    both = node(t, "Pottery class on Fridays", keywords=["pottery"])
    title_only = node(t, "Pottery class on Mondays")  # newer
    assert recall(svc, "how is pottery going")[:2] == [both, title_only]


def test_ties_newer_first_then_id(t, svc, clock):
    a = node(t, "Trip to Lisbon with Anna")
    b = node(t, "Trip to Lisbon with Ben")
    assert recall(svc, "Lisbon")[:2] == [b, a]
    t.write(id=a, title="Trip to Lisbon with Anna", content="again", keywords=[])
    assert recall(svc, "Lisbon")[:2] == [a, b]


def test_later_messages_of_a_batch_weigh_more(t, svc):
    old_topic = node(t, "养了一只柯基")
    new_topic = node(t, "准备考研究生")
    got = recall(svc, "我家柯基今天拆家了", "对了，考研究生的事怎么样了")
    assert got[:2] == [new_topic, old_topic]


def test_parent_title_ranks_the_right_persons_fact_first(t, svc):
    mel = node(t, "Melanie")
    car = node(t, "Caroline")
    for _who, parent in (("Melanie", mel), ("Caroline", car)):
        for w in ("painting", "camping", "swimming", "reading"):
            node(t, f"Went {w} last summer", parent=parent)
    mel_race = node(t, "Ran a charity race", parent=mel)
    car_race = node(t, "Ran a charity race", parent=car)  # newer
    got = recall(svc, "how did Melanie's charity race go?")
    assert got.index(mel_race) < got.index(car_race)


def test_quota_ten_and_never_padded(t, svc):
    ids = [node(t, f"Marathon training week {i}") for i in range(14)]
    got = recall(svc, "marathon")
    assert len(got) == 10 and set(got) <= set(ids) or got == []
    node(t, "Unrelated")
    assert recall(svc, "quantum chromodynamics") == []


def test_superseded_and_deleted_nodes_leave_the_weights(t, svc):
    a = node(t, "Sushi dinner with Ken")
    b = node(t, "Sushi dinner with Yui")
    assert svc.state.current_count == 2
    t.supersede(ids=[a], replacementId=b, reason="dup")
    assert svc.state.current_count == 1
    assert recall(svc, "sushi") == [b]
    c = node(t, "Ramen with Ken")
    t.delete(id=c)
    assert svc.state.current_count == 1 and "ramen" not in svc.state.title_words


def test_explain_shows_weights_and_where(t, svc):
    car = node(t, "Caroline")
    fact = node(t, "Adopted a rescue dog", parent=car, keywords=["dog"])
    ex = svc.recall_explain("did Caroline adopt a dog?")
    hit = next(h for h in ex["hits"] if h["id"] == fact)
    where = {m["term"]: m["where"] for m in hit["matches"]}
    assert where == {"caroline": "parent", "adopt": "title", "dog": "title+keyword"}
    assert all(m["weight"] > 0 for m in hit["matches"])
    assert hit["score"] == pytest.approx(sum(m["weight"] for m in hit["matches"]), rel=1e-3)


def test_search_candidates_follow_the_ranking(t, svc):
    for i in range(6):
        node(t, f"Coffee with Sam {i}")
    rare = node(t, "Espresso machine")
    svc.update_config({"recallRanking": "weighted"})
    got = svc.retriever.hits(["coffee", "espresso"], keyword_equality=False, limit=20, mode="weighted", floor=False)
    assert got[0].id == rare and len(got) == 7


def test_index_survives_reopen(memdir, clock):
    with Service(memdir, clock=clock) as s:
        s.call("zcor_memory_write", {"title": "Knitting a scarf for mum", "content": ""})
    with Service(memdir, clock=clock) as s:
        assert s.recall(SESSION, [{"text": "how's the knitting", "origin": "external"}]) == ["m1"]


# -- speakers: the relationship of who is talking leads the header --------------------------------


def test_speaker_relationship_leads_the_header(t, svc):
    person = t.write(title="小李", content="同事，坐我对面")["id"]
    t.relationship_write(personId="qq:10001", name="小李", relationship="同事", affinity=35,
                         reason="常一起吃午饭", aliases=["李工"], memoryNodeId=person)
    hotpot = node(t, "周五去吃火锅")
    svc.recall(SESSION, [{"text": "周五的火锅还去吗", "origin": "external", "senderKey": "qq:10001"}])
    ctx = svc.context(SESSION)
    assert ctx["ids"] == [hotpot]
    text = ctx["text"]
    assert text.index("[person qq:10001] 小李 (同事; affinity +35)") < text.index(f"[{hotpot}]")
    assert "常一起吃午饭" in text and f"Their memory: [{person}] 小李" in text
    assert text.count("qq:10001") == 1


def test_speaker_found_by_alias_and_only_once(t, svc):
    t.relationship_write(personId="tg:7", name="Anna", relationship="friend", affinity=60,
                         reason="met at climbing gym", aliases=["annie_b"])
    svc.recall(SESSION, [{"text": "hi", "origin": "external", "senderKey": "Annie_B"},
                         {"text": "me again", "origin": "external", "senderKey": "tg:7"},
                         {"text": "bot reply", "origin": "internal", "senderKey": "tg:99"}])
    ctx = svc.context(SESSION)
    assert ctx["text"].count("[person tg:7]") == 1 and ctx["text"].count("tg:") == 1
    assert ctx["ids"] == []  # small talk: no memory, only the speaker


def test_unknown_sender_and_switches(t, svc):
    t.relationship_write(personId="tg:7", name="Anna", relationship="friend", affinity=60, reason="gym")
    events = [{"text": "hi", "origin": "external", "senderKey": "tg:8"}]
    svc.recall(SESSION, events)
    assert svc.context(SESSION) == {"text": "", "ids": []}
    events[0]["senderKey"] = "tg:7"
    svc.recall(SESSION, events)
    assert "[person tg:7] Anna" in svc.context(SESSION)["text"]
    svc.update_config({"recallSenders": False})
    assert svc.context(SESSION)["text"] == ""
    svc.update_config({"recallSenders": True, "relationshipMemory": False})
    assert svc.context(SESSION)["text"] == ""


def test_speaker_header_follows_live_state_and_budget(t, svc):
    t.relationship_write(personId="tg:7", name="Anna", relationship="friend", affinity=60, reason="x" * 2000)
    target = node(t, "Anna's climbing trip", content="y" * 3000)
    svc.recall(SESSION, [{"text": "how was the climbing trip", "origin": "external", "senderKey": "tg:7"}])
    svc.update_config({"recallBudget": 1000})
    ctx = svc.context(SESSION)
    assert len(ctx["text"]) <= 1000 and "[person tg:7]" in ctx["text"] and f"[{target}]" in ctx["text"]
    assert "zcor_relationship_read(personId)" in ctx["text"]
    t.relationship_delete(personId="tg:7")
    assert "[person tg:7]" not in svc.context(SESSION)["text"]


def test_explain_shows_the_speaker(t, svc):
    t.relationship_write(personId="tg:7", name="Anna", relationship="friend", affinity=60, reason="gym")
    ex = svc.recall_explain("hello", sender_key="tg:7")
    assert ex["senders"] == ["tg:7"] and "[person tg:7] Anna" in ex["header"]
    assert svc.recall_explain("hello")["senders"] == []
