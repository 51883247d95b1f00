"""Token usage the front ends report (issue 32): per session and per day, what the provider
billed (input, cached, cache-write and output tokens) and what zcor added to each prompt
(the system prefix's and the recall header's characters).

Kept in `usage.jsonl` in the Memory directory, bounded: the last KEEP_DAYS days and at most
MAX_SESSIONS sessions (the one reported least recently is dropped first; the per-day totals
over all sessions are kept whatever sessions are dropped). Each report is one appended line
(written before it counts, so a killed zcord loses none it answered); once the appended lines
outnumber the aggregates, the file is rewritten atomically as one line per aggregate. A torn
or unreadable line is skipped with a warning and the file rewritten without it. Usage is not
part of the Memory: backups and restores leave it alone, and reports are not operations.

Token counts are what the provider says. `inputTokens` is the whole prompt, cached and
cache-written tokens included (OpenAI's `prompt_tokens`; Anthropic's `input_tokens +
cache_read_input_tokens + cache_creation_input_tokens`; DeepSeek's `prompt_tokens`), so the
cache-hit share is cachedTokens / inputTokens. zcor's own share is estimated from characters
at CHARS_PER_TOKEN.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from ..core.errors import InvalidArgument, StorageError, describe_os_error
from ..core.fsutil import atomic_write, fsync_dir, read_nofollow
from ..core.models import now

log = logging.getLogger(__name__)

USAGE_FILE = "usage.jsonl"
FIELDS = ("requests", "inputTokens", "cachedTokens", "cacheWriteTokens", "outputTokens", "prefixChars",
          "headerChars")
"""The numbers summed per session and day, in the order of a row."""
KEEP_DAYS = 90
"""Days of usage kept (today included); older days are dropped, and sessions not reported
within them."""
MAX_SESSIONS = 500
"""Sessions kept at most (ZCOR_USAGE_MAX_SESSIONS overrides it, read when a Service is made)."""
COMPACT_LINES = 2000
"""The file is rewritten once this many reports were appended to it (a start replays at most
this many lines besides one per session)."""
MAX_USAGE_FILE = 256 << 20
"""A larger usage.jsonl is not read (usage starts over, with a warning)."""
CHARS_PER_TOKEN = 2.0
"""How many characters of zcor's prefix or header make one token, for the estimates: English
runs about 4 characters a token and Chinese about 1.3, and zcor's prefix mixes its English
guidance with the persona's and the memories' own language."""
DEFAULT_QUERY_DAYS = 30


def _row() -> list[int]:
    return [0] * len(FIELDS)


def _add(into: list[int], row: list[int]) -> None:
    for i, v in enumerate(row):
        into[i] += v


@dataclass
class SessionUsage:
    """One session: its rows by day (within KEEP_DAYS), its totals since it was first
    reported, and what its last report named."""

    days: dict[str, list[int]] = field(default_factory=dict)
    total: list[int] = field(default_factory=_row)
    first_day: str = ""
    last_day: str = ""
    front_end: str | None = None
    protocol: str | None = None
    model: str | None = None


def _numbers(doc: dict[str, Any]) -> list[int]:
    row = []
    for name in FIELDS:
        v = doc.get(name, 0)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"{name} is not a count")
        row.append(v)
    return row


_INT = {int}
_DAY = re.compile(r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])")


def _counts(row: Any) -> list[int]:
    """A row as written by _compact: the FIELDS' counts in order."""
    if type(row) is not list or len(row) != len(FIELDS) or not set(map(type, row)) <= _INT or min(row) < 0:
        raise ValueError("not a row of counts")
    return row


def _name(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _day(value: Any) -> str:
    if not isinstance(value, str) or not _DAY.fullmatch(value):
        raise ValueError("day is not a date")
    return value


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def describe_row(row: list[int]) -> dict[str, Any]:
    """A row as the answer shows it: the sums, the cache-hit share and zcor's estimated tokens."""
    out: dict[str, Any] = dict(zip(FIELDS, row))
    prefix_tokens = round(out["prefixChars"] / CHARS_PER_TOKEN)
    header_tokens = round(out["headerChars"] / CHARS_PER_TOKEN)
    out["hitShare"] = _share(out["cachedTokens"], out["inputTokens"])
    out["prefixTokens"] = prefix_tokens
    out["headerTokens"] = header_tokens
    out["zcorShare"] = _share(prefix_tokens + header_tokens, out["inputTokens"])
    return out


class UsageBook:
    """usage.jsonl and its aggregates in memory. Thread-safe (its own lock)."""

    def __init__(self, path: Path, clock: Callable[[], datetime] = now, keep_days: int = KEEP_DAYS,
                 max_sessions: int | None = None):
        self.path = path
        self.clock = clock
        self.keep_days = keep_days
        self.max_sessions = max_sessions if max_sessions is not None else \
            int(os.environ.get("ZCOR_USAGE_MAX_SESSIONS", MAX_SESSIONS))
        self.lock = threading.Lock()
        self.sessions: dict[str, SessionUsage] = {}
        """By the time of their last report, least recent first."""
        self.totals: dict[str, list[int]] = {}
        """Day → the sums over every session (kept when sessions are dropped)."""
        self.appended = 0
        self.rows = 0
        self._fd: int | None = None
        self._dirty = False
        self._today = ""

    # -- lifetime ------------------------------------------------------------------------

    def load(self) -> None:
        """Read usage.jsonl (missing: no usage yet). Unreadable lines are skipped and the file
        rewritten without them; usage never stops zcord from starting."""
        with self.lock:
            self.sessions, self.totals, self.rows, self.appended = {}, {}, 0, 0
            self._today = ""  # read at the first report or query, which drops the days too old by then
            try:
                raw = read_nofollow(self.path, MAX_USAGE_FILE)
            except FileNotFoundError:
                return
            except (OSError, ValueError) as e:
                log.warning("%s cannot be read (%s); usage starts over", self.path.name,
                            getattr(e, "strerror", None) or e)
                self._dirty = True
                return
            bad = 0
            lines = raw.split(b"\n")
            torn = lines.pop() != b""  # the part after the last newline: a report cut short
            for line in lines:
                if not line.strip():
                    continue
                try:
                    self._load_line(orjson.loads(line))
                except (ValueError, TypeError, KeyError, AttributeError):
                    bad += 1
            if bad or torn:
                log.warning("%s: %d unreadable line(s) skipped%s", self.path.name, bad,
                            ", and a report cut short at the end" if torn else "")
                self._dirty = True

    def close(self) -> None:
        with self.lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def _load_line(self, doc: dict[str, Any]) -> None:
        kind = doc.get("kind")
        if kind is None:
            self._apply(doc["session"], _day(doc["day"]), _numbers(doc), doc)
            self.appended += 1
        elif kind == "session":
            s = doc["session"]
            if not isinstance(s, str) or not s:
                raise ValueError("session")
            days = {_day(d): _counts(row) for d, row in doc["days"].items()}
            old = self.sessions.pop(s, None)
            if old is not None:
                self.rows -= len(old.days)
            self._make_room(s)
            self.sessions[s] = SessionUsage(days=days, total=_counts(doc["total"]), first_day=_day(doc["firstDay"]),
                                            last_day=_day(doc["lastDay"]), front_end=_name(doc.get("frontEnd")),
                                            protocol=_name(doc.get("protocol")), model=_name(doc.get("model")))
            self.rows += len(days)
        elif kind == "totals":
            self.totals = {_day(d): _counts(row) for d, row in doc["days"].items()}
        # "header", and kinds a later zcord may write: skipped

    # -- reports -------------------------------------------------------------------------

    def today(self) -> str:
        """The date at zcord's clock (its local time zone)."""
        return self.clock().date().isoformat()

    def _cutoff(self) -> str:
        """The oldest day kept ("" before the date was first read: every day)."""
        if not self._today:
            return ""
        return (date.fromisoformat(self._today) - timedelta(days=self.keep_days - 1)).isoformat()

    def _to_today(self) -> str:
        """Today; the days that fell out of the window dropped when the date moved on."""
        today = self.today()
        if today != self._today:
            self._today = today
            self._prune()
        return today

    def record(self, session: str, report: dict[str, Any]) -> None:
        """Count one report (camelCase fields, already checked) for the session, today.
        StorageError when usage.jsonl cannot be written (nothing is counted then)."""
        with self.lock:
            today = self._to_today()
            line: dict[str, Any] = {"day": today, "session": session}
            for key in ("frontEnd", "protocol", "model"):
                if report.get(key) is not None:
                    line[key] = report[key]
            line.update({name: int(report.get(name) or 0) for name in FIELDS if name != "requests"})
            line["requests"] = 1
            if self._dirty or self.appended >= COMPACT_LINES:
                self._apply(session, today, _numbers(line), line)
                self._compact_or_undo(session, today, line)
                return
            self._append(orjson.dumps(line) + b"\n")
            self._apply(session, today, _numbers(line), line)
            self.appended += 1

    def _apply(self, session: str, day: str, row: list[int], doc: dict[str, Any]) -> None:
        if not isinstance(session, str) or not session:
            raise ValueError("session")
        su = self.sessions.pop(session, None)
        if su is None:
            self._make_room(session)
            su = SessionUsage(first_day=day)
        self.sessions[session] = su  # the most recent last
        _add(su.total, row)
        su.last_day = max(su.last_day, day)
        for key, attr in (("frontEnd", "front_end"), ("protocol", "protocol"), ("model", "model")):
            if isinstance(doc.get(key), str):
                setattr(su, attr, doc[key])
        if day >= self._cutoff():
            if day not in su.days:
                su.days[day] = _row()
                self.rows += 1
            _add(su.days[day], row)
            _add(self.totals.setdefault(day, _row()), row)

    def _make_room(self, session: str) -> None:
        """Drop the least recently reported sessions until a new one fits."""
        while session not in self.sessions and len(self.sessions) >= max(1, self.max_sessions):
            oldest = next(iter(self.sessions))
            self.rows -= len(self.sessions.pop(oldest).days)

    def _prune(self) -> None:
        cutoff = self._cutoff()
        for day in [d for d in self.totals if d < cutoff]:
            del self.totals[day]
        for name in list(self.sessions):
            su = self.sessions[name]
            if su.last_day < cutoff:
                self.rows -= len(su.days)
                del self.sessions[name]
                continue
            for day in [d for d in su.days if d < cutoff]:
                del su.days[day]
                self.rows -= 1

    def _append(self, data: bytes) -> None:
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                                   0o640)
                os.fchmod(self._fd, 0o640)  # the Memory's files are 0640 whatever the umask
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
        except OSError as e:
            self._dirty = True  # a line may be cut short: the next report rewrites the file
            raise StorageError(f"usage could not be recorded in {self.path.name}: {describe_os_error(e)}") from None

    def _compact_or_undo(self, session: str, day: str, line: dict[str, Any]) -> None:
        try:
            self._compact()
        except OSError as e:
            # take the report back out: it was counted before the rewrite that failed
            su = self.sessions.get(session)
            row = [-v for v in _numbers(line)]
            if su is not None:
                _add(su.total, row)
                if day in su.days:
                    _add(su.days[day], row)
            if day in self.totals:
                _add(self.totals[day], row)
            raise StorageError(f"usage could not be recorded in {self.path.name}: {describe_os_error(e)}") from None

    def _compact(self) -> None:
        """Rewrite usage.jsonl atomically: a header, one line per session (its days as rows of
        the FIELDS' counts, and its totals), one line of the days' totals."""
        parts = [orjson.dumps({"kind": "header", "version": 1, "fields": list(FIELDS)})]
        for name, su in self.sessions.items():
            doc: dict[str, Any] = {"kind": "session", "session": name, "firstDay": su.first_day,
                                   "lastDay": su.last_day, "total": su.total, "days": su.days}
            for key, value in (("frontEnd", su.front_end), ("protocol", su.protocol), ("model", su.model)):
                if value is not None:
                    doc[key] = value
            parts.append(orjson.dumps(doc))
        parts.append(orjson.dumps({"kind": "totals", "days": self.totals}))
        parts.append(b"")
        atomic_write(self.path, b"\n".join(parts))
        fsync_dir(self.path.parent)
        if self._fd is not None:
            os.close(self._fd)  # it names the file just replaced
            self._fd = None
        self.appended = 0
        self._dirty = False

    # -- views ---------------------------------------------------------------------------

    def query(self, session: str | None = None, days: int = DEFAULT_QUERY_DAYS) -> dict[str, Any]:
        """`zcor/usage`: per session and per day over the last `days` days (today included),
        newest day first, sessions by input tokens; with `session`, that session's alone."""
        if not 1 <= days <= self.keep_days:
            raise InvalidArgument(f"days must be between 1 and {self.keep_days} (zcor keeps {self.keep_days} "
                                  f"days of usage); got {days}", field="days")
        with self.lock:
            today = self._to_today()
            since = (date.fromisoformat(today) - timedelta(days=days - 1)).isoformat()
            names = [session] if session is not None else list(self.sessions)
            sessions = []
            by_day: dict[str, list[int]] = {}
            for name in names:
                su = self.sessions.get(name)
                if su is None:
                    continue
                row = _row()
                for day, r in su.days.items():
                    if day >= since:
                        _add(row, r)
                        if session is not None:
                            _add(by_day.setdefault(day, _row()), r)
                if row[0]:
                    sessions.append({"session": name, **describe_row(row), "frontEnd": su.front_end,
                                     "protocol": su.protocol, "model": su.model, "firstDay": su.first_day,
                                     "lastDay": su.last_day})
            if session is None:
                by_day = {d: r for d, r in self.totals.items() if d >= since}
            total = _row()
            for r in by_day.values():
                _add(total, r)
        sessions.sort(key=lambda s: (-s["inputTokens"], -s["requests"], s["session"]))
        return {"sessions": sessions,
                "days": [{"day": d, **describe_row(by_day[d])} for d in sorted(by_day, reverse=True)],
                "totals": {"since": since, "days": days, **describe_row(total)},
                "charsPerToken": CHARS_PER_TOKEN}

    def today_line(self) -> dict[str, Any]:
        """Today's sums over every session (for `zcor/status`)."""
        with self.lock:
            today = self._to_today()
            row = list(self.totals.get(today) or _row())
        return {"day": today, **describe_row(row)}

    def lifetime(self) -> list[tuple[str, list[int], str | None]]:
        """(session, totals since first reported, front end) of every session kept (for metrics)."""
        with self.lock:
            self._to_today()
            return [(name, list(su.total), su.front_end) for name, su in self.sessions.items()]
