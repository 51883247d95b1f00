"""Weighted ranking rules found open by mutation (issue 16), at Retriever.hits: a light
term that reaches a memory through its title and an equal keyword adds more than through
the title alone, and a term in the parent's title adds more than one in the grandparent's."""

from __future__ import annotations

from datetime import timedelta

from zcord.core.text import normalize, term_key
from zcord.retrieval.ranking import Term


def term(word: str, light: bool = False) -> Term:
    n = normalize(word)
    return Term(term_key(word), n, n, 1.0, light, frozenset([n]))


def ranked(svc, terms: list[Term]) -> list[str]:
    return [h.id for h in svc.retriever.hits(terms, keyword_equality=True, mode="weighted")]


def test_light_term_in_title_and_equal_keyword_outranks_title_only(t, svc, clock):
    clock.step = timedelta(minutes=1)
    both = t.write(title="qanchor qlight", content="", keywords=["qlight"])["id"]
    title_only = t.write(title="qanchor qlight", content="", keywords=["qother"])["id"]  # newer
    # alone, the light term hits nothing; with the anchor it only reorders
    assert ranked(svc, [term("qlight", light=True)]) == []
    assert ranked(svc, [term("qanchor")]) == [title_only, both]  # a tie: newest first
    assert ranked(svc, [term("qanchor"), term("qlight", light=True)]) == [both, title_only]


def test_parent_title_adds_more_than_grandparent_title(t, svc, clock):
    clock.step = timedelta(minutes=1)
    parent = t.write(title="qctx", content="")["id"]
    near = t.write(title="qhit aa", content="", parentId=parent)["id"]
    grand = t.write(title="qctx", content="")["id"]
    middle = t.write(title="zz", content="", parentId=grand)["id"]
    far = t.write(title="qhit bb", content="", parentId=middle)["id"]  # newer than near
    assert ranked(svc, [term("qhit")]) == [far, near]
    order = ranked(svc, [term("qhit"), term("qctx")])
    assert order.index(near) < order.index(far)
