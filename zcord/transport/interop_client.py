"""The client side of `zcor/import` and `zcor/export`: a file of any size in, an export of
any size out, in as many messages as the line limit needs (zcord.transport.transfers).

Written once, without I/O: `import_steps` and `export_steps` are generators that yield
(method, params) and are sent each answer; `run` and `arun` drive them with a blocking or
an asyncio client (anything with `request(method, params)`)."""

from __future__ import annotations

import base64
import json
import os
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import Any

INLINE_BYTES = 900_000
"""A file whose JSON string is at most this many bytes goes in the `zcor/import` request
itself (a request line may be 1 MiB)."""
PIECE = 900_000
"""Base64 characters of one `zcor/import/upload` piece (a multiple of 4)."""

Steps = Generator[tuple[str, dict[str, Any]], Any, Any]


def import_steps(raw: bytes, name: str, *, fmt: str | None = None, preview: bool = False,
                 parent_id: str | None = None, persona: bool = False) -> Steps:
    """Import a file's bytes (sent as text when it is UTF-8, else as base64)."""
    opts: dict[str, Any] = {"name": name, "preview": preview, "persona": persona}
    if fmt is not None:
        opts["format"] = fmt
    if parent_id is not None:
        opts["parentId"] = parent_id
    try:
        text: str | None = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and len(json.dumps(text, ensure_ascii=False).encode()) <= INLINE_BYTES:
        return (yield ("zcor/import", {**opts, "data": text}))
    b64 = base64.b64encode(raw).decode("ascii")
    if len(b64) <= INLINE_BYTES:
        return (yield ("zcor/import", {**opts, "data": b64, "encoding": "base64"}))
    upload_id = None
    for start in range(0, len(b64), PIECE):
        piece: dict[str, Any] = {"data": b64[start:start + PIECE]}
        if upload_id is not None:
            piece["uploadId"] = upload_id
        upload_id = (yield ("zcor/import/upload", piece))["uploadId"]
    return (yield ("zcor/import", {**opts, "uploadId": upload_id, "encoding": "base64"}))


def export_steps(fmt: str) -> Steps:
    """Export; returns (summary, [(path, text)])."""
    answer = yield ("zcor/export", {"format": fmt})
    files = []
    for i, f in enumerate(answer["files"]):
        if "text" in f:
            files.append((f["path"], f["text"]))
            continue
        parts, offset = [], 0
        while offset is not None:
            piece = yield ("zcor/export/read", {"exportId": answer["exportId"], "file": i, "offset": offset})
            parts.append(piece["text"])
            offset = piece["nextOffset"]
        files.append((f["path"], "".join(parts)))
    summary = {k: v for k, v in answer.items() if k != "files"}
    summary["files"] = [{"path": f["path"], "chars": f["chars"]} for f in answer["files"]]
    return summary, files


def run(client: Any, steps: Steps, timeout: float | None = None) -> Any:
    """Drive steps with a blocking client (zcord.client.Client)."""
    try:
        method, params = next(steps)
        while True:
            method, params = steps.send(client.request(method, params, timeout=timeout))
    except StopIteration as done:
        return done.value


async def arun(client: Any, steps: Steps, timeout: float | None = None) -> Any:
    """Drive steps with an asyncio client (zcord.client.AsyncClient)."""
    try:
        method, params = next(steps)
        while True:
            method, params = steps.send(await client.request(method, params, timeout=timeout))
    except StopIteration as done:
        return done.value


def write_export(fmt: str, files: list[tuple[str, str]], out: str | os.PathLike[str]) -> list[Path]:
    """Write an export's files: the one file of lorebook / worldinfo / jsonl to `out`, the
    Markdown files into the folder `out` (made if missing). Each file is written atomically
    (a temporary file beside it, fsync, rename); a path that would leave `out` is refused."""
    target = Path(out).expanduser()
    if fmt != "markdown":
        _write_atomic(target, files[0][1])
        return [target]
    root = target.resolve()
    written = []
    for rel, text in files:
        path = (root / rel).resolve()
        if root not in path.parents:
            raise ValueError(f"refusing to write {rel!r} outside {root}")
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(path, text)
        written.append(path)
    return written


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:40]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
