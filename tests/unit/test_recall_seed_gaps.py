"""The "seed" ranking rule (SPEC §3.3 step 2) at the retriever: a current node is hit by a
term when the term occurs in its title or equals one of its keywords, and its score is the
number of DISTINCT terms that hit it. One term reaching a node through both its title and
an equal keyword is still one term.

These call Retriever.hits directly, the seed path, so they hold whatever the default
ranking mode is.
"""

from __future__ import annotations

from datetime import timedelta


def scores(svc, terms: list[str], keyword_equality: bool = True) -> list[tuple[str, int]]:
    return [(h.id, h.score) for h in svc.retriever.hits(terms, keyword_equality=keyword_equality)]


def test_one_term_through_title_and_equal_keyword_counts_once(t, svc, clock):
    clock.step = timedelta(minutes=1)
    # hit by two different terms: 火锅 in the title, 小明 as a keyword
    two_terms = t.write(title="周末吃火锅", content="", keywords=["小明"])["id"]
    # hit by one term twice over: 火锅 in the title and 火锅 as a keyword; newer than the first
    one_term = t.write(title="火锅店推荐", content="", keywords=["火锅"])["id"]
    assert scores(svc, ["火锅", "小明"]) == [(two_terms, 2), (one_term, 1)]


def test_title_and_keyword_hit_scores_like_a_title_only_hit(t, svc, clock):
    clock.step = timedelta(minutes=1)
    title_and_keyword = t.write(title="火锅底料", content="", keywords=["火锅", "底料"])["id"]
    title_only = t.write(title="火锅聚会", content="", keywords=[])["id"]
    keyword_only = t.write(title="周五晚饭", content="", keywords=["火锅"])["id"]
    # all three are hit by the one term 火锅 once: same score, so newest first
    assert scores(svc, ["火锅"]) == [(keyword_only, 1), (title_only, 1), (title_and_keyword, 1)]
    # without keyword equality (the search tool's candidates) only titles count
    assert scores(svc, ["火锅"], keyword_equality=False) == [(title_only, 1), (title_and_keyword, 1)]


def test_score_counts_distinct_terms_across_title_and_keywords(t, svc, clock):
    clock.step = timedelta(minutes=1)
    both_in_title = t.write(title="小明的火锅", content="", keywords=["火锅", "小明"])["id"]
    split = t.write(title="小明生日", content="", keywords=["火锅"])["id"]
    single = t.write(title="火锅", content="", keywords=["火锅"])["id"]
    assert scores(svc, ["火锅", "小明"]) == [(split, 2), (both_in_title, 2), (single, 1)]
