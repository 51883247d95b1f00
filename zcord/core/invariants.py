"""What every loaded state must satisfy, whatever file it came from: memory ids and
personIds unique, references that name nodes, no parent cycle, sealed history segments
named in order (and present). A state that fails is refused with StateFileInvalid."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from .errors import StateFileInvalid
from .layout import HISTORY_DIR, SEGMENT_RE
from .models import Node
from .state import MemoryState

T = TypeVar("T")


def check_invariants(state: MemoryState, name: str, nodes_checked: bool = False) -> None:
    """Refuse a state whose references do not hold (the tools never produce one). Linear:
    each node's parent chain is walked once; not at all when the loader already found every
    reference known and every parent before its children (nodes_checked)."""
    problems = []
    nodes = state.nodes
    for node in () if nodes_checked else nodes.values():
        if node.parent_id is not None and node.parent_id not in nodes:
            problems.append(f"node {node.id} has unknown parent {node.parent_id}")
        if node.superseded_by is not None and node.superseded_by not in nodes:
            problems.append(f"node {node.id} is superseded by unknown node {node.superseded_by}")
    done: set[str] = set()  # nodes whose chain ends at a root or an unknown parent
    for node_id, node in () if nodes_checked else nodes.items():
        parent = node.parent_id
        if parent is None or parent in done:
            done.add(node_id)  # the usual case: parents come before their children
            continue
        path: dict[str, None] = {}
        cur: str | None = node_id
        while cur is not None and cur not in done and cur in nodes:
            if cur in path:
                problems.append(f"parent cycle through node {cur}")
                break
            path[cur] = None
            cur = nodes[cur].parent_id
        done.update(path)
    if len(set(state.important)) != len(state.important):
        problems.append("the important list repeats an id")
    for node_id in state.important:
        if node_id not in nodes:
            problems.append(f"important id {node_id} names no node")
    for rel in state.relationships.values():
        if rel.memory_node_id is not None and rel.memory_node_id not in nodes:
            problems.append(f"relationship {rel.person_id} links unknown node {rel.memory_node_id}")
    if problems:
        raise StateFileInvalid(f"{name} is inconsistent: " + "; ".join(problems[:5]))


def check_unique(items: Iterable[T], key: Callable[[T], Any], what: str, name: str) -> None:
    """StateFileInvalid naming the first key that two items share."""
    seen = set()
    for item in items:
        k = key(item)
        if k in seen:
            raise StateFileInvalid(f"{name}: {what} {k!r} appears twice")
        seen.add(k)


def check_segments(names: list[str], history_dir: Path | None, name: str) -> None:
    """The sealed segments' names follow on from each other (the first starts at change 1);
    with history_dir, each file is there too."""
    last = 0
    for seg in names:
        m = SEGMENT_RE.match(seg)
        if not m or int(m.group(1)) != last + 1:
            raise StateFileInvalid(f"{name}: history segment {seg!r} is misnamed or out of order")
        last = int(m.group(2))
        if history_dir is not None and not (history_dir / seg).is_file():
            raise StateFileInvalid(f"{name}: history segment {HISTORY_DIR}/{seg} is missing; restore it "
                                   f"from a copy of the Memory directory")


def share_ids(nodes: list[Node]) -> list[Node]:
    """The nodes with each parentId / supersededBy that names a node being that node's own
    id object (one string in RAM, not one per reference)."""
    ids = {n.id: n.id for n in nodes}
    out = []
    for n in nodes:
        p, s = n.parent_id, n.superseded_by
        if (p is not None and ids.get(p, p) is not p) or (s is not None and ids.get(s, s) is not s):
            n = n.model_copy(update={"parent_id": ids.get(p, p) if p is not None else None,
                                     "superseded_by": ids.get(s, s) if s is not None else None})
        out.append(n)
    return out
