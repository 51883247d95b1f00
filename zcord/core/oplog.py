"""The operation log: every tool call, one JSON line each, appended beside the state.

Reads and failed calls are written without fsync (a process crash keeps them: they are in
the page cache); records that carry changes are fsynced.

History queries go through an index on disk, `operations.index.sqlite` (SQLite, WAL): one
row per record (seq, time, actor, tool, status, whether it changed anything, the ids it
touched, where its line is in the log) and two full-text tables over the record's
normalized text (`history_index.record_search_text`), stored without the text itself (contentless):

- `tri`, FTS5 trigram (case-sensitive, the text is normalized already): a keyword of 3 or
  more characters is a phrase of its trigrams, which matches exactly the records whose
  text holds the keyword.
- `bi`, every pair of neighbouring characters of the text as one token (each character as
  8 hex digits, so `小王` is `00005c0f0000738b`), plus the text's last character alone, with
  a prefix index on the first character: a 2-character keyword is one token, a
  1-character keyword a prefix query; both exact.

So every keyword is a substring of the record's text exactly when the index says so, and
totals come from the index. `bi` also carries the operator filters as tokens (`zc`: the
record changed something; `za…`/`zt…`/`zg…`/`zo…`: its actor, tool, targets and origin's
senders, hex-encoded), and
in a log whose times never went back (the usual case) newest first is last logged first and
a time range is a range of rows: the full-text tables then count and page a query by
themselves, walking their matches backwards. A log whose clock went back is queried through
the rows table ordered by time instead (slower, same answers). `operations.jsonl` stays the one source of truth: the index
only ever catches up by reading the log from the last byte it covered, so a crash at any
instant leaves an index that is behind (caught up on the next query) but never wrong. It
is rebuilt from scratch when it is missing, unreadable, a symbolic link, or does not match
the log (shorter than the index covered, or the log's first bytes or last indexed line
changed). When it cannot be written at all (a full disk), a query scans the log instead.

Opening reads the index's summary (covered bytes, largest seq, last change id) and only
the log's tail after it, so it costs the same at any log length.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import StateFileInvalid
from .fsutil import reverse_lines
from .history_index import INDEX_SUFFIX, READ_CHUNK, HistoryIndex, HistoryQueries
from .models import OpRecord

log = logging.getLogger(__name__)

TAIL_SEQ_BYTES = 4 << 20
_SEQ_RE = re.compile(rb'(?m)^\{"seq":(\d+),')


class OpLog:
    """operations.jsonl: appending records, its tail and counts. Holds the history index
    (`index`: HistoryIndex, keeping operations.index.sqlite up with the log) and the history
    queries answered from it (`queries`: HistoryQueries); both read the log through
    history_index.LogSource (`end`, `pread`, `parse`)."""

    def __init__(self, path: Path):
        self.path = path
        self.index_path = path.with_name(path.stem + INDEX_SUFFIX)
        self._fd: int | None = None
        self._rfd: int | None = None
        self._size = 0
        self._count: int | None = None
        self._appends = 0
        self.last_seq = 0
        self.last_change_id = 0
        self._lock = threading.Lock()  # appends
        self.index = HistoryIndex(self, self.index_path)
        self.queries = HistoryQueries(self, self.index)

    # -- opening -------------------------------------------------------------------------

    def open(self) -> None:
        """Open for appending; a torn last line (crash mid-append) is cut off.

        `last_seq` is the largest seq the index saw and of the tail (TAIL_SEQ_BYTES), not
        the last line's: a log written by an older zcord may hold a late-appended search
        record out of order.
        """
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                               0o640)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise StateFileInvalid(f"{self.path.name} is a symbolic link; zcord never follows links inside "
                                       f"the Memory directory (put the real file there)") from None
            raise
        st = os.fstat(self._fd)
        if st.st_size == 0 and st.st_uid == os.geteuid():
            os.fchmod(self._fd, 0o640)  # the documented mode whatever the umask
        size = st.st_size
        if size and os.pread(self._fd, 1, size - 1) != b"\n":
            cut = next(self._reverse_lines(size))[0]
            log.warning("%s: dropping a torn last line (%d bytes)", self.path.name, size - cut)
            os.ftruncate(self._fd, cut)
            os.fsync(self._fd)
            size = cut
        self._size = size
        self._rfd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        covered, self.last_seq, self.last_change_id = self.index.open()
        for n, (start, line) in enumerate(self._reverse_lines(size, stop=covered)):
            if n == 0:
                self.last_seq = max(self.last_seq, self.parse(line, start)["seq"])
            if b'"changeId":' in line:  # only records with changes are worth parsing here
                rec = self.parse(line, start)
                self.last_seq = max(self.last_seq, rec["seq"])
                ids = [c.get("changeId") for c in rec.get("changes", []) if c.get("changeId")]
                if ids:
                    self.last_change_id = max(ids)
                    break
        tail_start = max(covered, size - TAIL_SEQ_BYTES)  # the index knows the largest seq before covered
        tail = os.pread(self._fd, size - tail_start, tail_start)
        seqs = [int(m) for m in _SEQ_RE.findall(tail)]
        self.last_seq = max([self.last_seq, *seqs])

    def _reverse_lines(self, end: int, stop: int = 0) -> Iterator[tuple[int, bytes]]:
        assert self._fd is not None
        return reverse_lines(self._fd, end, stop)

    def parse(self, line: bytes, offset: int) -> dict[str, Any]:
        """One record of the log; StateFileInvalid (naming the byte offset) when the line is not one."""
        try:
            rec = json.loads(line)
            if not isinstance(rec, dict) or not isinstance(rec.get("seq"), int):
                raise ValueError("not an operation record")
            return rec
        except ValueError as e:
            raise StateFileInvalid(f"{self.path.name} at byte {offset} holds an invalid record ({e}); "
                                   f"fix or remove that line by hand") from None

    @property
    def size(self) -> int:
        """The log's length in bytes: every appended record ends before it."""
        return self._size

    def end(self) -> int:
        """`size`, read under the append lock (history_index.LogSource)."""
        with self._lock:
            return self._size

    def pread(self, length: int, offset: int) -> bytes:
        assert self._rfd is not None, "operation log is not open"
        return os.pread(self._rfd, length, offset)

    def query(self, keywords: list[str], start: float | None, end: float | None, limit: int, offset: int, *,
              changes_only: bool = False, actor: str | None = None, tool: str | None = None,
              target: str | None = None, origin: str | None = None) -> tuple[list[dict[str, Any]], int]:
        """Matching records newest first, a page of them, and the total (HistoryQueries.query)."""
        return self.queries.query(keywords, start, end, limit, offset, changes_only=changes_only, actor=actor,
                                  tool=tool, target=target, origin=origin)

    def warm(self, background: bool = False) -> None:
        """Bring the history index up to the log's end and keep it there (HistoryIndex.warm)."""
        self.index.warm(background)

    def close(self) -> None:
        self.index.close()
        for name in ("_fd", "_rfd"):
            fd = getattr(self, name)
            if fd is not None:
                os.close(fd)
                setattr(self, name, None)

    # -- appending -----------------------------------------------------------------------

    def append(self, record: OpRecord, durable: bool) -> int:
        """Append one record and return the byte offset of its line; on failure the file is
        cut back so no torn line remains."""
        line = record.model_dump_json(by_alias=True).encode() + b"\n"
        assert self._fd is not None, "operation log is not open"
        with self._lock:
            try:
                view = memoryview(line)
                while view:  # a short write is retried: the next one reports why (ENOSPC)
                    view = view[os.write(self._fd, view):]
                if durable:
                    os.fsync(self._fd)
            except OSError:
                try:
                    os.ftruncate(self._fd, self._size)
                except OSError:
                    pass
                raise
            offset = self._size
            self._size += len(line)
            self._appends += 1
            if self._count is not None:
                self._count += 1
            self.last_seq = max(self.last_seq, record.seq)
            for c in record.changes:
                if c.get("changeId"):
                    self.last_change_id = max(self.last_change_id, c["changeId"])
        self.index.notify()
        return offset

    def count(self) -> int:
        """The number of records in the log (the index's, plus the lines after it)."""
        if self._count is None:
            rows, covered = self.index.coverage()
            with self._lock:
                size, appends = self._size, self._appends
            tail = 0
            pos = covered
            while pos < size:
                block = self.pread(min(READ_CHUNK, size - pos), pos)
                if not block:
                    break
                tail += block.count(b"\n")
                pos += len(block)
            with self._lock:
                self._count = rows + tail + (self._appends - appends)
        return self._count
