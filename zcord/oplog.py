"""The operation log: every tool call, one JSON line each, appended beside the state.

Reads and failed calls are written without fsync (a process crash keeps them: they are in
the page cache); records that carry changes are fsynced. Opening reads only the tail. The
search index over the log is built on the first history query (or by `warm()` in the
background) and kept current after that.
"""

from __future__ import annotations

import errno
import json
import os
import re
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from .errors import StateFileInvalid
from .models import OpRecord
from .text import normalize

_BLOCK = 1 << 16
TAIL_SEQ_BYTES = 4 << 20
_SEQ_RE = re.compile(rb'(?m)^\{"seq":(\d+),')


def _record_text(value: Any, out: list[str]) -> None:
    if isinstance(value, dict):
        for v in value.values():
            _record_text(v, out)
    elif isinstance(value, list):
        for v in value:
            _record_text(v, out)
    elif value is not None:
        out.append(str(value))


def record_search_text(record: dict[str, Any]) -> str:
    """Every value of a record, normalized, one per line: what history keywords match."""
    out: list[str] = []
    _record_text(record, out)
    return normalize("\n".join(out))


@dataclass(slots=True)
class _Entry:
    at: float
    text: str
    offset: int
    length: int


class OpLog:
    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None
        self._size = 0
        self._count: int | None = None
        self.last_seq = 0
        self.last_change_id = 0
        self._index: list[_Entry] | None = None
        self._indexed_upto = 0
        self._monotone = True
        self._lock = threading.Lock()

    def open(self) -> None:
        """Open for appending; a torn last line (crash mid-append) is cut off.

        `last_seq` is the largest seq in the tail (TAIL_SEQ_BYTES), not the last line's: a
        log written by an older zcord may hold a late-appended search record out of order.
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
            print(f"zcord: {self.path.name}: dropping a torn last line ({size - cut} bytes)", file=sys.stderr)
            os.ftruncate(self._fd, cut)
            os.fsync(self._fd)
            size = cut
        self._size = size
        for n, (start, line) in enumerate(self._reverse_lines(size)):
            if n == 0:
                self.last_seq = self._parse(line, start)["seq"]
            if b'"changeId":' in line:  # only records with changes are worth parsing here
                rec = self._parse(line, start)
                self.last_seq = max(self.last_seq, rec["seq"])
                ids = [c.get("changeId") for c in rec.get("changes", []) if c.get("changeId")]
                if ids:
                    self.last_change_id = max(ids)
                    break
        tail_start = max(0, size - TAIL_SEQ_BYTES)
        tail = os.pread(self._fd, size - tail_start, tail_start)
        seqs = [int(m) for m in _SEQ_RE.findall(tail)]
        self.last_seq = max([self.last_seq, *seqs])

    def _reverse_lines(self, end: int) -> Iterator[tuple[int, bytes]]:
        """(offset, line) pairs from the end of the file back to its start.

        A last line without its newline (torn) comes first; empty lines are skipped.
        """
        assert self._fd is not None
        pos, buf = end, b""  # buf is file[pos:pos + len(buf)]
        hi = len(buf)  # buf[:hi] is not yet yielded
        while True:
            body_end = hi - 1 if hi and buf[hi - 1:hi] == b"\n" else hi
            nl = buf.rfind(b"\n", 0, body_end)
            if nl >= 0:
                if body_end > nl + 1:
                    yield pos + nl + 1, buf[nl + 1:body_end]
                hi = nl + 1
                continue
            if pos == 0:
                if body_end:
                    yield 0, buf[:body_end]
                return
            start = max(0, pos - _BLOCK)
            buf = os.pread(self._fd, pos - start, start) + buf[:hi]
            hi = len(buf)
            pos = start

    def _parse(self, line: bytes, offset: int) -> dict[str, Any]:
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

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def append(self, record: OpRecord, durable: bool) -> None:
        """Append one record; on failure the file is cut back so no torn line remains."""
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
            if self._count is not None:
                self._count += 1
            self.last_seq = max(self.last_seq, record.seq)
            for c in record.changes:
                if c.get("changeId"):
                    self.last_change_id = max(self.last_change_id, c["changeId"])
            if self._index is not None and self._indexed_upto == offset:
                self._index_line(record.model_dump(mode="json", by_alias=True), offset, len(line) - 1)
                self._indexed_upto = self._size

    # -- history queries ------------------------------------------------------------

    def _index_line(self, rec: dict[str, Any], offset: int, length: int) -> None:
        at = datetime.fromisoformat(rec["at"]).timestamp()
        if self._index and at < self._index[-1].at:
            self._monotone = False
        self._index.append(_Entry(at, record_search_text(rec), offset, length))

    def _read_entries(self, start: int, end: int) -> list[_Entry]:
        out: list[_Entry] = []
        with os.fdopen(os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as f:
            f.seek(start)
            offset = start
            for line in f:
                if offset >= end:
                    break
                rec = self._parse(line, offset)
                out.append(_Entry(datetime.fromisoformat(rec["at"]).timestamp(), record_search_text(rec),
                                  offset, len(line) - 1))
                offset += len(line)
        return out

    def warm(self) -> None:
        """Build the search index without holding up appends (safe from another thread)."""
        if self._index is not None:
            return
        upto = self._size
        entries = self._read_entries(0, upto)
        with self._lock:
            if self._index is not None:
                return
            entries += self._read_entries(upto, self._size)
            self._index = []
            self._monotone = all(entries[i].at <= entries[i + 1].at for i in range(len(entries) - 1))
            self._index = entries
            self._indexed_upto = self._size
            self._count = len(entries)

    def count(self) -> int:
        if self._count is None:
            with os.fdopen(os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as f:
                self._count = sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 20), b""))
        return self._count

    def query(self, keywords: list[str], start: float | None, end: float | None,
              limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
        """Matching records newest first (ties: later-logged first), a page of them, and the total."""
        self.warm()
        index = self._index
        keys = [normalize(k) for k in keywords]
        hits = [
            i for i, e in enumerate(index)
            if (start is None or e.at >= start) and (end is None or e.at <= end)
            and all(k in e.text for k in keys)
        ]
        if self._monotone:
            hits.reverse()
        else:
            hits.sort(key=lambda i: (index[i].at, i), reverse=True)
        page = []
        for i in hits[offset:offset + limit]:
            e = index[i]
            page.append(json.loads(os.pread(self._fd, e.length, e.offset)))
        return page, len(hits)
