"""Consolidation proposals (issue 38): clusters of near-duplicate current memories, and
superseded chains that can be folded, for an operator to review (`zcor/consolidate/list`).

Nothing here changes the Memory: a cluster is merged with `zcor_memory_merge` (the operator
chooses the title and content) and a chain folded with `zcor_memory_delete` of its old
versions, both ordinary logged, revertible calls made by the client. A proposal the
operator dismisses is remembered in `consolidate.json` and not proposed again.

The twin pairs come from the twin index (zcord.retrieval.twins): every memory whose index
entry changes (a write, a merge, the background build) has its neighbourhood worked out
again, and only it; the index's build and these updates run in the background
(Service.build_twins), a few at a time under the lock.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import InvalidArgument, StateFileInvalid
from ..core.fsutil import atomic_write, read_plain_file
from ..core.models import Node

if TYPE_CHECKING:
    from ..core.state import MemoryState
    from ..retrieval.twins import TwinIndex

CONSOLIDATE_FILE = "consolidate.json"
NEIGHBOURS = 10
"""Twins kept per memory."""
SYNC_INLINE = 2000
"""Memories whose neighbourhood a list works out itself; more are left to the background."""
BACKGROUND_FROM = 1000
"""Changed memories from which their neighbourhoods are worked out in the background."""
MAX_DISMISSED = 10_000
"""Dismissed proposals remembered (the oldest forgotten first)."""
MAX_CLUSTER = 20
"""Members shown of one cluster (the newest)."""
KINDS = ("twins", "chain")


class Consolidation:
    """The twin pairs among current memories, kept in step with the twin index, and the
    operator's dismissed proposals. Callers hold the service lock."""

    def __init__(self, twins: TwinIndex, state_ref: Callable[[], MemoryState], path: Path) -> None:
        self.twins = twins
        self._state_ref = state_ref
        self.path = path
        self.edges: dict[str, dict[str, float]] = {}
        self.dirty: dict[str, None] = {}
        self.dismissed: list[frozenset[str]] = []
        twins.on_change = self._changed

    def load(self) -> None:
        """consolidate.json (missing: nothing dismissed; unreadable: StateFileInvalid)."""
        try:
            raw = read_plain_file(self.path)
        except FileNotFoundError:
            self.dismissed = []
            return
        try:
            data = json.loads(raw)
            groups = data["dismissed"]
            if data.get("version") != 1 or not isinstance(groups, list) or not all(
                    isinstance(g, list) and all(isinstance(i, str) for i in g) for g in groups):
                raise ValueError("not version 1 with a list of id lists")
        except (ValueError, KeyError, TypeError) as e:
            raise StateFileInvalid(f"{self.path.name} cannot be read ({e}); fix or remove it") from None
        self.dismissed = [frozenset(g) for g in groups]

    # -- following the twin index -------------------------------------------------------------

    def _changed(self, node_id: str | None) -> None:
        if node_id is None:
            self.edges.clear()
            self.dirty.clear()
        else:
            self.dirty[node_id] = None
            if len(self.dirty) == BACKGROUND_FROM and self.twins.on_pending is not None:
                self.twins.on_pending()  # many writes since the last list: the background catches up

    @property
    def pending(self) -> int:
        return len(self.dirty)

    def step(self, n: int = 200) -> bool:
        """Work out up to n changed memories' neighbourhoods; False when none is left."""
        twins = self.twins
        twins.sync()
        for _ in range(min(n, len(self.dirty))):
            node_id = next(iter(self.dirty))
            del self.dirty[node_id]
            for other in self.edges.pop(node_id, {}):
                peers = self.edges.get(other)
                if peers is not None:
                    peers.pop(node_id, None)
                    if not peers:
                        del self.edges[other]
            if node_id not in twins.entries:
                continue
            for t in twins.neighbours(node_id, limit=NEIGHBOURS):
                self.edges.setdefault(node_id, {})[t.id] = t.score
                self.edges.setdefault(t.id, {})[node_id] = t.score
        if not self.dirty:
            self.dirty = {}  # a dict keeps the table it grew to (5 MiB after a build of 100,000)
        return bool(self.dirty)

    def ready(self) -> bool:
        """Catch up when little is left; True when every memory's neighbourhood is known."""
        self.twins.ready()
        if self.twins.pending == 0 and 0 < len(self.dirty) <= SYNC_INLINE and not self.twins.building:
            while self.step(SYNC_INLINE):
                pass
        return self.twins.pending == 0 and not self.dirty

    # -- proposals ----------------------------------------------------------------------------

    def _hidden(self, ids: frozenset[str]) -> bool:
        return any(ids <= d for d in self.dismissed)

    def proposals(self, hidden_ids: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
        """Every proposal not dismissed: twin clusters (best pair first), then folding chains."""
        st = self._state_ref()
        nodes = st.nodes
        seen: set[str] = set()
        out: list[tuple[tuple[float, float], dict[str, Any]]] = []
        for start in self.edges:
            if start in seen:
                continue
            group, todo = [], [start]
            seen.add(start)
            while todo:
                i = todo.pop()
                group.append(i)
                for j in self.edges.get(i, ()):
                    if j not in seen:
                        seen.add(j)
                        todo.append(j)
            live = [i for i in group if i in nodes and nodes[i].superseded_by is None and i not in hidden_ids]
            if len(live) < 2 or self._hidden(frozenset(live)):
                continue
            live.sort(key=lambda i: (-nodes[i].updated_at.timestamp(), i))
            live = live[:MAX_CLUSTER]
            pairs = sorted({(min(a, b), max(a, b), s) for a in live for b, s in self.edges.get(a, {}).items()
                            if b in live}, key=lambda p: -p[2])
            best = pairs[0][2] if pairs else 0.0
            item = {"kind": "twins", "ids": live, "newest": live[0], "score": best,
                    "pairs": [{"ids": [a, b], "score": s} for a, b, s in pairs],
                    "members": [_member(nodes[i]) for i in live]}
            out.append(((-best, -nodes[live[0]].updated_at.timestamp()), item))
        out.sort(key=lambda x: x[0])
        chains = []
        for target in st.replaced:
            node = nodes.get(target)
            if node is None or node.superseded_by is not None or target in hidden_ids:
                continue
            older = _chain(st, target)
            if not _foldable(st, older):
                continue
            ids = [target, *reversed(older)]
            if self._hidden(frozenset(ids)):
                continue
            chains.append(((-nodes[target].updated_at.timestamp(), target),
                           {"kind": "chain", "ids": ids, "newest": target, "fold": older,
                            "members": [_member(nodes[i]) for i in ids]}))
        chains.sort(key=lambda x: x[0])
        return [item for _, item in out] + [item for _, item in chains]

    def dismiss(self, ids: Any) -> dict[str, Any]:
        """Remember a proposal's ids as dismissed (consolidate.json, atomically)."""
        if not isinstance(ids, list) or len(ids) < 2 or not all(isinstance(i, str) and i for i in ids) \
                or len(set(ids)) != len(ids):
            raise InvalidArgument("ids must be the proposal's ids: two or more distinct memory ids", field="ids")
        if len(ids) > 1000:
            raise InvalidArgument("ids may hold at most 1000 memory ids", field="ids")
        key = frozenset(ids)
        kept = [d for d in self.dismissed if not d <= key]
        if not any(key <= d for d in kept):
            kept.append(key)
        kept = kept[-MAX_DISMISSED:]
        data = {"version": 1, "dismissed": [sorted(d) for d in kept]}
        atomic_write(self.path, (json.dumps(data, ensure_ascii=False, indent=0) + "\n").encode())
        self.dismissed = kept
        return {"dismissed": sorted(key), "remembered": len(kept)}


def _member(node: Node) -> dict[str, Any]:
    d = node.dump()
    return {k: d[k] for k in ("id", "title", "content", "keywords", "parentId", "createdAt", "updatedAt",
                              "supersededBy", "supersedeReason")}


def _chain(st: MemoryState, target: str) -> list[str]:
    """The superseded memories leading to target (directly or through others), in an order
    they can be deleted in: each after every memory it replaced."""
    out: list[str] = []
    todo = sorted(st.replaced.get(target, ()))
    seen = set(todo)
    while todo:
        i = todo.pop(0)
        out.append(i)
        for j in sorted(st.replaced.get(i, ())):
            if j not in seen:
                seen.add(j)
                todo.append(j)
    out.reverse()
    return out


def _foldable(st: MemoryState, older: list[str]) -> bool:
    """A chain worth folding: a version replaced by a version that was itself replaced (two
    or more old versions in a row), none of them with children or relationship links (which
    a delete would refuse)."""
    if not any(st.replaced.get(i) for i in older):
        return False
    return all(not st.child_ids(i) and not st.links.get(i) for i in older)
