"""The fast loader: a format-3 state file as zcord writes it, checked by hand instead of by
pydantic, and the same state from memory-state.cache (nodecache.py). Whatever it does not
check itself it leaves to the pydantic path (parsing.parse_state), which accepts it or words
the error."""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import orjson
from pydantic import ValidationError

from . import nodecache
from .invariants import check_invariants, check_segments, check_unique
from .layout import HISTORY_DIR, STATE_FILE
from .models import MAX_IMPORTANT, NODE_ALIASES, STATE_VERSION, Change, Node, Relationship
from .state import MemoryState

_HEAD_KEYS = frozenset(("version", "nextId", "nodes", "important", "relationships", "historySegments", "history",
                        "scopes"))
_NODE_KEYS = frozenset(NODE_ALIASES)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No garbage-collection pass meanwhile (as it was before: a caller may have paused it)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class _NotFast(Exception):
    """The fast loader met something it does not check itself: the pydantic path decides."""


class LoadedTree:
    """The tree of nodes the fast loader built while reading them: children lists in file
    order, superseded nodes by their replacement, and whether every parentId and
    supersededBy names a node and every parent comes before its children (so no parent
    cycle is possible)."""

    __slots__ = ("children", "replaced", "checked")

    def __init__(self, children: dict[str | None, list[str]] | None, replaced: dict[str, set[str]],
                 checked: bool):
        self.children, self.replaced, self.checked = children, replaced, checked


class FastParts(NamedTuple):
    """A state file's parts as the fast loader checked them."""

    nodes: list[Node]
    head: dict[str, Any]
    """nextId, important and historySegments."""
    relationships: list[Relationship]
    history: list[Change]
    tree: LoadedTree


NodesFn = Callable[[Any], tuple[list[Node], LoadedTree]]


def fast_state(raw: bytes) -> FastParts | None:
    """A format-3 state file checked by hand, or None when anything is unusual, for the
    pydantic path to accept it or word the error.

    The hand checks accept a subset of what StateFile validation accepts (the JSON names,
    exact JSON types, times with an offset in the form zcord writes, or Z): every node goes
    through them (pydantic costs about 20 µs a node), the few relationships and inline
    changes through pydantic. A file laid out as zcord writes it (one node a line) is parsed
    a few hundred nodes at a time, so the parser's objects are freed as it goes (the whole
    document's would leave RAM fragmented and the peak high); any other layout is parsed
    whole."""
    split = _split_nodes(raw)
    if split is not None:
        head_raw, pieces = split
        try:
            return _fast_parts(orjson.loads(head_raw), _records(raw, pieces))
        except (_NotFast, orjson.JSONDecodeError):
            pass
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    try:
        records = doc.pop("nodes", []) if type(doc) is dict else None
        if type(records) is not list:
            return None
        return _fast_parts(doc, records)
    except _NotFast:
        return None


_NODES_OPEN = b'\n"nodes":[\n'
_NODES_CLOSE = b'],\n"relationships":['
_PIECE_BYTES = 256 << 10


def _split_nodes(raw: bytes) -> tuple[bytes, list[tuple[int, int]]] | None:
    """(the document without its nodes, pieces of its nodes array) for a state file laid out
    as StateSerializer writes it: the nodes array opens with a line break and holds one node
    a line (",\n" between them). Compact JSON has no raw line break inside a value, so a
    piece cut at a ",\n" holds whole nodes; None for any other layout."""
    i = raw.find(_NODES_OPEN, 0, 4096)
    if i < 0:
        return None
    start = i + len(_NODES_OPEN)
    j = raw.find(_NODES_CLOSE, start)
    if j < 0:
        return None
    pieces = []
    a = start
    while a < j:
        b = raw.find(b",\n", min(a + _PIECE_BYTES, j), j)
        if b < 0:
            b = j
        pieces.append((a, b))
        a = b + 2
    return raw[:start - 1] + raw[j:], pieces  # ..."nodes":[],\n"relationships":[...


def _records(raw: bytes, pieces: list[tuple[int, int]]) -> Iterator[Any]:
    """The parsed nodes of each piece in turn."""
    for a, b in pieces:
        yield from orjson.loads(b"[" + raw[a:b] + b"]")


def _fast_parts(doc: Any, records: Any, nodes_fn: NodesFn | None = None) -> FastParts:
    """Check a parsed state document (its nodes apart, as records: any iterable of parsed
    node objects, or memory-state.cache's rows with nodes_fn=_cached_nodes); _NotFast when
    the pydantic path must decide."""
    if type(doc) is not dict or not doc.keys() <= _HEAD_KEYS:
        raise _NotFast
    if doc.get("nodes", []) != []:
        raise _NotFast
    version, next_id = doc.get("version"), doc.get("nextId")
    if type(version) is not int or version != STATE_VERSION or type(next_id) is not int or next_id < 1:
        raise _NotFast
    head: dict[str, Any] = {"nextId": next_id}
    for key, limit in (("important", MAX_IMPORTANT), ("historySegments", None)):
        value = doc.get(key, [])
        if type(value) is not list or not all(type(v) is str for v in value) or \
                (limit is not None and len(value) > limit):
            raise _NotFast
        head[key] = value
    scopes = doc.get("scopes", {})
    if type(scopes) is not dict or not all(type(v) is str for v in scopes.values()):
        raise _NotFast
    head["scopes"] = scopes
    rels = doc.get("relationships", [])
    changes = doc.get("history", [])
    if type(rels) is not list or type(changes) is not list:
        raise _NotFast
    with collector_paused():  # 100,000 new objects, none of them in a cycle: no collection passes meanwhile
        nodes, tree = (nodes_fn or _fast_nodes)(records)
    try:
        rel_list = [Relationship.model_validate(r) for r in rels]
        history = [Change.model_validate(c) for c in changes]
    except ValidationError:
        raise _NotFast from None
    return FastParts(nodes, head, rel_list, history, tree)


def _fast_nodes(records: Iterable[Any]) -> tuple[list[Node], LoadedTree]:
    """Nodes from parsed records, and their tree (children in file order, superseded nodes by
    their replacement), built in the same pass."""
    ids: dict[str, str] = {}
    times: dict[str, datetime] = {}
    intern = sys.intern
    new = tuple.__new__
    get = ids.get
    fields = NODE_ALIASES
    known = _NODE_KEYS.issuperset
    nodes: list[Node] = []
    append = nodes.append
    forward = []  # nodes naming a node that comes later in the file
    children: dict[str | None, list[str]] = {None: []}
    kids = children.get
    replaced: dict[str, set[str]] = {}
    parents_first = True  # every parent comes before its children: no cycle, none unknown
    for rec in records:
        if type(rec) is not dict:
            raise _NotFast
        if len(rec) == 10 and tuple(rec) == fields:  # every field, in the order zcord writes them
            node_id, title, content, keywords, parent, source, created, updated, by, reason = rec.values()
        elif known(rec):
            node_id, title, content, keywords, parent, source, created, updated, by, reason = map(rec.get, fields)
        else:
            raise _NotFast  # a field Node does not have
        if type(node_id) is not str or type(title) is not str or type(content) is not str or node_id in ids:
            raise _NotFast  # missing, of another type, or a repeated id: the pydantic path words the error
        ids[node_id] = node_id
        if keywords is None:
            if "keywords" in rec:
                raise _NotFast
            keywords = ()
        elif type(keywords) is not list:
            raise _NotFast
        else:
            for k in keywords:
                if type(k) is not str:
                    raise _NotFast
        ahead = False
        if parent is not None:
            if type(parent) is not str:
                raise _NotFast
            shared = get(parent)
            if shared is None:
                ahead = True
                parents_first = False
            else:
                parent = shared
        if by is not None:
            if type(by) is not str:
                raise _NotFast
            shared = get(by)
            if shared is None:
                ahead = True
            else:
                by = shared
                replaced.setdefault(by, set()).add(node_id)  # superseded by an earlier node
        if (source is not None and type(source) is not str) or (reason is not None and type(reason) is not str):
            raise _NotFast
        c = times.get(created) if type(created) is str else None
        if c is None:
            c = times[created] = _fast_time(created)
        u = times.get(updated) if type(updated) is str else None
        if u is None:
            u = times[updated] = _fast_time(updated)
        if ahead:
            forward.append(len(nodes))
        append(new(Node, (node_id, title, content, tuple(map(intern, keywords)), parent, source, c, u, by, reason)))
        siblings = kids(parent)
        if siblings is None:
            children[parent] = [node_id]
        else:
            siblings.append(node_id)
    known_refs = parents_first
    for i in forward:  # share the id objects of nodes named before they came
        n = nodes[i]
        p = get(n.parent_id, n.parent_id) if n.parent_id is not None else None
        b = get(n.superseded_by, n.superseded_by) if n.superseded_by is not None else None
        if (p is not None and p not in ids) or (b is not None and b not in ids):
            known_refs = False
        nodes[i] = n = n.model_copy(update={"parent_id": p, "superseded_by": b})
        if b is not None:
            replaced.setdefault(b, set()).add(n.id)
    # when not known_refs, the children lists point to the ids as written: the state
    # rebuilds them from the nodes
    return nodes, LoadedTree(children if known_refs else None, replaced, known_refs)


def _cached_nodes(rows: list[tuple[Any, ...]]) -> tuple[list[Node], LoadedTree]:
    """Nodes from memory-state.cache's rows (written by zcord from a loaded state, checksummed:
    not checked field by field), and their tree, as _fast_nodes gives them. The writer's
    shared strings (a parent's id and its children's parentId, interned keywords) come back
    shared: marshal keeps one copy of an object it meets twice.

    Each row is emptied from `rows` as its node is made (the caller's list is used up): the
    row's tuple is freed then, and the node, a tuple of the same size, takes its memory, so
    the rows leave no hole behind them (12 MiB of 128-byte blocks at 100,000 memories that
    nothing else of that size filled). A node's two times are one object when they are
    equal, as the JSON path gives them, and times of one offset share its tzinfo (`_Times`)."""
    new = tuple.__new__
    iso = _Times().parse
    ids: dict[str, str] = {}
    nodes: list[Node] = []
    append = nodes.append
    children: dict[str | None, list[str]] = {None: []}
    kids = children.get
    replaced: dict[str, set[str]] = {}
    parents_first = True
    later = []  # superseded by a node that comes later in the file
    for i in range(len(rows)):
        node_id, title, content, keywords, parent, source, created, updated, by, reason = rows[i]
        rows[i] = ()  # the row's tuple is freed: the node made next takes its memory
        ids[node_id] = node_id
        if parent is not None and parent not in ids:
            parents_first = False
        if by is not None:
            if by in ids:
                replaced.setdefault(by, set()).add(node_id)
            else:
                later.append((by, node_id))
        c = iso(created)
        append(new(Node, (node_id, title, content, keywords, parent, source, c,
                          c if updated == created else iso(updated), by, reason)))
        siblings = kids(parent)
        if siblings is None:
            children[parent] = [node_id]
        else:
            siblings.append(node_id)
    known_refs = parents_first
    for by, node_id in later:
        if by not in ids:
            known_refs = False
        replaced.setdefault(by, set()).add(node_id)
    return nodes, LoadedTree(children if known_refs else None, replaced, known_refs)


class _Times:
    """Times as memory-state.cache writes them (`datetime.isoformat`), each time of one UTC
    offset with that offset's tzinfo object: `datetime.fromisoformat` makes a timezone and a
    timedelta for every time (80 bytes, 8 MiB at 100,000 memories). The time is the one
    fromisoformat gives (a fixed offset: its wall time is the parsed one, moved onto the
    first time of that offset by the difference of the two naive times)."""

    def __init__(self) -> None:
        self.zones: dict[str, tuple[datetime, datetime]] = {}  # "+08:00" -> (a time, that time naive)

    def parse(self, text: str) -> datetime:
        zone = text[-6:]
        got = self.zones.get(zone)
        if got is not None:
            return got[0] + (datetime.fromisoformat(text[:-6]) - got[1])
        at = datetime.fromisoformat(text)
        if len(zone) == 6 and zone[0] in "+-" and zone[3] == ":" and at.tzinfo is not None:  # not Z, no seconds in the offset
            self.zones[zone] = (at, at.replace(tzinfo=None))
        return at


def _fast_time(text: Any) -> datetime:
    """A time in the form zcord writes (2026-01-31T20:00:00.000+08:00, 0-6 fraction digits,
    or Z): its datetime."""
    if type(text) is not str:
        raise _NotFast
    n = len(text)
    if n < 20 or n > 32 or text[4] != "-" or text[7] != "-" or text[10] != "T" or text[13] != ":" \
            or text[16] != ":":
        raise _NotFast
    if text[-1] == "Z":
        body = n - 1
    elif text[-3] == ":" and text[-6] in "+-":
        body = n - 6
    else:
        raise _NotFast
    if body != 19 and not (text[19] == "." and 21 <= body <= 26):
        raise _NotFast
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise _NotFast from None


def state_of_fast(fast: FastParts, name: str, history_dir: Path | None) -> MemoryState:
    """The state of a file fast_state checked (its node ids are distinct: checked)."""
    nodes, head, rels, history, tree = fast
    check_unique(rels, lambda r: r.person_id, "personId", name)
    check_segments(head["historySegments"], history_dir, name)
    state = MemoryState(nodes, head["important"], rels, history, head["nextId"], head["historySegments"],
                        tree=(tree.children, tree.replaced) if tree.children is not None else None,
                        scopes=head.get("scopes"))
    check_invariants(state, name, nodes_checked=tree.checked)
    return state


def state_of_cache(memdir: Path) -> tuple[MemoryState, dict[str, Any]] | None:
    """(the state, the header of the node cache it came from) from memory-state.cache and the
    state file's other parts, when the cache belongs to the state file as it is
    (nodecache.read); None to parse the state file."""
    header: dict[str, Any] = {}
    got = nodecache.read(memdir, memdir / STATE_FILE, header)
    if got is None:
        return None
    head_raw, rows = got
    try:
        fast = _fast_parts(orjson.loads(head_raw), rows, _cached_nodes)
        return state_of_fast(fast, STATE_FILE, memdir / HISTORY_DIR), header
    except Exception:  # anything at all: the state file decides, and words any error
        return None
