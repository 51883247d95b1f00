"""Crash-safe file writing: temporary file in the same directory, fsync, rename, fsync dir.

Files are created with explicit modes (0640, directories 0750) whatever the umask, and
never through a symbolic link.
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .errors import StateFileInvalid


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes | Iterable[bytes], mode: int = 0o640, sync: bool = True) -> None:
    """Replace path with data (bytes, or pieces of it written as they come) so that a crash
    at any instant leaves the old or the new file. sync=False (for a derived file that checks
    itself when read): no fsync, so after a power loss the file may be the old one or the new
    one with parts of it missing (zeros) — which its own checks then refuse."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        try:
            os.fchmod(fd, mode)  # the documented mode whatever the umask
            for piece in (data,) if isinstance(data, (bytes, bytearray, memoryview)) else data:
                view = memoryview(piece)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if sync:
        fsync_dir(path.parent)


def read_derived(path: Path, magic: bytes, owner_only: bool = False) -> tuple[dict[str, Any], bytes] | None:
    """A derived file's header (the JSON line after its magic line) and payload, when it
    opens without following a symbolic link, starts with `magic` and its payload's CRC-32 is
    the header's `payloadCrc`; None otherwise (never raises). owner_only: None too unless
    this user owns it and no one else may write it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            if owner_only:
                st = os.fstat(f.fileno())
                if st.st_uid != os.getuid() or st.st_mode & 0o022:
                    return None
            if f.readline(len(magic) + 1) != magic:
                return None
            header = json.loads(f.readline(16384))
            payload = f.read()
        if type(header) is not dict or zlib.crc32(payload) != header.get("payloadCrc"):
            return None
        return header, payload
    except (OSError, ValueError):
        return None


TMP_RE = re.compile(r"^\..+\.\d+\.[0-9a-f]{8}\.tmp$")
"""The temporary files atomic_write leaves behind when the process dies mid-write."""


def read_nofollow(path: Path, limit: int | None = None) -> bytes:
    """The file's bytes, refusing a symbolic link (ELOOP) and, with limit, a larger file
    (ValueError naming the size)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        if limit is not None and size > limit:
            raise ValueError(f"{path.name} is {size} bytes, more than the {limit} accepted")
        chunks: list[bytes] = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def read_plain_file(path: Path) -> bytes:
    """A Memory-directory file zcord reads by name (config.json, synonyms.json): its bytes,
    FileNotFoundError when absent, and StateFileInvalid when it is a symbolic link, which
    zcord never follows there."""
    try:
        return read_nofollow(path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise StateFileInvalid(f"{path.name} in {path.parent} is a symbolic link; zcord does not follow "
                                   f"links in the Memory directory: replace it with the file itself") from None
        raise


def make_dir(path: Path, mode: int = 0o750) -> None:
    """mkdir with the mode whatever the umask; an existing directory is left as it is, a
    symbolic link in its place is refused (NotADirectoryError)."""
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        if os.path.islink(path) or not os.path.isdir(path):
            raise NotADirectoryError(f"{path} is not a plain directory (a symbolic link or a file)") from None
        return
    os.chmod(path, mode, follow_symlinks=False)


def remove_stale_tmp(directory: Path) -> list[str]:
    """Delete atomic_write's leftovers in directory (only while holding the Memory's lock)."""
    removed: list[str] = []
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return removed
    for name in names:
        if TMP_RE.match(name):
            try:
                os.unlink(directory / name)
                removed.append(name)
            except FileNotFoundError:
                pass
    return removed


REVERSE_BLOCK = 1 << 16


def reverse_lines(fd: int, end: int, stop: int = 0) -> Iterator[tuple[int, bytes]]:
    """(offset, line) pairs of a file of lines, from `end` back to `stop` (a line start),
    read a block at a time. A last line without its newline (torn) comes first; empty lines
    are skipped."""
    pos, buf = end, b""  # buf is file[pos:pos + len(buf)]
    hi = 0  # buf[:hi] is not yet yielded
    while True:
        body_end = hi - 1 if hi and buf[hi - 1:hi] == b"\n" else hi
        nl = buf.rfind(b"\n", 0, body_end)
        if nl >= 0:
            if body_end > nl + 1:
                yield pos + nl + 1, buf[nl + 1:body_end]
            hi = nl + 1
            continue
        if pos <= stop:
            if body_end:
                yield pos, buf[:body_end]
            return
        start = max(stop, pos - REVERSE_BLOCK)
        buf = os.pread(fd, pos - start, start) + buf[:hi]
        hi = len(buf)
        pos = start


def create_new(path: Path, data: bytes, mode: int = 0o640) -> bool:
    """Write a new file at path, complete or not at all, never replacing one that exists
    (the content goes to a temporary file that is then hard-linked into place)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")  # cleaned at start if left
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    try:
        try:
            os.fchmod(fd, mode)  # the same mode under any umask
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
    finally:
        os.unlink(tmp)
    fsync_dir(path.parent)
    return True
