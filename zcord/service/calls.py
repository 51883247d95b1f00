"""What one call is, and the small rules every room shares: the call in progress (Ctx),
argument parsing whose errors name every bad field, time filters, paging, log-safe copies."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic.alias_generators import to_camel

from ..core.errors import InvalidArgument, ZcorError
from ..core.invalid import sentence
from ..core.state import Tx
from ..core.text import normalize
from . import inputs as I

A = TypeVar("A", bound=I.Args)


class InternalError(ZcorError):
    code = "internal_error"


class RestoreInProgress(Exception):
    """A call that would change the Memory met a restore in its slow phase: it is undone and
    not recorded, and runs again once the restore is over (RestoreGate.when_restored)."""


@dataclass
class Ctx:
    """One call in progress."""

    actor: str
    tool: str
    seq: int
    at: datetime
    tx: Tx | None = None
    committed: bool = False
    changes: list[dict[str, Any]] = field(default_factory=list)
    log_result: dict[str, Any] | None = None
    preloaded: tuple[str, Any] | None = None
    """Restore: (backupFile, parsed state or the ZcorError) read before the lock was taken."""
    snapshot_first: bool = False
    """Set by a change that cannot be replayed from its record (a revert of a restore)."""
    snapshotted: bool = False
    """The change was written to memory-state.json before its log record (restore, migration)."""
    origin: dict[str, Any] | None = None
    """Whose messages led to the call (zcord.core.origin); every log record carries it."""
    hold: bool = False
    """The origin is untrusted: a change this call commits is held for review."""
    hold_by: list[str] = field(default_factory=list)
    """The senders a held change is held for (their level, or their presence, holds it)."""
    held: bool = False
    """A change of this call was held for review (the result says so)."""


class Steps:
    """How one call runs, in the order the dispatcher's single path (Dispatcher.run) takes
    them. A call that needs the lock throughout does all its work in `prepare` and returns
    its result from it; a call that must let the lock go while it works (an LLM's answer,
    writing a backup, a restore's new state) returns None from `prepare`, and the
    dispatcher runs `work` without the lock, then `finish` with it again.

    Every call is recorded once, in seq order, whichever step fails: the dispatcher does
    that, the steps never log."""

    renumber = True
    """A call recorded after the lock was let go takes the next seq when it is recorded, so
    the log's seqs increase line by line (False: the seq is already written elsewhere, as a
    restore's change names it in the new snapshot)."""

    def admit(self) -> None:
        """Without the lock, before anything: wait one's turn, read what needs no lock."""

    def prepare(self, ctx: Ctx) -> dict[str, Any] | None:
        """With the lock: check the arguments and do the call, or take what `work` needs
        (then return None)."""
        raise NotImplementedError

    def work(self, ctx: Ctx) -> None:
        """Without the lock: the slow middle."""

    def finish(self, ctx: Ctx) -> dict[str, Any]:
        """With the lock again: commit what `work` made; the call's result."""
        raise NotImplementedError

    def abandon(self, ctx: Ctx) -> None:
        """With the lock, when `work` failed: put back what `prepare` took."""

    def release(self) -> None:
        """Without the lock, last, however the call ended."""


class Locked(Steps):
    """A call that holds the lock throughout: fn(ctx) is its whole work."""

    def __init__(self, fn: Callable[[Ctx], dict[str, Any]]) -> None:
        self.fn = fn

    def prepare(self, ctx: Ctx) -> dict[str, Any]:
        return self.fn(ctx)


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "arguments"


def invalid_from(err: ValidationError, model: type[BaseModel] | None = None) -> InvalidArgument:
    """One InvalidArgument naming every field that is wrong, in words (core.invalid)."""
    msgs = []
    first = None
    for e in err.errors():
        name = _loc(e["loc"])
        first = first or name
        if e["type"] == "extra_forbidden":
            hint = f" (did you mean {to_camel(name)}?)" if "_" in name else ""
            msgs.append(f"unknown parameter {name}{hint}")
        else:
            msgs.append(sentence(name, dict(e), model))
    return InvalidArgument("; ".join(msgs), field=first)


def parse_args(model: type[A], params: Any) -> A:
    """Validate a call's arguments against its input model; errors name every bad field."""
    if not isinstance(params, dict):
        raise InvalidArgument("arguments must be a JSON object", field="arguments")
    try:
        return model.model_validate(params)
    except ValidationError as e:
        raise invalid_from(e, model) from None


def synonym_terms(a: I.SynonymsAddArgs) -> list[str]:
    """A group's terms, trimmed, refused unless distinct after normalization."""
    terms = [t.strip() for t in a.terms]
    if len({normalize(t) for t in terms}) != len(terms):
        raise InvalidArgument("terms must be distinct (compared case-insensitively, full-width = half-width)",
                              field="terms")
    return terms


def parse_time_filter(value: str | None, name: str) -> float | None:
    if value is None:
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidArgument(f"{name}: {value!r} is not an ISO 8601 time like 2026-01-31T20:00:00+08:00",
                              field=name) from None
    if t.tzinfo is None or t.utcoffset() is None:
        raise InvalidArgument(f"{name}: {value!r} has no UTC offset; add one, e.g. {value}+08:00", field=name)
    return t.timestamp()


class TimeRanged(Protocol):
    """Arguments with a time range (from, to)."""

    @property
    def from_(self) -> str | None: ...

    @property
    def to(self) -> str | None: ...


def time_range(args: TimeRanged) -> tuple[float | None, float | None]:
    start = parse_time_filter(args.from_, "from")
    end = parse_time_filter(args.to, "to")
    if start is not None and end is not None and start > end:
        raise InvalidArgument("from is later than to", field="from")
    return start, end


def page(total: int, offset: int, count: int) -> int | None:
    return offset + count if offset + count < total else None


def newest_first(hits: list[tuple[float, int, str]] | list[tuple[float, float, str]], a: Any, record: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """A query's answer: its hits, (updatedAt, rank, id) each, newest first, and the page the
    arguments ask for (a.offset, a.limit), each item as record(id) gives it."""
    hits.sort(reverse=True)
    window = hits[a.offset:a.offset + a.limit]
    return {"items": [record(i) for _, _, i in window], "total": len(hits),
            "nextOffset": page(len(hits), a.offset, len(window))}


_SURROGATE = re.compile("[\ud800-\udfff]")
MAX_LOGGED_DEPTH = 32


def loggable(value: Any, depth: int = 0) -> Any:
    """A copy of a call's parameters that the operation log can hold: lone surrogates (not
    Unicode, so not UTF-8) become U+FFFD, and nesting deeper than MAX_LOGGED_DEPTH is cut."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, (dict, list)) and depth >= MAX_LOGGED_DEPTH:
        return "(nested too deeply to record)"
    if isinstance(value, dict):
        return {loggable(str(k)): loggable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [loggable(v, depth + 1) for v in value]
    return value


def dedupe_words(words: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for w in words:
        k = normalize(w)
        if k not in seen:
            seen.add(k)
            out.append(w)
    return out
