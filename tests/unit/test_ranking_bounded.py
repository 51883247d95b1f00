"""Weighted ranking scores only the candidates that can reach its pools when a batch anchors
many memories (ranking._Bounded, after the round-three regression: a question's common words
anchored half of a 100,000-memory Memory): the same hits, scores, order and explain as scoring
every candidate, on seeded random Memories whose questions anchor common words, with ties,
keywords, parents, people and pools small enough to cut."""

from __future__ import annotations

import random

import pytest

from tests.unit.test_ranking_equivalence import CJK, batch, build
from zcord.retrieval import ranking


def questions(rng: random.Random) -> list[str]:
    """A batch whose last message asks about common words (they anchor, as in a chat)."""
    texts = batch(rng)
    texts[-1] += "".join(rng.sample(CJK, 3)) + "怎么样？"
    return texts


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("pools", [(1000, 60), (40, 12), (7, 3)])
def test_bounded_scoring_answers_as_scoring_every_candidate(svc, jieba_words, monkeypatch, seed, pools):
    deferred, rerank = pools
    monkeypatch.setattr(ranking, "DEFERRED_POOL", deferred)
    monkeypatch.setattr(ranking, "RERANK_POOL", rerank)
    ran: list[tuple[int, int]] = []  # per bounded call: ids scored, ids anchored
    real = ranking._Bounded.finals

    def spy(self, multi, under, cut):
        out = real(self, multi, under, cut)
        ran.append((len(out), len(self.anchored)))
        return out

    monkeypatch.setattr(ranking._Bounded, "finals", spy)
    rng = random.Random(seed)
    build(svc, rng, rng.choice([300, 900]))
    r = svc.retriever
    people = list(svc.state.relationships)
    compared = 0
    for _ in range(20):
        terms = r.words(questions(rng), "weighted").terms
        for how in (dict(keyword_equality=True, limit=10, explain=True),
                    dict(keyword_equality=True, limit=None, explain=True),
                    dict(keyword_equality=False, limit=20, explain=True),
                    dict(keyword_equality=True, limit=10, floor=False),
                    dict(keyword_equality=True, limit=10, explain=True, people=people[:2])):
            monkeypatch.setattr(ranking, "BOUNDED_FROM", 1)  # whenever there are more candidates than the pool
            bounded = r.hits(terms, mode="weighted", **how)
            monkeypatch.setattr(ranking, "BOUNDED_FROM", 10**9)  # never
            every = r.hits(terms, mode="weighted", **how)
            assert bounded == every, how
            compared += len(every)
    assert compared > 100  # the batches do hit memories
    # the bounded scoring ran, and left candidates unscored
    assert ran and any(scored < anchored for scored, anchored in ran)
