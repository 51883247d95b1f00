"""The change history as it is stored: the one reader of its format.

Every change ever committed, with its full before and after, oldest first: the sealed
segments under history/ (files of one change per JSON line, named by layout.segment_name,
never changed once named), then the inline changes the state holds (`MemoryState.history`,
Change models). Store.iter_history reads it as Change models; undo reads it as JSON dicts
(`changes`), or from an instant on (`walk_after`).
"""

from __future__ import annotations

import json
import mmap
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from .fsutil import reverse_lines
from .layout import HISTORY_DIR

_AT_RE = re.compile(rb'"at":"([^"]+)"')
_KEY_RE = re.compile(rb'"kind":"([a-z.]+)","target":(null|"(?:[^"\\]|\\.)*")')


@dataclass
class HistorySource:
    """Where the change history is: the Memory directory, the sealed segments' names and the
    inline changes (a state's own lists, read with its lock held, or copies of them)."""

    dir: Path
    history: list[Any]
    history_segments: list[str]


def segment_lines(memdir: Path, segments: list[str]) -> Iterator[bytes]:
    """The lines (changes as JSON) of the sealed segments, oldest first."""
    for seg in segments:
        with open(memdir / HISTORY_DIR / seg, "rb") as f:
            yield from f


def changes(src: HistorySource, target: str | None = None) -> Iterator[dict[str, Any]]:
    """Every change ever committed as its JSON dict, oldest first (optionally only those of
    one target: memory id or personId)."""
    needle = None if target is None else b'"target":' + json.dumps(target).encode()
    for seg in list(src.history_segments):
        path = src.dir / HISTORY_DIR / seg
        if needle is None:
            for line in segment_lines(src.dir, [seg]):
                yield json.loads(line)
            continue
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            at = data.find(needle)
            while at >= 0:  # one C-speed search over the file, lines parsed only where it hits
                start = data.rfind(b"\n", 0, at) + 1
                end = data.find(b"\n", at)
                end = len(data) if end < 0 else end
                c = json.loads(data[start:end])
                if c.get("target") == target:
                    yield c
                at = data.find(needle, end)
    for c in list(src.history):
        if target is None or c.target == target:
            yield c.dump()


def line_time(line: bytes) -> float:
    """The time (epoch seconds) of a segment line, read without parsing it."""
    m = _AT_RE.search(line)
    return datetime.fromisoformat(m.group(1).decode()).timestamp() if m else float("-inf")


def line_key(line: bytes) -> tuple[str, str | None]:
    """(kind, target) of a segment line, read without parsing the whole line."""
    m = _KEY_RE.search(line)
    kind = m.group(1).decode() if m else ""
    raw = m.group(2) if m else b"null"
    target = None if raw == b"null" else raw[1:-1].decode() if b"\\" not in raw else json.loads(raw)
    return kind, target


def walk_after(src: HistorySource, t: float) -> Iterator[Any]:
    """The changes after the last one made at or before instant t, oldest first, as raw
    segment lines (bytes) or inline Change objects. The boundary is found from the newest
    back, so the cost follows how far back t is."""
    inline = list(src.history)
    segments = list(src.history_segments)
    k = len(inline)
    while k > 0 and inline[k - 1].at.timestamp() > t:
        k -= 1
    pieces: list[tuple[Path, int]] = []
    if k == 0:
        for seg in reversed(segments):
            path = src.dir / HISTORY_DIR / seg
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                start, found = 0, False
                for offset, line in reverse_lines(fd, os.fstat(fd).st_size):
                    if line_time(line) <= t:
                        start, found = offset + len(line) + 1, True
                        break
            finally:
                os.close(fd)
            pieces.insert(0, (path, start))
            if found:
                break
    for path, start in pieces:
        with open(path, "rb") as f:
            f.seek(start)
            yield from f
    yield from inline[k:]
