"""Pydantic domain models of the Memory: nodes, relationships, history, the state file.

No I/O here. Python attributes are snake_case; JSON uses the spec's camelCase names.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainSerializer
from pydantic.alias_generators import to_camel

STATE_VERSION = 3
MAX_IMPORTANT = 5


def _require_offset(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("time must carry an explicit UTC offset, e.g. 2026-01-31T20:00:00+08:00")
    return value


def format_time(value: datetime) -> str:
    """ISO 8601 with an explicit offset; milliseconds unless finer precision is present."""
    spec = "milliseconds" if value.microsecond % 1000 == 0 else "microseconds"
    return value.isoformat(timespec=spec)


Timestamp = Annotated[
    datetime,
    AfterValidator(_require_offset),
    PlainSerializer(format_time, return_type=str),
]


def now() -> datetime:
    """The current local time, with its offset, rounded down to the millisecond."""
    t = datetime.now(timezone.utc).astimezone()
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


class Node(Model):
    """One memory."""

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

    @property
    def current(self) -> bool:
        return self.superseded_by is None


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


class StateFile(Model):
    """memory-state.json, format version 3."""

    version: Literal[3]
    next_id: int = Field(ge=1)
    nodes: list[Node] = Field(default_factory=list)
    important: list[str] = Field(default_factory=list, max_length=MAX_IMPORTANT)
    relationships: list[Relationship] = Field(default_factory=list)
    history_segments: list[str] = Field(default_factory=list)
    """Sealed parts of the change history, oldest first: files under history/, JSON lines."""
    history: list[Change] = Field(default_factory=list)
    """The changes not yet sealed into a segment."""
