"""Domain models of the Memory: nodes (a compact tuple class, with a pydantic twin for
validation), relationships, history, the state file (pydantic).

No I/O here. Python attributes are snake_case; JSON uses the spec's camelCase names.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from operator import itemgetter
from typing import Annotated, Any, Literal

import orjson
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer
from pydantic.alias_generators import to_camel

STATE_VERSION = 3
MAX_IMPORTANT = 5


def _require_offset(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("time must carry an explicit UTC offset, e.g. 2026-01-31T20:00:00+08:00")
    return value


_NUMBER = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*")


def _not_a_number(value: Any) -> Any:
    """A time in a version 3 file, a log record or a backup is an ISO 8601 string; pydantic
    alone would read a number, or a string of digits ("2026"), as epoch seconds."""
    if (isinstance(value, (int, float)) and not isinstance(value, bool)) or \
            (isinstance(value, str) and _NUMBER.fullmatch(value)):
        raise ValueError(f"time must be an ISO 8601 string with its UTC offset, e.g. "
                         f"2026-01-31T20:00:00+08:00, not {value!r}")
    return value


def format_time(value: datetime) -> str:
    """ISO 8601 with an explicit offset; milliseconds unless finer precision is present."""
    spec = "milliseconds" if value.microsecond % 1000 == 0 else "microseconds"
    return value.isoformat(timespec=spec)


Timestamp = Annotated[
    datetime,
    BeforeValidator(_not_a_number),
    AfterValidator(_require_offset),
    PlainSerializer(format_time, return_type=str),
]


def now() -> datetime:
    """The current local time, with its offset, rounded down to the millisecond."""
    t = datetime.now(UTC).astimezone()
    return t.replace(microsecond=t.microsecond - t.microsecond % 1000)


class Model(BaseModel):
    """Base: camelCase JSON names, unknown fields refused."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
    )

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class NodeModel(Model):
    """One memory, validated strictly: used at the edges (old formats, backups, files the
    fast loader does not take) and converted to a `Node` with `to_node`."""

    id: str
    title: str
    content: str
    keywords: list[str] = Field(default_factory=list)
    parent_id: str | None = None
    source_message: str | None = None
    created_at: Timestamp
    updated_at: Timestamp
    superseded_by: str | None = None
    supersede_reason: str | None = None

    def to_node(self) -> Node:
        return Node(**{k: getattr(self, k) for k in NODE_FIELDS})


NODE_FIELDS = ("id", "title", "content", "keywords", "parent_id", "source_message", "created_at", "updated_at",
               "superseded_by", "supersede_reason")
NODE_ALIASES = tuple(to_camel(f) for f in NODE_FIELDS)
_NODE_POS = {f: i for i, f in enumerate(NODE_FIELDS)}


class Node(tuple[Any, ...]):
    """One memory: an immutable tuple of its fields (a Memory holds 100,000 of them, so no
    per-object dict). Same surface as the pydantic model it replaced: keyword constructor
    with the snake_case names, attributes, `model_copy(update=...)`, `dump()` (camelCase,
    JSON-ready), `model_dump_json(by_alias=True)`. Keywords are kept as a tuple of interned
    strings. Built from trusted values only: untrusted input goes through `NodeModel`."""

    __slots__ = ()

    def __new__(cls, *, id: str, title: str, content: str, keywords: Iterable[str] = (),
                parent_id: str | None = None, source_message: str | None = None, created_at: datetime,
                updated_at: datetime, superseded_by: str | None = None, supersede_reason: str | None = None) -> Node:
        return tuple.__new__(cls, (id, title, content, tuple(map(sys.intern, keywords)), parent_id, source_message,
                                   created_at, updated_at, superseded_by, supersede_reason))

    id: str = property(itemgetter(0))  # type: ignore[assignment]
    title: str = property(itemgetter(1))  # type: ignore[assignment]
    content: str = property(itemgetter(2))  # type: ignore[assignment]
    keywords: tuple[str, ...] = property(itemgetter(3))  # type: ignore[assignment]
    parent_id: str | None = property(itemgetter(4))  # type: ignore[assignment]
    source_message: str | None = property(itemgetter(5))  # type: ignore[assignment]
    created_at: datetime = property(itemgetter(6))  # type: ignore[assignment]
    updated_at: datetime = property(itemgetter(7))  # type: ignore[assignment]
    superseded_by: str | None = property(itemgetter(8))  # type: ignore[assignment]
    supersede_reason: str | None = property(itemgetter(9))  # type: ignore[assignment]

    @property
    def current(self) -> bool:
        return self[8] is None

    @classmethod
    def model_validate(cls, obj: Any) -> Node:
        """A node from untrusted data (a dict with the JSON or Python names), validated by
        NodeModel: pydantic's ValidationError on anything wrong."""
        return NodeModel.model_validate(obj).to_node()

    @classmethod
    def model_validate_json(cls, data: str | bytes) -> Node:
        return NodeModel.model_validate_json(data).to_node()

    def model_copy(self, update: dict[str, Any] | None = None) -> Node:
        values = list(self)
        for key, value in (update or {}).items():
            values[_NODE_POS[key]] = tuple(map(sys.intern, value)) if key == "keywords" else value
        return tuple.__new__(Node, values)

    def dump(self) -> dict[str, Any]:
        (id_, title, content, keywords, parent_id, source_message, created_at, updated_at, superseded_by,
         supersede_reason) = self
        return {"id": id_, "title": title, "content": content, "keywords": list(keywords), "parentId": parent_id,
                "sourceMessage": source_message, "createdAt": format_time(created_at),
                "updatedAt": format_time(updated_at), "supersededBy": superseded_by,
                "supersedeReason": supersede_reason}

    def model_dump_json(self, by_alias: bool = True) -> str:
        if not by_alias:
            raise ValueError("Node encodes with its JSON (camelCase) names only")
        return orjson.dumps(self.dump()).decode()

    def __eq__(self, other: object) -> bool:
        return type(other) is Node and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = tuple.__hash__

    def __repr__(self) -> str:
        return "Node(" + ", ".join(f"{f}={v!r}" for f, v in zip(NODE_FIELDS, self)) + ")"

    def __reduce__(self) -> tuple[Any, tuple[tuple[Any, ...]]]:
        return (_node_from_tuple, (tuple(self),))


def _node_from_tuple(values: tuple[Any, ...]) -> Node:
    return tuple.__new__(Node, values)


class Relationship(Model):
    """What the persona knows and feels about one person."""

    person_id: str
    name: str
    aliases: list[str] = Field(default_factory=list)
    relationship: str
    affinity: int = Field(ge=-100, le=100)
    reason: str
    memory_node_id: str | None = None
    created_at: Timestamp
    updated_at: Timestamp


Actor = Literal["model", "operator"]


class Change(Model):
    """One committed change to the state, with the full record before and after it."""

    change_id: int
    at: Timestamp
    actor: str
    tool: str
    op_seq: int | None = None
    kind: str
    target: str | None = None
    before: Any = None
    after: Any = None
    receipt: dict[str, Any] | None = None


class OpError(Model):
    code: str
    message: str
    field: str | None = None


class OpRecord(Model):
    """One line of the operation log: a tool call by any actor, ok or failed."""

    seq: int
    at: Timestamp
    actor: str
    tool: str
    params: dict[str, Any] = Field(default_factory=dict)
    status: Literal["ok", "error"]
    error: OpError | None = None
    changes: list[dict[str, Any]] = Field(default_factory=list)
    result: dict[str, Any] | None = None
    recovered: bool = False
    origin: dict[str, Any] | None = None
    """Whose messages led to the call: {session?, senders, inferred?} or {operator: true}
    (zcord.core.origin); None in records written before origins were kept."""


class StateFile(Model):
    """memory-state.json, format version 3."""

    version: Literal[3]
    next_id: int = Field(ge=1)
    nodes: list[NodeModel] = Field(default_factory=list)
    important: list[str] = Field(default_factory=list, max_length=MAX_IMPORTANT)
    relationships: list[Relationship] = Field(default_factory=list)
    history_segments: list[str] = Field(default_factory=list)
    """Sealed parts of the change history, oldest first: files under history/, JSON lines."""
    history: list[Change] = Field(default_factory=list)
    """The changes not yet sealed into a segment."""
    scopes: dict[str, str] = Field(default_factory=dict)
    """Memory id -> the session it is scoped to (issue 34); absent when none is."""
