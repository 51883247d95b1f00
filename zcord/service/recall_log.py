"""The recall log (issue 38): per session, the latest auto-recall batches — what the bot was
shown and why — kept on disk under recall-log/, never in the operation history.

Each entry: when, the batch's senders (their senderKeys, and the people recognised among
them), the ids recalled with recall's explain reasons (per synonym class, the term, the
word it came from, where it matched and what it weighed), and the context header as it
rendered then: its size in characters, what the budget cut and which recalled ids it left
out. The recall itself only hands its hits over (`observe`, a few microseconds); a thread
of the log's own renders the entry and appends it, so recall does not wait for the disk.

Files: one per session, `recall-log/<hash of the session>.jsonl`, one JSON entry a line.
When it holds `recallLogEntries` entries it becomes `<hash>.1.jsonl` (replacing the one
before), so a session keeps between N and 2N entries and reads return the latest N. The
whole folder holds at most `recallLogBytes`: past it, the sessions written least recently
are forgotten first. Appends are not fsynced (a crash may lose the last entries; a torn last
line is skipped when read). An erasure (zcord.service.erasure) drops every entry naming
the person forgotten; private sessions are left to the privacy issue.
"""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..core.errors import InvalidArgument
from ..core.fsutil import make_dir
from ..retrieval.ranking import Hit
from ..retrieval.recall import Event, Words, check_session

log = logging.getLogger(__name__)

TITLE_CHARS = 120
"""A recalled memory's title is kept to this many characters in an entry."""
MATCHES_KEPT = 8
"""Reasons kept per recalled memory (its best synonym classes)."""
SENDERS_KEPT = 20
TEXT_CHARS = 200
"""Characters of a sender key, a term or a word kept."""
READ_LIMIT = 200
"""Most entries one read returns."""
QUIET = 0.02
"""The writer waits until no recall came for this long (seconds), so it works between a
busy bot's recalls rather than during them …"""
BACKLOG = 500
"""… unless this many batches wait."""


@dataclass(slots=True)
class Batch:
    """What a recall hands over: captured on its path, turned into an entry by the log's thread."""

    at: float
    session: str
    events: list[Event]
    people: list[str]
    words: Words
    hits: list[Hit]
    keep: int  # recallLogEntries when it was recalled


Render = Callable[[list[str], list[str]], dict[str, Any]]
"""(ids, people) -> the header's figures now (`headerChars`, `fullChars`, `budget`,
`truncated`, `notShown`) and each id's title (`titles`): the service renders under its lock."""


def _cut(text: str, n: int = TEXT_CHARS) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


def session_file(session: str) -> str:
    """The file name a session's entries go to (a hash: session keys hold any character)."""
    return hashlib.sha256(session.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class RecallLog:
    """recall-log/ of one Memory directory. `observe` is called on recall's path; a thread
    of its own writes; `read` serves the operator."""

    def __init__(self, directory: Path, entries: Callable[[], int], total_bytes: Callable[[], int],
                 render: Render) -> None:
        self.dir = directory
        self.entries = entries
        self.total_bytes = total_bytes
        self.render = render
        self._queue: collections.deque[Batch] = collections.deque()
        self._wake = threading.Event()  # set when the queue gets its first batch (not at each one)
        self._stop = False
        self._io = threading.Lock()  # the files: the writer's appends and rotations, the readers
        self._counts: dict[str, int] = {}  # file stem -> entries in its current file (when known)
        self._sizes: dict[str, int] | None = None  # file name -> bytes (the folder, once scanned)
        self._thread: threading.Thread | None = None
        self._pending = 0
        self._last = 0.0  # when the last recall was handed over (time.monotonic)
        self._hurry = False  # a reader waits: write at once
        self._idle = threading.Condition()
        self.dropped = 0
        """Entries lost to a disk error since the start."""

    # -- recall's path ----------------------------------------------------------------------

    def observe(self, session: str, events: list[Event], words: Words, hits: list[Hit], people: list[str]) -> None:
        """Hand a recall over (nothing is rendered or written here, and the writer is woken
        only when it has nothing to do: a busy bot's recalls do not trade the interpreter with it)."""
        keep = self.entries()
        if keep <= 0:
            return
        with self._idle:
            self._pending += 1
        self._last = time.monotonic()
        self._queue.append(Batch(time.time(), session, events, list(people), words, hits, keep))
        if not self._wake.is_set():
            self._wake.set()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="zcord-recall-log", daemon=True)
            self._thread.start()

    # -- the writer ---------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stop:
                return
            while not self._hurry and self._pending < BACKLOG:
                wait = self._last + QUIET - time.monotonic()
                if wait <= 0:
                    break
                time.sleep(wait)
            while self._queue:
                self._one(self._queue.popleft())

    def _one(self, batch: Batch) -> None:
        try:
            self._write(self._entry(batch), batch.keep)
        except OSError as e:
            self.dropped += 1
            log.warning("recall log: could not write an entry of session %r (%s)", batch.session, e)
        except Exception:  # never let a bad entry stop the log
            self.dropped += 1
            log.exception("recall log: could not make an entry of session %r", batch.session)
        finally:
            with self._idle:
                self._pending -= 1
                self._idle.notify_all()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every recall handed over so far is written (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        with self._idle:
            self._hurry = True
            if self._pending:
                self._wake.set()
            try:
                while self._pending:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._idle.wait(left)
            finally:
                self._hurry = False
        return True

    def close(self) -> None:
        self.flush(5.0)
        if self._thread is not None:
            self._stop = True
            self._wake.set()
            self._thread.join(5.0)
            self._thread = None
            self._stop = False

    def _entry(self, b: Batch) -> dict[str, Any]:
        ids = [h.id for h in b.hits]
        senders = list(dict.fromkeys(e.sender_key for e in b.events if e.origin == "external" and e.sender_key))
        shown = self.render(ids, b.people)
        titles = shown.pop("titles")
        by_key = {t.key: t for t in b.words.terms}
        hits = []
        for h in b.hits:
            reasons = []
            for m in h.matches[:MATCHES_KEPT] if h.matches else [(k, None, None) for k in h.terms[:MATCHES_KEPT]]:
                key, where, weight = m
                term = by_key.get(key)
                reason: dict[str, Any] = {"term": _cut(term.shown if term else key),
                                          "from": _cut(term.source if term else key)}
                if where is not None:
                    reason["where"] = where
                if weight is not None:
                    reason["weight"] = weight
                reasons.append(reason)
            item: dict[str, Any] = {"id": h.id, "title": _cut(titles.get(h.id) or "", TITLE_CHARS),
                                    "score": h.score, "reasons": reasons}
            if h.person is not None:
                item["person"] = h.person
            hits.append(item)
        at = datetime.fromtimestamp(b.at, UTC).astimezone().isoformat(timespec="milliseconds")
        return {"at": at, "session": b.session, "senders": [_cut(s) for s in senders[:SENDERS_KEPT]],
                "people": b.people[:SENDERS_KEPT], "ids": ids, "hits": hits, **shown}

    def _write(self, entry: dict[str, Any], keep: int) -> None:
        line = (json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        stem = session_file(entry["session"])
        with self._io:
            make_dir(self.dir)
            sizes = self._scan()
            current = self.dir / f"{stem}.jsonl"
            count = self._counts.get(stem)
            if count is None:
                count = self._counts[stem] = _count_lines(current)
            if count >= max(1, keep):
                old = self.dir / f"{stem}.1.jsonl"
                os.replace(current, old)
                sizes[old.name] = sizes.pop(current.name, 0)
                count = 0
            fd = os.open(current, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
            self._counts[stem] = count + 1
            sizes[current.name] = sizes.get(current.name, 0) + len(line)
            self._bound(sizes, keep=stem)

    def _scan(self) -> dict[str, int]:
        if self._sizes is None:
            sizes: dict[str, int] = {}
            with os.scandir(self.dir) as it:
                for e in it:
                    if e.name.endswith(".jsonl") and e.is_file(follow_symlinks=False):
                        sizes[e.name] = e.stat(follow_symlinks=False).st_size
            self._sizes = sizes
        return self._sizes

    def _bound(self, sizes: dict[str, int], keep: str) -> None:
        """Forget the sessions written least recently until the folder fits recallLogBytes
        (the session just written goes last, and only its older file if need be)."""
        limit = self.total_bytes()
        total = sum(sizes.values())
        if total <= limit:
            return
        by_session: dict[str, list[str]] = {}
        for name in sizes:
            by_session.setdefault(name.split(".", 1)[0], []).append(name)

        def last_written(stem: str) -> float:
            try:
                return os.stat(self.dir / f"{stem}.jsonl", follow_symlinks=False).st_mtime
            except OSError:
                return 0.0

        order = sorted((s for s in by_session if s != keep), key=last_written)
        order.append(keep)
        for stem in order:
            names = sorted(by_session[stem], reverse=True)  # <stem>.jsonl last: the newest entries
            if stem == keep:
                names = [n for n in names if n != f"{stem}.jsonl"]
            for name in names:
                (self.dir / name).unlink(missing_ok=True)
                total -= sizes.pop(name, 0)
                if name == f"{stem}.jsonl":
                    self._counts.pop(stem, None)
                if total <= limit:
                    return

    # -- reading --------------------------------------------------------------------------------

    def read(self, session: Any, limit: Any = 50, offset: Any = 0, before: Any = None) -> dict[str, Any]:
        """A session's entries, newest first, paged (`limit` 1..READ_LIMIT, `offset`); with
        `before` (an ISO time with its offset) only the batches recalled at or before it."""
        check_session(session)
        if type(limit) is not int or not 1 <= limit <= READ_LIMIT:
            raise InvalidArgument(f"limit must be an integer from 1 to {READ_LIMIT}", field="limit")
        if type(offset) is not int or offset < 0:
            raise InvalidArgument("offset must be an integer ≥ 0", field="offset")
        cutoff = None
        if before is not None:
            if not isinstance(before, str):
                raise InvalidArgument("before must be an ISO 8601 time with its UTC offset", field="before")
            try:
                cutoff = datetime.fromisoformat(before)
            except ValueError:
                raise InvalidArgument(f"before {before!r} is not an ISO 8601 time", field="before") from None
            if cutoff.tzinfo is None:
                raise InvalidArgument("before must carry its UTC offset, e.g. 2026-12-01T20:00:00+08:00",
                                      field="before")
        self.flush(2.0)  # what was recalled just now is in the answer
        stem = session_file(session)
        entries: list[dict[str, Any]] = []
        with self._io:
            for name in (f"{stem}.1.jsonl", f"{stem}.jsonl"):
                entries.extend(_read_entries(self.dir / name, session))
        keep = max(1, self.entries())
        entries = entries[-keep:]
        entries.reverse()
        if cutoff is not None:
            entries = [e for e in entries if _at(e) is not None and _at(e) <= cutoff]  # type: ignore[operator]
        page = entries[offset:offset + limit]
        nxt = offset + limit if offset + limit < len(entries) else None
        return {"session": session, "items": page, "total": len(entries), "nextOffset": nxt,
                "kept": keep}


def _at(entry: dict[str, Any]) -> datetime | None:
    try:
        return datetime.fromisoformat(entry["at"])
    except (KeyError, TypeError, ValueError):
        return None


def _count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def _read_entries(path: Path, session: str) -> list[dict[str, Any]]:
    """The entries of one file, oldest first; a torn or foreign line is skipped."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (FileNotFoundError, OSError):
        return []
    with os.fdopen(fd, "rb") as f:
        out = []
        for raw in f:
            try:
                e = json.loads(raw)
            except ValueError:
                continue
            if isinstance(e, dict) and e.get("session") == session:
                out.append(e)
        return out
