"""Reading state files and backups: every supported format (the legacy array, versions 1, 2
and 3), migrated to the current one; a backup about to be restored, within RestoreLimits.
A format-3 file as zcord writes it goes through the fast loader (fastload.py) first."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .errors import StateFileInvalid
from .fastload import fast_state, state_of_fast
from .invariants import check_invariants, check_segments, check_unique, share_ids
from .models import MAX_IMPORTANT, STATE_VERSION, Change, Node, NodeModel, Relationship, StateFile
from .state import MemoryState, Migration
from .text import derive_keywords

_NODE_ID_RE = re.compile(r"^m(\d+)$")


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
        inner: list[Any] = []
        for c in level:
            inner.extend(v for v in (c.values() if type(c) is dict else c) if type(v) in (dict, list))
        level = inner
    return depth


def describe_validation(err: ValidationError, limit: int = 3) -> str:
    """The first few of a validation's errors, each as where: what."""
    parts = []
    for e in err.errors()[:limit]:
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        parts.append(f"{loc}: {e['msg']}")
    more = len(err.errors()) - limit
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)



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


def _old_str(rec: dict[str, Any], key: str, where: str) -> str:
    """A required string field of an old file's record (a numeric id is taken as its text)."""
    value = rec.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and key == "id":
        return str(value)
    if not isinstance(value, str):
        raise StateFileInvalid(f"{where}.{key}: expected a string, got {value!r}")
    return value


def _old_records(records: Any, where: str, what: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, record) for each object of an old file's array of `what`."""
    if not isinstance(records, list):
        raise StateFileInvalid(f"{where}: expected an array of {what}")
    for i, rec in enumerate(records):
        w = f"{where}[{i}]"
        if not isinstance(rec, dict):
            raise StateFileInvalid(f"{w}: expected an object")
        yield w, rec


def _old_times(rec: dict[str, Any], w: str) -> tuple[datetime, datetime]:
    """An old record's createdAt and updatedAt (which defaults to createdAt)."""
    return (parse_time(rec.get("createdAt"), f"{w}.createdAt"),
            parse_time(rec.get("updatedAt", rec.get("createdAt")), f"{w}.updatedAt"))


def _old_nodes(records: Any, where: str, with_keywords: bool) -> list[Node]:
    nodes = []
    for w, rec in _old_records(records, where, "memories"):
        title = _old_str(rec, "title", w)
        keywords = rec.get("keywords") if with_keywords else None
        if keywords is None:
            keywords = derive_keywords(title)
        elif not (isinstance(keywords, list) and all(isinstance(k, str) for k in keywords)):
            raise StateFileInvalid(f"{w}.keywords: expected an array of strings")
        node_id, content = _old_str(rec, "id", w), _old_str(rec, "content", w)
        created, updated = _old_times(rec, w)
        nodes.append(Node(id=node_id, title=title, content=content, keywords=keywords, parent_id=None,
                          created_at=created, updated_at=updated))
    return nodes


def _old_relationships(records: Any, where: str) -> list[Relationship]:
    if records is None:
        return []
    out = []
    for w, rec in _old_records(records, where, "relationships"):
        person_id, name = _old_str(rec, "personId", w), _old_str(rec, "name", w)
        created, updated = _old_times(rec, w)
        try:
            out.append(Relationship(
                person_id=person_id, name=name,
                aliases=rec.get("aliases") or [], relationship=rec.get("relationship") or "",
                affinity=rec.get("affinity", 0), reason=rec.get("reason") or "",
                memory_node_id=None, created_at=created, updated_at=updated))
        except ValidationError as e:
            raise StateFileInvalid(f"{w}: {describe_validation(e)}") from None
    return out


def _next_id_after(nodes: list[Node]) -> int:
    """The nextId after an old file's memories (one past the highest m<number> id)."""
    numbers = [int(m.group(1)) for n in nodes if (m := _NODE_ID_RE.match(n.id))]
    return max(numbers, default=0) + 1


def _json_document(raw: bytes, name: str) -> Any:
    """The parsed JSON of a state or backup file; StateFileInvalid naming the file when it is
    not JSON or nests too deeply."""
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise StateFileInvalid(f"{name} is not valid JSON ({e})") from None
    except RecursionError:
        raise StateFileInvalid(f"{name} nests arrays or objects too deeply to be a zcor state") from None


def state_of_model(sf: StateFile, name: str, history_dir: Path | None) -> MemoryState:
    """The state of a format-3 file pydantic validated."""
    nodes = share_ids([n.to_node() for n in sf.nodes])
    check_unique(nodes, lambda n: n.id, "memory id", name)
    check_unique(sf.relationships, lambda r: r.person_id, "personId", name)
    check_segments(sf.history_segments, history_dir, name)
    state = MemoryState(nodes, sf.important, sf.relationships, sf.history, sf.next_id, sf.history_segments,
                        scopes=sf.scopes)
    check_invariants(state, name)
    return state


def parse_state(raw: bytes, name: str, history_dir: Path | None = None) -> MemoryState:
    """Parse a state of any supported format (legacy array, version 1, 2 or 3).

    Args:
        history_dir: where this state's sealed history segments must exist (None: not checked).
    """
    if raw.lstrip()[:1] == b"{" and b'"version":3' in raw[:64]:
        fast = fast_state(raw)
        if fast is not None:
            return state_of_fast(fast, name, history_dir)
        try:
            sf = StateFile.model_validate_json(raw)
        except ValidationError as e:
            if not any(err["type"] == "json_invalid" for err in e.errors()):
                raise StateFileInvalid(f"{name} fails validation: {describe_validation(e)}") from None
        else:
            return state_of_model(sf, name, history_dir)
    doc = _json_document(raw, name)
    if isinstance(doc, list):
        nodes = _old_nodes(doc, name, with_keywords=True)
        state = MemoryState(nodes=nodes, next_id=_next_id_after(nodes))
        state.migration = Migration("legacy", name, raw)
        check_unique(nodes, lambda n: n.id, "memory id", name)
    elif not isinstance(doc, dict):
        raise StateFileInvalid(f"{name}: expected a JSON object with a version field")
    elif doc.get("version") == STATE_VERSION:
        try:
            sf = StateFile.model_validate_json(raw)
        except ValidationError as e:
            raise StateFileInvalid(f"{name} fails validation: {describe_validation(e)}") from None
        return state_of_model(sf, name, history_dir)
    elif doc.get("version") in (1, 2):
        version = doc["version"]
        nodes = _old_nodes(doc.get("memories", []), f"{name}: memories", with_keywords=version == 2)
        check_unique(nodes, lambda n: n.id, "memory id", name)
        rels = _old_relationships(doc.get("relationships"), f"{name}: relationships") if version == 2 else []
        check_unique(rels, lambda r: r.person_id, "personId", name)
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
    items: dict[str, list[Any]] = {}
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
    items["nodes"] = share_ids([n.to_node() for n in items["nodes"]])
    check_unique(items["nodes"], lambda n: n.id, "memory id", name)
    check_unique(items["relationships"], lambda r: r.person_id, "personId", name)
    check_segments(head.history_segments, None, name)
    state = MemoryState(items["nodes"], head.important, items["relationships"], items["history"], head.next_id,
                        head.history_segments, scopes=head.scopes)
    check_invariants(state, name)
    return state


