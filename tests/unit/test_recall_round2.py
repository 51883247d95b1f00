"""Recall, round two (issue 25): the named relevance bugs, the linear multi-word synonym
scan (issue 23 item 5), synonyms that never outweigh the word, English folding, Traditional
and Simplified Chinese, and person scoping."""

from __future__ import annotations

import pytest

from tests.unit.test_recall_weighted import SESSION, node, recall
from zcord.core.text import title_seq
from zcord.retrieval import recall as recall_mod

# -- the named bugs (issue 25 item 5) ------------------------------------------------------


def test_bare_surname_character_is_no_topic(t, svc):
    """陈奕迅的新歌好好听 once recalled 陈姐是部门领导 through the lone character 陈."""
    node(t, "陈姐是部门领导")
    singer = node(t, "陈奕迅演唱会门票")
    assert recall(svc, "陈奕迅的新歌好好听") == [singer]
    assert svc.recall_explain("陈奕迅的新歌好好听")["segmented"][0] == "陈奕迅"


def test_lone_topic_characters_still_count(t, svc):
    legs = node(t, "王小二摔伤了腿")
    car = node(t, "车停在公司楼下")
    assert recall(svc, "王小二的腿好了吗") == [legs]
    assert recall(svc, "车坏了") == [car]  # a surname that is a word of its own still counts


def test_no_match_across_the_message_boundary(t, svc):
    """我今天喝了一大杯牛奶 + 茶叶蛋也吃了两个 once recalled 小林最爱喝奶茶: 茶 of 茶叶蛋 was taken
    as the synonym term 茶. Messages are separate texts and a term inside a longer word is
    no term."""
    node(t, "小林最爱喝奶茶")
    assert recall(svc, "我今天喝了一大杯牛奶", "茶叶蛋也吃了两个") == []
    tea = node(t, "晚上不能喝茶")
    assert recall(svc, "我今天喝了一大杯牛奶", "我想喝茶") == [tea]


def test_part_of_a_dictionary_word_is_not_the_word(t, svc):
    """宠物医院几点关门 once recalled memories keyed 宠物: the message's word is 宠物医院."""
    node(t, "带猫去看病", keywords=["宠物"])
    clinic = node(t, "小区门口的宠物医院")
    assert recall(svc, "宠物医院几点关门") == [clinic]
    assert "宠物" not in svc.recall_explain("宠物医院几点关门")["synonymTerms"]


def test_synonym_terms_never_found_inside_latin_words(t, svc):
    """`volunteer` once yielded `tee` (the T恤 group) and `community` yielded `ty`."""
    node(t, "Bought a new tee for the trip")
    node(t, "Says ty to everyone")
    volunteer = node(t, "Volunteers at the food bank")
    garden = node(t, "A community garden")
    assert recall(svc, "I volunteer on weekends") == [volunteer]
    assert recall(svc, "our community garden is nice") == [garden]
    for text in ("I volunteer on weekends", "our community garden is nice"):
        assert not {"tee", "ty"} & set(svc.recall_explain(text)["synonymTerms"])


# -- the multi-word synonym scan is linear (issue 23 item 5) ----------------------------------


class CountingSeq(tuple):
    """A word sequence that counts every word read from it (by iteration or by slicing)."""

    reads = 0

    def __iter__(self):
        for w in tuple.__iter__(self):
            CountingSeq.reads += 1
            yield w

    def __getitem__(self, k):
        out = tuple.__getitem__(self, k)
        CountingSeq.reads += len(out) if isinstance(k, slice) else 1
        return out


@pytest.mark.parametrize("mode", ["seed", "weighted"])
def test_multiword_synonym_scan_is_linear(t, svc, monkeypatch, mode):
    svc.update_config({"recallRanking": mode})
    long_term = " ".join(["a"] * 50)
    t.synonyms_add(terms=[long_term, "tiny alphabet"])
    t.synonyms_add(terms=["ice cream", "gelato"])
    monkeypatch.setattr(recall_mod, "title_seq", lambda norm: CountingSeq(title_seq(norm)))
    words = 20_000
    CountingSeq.reads = 0
    r = svc.sessions.retriever
    found = r.words("a " * words, mode).synonym_terms
    assert long_term in found
    # the old scan read every word once per length up to 50 (about 50 × 25 reads a word)
    assert CountingSeq.reads <= 2 * words
    assert r._latin_scan.steps <= 3 * words
    assert "ice cream" in r.words("we had ice cream and a a", mode).synonym_terms
    assert r.words("ice and cream", mode).synonym_terms == []
    assert r.words("a a a", mode).synonym_terms == []


# -- synonyms never outweigh the word (issue 25 item 3) -------------------------------------


def test_synonym_never_outweighs_the_word(t, svc):
    """`dogs` expands to `doggy`; found in one memory, it once scored 4.5 against the word
    `dog`'s 1.0 (found in many) and put the doggy memory first."""
    dogs = [node(t, f"Walks the dog on {day}") for day in ("Monday", "Tuesday", "Friday", "Sunday")]
    for i in range(8):
        node(t, f"Note {i} about something else")
    daycare = node(t, "Doggy daycare downtown")
    explain = svc.recall_explain("do you like dogs")
    scores = {h["id"]: h["score"] for h in explain["hits"]}
    assert set(scores) == {*dogs, daycare}
    assert min(scores[d] for d in dogs) > scores[daycare]


# -- English folding (issue 25 item 2): Snowball stems, irregular forms, stop words -----------


@pytest.mark.parametrize("message,title", [
    ("how was the travelling", "Loves to travel by train"),
    ("where did she go on holiday", "Went to Lisbon for a holiday"),
    ("what did he buy", "Bought a used kayak"),
    ("how are the children", "Her child starts school in May"),
    ("he ran a marathon", "Runs marathons every spring"),
    ("any news from the studio", "Studio news: moved to Leeds"),
])
def test_english_forms_meet_in_weighted_mode(t, svc, message, title):
    target = node(t, title)
    node(t, "Unrelated note about taxes")
    assert recall(svc, message) == [target]


def test_irregular_forms_meet_through_keywords_too(t, svc):
    target = node(t, "Kayak from the shop", keywords=["bought"])
    assert recall(svc, "what did he buy") == [target]


def test_seed_mode_keeps_its_folding(t, svc):
    svc.update_config({"recallRanking": "seed"})
    node(t, "Went to Lisbon for a holiday")
    travel = node(t, "Loves to travel by train")
    assert recall(svc, "did you go there") == []  # irregular forms stay apart in seed mode
    assert recall(svc, "how was the travelling") == []  # travell ≠ travel
    assert recall(svc, "travel plans") == [travel]


def test_longing_does_not_become_long(t, svc):
    node(t, "Long drive to the coast")
    wanted = node(t, "Feels a longing for home")
    assert recall(svc, "that longing again") == [wanted]


def test_all_is_a_stop_word(t, svc):
    node(t, "All-hands meeting on Friday")
    node(t, "All the cats she has fostered")
    assert recall(svc, "no worries at all") == []
    assert "all" not in svc.recall_explain("no worries at all")["segmented"]


def test_stems_follow_every_write(t, svc):
    target = node(t, "Travelling to Japan")
    assert recall(svc, "travel tips?") == [target]
    t.write(id=target, title="Moving to Japan", content="x", keywords=[])
    assert recall(svc, "travel tips?") == []
    t.delete(id=target)
    assert svc.state.title_stems.get("japan") is None and svc.state.title_stems.get("move") is None


# -- Traditional ↔ Simplified (issue 25 item 4) ------------------------------------------------


@pytest.mark.parametrize("mode", ["seed", "weighted"])
def test_traditional_and_simplified_meet_both_ways(t, svc, mode):
    svc.update_config({"recallRanking": mode})
    hotpot = node(t, "周五去吃重庆火锅")
    concert = node(t, "喜歡聽演唱會")
    node(t, "周末去爬山")
    assert recall(svc, "還想吃火鍋嗎") == [hotpot]
    assert recall(svc, "喜欢演唱会吗") == [concert]
    assert svc.state.nodes[concert].title == "喜歡聽演唱會"  # stored text is never changed


def test_traditional_keywords_and_synonyms_fold(t, svc):
    cat = node(t, "家里的小动物", keywords=["貓咪"])
    t.synonyms_add(terms=["貓咪", "喵星人"])
    assert recall(svc, "猫咪今天吃了吗") == [cat]
    assert recall(svc, "喵星人怎么样") == [cat]


def test_memory_query_folds_traditional(t, svc):
    a = node(t, "买了新电脑", content="散熱很好")
    b = node(t, "買了新手機", content="屏幕很大")
    assert {n["id"] for n in t.query(keywords=["买了"])["items"]} == {a, b}
    assert [n["id"] for n in t.query(keywords=["散热"])["items"]] == [a]
    assert [n["id"] for n in t.query(keywords=["手機", "屏幕"])["items"]] == [b]


def test_traditional_titles_derive_keywords_in_their_own_characters(t):
    from zcord.core.text import derive_keywords, fold_han
    for title in ("喜歡聽演唱會", "週末去醫院體檢", "羽毛球館的會員卡"):
        simplified = derive_keywords(fold_han(title))
        assert len(simplified) >= 1
        got = derive_keywords(title)
        assert [fold_han(k) for k in got] == simplified  # cut as the Simplified title is
        assert all(k in title for k in got)  # in the title's own characters


def test_shipped_table_is_opencc_characters():
    opencc = pytest.importorskip("opencc")
    from pathlib import Path

    from zcord.core.hanzi import SIMPLIFIED, TRADITIONAL
    want = {}
    for line in (Path(opencc.__file__).parent / "dictionary" / "TSCharacters.txt").read_text("utf-8").splitlines():
        trad, _, simp = line.partition("\t")
        first = simp.split(" ")[0]
        if len(trad) == 1 and len(first) == 1 and first != trad:
            want[trad] = first
    assert dict(zip(TRADITIONAL, SIMPLIFIED)) == want
    assert len(TRADITIONAL) == len(SIMPLIFIED) > 4000


# -- person scoping (issue 25 item 1) ----------------------------------------------------------


def people(t):
    james = node(t, "James")
    john = node(t, "John")
    game = node(t, "James created and released his first game", parent=james)
    node(t, "James hosted a charity stream", parent=james)
    apps = node(t, "John suggested developing mobile applications", parent=john)
    node(t, "John hosted a coding meetup", parent=john)
    return james, john, game, apps


def test_named_persons_memories_rank_ahead(t, svc):
    """`develop` alone once put John's fact first for a question about James."""
    james, john, game, apps = people(t)
    node(t, "Develops apps at work")  # equal evidence outside any person
    ids = recall(svc, "What kind of games has James tried to develop?")
    assert ids[0] == game
    explain = svc.recall_explain("What kind of games has James tried to develop?")
    top = explain["hits"][0]
    assert top["id"] == game and top["person"] == {"id": james, "title": "James", "factor": 1.5}
    assert "person" not in next(h for h in explain["hits"] if h["id"] == apps)


def test_equal_evidence_goes_to_the_named_person(t, svc):
    _james, _john, _game, apps = people(t)
    hosted = recall(svc, "what did John host?")
    assert hosted[0] == svc.state.children[_john][1]  # John's meetup before James's marathon
    assert recall(svc, "does John develop things?")[0] == apps


def test_relationship_alias_names_the_person(t, svc):
    james, _john, game, _apps = people(t)
    t.relationship_write(personId="tg:1", name="James Wu", relationship="friend", affinity=10,
                         reason="met at uni", aliases=["Jimmy"], memoryNodeId=james)
    node(t, "Released a photo book")
    assert recall(svc, "what did Jimmy release?")[0] == game
    assert recall(svc, "what did Wu release?") != [game]  # only the name, an alias or a first name


def test_the_sender_names_the_person(t, svc):
    james, _john, _game, _apps = people(t)
    t.relationship_write(personId="tg:9", name="Jamie", relationship="friend", affinity=10,
                         reason="x", memoryNodeId=james)
    marathon = svc.state.children[james][1]
    meetup = svc.state.children[_john][1]
    plain = svc.recall(SESSION, [{"text": "who hosted something?", "origin": "external"}])
    assert plain.index(meetup) < plain.index(marathon)  # newer first on equal evidence
    said = svc.recall(SESSION, [{"text": "who hosted something?", "origin": "external", "senderKey": "tg:9"}])
    assert said.index(marathon) < said.index(meetup)
    explain = svc.recall_explain("who hosted something?", sender_key="tg:9")
    assert next(h for h in explain["hits"] if h["id"] == marathon)["person"]["id"] == james


def test_seed_mode_has_no_person_scoping(t, svc):
    svc.update_config({"recallRanking": "seed"})
    _james, _john, game, apps = people(t)
    explain = svc.recall_explain("What kind of games has James tried to develop?")
    assert all("person" not in h for h in explain["hits"])


@pytest.mark.parametrize("text,title", [("晚安，明天見", "阿凯还没见过晓雯爸妈"), ("今天好累啊，不想動", "活动记录")])
def test_traditional_small_talk_recalls_nothing(t, svc, text, title):
    node(t, title)
    assert recall(svc, text) == []


def test_greeting_a_person_by_name_recalls_nothing(t, svc):
    sam = node(t, "Sam")
    insomnia = node(t, "Sam struggles with insomnia", parent=sam)
    node(t, "Sam's dad died in 2018", parent=sam)
    assert recall(svc, "hi", "Hi Sam! What's up?", "nothing much, just bored") == []
    assert recall(svc, "thanks for listening", "Anytime, Sam.") == []
    assert recall(svc, "Good morning Sam!", "barely slept, the insomnia again")[0] == insomnia
    assert sam in recall(svc, "how is Sam doing")  # no greeting: asked about
    assert recall(svc, "hi! how is Sam's insomnia?")[0] == insomnia


def test_stemmed_tables_rebuilt_when_restored_without_them(t, svc):
    """Indexes restored from elsewhere (a saved index cache) without the stemmed tables:
    weighted recall fills them again before it ranks."""
    target = node(t, "Travelling to Japan", keywords=["bought"])
    st = svc.state
    for table in (st.title_stems, st.keyword_stems, st.title_stem_keys):
        table.clear()
    st.stem_count = 0
    assert recall(svc, "travel tips?") == [target]
    assert recall(svc, "what did he buy") == [target]
    assert st.stem_count == st.current_count == 1
