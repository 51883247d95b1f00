"""The faster weighted ranking and synonym scan (issue 24) answer exactly as the code they
replaced (kept in tests/unit/ranking_reference.py): the same terms, hits, order, scores and
explain output on seeded random Memories and batches, with ties, synonyms, keywords,
parents, people and the candidate pools small enough to cut."""

from __future__ import annotations

import heapq
import random
from datetime import UTC, datetime, timedelta

import pytest

from tests.unit import ranking_reference
from tests.unit.ranking_reference import OldRetriever
from zcord.core.models import Node, Relationship
from zcord.retrieval import ranking
from zcord.retrieval.ranking import _best

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CJK = ["火锅", "奶茶", "电影", "猫咪", "猫", "狗", "考试", "加班", "周末", "钢琴", "跑步", "生日", "旅行", "咖啡",
       "宠物", "宠物医院", "看电影", "喜欢", "想去", "推荐", "今天", "哈哈", "小明", "王小二", "重庆火锅店", "喜歡",
       "火鍋", "茶", "茶叶蛋", "医院", "工作", "朋友", "老张", "吃饭", "音乐会"]
LATIN = ["dog", "dogs", "doggy", "running", "ran", "travel", "travelling", "ice cream", "hiking", "pottery",
         "caroline", "sam", "melanie", "camping", "the", "like", "thanks", "iphone15", "ktv", "books", "coffee"]
FILLER = "今天天气很好我们一起去公园散步聊了很多关于工作和生活的事情他说下次还要再来，。！？ "


def title(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return "".join(rng.choice(CJK) for _ in range(rng.randint(1, 3))) + rng.choice(["", "了", "的事", "#"])
    return " ".join(rng.choice(LATIN) for _ in range(rng.randint(1, 4))).capitalize()


def build(svc, rng: random.Random, n: int) -> None:
    """n memories (a few superseded), ties in updatedAt, keywords, parents; people linked."""
    st = svc.state
    ids: list[str] = []
    for k in range(1, n + 1):
        parent = rng.choice(ids) if ids and rng.random() < 0.6 else None
        at = T0 + timedelta(minutes=rng.randint(0, 6))
        keywords = rng.sample(CJK + LATIN, rng.choice([0, 0, 1, 2, 3]))
        node = Node(id=f"m{k}", title=title(rng), content="c", keywords=keywords, parent_id=parent,
                    created_at=at, updated_at=at)
        st._put_node(node)
        ids.append(node.id)
    for k in rng.sample(range(1, n + 1), n // 20):  # superseded: never ranked
        old = st.nodes[f"m{k}"]
        st._put_node(old.model_copy(update={"superseded_by": f"m{(k % n) + 1}", "supersede_reason": "r"}))
    st.next_id = n + 1
    for name, aliases in (("Caroline", ["Caro"]), ("小明", []), ("Sam Lee", ["sammy"])):
        target = rng.choice(ids)
        st._put_rel(Relationship(person_id=f"p:{name}", name=name, aliases=aliases, relationship="friend",
                                 affinity=0, reason="r", memory_node_id=target, created_at=T0, updated_at=T0))


def batch(rng: random.Random) -> list[str]:
    out = []
    for _ in range(rng.choice([1, 1, 2, 5])):
        parts = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            parts.append(rng.choice(CJK) if r < 0.45 else
                         f" {rng.choice(LATIN)} " if r < 0.75 else
                         "".join(rng.choice(FILLER) for _ in range(rng.randint(1, 8))))
        out.append("".join(parts))
    return out


@pytest.fixture
def retrievers(svc, jieba_words):
    """The service's Retriever and one with the old ranking, over the same state."""
    old = OldRetriever(lambda: svc.state, svc.synonyms)
    return svc.retriever, old


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("pools", [(1000, 60), (40, 12), (7, 3)])
def test_same_terms_hits_scores_and_explain_as_before(svc, retrievers, monkeypatch, seed, pools):
    deferred, rerank = pools
    for module in (ranking, ranking_reference):  # small pools: the cuts happen on small Memories too
        monkeypatch.setattr(module, "DEFERRED_POOL", deferred)
        monkeypatch.setattr(module, "RERANK_POOL", rerank)
    rng = random.Random(seed)
    build(svc, rng, rng.choice([60, 300, 900]))
    new, old = retrievers
    people = list(svc.state.relationships)
    compared = 0
    for _ in range(25):
        texts = batch(rng)
        for mode in ("weighted", "seed"):
            w_new, w_old = new.words(texts, mode), old.words(texts, mode)
            assert (w_new.segmented, w_new.synonym_terms, w_new.expanded, w_new.terms, w_new.greeting) == \
                (w_old.segmented, w_old.synonym_terms, w_old.expanded, w_old.terms, w_old.greeting)
        terms = new.words(texts, "weighted").terms
        for how in (dict(keyword_equality=True, limit=10, explain=True),
                    dict(keyword_equality=True, limit=None, explain=True),
                    dict(keyword_equality=False, limit=20, explain=True),
                    dict(keyword_equality=True, limit=10, floor=False),
                    dict(keyword_equality=True, limit=10, explain=True, people=people[:2]),
                    dict(keyword_equality=True, limit=10, greeting=True)):
            got = new.hits(terms, mode="weighted", **how)
            assert got == old.hits(terms, mode="weighted", **how), (texts, how)
            compared += len(got)
    assert compared > 100  # the batches do hit memories


def test_cut_pools_are_exercised(svc, retrievers, monkeypatch):
    """The equivalence above reaches the code that cuts the candidates for common terms
    (the pool of `DEFERRED_POOL`) and raises values already set by a class's earlier term."""
    calls = []
    real = ranking._fill_within

    def spy(local, t_ids, k_ids, value, only, old):
        calls.append((bool(local), len(only)))
        return real(local, t_ids, k_ids, value, only, old)

    monkeypatch.setattr(ranking, "_fill_within", spy)
    monkeypatch.setattr(ranking, "DEFERRED_POOL", 7)
    rng = random.Random(3)
    build(svc, rng, 600)
    new, old = retrievers
    for _ in range(25):
        new.hits(new.words(batch(rng), "weighted").terms, keyword_equality=True, limit=10, mode="weighted")
    assert any(size == 7 for _, size in calls) and any(filled for filled, _ in calls)


@pytest.mark.parametrize("size,k", [(0, 5), (5, 5), (6, 5), (300, 60), (1500, 1000), (9000, 60), (20000, 1000)])
def test_best_picks_what_nlargest_picks(size, k):
    """Ties (few distinct scores) go to the earlier ids, as heapq.nlargest gives them, on
    both of _best's paths (a sort, and a threshold for many scores)."""
    rng = random.Random(size)
    ids = [f"m{i}" for i in range(size)]
    rng.shuffle(ids)
    scores = {i: rng.choice([0.5, 1.0, 1.25, 2.0, 2.0000000001]) for i in ids}
    assert set(_best(scores, k)) == set(heapq.nlargest(k, scores, key=scores.__getitem__))
    assert len(_best(scores, k)) == min(k, size)
