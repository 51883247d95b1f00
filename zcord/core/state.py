"""The Memory held in RAM: nodes, important list, relationships, change history, indexes.

Every mutation goes through a `Tx`, which keeps the indexes current and can undo itself,
so a failed save leaves memory exactly as it was before the call.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Callable, Collection, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from .indexes import INDEX_STEP, NodeIndex, Postings, RetrievalIndexes, TextBlob, _TextChunk
from .models import Change, Node, Relationship
from .senderkey import sender_key
from .text import match_form, normalize


@dataclass(slots=True)
class RelIndex:
    rank: float  # creation order; a relationship brought back takes a rank between two (add_rel)
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


_T = TypeVar("_T")


class _Held(Generic[_T]):
    """A MemoryState attribute that belongs to one of its parts (`indexes` or `blob`), read
    and written there: callers keep using `state.title_grams`, `state.current_count`…"""

    def __init__(self, part: str, name: str | None = None) -> None:
        self.part = part
        self.name = name or ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = self.name or name

    def __get__(self, obj: Any, objtype: Any = None) -> _T:
        value: _T = getattr(getattr(obj, self.part), self.name)
        return value

    def __set__(self, obj: Any, value: _T) -> None:
        setattr(getattr(obj, self.part), self.name, value)


class MemoryState:
    """All of one persona's Memory, with the indexes the tools need.

    Holds two parts that it keeps in step with every change: `indexes` (RetrievalIndexes,
    the postings recall and search use) and `blob` (TextBlob, the text zcor_memory_query
    searches). Each reads only the state's `nodes` and `rank` (indexes.NodeSource). Their
    attributes and queries are reachable from the state as before (`state.title_grams`,
    `state.title_hits(key)`); hot loops bind `state.indexes` once."""

    def __init__(
        self,
        nodes: Iterable[Node] = (),
        important: Iterable[str] = (),
        relationships: Iterable[Relationship] = (),
        history: Iterable[Change] = (),
        next_id: int = 1,
        history_segments: Iterable[str] = (),
        tree: tuple[dict[str | None, list[str]], dict[str, set[str]]] | None = None,
        scopes: dict[str, str] | None = None,
    ):
        # The change history: sealed segment files (oldest) plus the changes still inline.
        self.history: list[Change] = list(history)
        self.history_segments: list[str] = list(history_segments)
        self.migration: Migration | None = None
        self.people = PeopleIndex(self)
        self._load_parts(nodes, important, relationships, next_id, tree)
        self.scopes: dict[str, str] = dict(scopes or {})
        """Memory id -> the session it is scoped to (created in a private conversation, issue
        34; zcord.service.scope). Kept for deleted ids too (ids are never reused), so a
        reverted delete comes back as private as it was."""

    def _load_parts(self, nodes: Iterable[Node], important: Iterable[str], relationships: Iterable[Relationship],
                    next_id: int, tree: tuple[dict[str | None, list[str]], dict[str, set[str]]] | None = None) -> None:
        self.nodes: dict[str, Node] = {}
        self.rank: dict[str, int] = {}  # creation order, kept by updates and by an undone delete
        self._by_rank: list[str | None] = [None]  # rank -> id (None: no node has it now)
        self.children: dict[str | None, list[str]] = {None: []}
        self.links: dict[str, set[str]] = {}
        self.replaced: dict[str, set[str]] = {}
        self.relationships: dict[str, Relationship] = {}
        self.rel_index: dict[str, RelIndex] = {}
        self.alias_ids: dict[str, set[str]] = {}  # sender_key of a personId or alias -> personIds (speakers)
        self.indexes = RetrievalIndexes(self, self._by_rank)
        self.blob = TextBlob(self)
        self._rank = 0
        self._rel_rank = 0
        self.next_id = next_id
        self._max_num: int | None = None  # an upper bound of the nodes' id numbers (None: not known yet)
        self._load_nodes(nodes, tree)
        for rel in relationships:
            self._put_rel(rel)
        self.important: list[str] = list(important)

    # -- the parts' attributes and queries, as the state's ----------------------------------

    index: _Held[dict[str, NodeIndex]] = _Held("indexes")
    title_grams: _Held[Postings] = _Held("indexes")
    title_words: _Held[Postings] = _Held("indexes")
    keyword_ids: _Held[Postings] = _Held("indexes")
    title_keys: _Held[Postings] = _Held("indexes")
    title_stems: _Held[Postings] = _Held("indexes")
    keyword_stems: _Held[Postings] = _Held("indexes")
    title_stem_keys: _Held[Postings] = _Held("indexes")
    mixed_keywords: _Held[dict[str, int]] = _Held("indexes")
    current_count: _Held[int] = _Held("indexes")
    stem_count: _Held[int] = _Held("indexes")
    title_len_sum: _Held[float] = _Held("indexes")
    pending_words: _Held[list[str]] = _Held("indexes")
    # the build's progress and the blob's pieces, for tests and bench/ that look inside
    _unindexed: _Held[list[str] | None] = _Held("indexes", "unindexed")
    _unindexed_at: _Held[int] = _Held("indexes", "unindexed_at")
    _text: _Held[dict[int, _TextChunk] | None] = _Held("blob", "chunks")

    @property
    def indexed(self) -> bool:
        return self.indexes.indexed

    @property
    def avg_title_len(self) -> float:
        return self.indexes.avg_title_len

    def index_step(self, n: int = INDEX_STEP) -> bool:
        return self.indexes.index_step(n)

    def ensure_index(self) -> None:
        self.indexes.ensure_index()

    def ensure_stems(self) -> None:
        self.indexes.ensure_stems()

    def indexed_keywords(self) -> list[str]:
        return self.indexes.indexed_keywords()

    def title_hits(self, key: str) -> AbstractSet[str]:
        return self.indexes.title_hits(key)

    def stem_hits(self, key: str) -> AbstractSet[str]:
        return self.indexes.stem_hits(key)

    def keyword_stem_ids(self, key: str) -> AbstractSet[str] | None:
        return self.indexes.keyword_stem_ids(key)

    def is_stem_title(self, key: str) -> bool:
        return self.indexes.is_stem_title(key)

    def text_matches(self, keyword: str) -> list[str] | None:
        return self.blob.text_matches(keyword)

    def text_piece_wanted(self, tried: Collection[_TextChunk] = ()) -> tuple[_TextChunk, tuple[str, ...], int] | None:
        return self.blob.text_piece_wanted(tried)

    def text_piece_made(self, chunk: _TextChunk, ids: tuple[str, ...], gen: int,
                        made: tuple[str, array[int]] | None) -> bool:
        return self.blob.text_piece_made(chunk, ids, gen, made)

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

    def _load_nodes(self, nodes: Iterable[Node], tree: tuple[dict[str | None, list[str]], dict[str, set[str]]] | None = None) -> None:
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
            self.indexes.unindexed = ids
            self.indexes.unindexed_at = 0

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
        indexes = self.indexes
        was_indexed = old is not None and indexes.unindex_node(node_id, old, rank)
        self.nodes[node_id] = node
        self.rank[node_id] = rank
        by_rank = self._by_rank
        if rank >= len(by_rank):
            by_rank.extend([None] * (rank + 1 - len(by_rank)))
        by_rank[rank] = node_id
        self.blob.changed(node_id, added=old is None)
        if was_indexed or old is None or indexes.unindexed is None:
            indexes.index_node(node, rank)
        # else: loaded and not indexed yet; the build indexes the node's current version
        if old is None or old.parent_id != node.parent_id:
            self._sibling_insert(node.parent_id, node_id)
        if node.superseded_by is not None:
            self.replaced.setdefault(node.superseded_by, set()).add(node_id)

    def _unlink_replaced(self, target: str, node_id: str) -> None:
        ids = self.replaced.get(target)
        if ids is not None:
            ids.discard(node_id)
            if not ids:
                del self.replaced[target]

    def _remove_node(self, node_id: str) -> int:
        """Remove a node; returns its rank (for _restore_node)."""
        self.blob.changed(node_id, removed=True)
        node = self.nodes.pop(node_id)
        self.indexes.unindex_node(node_id, node, self.rank[node_id])
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
        """A relationship brought back (a reverted delete): in creation-time order (PeopleIndex.add)."""
        self.people.add(rel)

    def _restore_node(self, node: Node, rank: int) -> None:
        """Put back a removed node with its original rank (undo of a delete)."""
        self._put_node(node, rank=rank)
        # dicts keep insertion order = creation order; re-sort after an undo of a delete.
        self.nodes = dict(sorted(self.nodes.items(), key=lambda kv: self.rank[kv[0]]))

    def _put_rel(self, rel: Relationship, rank: float | None = None) -> None:
        self.people.put(rel, rank)

    def _remove_rel(self, person_id: str) -> RelIndex:
        return self.people.remove(person_id)


class PeopleIndex:
    """The relationships' bookkeeping (a part of MemoryState, `people`): each one's rank
    (creation order), update time and normalized text (`rel_index`), the memories they link
    (`links`) and the sender keys they answer to as speakers (`alias_ids`). The tables are
    the state's own (a restore swaps them whole, Tx.replace_all); this keeps them in step."""

    __slots__ = ("st",)

    def __init__(self, st: MemoryState) -> None:
        self.st = st

    def add(self, rel: Relationship) -> None:
        """A relationship brought back (a reverted delete): in creation-time order."""
        st = self.st
        later = [p for p, r in st.relationships.items() if r.created_at > rel.created_at]
        if not later:
            self.put(rel)
            return
        before = [st.rel_index[p].rank for p, r in st.relationships.items() if r.created_at <= rel.created_at]
        first_later = min(st.rel_index[p].rank for p in later)
        self.put(rel, rank=(max(before) + first_later) / 2 if before else first_later - 1)
        st.relationships = dict(sorted(st.relationships.items(), key=lambda kv: st.rel_index[kv[0]].rank))

    def put(self, rel: Relationship, rank: float | None = None) -> None:
        """Add or replace a relationship (an old one keeps its rank)."""
        st = self.st
        old = st.relationships.get(rel.person_id)
        if old is not None:
            rank = st.rel_index[rel.person_id].rank
            if old.memory_node_id is not None:
                self._unlink(old.memory_node_id, rel.person_id)
            self._unalias(old)
        elif rank is None:
            st._rel_rank += 1
            rank = st._rel_rank
        st.relationships[rel.person_id] = rel
        st.rel_index[rel.person_id] = RelIndex(
            rank=rank,
            updated=rel.updated_at.timestamp(),
            norm_text=tuple(normalize(t) for t in (rel.name, *rel.aliases, rel.relationship, rel.reason)),
        )
        if rel.memory_node_id is not None:
            st.links.setdefault(rel.memory_node_id, set()).add(rel.person_id)
        for key in _speaker_keys(rel):
            st.alias_ids.setdefault(key, set()).add(rel.person_id)
        st.pending_words.extend(match_form(w) for w in (rel.name, *rel.aliases))  # people's names stay whole

    def _unlink(self, node_id: str, person_id: str) -> None:
        st = self.st
        ids = st.links.get(node_id)
        if ids is not None:
            ids.discard(person_id)
            if not ids:
                del st.links[node_id]

    def _unalias(self, rel: Relationship) -> None:
        st = self.st
        for key in _speaker_keys(rel):
            ids = st.alias_ids.get(key)
            if ids is not None:
                ids.discard(rel.person_id)
                if not ids:
                    del st.alias_ids[key]

    def remove(self, person_id: str) -> RelIndex:
        """Remove a relationship; its index entry (for a rank to bring it back at)."""
        st = self.st
        rel = st.relationships.pop(person_id)
        self._unalias(rel)
        if rel.memory_node_id is not None:
            self._unlink(rel.memory_node_id, person_id)
        return st.rel_index.pop(person_id)


@dataclass
class Tx:
    """One call's changes to a MemoryState, undoable until committed."""

    state: MemoryState
    actor: str
    tool: str
    op_seq: int | None
    at: Any
    changes: list[Change] = field(default_factory=list)
    _undo: list[Callable[[], object]] = field(default_factory=list)

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

    def set_scope(self, node_id: str, session: str | None) -> None:
        """Scope a memory to a session (None: visible everywhere)."""
        st = self.state
        old = st.scopes.get(node_id)
        _set_scope(st, node_id, session)
        self._undo.append(lambda: _set_scope(st, node_id, old))

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
        st.indexes.attach(st)  # the parts taken over read this state's nodes from now on
        st.blob.attach(st)
        st.next_id = next_id
        # a restore never makes a memory less private than it is now (ids are never reused)
        st.scopes = {**saved["scopes"], **other.scopes}

        def undo() -> None:
            for k, v in saved.items():
                setattr(st, k, v)
            other.indexes.attach(other)
            other.blob.attach(other)

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


_PART_ATTRS = ("nodes", "rank", "_by_rank", "indexes", "blob", "children", "links", "replaced", "relationships",
               "rel_index", "alias_ids", "_rank", "_rel_rank", "important", "next_id", "_max_num", "scopes")
"""What a restore swaps in (Tx.replace_all): every attribute `_load_parts` sets, the parts whole."""


def _set_scope(st: MemoryState, node_id: str, session: str | None) -> None:
    if session is None:
        st.scopes.pop(node_id, None)
    else:
        st.scopes[node_id] = session


def _speaker_keys(rel: Relationship) -> set[str]:
    """The sender keys (zcord.core.text.sender_key) a relationship answers to as a speaker:
    its personId and each alias."""
    return {k for k in (sender_key(t) for t in (rel.person_id, *rel.aliases)) if k}


def _id_number(node_id: str) -> int | None:
    return int(node_id[1:]) if node_id[:1] == "m" and node_id[1:].isdigit() else None

