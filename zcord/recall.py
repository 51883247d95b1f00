"""Auto-recall (SPEC §3.3): words of the incoming batch → synonym expansion → title and
keyword hits → a per-session recall set, and the context header rendered from it.

No LLM, nothing written to history, nothing persisted: recall sets live in this process.
"""

from __future__ import annotations

import heapq
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import InvalidArgument
from .state import MemoryState
from .synonyms import Synonyms
from .text import add_user_words, normalize, segment

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
    score: int
    terms: list[str]


@dataclass
class Words:
    """What was taken from a text: jieba words, synonym terms found inside, their expansion."""

    segmented: list[str]
    synonym_terms: list[str]
    expanded: dict[str, str | None] = field(default_factory=dict)  # term -> the word it came from


class Retriever:
    """Word matching over one MemoryState with one synonym table."""

    def __init__(self, state_ref, synonyms: Synonyms):
        self._state_ref = state_ref
        self.synonyms = synonyms
        self._taught_terms: object = None

    @property
    def state(self) -> MemoryState:
        return self._state_ref()

    def teach_jieba(self) -> None:
        """Make jieba keep every synonym term and node keyword whole."""
        st = self.state
        if self._taught_terms is not self.synonyms.classes:
            add_user_words(self.synonyms.classes.of)
            self._taught_terms = self.synonyms.classes
        if st.pending_words:
            words, st.pending_words[:] = list(st.pending_words), []
            add_user_words(words)

    def words(self, text: str) -> Words:
        self.teach_jieba()
        norm = normalize(text)
        segmented = list(dict.fromkeys(normalize(w) for w in segment(norm, hmm=False)))
        found = self._terms_in(norm)
        expanded: dict[str, str | None] = {}
        for w in [*segmented, *found]:
            if w not in expanded:
                expanded[w] = None
            for t in self.synonyms.classes.of.get(w, ()):
                expanded.setdefault(t, w)
        return Words(segmented, found, expanded)

    def _terms_in(self, norm: str) -> list[str]:
        """Every synonym term that occurs in the text as a substring, in order of appearance."""
        terms = self.synonyms.classes.of
        starts = self._term_starts()
        found: dict[str, None] = {}
        for i, ch in enumerate(norm):
            lengths = starts.get(ch)
            if lengths is None:
                continue
            for n in lengths:
                piece = norm[i:i + n]
                if len(piece) == n and piece in terms:
                    found[piece] = None
        return list(found)

    def _term_starts(self) -> dict[str, tuple[int, ...]]:
        """First character of every synonym term → the lengths of the terms starting with it."""
        classes = self.synonyms.classes
        if getattr(self, "_starts_for", None) is not classes:
            table: dict[str, set[int]] = {}
            for term in classes.of:
                table.setdefault(term[0], set()).add(len(term))
            self._starts = {ch: tuple(sorted(ls)) for ch, ls in table.items()}
            self._starts_for = classes
        return self._starts

    def hits(self, terms: list[str], keyword_equality: bool, limit: int | None = None,
             explain: bool = False) -> list[Hit]:
        """Current nodes hit by the terms, best first: score desc, updatedAt desc, id asc.

        The score is the number of distinct terms that hit the node. Only the first `limit`
        are ranked in full, so a batch that touches thousands of titles stays cheap.
        """
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


class RecallSessions:
    """Per-session recall sets (in memory only) and the context header."""

    def __init__(self, retriever: Retriever):
        self.retriever = retriever
        self.sets: dict[str, list[str]] = {}

    def recall(self, session: str, events: list[Event], budget: int) -> list[str]:
        external = [e.text for e in events if e.origin == "external"]
        if not external:
            return list(self.sets.get(session, []))
        if budget == 0:
            self.sets[session] = []
            return []
        words = self.retriever.words("\n".join(external))
        hits = self.retriever.hits(list(words.expanded), keyword_equality=True, limit=RECALL_QUOTA)
        ids = [h.id for h in hits]
        self.sets[session] = ids
        return ids

    def explain(self, text: str, budget: int) -> dict[str, Any]:
        """For operators: how a text would be segmented, expanded and matched."""
        r = self.retriever
        words = r.words(text)
        hits = r.hits(list(words.expanded), keyword_equality=True, limit=RECALL_QUOTA, explain=True)
        st = r.state
        items = []
        for h in hits:
            node = st.nodes[h.id]
            items.append({
                "id": h.id, "title": node.title, "score": h.score,
                "matches": [{"term": t, "from": words.expanded.get(t) or t,
                             "class": sorted(r.synonyms.classes.of.get(words.expanded.get(t) or t, {t})),
                             "where": "title" if t in st.index[h.id].norm_title else "keyword"}
                            for t in h.terms],
            })
        header, ids = render_header(st, [h.id for h in hits], budget)
        return {"segmented": words.segmented, "synonymTerms": words.synonym_terms,
                "expanded": sorted(words.expanded), "hits": items, "header": header, "ids": ids}

    def context(self, session: str, budget: int) -> dict[str, Any]:
        if budget == 0:
            return {"text": "", "ids": []}
        text, ids = render_header(self.retriever.state, self.sets.get(session, []), budget)
        return {"text": text, "ids": ids}


HEADER = "[Auto-recall: memories whose titles or keywords match words in the latest messages; " \
         "matched by words, not meaning]"
NOTE = "[Truncated to fit; zcor_memory_read(id) gives the full text]"


def _entry(node_id: str, title: str, content: str) -> str:
    return f"\n\n[{node_id}] {title}\n{content}"


def _cut(text: str, n: int) -> str:
    if len(text) <= n:
        return text
    return "" if n <= 0 else text[:n - 1] + "…"


def render_header(state: MemoryState, ids: list[str], budget: int) -> tuple[str, list[str]]:
    """The context header for these ids, from live state, at most `budget` characters.

    Each node once; deleted and superseded ones left out. Over budget, every entry keeps
    its id while titles and bodies are cut (fair shares) and a note says how to read more.
    """
    seen = set()
    nodes = []
    for i in ids:
        node = state.nodes.get(i)
        if node is None or node.superseded_by is not None or i in seen:
            continue
        seen.add(i)
        nodes.append(node)
    if not nodes or budget <= 0:
        return "", []
    shown = [n.id for n in nodes]
    full = HEADER + "".join(_entry(n.id, n.title, n.content) for n in nodes)
    if len(full) <= budget:
        return full, shown
    # Fixed cost: header, note, and each entry's frame with empty title and body.
    fixed = len(HEADER) + len("\n\n" + NOTE) + sum(len(_entry(n.id, "", "")) for n in nodes)
    room = budget - fixed
    if room < 0:
        ids_only = " ".join(shown)
        compact = f"{NOTE} {ids_only}"
        return (compact if len(compact) <= budget else ids_only), shown
    # Water-filling: each text gets an equal share; short ones give the rest back.
    texts = [t for n in nodes for t in (n.title, n.content)]
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
    body = "".join(_entry(n.id, _cut(n.title, alloc[2 * j]), _cut(n.content, alloc[2 * j + 1]))
                   for j, n in enumerate(nodes))
    return HEADER + body + "\n\n" + NOTE, shown
