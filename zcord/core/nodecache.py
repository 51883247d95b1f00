"""memory-state.cache: the snapshot's memories in a form that loads without parsing JSON.

At 100,000 memories, parsing the nodes of memory-state.json and checking every field takes
most of a start (about 1.1 of 1.6 CPU seconds); reading the same nodes back from this file
takes a third of that. It is derived from memory-state.json as operations.index.sqlite is
from the log: the snapshot writer writes it right after the state file, from the same
nodes, and a start uses it only when it belongs to the very file it was written after —
the same device, inode, size and modification time, the same bytes before and after the
nodes array (checksums of both), and a payload whose checksum holds. Anything else
(missing, garbage, a symbolic link, left over from an older snapshot, a hand-edited state
file) is ignored and memory-state.json is parsed as before. It never holds anything the
state file does not, so deleting it is always safe.

Layout: a magic line, one JSON line describing the state file it belongs to, then the
memories as a marshal'd list of tuples in state-file order (times as ISO strings).
"""

from __future__ import annotations

import json
import logging
import marshal
import os
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .fsutil import atomic_write, read_derived

log = logging.getLogger(__name__)

CACHE_FILE = "memory-state.cache"
MAGIC = b"zcor memory-state.cache 1\n"
MIN_NODES = 5000
"""A snapshot of fewer memories writes no cache (they load fast anyway) and removes an old
one; the environment's ZCOR_NODE_CACHE_NODES, when set, overrides it (min_nodes)."""
NODES_OPEN = b',\n"nodes":[\n'
NODES_CLOSE = b'],\n"relationships":[\n'


class Tracker:
    """Passes a state file's pieces through while noting where its nodes array starts and
    ends and the checksums of the bytes before and after it (StateSerializer.encode_parts
    yields the array's opening and closing as pieces of their own)."""

    def __init__(self, parts: Iterable[bytes]):
        self.parts = parts
        self.size = 0
        self.start: int | None = None
        self.end: int | None = None
        self.head_crc = 0
        self.tail_crc = 0

    def __iter__(self) -> Iterator[bytes]:
        for piece in self.parts:
            if self.start is None:
                self.head_crc = zlib.crc32(piece, self.head_crc)
                if piece == NODES_OPEN:
                    self.start = self.size + len(piece)
            elif self.end is None and piece == NODES_CLOSE:
                self.end = self.size
            if self.end is not None:
                self.tail_crc = zlib.crc32(piece, self.tail_crc)
            self.size += len(piece)
            yield piece


def min_nodes() -> int:
    """The fewest memories a snapshot writes a cache for: ZCOR_NODE_CACHE_NODES when set (read
    at each call, not at import), else MIN_NODES. A value that is no whole number is named
    in a warning and MIN_NODES used (the cache is an optimisation: never a reason to fail)."""
    value = os.environ.get("ZCOR_NODE_CACHE_NODES")
    if value is None:
        return MIN_NODES
    try:
        return int(value)
    except ValueError:
        log.warning("ZCOR_NODE_CACHE_NODES must be a whole number of memories, got %r; using %d", value,
                    MIN_NODES)
        return MIN_NODES


def cache_path(memdir: Path) -> Path:
    return memdir / CACHE_FILE


def write(memdir: Path, state_path: Path, nodes: Iterable[Any], count: int, tracker: Tracker) -> dict[str, Any] | None:
    """Write the cache for the state file just written (tracker saw its bytes), or remove an
    old one when the Memory is small. A failure here never fails the snapshot: the next
    start parses the state file. Returns the header of the cache written (what derived files
    bound to it record: zcord.core.indexcache), or None."""
    path = cache_path(memdir)
    try:
        if count < min_nodes() or tracker.start is None or tracker.end is None:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            return None
        st = os.stat(state_path, follow_symlinks=False)
        if st.st_size != tracker.size:
            return None  # not the file the tracker saw
        rows = [(n[0], n[1], n[2], n[3], n[4], n[5], n[6].isoformat(), n[7].isoformat(), n[8], n[9])
                for n in nodes]
        payload = marshal.dumps(rows)
        del rows
        header = {"dev": st.st_dev, "ino": st.st_ino, "size": st.st_size, "mtimeNs": st.st_mtime_ns,
                  "nodesStart": tracker.start, "nodesEnd": tracker.end, "headCrc": tracker.head_crc,
                  "tailCrc": tracker.tail_crc, "count": count, "payloadCrc": zlib.crc32(payload)}
        # not fsynced: after a power loss the cache is the old one (another file's: ignored),
        # the new one, or fails its checksums; the state file alone is durable
        atomic_write(path, [MAGIC, json.dumps(header).encode() + b"\n", payload], sync=False)
        return header
    except OSError as e:
        log.warning("could not write %s (%s); the next start parses the state file", CACHE_FILE, e.strerror or e)
        return None


def read(memdir: Path, state_path: Path, header_out: dict[str, Any] | None = None) -> tuple[bytes, list[tuple[Any, ...]]] | None:
    """(the state file without its nodes — `"nodes":[]` —, the nodes as tuples) when the
    cache belongs to the state file as it is now; None otherwise (never raises). header_out,
    when given, receives the header of the cache used."""
    got = read_derived(cache_path(memdir), MAGIC)
    if got is None:
        return None
    header, payload = got
    try:
        sfd = os.open(state_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            st = os.fstat(sfd)
            if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) != \
                    (header["dev"], header["ino"], header["size"], header["mtimeNs"]):
                return None
            start, end = header["nodesStart"], header["nodesEnd"]
            if not 0 < start <= end < st.st_size:
                return None
            head = os.pread(sfd, start, 0)
            tail = os.pread(sfd, st.st_size - end, end)
        finally:
            os.close(sfd)
        if len(head) != start or len(tail) != st.st_size - end or not head.endswith(NODES_OPEN) \
                or not tail.startswith(NODES_CLOSE) or zlib.crc32(head) != header["headCrc"] \
                or zlib.crc32(tail) != header["tailCrc"]:
            return None
        rows = marshal.loads(payload)
        if type(rows) is not list or len(rows) != header["count"]:
            return None
        if header_out is not None:
            header_out.update(header)
        return head[:-1] + tail, rows  # ..."nodes":[],\n"relationships":[...
    except (OSError, ValueError, KeyError, TypeError, EOFError):
        return None
