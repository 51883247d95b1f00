"""Ranking: which current memories a list of terms hits, best first (SPEC §3.3).

Seed mode counts the distinct terms that hit a memory's title or an equal keyword. Weighted
mode is BM25 over titles and keywords with synonym classes counted once and the parents'
titles as context (`Ranking._weighted`). Retriever (zcord.retrieval.recall) takes the terms
out of the messages; this module scores them.
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Literal, NamedTuple, TypeAlias, cast

from ..core.indexes import RetrievalIndexes
from ..core.state import MemoryState
from ..core.text import has_cjk, head_chars, latin_words, normalize, stem_key, term_key

_ID_PARTS = re.compile(r"^(.*?)(\d*)$")


def id_order(node_id: str) -> tuple[str, int, str]:
    """Natural order of ids: m9 before m10."""
    m = _ID_PARTS.match(node_id)
    prefix, digits = (m.group(1), m.group(2)) if m else (node_id, "")
    return (prefix, int(digits) if digits else -1, node_id)


@dataclass
class Term:
    """One expanded term of a text, as ranking sees it."""

    key: str                 # comparison key (text.term_key)
    shown: str               # the normalized term, as explain lists it
    source: str              # the message word it came from
    weight: float            # recency of the message it came from, lower for a synonym
    light: bool              # chat filler: may add to a score, never makes a hit alone
    cls: frozenset[str]      # its synonym class (itself alone when it has none)
    weak: bool = False       # a lone character, a compound's part or a kind: never the only strong evidence
    asked: bool = False      # from a message that asks something (a question): its common words may anchor


RankingMode: TypeAlias = Literal["seed", "weighted"]
"""How recall ranks (config recallRanking; SPEC §3.3): seed counts the distinct terms a memory
is hit by, weighted is BM25 with synonym classes and the parents' titles as context."""

Where: TypeAlias = Literal["title", "keyword", "title+keyword", "parent", "ancestor"]


class Match(NamedTuple):
    """What a weighted hit's best term of one synonym class was (explain mode)."""

    key: str         # the term's comparison key
    where: Where     # where it matched: the memory's own title or keyword, or a parent's title
    weight: float    # what it added to the score


@dataclass
class Hit:
    id: str
    score: float
    terms: list[str]  # explain mode: the keys of the terms that hit it (else empty)
    person: str | None = None  # the named person node it lies under (weighted: PERSON_FACTOR applied)
    matches: list[Match] = field(default_factory=list)  # weighted explain mode: per class, its best match


# Weighted ranking (SPEC §3.3 "weighted"): BM25 over titles and keywords, one title per
# memory, a synonym class counted once per memory, plus the memory's parents' titles as
# context. The constants were tuned on bench/recall_eval's dev split (see bench/RESULTS.md).
BM25_K1 = 1.2
BM25_B = 0.5
SYNONYM_WEIGHT = 0.8        # an expanded term weighs less than the word itself
LIGHT_WEIGHT = 0.5          # chat filler counts for half
BOTH_FIELDS = 1.25          # hit by title and by an equal keyword
KEYWORD_ONLY = 1.0
PARENT_WEIGHT = 0.4         # a term in the parent's title, for a memory hit by others
ANCESTOR_DEPTH = 2
COMMON_FRACTION = 0.35      # a term whose idf is under this share of the rarest term's is "common"
COMMON_MIN_DF = 5           # … and that hits more memories than this (small Memories have no common terms)
RECENCY_DECAY = 0.8         # earlier messages of a batch weigh less: 1, 0.8, 0.64, …
RECENCY_MIN = 0.3
RERANK_POOL = 60
DEFERRED_POOL = 1000        # candidates that common terms may still reorder
SINGLE_WEIGHT = 0.5         # a lone CJK character (腿, 鸟) is a weak term
PART_WEIGHT = 0.6           # the part a compound is about (花生 of 花生酱, 医院 of 宠物医院)
KIND_WEIGHT = 0.5           # a kind of a category word of the message (洗衣机 for 家电): below a synonym
LONE_MAX_DF = 3000          # a lone character in more titles than this is no evidence
HEADS_KEPT = 50_000         # memories whose title's head characters are kept
LONE_KEPT = 200_000         # ids held in all by the kept hits of lone characters
MESSAGE_HMM = False         # jieba's guesses for unknown words in messages (keywords know them already)
PERSON_FACTOR = 1.5         # a memory under a person node the batch names (or its sender's) counts this much more
PERSON_SUBTREE = 5000       # at most this many memories under one named node are looked at
BOUNDED_FROM = 10           # with more than this many times the pool's size of candidates, score only those that can reach it


def _fill(local: dict[str, float], t_ids: AbstractSet[str], k_ids: AbstractSet[str], value: float,
          shared: AbstractSet[str] | None = None) -> None:
    """Raise local[i] to what this term is worth to each node it hits (title, equal
    keyword, or both); `shared`: k_ids & t_ids when the caller has it."""
    both, kw = value * BOTH_FIELDS, value * KEYWORD_ONLY
    if not local and 0.0 < value <= both and 0.0 < kw <= both:
        # the usual case, a class's first term: every value set at once, in C
        local.update(dict.fromkeys(t_ids, value))
        if k_ids:
            if shared is None:
                shared = k_ids & t_ids
            local.update(dict.fromkeys(k_ids - shared if shared else k_ids, kw))
            if shared:
                local.update(dict.fromkeys(shared, both))
        return
    get = local.get
    for i in t_ids:
        if get(i, 0.0) < value:
            local[i] = value
    for i in k_ids:
        v = both if i in t_ids else kw
        if get(i, 0.0) < v:
            local[i] = v


def _fill_within(local: dict[str, float], t_ids: AbstractSet[str], k_ids: AbstractSet[str] | None, value: float,
                 only: set[str],
                 old: dict[str, float]) -> None:
    """`_fill` for the nodes in `only` alone, noting in `old` what each raised value was
    before its first raise."""
    both, kw = value * BOTH_FIELDS, value * KEYWORD_ONLY
    in_t = only & t_ids if t_ids else t_ids
    in_k = only & k_ids if k_ids else k_ids
    if in_t and in_k:
        in_both = in_t & in_k
        parts: tuple[tuple[Any, float], ...] = \
            ((in_t - in_both, value), (in_k - in_both, kw), (in_both, both)) if in_both else \
            ((in_t, value), (in_k, kw))
    else:
        parts = ((in_t, value),) if in_t else ((in_k, kw),)
    for ids, v in parts:
        if not ids:
            continue
        if v > 0.0:  # the ids not in local yet: raised from 0 at once, in C
            new = ids.difference(local)
            if new:
                local.update(dict.fromkeys(new, v))
                old.update(dict.fromkeys(new, 0.0))  # never raised before: not in local
                if len(new) == len(ids):
                    continue
                ids = ids.difference(new)
        for i in ids:
            was = local.get(i, 0.0)
            if was < v:
                if i not in old:
                    old[i] = was
                local[i] = v


def _best(scores: dict[str, float], k: int) -> list[str]:
    """The ids heapq.nlargest(k, scores, key=scores.__getitem__) picks (on equal scores the
    earlier in the dict's order), in no particular order; faster than it in both cases."""
    if len(scores) <= k:
        return list(scores)
    if len(scores) <= 8 * k:
        return sorted(scores, key=scores.__getitem__, reverse=True)[:k]
    least = heapq.nlargest(k, scores.values())[-1]
    out = [i for i, s in scores.items() if s > least]
    if len(out) < k:
        out += [i for i, s in scores.items() if s == least][:k - len(out)]
    return out


def idf(n: int, df: int) -> float:
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


Anchors: TypeAlias = list[tuple[Term, Any, Any, float]]  # a class's anchor terms: term, title ids, keyword ids, value


class _Bounded:
    """The final scores `_weighted` works out for the anchored ids, for only those that can be
    among the best `cut` (and the memories under a named person), and the pools picked from
    them as from every score.

    A question's common words anchor too (issue 37): 提到 or 考试 may hit half of a large
    Memory, and a value and a score for each of those ids cost 90 ms a batch at 100,000
    memories. Here the classes' values (`contrib`) are filled for the ids scored only: first
    those hit by two classes or more, then the ids hit by one class alone by groups (per class:
    the ids its terms hit in title and keyword both, then the rest), a group's best possible
    score being its highest value over the length factor of the shortest title (1). Once `cut`
    scored ids score more than the best possible of every group left, the ids left can
    neither enter the pools (`DEFERRED_POOL`, the rerank pool) nor tie at their edges: the
    deferred terms raise values of the first pool's ids only, the person factor those of the
    ids under a named person, all scored. Ties at a pool's edge go to the id earlier in the
    anchored set's order, as `_best` over every score gives them (`best`)."""

    def __init__(self, anchored: set[str], classes: list[tuple[dict[str, float], Anchors]],
                 shared_of: dict[str, Any], bm25: tuple[dict[str, Any], float, float, float],
                 hide: AbstractSet[str] = frozenset()) -> None:
        self.anchored = anchored
        self.hide = hide  # ids never scored (another session's private memories): as if not anchored
        self.classes = classes  # per class with anchors: its values (empty so far), its anchors
        self.shared_of = shared_of
        self.index, self.k1, self.a, self.c = bm25

    def _fill(self, ids: set[str], local: dict[str, float], hit: Anchors) -> dict[str, float]:
        """The values a class's anchors give the ids `ids` (what `_fill` over all of them
        leaves there), added to the class's values `local`."""
        part: dict[str, float] = {}
        for t, t_ids, k_ids, value in hit:
            shared = self.shared_of.get(t.key) if k_ids else None
            _fill(part, ids.intersection(t_ids), ids.intersection(k_ids) if k_ids else k_ids, value,
                  None if shared is None else ids.intersection(shared))
        local.update(part)
        return part

    def _groups(self, multi: set[str], local: dict[str, float], hit: Anchors) -> list[tuple[float, set[str]]]:
        """The ids a class alone hits, as (best value, ids): those hit in title and keyword
        both by one of its terms, then the rest."""
        shared: set[str] = set()
        for t, _t_ids, k_ids, _value in hit:
            if k_ids:
                shared.update(self.shared_of.get(t.key) or ())
        alone: set[str] = set()
        for _t, t_ids, k_ids, _value in hit:
            alone.update(t_ids)
            alone.update(k_ids)
        alone -= multi
        both = alone & shared
        alone -= both
        return [(top, ids) for top, ids in zip(self._tops(hit), (both, alone)) if ids]

    @staticmethod
    def _tops(hit: Anchors) -> tuple[float, float]:
        """The most a class's value can be for an id any of its terms hits in title and
        keyword both, and for any other id."""
        plain_top = both_top = 0.0
        for _t, _t_ids, k_ids, value in hit:
            plain = max(value, value * KEYWORD_ONLY) if k_ids else value
            plain_top = max(plain_top, plain)
            both_top = max(both_top, plain, value * BOTH_FIELDS if k_ids else value)
        return both_top, plain_top

    def finals(self, multi: set[str], under: dict[str, str], cut: int) -> dict[str, float]:
        """The final scores of the ids that can reach the best `cut`, of the ids under a named
        person, and perhaps of some more (in no particular order)."""
        index, k1, a, c = self.index, self.k1, self.a, self.c
        first = multi | under.keys() & self.anchored
        if self.hide:
            first -= self.hide
        for local, hit in self.classes:
            self._fill(first, local, hit)
        # as _weighted sums them: 0.0, then each class's value in the classes' order
        scores = dict.fromkeys(first, 0.0)
        for local, _hit in self.classes:
            for i, v in local.items():
                scores[i] += v
        scored = {i: s * (k1 + 1) / (a + c * index[i].title_len) for i, s in scores.items()}
        # per class, its two groups' best values: the sets are made when they must be scored
        bounds = sorted(((top, k, which) for k, (_local, hit) in enumerate(self.classes)
                         for which, top in enumerate(self._tops(hit))), reverse=True)
        done: set[int] = set()
        least: float | None = None  # the cut-th best score so far (None: not worked out since the last group)
        for top, k, _which in bounds:
            if k in done:
                continue
            if len(scored) >= cut:
                if least is None:
                    least = heapq.nlargest(cut, scored.values())[-1]
                # the best a group's id can score: its best value over the length factor of a
                # title of length 1 (NodeIndex.title_len is at least 1)
                if least > top * (k1 + 1) / (a + c):
                    break
            done.add(k)  # both groups of the class at once: their sets come together
            local, hit = self.classes[k]
            for _top, ids in self._groups(multi, local, hit):
                ids -= first  # the memories under a named person are scored already
                if self.hide:
                    ids -= self.hide
                part = self._fill(ids, local, hit)
                scored.update({i: (0.0 + v) * (k1 + 1) / (a + c * index[i].title_len) for i, v in part.items()})
            least = None
        if len(scored) <= cut:
            return scored
        if least is None:
            least = heapq.nlargest(cut, scored.values())[-1]
        # below the best `cut` an id never enters a pool, unless the person factor raises it
        return {i: s for i, s in scored.items() if s >= least or i in under}

    def best(self, final: dict[str, float], k: int) -> list[str]:
        """What `_best` gives over every anchored id's score in the anchored set's order, from
        the scores `finals` gave (raised since)."""
        if len(final) <= k:
            return list(final)
        least = heapq.nlargest(k, final.values())[-1]
        out = [i for i, s in final.items() if s > least]
        tied = {i for i, s in final.items() if s == least}
        if len(out) + len(tied) <= k:
            return out + list(tied)
        # more ties than room: the earlier in the anchored set's order, as `_best` takes them
        out += islice(filter(tied.__contains__, self.anchored), k - len(out))
        return out


class TitleHeads:
    """Which titles a lone CJK character heads a word of (a part of Ranking, `heads`), with
    what was found kept: each title's head characters by id, and each character's titles
    for the indexes' generation."""

    def __init__(self) -> None:
        self.heads_of: dict[str, tuple[str, str]] = {}  # id -> (its title, head_chars)
        self.lone: dict[str, tuple[Any, int, AbstractSet[str]]] = {}  # character -> (indexes, generation, ids)
        self.lone_ids = 0  # ids held by lone

    def title_ids(self, ix: RetrievalIndexes, key: str, t_ids: AbstractSet[str]) -> AbstractSet[str]:
        """The memories whose titles a weighted key hits: a lone CJK character only where it is
        a word of the title's cut or ends one (鸟 of 画眉鸟, 烟 of 戒烟), never where it begins
        or modifies one (干 of 干净); other keys wherever stem_hits finds them. A lone
        character in more than LONE_MAX_DF titles hits none."""
        if len(key) != 1 or not t_ids or not has_cjk(key):
            return t_ids
        if len(t_ids) > LONE_MAX_DF:
            return frozenset()
        kept_for = self.lone.get(key)
        if kept_for is not None and kept_for[0] is ix and kept_for[1] == ix.generation:
            return kept_for[2]  # no title changed since
        index = ix.index
        heads = self.heads_of
        if len(heads) > HEADS_KEPT:
            heads.clear()
        out = set()
        for i in t_ids:
            title = index[i].norm_title
            kept = heads.get(i)
            if kept is None or kept[0] is not title:  # a new or retitled memory
                kept = heads[i] = (title, head_chars(title))
            if key in kept[1]:
                out.add(i)
        if self.lone_ids + len(out) > LONE_KEPT:
            self.lone.clear()
            self.lone_ids = 0
        old = self.lone.get(key)
        self.lone[key] = (ix, ix.generation, out)
        self.lone_ids += len(out) - (len(old[2]) if old is not None else 0)
        return out


class NamedPeople:
    """The person nodes a batch names, and the memories under them (a part of Ranking,
    `people`): weighted recall ranks a named person's memories first."""

    def named(self, st: MemoryState, terms: list[Term], people: Iterable[str] = ()) -> dict[str, str]:
        """The person nodes a batch names, each with the key of the term that named it ("" for
        a speaker): a node whose
        whole title is a term of the batch (`Caroline`, `小李`) and has memories under it, the
        person node linked to a relationship whose name, an alias or a Latin name's first word
        is a term, and the linked person node of each speaker (`people`: personIds)."""
        ix = st.indexes
        keys = {t.key for t in terms if not t.light and t.key}
        named: dict[str, str] = {}
        for key in keys:
            for i in (ix.title_keys if has_cjk(key) else ix.title_stem_keys).get(key) or ():
                if st.children.get(i):
                    named.setdefault(i, key)
        rels = st.relationships
        for node_id, pids in st.links.items():
            if node_id in named:
                continue
            for pid in pids:
                rel = rels.get(pid)
                if rel is None:
                    continue
                names = [rel.name, *rel.aliases]
                first = latin_words(normalize(rel.name))
                if len(first) > 1:
                    names.append(first[0])
                hit = next((k for k in map(stem_key, names) if k in keys), None)
                if hit is not None:
                    named[node_id] = hit
                    break
        for pid in people:
            rel = rels.get(pid)
            if rel is not None and rel.memory_node_id is not None:
                named.setdefault(rel.memory_node_id, "")
        return {i: n for i, n in named.items() if i in st.nodes and st.nodes[i].superseded_by is None}

    def scoped(self, st: MemoryState, named: dict[str, str]) -> dict[str, str]:
        """Memory id -> the named person node it lies under (at any depth; at most
        PERSON_SUBTREE memories under each)."""
        children = st.children
        out: dict[str, str] = {}
        for top in named:
            todo = list(children.get(top, ()))
            seen = 0
            while todo and seen < PERSON_SUBTREE:
                i = todo.pop()
                seen += 1
                out.setdefault(i, top)
                todo.extend(children.get(i, ()))
        return out


class SeedRanking:
    """The seed mode of Ranking (a part of it, `seed`): the memories hit by the most terms."""

    def __init__(self, state_ref: Callable[[], MemoryState]) -> None:
        self._state_ref = state_ref

    def hits(self, terms: list[str], keyword_equality: bool, limit: int | None, explain: bool,
             hide: AbstractSet[str] = frozenset()) -> list[Hit]:
        """Score = the number of distinct terms that hit the node (title or equal keyword),
        ties by updatedAt desc, id asc."""
        st = self._state_ref()
        ix = st.indexes
        title_hits, keyword_ids = ix.title_hits, ix.keyword_ids
        counts: Counter[str] = Counter()
        matched: dict[str, list[str]] = {}
        for term in terms:
            ids = title_hits(term)
            counts.update(ids)
            extra = keyword_ids.get(term) if keyword_equality else None
            if extra:
                extra = extra - ids  # a node hit by title and keyword counts once
                counts.update(extra)
            if explain:
                for i in (ids | extra) if extra else ids:
                    matched.setdefault(i, []).append(term)
        for i in hide:
            counts.pop(i, None)
        out: list[Hit] = []
        index, nodes = ix.index, st.nodes

        def key(i: str) -> tuple[float, tuple[str, int, str]]:
            return (-index[i].updated, id_order(i))

        # rank score groups from the top; usually the first one or two fill the quota
        for score in sorted(set(counts.values()), reverse=True):
            group = [i for i, c in counts.items() if c == score and nodes[i].superseded_by is None]
            room = None if limit is None else limit - len(out)
            ranked = sorted(group, key=key) if room is None or len(group) <= room else \
                heapq.nsmallest(room, group, key=key)
            out += [Hit(i, score, matched.get(i, [])) for i in ranked]
            if limit is not None and len(out) >= limit:
                break
        return out


class Ranking:
    """Retriever's scoring side (held by it as `ranking`): `hits` and the two ranking modes.

    Needs the current state (`state_ref()`, read anew for each call: a restore replaces it)
    and the synonym class of a term (`class_of`, for terms given as plain strings)."""

    def __init__(self, state_ref: Callable[[], MemoryState], class_of: Callable[[str], frozenset[str]]) -> None:
        self._state_ref = state_ref
        self.class_of = class_of
        self.heads = TitleHeads()
        self.people = NamedPeople()
        self.seed = SeedRanking(state_ref)

    @property
    def state(self) -> MemoryState:
        return self._state_ref()

    def hits(self, terms: list[str] | list[Term], keyword_equality: bool, limit: int | None = None,
             explain: bool = False, mode: RankingMode = "seed", floor: bool = True, people: Iterable[str] = (),
             greeting: bool = False, hide: AbstractSet[str] = frozenset()) -> list[Hit]:
        """Current nodes hit by the terms, best first (never one of `hide`).

        Seed: score = the number of distinct terms that hit the node (title or equal keyword),
        ties by updatedAt desc, id asc. Weighted: see `_weighted`; `people` (personIds of the
        batch's speakers) name person nodes as the terms do; with `greeting` (the batch greets,
        thanks or says goodbye) and `floor`, a batch whose only evidence is the names of
        people it addresses ("Hi Sam!") recalls nothing.
        """
        ix = self.state.indexes
        ix.ensure_index()
        if mode == "weighted":
            ix.ensure_stems()
            if terms and isinstance(terms[0], str):
                weighted = [Term(stem_key(t), normalize(t), normalize(t), 1.0, False, self.class_of(normalize(t)))
                            for t in terms]
            else:
                weighted = cast("list[Term]", terms)
            if hide:
                return self._weighted(weighted, keyword_equality, limit, explain, floor, list(people), greeting, hide)
            return self._weighted(weighted, keyword_equality, limit, explain, floor, list(people), greeting)
        keys = list(dict.fromkeys(k for k in (t.key if isinstance(t, Term) else term_key(t) for t in terms) if k))
        return self.seed.hits(keys, keyword_equality, limit, explain, hide) if hide else \
            self.seed.hits(keys, keyword_equality, limit, explain)

    def _df(self, key: str, keyword_equality: bool) -> int:
        """How many current memories a weighted recall key hits."""
        ix = self.state.indexes
        t_ids = self.heads.title_ids(ix, key, ix.stem_hits(key))
        k_ids = ix.keyword_stem_ids(key) if keyword_equality else None
        return len(t_ids) + (len(k_ids) - len(k_ids & t_ids) if k_ids else 0)

    def _synonyms_under_word(self, per_class: dict[frozenset[str], list[Any]], keyword_equality: bool, n: int, dfs: dict[str, int]) -> None:
        """A synonym never outweighs the word it came from: an expanded term's value is at
        most the word's own rarity times the term's weight (`dogs` → `doggy`, found in one
        memory, once scored 4.5 against `dog`'s 1.0). Weighing each class by the rarity of
        all its terms together scored the same on bench/recall_eval; the cap keeps the word's
        own weight. `dfs`: the df of the keys `_weighted` has looked up already."""
        for cls, items in per_class.items():
            if len(cls) < 2:
                continue
            own: dict[str, float] = {}
            for k, (t, t_ids, k_ids, value, anchor) in enumerate(items):
                if t.shown == t.source:
                    continue
                cap = own.get(t.source)
                if cap is None:
                    key = stem_key(t.source)
                    df = dfs.get(key)
                    cap = own[t.source] = idf(n, self._df(key, keyword_equality) if df is None else df)
                if value > cap * t.weight:
                    items[k] = (t, t_ids, k_ids, cap * t.weight, anchor)

    def named_people(self, terms: list[Term], people: Iterable[str] = ()) -> dict[str, str]:
        """The person nodes a batch names (NamedPeople.named)."""
        return self.people.named(self.state, terms, people)

    def _scoped(self, named: dict[str, str]) -> dict[str, str]:
        """Memory id -> the named person node it lies under (NamedPeople.scoped)."""
        return self.people.scoped(self.state, named)

    def _weighted(self, terms: list[Term], keyword_equality: bool, limit: int | None, explain: bool,
                  floor: bool, people: Iterable[str] = (), greeting: bool = False,
                  hide: AbstractSet[str] = frozenset()) -> list[Hit]:
        """BM25 over titles (and keywords): each term weighs by its rarity among current
        memories; a synonym class counts once per memory (its best term); a title shorter
        than average counts a little more. With `floor`, a memory must be hit by at least
        one term that is neither chat filler nor common (or by its whole title: a person
        node "Caroline" for "Caroline"), so small talk recalls nothing. Then the titles of a
        memory's parents add context for the terms it lacks (Caroline's facts rank above
        Melanie's for a question about Caroline)."""
        ix = self.state.indexes
        n = ix.current_count
        if n == 0 or not terms:
            return []
        common = COMMON_FRACTION * idf(n, 1)
        empty: frozenset[str] = frozenset()
        # per term: title ids, keyword ids, value (idf × weight); grouped by class
        per_class: dict[frozenset[str], list[tuple[Term, Any, Any, float, bool]]] = {}
        dfs: dict[str, int] = {}  # key -> df
        shared_of: dict[str, Any] = {}  # key -> the ids hit by title and keyword both
        stem_hits, keyword_ids, is_title = ix.stem_hits, ix.keyword_stem_ids, ix.is_stem_title
        for t in terms:
            key = t.key
            t_ids = stem_hits(key)
            if len(key) == 1 and t_ids and has_cjk(key):
                if len(t_ids) > LONE_MAX_DF:
                    continue
                t_ids = self.heads.title_ids(ix, key, t_ids)
            k_ids = (keyword_ids(key) or empty) if keyword_equality else empty
            if k_ids:
                shared = shared_of[key] = k_ids & t_ids
                df = dfs[key] = len(t_ids) + len(k_ids) - len(shared)
            else:
                df = dfs[key] = len(t_ids)
            if df == 0:
                continue
            rarity = idf(n, df)
            # a term that is some memory's whole title (a person's name) is never "common"
            anchor = not floor or (not t.light and (df <= COMMON_MIN_DF or rarity >= common or is_title(key)))
            per_class.setdefault(t.cls, []).append((t, t_ids, k_ids, rarity * t.weight, anchor))
        if not per_class:
            return []
        if floor and not any(anchor and not t.weak for items in per_class.values() for t, *_, anchor in items):
            # only weak evidence (a lone character, a compound's part, a kind) or none: the
            # common words of a question anchor too, for they are what it asks about
            # ("这个公园叫什么名字", where 公园 is what half the Memory is about); small talk
            # that asks nothing keeps recalling nothing
            for items in per_class.values():
                for k, (t, t_ids, k_ids, value, anchor) in enumerate(items):
                    if not anchor and t.asked and not t.light and not t.weak:
                        items[k] = (t, t_ids, k_ids, value, True)
        self._synonyms_under_word(per_class, keyword_equality, n, dfs)
        contrib: dict[frozenset[str], dict[str, float]] = {}
        anchored: set[str] = set()
        deferred = []
        pool_size = max(RERANK_POOL, (limit or 0) * 3)
        cut = max(pool_size, DEFERRED_POOL) if any(not anchor for items in per_class.values()
                                                   for *_, anchor in items) else pool_size
        # many anchored candidates (a question's common words): values filled later, for the
        # candidates that can reach the pools only (`_Bounded`)
        lazy = sum(len(t_ids) + len(k_ids) for items in per_class.values()
                   for _t, t_ids, k_ids, value, anchor in items if anchor) > BOUNDED_FROM * cut and \
            all(value > 0.0 for items in per_class.values() for *_, value, anchor in items if anchor)
        classes: list[tuple[dict[str, float], Anchors]] = []  # lazy: per class with anchors, its values and anchors
        multi: set[str] = set()  # lazy: the ids anchored by two classes or more
        for cls, items in per_class.items():
            local = contrib.setdefault(cls, {})
            hit = [(t, t_ids, k_ids, value) for t, t_ids, k_ids, value, anchor in items if anchor]
            deferred += [(local, t_ids, k_ids, value) for _t, t_ids, k_ids, value, anchor in items if not anchor]
            if lazy and hit:
                if anchored:  # the ids earlier classes anchored already
                    for _t, t_ids, k_ids, _v in hit:
                        multi.update(anchored.intersection(t_ids))
                        if k_ids:
                            multi.update(anchored.intersection(k_ids))
                classes.append((local, hit))
            for t, t_ids, k_ids, value in hit:
                if not lazy:
                    _fill(local, t_ids, k_ids, value, shared_of.get(t.key))
                anchored.update(t_ids)
                anchored.update(k_ids)
        if not anchored:
            return []
        if greeting and floor:
            anchors = {t.key for items in per_class.values() for t, *_, anchor in items if anchor}
            if anchors <= set(self.named_people(terms).values()):
                return []  # "Hi Sam!", "thanks, Caroline": addressed, not asked about
        index = ix.index
        k1 = BM25_K1
        a, c = 1 + k1 * (1 - BM25_B), k1 * BM25_B / ix.avg_title_len

        norms: dict[float, float] = {}  # title length -> its BM25 length factor (a few lengths)

        def length_norm(i: str) -> float:
            length = index[i].title_len
            f = norms.get(length)
            if f is None:
                f = norms[length] = (k1 + 1) / (a + c * length)
            return f

        # the memories under a person the batch names (their scores are raised below)
        named = self.named_people(terms, people) if PERSON_FACTOR != 1.0 else {}
        under = self._scoped(named) if named else {}
        bounded = _Bounded(anchored, classes, shared_of, (index, k1, a, c), hide) \
            if lazy and len(anchored) > BOUNDED_FROM * cut else None
        if bounded is not None:
            final = bounded.finals(multi, under, cut)
        else:
            for local, hit in classes:  # lazy, yet few candidates after all: every value
                for t, t_ids, k_ids, value in hit:
                    _fill(local, t_ids, k_ids, value, shared_of.get(t.key))
            # every id of a local is anchored here (only anchors have filled them so far); the
            # scores keep the anchored set's order, which decides between equal scores below
            scores: dict[str, float] = dict.fromkeys(anchored, 0.0)
            for local in contrib.values():
                for i, v in local.items():
                    scores[i] += v
            for i in hide:  # another session's private memories (zcord.service.scope)
                scores.pop(i, None)
            final = {i: s * (k1 + 1) / (a + c * index[i].title_len) for i, s in scores.items()}
        # common and light terms only reorder the best candidates of the rare ones
        if deferred:
            keep = set((_best if bounded is None else bounded.best)(final, DEFERRED_POOL)) \
                if len(anchored) > DEFERRED_POOL else (anchored - hide if hide else anchored)
            raised: dict[int, tuple[dict[str, float], dict[str, float]]] = {}  # per local: the values before
            for local, t_ids, k_ids, value in deferred:
                old = raised.setdefault(id(local), (local, {}))[1]
                _fill_within(local, t_ids, k_ids, value, keep, old)
            for local, old in raised.values():
                for i, was in old.items():
                    length = index[i].title_len
                    f = norms.get(length)
                    if f is None:
                        f = norms[length] = (k1 + 1) / (a + c * length)
                    final[i] += (local[i] - was) * f
        # memories under a person the batch names rank ahead of equal evidence elsewhere (their
        # scores count PERSON_FACTOR times): a person's facts before their own node, whose
        # summary the bot can read by the person's name
        scoped: dict[str, str] = {}
        if named:
            scoped = {i: top for i, top in under.items() if i in final}  # hidden ones are not in final
            for i in scoped:
                final[i] *= PERSON_FACTOR
        pool = (_best if bounded is None else bounded.best)(final, pool_size)
        return self._in_context(pool, final, per_class, contrib, scoped, limit, explain, length_norm)

    def _in_context(self, pool: list[str], final: dict[str, float], per_class: dict[frozenset[str], list[Any]],
                    contrib: dict[frozenset[str], dict[str, float]],
                    scoped: dict[str, str], limit: int | None, explain: bool,
                    length_norm: Callable[[str], float]) -> list[Hit]:
        """The pool's final order and hits: each memory's parents' titles add context for the
        classes it is not hit by itself (`final` raised in place); with `explain`, each
        class's best match and what it weighed."""
        st = self.state
        index = st.indexes.index
        # context from the parents' titles, for the classes a memory is not hit by itself
        if PARENT_WEIGHT:
            nodes = st.nodes
            chains: dict[str, list[str]] = {}
            for i in pool:
                chain: list[str] = []
                p = nodes[i].parent_id
                while p is not None and len(chain) < ANCESTOR_DEPTH:
                    chain.append(p)
                    p = nodes[p].parent_id
                chains[i] = chain
            ancestors = {p for chain in chains.values() for p in chain}
            best_at: dict[str, dict[frozenset[str], float]] = {}
            for cls, items in per_class.items():
                for _t, t_ids, _k, value, _a in items:
                    for p in ancestors if len(ancestors) < len(t_ids) else ancestors & t_ids:
                        if p in t_ids:
                            by_cls = best_at.setdefault(p, {})
                            if value > by_cls.get(cls, 0.0):
                                by_cls[cls] = value
            for i in pool:
                boost, used = 0.0, set()
                for depth, p in enumerate(chains[i], 1):
                    for cls, value in best_at.get(p, {}).items():
                        if cls not in used and i not in contrib[cls]:
                            used.add(cls)
                            boost += PARENT_WEIGHT * value / depth
                if boost:
                    final[i] += boost * length_norm(i)
        ranked = sorted(pool, key=lambda i: (-round(final[i], 9), -index[i].updated, id_order(i)))
        if limit is not None:
            ranked = ranked[:limit]
        out = []
        for i in ranked:
            matched: list[Match] = []
            if explain:
                ln = length_norm(i)
                parents: list[str] = []
                p = st.nodes[i].parent_id
                while p is not None and len(parents) < ANCESTOR_DEPTH:
                    parents.append(p)
                    p = st.nodes[p].parent_id
                for items in per_class.values():
                    best: Match | None = None
                    for t, t_ids, k_ids, value, _anchor in items:
                        in_t, in_k = i in t_ids, i in k_ids
                        if in_t or in_k:
                            v = value * (BOTH_FIELDS if in_t and in_k else (1.0 if in_t else KEYWORD_ONLY))
                            where: Where = "title+keyword" if in_t and in_k else ("title" if in_t else "keyword")
                            if best is None or v > best.weight:
                                best = Match(t.key, where, v)
                    if best is None:
                        for depth, parent in enumerate(parents, 1):
                            for t, t_ids, _k, value, _a in items:
                                if parent in t_ids and (best is None or PARENT_WEIGHT * value / depth > best.weight):
                                    best = Match(t.key, "parent" if depth == 1 else "ancestor",
                                                 PARENT_WEIGHT * value / depth)
                            if best is not None:
                                break
                    if best is not None:
                        factor = PERSON_FACTOR if i in scoped and best.where in ("title", "keyword", "title+keyword") \
                            else 1.0
                        matched.append(Match(best.key, best.where, round(best.weight * ln * factor, 4)))
            out.append(Hit(i, round(final[i], 4), [m.key for m in matched] if matched else [], scoped.get(i), matched))
        return out
