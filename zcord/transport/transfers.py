"""Files larger than one message, both ways, for `zcor/import` and `zcor/export`.

A request line may be at most 1 MiB (protocol.MAX_LINE) and a reply 16 MiB, while a World
Info book or a whole Memory's export can be larger. So an import's file may arrive in pieces
(`zcor/import/upload`, then `zcor/import {uploadId}`), and an export larger than one reply is
kept on the connection and read in pieces (`zcor/export/read`). Both live only as long as the
connection, one of each at a time; the client side is zcord.transport.interop_client.
"""

from __future__ import annotations

import secrets
import threading
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.errors import InvalidArgument, NotFound
from ..interop.readers import decode_data
from ..service import interop

if TYPE_CHECKING:
    from ..service.service import Service
    from .connections import Connection

INLINE_EXPORT = 2_000_000
"""An export of at most this many characters comes back in the reply itself."""
READ_PIECE = 2_000_000
"""Characters of one `zcor/export/read` reply (at most 8 MB of UTF-8)."""


@dataclass
class _Held:
    upload_id: str | None = None
    pieces: list[str] = field(default_factory=list)
    size: int = 0
    export_id: str | None = None
    files: list[tuple[str, str]] = field(default_factory=list)


_held: weakref.WeakKeyDictionary[Any, _Held] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _of(conn: Connection) -> _Held:
    with _lock:
        got = _held.get(conn)
        if got is None:
            got = _held[conn] = _Held()
        return got


def upload(conn: Connection, data: str, upload_id: str | None) -> dict[str, Any]:
    """Add a piece to the connection's upload (a new one when upload_id is None)."""
    held = _of(conn)
    with _lock:
        if upload_id is None:
            held.upload_id, held.pieces, held.size = secrets.token_hex(8), [], 0
        elif upload_id != held.upload_id:
            raise NotFound(f"No upload {upload_id!r} on this connection (an upload lives as long as its "
                           f"connection; start again without uploadId)", field="uploadId")
        if held.size + len(data) > interop.MAX_IMPORT_BYTES * 4 // 3 + 4:
            held.upload_id, held.pieces, held.size = None, [], 0
            raise InvalidArgument(f"the upload is over the {interop.MAX_IMPORT_BYTES:,} bytes an import takes; "
                                  f"it was dropped", field="data")
        held.pieces.append(data)
        held.size += len(data)
        return {"uploadId": held.upload_id, "size": held.size}


def _take_upload(conn: Connection, upload_id: str) -> str:
    held = _of(conn)
    with _lock:
        if upload_id != held.upload_id:
            raise NotFound(f"No upload {upload_id!r} on this connection", field="uploadId")
        text = "".join(held.pieces)
        held.upload_id, held.pieces, held.size = None, [], 0
        return text


def run_import(svc: Service, conn: Connection, args: Any) -> dict[str, Any]:
    """`zcor/import`: the file from `data` or a finished upload, then the Service's import."""
    if (args.data is None) == (args.upload_id is None):
        raise InvalidArgument("give the file as data, or the uploadId of its pieces (zcor/import/upload)",
                              field="data")
    text = args.data if args.data is not None else _take_upload(conn, args.upload_id)
    raw = decode_data(text, args.encoding)
    return interop.import_file(svc, raw, interop.Options(
        name=args.name, fmt=args.format, preview=args.preview, parent_id=args.parent_id, persona=args.persona))


def start_export(svc: Service, conn: Connection, fmt: str) -> dict[str, Any]:
    """`zcor/export`: the files in the reply, or, when larger than INLINE_EXPORT, kept on the
    connection for `zcor/export/read` (the reply lists their paths and sizes)."""
    files, summary = interop.export_files(svc, fmt)
    total = sum(len(f.text) for f in files)
    if total <= INLINE_EXPORT:
        return {**summary, "exportId": None, "files": [{"path": f.path, "chars": len(f.text), "text": f.text}
                                                       for f in files]}
    held = _of(conn)
    with _lock:
        held.export_id = secrets.token_hex(8)
        held.files = [(f.path, f.text) for f in files]
    return {**summary, "exportId": held.export_id, "files": [{"path": f.path, "chars": len(f.text)} for f in files]}


def read_export(conn: Connection, export_id: str, index: int, offset: int) -> dict[str, Any]:
    """A piece of file `index` of the connection's kept export, from character `offset`."""
    held = _of(conn)
    with _lock:
        if export_id != held.export_id:
            raise NotFound(f"No export {export_id!r} on this connection (it lives as long as its connection, "
                           f"until the next zcor/export)", field="exportId")
        if not 0 <= index < len(held.files):
            raise InvalidArgument(f"file must be 0..{len(held.files) - 1}", field="file")
        text = held.files[index][1]
    if not 0 <= offset <= len(text):
        raise InvalidArgument(f"offset must be 0..{len(text)}", field="offset")
    piece = text[offset:offset + READ_PIECE]
    end = offset + len(piece)
    return {"text": piece, "nextOffset": end if end < len(text) else None}
