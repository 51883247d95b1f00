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
    ran: list[tuple[int, int, bool]] = []  # per bounded call: ids scored, ids anchored, with hidden ids
    real = ranking._Bounded.finals

    def spy(self, multi, under, cut):
        out = real(self, multi, under, cut)
        ran.append((len(out), len(self.anchored), bool(self.hide)))
        return out

    monkeypatch.setattr(ranking._Bounded, "finals", spy)
    rng = random.Random(seed)
    build(svc, rng, rng.choice([300, 900]))
    r = svc.retriever
    people = list(svc.state.relationships)
    compared = 0
    for _ in range(20):
        terms = r.words(questions(rng), "weighted").terms
        # another session's private memories (hide): the best of the batch and some at random,
        # so ties and pools at their edges change too
        top = [h.id for h in r.hits(terms, mode="weighted", keyword_equality=True, limit=8)]
        hide = frozenset(top[::2] + rng.sample(sorted(svc.state.nodes), 40))
        for how in (dict(keyword_equality=True, limit=10, explain=True),
                    dict(keyword_equality=True, limit=None, explain=True),
                    dict(keyword_equality=False, limit=20, explain=True),
                    dict(keyword_equality=True, limit=10, floor=False),
                    dict(keyword_equality=True, limit=10, explain=True, people=people[:2]),
                    dict(keyword_equality=True, limit=10, explain=True, hide=hide),
                    dict(keyword_equality=True, limit=None, explain=True, people=people[:2], hide=hide)):
            monkeypatch.setattr(ranking, "BOUNDED_FROM", 1)  # whenever there are more candidates than the pool
            bounded = r.ranking.hits(terms, mode="weighted", **how)
            monkeypatch.setattr(ranking, "BOUNDED_FROM", 10**9)  # never
            every = r.ranking.hits(terms, mode="weighted", **how)
            assert bounded == every, how
            assert not {h.id for h in every} & how.get("hide", frozenset())
            compared += len(every)
    assert compared > 100  # the batches do hit memories
    # the bounded scoring ran, and left candidates unscored
    assert ran and any(scored < anchored for scored, anchored, _ in ran)
    # with hidden ids as well (another session's private memories no longer turn it off)
    assert any(scored < anchored for scored, anchored, hidden in ran if hidden)
