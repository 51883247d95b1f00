"""The Memory directory: lock, load with migration, atomic save, backups.

Layout: memory-state.json (format 3), operations.jsonl (the operation log, see oplog.py),
synonyms.json, config.json, PERSONA.md, backups/, blobs/, zcord.lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gc
import json
import os
import re
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from . import indexcache, nodecache
from .errors import InvalidArgument, MemoryDirInUse, NotFound, StateFileInvalid, StorageError
from .fsutil import atomic_write, fsync_dir, make_dir, read_nofollow, remove_stale_tmp
from .journal import SnapshotPos, read_pos, replay, write_pos
from .models import (
    MAX_IMPORTANT,
    NODE_ALIASES,
    STATE_VERSION,
    Change,
    Node,
    NodeModel,
    Relationship,
    StateFile,
)
from .persona import PERSONA_TEMPLATE
from .state import MemoryState, Migration
from .text import derive_keywords

STATE_FILE = "memory-state.json"
LEGACY_FILE = "memories.json"
OPLOG_FILE = "operations.jsonl"
SYNONYMS_FILE = "synonyms.json"
CONFIG_FILE = "config.json"
PERSONA_FILE = "PERSONA.md"
LOCK_FILE = "zcord.lock"
BACKUPS_DIR = "backups"
BLOBS_DIR = "blobs"
HISTORY_DIR = "history"
# Inline change history is sealed into a segment file once its JSON passes this size, so a
# save rewrites the nodes and recent changes only, not the whole (unbounded) history.
SEAL_BYTES = 1 << 20
_SEGMENT_RE = re.compile(r"^changes-(\d{9})-(\d{9})\.jsonl$")

_NODE_ID_RE = re.compile(r"^m(\d+)$")
BOT_BACKUP_RE = re.compile(r"^memory-state-.+-bot(-\d+)?\.json$")
"""Backups made by the bot's zcor_memory_backup calls: pruned."""
PRE_RESTORE_RE = re.compile(r"^memory-state-.+-bot-prerestore(-\d+)?\.json$")
"""The copy taken before a restore the bot asked for: never pruned (it is the way back)."""



@dataclass(frozen=True)
class RestoreLimits:
    """Restore input bounds (config.json: maxRestoreBytes, maxRestoreNodes,
    maxRestoreRelationships, maxRestoreDepth; the defaults are config.py's): a larger file,
    more memories or relationships, or JSON nested deeper is invalid_argument naming the
    setting, so a crafted file cannot hold the daemon."""

    bytes: int = 512 << 20
    nodes: int = 200_000
    relationships: int = 200_000
    depth: int = 64

    @classmethod
    def of(cls, cfg: Any) -> RestoreLimits:
        return cls(cfg.max_restore_bytes, cfg.max_restore_nodes, cfg.max_restore_relationships,
                   cfg.max_restore_depth)


def nesting_depth(value: Any, limit: int, start: int = 1) -> int:
    """How deep arrays and objects nest in a parsed JSON value that sits at depth `start`
    (a container there counts as that deep), counted up to limit + 1."""
    level = [value] if type(value) in (dict, list) else []
    depth = start - 1
    while level and depth <= limit:
        depth += 1
        inner = []
        for c in level:
            inner.extend(v for v in (c.values() if type(c) is dict else c) if type(v) in (dict, list))
        level = inner
    return depth


class LockLost(StorageError):
    """The Memory directory or its lock file is no longer the one this process locked."""




def default_synonyms_bytes() -> bytes:
    """The default synonym groups: packaged into zcord by the build, else (a source checkout
    or an editable install) the top-level synonyms.json, which is the one source of both."""
    packaged = resources.files("zcord").joinpath(SYNONYMS_FILE)
    if packaged.is_file():
        return packaged.read_bytes()
    return (Path(__file__).resolve().parents[2] / SYNONYMS_FILE).read_bytes()


def create_new(path: Path, data: bytes, mode: int = 0o640) -> bool:
    """Write a new file at path, complete or not at all, never replacing one that exists
    (the content goes to a temporary file that is then hard-linked into place)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")  # cleaned at start if left
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    try:
        try:
            os.fchmod(fd, mode)  # the same mode under any umask
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
    finally:
        os.unlink(tmp)
    fsync_dir(path.parent)
    return True


def describe_validation(err: ValidationError, limit: int = 3) -> str:
    parts = []
    for e in err.errors()[:limit]:
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        parts.append(f"{loc}: {e['msg']}")
    more = len(err.errors()) - limit
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)


class StateSerializer:
    """Builds the bytes of memory-state.json; keeps the encoded inline history between calls
    (history entries never change once written). Nodes are encoded afresh each time: the
    snapshot is written in the background, and a per-node cache would double the RAM."""

    def __init__(self) -> None:
        self._history = bytearray()
        self._history_count = 0
        self._history_tail: Change | None = None

    def _encode_history(self, history: list[Change]) -> None:
        n = self._history_count
        if n > len(history) or (n and history[n - 1] is not self._history_tail):
            # the encoded prefix is not this history's prefix (rolled back, or sealed)
            self._history = bytearray()
            self._history_count = 0
        for change in history[self._history_count:]:
            if self._history:
                self._history += b",\n"
            self._history += change.model_dump_json(by_alias=True).encode()
        self._history_count = len(history)
        self._history_tail = history[-1] if history else None

    @property
    def inline_history_bytes(self) -> int:
        return len(self._history)

    def reset_history(self) -> None:
        self._history = bytearray()
        self._history_count = 0
        self._history_tail = None

    def history_lines(self) -> bytes:
        """The encoded inline history as JSON lines (compact JSON has no raw newlines)."""
        return bytes(self._history).replace(b",\n", b"\n") + b"\n"

    def encode(self, state: MemoryState | StateView, sealed: list[str] | None = None,
               history_blob: bytes | None = None) -> bytes:
        """The state file's bytes.

        Args:
            sealed: segment names to write instead of the state's (used when sealing).
            history_blob: inline history to write instead of the state's encoded one.
        """
        return b"".join(self.encode_parts(state, sealed, history_blob))

    def encode_parts(self, state: MemoryState | StateView, sealed: list[str] | None = None,
                     history_blob: bytes | None = None):
        """The state file's bytes in pieces of up to 1,024 nodes (written as they come, so a
        snapshot never holds the whole file in memory)."""
        if history_blob is None:
            self._encode_history(state.history)
            history_blob = bytes(self._history)
        segments = state.history_segments if sealed is None else sealed
        yield b'{"version":%d,"nextId":%d,\n"important":' % (STATE_VERSION, state.next_id)
        yield json.dumps(state.important, ensure_ascii=False).encode()
        yield b',\n"nodes":[\n'
        part: list[bytes] = []
        first = True
        for node in state.nodes.values():
            part.append(node.model_dump_json(by_alias=True).encode())
            if len(part) == 1024:
                yield (b"" if first else b",\n") + b",\n".join(part)
                first, part = False, []
                time.sleep(0)  # let a call in another thread have the interpreter
        if part:
            yield (b"" if first else b",\n") + b",\n".join(part)
        yield b'],\n"relationships":[\n'
        yield b",\n".join(rel.model_dump_json(by_alias=True).encode() for rel in state.relationships.values())
        yield b'],\n"historySegments":' + json.dumps(segments).encode()
        yield b',\n"history":[\n'
        yield history_blob
        yield b"]}\n"


@dataclass
class StateView:
    """What a snapshot writes, copied from the state between calls (nodes and relationships
    are immutable objects, so copying the dicts is enough)."""

    nodes: dict[str, Node]
    important: list[str]
    relationships: dict[str, Relationship]
    history: list[Change]
    next_id: int
    history_segments: list[str]

    @classmethod
    def of(cls, state: MemoryState) -> StateView:
        return cls(dict(state.nodes), list(state.important), dict(state.relationships), list(state.history),
                   state.next_id, list(state.history_segments))

    @property
    def last_change_id(self) -> int:
        if self.history:
            return self.history[-1].change_id
        if not self.history_segments:
            return 0
        return int(self.history_segments[-1].rsplit("-", 1)[1].split(".")[0])


@dataclass(frozen=True)
class Seal:
    """History sealed into a segment by a snapshot: the state must drop these inline
    changes (first_id..last_id) and name the segment."""

    segment: str
    first_id: int
    last_id: int


# An epoch number above this is milliseconds (1e11 ms is March 1973; 1e11 s is year 5138).
EPOCH_MS_ABOVE = 1e11


def parse_time(value: Any, where: str) -> datetime:
    """Times in old files: ISO 8601 (naive ones taken as UTC) or an epoch number.

    An epoch number whose magnitude is above EPOCH_MS_ABOVE is milliseconds (what JavaScript's
    Date.now() writes), anything else seconds. A number that is no time (NaN, infinite, beyond
    the year 9999) is a clear StateFileInvalid, like any other bad value.
    """
    if isinstance(value, bool):
        raise StateFileInvalid(f"{where}: expected a time, got {value!r}")
    if isinstance(value, (int, float)):
        seconds = value / 1000 if abs(value) > EPOCH_MS_ABOVE else value
        try:
            return datetime.fromtimestamp(seconds, UTC)
        except (ValueError, OverflowError, OSError):
            raise StateFileInvalid(f"{where}: {value!r} is not a time (epoch seconds, or milliseconds "
                                   f"above {EPOCH_MS_ABOVE:.0e})") from None
    if isinstance(value, str):
        try:
            t = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
        except ValueError:
            raise StateFileInvalid(f"{where}: {value!r} is not an ISO 8601 time") from None
        return t if t.tzinfo is not None else t.replace(tzinfo=UTC)
    raise StateFileInvalid(f"{where}: expected a time, got {value!r}")


def _old_str(rec: dict, key: str, where: str, required: bool = True) -> str | None:
    value = rec.get(key)
    if value is None and not required:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and key == "id":
        return str(value)
    if not isinstance(value, str):
        raise StateFileInvalid(f"{where}.{key}: expected a string, got {value!r}")
    return value


def _old_nodes(records: Any, where: str, with_keywords: bool) -> list[Node]:
    if not isinstance(records, list):
        raise StateFileInvalid(f"{where}: expected an array of memories")
    nodes = []
    for i, rec in enumerate(records):
        w = f"{where}[{i}]"
        if not isinstance(rec, dict):
            raise StateFileInvalid(f"{w}: expected an object")
        title = _old_str(rec, "title", w)
        keywords = rec.get("keywords") if with_keywords else None
        if keywords is None:
            keywords = derive_keywords(title)
        elif not (isinstance(keywords, list) and all(isinstance(k, str) for k in keywords)):
            raise StateFileInvalid(f"{w}.keywords: expected an array of strings")
        nodes.append(Node(
            id=_old_str(rec, "id", w), title=title, content=_old_str(rec, "content", w),
            keywords=keywords, parent_id=None,
            created_at=parse_time(rec.get("createdAt"), f"{w}.createdAt"),
            updated_at=parse_time(rec.get("updatedAt", rec.get("createdAt")), f"{w}.updatedAt"),
        ))
    return nodes


def _old_relationships(records: Any, where: str) -> list[Relationship]:
    if records is None:
        return []
    if not isinstance(records, list):
        raise StateFileInvalid(f"{where}: expected an array of relationships")
    out = []
    for i, rec in enumerate(records):
        w = f"{where}[{i}]"
        if not isinstance(rec, dict):
            raise StateFileInvalid(f"{w}: expected an object")
        try:
            out.append(Relationship(
                person_id=_old_str(rec, "personId", w), name=_old_str(rec, "name", w),
                aliases=rec.get("aliases") or [], relationship=rec.get("relationship") or "",
                affinity=rec.get("affinity", 0), reason=rec.get("reason") or "",
                memory_node_id=None,
                created_at=parse_time(rec.get("createdAt"), f"{w}.createdAt"),
                updated_at=parse_time(rec.get("updatedAt", rec.get("createdAt")), f"{w}.updatedAt"),
            ))
        except ValidationError as e:
            raise StateFileInvalid(f"{w}: {describe_validation(e)}") from None
    return out


def _next_id_after(nodes: list[Node]) -> int:
    numbers = [int(m.group(1)) for n in nodes if (m := _NODE_ID_RE.match(n.id))]
    return max(numbers, default=0) + 1


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


def _unique(items, key, what: str, name: str) -> None:
    seen = set()
    for item in items:
        k = key(item)
        if k in seen:
            raise StateFileInvalid(f"{name}: {what} {k!r} appears twice")
        seen.add(k)


def _check_segments(names: list[str], history_dir: Path | None, name: str) -> None:
    last = 0
    for seg in names:
        m = _SEGMENT_RE.match(seg)
        if not m or int(m.group(1)) != last + 1:
            raise StateFileInvalid(f"{name}: history segment {seg!r} is misnamed or out of order")
        last = int(m.group(2))
        if history_dir is not None and not (history_dir / seg).is_file():
            raise StateFileInvalid(f"{name}: history segment {HISTORY_DIR}/{seg} is missing; restore it "
                                   f"from a copy of the Memory directory")


def _json_document(raw: bytes, name: str) -> Any:
    """The parsed JSON of a state or backup file; StateFileInvalid naming the file when it is
    not JSON or nests too deeply."""
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise StateFileInvalid(f"{name} is not valid JSON ({e})") from None
    except RecursionError:
        raise StateFileInvalid(f"{name} nests arrays or objects too deeply to be a zcor state") from None


def _state_of(sf: StateFile, name: str, history_dir: Path | None) -> MemoryState:
    """The state of a format-3 file pydantic validated."""
    nodes = _share_ids([n.to_node() for n in sf.nodes])
    _unique(nodes, lambda n: n.id, "memory id", name)
    _unique(sf.relationships, lambda r: r.person_id, "personId", name)
    _check_segments(sf.history_segments, history_dir, name)
    state = MemoryState(nodes, sf.important, sf.relationships, sf.history, sf.next_id, sf.history_segments)
    check_invariants(state, name)
    return state


def _share_ids(nodes: list[Node]) -> list[Node]:
    """The nodes with each parentId / supersededBy that names a node being that node's own
    id object (one string in RAM, not one per reference)."""
    ids = {n.id: n.id for n in nodes}
    out = []
    for n in nodes:
        p, s = n.parent_id, n.superseded_by
        if (p is not None and ids.get(p, p) is not p) or (s is not None and ids.get(s, s) is not s):
            n = n.model_copy(update={"parent_id": ids.get(p, p), "superseded_by": ids.get(s, s)})
        out.append(n)
    return out


_HEAD_KEYS = frozenset(("version", "nextId", "nodes", "important", "relationships", "historySegments", "history"))
_NODE_KEYS = frozenset(NODE_ALIASES)


@contextlib.contextmanager
def collector_paused():
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


def _fast_state(raw: bytes) -> tuple[list[Node], dict[str, Any], list[Relationship], list[Change], Any] | None:
    """A format-3 state file checked by hand: (nodes, head fields, relationships, history, tree), or
    None when anything is unusual, for the pydantic path to accept it or word the error.

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


def _records(raw: bytes, pieces: list[tuple[int, int]]):
    """The parsed nodes of each piece in turn."""
    for a, b in pieces:
        yield from orjson.loads(b"[" + raw[a:b] + b"]")


def _fast_parts(doc: Any, records, nodes_fn=None) -> tuple[list[Node], dict[str, Any], list[Relationship],
                                                        list[Change], Any]:
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
    return nodes, head, rel_list, history, tree


def _fast_nodes(records) -> tuple[list[Node], LoadedTree]:
    """Nodes from parsed records, and their tree (children in file order, superseded nodes by
    their replacement), built in the same pass."""
    ids: dict[str, str] = {}
    times: dict[str, datetime] = {}
    intern = sys.intern
    new = tuple.__new__
    get = ids.get
    fields = NODE_ALIASES
    known = _NODE_KEYS.issuperset
    nodes = []
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
        p, b = get(n.parent_id, n.parent_id), get(n.superseded_by, n.superseded_by)
        if (p is not None and p not in ids) or (b is not None and b not in ids):
            known_refs = False
        nodes[i] = n = n.model_copy(update={"parent_id": p, "superseded_by": b})
        if b is not None:
            replaced.setdefault(b, set()).add(n.id)
    if not known_refs:  # children lists point to the ids as written: rebuild them from the nodes
        children = None
    return nodes, LoadedTree(children, replaced, known_refs)


def _cached_nodes(rows: list[tuple]) -> tuple[list[Node], LoadedTree]:
    """Nodes from memory-state.cache's rows (written by zcord from a loaded state, checksummed:
    not checked field by field), and their tree, as _fast_nodes gives them. The writer's
    shared strings (a parent's id and its children's parentId, interned keywords) come back
    shared: marshal keeps one copy of an object it meets twice."""
    new = tuple.__new__
    iso = datetime.fromisoformat
    ids: dict[str, str] = {}
    nodes = []
    append = nodes.append
    children: dict[str | None, list[str]] = {None: []}
    kids = children.get
    replaced: dict[str, set[str]] = {}
    parents_first = True
    later = []  # superseded by a node that comes later in the file
    for node_id, title, content, keywords, parent, source, created, updated, by, reason in rows:
        ids[node_id] = node_id
        if parent is not None and parent not in ids:
            parents_first = False
        if by is not None:
            if by in ids:
                replaced.setdefault(by, set()).add(node_id)
            else:
                later.append((by, node_id))
        append(new(Node, (node_id, title, content, keywords, parent, source, iso(created), iso(updated), by, reason)))
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


class LoadedTree:
    """The tree of nodes the fast loader built while reading them: children lists in file
    order, superseded nodes by their replacement, and whether every parentId and
    supersededBy names a node and every parent comes before its children (so no parent
    cycle is possible)."""

    __slots__ = ("children", "replaced", "checked")

    def __init__(self, children, replaced, checked: bool):
        self.children, self.replaced, self.checked = children, replaced, checked


def _state_of_fast(fast: tuple, name: str, history_dir: Path | None) -> MemoryState:
    nodes, head, rels, history, tree = fast  # node ids are distinct (checked)
    _unique(rels, lambda r: r.person_id, "personId", name)
    _check_segments(head["historySegments"], history_dir, name)
    state = MemoryState(nodes, head["important"], rels, history, head["nextId"], head["historySegments"],
                        tree=(tree.children, tree.replaced) if tree.children is not None else None)
    check_invariants(state, name, nodes_checked=tree.checked)
    return state


_read_header = threading.local()
"""The header of the node cache this thread's last load read (Store.cache_header)."""


def _state_of_cache(memdir: Path) -> MemoryState | None:
    """The state from memory-state.cache and the state file's other parts, when the cache
    belongs to the state file as it is (nodecache.read); None to parse the state file."""
    header: dict = {}
    got = nodecache.read(memdir, memdir / STATE_FILE, header)
    if got is None:
        return None
    _read_header.header = header
    head_raw, rows = got
    try:
        fast = _fast_parts(orjson.loads(head_raw), rows, _cached_nodes)
        return _state_of_fast(fast, STATE_FILE, memdir / HISTORY_DIR)
    except Exception:  # anything at all: the state file decides, and words any error
        return None


def parse_state(raw: bytes, name: str, history_dir: Path | None = None) -> MemoryState:
    """Parse a state of any supported format (legacy array, version 1, 2 or 3).

    Args:
        history_dir: where this state's sealed history segments must exist (None: not checked).
    """
    if raw.lstrip()[:1] == b"{" and b'"version":3' in raw[:64]:
        fast = _fast_state(raw)
        if fast is not None:
            return _state_of_fast(fast, name, history_dir)
        try:
            sf = StateFile.model_validate_json(raw)
        except ValidationError as e:
            if not any(err["type"] == "json_invalid" for err in e.errors()):
                raise StateFileInvalid(f"{name} fails validation: {describe_validation(e)}") from None
        else:
            return _state_of(sf, name, history_dir)
    doc = _json_document(raw, name)
    if isinstance(doc, list):
        nodes = _old_nodes(doc, name, with_keywords=True)
        state = MemoryState(nodes=nodes, next_id=_next_id_after(nodes))
        state.migration = Migration("legacy", name, raw)
        _unique(nodes, lambda n: n.id, "memory id", name)
    elif not isinstance(doc, dict):
        raise StateFileInvalid(f"{name}: expected a JSON object with a version field")
    elif doc.get("version") == STATE_VERSION:
        try:
            sf = StateFile.model_validate_json(raw)
        except ValidationError as e:
            raise StateFileInvalid(f"{name} fails validation: {describe_validation(e)}") from None
        return _state_of(sf, name, history_dir)
    elif doc.get("version") in (1, 2):
        version = doc["version"]
        nodes = _old_nodes(doc.get("memories", []), f"{name}: memories", with_keywords=version == 2)
        _unique(nodes, lambda n: n.id, "memory id", name)
        rels = _old_relationships(doc.get("relationships"), f"{name}: relationships") if version == 2 else []
        _unique(rels, lambda r: r.person_id, "personId", name)
        ids = {n.id for n in nodes}
        important = []
        for i in doc.get("important") or []:
            if str(i) in ids and str(i) not in important:
                important.append(str(i))
        state = MemoryState(nodes, important[:MAX_IMPORTANT], rels, next_id=_next_id_after(nodes))
        state.migration = Migration(str(version), name, raw)
    else:
        raise StateFileInvalid(f"{name}: unsupported format version {doc.get('version')!r} "
                               f"(this zcord reads versions 1, 2 and 3)")
    check_invariants(state, name)
    return state


def parse_backup(raw: bytes, name: str, limits: RestoreLimits = RestoreLimits()) -> MemoryState:
    """parse_state for a backup about to be restored, bounded and in small steps.

    A format-3 file is decoded once, its counts checked against the limits' nodes and
    relationships before any validation, and then validated item by item: each
    item is one short call, so the event loop and the worker get the interpreter in between
    (one whole-file validation call would hold it for seconds on a large file).
    """
    if not (raw.lstrip()[:1] == b"{" and b'"version":3' in raw[:64]):
        return parse_state(raw, name)
    doc = _json_document(raw, name)
    if not isinstance(doc, dict) or doc.get("version") != STATE_VERSION:
        return parse_state(raw, name)
    parts = {key: doc.pop(key, []) for key in ("nodes", "relationships", "history")}
    for key, what, limit, setting in (("nodes", "memories", limits.nodes, "maxRestoreNodes"),
                                      ("relationships", "relationships", limits.relationships,
                                       "maxRestoreRelationships")):
        if isinstance(parts[key], list) and len(parts[key]) > limit:
            raise StateFileInvalid(f"{name} holds {len(parts[key])} {what}; at most {limit} can be restored "
                                   f"({setting} in config.json)")
    try:
        head = StateFile.model_validate(doc)
    except ValidationError as e:
        raise StateFileInvalid(f"{name} fails validation: {describe_validation(e)}") from None
    items: dict[str, list] = {}
    for key, model in (("nodes", NodeModel), ("relationships", Relationship), ("history", Change)):
        if not isinstance(parts[key], list):
            raise StateFileInvalid(f"{name} fails validation: {key}: expected an array")
        out = []
        for i, item in enumerate(parts[key]):
            try:
                out.append(model.model_validate(item))
            except ValidationError as e:
                raise StateFileInvalid(f"{name} fails validation: {key}[{i}]: {describe_validation(e)}") from None
        items[key] = out
    items["nodes"] = _share_ids([n.to_node() for n in items["nodes"]])
    _unique(items["nodes"], lambda n: n.id, "memory id", name)
    _unique(items["relationships"], lambda r: r.person_id, "personId", name)
    _check_segments(head.history_segments, None, name)
    state = MemoryState(items["nodes"], head.important, items["relationships"], items["history"], head.next_id,
                        head.history_segments)
    check_invariants(state, name)
    return state


def read_persisted(memdir: Path | str) -> MemoryState:
    """The Memory as the next start will load it (snapshot plus the changes journaled after
    it), read without taking the directory's lock: for checks and tools, never for writing."""
    memdir = Path(memdir)
    store = Store(memdir)
    state = store.load()
    replay(state, memdir / OPLOG_FILE, read_pos(memdir))
    return state


class Store:
    """Owns one Memory directory for the lifetime of the process."""

    def __init__(self, memory_dir: Path | str):
        self.dir = Path(memory_dir).absolute()
        self.state_path = self.dir / STATE_FILE
        self.backups = self.dir / BACKUPS_DIR
        self._lock_fd: int | None = None
        self._locked: tuple[tuple[int, int], tuple[int, int]] | None = None  # (dir, lock file) (dev, ino)
        self._serializer = StateSerializer()
        self.cache_used = False
        """Whether the last load read the memories from memory-state.cache."""
        self.cache_header: dict | None = None
        """That cache's header (what memory-state.recall.cache must be bound to), or None."""
        self.snapshot_lock = threading.RLock()
        """Held while a snapshot or backup is encoded and written (one at a time)."""
        self._naming = threading.Lock()
        self._writing: set[str] = set()  # backup names being written

    # -- directory and lock -------------------------------------------------------

    def open(self) -> None:
        """Create the directory layout if needed (0750/0640 whatever the umask), take the
        exclusive lock, and delete temporary files a killed process left behind."""
        missing = []
        d = self.dir
        while not os.path.lexists(d) and d.parent != d:
            missing.append(d)
            d = d.parent
        for d in reversed(missing):
            make_dir(d)
        try:
            fd = os.open(self.dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise StateFileInvalid(f"{LOCK_FILE} is a symbolic link (in {self.dir}); zcord never follows links "
                                       f"inside the Memory directory (remove it and start again)") from None
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise MemoryDirInUse(
                f"Memory directory {self.dir} is in use by another zcord process (pid {holder}); "
                f"stop it first or point this one at another directory.") from None
        st = os.fstat(fd)
        try:
            os.fchmod(fd, 0o640)
        except OSError:
            pass
        self._lock_fd = fd
        self._locked = (_dev_ino(os.stat(self.dir)), (st.st_dev, st.st_ino))
        try:
            self.verify_lock()  # the path was swapped between open and flock
        except LockLost:
            self.close()
            raise MemoryDirInUse(f"{LOCK_FILE} in {self.dir} changed while zcord locked it; another zcord is "
                                 f"starting on the same directory") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        for sub in (BACKUPS_DIR, BLOBS_DIR, HISTORY_DIR):
            try:
                make_dir(self.dir / sub)
            except NotADirectoryError:
                self.close()
                raise StateFileInvalid(f"{sub}/ in {self.dir} is a symbolic link or a file; zcord never follows "
                                       f"links inside the Memory directory (make it a real directory)") from None
        stale = []
        for where in (self.dir, self.backups, self.dir / HISTORY_DIR):
            stale += remove_stale_tmp(where)
        if stale:
            print(f"zcord: removed {len(stale)} temporary file(s) left by an interrupted write", file=sys.stderr)
        syn = self.dir / SYNONYMS_FILE
        if not syn.exists():
            atomic_write(syn, default_synonyms_bytes())
        persona = self.dir / PERSONA_FILE
        if not persona.exists() and not persona.is_symlink():
            create_new(persona, PERSONA_TEMPLATE.encode())

    def verify_lock(self) -> None:
        """Raise LockLost unless the Memory path and its zcord.lock still name what this
        process locked (a renamed directory or a deleted lock would let a second zcord in)."""
        if self._locked is None:
            return
        try:
            here = (_dev_ino(os.stat(self.dir)), _dev_ino(os.lstat(self.dir / LOCK_FILE)))
        except OSError:
            here = None
        if here != self._locked:
            raise LockLost(f"zcord no longer holds the Memory directory {self.dir}: the directory was moved or "
                           f"its {LOCK_FILE} removed or replaced while zcord ran, so another zcord may own it now. "
                           f"Writes are refused; restart zcord.")

    def close(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        self._locked = None

    # -- load and save --------------------------------------------------------------

    def load(self) -> MemoryState:
        """The current state: memory-state.json, else legacy memories.json, else empty."""
        for name in (STATE_FILE, LEGACY_FILE):
            path = self.dir / name
            if not os.path.lexists(path):
                continue
            if name == STATE_FILE:
                _read_header.header = None
                with collector_paused():
                    state = _state_of_cache(self.dir)
                self.cache_used = state is not None
                self.cache_header = _read_header.header if state is not None else None
                if state is not None:
                    return state
            try:
                raw = read_nofollow(path)
            except OSError as e:
                if e.errno == errno.ELOOP:
                    raise StateFileInvalid(f"{name} is a symbolic link; zcord never follows links inside the "
                                           f"Memory directory (put the real file there)") from None
                raise
            return parse_state(raw, name, self.dir / HISTORY_DIR if name == STATE_FILE else None)
        return MemoryState()

    def encode(self, state: MemoryState, **kwargs) -> bytes:
        with self.snapshot_lock:
            return self._serializer.encode(state, **kwargs)

    def write_snapshot(self, view: MemoryState | StateView, pos: SnapshotPos | None,
                       private: bool = False) -> Seal | None:
        """Write memory-state.json from view atomically, then memory-state.pos; changes
        nothing in memory (safe from a background thread while calls go on).

        When the inline history has grown past SEAL_BYTES, it is first written as a segment
        file under history/ (atomically; an orphan from a failed attempt is simply replaced),
        then the state is written naming that segment and holding no inline history; the
        returned Seal tells the owner of the live state to do the same (`apply_seal`).

        private: encode with a serializer of its own, without snapshot_lock (a restore's
        slow phase, which the caller makes the only writer of the state file meanwhile), so
        backups asked for by calls meanwhile do not wait for it.
        """
        ser = StateSerializer() if private else self._serializer
        with contextlib.nullcontext() if private else self.snapshot_lock:
            self.verify_lock()
            ser._encode_history(view.history)
            data = ser.encode_parts(view)
            seal: Seal | None = None
            if ser.inline_history_bytes > SEAL_BYTES and view.history:
                first, last = view.history[0].change_id, view.history[-1].change_id
                seal = Seal(f"changes-{first:09d}-{last:09d}.jsonl", first, last)
                atomic_write(self.dir / HISTORY_DIR / seal.segment, ser.history_lines())
                data = ser.encode_parts(view, sealed=[*view.history_segments, seal.segment], history_blob=b"")
            tracker = nodecache.Tracker(data)
            atomic_write(self.state_path, tracker)
            if pos is not None:
                write_pos(self.dir, pos)
            node_header = nodecache.write(self.dir, self.state_path, view.nodes.values(), len(view.nodes), tracker)
            indexcache.write(self.dir, view, node_header)
            return seal

    def apply_seal(self, state: MemoryState, seal: Seal) -> None:
        """Drop the sealed changes from the live state's inline history (call between calls)."""
        with self.snapshot_lock:
            if seal.segment in state.history_segments:
                return
            h = state.history
            k = 0
            while k < len(h) and h[k].change_id <= seal.last_id:
                k += 1
            del h[:k]
            state.history_segments.append(seal.segment)
            self._serializer.reset_history()

    def save(self, state: MemoryState, pos: SnapshotPos | None = None) -> None:
        """Write the whole state now (a restore, a migration, shutdown); keeps a migrated
        file's original first. Memory is updated (sealing) only after every write succeeded."""
        self.keep_original(state)
        seal = self.write_snapshot(state, pos)
        if seal is not None:
            self.apply_seal(state, seal)

    def keep_original(self, state: MemoryState) -> None:
        """Before a migrated state is first written: keep the version-1/2 file it came from."""
        mig = state.migration
        if mig is not None and mig.from_version in ("1", "2"):
            keep = self.dir / f"memory-state.v{mig.from_version}.json"
            if keep.exists() and keep.read_bytes() != mig.raw:
                stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
                keep = self.dir / f"memory-state.v{mig.from_version}.{stamp}.json"
            if not keep.exists():
                atomic_write(keep, mig.raw)

    def iter_history(self, state: MemoryState):
        """Every change ever committed, oldest first: sealed segments, then inline."""
        for seg in state.history_segments:
            with open(self.dir / HISTORY_DIR / seg, "rb") as f:
                for line in f:
                    yield Change.model_validate_json(line)
        yield from state.history

    def encode_full(self, state: MemoryState | StateView, private: bool = False) -> bytes:
        """A self-contained copy of the state: sealed history inlined (for backups).
        private: as for write_snapshot."""
        parts = [(self.dir / HISTORY_DIR / seg).read_bytes().rstrip(b"\n").replace(b"\n", b",\n")
                 for seg in state.history_segments]
        ser = StateSerializer() if private else self._serializer
        with contextlib.nullcontext() if private else self.snapshot_lock:
            ser._encode_history(state.history)
            if ser.inline_history_bytes:
                parts.append(bytes(ser._history))
            return ser.encode(state, sealed=[], history_blob=b",\n".join(parts))

    # -- backups --------------------------------------------------------------------

    def _check_backups_dir(self) -> None:
        if os.path.islink(self.backups) or not os.path.isdir(self.backups):
            raise StorageError(f"{BACKUPS_DIR}/ in {self.dir} is not a real directory (a symbolic link?); zcord "
                               f"neither reads nor writes backups through it. Make it a plain directory.")

    def write_backup(self, state: MemoryState | StateView, at: datetime, bot: bool = False,
                     private: bool = False, pre_restore: bool = False) -> str:
        """Write a backup; bot=True names it as one of the bot's (pruned by prune_bot_backups),
        unless pre_restore (the copy before the bot's restore: `-bot-prerestore`, never
        pruned); private: as for write_snapshot."""
        self.verify_lock()
        self._check_backups_dir()
        stamp = at.astimezone(UTC).strftime("%Y%m%dT%H%M%S.%f")[:-3] + "Z"
        tag = ("-bot-prerestore" if pre_restore else "-bot") if bot else ""
        name = f"memory-state-{stamp}{tag}.json"
        n = 2
        with self._naming:  # backups may be written by more than one thread at once
            while os.path.lexists(self.backups / name) or name in self._writing:
                name = f"memory-state-{stamp}{tag}-{n}.json"
                n += 1
            self._writing.add(name)
        try:
            atomic_write(self.backups / name, self.encode_full(state, private))
        finally:
            with self._naming:
                self._writing.discard(name)
        return name

    def prune_bot_backups(self, keep: int) -> list[str]:
        """Delete the oldest of the bot's backups beyond keep; operators' are never touched."""
        self._check_backups_dir()
        mine = sorted((os.stat(self.backups / n, follow_symlinks=False).st_mtime_ns, n)
                      for n in os.listdir(self.backups) if BOT_BACKUP_RE.match(n))
        gone = []
        for _, name in mine[:max(0, len(mine) - keep)]:
            try:
                os.unlink(self.backups / name)
                gone.append(name)
            except FileNotFoundError:
                pass
        return gone

    def list_backups(self) -> list[str]:
        self._check_backups_dir()
        return sorted(p.name for p in self.backups.iterdir() if p.is_file() and p.suffix == ".json")

    def read_backup(self, name: str, limits: RestoreLimits = RestoreLimits()) -> MemoryState:
        """Parse a file from backups/, refusing any name that could leave the directory and
        any file over the limits (invalid_argument naming the setting and the value)."""
        if (not name or "/" in name or "\\" in name or "\x00" in name or name in (".", "..")
                or ".." in name or os.path.isabs(name)):
            raise InvalidArgument(
                f"backupFile must be a plain file name inside backups/ (no '/', no '..'), got {name!r}",
                field="backupFile")
        self._check_backups_dir()
        path = self.backups / name
        base = self.backups.resolve()
        try:
            real = path.resolve(strict=True)
        except (FileNotFoundError, RuntimeError):
            raise NotFound(f"No backup named {name!r} in backups/; zcor_memory_backup returns names "
                           f"that can be restored.", field="backupFile") from None
        if real.parent != base or not real.is_file():
            raise InvalidArgument(f"backupFile {name!r} leads outside backups/ and cannot be restored",
                                  field="backupFile")
        try:
            raw = read_nofollow(real, limits.bytes)
        except ValueError as e:
            raise InvalidArgument(f"backup cannot be restored: {e} (maxRestoreBytes in config.json)",
                                  field="backupFile") from None
        except OSError as e:
            raise InvalidArgument(f"backup {name!r} cannot be read ({e.strerror or e})", field="backupFile") from None
        try:
            state = parse_backup(raw, f"backups/{name}", limits)
        except StateFileInvalid as e:
            raise InvalidArgument(f"backup cannot be restored: {e.message}", field="backupFile") from None
        # memories and relationships have typed fields; a change's before, after and receipt
        # hold any JSON, which is kept and written again: its nesting is bounded here (the
        # document's top level, the history array and the change are the first three levels)
        values = [v for c in state.history for v in (c.before, c.after, c.receipt)]
        if nesting_depth(values, limits.depth, start=3) > limits.depth:
            raise InvalidArgument(f"backup cannot be restored: backups/{name} nests arrays or objects more than "
                                  f"{limits.depth} deep in its change history (maxRestoreDepth in config.json)",
                                  field="backupFile")
        for count, what, limit, setting in ((len(state.nodes), "memories", limits.nodes, "maxRestoreNodes"),
                                            (len(state.relationships), "relationships", limits.relationships,
                                             "maxRestoreRelationships")):
            if count > limit:
                raise InvalidArgument(f"backup cannot be restored: backups/{name} holds {count} {what}; at most "
                                      f"{limit} can be restored ({setting} in config.json)", field="backupFile")
        return state


def _dev_ino(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino
