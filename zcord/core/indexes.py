"""The indexes over a MemoryState's nodes: the retrieval postings recall and search use
(CJK title characters and pairs, folded title words, keyword keys, whole titles), each
node's retrieval forms (NodeIndex), and the normalized text blob that zcor_memory_query
searches with str.find. MemoryState (zcord.core.state) keeps them in step with every change.
"""

from __future__ import annotations

import bisect
import functools
from array import array
from collections.abc import Callable, Collection, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, Protocol, cast, overload

from .models import Node
from .text import (
    _CJK_RUN,
    all_cjk,
    cjk_count,
    has_cjk,
    match_form,
    stem_key,
    stem_seq,
    stem_word_keys,
    term_key,
    title_seq,
    title_word_keys,
)


@dataclass(slots=True)
class NodeIndex:
    """Precomputed retrieval forms of one current or superseded node, rebuilt whenever the
    node object changes: its updatedAt as a number, the title's length in words (a CJK
    character counts half), the normalized title (the title object itself when normalizing
    changes nothing) and its non-CJK words folded in order (None for a CJK run; empty for an
    all-CJK title). Keyword keys are not kept: they are derived again from the node."""

    updated: float
    title_len: float
    norm_title: str
    title_seq: tuple[str | None, ...]


BIG_POSTING = 24
"""A term held by more nodes than this keeps their ranks in an array (4 bytes each) rather
than a set of ids (about 40 bytes each); a title's CJK characters and pairs make most of a
Memory's postings, and common ones are held by thousands of nodes."""


SET_CACHE = 400_000
"""Ids kept, per table, in the id sets built from the arrays of recently used terms (a
recall uses the same common terms again and again; building a set of 10,000 ids costs a
few hundred microseconds)."""


class Postings(dict[str, Any]):  # an id, a set of ids or an array of ranks
    """term -> the nodes holding it: one id as the id string itself (most title words and
    whole titles belong to one node; a set costs 216 bytes), a few as a set of ids, many as
    an array of their ranks. `get` answers a set-like of ids in every case (a frozenset for
    one id or for an array, the latter kept in a small cache until the term changes):
    callers never change it."""

    __slots__ = ("by_rank", "rank", "cache", "cached")

    def __init__(self, by_rank: list[str | None], rank: dict[str, int]):
        super().__init__()
        self.by_rank = by_rank  # the state's rank -> id list and id -> rank dict (changed in place)
        self.rank = rank
        self.cache: dict[str, frozenset[str]] = {}  # least recently used first
        self.cached = 0

    @overload  # type: ignore[override]  # answers a set-like of ids, not the value held
    def get(self, key: str, default: None = None) -> AbstractSet[str] | None: ...

    @overload
    def get(self, key: str, default: AbstractSet[str]) -> AbstractSet[str]: ...

    def get(self, key: str, default: AbstractSet[str] | None = None) -> AbstractSet[str] | None:
        v = dict.get(self, key)
        if v is None:
            return default
        t = type(v)
        if t is str:
            return frozenset((v,))
        if t is set:
            return cast("set[str]", v)
        cache = self.cache
        ids = cache.pop(key, None)
        if ids is None:
            ids = frozenset(map(cast("Callable[[int], str]", self.by_rank.__getitem__), v))  # held ranks: never None
            self.cached += len(ids)
            while self.cached > SET_CACHE and cache:
                self.cached -= len(cache.pop(next(iter(cache))))
        cache[key] = ids
        return ids

    def forget(self, key: str) -> None:
        """Drop the cached id set of a term whose postings change."""
        ids = self.cache.pop(key, None)
        if ids is not None:
            self.cached -= len(ids)

    def clear(self) -> None:
        super().clear()
        self.cache.clear()
        self.cached = 0

    def size(self, key: str) -> int:
        v = dict.get(self, key)
        return 0 if v is None else 1 if type(v) is str else len(v)

    def add(self, key: str, node_id: str, rank: int) -> None:
        """Add a node not yet under key."""
        v = dict.get(self, key)
        if v is None:
            self[key] = node_id
        elif type(v) is str:
            self[key] = {v, node_id}
        elif type(v) is set:
            if len(v) >= BIG_POSTING:
                ranks = self[key] = array("I", sorted(map(self.rank.__getitem__, v)))
                bisect.insort(ranks, rank)
            else:
                v.add(node_id)
        else:  # an array of ranks, kept sorted: found by bisection, not by a scan
            if not v or v[-1] < rank:
                v.append(rank)
            else:
                bisect.insort(v, rank)
            if self.cache:
                self.forget(key)

    def discard(self, key: str, node_id: str, rank: int) -> None:
        v = dict.get(self, key)
        if v is None:
            return
        t = type(v)
        if t is str:
            if v == node_id:
                del self[key]
        else:
            if t is set:
                v.discard(node_id)
            else:
                i = bisect.bisect_left(v, rank)
                if i == len(v) or v[i] != rank:
                    return
                del v[i]
                if self.cache:
                    self.forget(key)
                if len(v) > BIG_POSTING // 2:
                    return
                v = set(map(self.by_rank.__getitem__, v))
            if len(v) > 1:
                self[key] = v
            elif v:
                self[key] = next(iter(v))
            else:
                del self[key]


TEXT_CHUNK = 4096
"""Nodes per piece of the query text blob (by rank): a write rebuilds one piece only."""

INDEX_STEP = 1000
"""Nodes indexed per step of the background index build (one short hold of the lock)."""


class _TextChunk:
    """The normalized titles and contents of up to TEXT_CHUNK nodes (consecutive ranks), as
    one string searched with str.find: "title\x00content\x01" per node."""

    __slots__ = ("ids", "blob", "starts", "gen")

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.blob: str | None = None
        self.starts: array[int] | None = None
        self.gen = 0  # one more at each change to the piece's nodes (TextBlob.text_piece_made)


TEXT_BUILD_BATCH = 256
"""build_text_piece calls its pause between this many nodes."""


def build_text_piece(nodes: dict[str, Node], ids: tuple[str, ...],
                     pause: Callable[[], None] | None = None) -> tuple[str, array[int]] | None:
    """A piece's text and starts, from the nodes as they are now; None when one of them is
    gone. Safe outside the lock (issue 24: the background build of the query text at
    100,000 memories is seconds of CPU, mostly Traditional folding, and writes must not wait
    for it): it only reads, and TextBlob.text_piece_made keeps it only if the piece did not
    change meanwhile. pause: called every TEXT_BUILD_BATCH nodes (to give way to calls)."""
    starts = array("q")
    parts = []
    pos = 0
    for n, node_id in enumerate(ids, 1):
        if pause is not None and not n % TEXT_BUILD_BATCH:
            pause()
        node = nodes.get(node_id)
        if node is None:
            return None
        starts.append(pos)
        piece = f"{match_form(node.title)}\x00{match_form(node.content)}\x01"
        parts.append(piece)
        pos += len(piece)
    return "".join(parts), starts


class NodeSource(Protocol):
    """What the indexes and the text blob read of the state that holds them: its nodes (in
    creation order) and their ranks. Both may be replaced by new objects (a restore, an undone
    delete): the parts read them through this, never keep them."""

    nodes: dict[str, Node]
    rank: dict[str, int]


class RetrievalIndexes:
    """A MemoryState's retrieval postings: built after loading (in steps, or at once by the
    first caller), then kept current by the state's every put and remove (`index_node`,
    `unindex_node`). Reads the nodes and ranks of its owner (`NodeSource`) and nothing else."""

    index: dict[str, NodeIndex]
    title_grams: Postings
    title_words: Postings
    keyword_ids: Postings
    title_keys: Postings
    title_stems: Postings
    keyword_stems: Postings
    title_stem_keys: Postings
    stem_count: int
    mixed_keywords: dict[str, int]
    current_count: int
    title_len_sum: float
    pending_words: list[str]
    unindexed: list[str] | None
    unindexed_at: int

    def __init__(self, owner: NodeSource, by_rank: list[str | None]) -> None:
        self.owner = owner
        self.index = {}  # retrieval forms of current and superseded nodes: see ensure_index
        # CJK title n-grams (1 and 2 characters), folded non-CJK title words, keyword keys,
        # whole-title keys; their sizes give each term's document frequency for weighted ranking
        rank = owner.rank
        self.title_grams = Postings(by_rank, rank)
        self.title_words = Postings(by_rank, rank)
        self.keyword_ids = Postings(by_rank, rank)
        self.title_keys = Postings(by_rank, rank)
        # the same for weighted recall's stemmed keys, held for non-CJK keys only
        self.title_stems = Postings(by_rank, rank)
        self.keyword_stems = Postings(by_rank, rank)
        self.title_stem_keys = Postings(by_rank, rank)
        self.mixed_keywords = {}  # keyword keys with CJK and other letters
        self.current_count = 0
        self.stem_count = 0  # current nodes in the stemmed tables (see ensure_stems)
        self.title_len_sum = 0.0
        self.pending_words = []
        # ids loaded but maybe not yet indexed (built by ensure_index or in steps by
        # index_step); None once every node is indexed
        self.unindexed = None
        self.unindexed_at = 0
        # moves with every node indexed or taken out, and with every load from the cache:
        # what is derived from the titles may be kept while it stays (weighted recall's lone
        # characters, zcord.retrieval.ranking); a count, not content, so not in the cache
        self.generation = 0

    def attach(self, owner: NodeSource) -> None:
        """Read nodes and ranks from another state (one that took these indexes over)."""
        self.owner = owner

    @property
    def indexed(self) -> bool:
        """Whether the retrieval indexes (title grams and words, keyword ids, whole titles,
        `index`, counts, pending_words) cover every node."""
        return self.unindexed is None

    def index_step(self, n: int = INDEX_STEP) -> bool:
        """Index up to n more loaded nodes; False once every node is indexed."""
        todo = self.unindexed
        if todo is None:
            return False
        at = self.unindexed_at
        end = min(len(todo), at + n)
        nodes, rank, index = self.owner.nodes, self.owner.rank, self.index
        for node_id in todo[at:end]:
            node = nodes.get(node_id)
            if node is not None and node_id not in index:
                self.index_node(node, rank[node_id])
        if end >= len(todo):
            self.unindexed = None
            self.unindexed_at = 0
            return False
        self.unindexed_at = end
        return True

    def ensure_index(self) -> None:
        """Finish building the retrieval indexes (every caller of them runs this first)."""
        if self.unindexed is not None:
            self.index_step(len(self.unindexed))

    def index_node(self, node: Node, rank: int) -> None:
        """Index a node (not indexed now) that holds `rank`."""
        self.generation += 1
        title = node.title
        norm_title = match_form(title)
        if norm_title == title:
            norm_title = title  # one string object, not two
        seq: tuple[str | None, ...]
        if all_cjk(norm_title):  # the usual title of a Chinese Memory: no words, every character counts
            seq = ()
            length = max(1.0, len(norm_title) / 2)
        else:
            seq = title_seq(norm_title)
            length = max(1.0, sum(1 for w in seq if w is not None) + cjk_count(norm_title) / 2)
        idx = self.index[node.id] = NodeIndex(
            updated=node.updated_at.timestamp(),
            title_len=_LENGTHS.setdefault(length, length),  # a few values, one float object each
            norm_title=norm_title,
            title_seq=seq,
        )
        if node.superseded_by is None:
            self._index_words(node, rank, idx)

    def unindex_node(self, node_id: str, node: Node, rank: int) -> bool:
        """Take out a node (`node`: the version that was indexed, at `rank`); False when it
        was not indexed yet."""
        idx = self.index.pop(node_id, None)
        if idx is None:
            return False
        self.generation += 1
        self._unindex_words(node_id, rank, idx, node)
        return True

    def _index_words(self, node: Node, rank: int, idx: NodeIndex) -> None:
        node_id = node.id
        # Postings.add, its usual cases inlined (the build adds about 20 postings per node)
        get = dict.get
        for table, keys in ((self.title_grams, _grams(idx.norm_title)), (self.title_words, _word_keys(idx))):
            add = table.add
            cached = table.cache
            for key in keys:
                v = get(table, key)
                if v is None:
                    table[key] = node_id
                elif type(v) is array and not cached and v[-1] < rank:
                    v.append(rank)  # the build goes in rank order: arrays stay sorted
                else:
                    add(key, node_id, rank)
        norm_keywords, keyword_keys = _keyword_forms(node)
        add = self.keyword_ids.add
        for kw in keyword_keys:
            add(kw, node_id, rank)
            if _mixed(kw):
                self.mixed_keywords[kw] = self.mixed_keywords.get(kw, 0) + 1
        self.title_keys.add(_title_key(idx), node_id, rank)
        self._index_stems(node_id, rank, idx, norm_keywords)
        self.current_count += 1
        self.title_len_sum += idx.title_len
        self.pending_words.extend(norm_keywords)

    def _index_stems(self, node_id: str, rank: int, idx: NodeIndex, norm_keywords: tuple[str, ...]) -> None:
        stems, kw_stems, title_stem = _stem_forms(idx, norm_keywords)
        if stems:
            add = self.title_stems.add
            seq = idx.title_seq
            for key in stems:
                if key in seq:  # a word its stem leaves as it is (bank, 2026): the title's own string, not a copy
                    key = cast(str, seq[seq.index(key)])
                add(key, node_id, rank)
        if kw_stems:
            add = self.keyword_stems.add
            for key in kw_stems:
                add(key, node_id, rank)
        if title_stem:
            self.title_stem_keys.add(title_stem, node_id, rank)
        self.stem_count += 1

    def ensure_stems(self) -> None:
        """Fill the stemmed tables again when they do not cover every current node (indexes
        restored from elsewhere without them): weighted recall calls this first."""
        if self.stem_count == self.current_count:
            return
        for table in (self.title_stems, self.keyword_stems, self.title_stem_keys):
            table.clear()
        self.stem_count = 0
        nodes, rank = self.owner.nodes, self.owner.rank
        for node_id, idx in self.index.items():
            node = nodes.get(node_id)
            if node is not None and node.superseded_by is None:
                self._index_stems(node_id, rank[node_id], idx, _keyword_forms(node)[0])

    def _unindex_words(self, node_id: str, rank: int, idx: NodeIndex, node: Node) -> None:
        if node.superseded_by is not None:
            return  # a superseded node: never in the word tables
        norm_keywords, keyword_keys = _keyword_forms(node)
        stems, kw_stems, title_stem = _stem_forms(idx, norm_keywords)
        tables: tuple[tuple[Postings, Iterable[str]], ...] = (
            (self.title_grams, _grams(idx.norm_title)), (self.title_words, _word_keys(idx)),
            (self.keyword_ids, keyword_keys), (self.title_keys, (_title_key(idx),)),
            (self.title_stems, stems), (self.keyword_stems, kw_stems),
            (self.title_stem_keys, (title_stem,) if title_stem else ()))
        for table, keys in tables:
            discard = table.discard
            for key in keys:
                discard(key, node_id, rank)
        for kw in keyword_keys:
            n = self.mixed_keywords.get(kw)
            if n is not None:
                if n <= 1:
                    del self.mixed_keywords[kw]
                else:
                    self.mixed_keywords[kw] = n - 1
        self.current_count -= 1
        self.stem_count -= 1
        self.title_len_sum -= idx.title_len

    def indexed_keywords(self) -> list[str]:
        """The distinct normalized keywords of the current nodes indexed so far: after a load
        and its journal replay, what jieba is taught (`pending_words`) whether the indexes came
        from memory-state.recall.cache or are being built, so both teach the same words."""
        words: dict[str, None] = {}
        nodes = self.owner.nodes
        for node_id in self.index:
            node = nodes[node_id]
            if node.superseded_by is None:
                words.update(dict.fromkeys(_keyword_forms(node)[0]))
        return list(words)

    @property
    def avg_title_len(self) -> float:
        return self.title_len_sum / self.current_count if self.current_count else 1.0

    def title_hits(self, key: str) -> AbstractSet[str]:
        """Ids of current nodes whose title holds the term (given as its `term_key`): a CJK-bearing
        term as a substring of the normalized title, any other as whole folded words in a row.
        Callers must not change the set (it may be the index's own)."""
        if not key:
            return frozenset()
        index = self.index
        if not has_cjk(key):
            return self._word_run_hits(self.title_words, key, lambda i: index[i].title_seq)
        if len(key) <= 2:  # a CJK-bearing pair is a gram itself (most terms of a Chinese batch)
            return self.title_grams.get(key, frozenset())
        grams = [g for g in (key[i:i + 2] for i in range(len(key) - 1)) if has_cjk(g)]
        table = self.title_grams
        sizes = [table.size(g) for g in grams]
        if not sizes or 0 in sizes:
            return frozenset()
        smallest = table.get(grams[sizes.index(min(sizes))], frozenset())
        return {i for i in smallest if key in index[i].norm_title}

    @staticmethod
    def _word_run_hits(table: Postings, key: str,
                       seq_of: Callable[[str], tuple[str | None, ...]]) -> AbstractSet[str]:
        """Nodes whose title holds the words of a non-CJK key in a row (by `table`'s postings;
        `seq_of(id)`: the title's words in the table's form)."""
        words = key.split(" ")
        if len(words) == 1:  # most keys: one word
            one = table.get(key)
            return frozenset() if one is None else one  # the index's own set: callers must not change it
        postings = [table.get(w) for w in words]
        found = [p for p in postings if p is not None]
        if len(found) < len(postings):
            return frozenset()
        smallest = min(found, key=len)
        want = tuple(words)
        return {i for i in smallest if _contains_run(seq_of(i), want)}

    def stem_hits(self, key: str) -> AbstractSet[str]:
        """`title_hits` for a weighted recall key (`stem_key`): non-CJK words by their stems."""
        if not key or has_cjk(key):
            return self.title_hits(key)
        index = self.index
        return self._word_run_hits(self.title_stems, key, lambda i: stem_seq(index[i].norm_title))

    def keyword_stem_ids(self, key: str) -> AbstractSet[str] | None:
        """Nodes with a keyword equal to a weighted recall key (None: none)."""
        return (self.keyword_ids if has_cjk(key) else self.keyword_stems).get(key)

    def is_stem_title(self, key: str) -> bool:
        """Whether a weighted recall key is some current node's whole title."""
        return key in (self.title_keys if has_cjk(key) else self.title_stem_keys)


class TextBlob:
    """A MemoryState's normalized titles and contents in pieces of TEXT_CHUNK nodes, for exact
    substring queries (zcor_memory_query); a piece is rebuilt by the next query after a
    change to one of its nodes (the state reports each one: `changed`). Reads the nodes and
    ranks of its owner (`NodeSource`) and nothing else."""

    def __init__(self, owner: NodeSource) -> None:
        self.owner = owner
        self.chunks: dict[int, _TextChunk] | None = None  # rank // TEXT_CHUNK -> piece; built by a query

    def attach(self, owner: NodeSource) -> None:
        """Read nodes and ranks from another state (one that took this blob over)."""
        self.owner = owner

    def text_matches(self, keyword: str) -> list[str] | None:
        """Ids of nodes whose normalized title or content contains the normalized keyword,
        found with str.find over the text blob's pieces (None: keyword unusable here)."""
        if "\x00" in keyword or "\x01" in keyword or not keyword:
            return None
        chunks = self.chunks
        if chunks is None:
            chunks = self._text_pieces()
        out: list[str] = []
        for chunk in chunks.values():
            blob, starts = chunk.blob, chunk.starts
            if blob is None or starts is None:
                blob, starts = self._fill_chunk(chunk)
            ids = chunk.ids
            at = blob.find(keyword)
            while at >= 0:
                i = bisect.bisect_right(starts, at) - 1
                out.append(ids[i])
                nxt = starts[i + 1] if i + 1 < len(starts) else len(blob)
                at = blob.find(keyword, nxt)
        return out

    def _text_pieces(self) -> dict[int, _TextChunk]:
        chunks: dict[int, _TextChunk] = {}
        rank = self.owner.rank
        for node_id in self.owner.nodes:
            k = rank[node_id] // TEXT_CHUNK
            chunk = chunks.get(k)
            if chunk is None:
                chunk = chunks[k] = _TextChunk()
            chunk.ids.append(node_id)
        self.chunks = chunks
        return chunks

    def text_piece_wanted(self, tried: Collection[_TextChunk] = ()) -> tuple[_TextChunk, tuple[str, ...], int] | None:
        """Under the lock: the next piece of the query text to build outside it (with
        build_text_piece), as (piece, its ids, its generation), passing over the pieces in
        `tried`; None once all the others are built."""
        chunks = self.chunks
        if chunks is None:
            chunks = self._text_pieces()
        for chunk in chunks.values():
            if chunk.blob is None and chunk not in tried:
                return chunk, tuple(chunk.ids), chunk.gen
        return None

    def text_piece_made(self, chunk: _TextChunk, ids: tuple[str, ...], gen: int,
                        made: tuple[str, array[int]] | None) -> bool:
        """Under the lock: keep a piece built outside it, unless the piece changed meanwhile
        (a node of it put or removed, or the whole text replaced by a restore); False: not
        kept (a query that needs it builds it, as after any change)."""
        chunks = self.chunks
        if made is None or chunks is None or chunk.gen != gen or chunk.blob is not None \
                or chunks.get(self.owner.rank.get(ids[0], -1) // TEXT_CHUNK) is not chunk:
            return False
        chunk.blob, chunk.starts = made
        return True

    def _fill_chunk(self, chunk: _TextChunk) -> tuple[str, array[int]]:
        made = build_text_piece(self.owner.nodes, tuple(chunk.ids))
        assert made is not None  # under the lock every id of a piece is a node
        chunk.blob, chunk.starts = made
        return made

    def changed(self, node_id: str, added: bool = False, removed: bool = False) -> None:
        """Keep the blob's pieces in step with a node put or removed (its piece is rebuilt by
        the next query); called while the node still holds its rank."""
        chunks = self.chunks
        if chunks is None:
            return
        ranks = self.owner.rank
        rank = ranks[node_id]
        k = rank // TEXT_CHUNK
        chunk = chunks.get(k)
        if chunk is None:
            chunk = _TextChunk()
            chunks[k] = chunk
            self.chunks = dict(sorted(chunks.items()))
        chunk.blob = chunk.starts = None
        chunk.gen += 1
        if added:
            ids = chunk.ids
            if not ids or ranks[ids[-1]] < rank:
                ids.append(node_id)
            else:
                ids.insert(bisect.bisect_left(ids, rank, key=ranks.__getitem__), node_id)
        elif removed:
            chunk.ids.remove(node_id)
            if not chunk.ids:
                del chunks[k]


_LENGTHS: dict[float, float] = {}


def _grams(text: str) -> set[str]:
    """Every CJK character and every pair of adjacent characters holding one."""
    out: set[str] = set()
    for m in _CJK_RUN.finditer(text):
        start, end = m.span()
        out.update(m.group())
        # the pairs starting at each character of the run and at the character before it
        out.update([text[i:i + 2] for i in range(start - 1 if start else 0, end)])
    return out


def _word_keys(idx: NodeIndex) -> set[str]:
    return title_word_keys(idx.title_seq)


def _title_key(idx: NodeIndex) -> str:
    """The whole title as one term key (a person node titled "Caroline" → "caroline")."""
    key = term_key(idx.norm_title)
    return idx.norm_title if key == idx.norm_title else key  # one string object, not two


def _keyword_forms(node: Node) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A node's distinct normalized keywords, and their distinct keys (term_key): the same
    tuple when every key is its keyword (an empty key is then kept, else dropped)."""
    forms = [_keyword_form(k) for k in node.keywords]
    norm = tuple(dict.fromkeys(n for n, _ in forms))
    if all(n == k for n, k in forms):
        return norm, norm
    return norm, tuple(dict.fromkeys(k for _, k in forms if k))


@functools.lru_cache(maxsize=1 << 16)
def _keyword_form(keyword: str) -> tuple[str, str]:
    """A keyword's normalized form (the keyword itself when normalizing changes nothing) and
    its key; keywords repeat across a Memory, so they are worked out once."""
    norm = match_form(keyword)
    if norm == keyword:
        norm = keyword
    key = term_key(norm)
    return norm, norm if key == norm else key


def _stem_forms(idx: NodeIndex, norm_keywords: tuple[str, ...]) -> tuple[set[str], tuple[str, ...], str]:
    """A node's weighted-recall keys held apart from the seed ones: its title's stemmed word
    keys, its non-CJK keywords' stem keys, and its whole title's stem key (non-CJK titles)."""
    stems = stem_word_keys(stem_seq(idx.norm_title)) if idx.title_seq else set()
    kw = tuple(dict.fromkeys(k for k in map(_stem_keyword, norm_keywords) if k))
    title = stem_key(idx.norm_title) if idx.title_seq and not has_cjk(idx.norm_title) else ""
    return stems, kw, title


@functools.lru_cache(maxsize=1 << 16)
def _stem_keyword(keyword: str) -> str:
    """The stem key of a normalized non-CJK keyword ("" for a CJK-bearing one: the seed
    table has it)."""
    return "" if has_cjk(keyword) else stem_key(keyword)


@functools.lru_cache(maxsize=1 << 16)
def _mixed(key: str) -> bool:
    """A key holding both CJK and other letters or digits (ktv包厢): found by substring."""
    return has_cjk(key) and any(ch.isalnum() and not has_cjk(ch) for ch in key)


def _contains_run(seq: tuple[str | None, ...], want: tuple[str, ...]) -> bool:
    n = len(want)
    return any(seq[i:i + n] == want for i in range(len(seq) - n + 1))
