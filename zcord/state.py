"""The Memory held in RAM: nodes, important list, relationships, change history, indexes.

Every mutation goes through a `Tx`, which keeps the indexes current and can undo itself,
so a failed save leaves memory exactly as it was before the call.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .models import Change, Node, Relationship
from .text import cjk_count, has_cjk, normalize, term_key, title_seq, title_word_keys


@dataclass(slots=True)
class NodeIndex:
    """Precomputed comparison forms of one node, rebuilt whenever the node object changes."""

    rank: int
    updated: float
    norm_title: str
    norm_content: str
    norm_keywords: frozenset[str]
    # retrieval forms: keyword keys (term_key), the title's non-CJK words folded in order
    # (None for a CJK run), and the title's length in words (a CJK character counts half)
    keyword_keys: frozenset[str]
    title_seq: tuple[str | None, ...]
    title_len: float


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
    ):
        # The change history: sealed segment files (oldest) plus the changes still inline.
        self.history: list[Change] = list(history)
        self.history_segments: list[str] = list(history_segments)
        self.migration: Migration | None = None
        self._load_parts(nodes, important, relationships, next_id)

    def _load_parts(self, nodes, important, relationships, next_id) -> None:
        self.nodes: dict[str, Node] = {}
        self.index: dict[str, NodeIndex] = {}
        self.children: dict[str | None, list[str]] = {None: []}
        self.links: dict[str, set[str]] = {}
        self.replaced: dict[str, set[str]] = {}
        self.relationships: dict[str, Relationship] = {}
        self.rel_index: dict[str, RelIndex] = {}
        self.alias_ids: dict[str, set[str]] = {}  # normalized alias -> personIds (speaker lookup)
        # retrieval indexes over current nodes only: CJK title n-grams (1 and 2 characters),
        # folded non-CJK title words, keyword keys, whole-title keys; their sizes give
        # each term's document frequency for weighted ranking
        self.title_grams: dict[str, set[str]] = {}
        self.title_words: dict[str, set[str]] = {}
        self.keyword_ids: dict[str, set[str]] = {}
        self.title_keys: dict[str, set[str]] = {}
        self.mixed_keywords: dict[str, int] = {}  # keyword keys with CJK and other letters
        self.current_count = 0
        self.title_len_sum = 0.0
        self.pending_words: list[str] = []
        self._rank = 0
        self._rel_rank = 0
        self._text_blob: tuple[str, list[int], list[str]] | None = None
        self.next_id = next_id
        for node in nodes:
            self._put_node(node)
        for rel in relationships:
            self._put_rel(rel)
        self.important: list[str] = list(important)

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
        rank = self.index[node_id].rank
        pos = bisect.bisect_left(siblings, rank, key=lambda i: self.index[i].rank)
        siblings.insert(pos, node_id)

    def _sibling_remove(self, parent: str | None, node_id: str) -> None:
        siblings = self.children.get(parent)
        if siblings is not None:
            siblings.remove(node_id)
            if not siblings and parent is not None:
                del self.children[parent]

    def text_matches(self, keyword: str) -> list[str] | None:
        """Ids of nodes whose normalized title or content contains the normalized keyword,
        found with str.find over one blob of all texts (None: keyword unusable here)."""
        if "\x00" in keyword or "\x01" in keyword or not keyword:
            return None
        if self._text_blob is None:
            starts, ids, parts = [], [], []
            pos = 0
            for node_id, idx in self.index.items():
                starts.append(pos)
                ids.append(node_id)
                piece = f"{idx.norm_title}\x00{idx.norm_content}\x01"
                parts.append(piece)
                pos += len(piece)
            self._text_blob = ("".join(parts), starts, ids)
        blob, starts, ids = self._text_blob
        out = []
        at = blob.find(keyword)
        while at >= 0:
            i = bisect.bisect_right(starts, at) - 1
            out.append(ids[i])
            nxt = starts[i + 1] if i + 1 < len(starts) else len(blob)
            at = blob.find(keyword, nxt)
        return out

    def _put_node(self, node: Node, rank: int | None = None) -> None:
        self._text_blob = None
        old = self.nodes.get(node.id)
        if old is not None:
            rank = self.index[node.id].rank
            if old.parent_id != node.parent_id:
                self._sibling_remove(old.parent_id, node.id)
            if old.superseded_by is not None:
                self._unlink_replaced(old.superseded_by, node.id)
        elif rank is None:
            self._rank += 1
            rank = self._rank
        else:
            self._rank = max(self._rank, rank)
        if old is not None:
            self._unindex_words(node.id, self.index[node.id])
        self.nodes[node.id] = node
        norm_title = normalize(node.title)
        norm_keywords = frozenset(normalize(k) for k in node.keywords)
        seq = title_seq(norm_title)
        idx = self.index[node.id] = NodeIndex(
            rank=rank,
            updated=node.updated_at.timestamp(),
            norm_title=norm_title,
            norm_content=normalize(node.content),
            norm_keywords=norm_keywords,
            keyword_keys=_keys_of(norm_keywords),
            title_seq=seq,
            title_len=max(1.0, sum(1 for w in seq if w is not None) + cjk_count(norm_title) / 2),
        )
        if node.superseded_by is None:
            self._index_words(node.id, idx)
        if old is None or old.parent_id != node.parent_id:
            self._sibling_insert(node.parent_id, node.id)
        if node.superseded_by is not None:
            self.replaced.setdefault(node.superseded_by, set()).add(node.id)

    def _index_words(self, node_id: str, idx: NodeIndex) -> None:
        for gram in _grams(idx.norm_title):
            self.title_grams.setdefault(gram, set()).add(node_id)
        for word in _word_keys(idx):
            self.title_words.setdefault(word, set()).add(node_id)
        for kw in idx.keyword_keys:
            self.keyword_ids.setdefault(kw, set()).add(node_id)
            if _mixed(kw):
                self.mixed_keywords[kw] = self.mixed_keywords.get(kw, 0) + 1
        self.title_keys.setdefault(_title_key(idx), set()).add(node_id)
        self.current_count += 1
        self.title_len_sum += idx.title_len
        self.pending_words.extend(idx.norm_keywords)

    def _unindex_words(self, node_id: str, idx: NodeIndex) -> None:
        removed = False
        for table, keys in ((self.title_grams, _grams(idx.norm_title)), (self.title_words, _word_keys(idx)),
                            (self.keyword_ids, idx.keyword_keys), (self.title_keys, (_title_key(idx),))):
            for key in keys:
                ids = table.get(key)
                if ids is not None and node_id in ids:
                    removed = True
                    ids.discard(node_id)
                    if not ids:
                        del table[key]
        if not removed:
            return  # a superseded node: never indexed
        for kw in idx.keyword_keys:
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
        postings = [self.title_grams.get(g) for g in grams]
        if any(p is None for p in postings):
            return frozenset()
        smallest = min(postings, key=len)
        if len(key) == 2:
            return smallest
        return {i for i in smallest if key in self.index[i].norm_title}

    def _unlink_replaced(self, target: str, node_id: str) -> None:
        ids = self.replaced.get(target)
        if ids is not None:
            ids.discard(node_id)
            if not ids:
                del self.replaced[target]

    def _remove_node(self, node_id: str) -> NodeIndex:
        self._text_blob = None
        node = self.nodes.pop(node_id)
        self._unindex_words(node_id, self.index[node_id])
        self._sibling_remove(node.parent_id, node_id)
        if node.superseded_by is not None:
            self._unlink_replaced(node.superseded_by, node_id)
        return self.index.pop(node_id)

    def add_node(self, node: Node) -> None:
        """A new node in creation order: at the end, or, for an id older than existing ones
        (a delete being reverted or replayed), just after the nearest older id."""
        num = _id_number(node.id)
        later = [i for i in self.nodes if num is not None and (_id_number(i) or 0) > num]
        if not later:
            self._put_node(node)
            return
        before = [self.index[i].rank for i in self.nodes if (_id_number(i) or 0) < num]
        first_later = min(self.index[i].rank for i in later)
        rank = (max(before) + first_later) / 2 if before else first_later - 1
        self._put_node(node, rank=rank)
        self.nodes = dict(sorted(self.nodes.items(), key=lambda kv: self.index[kv[0]].rank))
        for parent, ids in self.children.items():
            if node.id in ids:
                ids.sort(key=lambda i: self.index[i].rank)

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

    def _restore_node(self, node: Node, idx: NodeIndex) -> None:
        """Put back a removed node with its original rank (undo of a delete)."""
        self._put_node(node, rank=idx.rank)
        # dicts keep insertion order = creation order; re-sort after an undo of a delete.
        self.nodes = dict(sorted(self.nodes.items(), key=lambda kv: self.index[kv[0]].rank))

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


_PART_ATTRS = ("_text_blob", "nodes", "index", "children", "links", "replaced", "relationships", "rel_index",
               "alias_ids",
               "title_grams", "title_words", "keyword_ids", "title_keys", "mixed_keywords", "current_count",
               "title_len_sum", "pending_words", "_rank", "_rel_rank", "important", "next_id")


def _grams(text: str) -> set[str]:
    """Every CJK character and every pair of adjacent characters holding one."""
    return {g for g in (*text, *(text[i:i + 2] for i in range(len(text) - 1))) if has_cjk(g)}


def _word_keys(idx: NodeIndex) -> set[str]:
    return title_word_keys(idx.title_seq)


def _title_key(idx: NodeIndex) -> str:
    """The whole title as one term key (a person node titled "Caroline" → "caroline")."""
    key = term_key(idx.norm_title)
    return idx.norm_title if key == idx.norm_title else key  # one string object, not two


def _keys_of(norm_keywords: frozenset[str]) -> frozenset[str]:
    """Keyword keys (term_key); the very same frozenset when every key is its keyword."""
    keys = [(w, term_key(w)) for w in norm_keywords]
    if all(w == k for w, k in keys):
        return norm_keywords
    return frozenset(k for _, k in keys if k)


def _mixed(key: str) -> bool:
    """A key holding both CJK and other letters or digits (ktv包厢): found by substring."""
    return has_cjk(key) and any(ch.isalnum() and not has_cjk(ch) for ch in key)


def _contains_run(seq: tuple[str | None, ...], want: tuple[str, ...]) -> bool:
    n = len(want)
    return any(seq[i:i + n] == want for i in range(len(seq) - n + 1))


def _id_number(node_id: str) -> int | None:
    return int(node_id[1:]) if node_id[:1] == "m" and node_id[1:].isdigit() else None

