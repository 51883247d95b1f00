"""The operation log: every tool call, one JSON line each, appended beside the state.

Reads and failed calls are written without fsync (a process crash keeps them: they are in
the page cache); records that carry changes are fsynced. The search index over the log is
built on the first history query and kept current after that.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from .errors import StateFileInvalid
from .models import OpRecord
from .text import normalize


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
    line: bytes


class OpLog:
    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None
        self._size = 0
        self._lines: list[bytes] = []
        self.last_seq = 0
        self.last_change_id = 0
        self._index: list[_Entry] | None = None
        self._monotone = True

    def open(self) -> None:
        """Open for appending; a torn last line (crash mid-append) is cut off."""
        raw = self.path.read_bytes() if self.path.exists() else b""
        if raw and not raw.endswith(b"\n"):
            cut = raw.rfind(b"\n") + 1
            print(f"zcord: {self.path.name}: dropping a torn last line ({len(raw) - cut} bytes)",
                  file=sys.stderr)
            raw = raw[:cut]
            with open(self.path, "r+b") as f:
                f.truncate(cut)
                os.fsync(f.fileno())
        self._lines = raw.splitlines()
        self._size = len(raw)
        # the newest seq and logged change id, from the end back
        for i in range(len(self._lines) - 1, -1, -1):
            rec = self._parse(i)
            self.last_seq = max(self.last_seq, rec["seq"])
            ids = [c.get("changeId") for c in rec.get("changes", []) if c.get("changeId")]
            if ids:
                self.last_change_id = max(ids)
                break
        if self._lines and not self.last_seq:
            self.last_seq = self._parse(len(self._lines) - 1)["seq"]
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)

    def _parse(self, i: int) -> dict[str, Any]:
        try:
            rec = json.loads(self._lines[i])
            if not isinstance(rec, dict) or not isinstance(rec.get("seq"), int):
                raise ValueError("not an operation record")
            return rec
        except ValueError as e:
            raise StateFileInvalid(f"{self.path.name} line {i + 1} is not a valid record ({e}); "
                                   f"fix or remove that line by hand") from None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def append(self, record: OpRecord, durable: bool) -> None:
        """Append one record; on failure the file is cut back so no torn line remains."""
        line = record.model_dump_json(by_alias=True).encode() + b"\n"
        assert self._fd is not None, "operation log is not open"
        try:
            written = os.write(self._fd, line)
            if written != len(line):
                raise OSError(28, "short write to the operation log")
            if durable:
                os.fsync(self._fd)
        except OSError:
            try:
                os.ftruncate(self._fd, self._size)
            except OSError:
                pass
            raise
        self._size += len(line)
        self._lines.append(line.rstrip(b"\n"))
        self.last_seq = max(self.last_seq, record.seq)
        for c in record.changes:
            if c.get("changeId"):
                self.last_change_id = max(self.last_change_id, c["changeId"])
        if self._index is not None:
            self._index_line(line.rstrip(b"\n"), record.model_dump(mode="json", by_alias=True))

    # -- history queries ------------------------------------------------------------

    def _index_line(self, line: bytes, rec: dict[str, Any]) -> None:
        at = datetime.fromisoformat(rec["at"]).timestamp()
        if self._index and at < self._index[-1].at:
            self._monotone = False
        self._index.append(_Entry(at, record_search_text(rec), line))

    def _ensure_index(self) -> list[_Entry]:
        if self._index is None:
            self._index = []
            for i in range(len(self._lines)):
                self._index_line(self._lines[i], self._parse(i))
        return self._index

    def count(self) -> int:
        return len(self._lines)

    def query(self, keywords: list[str], start: float | None, end: float | None,
              limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
        """Matching records newest first (ties: later-logged first), a page of them, and the total."""
        index = self._ensure_index()
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
        page = [json.loads(index[i].line) for i in hits[offset:offset + limit]]
        return page, len(hits)
