"""The weighted ranking and synonym-term scan as they were before the issue 24 speed work
(zcord 2026-12-03, b7123802), kept verbatim as the oracle of test_ranking_equivalence.py:
the faster code in zcord.retrieval must give the same hits, scores, explain output and
terms, to the last digit. The parents' context and the explain output were not changed
and are shared (`Ranking._in_context`; OldRanking is held by OldRetriever as Retriever holds Ranking). Not used by zcord itself."""

from __future__ import annotations

import heapq
from typing import Any

from zcord.core.text import has_cjk, head_chars, match_form, stem_key, title_seq
from zcord.retrieval.ranking import (
    BM25_B,
    BM25_K1,
    BOTH_FIELDS,
    COMMON_FRACTION,
    COMMON_MIN_DF,
    DEFERRED_POOL,
    KEYWORD_ONLY,
    LONE_MAX_DF,
    PERSON_FACTOR,
    RERANK_POOL,
    Hit,
    Ranking,
    Term,
    idf,
)
from zcord.retrieval.recall import Retriever, _straddles


def _fill(local: dict[str, float], t_ids, k_ids, value: float, only: set[str] | None) -> None:
    both, kw = value * BOTH_FIELDS, value * KEYWORD_ONLY
    get = local.get
    if only is None:
        for i in t_ids:
            if get(i, 0.0) < value:
                local[i] = value
        for i in k_ids:
            v = both if i in t_ids else kw
            if get(i, 0.0) < v:
                local[i] = v
        return
    for ids in (t_ids, k_ids):
        for i in (ids if len(ids) < len(only) else only):
            if i in ids and i in only:
                v = both if i in t_ids and i in k_ids else (value if i in t_ids else kw)
                if get(i, 0.0) < v:
                    local[i] = v


class OldRanking(Ranking):
    """The old weighted ranking (held by OldRetriever)."""

    def _synonyms_under_word(self, per_class: dict, keyword_equality: bool, n: int, dfs=None) -> None:
        for cls, items in per_class.items():
            if len(cls) < 2:
                continue
            own: dict[str, float] = {}
            for k, (t, t_ids, k_ids, value, anchor) in enumerate(items):
                if t.shown == t.source:
                    continue
                cap = own.get(t.source)
                if cap is None:
                    cap = own[t.source] = idf(n, self._df(stem_key(t.source), keyword_equality))
                if value > cap * t.weight:
                    items[k] = (t, t_ids, k_ids, cap * t.weight, anchor)

    def _weighted(self, terms: list[Term], keyword_equality: bool, limit: int | None, explain: bool,
                  floor: bool, people: list[str] = (), greeting: bool = False) -> list[Hit]:
        st = self.state
        n = st.current_count
        if n == 0 or not terms:
            return []
        common = COMMON_FRACTION * idf(n, 1)
        empty: frozenset[str] = frozenset()
        # per term: title ids, keyword ids, value (idf × weight); grouped by class
        per_class: dict[frozenset[str], list[tuple[Term, Any, Any, float, bool]]] = {}
        for t in terms:
            t_ids = st.stem_hits(t.key)
            if len(t.key) == 1 and has_cjk(t.key):  # issue 37: a lone character heads a title's word
                if len(t_ids) > LONE_MAX_DF:
                    continue
                t_ids = {i for i in t_ids if t.key in head_chars(match_form(self.state.nodes[i].title))}
            k_ids = (st.keyword_stem_ids(t.key) or empty) if keyword_equality else empty
            df = len(t_ids) + (len(k_ids) - len(k_ids & t_ids) if k_ids else 0)
            if df == 0:
                continue
            value = idf(n, df) * t.weight
            # a term that is some memory's whole title (a person's name) is never "common"
            anchor = not floor or (not t.light and (df <= COMMON_MIN_DF or idf(n, df) >= common
                                                    or st.is_stem_title(t.key)))
            per_class.setdefault(t.cls, []).append((t, t_ids, k_ids, value, anchor))
        if not per_class:
            return []
        if floor and not any(a and not t.weak for items in per_class.values() for t, *_, a in items):
            # issue 37: a question with weak evidence only is anchored by its common words too
            for items in per_class.values():
                for k, (t, t_ids, k_ids, value, a) in enumerate(items):
                    if not a and t.asked and not t.light and not t.weak:
                        items[k] = (t, t_ids, k_ids, value, True)
        self._synonyms_under_word(per_class, keyword_equality, n)
        contrib: dict[frozenset[str], dict[str, float]] = {}
        anchored: set[str] = set()
        deferred = []
        for cls, items in per_class.items():
            local = contrib.setdefault(cls, {})
            for _t, t_ids, k_ids, value, anchor in items:
                if anchor:
                    _fill(local, t_ids, k_ids, value, None)
                    anchored.update(t_ids)
                    anchored.update(k_ids)
                else:
                    deferred.append((local, t_ids, k_ids, value))
        if not anchored:
            return []
        if greeting and floor:
            anchors = {t.key for items in per_class.values() for t, *_, anchor in items if anchor}
            if anchors <= set(self.named_people(terms).values()):
                return []  # "Hi Sam!", "thanks, Caroline": addressed, not asked about
        index = st.index
        k1 = BM25_K1
        a, c = 1 + k1 * (1 - BM25_B), k1 * BM25_B / st.avg_title_len

        def length_norm(i: str) -> float:
            return (k1 + 1) / (a + c * index[i].title_len)

        scores: dict[str, float] = dict.fromkeys(anchored, 0.0)
        for local in contrib.values():
            for i, v in local.items():
                if i in scores:
                    scores[i] += v
        final = {i: s * (k1 + 1) / (a + c * index[i].title_len) for i, s in scores.items()}
        # common and light terms only reorder the best candidates of the rare ones
        if deferred:
            if len(final) > DEFERRED_POOL:
                keep = set(heapq.nlargest(DEFERRED_POOL, final, key=final.__getitem__))
            else:
                keep = anchored
            before = {id(local): dict(local) for local, *_ in deferred}
            for local, t_ids, k_ids, value in deferred:
                _fill(local, t_ids, k_ids, value, keep)
            for local, *_ in deferred:
                old = before.pop(id(local), None)
                if old is None:
                    continue
                for i, v in local.items():
                    if i in keep:
                        gain = v - old.get(i, 0.0)
                        if gain:
                            final[i] += gain * length_norm(i)
        # memories under a person the batch names rank ahead of equal evidence elsewhere (their
        # scores count PERSON_FACTOR times): a person's facts before their own node, whose
        # summary the bot can read by the person's name
        scoped: dict[str, str] = {}
        if PERSON_FACTOR != 1.0:
            named = self.named_people(terms, people)
            if named:
                scoped = {i: top for i, top in self._scoped(named).items() if i in final}
                for i in scoped:
                    final[i] *= PERSON_FACTOR
        pool_size = max(RERANK_POOL, (limit or 0) * 3)
        pool = heapq.nlargest(pool_size, final, key=final.__getitem__) if len(final) > pool_size else list(final)
        return self._in_context(pool, final, per_class, contrib, scoped, limit, explain, length_norm)

class OldRetriever(Retriever):
    """A Retriever whose weighted ranking and synonym scan are the old ones."""

    ranking_class = OldRanking

    def _terms_in(self, norm: str, words: tuple[str, ...] | None = None) -> list[str]:
        terms = self._cjk_terms
        starts: dict[str, tuple[int, ...]] = {}
        for term in terms:
            starts[term[0]] = tuple(sorted({*starts.get(term[0], ()), len(term)}))
        found: dict[str, None] = {}
        joined = None
        for i, ch in enumerate(norm):
            lengths = starts.get(ch)
            if lengths is None:
                continue
            for n in lengths:
                piece = norm[i:i + n]
                if len(piece) == n and piece in terms and piece not in found:
                    if words is not None and piece not in words:
                        if joined is None:
                            joined = "\x00".join(words)
                        if piece in joined:
                            continue  # part of a longer word of the cut
                        if n > 1 and _straddles(piece, words):
                            continue
                    found[piece] = None
        if self._latin_scan:
            self._latin_scan.scan(title_seq(norm), found)
        return list(found)
