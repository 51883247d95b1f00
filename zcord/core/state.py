"""The Memory held in RAM: nodes, important list, relationships, change history, indexes.

Every mutation goes through a `Tx`, which keeps the indexes current and can undo itself,
so a failed save leaves memory exactly as it was before the call.
"""

from __future__ import annotations

import bisect
import functools
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .models import Change, Node, Relationship
from .text import _CJK_RUN, all_cjk, cjk_count, has_cjk, normalize, term_key, title_seq, title_word_keys


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


class Postings(dict):
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

    def get(self, key, default=None):
        v = dict.get(self, key)
        if v is None:
            return default
        t = type(v)
        if t is str:
            return frozenset((v,))
        if t is set:
            return v
        cache = self.cache
        ids = cache.pop(key, None)
        if ids is None:
            ids = frozenset(map(self.by_rank.__getitem__, v))
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

    __slots__ = ("ids", "blob", "starts")

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.blob: str | None = None
        self.starts: array | None = None


@dataclass(slots=True)
class RelIndex:
    rank: int
    updated: float
    norm_text: tuple[str, ...]


@dataclass
class Migration:
    """Where a state that still has to be written in version 3 came from."""

    from_version: str  # "legacy", "1" or "2"
    file: str
    raw: bytes


RANK_GAP = 2
"""Nodes take every other rank (creation order), so a reverted delete finds a free rank
between its neighbours."""


class MemoryState:
    """All of one persona's Memory, with the indexes the tools need."""

    def __init__(
        self,
        nodes: Iterable[Node] = (),
        important: Iterable[str] = (),
        relationships: Iterable[Relationship] = (),
        history: Iterable[Change] = (),
        next_id: int = 1,
        history_segments: Iterable[str] = (),
        tree: tuple[dict, dict] | None = None,
    ):
        # The change history: sealed segment files (oldest) plus the changes still inline.
        self.history: list[Change] = list(history)
        self.history_segments: list[str] = list(history_segments)
        self.migration: Migration | None = None
        self._load_parts(nodes, important, relationships, next_id, tree)

    def _load_parts(self, nodes, important, relationships, next_id, tree=None) -> None:
        self.nodes: dict[str, Node] = {}
        self.rank: dict[str, int] = {}  # creation order, kept by updates and by an undone delete
        self._by_rank: list[str | None] = [None]  # rank -> id (None: no node has it now)
        self.index: dict[str, NodeIndex] = {}  # retrieval forms: see ensure_index
        self.children: dict[str | None, list[str]] = {None: []}
        self.links: dict[str, set[str]] = {}
        self.replaced: dict[str, set[str]] = {}
        self.relationships: dict[str, Relationship] = {}
        self.rel_index: dict[str, RelIndex] = {}
        self.alias_ids: dict[str, set[str]] = {}  # normalized alias -> personIds (speaker lookup)
        # retrieval indexes over current nodes only: CJK title n-grams (1 and 2 characters),
        # folded non-CJK title words, keyword keys, whole-title keys; their sizes give
        # each term's document frequency for weighted ranking
        self.title_grams = Postings(self._by_rank, self.rank)
        self.title_words = Postings(self._by_rank, self.rank)
        self.keyword_ids = Postings(self._by_rank, self.rank)
        self.title_keys = Postings(self._by_rank, self.rank)
        self.mixed_keywords: dict[str, int] = {}  # keyword keys with CJK and other letters
        self.current_count = 0
        self.title_len_sum = 0.0
        self.pending_words: list[str] = []
        self._rank = 0
        self._rel_rank = 0
        self._text: dict[int, _TextChunk] | None = None  # rank // TEXT_CHUNK -> piece; built by a query
        # ids loaded but maybe not yet in the retrieval indexes (built by ensure_index or in
        # steps by index_step); None once every node is indexed
        self._unindexed: list[str] | None = None
        self._unindexed_at = 0
        self.next_id = next_id
        self._max_num: int | None = None  # an upper bound of the nodes' id numbers (None: not known yet)
        self._load_nodes(nodes, tree)
        for rel in relationships:
            self._put_rel(rel)
        self.important: list[str] = list(important)

    # -- the retrieval indexes: built after loading, in steps or at once ----------------

    @property
    def indexed(self) -> bool:
        """Whether the retrieval indexes (title grams and words, keyword ids, whole titles,
        `index`, counts, pending_words) cover every node."""
        return self._unindexed is None

    def index_step(self, n: int = INDEX_STEP) -> bool:
        """Index up to n more loaded nodes; False once every node is indexed."""
        todo = self._unindexed
        if todo is None:
            return False
        at = self._unindexed_at
        end = min(len(todo), at + n)
        nodes, index = self.nodes, self.index
        for node_id in todo[at:end]:
            node = nodes.get(node_id)
            if node is not None and node_id not in index:
                self._index_node(node)
        if end >= len(todo):
            self._unindexed = None
            self._unindexed_at = 0
            return False
        self._unindexed_at = end
        return True

    def ensure_index(self) -> None:
        """Finish building the retrieval indexes (every caller of them runs this first)."""
        if self._unindexed is not None:
            self.index_step(len(self._unindexed))

    # -- queries -----------------------------------------------------------------

    def child_ids(self, parent_id: str | None) -> list[str]:
        return self.children.get(parent_id, [])

    @property
    def sealed_last_change_id(self) -> int:
        """The last change id in the sealed segments (their names end with it)."""
        if not self.history_segments:
            return 0
        return int(self.history_segments[-1].rsplit("-", 1)[1].split(".")[0])

    def next_change_id(self) -> int:
        return self.history[-1].change_id + 1 if self.history else self.sealed_last_change_id + 1

    def ancestors(self, node_id: str) -> list[str]:
        """Ids from node_id up to its root, node_id first."""
        out = []
        cur: str | None = node_id
        while cur is not None:
            out.append(cur)
            cur = self.nodes[cur].parent_id
        return out

    # -- raw index maintenance (used by Tx and loading) ---------------------------

    def _sibling_insert(self, parent: str | None, node_id: str) -> None:
        siblings = self.children.setdefault(parent, [])
        rank = self.rank[node_id]
        if not siblings or self.rank[siblings[-1]] < rank:
            siblings.append(node_id)
            return
        pos = bisect.bisect_left(siblings, rank, key=self.rank.__getitem__)
        siblings.insert(pos, node_id)

    def _sibling_remove(self, parent: str | None, node_id: str) -> None:
        siblings = self.children.get(parent)
        if siblings is not None:
            siblings.remove(node_id)
            if not siblings and parent is not None:
                del self.children[parent]

    def text_matches(self, keyword: str) -> list[str] | None:
        """Ids of nodes whose normalized title or content contains the normalized keyword,
        found with str.find over the text blob's pieces (None: keyword unusable here)."""
        if "\x00" in keyword or "\x01" in keyword or not keyword:
            return None
        if self._text is None:
            self._text_pieces()
        out: list[str] = []
        for chunk in self._text.values():
            if chunk.blob is None:
                self._fill_chunk(chunk)
            blob, starts, ids = chunk.blob, chunk.starts, chunk.ids
            at = blob.find(keyword)
            while at >= 0:
                i = bisect.bisect_right(starts, at) - 1
                out.append(ids[i])
                nxt = starts[i + 1] if i + 1 < len(starts) else len(blob)
                at = blob.find(keyword, nxt)
        return out

    def _text_pieces(self) -> None:
        chunks: dict[int, _TextChunk] = {}
        rank = self.rank
        for node_id in self.nodes:
            k = rank[node_id] // TEXT_CHUNK
            chunk = chunks.get(k)
            if chunk is None:
                chunk = chunks[k] = _TextChunk()
            chunk.ids.append(node_id)
        self._text = chunks

    def text_step(self) -> bool:
        """Build one more piece of the query text blob; False once every piece is built."""
        if self._text is None:
            self._text_pieces()
            return True
        for chunk in self._text.values():
            if chunk.blob is None:
                self._fill_chunk(chunk)
                return True
        return False

    def _fill_chunk(self, chunk: _TextChunk) -> None:
        starts = array("q")
        parts = []
        pos = 0
        nodes = self.nodes
        for node_id in chunk.ids:
            node = nodes[node_id]
            starts.append(pos)
            piece = f"{normalize(node.title)}\x00{normalize(node.content)}\x01"
            parts.append(piece)
            pos += len(piece)
        chunk.blob = "".join(parts)
        chunk.starts = starts

    def _text_changed(self, node_id: str, added: bool = False, removed: bool = False) -> None:
        """Keep the blob's pieces in step with a node put or removed (its piece is rebuilt by
        the next query)."""
        chunks = self._text
        if chunks is None:
            return
        rank = self.rank[node_id]
        k = rank // TEXT_CHUNK
        chunk = chunks.get(k)
        if chunk is None:
            chunk = _TextChunk()
            chunks[k] = chunk
            self._text = dict(sorted(chunks.items()))
        chunk.blob = chunk.starts = None
        if added:
            ids = chunk.ids
            if not ids or self.rank[ids[-1]] < rank:
                ids.append(node_id)
            else:
                ids.insert(bisect.bisect_left(ids, rank, key=self.rank.__getitem__), node_id)
        elif removed:
            chunk.ids.remove(node_id)
            if not chunk.ids:
                del chunks[k]

    def _load_nodes(self, nodes: Iterable[Node], tree: tuple[dict, dict] | None = None) -> None:
        """Nodes of a file, in order: the tree, ranks and links now; the retrieval indexes
        later (ensure_index / index_step). tree: (children, replaced) of these nodes in this
        order, when the loader built them already."""
        nodes = list(nodes)
        ids = [n[0] for n in nodes]  # Node.id
        self.nodes = dict(zip(ids, nodes))
        if len(self.nodes) != len(nodes):  # a repeated id (refused by the loaders): the later one wins
            self.nodes = {}
            for node in nodes:
                self._put_node(node)
            return
        # every other rank: a reverted delete can go back between its neighbours (add_node)
        self.rank.update(zip(ids, range(RANK_GAP, RANK_GAP * len(ids) + 1, RANK_GAP)))
        self._by_rank.extend(x for i in ids for x in (None, i))
        self._rank = RANK_GAP * len(ids)
        if tree is not None:
            self.children, self.replaced = tree
            nodes = ()
        children = self.children
        for node in nodes:
            parent = node.parent_id
            siblings = children.get(parent)
            if siblings is None:
                children[parent] = [node.id]
            else:
                siblings.append(node.id)
            if node.superseded_by is not None:
                self.replaced.setdefault(node.superseded_by, set()).add(node.id)
        if ids:
            self._unindexed = ids
            self._unindexed_at = 0

    def _put_node(self, node: Node, rank: int | None = None) -> None:
        node_id = node.id
        old = self.nodes.get(node_id)
        if old is not None:
            rank = self.rank[node_id]
            if old.parent_id != node.parent_id:
                self._sibling_remove(old.parent_id, node_id)
            if old.superseded_by is not None:
                self._unlink_replaced(old.superseded_by, node_id)
        elif rank is None:
            self._rank += RANK_GAP
            rank = self._rank
        else:
            self._rank = max(self._rank, rank)
        if old is None and self._max_num is not None:
            num = _id_number(node_id)
            if num is not None and num > self._max_num:
                self._max_num = num
        idx = self.index.pop(node_id, None)
        if idx is not None:
            self._unindex_words(node_id, idx, old)
        self.nodes[node_id] = node
        self.rank[node_id] = rank
        by_rank = self._by_rank
        if rank >= len(by_rank):
            by_rank.extend([None] * (rank + 1 - len(by_rank)))
        by_rank[rank] = node_id
        self._text_changed(node_id, added=old is None)
        if idx is not None or old is None or self._unindexed is None:
            self._index_node(node)
        # else: loaded and not indexed yet; the build indexes the node's current version
        if old is None or old.parent_id != node.parent_id:
            self._sibling_insert(node.parent_id, node_id)
        if node.superseded_by is not None:
            self.replaced.setdefault(node.superseded_by, set()).add(node_id)

    def _index_node(self, node: Node) -> None:
        title = node.title
        norm_title = normalize(title)
        if norm_title == title:
            norm_title = title  # one string object, not two
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
            self._index_words(node, idx)

    def _index_words(self, node: Node, idx: NodeIndex) -> None:
        node_id = node.id
        rank = self.rank[node_id]
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
        self.current_count += 1
        self.title_len_sum += idx.title_len
        self.pending_words.extend(norm_keywords)

    def _unindex_words(self, node_id: str, idx: NodeIndex, node: Node) -> None:
        if node.superseded_by is not None:
            return  # a superseded node: never in the word tables
        keyword_keys = _keyword_forms(node)[1]
        rank = self.rank[node_id]
        for table, keys in ((self.title_grams, _grams(idx.norm_title)), (self.title_words, _word_keys(idx)),
                            (self.keyword_ids, keyword_keys), (self.title_keys, (_title_key(idx),))):
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
        self.title_len_sum -= idx.title_len

    @property
    def avg_title_len(self) -> float:
        return self.title_len_sum / self.current_count if self.current_count else 1.0

    def title_hits(self, key: str) -> set[str] | frozenset[str]:
        """Ids of current nodes whose title holds the term (given as its `term_key`): a CJK-bearing
        term as a substring of the normalized title, any other as whole folded words in a row."""
        if not key:
            return frozenset()
        if not has_cjk(key):
            words = key.split(" ")
            postings = [self.title_words.get(w) for w in words]
            if any(p is None for p in postings):
                return frozenset()
            smallest = min(postings, key=len)
            if len(words) == 1:
                return smallest  # the index's own set: callers must not change it
            want = tuple(words)
            return {i for i in smallest if _contains_run(self.index[i].title_seq, want)}
        if len(key) == 1:
            return self.title_grams.get(key, frozenset())
        grams = [g for g in (key[i:i + 2] for i in range(len(key) - 1)) if has_cjk(g)]
        table = self.title_grams
        sizes = [table.size(g) for g in grams]
        if not sizes or 0 in sizes:
            return frozenset()
        smallest = table.get(grams[sizes.index(min(sizes))])
        if len(key) == 2:
            return smallest
        return {i for i in smallest if key in self.index[i].norm_title}

    def _unlink_replaced(self, target: str, node_id: str) -> None:
        ids = self.replaced.get(target)
        if ids is not None:
            ids.discard(node_id)
            if not ids:
                del self.replaced[target]

    def _remove_node(self, node_id: str) -> int:
        """Remove a node; returns its rank (for _restore_node)."""
        self._text_changed(node_id, removed=True)
        node = self.nodes.pop(node_id)
        idx = self.index.pop(node_id, None)
        if idx is not None:
            self._unindex_words(node_id, idx, node)
        self._sibling_remove(node.parent_id, node_id)
        if node.superseded_by is not None:
            self._unlink_replaced(node.superseded_by, node_id)
        rank = self.rank.pop(node_id)
        self._by_rank[rank] = None
        return rank

    def add_node(self, node: Node) -> None:
        """A new node in creation order: at the end, or, for an id older than existing ones
        (a delete being reverted or replayed), in a free rank between its neighbours by id
        (loading leaves one free rank between any two nodes; when none is left the node
        goes last)."""
        num = _id_number(node.id)
        if num is None or num > self._largest_id_number():  # the usual case (a create replayed): last
            self._put_node(node)
            return
        later = [(self.rank[i], n) for i in self.nodes if (n := _id_number(i) or 0) > num]
        if not later:
            self._put_node(node)
            return
        succ, succ_num = min(later)
        pred, pred_num = max(((self.rank[i], n) for i in self.nodes if (n := _id_number(i) or 0) < num),
                             default=(0, 0))
        # where it most likely was: ids and ranks both grow with creation
        aim = pred + (succ - pred) * (num - pred_num) / max(1, succ_num - pred_num)
        by = self._by_rank
        free = [r for r in range(pred + 1, succ) if r >= len(by) or by[r] is None]
        self._put_node(node, rank=min(free, key=lambda r: abs(r - aim)) if free else None)
        if free is not None:
            self.nodes = dict(sorted(self.nodes.items(), key=lambda kv: self.rank[kv[0]]))

    def _largest_id_number(self) -> int:
        """At least the largest id number of any node (worked out once by a scan, then kept
        up by _put_node; a removed node may leave it too large, which only sends add_node
        down its slower path)."""
        if self._max_num is None:
            self._max_num = max((n for i in self.nodes if (n := _id_number(i)) is not None), default=0)
        return self._max_num

    def add_rel(self, rel: Relationship) -> None:
        """A relationship brought back (a reverted delete): in creation-time order."""
        later = [p for p, r in self.relationships.items() if r.created_at > rel.created_at]
        if not later:
            self._put_rel(rel)
            return
        before = [self.rel_index[p].rank for p, r in self.relationships.items() if r.created_at <= rel.created_at]
        first_later = min(self.rel_index[p].rank for p in later)
        self._put_rel(rel, rank=(max(before) + first_later) / 2 if before else first_later - 1)
        self.relationships = dict(sorted(self.relationships.items(), key=lambda kv: self.rel_index[kv[0]].rank))

    def _restore_node(self, node: Node, rank: int) -> None:
        """Put back a removed node with its original rank (undo of a delete)."""
        self._put_node(node, rank=rank)
        # dicts keep insertion order = creation order; re-sort after an undo of a delete.
        self.nodes = dict(sorted(self.nodes.items(), key=lambda kv: self.rank[kv[0]]))

    def _put_rel(self, rel: Relationship, rank: int | None = None) -> None:
        old = self.relationships.get(rel.person_id)
        if old is not None:
            rank = self.rel_index[rel.person_id].rank
            if old.memory_node_id is not None:
                self._unlink(old.memory_node_id, rel.person_id)
            self._unalias(old)
        elif rank is None:
            self._rel_rank += 1
            rank = self._rel_rank
        self.relationships[rel.person_id] = rel
        self.rel_index[rel.person_id] = RelIndex(
            rank=rank,
            updated=rel.updated_at.timestamp(),
            norm_text=tuple(normalize(t) for t in (rel.name, *rel.aliases, rel.relationship, rel.reason)),
        )
        if rel.memory_node_id is not None:
            self.links.setdefault(rel.memory_node_id, set()).add(rel.person_id)
        for alias in rel.aliases:
            self.alias_ids.setdefault(normalize(alias), set()).add(rel.person_id)
        self.pending_words.extend(normalize(w) for w in (rel.name, *rel.aliases))  # people's names stay whole

    def _unlink(self, node_id: str, person_id: str) -> None:
        ids = self.links.get(node_id)
        if ids is not None:
            ids.discard(person_id)
            if not ids:
                del self.links[node_id]

    def _unalias(self, rel: Relationship) -> None:
        for alias in rel.aliases:
            ids = self.alias_ids.get(normalize(alias))
            if ids is not None:
                ids.discard(rel.person_id)
                if not ids:
                    del self.alias_ids[normalize(alias)]

    def _remove_rel(self, person_id: str) -> RelIndex:
        rel = self.relationships.pop(person_id)
        self._unalias(rel)
        if rel.memory_node_id is not None:
            self._unlink(rel.memory_node_id, person_id)
        return self.rel_index.pop(person_id)


@dataclass
class Tx:
    """One call's changes to a MemoryState, undoable until committed."""

    state: MemoryState
    actor: str
    tool: str
    op_seq: int | None
    at: Any
    changes: list[Change] = field(default_factory=list)
    _undo: list[Callable[[], None]] = field(default_factory=list)

    def record(self, kind: str, target: str | None, before: Any = None, after: Any = None,
               receipt: dict[str, Any] | None = None) -> None:
        self.changes.append(Change(
            change_id=0, at=self.at, actor=self.actor, tool=self.tool, op_seq=self.op_seq,
            kind=kind, target=target, before=before, after=after, receipt=receipt,
        ))

    def put_node(self, node: Node) -> None:
        st = self.state
        old = st.nodes.get(node.id)
        st._put_node(node)
        if old is None:
            self._undo.append(lambda: st._remove_node(node.id))
        else:
            self._undo.append(lambda: st._put_node(old))

    def add_node(self, node: Node) -> None:
        """Put back a node whose id is older than the newest (a reverted delete): it takes
        its place in creation (id) order, as it had before."""
        st = self.state
        st.add_node(node)
        self._undo.append(lambda: st._remove_node(node.id))

    def add_rel(self, rel: Relationship) -> None:
        st = self.state
        st.add_rel(rel)
        self._undo.append(lambda: st._remove_rel(rel.person_id))

    def remove_node(self, node_id: str) -> None:
        st = self.state
        node = st.nodes[node_id]
        idx = st._remove_node(node_id)
        self._undo.append(lambda: st._restore_node(node, idx))

    def put_rel(self, rel: Relationship) -> None:
        st = self.state
        old = st.relationships.get(rel.person_id)
        st._put_rel(rel)
        if old is None:
            self._undo.append(lambda: st._remove_rel(rel.person_id))
        else:
            self._undo.append(lambda: st._put_rel(old))

    def remove_rel(self, person_id: str) -> None:
        st = self.state
        rel = st.relationships[person_id]
        idx = st._remove_rel(person_id)

        def undo() -> None:
            st._put_rel(rel, rank=idx.rank)
            st.relationships = dict(sorted(st.relationships.items(),
                                           key=lambda kv: st.rel_index[kv[0]].rank))

        self._undo.append(undo)

    def set_important(self, ids: list[str]) -> None:
        st = self.state
        old = st.important
        st.important = list(ids)
        self._undo.append(lambda: setattr(st, "important", old))

    def take_id(self) -> str:
        st = self.state
        old = st.next_id
        n = old
        while f"m{n}" in st.nodes:
            n += 1
        st.next_id = n + 1
        self._undo.append(lambda: setattr(st, "next_id", old))
        return f"m{n}"

    def replace_all(self, other: MemoryState) -> None:
        """Swap in another state's nodes, important list and relationships (restore)."""
        st = self.state
        saved = {k: getattr(st, k) for k in _PART_ATTRS}
        next_id = max(st.next_id, other.next_id)
        for k in _PART_ATTRS:
            setattr(st, k, getattr(other, k))
        st.next_id = next_id

        def undo() -> None:
            for k, v in saved.items():
                setattr(st, k, v)

        self._undo.append(undo)

    def commit_changes(self) -> list[Change]:
        """Number the changes and append them to the history (undoable)."""
        st = self.state
        start = st.next_change_id()
        numbered = [c.model_copy(update={"change_id": start + i}) for i, c in enumerate(self.changes)]
        st.history.extend(numbered)
        self._undo.append(lambda: st.history.__delitem__(slice(len(st.history) - len(numbered), None)))
        self.changes = numbered
        return numbered

    def rollback(self) -> None:
        while self._undo:
            self._undo.pop()()


_PART_ATTRS = ("_text", "_unindexed", "_unindexed_at", "nodes", "rank", "_by_rank", "index", "children", "links", "replaced", "relationships", "rel_index",
               "alias_ids",
               "title_grams", "title_words", "keyword_ids", "title_keys", "mixed_keywords", "current_count",
               "title_len_sum", "pending_words", "_rank", "_rel_rank", "important", "next_id", "_max_num")


_LENGTHS: dict[float, float] = {}


def _grams(text: str) -> set[str]:
    """Every CJK character and every pair of adjacent characters holding one."""
    out = set()
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
    norm = normalize(keyword)
    if norm == keyword:
        norm = keyword
    key = term_key(norm)
    return norm, norm if key == norm else key


@functools.lru_cache(maxsize=1 << 16)
def _mixed(key: str) -> bool:
    """A key holding both CJK and other letters or digits (ktv包厢): found by substring."""
    return has_cjk(key) and any(ch.isalnum() and not has_cjk(ch) for ch in key)


def _contains_run(seq: tuple[str | None, ...], want: tuple[str, ...]) -> bool:
    n = len(want)
    return any(seq[i:i + n] == want for i in range(len(seq) - n + 1))


def _id_number(node_id: str) -> int | None:
    return int(node_id[1:]) if node_id[:1] == "m" and node_id[1:].isdigit() else None

