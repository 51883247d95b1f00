"""Weighted ranking rules found open by mutation (issue 16), at Retriever.hits: a light
term through title and equal keyword adds more than through the title alone; a parent's
title adds more than a grandparent's; BM25's length norm within bounds; explain's match
places; a common term that is a whole title still recalls; a term's own synonym group
before one sharing its folded form; the word itself above its synonym; the average title
length."""

from __future__ import annotations

import math
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


def test_explain_says_where_each_term_matched(t, svc):
    kw_only = t.write(title="qtitle", content="", keywords=["qkw"])["id"]
    both = t.write(title="qkw notes", content="", keywords=["qkw"])["id"]
    title_only = t.write(title="qkw list", content="", keywords=[])["id"]
    hits = {h.id: h.matches for h in svc.retriever.hits([term("qkw")], keyword_equality=True, explain=True,
                                                      mode="weighted")}
    assert [(m[0], m[1]) for m in hits[kw_only]] == [("qkw", "keyword")]
    assert [(m[0], m[1]) for m in hits[both]] == [("qkw", "title+keyword")]
    assert [(m[0], m[1]) for m in hits[title_only]] == [("qkw", "title")]


def test_class_of_a_term_is_its_own_group_before_one_sharing_its_folded_form(svc):
    # "zorbs" and "zorb" fold to the same key; each is in a group of its own
    svc.set_synonym_group(None, ["zorbs", "qhound"])
    svc.set_synonym_group(None, ["zorb", "qpup"])
    assert svc.retriever.class_of("zorb") == frozenset({"zorb", "qpup"})
    assert svc.retriever.class_of("zorbs") == frozenset({"zorbs", "qhound"})
    assert svc.retriever.class_of("qhounds") == frozenset({"zorbs", "qhound"})  # by its folded form


def test_common_term_that_is_a_whole_title_still_recalls(t, svc):
    # "qzorbs" is in most titles (common: alone it recalls nothing), but it is also one
    # memory's whole title, compared by its folded form ("qzorb"), as a person's name would be
    for i in range(10):
        t.write(title=f"qzorbs walk {i}", content="")
    for i in range(3):
        t.write(title=f"other {i}", content="")
    whole = t.write(title="Qzorbs", content="")["id"]
    assert whole in ranked(svc, [term("qzorbs")])
    t.delete(id=whole)
    assert ranked(svc, [term("qzorbs")]) == []


def test_two_rare_terms_outweigh_a_much_shorter_title(t, svc):
    # BM25's length norm (k1 1.2, b 0.5) favours short titles, within bounds: a six-word title
    # hit by two terms still ranks above a one-word title hit by one of them
    both = t.write(title="qone qtwo w3 w4 w5 w6", content="")["id"]
    one = t.write(title="qone", content="")["id"]
    for i in range(4):
        t.write(title=f"fa{i} fb{i}", content="")
    assert ranked(svc, [term("qone"), term("qtwo")]) == [both, one]


def test_the_word_itself_outranks_its_synonym(t, svc, clock):
    clock.step = timedelta(minutes=1)
    svc.set_synonym_group(None, ["qzeta", "qomega"])
    itself = t.write(title="qzeta", content="")["id"]
    synonym = t.write(title="qomega", content="")["id"]  # newer
    words = svc.retriever.words("qzeta", mode="weighted")
    weights = {term.shown: term.weight for term in words.terms}
    assert weights["qomega"] < weights["qzeta"]
    assert ranked(svc, words.terms) == [itself, synonym]


def test_a_title_of_average_length_is_scored_by_its_idf_alone(t, svc):
    # BM25's length norm is 1 at the average title length (words): here 1 and 3 words
    one = t.write(title="qsolo", content="", keywords=[])["id"]
    t.write(title="qa qb qc", content="", keywords=[])
    svc.state.ensure_index()
    assert svc.state.avg_title_len == 2.0
    t.delete(id=one)
    hits = svc.retriever.hits([term("qb")], keyword_equality=True, mode="weighted")
    assert [h.score for h in hits] == [round(math.log(1 + 0.5 / 1.5), 4)]  # idf(1, 1)
