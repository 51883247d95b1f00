"""Recall and search as if held changes had not happened (issue 33, "held means invisible").

A change held for review is applied to the Memory, so the live indexes already know of it: a
held supersede or merge took its sources out of the word tables, a held delete took the
memory out, a held rewrite indexed the new words. The model must see none of that before an
operator approves. `ApprovedView` lays the memories held changes touched over the live state
as last approved: their live entries are masked, their approved versions indexed in a small
index of their own, and ranking reads both as one (the same BM25 statistics, with the
counts corrected), so a held memory ranks as it would had the change not been made.

Only the memories held changes touched are rebuilt (review caps them per sender), never the
live indexes; with nothing held the live state is used as it is.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from ..core.indexes import RetrievalIndexes
from ..core.models import Node, Relationship
from ..core.text import has_cjk

MEMO_FROM = 64
"""Live id sets larger than this have their masked copy kept between calls."""
MEMO_KEYS = 20_000


class _Source:
    """The approved versions as a NodeSource of their own (ranks by position)."""

    def __init__(self, nodes: dict[str, Node]):
        self.nodes = nodes
        self.rank = {i: k for k, i in enumerate(nodes, 1)}
        self.by_rank: list[str | None] = [None, *nodes]


def _without(ids: AbstractSet[str] | None, masked: frozenset[str]) -> AbstractSet[str]:
    if not ids:
        return frozenset()
    return ids if masked.isdisjoint(ids) else ids - masked


class _Union:
    """A postings table of the live indexes without the masked ids, with the small one's."""

    def __init__(self, live: Any, small: Any, masked: frozenset[str]):
        self.live, self.small, self.masked = live, small, masked

    def get(self, key: str, default: Any = None) -> Any:
        got = _without(self.live.get(key), self.masked)
        more = self.small.get(key)
        if more:
            got = got | more if got else more
        return got if got else default

    def __contains__(self, key: object) -> bool:
        return bool(self.get(key))  # type: ignore[arg-type]


class ApprovedIndexes:
    """What ranking reads of a state's RetrievalIndexes, with the touched memories as approved."""

    def __init__(self, live: RetrievalIndexes, small: RetrievalIndexes, masked: frozenset[str],
                 live_nodes: Mapping[str, Node], memo: dict[tuple[str, str], tuple[AbstractSet[str] | None, AbstractSet[str]]] | None = None):
        self.memo = memo if memo is not None else {}
        live.ensure_index()
        small.ensure_index()
        self.live, self.small, self.masked = live, small, masked
        gone = 0
        gone_len = 0.0
        for i in masked:
            idx = live.index.get(i)
            node = live_nodes.get(i)
            if idx is not None and node is not None and node.superseded_by is None:
                gone += 1
                gone_len += idx.title_len
        self.current_count = live.current_count - gone + small.current_count
        self._title_len_sum = live.title_len_sum - gone_len + small.title_len_sum
        self.index = ChainMap(small.index, live.index)
        self.keyword_ids = _Union(live.keyword_ids, small.keyword_ids, masked)
        self.title_keys = _Union(live.title_keys, small.title_keys, masked)
        self.title_stem_keys = _Union(live.title_stem_keys, small.title_stem_keys, masked)
        self.mixed_keywords = live.mixed_keywords

    def ensure_index(self) -> None:
        self.live.ensure_index()
        self.small.ensure_index()

    def ensure_stems(self) -> None:
        self.live.ensure_stems()
        self.small.ensure_stems()

    @property
    def generation(self) -> tuple[int, int]:
        """Changes when a title of either part does (ranking keeps a lone character's hits by
        the indexes object and this)."""
        return (self.live.generation, self.small.generation)

    @property
    def avg_title_len(self) -> float:
        return self._title_len_sum / self.current_count if self.current_count else 1.0

    def _both(self, live: AbstractSet[str] | None, small: AbstractSet[str] | None,
              memo_key: tuple[str, str] | None = None) -> AbstractSet[str]:
        # a common term's live ids are a large frozenset the postings keep while the term is
        # unchanged: its masked copy is kept too (ApprovedViews' memo), checked by identity
        big = memo_key is not None and type(live) is frozenset and len(live) > MEMO_FROM
        if big:
            hit = self.memo.get(memo_key)  # type: ignore[arg-type]
            if hit is not None and hit[0] is live:
                return hit[1]
        got = _without(live, self.masked)
        out = (got | small if got else small) if small else got
        if big:
            if len(self.memo) >= MEMO_KEYS:
                self.memo.clear()
            self.memo[memo_key] = (live, out)  # type: ignore[index]
        return out

    def title_hits(self, key: str) -> AbstractSet[str]:
        return self._both(self.live.title_hits(key), self.small.title_hits(key), ("t", key))

    def stem_hits(self, key: str) -> AbstractSet[str]:
        return self._both(self.live.stem_hits(key), self.small.stem_hits(key), ("s", key))

    def keyword_stem_ids(self, key: str) -> AbstractSet[str] | None:
        return self._both(self.live.keyword_stem_ids(key), self.small.keyword_stem_ids(key), ("k", key)) or None

    def is_stem_title(self, key: str) -> bool:
        live, small = self._title_tables(key)
        return bool(self._both(live.get(key), small.get(key)))

    def _title_tables(self, key: str) -> tuple[Any, Any]:
        if has_cjk(key):
            return self.live.title_keys, self.small.title_keys
        return self.live.title_stem_keys, self.small.title_stem_keys


class _Nodes(Mapping[str, Node]):
    """Live nodes with each touched memory as approved: absent when it had no approved version
    (though a parent chain may still pass through it, so reading it gives the live one)."""

    def __init__(self, live: Mapping[str, Node], approved: dict[str, Node], masked: frozenset[str]):
        self._live, self._approved, self._masked = live, approved, masked

    def __getitem__(self, key: str) -> Node:
        got = self._approved.get(key)
        return got if got is not None else self._live[key]

    def __contains__(self, key: object) -> bool:
        if key in self._approved:
            return True
        return key not in self._masked and key in self._live

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default

    def __iter__(self) -> Iterator[str]:
        return iter(self._live)

    def __len__(self) -> int:
        return len(self._live)


class _Children:
    """state.children with the touched memories under their approved parents."""

    def __init__(self, live: dict[str | None, list[str]], patched: dict[str | None, list[str]]):
        self._live, self._patched = live, patched

    def get(self, key: str | None, default: Any = None) -> Any:
        if key in self._patched:
            return self._patched[key] or default
        return self._live.get(key, default)

    def __getitem__(self, key: str | None) -> list[str]:
        got: list[str] | None = self.get(key)
        if got is None:
            raise KeyError(key)
        return got


class _Rels(Mapping[str, Relationship]):
    """Live relationships with each held one as last approved (absent when it had none)."""

    def __init__(self, live: Mapping[str, Relationship], approved: Mapping[str, Relationship | None]):
        self._live, self._approved = live, approved

    def __getitem__(self, key: str) -> Relationship:
        if key in self._approved:
            got = self._approved[key]
            if got is None:
                raise KeyError(key)
            return got
        return self._live[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._live)

    def __len__(self) -> int:
        return len(self._live)


class ApprovedState:
    """A MemoryState as ranking and the tools read it, with the held changes' memories as last
    approved (`nodes`, `indexes`, `children`); everything else is the live state's."""

    def __init__(self, state: Any, approved: dict[str, Node], masked: frozenset[str], small: RetrievalIndexes,
                 rels: Mapping[str, Relationship | None] | None = None,
                 memo: dict[tuple[str, str], tuple[Any, Any]] | None = None):
        self._state = state
        self.approved = approved
        self.masked = masked
        self.nodes = _Nodes(state.nodes, approved, masked)
        self.indexes = ApprovedIndexes(state.indexes, small, masked, state.nodes, memo)
        patched: dict[str | None, list[str]] = {}
        for i in masked:
            live = state.nodes.get(i)
            was = approved.get(i)
            old_parent = live.parent_id if live is not None else None
            new_parent = was.parent_id if was is not None else None
            if live is not None and (was is None or old_parent != new_parent):
                kids = patched.setdefault(old_parent, list(state.children.get(old_parent, ())))
                if i in kids:
                    kids.remove(i)
            if was is not None and (live is None or old_parent != new_parent):
                kids = patched.setdefault(new_parent, list(state.children.get(new_parent, ())))
                if i not in kids:
                    kids.append(i)
        self.children = _Children(state.children, patched)
        self.relationships: Mapping[str, Relationship] = state.relationships
        self.links: Mapping[str, AbstractSet[str]] = state.links
        if rels:
            self.relationships = _Rels(state.relationships, rels)
            links = dict(state.links)
            for pid, as_approved in rels.items():
                live_rel = state.relationships.get(pid)
                old_node = live_rel.memory_node_id if live_rel is not None else None
                new_node = as_approved.memory_node_id if as_approved is not None else None
                if old_node == new_node:
                    continue
                if old_node is not None and old_node in links:
                    links[old_node] = set(links[old_node]) - {pid}
                    if not links[old_node]:
                        del links[old_node]
                if new_node is not None:
                    links[new_node] = {*links.get(new_node, ()), pid}
            self.links = links

    def __getattr__(self, name: str) -> Any:
        return getattr(self._state, name)


class ApprovedViews:
    """Builds the ApprovedState of the live state for the held changes' last approved versions
    (`approved`: memory id -> its approved dump, None when it had none; `removed`: the ids a
    held delete, supersede or merge took away), keeping the small index while those stay."""

    def __init__(self) -> None:
        self._for: Mapping[str, Any] | None = None  # the approved mapping parsed (held: no id reuse)
        self._parsed: dict[str, Node | None] = {}
        self._shown: frozenset[str] | None = None
        self._small: RetrievalIndexes | None = None
        self._masked: frozenset[str] = frozenset()
        self._memo: dict[tuple[str, str], tuple[Any, Any]] = {}
        """Masked copies of large live id sets, kept while the small index and the mask stay."""
        self._rels_for: Mapping[str, Any] | None = None
        self._rels: dict[str, Relationship | None] = {}

    def view(self, state: Any, approved: Mapping[str, dict[str, Any] | None], removed: AbstractSet[str],
             rels: Mapping[str, dict[str, Any] | None] | None = None) -> ApprovedState | None:
        """None when nothing is held (read the live state). `rels`: personId -> the approved
        version of each relationship a held change touched (None when it had none)."""
        if not approved and not rels:
            return None
        if self._for is not approved:
            self._for = approved
            self._parsed = {i: Node.model_validate(v) if v is not None else None for i, v in approved.items()}
            self._shown = None
        if self._rels_for is not rels:
            self._rels_for = rels
            self._rels = {p: Relationship.model_validate(v) if v is not None else None
                          for p, v in (rels or {}).items()}
        parsed = self._parsed
        live = state.nodes
        shown: dict[str, Node] = {}
        for i, node in parsed.items():
            if node is None:
                continue
            now = live.get(i)
            if (now is None or now.superseded_by is not None) and i not in removed:
                continue  # taken away since by a change that was not held: gone as approved too
            shown[i] = node
        ids = frozenset(shown)
        if self._shown != ids or self._small is None:
            source = _Source(shown)
            small = RetrievalIndexes(source, source.by_rank)
            for i, node in shown.items():
                small.index_node(node, source.rank[i])
            self._small, self._shown = small, ids
            self._memo = {}
        masked = frozenset(approved)
        if masked != self._masked:
            self._masked, self._memo = masked, {}
        return ApprovedState(state, shown, masked, self._small, self._rels, self._memo)
