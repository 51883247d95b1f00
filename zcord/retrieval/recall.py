"""Auto-recall (SPEC §3.3): words of the incoming batch → synonym expansion → title and
keyword hits → a per-session recall set, and the context header rendered from it.

No LLM, nothing written to history, nothing persisted: recall sets live in this process.
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..core.errors import InvalidArgument
from ..core.state import MemoryState
from .synonyms import Synonyms
from ..core.text import add_user_words, analyse_cached, has_cjk, is_light, is_stopword, normalize, term_key, title_seq

RECALL_QUOTA = 10
SEARCH_CANDIDATES = 20

_ID_PARTS = re.compile(r"^(.*?)(\d*)$")


def id_order(node_id: str) -> tuple[str, int, str]:
    """Natural order of ids: m9 before m10."""
    m = _ID_PARTS.match(node_id)
    prefix, digits = (m.group(1), m.group(2)) if m else (node_id, "")
    return (prefix, int(digits) if digits else -1, node_id)


class Event(BaseModel):
    """One message envelope from the bot platform."""

    model_config = ConfigDict(extra="allow", frozen=True)
    text: str = Field(max_length=1_000_000)
    origin: Literal["external", "internal"]
    ts: str | int | float | None = None
    source: str | None = None
    sender_key: str | None = Field(None, alias="senderKey")


def parse_events(events: Any) -> list[Event]:
    if not isinstance(events, list):
        raise InvalidArgument("events must be an array of {text, origin, ts?, source?, senderKey?}",
                              field="events")
    out = []
    for i, ev in enumerate(events):
        try:
            out.append(Event.model_validate(ev))
        except ValidationError as e:
            first = e.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise InvalidArgument(f"events[{i}].{loc}: {first['msg']}" if loc else f"events[{i}]: {first['msg']}",
                                  field=f"events[{i}]") from None
    return out


@dataclass
class Hit:
    id: str
    score: float
    terms: list[str]


@dataclass
class Term:
    """One expanded term of a text, as ranking sees it."""

    key: str                 # comparison key (text.term_key)
    shown: str               # the normalized term, as explain lists it
    source: str              # the message word it came from
    weight: float            # recency of the message it came from, lower for a synonym
    light: bool              # chat filler: may add to a score, never makes a hit alone
    cls: frozenset[str]      # its synonym class (itself alone when it has none)


@dataclass
class Words:
    """What was taken from a text: its words, synonym terms found inside, their expansion."""

    segmented: list[str]
    synonym_terms: list[str]
    expanded: dict[str, str | None] = field(default_factory=dict)  # term -> the word it came from
    terms: list[Term] = field(default_factory=list)


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
MESSAGE_HMM = False         # jieba's guesses for unknown words in messages (keywords know them already)


def _fill(local: dict[str, float], t_ids, k_ids, value: float, only: set[str] | None) -> None:
    """Raise local[i] to what this term is worth to each node it hits (title, equal
    keyword, or both), for every node or only for those in `only`."""
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


def idf(n: int, df: int) -> float:
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


class Retriever:
    """Word matching over one MemoryState with one synonym table."""

    def __init__(self, state_ref, synonyms: Synonyms):
        self._state_ref = state_ref
        self.synonyms = synonyms
        self._taught_terms: object = None
        self._tables_for: object = None

    @property
    def state(self) -> MemoryState:
        return self._state_ref()

    def teach_jieba(self) -> None:
        """Make jieba keep every synonym term, node keyword and person's name whole."""
        st = self.state
        st.ensure_index()  # every node's keywords
        if self._taught_terms is not self.synonyms.classes:
            add_user_words(self.synonyms.classes.of)
            self._taught_terms = self.synonyms.classes
        if st.pending_words:
            words, st.pending_words[:] = list(st.pending_words), []
            add_user_words(words)

    def _tables(self) -> None:
        """Lookup tables over the synonym terms, rebuilt when the groups change."""
        classes = self.synonyms.classes
        if self._tables_for is classes:
            return
        starts: dict[str, set[int]] = {}
        latin: dict[tuple[str, ...], str] = {}
        by_key: dict[str, frozenset[str]] = {}
        for term, cls in classes.of.items():
            key = term_key(term)
            if not key:
                continue
            by_key.setdefault(key, cls)
            if has_cjk(term):
                starts.setdefault(term[0], set()).add(len(term))
            else:
                latin[tuple(key.split(" "))] = term
        self._starts = {ch: tuple(sorted(ls)) for ch, ls in starts.items()}
        self._latin_terms = latin
        self._latin_max = max((len(k) for k in latin), default=0)
        self._class_by_key = by_key
        self._tables_for = classes

    def class_of(self, term: str) -> frozenset[str]:
        """The synonym class of a normalized term (by its folded key for non-CJK words)."""
        self._tables()
        cls = self.synonyms.classes.of.get(term)
        if cls is None:
            cls = self._class_by_key.get(term_key(term))
        return cls if cls is not None else frozenset((term,))

    def words(self, texts: str | list[str], mode: str = "seed") -> Words:
        """The terms of a text, or of a batch of texts (oldest first: later ones weigh more).

        Seed mode takes jieba's dictionary words and every non-CJK whole word; weighted mode
        also keeps nicknames and unknown words jieba's HMM guesses, and drops function words.
        """
        self.teach_jieba()
        self._tables()
        if isinstance(texts, str):
            texts = [texts]
        weighted = mode == "weighted"
        n = len(texts)
        seen: dict[str, float] = {}  # word -> weight of its latest message
        found_all: dict[str, float] = {}
        singles: dict[str, float] = {}
        for i, text in enumerate(texts):
            w = max(RECENCY_MIN, RECENCY_DECAY ** (n - 1 - i)) if weighted else 1.0
            norm = normalize(text)
            words, lone = analyse_cached(norm, weighted, MESSAGE_HMM)
            for word in [*words, *self._mixed_keywords_in(norm)]:
                word = normalize(word)
                if weighted and is_stopword(word):
                    continue
                seen[word] = max(seen.get(word, 0.0), w)
            for term in self._terms_in(norm):
                if weighted and is_stopword(term):
                    continue
                found_all[term] = max(found_all.get(term, 0.0), w)
            if weighted and SINGLE_WEIGHT:
                for ch in lone:
                    singles[ch] = max(singles.get(ch, 0.0), w * SINGLE_WEIGHT)
        segmented = list(seen)
        found = list(found_all)
        expanded: dict[str, str | None] = {}
        terms: dict[str, Term] = {}
        for word, w in [*seen.items(), *found_all.items(), *singles.items()]:
            light = is_light(word)
            if word not in expanded:
                expanded[word] = None
            cls = self.class_of(word)
            for t in (word, *sorted(cls - {word})):
                if t != word:
                    expanded.setdefault(t, word)
                key = term_key(t)
                if not key:
                    continue
                weight = w * (1.0 if t == word else SYNONYM_WEIGHT) * (LIGHT_WEIGHT if light else 1.0)
                old = terms.get(key)
                if old is None or weight > old.weight:
                    terms[key] = Term(key, t, word, weight, light or is_light(t), cls)
        return Words(segmented, found, expanded, list(terms.values()))

    def _terms_in(self, norm: str) -> list[str]:
        """Synonym terms found in the text, in order: CJK-bearing ones as substrings, others
        as whole folded words in a row."""
        terms = self.synonyms.classes.of
        found: dict[str, None] = {}
        starts = self._starts
        for i, ch in enumerate(norm):
            lengths = starts.get(ch)
            if lengths is None:
                continue
            for n in lengths:
                piece = norm[i:i + n]
                if len(piece) == n and piece in terms:
                    found[piece] = None
        if self._latin_max:
            seq = title_seq(norm)
            for i in range(len(seq)):
                for n in range(1, self._latin_max + 1):
                    piece = seq[i:i + n]
                    if len(piece) < n or None in piece:
                        break
                    term = self._latin_terms.get(piece)
                    if term is not None:
                        found[term] = None
        return list(found)

    def _mixed_keywords_in(self, norm: str) -> list[str]:
        """Keywords holding CJK and other letters (ktv包厢), which no cut of the text keeps
        whole: found as substrings and taken as words of the text."""
        return [kw for kw in self.state.mixed_keywords if kw in norm]

    def hits(self, terms: list[str] | list[Term], keyword_equality: bool, limit: int | None = None,
             explain: bool = False, mode: str = "seed", floor: bool = True) -> list[Hit]:
        """Current nodes hit by the terms, best first.

        Seed: score = the number of distinct terms that hit the node (title or equal keyword),
        ties by updatedAt desc, id asc. Weighted: see `_weighted`.
        """
        self.state.ensure_index()
        if mode == "weighted":
            if terms and isinstance(terms[0], str):
                terms = [Term(term_key(t), normalize(t), normalize(t), 1.0, False, self.class_of(normalize(t)))
                         for t in terms]
            return self._weighted(terms, keyword_equality, limit, explain, floor)
        keys = list(dict.fromkeys(k for k in (t.key if isinstance(t, Term) else term_key(t) for t in terms) if k))
        return self._seed(keys, keyword_equality, limit, explain)

    def _seed(self, terms: list[str], keyword_equality: bool, limit: int | None, explain: bool) -> list[Hit]:
        st = self.state
        counts: Counter[str] = Counter()
        matched: dict[str, list[str]] = {}
        for term in terms:
            ids = st.title_hits(term)
            counts.update(ids)
            extra = st.keyword_ids.get(term) if keyword_equality else None
            if extra:
                extra = extra - ids  # a node hit by title and keyword counts once
                counts.update(extra)
            if explain:
                for i in (ids | extra) if extra else ids:
                    matched.setdefault(i, []).append(term)
        out: list[Hit] = []

        def key(i: str):
            return (-st.index[i].updated, id_order(i))

        # rank score groups from the top; usually the first one or two fill the quota
        for score in sorted(set(counts.values()), reverse=True):
            group = [i for i, c in counts.items() if c == score and st.nodes[i].superseded_by is None]
            room = None if limit is None else limit - len(out)
            ranked = sorted(group, key=key) if room is None or len(group) <= room else \
                heapq.nsmallest(room, group, key=key)
            out += [Hit(i, score, matched.get(i, [])) for i in ranked]
            if limit is not None and len(out) >= limit:
                break
        return out

    def _weighted(self, terms: list[Term], keyword_equality: bool, limit: int | None, explain: bool,
                  floor: bool) -> list[Hit]:
        """BM25 over titles (and keywords): each term weighs by its rarity among current
        memories; a synonym class counts once per memory (its best term); a title shorter
        than average counts a little more. With `floor`, a memory must be hit by at least
        one term that is neither chat filler nor common (or by its whole title: a person
        node "Caroline" for "Caroline"), so small talk recalls nothing. Then the titles of a
        memory's parents add context for the terms it lacks (Caroline's facts rank above
        Melanie's for a question about Caroline)."""
        st = self.state
        n = st.current_count
        if n == 0 or not terms:
            return []
        common = COMMON_FRACTION * idf(n, 1)
        empty: frozenset[str] = frozenset()
        # per term: title ids, keyword ids, value (idf × weight); grouped by class
        per_class: dict[frozenset[str], list[tuple[Term, Any, Any, float, bool]]] = {}
        for t in terms:
            t_ids = st.title_hits(t.key)
            k_ids = (st.keyword_ids.get(t.key) or empty) if keyword_equality else empty
            df = len(t_ids) + (len(k_ids) - len(k_ids & t_ids) if k_ids else 0)
            if df == 0:
                continue
            value = idf(n, df) * t.weight
            # a term that is some memory's whole title (a person's name) is never "common"
            anchor = not floor or (not t.light and (df <= COMMON_MIN_DF or idf(n, df) >= common
                                                    or t.key in st.title_keys))
            per_class.setdefault(t.cls, []).append((t, t_ids, k_ids, value, anchor))
        if not per_class:
            return []
        contrib: dict[frozenset[str], dict[str, float]] = {}
        anchored: set[str] = set()
        deferred = []
        for cls, items in per_class.items():
            local = contrib.setdefault(cls, {})
            for t, t_ids, k_ids, value, anchor in items:
                if anchor:
                    _fill(local, t_ids, k_ids, value, None)
                    anchored.update(t_ids)
                    anchored.update(k_ids)
                else:
                    deferred.append((local, t_ids, k_ids, value))
        if not anchored:
            return []
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
        pool_size = max(RERANK_POOL, (limit or 0) * 3)
        pool = heapq.nlargest(pool_size, final, key=final.__getitem__) if len(final) > pool_size else list(final)
        # context from the parents' titles, for the classes a memory is not hit by itself
        if PARENT_WEIGHT:
            nodes = st.nodes
            chains = {}
            for i in pool:
                chain, p = [], nodes[i].parent_id
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
            matched: list = []
            if explain:
                ln = length_norm(i)
                parents = []
                p = st.nodes[i].parent_id
                while p is not None and len(parents) < ANCESTOR_DEPTH:
                    parents.append(p)
                    p = st.nodes[p].parent_id
                for cls, items in per_class.items():
                    best = None
                    for t, t_ids, k_ids, value, _anchor in items:
                        in_t, in_k = i in t_ids, i in k_ids
                        if in_t or in_k:
                            v = value * (BOTH_FIELDS if in_t and in_k else (1.0 if in_t else KEYWORD_ONLY))
                            where = "title+keyword" if in_t and in_k else ("title" if in_t else "keyword")
                            if best is None or v > best[2]:
                                best = (t.key, where, v)
                    if best is None:
                        for depth, parent in enumerate(parents, 1):
                            for t, t_ids, _k, value, _a in items:
                                if parent in t_ids and (best is None or PARENT_WEIGHT * value / depth > best[2]):
                                    best = (t.key, "parent" if depth == 1 else "ancestor", PARENT_WEIGHT * value / depth)
                            if best is not None:
                                break
                    if best is not None:
                        matched.append((best[0], best[1], round(best[2] * ln, 4)))
            out.append(Hit(i, round(final[i], 4), matched))
        return out


class RecallSessions:
    """Per-session recall sets and speakers (in memory only) and the context header."""

    def __init__(self, retriever: Retriever):
        self.retriever = retriever
        self.sets: dict[str, list[str]] = {}
        self.senders: dict[str, list[str]] = {}  # personIds of the batch's known speakers

    def speakers(self, events: list[Event]) -> list[str]:
        """personIds of the relationships whose personId or an alias is a sender of the
        batch's external events, the latest speaker first, each once."""
        st = self.retriever.state
        out: dict[str, None] = {}
        for e in reversed(events):
            key = e.sender_key
            if e.origin != "external" or not key:
                continue
            if key in st.relationships:
                out[key] = None
            else:
                for pid in sorted(st.alias_ids.get(normalize(key), ())):
                    out[pid] = None
        return list(out)

    def recall(self, session: str, events: list[Event], budget: int, mode: str = "weighted") -> list[str]:
        external = [e.text for e in events if e.origin == "external"]
        if not external:
            return list(self.sets.get(session, []))
        self.senders[session] = self.speakers(events)
        if budget == 0:
            self.sets[session] = []
            return []
        r = self.retriever
        words = r.words(external, mode)
        hits = r.hits(words.terms, keyword_equality=True, limit=RECALL_QUOTA, mode=mode)
        ids = [h.id for h in hits]
        self.sets[session] = ids
        return ids

    def explain(self, text: str | list[str], budget: int, mode: str = "weighted",
                sender_key: str | None = None, senders: bool = True) -> dict[str, Any]:
        """For operators: how a text would be segmented, expanded and matched, with each
        hit's score and, per matched term, where it matched and what it weighed; and, for a
        sender key, whose relationship the header would show."""
        r = self.retriever
        words = r.words(text, mode)
        hits = r.hits(words.terms, keyword_equality=True, limit=RECALL_QUOTA, explain=True, mode=mode)
        st = r.state
        by_key = {t.key: t for t in words.terms}
        items = []
        for h in hits:
            node = st.nodes[h.id]
            matches = []
            for m in h.terms:
                key, where, weight = (m, None, None) if isinstance(m, str) else m
                term = by_key[key]
                if where is None:
                    where = "title" if h.id in st.title_hits(key) else "keyword"
                match = {"term": term.shown, "from": term.source,
                         "class": sorted(term.cls) if len(term.cls) > 1 else [term.shown], "where": where}
                if weight is not None:
                    match["weight"] = weight
                matches.append(match)
            items.append({"id": h.id, "title": node.title, "score": h.score, "matches": matches})
        people = []
        if senders and sender_key:
            first = text[-1] if isinstance(text, list) else text
            people = self.speakers([Event(text=first, origin="external", senderKey=sender_key)])
        header, ids = render_header(st, [h.id for h in hits], budget, people)
        return {"ranking": mode, "segmented": words.segmented, "synonymTerms": words.synonym_terms,
                "expanded": sorted(words.expanded), "hits": items, "senders": people, "header": header,
                "ids": ids}

    def context(self, session: str, budget: int, senders: bool = True) -> dict[str, Any]:
        if budget == 0:
            return {"text": "", "ids": []}
        people = self.senders.get(session, []) if senders else []
        text, ids = render_header(self.retriever.state, self.sets.get(session, []), budget, people)
        return {"text": text, "ids": ids}


HEADER = "[Auto-recall: memories whose titles or keywords match words in the latest messages; " \
         "matched by words, not meaning]"
NOTE = "[Truncated to fit; zcor_memory_read(id) gives the full text]"
HEADER_PEOPLE = "[Auto-recall: who is speaking (their relationship records), then memories whose titles or " \
                "keywords match words in the latest messages; matched by words, not meaning]"
NOTE_PEOPLE = "[Truncated to fit; zcor_memory_read(id) or zcor_relationship_read(personId) gives the full text]"


def _entry(node_id: str, title: str, content: str) -> str:
    return f"\n\n[{node_id}] {title}\n{content}"


def _cut(text: str, n: int) -> str:
    if len(text) <= n:
        return text
    return "" if n <= 0 else text[:n - 1] + "…"


def _person_entry(state: MemoryState, person_id: str) -> tuple[str, str, str]:
    rel = state.relationships[person_id]
    title = f"{rel.name} ({rel.relationship}; affinity {rel.affinity:+d})"
    body = rel.reason
    node = state.nodes.get(rel.memory_node_id) if rel.memory_node_id else None
    if node is not None and node.superseded_by is None:
        body += f"\nTheir memory: [{node.id}] {node.title}"
    return f"person {person_id}", title, body


def render_header(state: MemoryState, ids: list[str], budget: int,
                  people: list[str] = ()) -> tuple[str, list[str]]:
    """The context header for these ids, from live state, at most `budget` characters.

    The speakers' relationships first (`people`: personIds), then the memories; each once;
    deleted relationships and deleted or superseded nodes left out. Over budget, every entry
    keeps its id while titles and bodies are cut (fair shares) and a note says how to read
    more. Returns the text and the memory ids shown.
    """
    seen = set()
    entries: list[tuple[str, str, str]] = []
    for pid in people:
        if pid in state.relationships and ("p", pid) not in seen:
            seen.add(("p", pid))
            entries.append(_person_entry(state, pid))
    shown = []
    for i in ids:
        node = state.nodes.get(i)
        if node is None or node.superseded_by is not None or i in seen:
            continue
        seen.add(i)
        shown.append(i)
        entries.append((node.id, node.title, node.content))
    if not entries or budget <= 0:
        return "", []
    header, note = (HEADER_PEOPLE, NOTE_PEOPLE) if len(shown) < len(entries) else (HEADER, NOTE)
    full = header + "".join(_entry(*e) for e in entries)
    if len(full) <= budget:
        return full, shown
    # Fixed cost: header, note, and each entry's frame with empty title and body.
    fixed = len(header) + len("\n\n" + note) + sum(len(_entry(label, "", "")) for label, _, _ in entries)
    room = budget - fixed
    if room < 0:
        ids_only = " ".join(label for label, _, _ in entries)
        compact = f"{note} {ids_only}"
        return (compact if len(compact) <= budget else ids_only), shown
    # Water-filling: each text gets an equal share; short ones give the rest back.
    texts = [t for _, title, body in entries for t in (title, body)]
    alloc = [0] * len(texts)
    left = room
    open_ = sorted(range(len(texts)), key=lambda k: len(texts[k]))
    while open_ and left > 0:
        share = left // len(open_)
        if share == 0:
            break
        k = open_[0]
        if len(texts[k]) <= share:
            alloc[k] = len(texts[k])
            left -= alloc[k]
            open_.pop(0)
        else:
            for k in open_:
                alloc[k] = share
            left -= share * len(open_)
            break
    body = "".join(_entry(label, _cut(title, alloc[2 * j]), _cut(text, alloc[2 * j + 1]))
                   for j, (label, title, text) in enumerate(entries))
    return header + body + "\n\n" + note, shown
