"""`zcor mcp`: the bridge between an MCP host's stdio and zcord's socket.

Messages pass line by line both ways (zcord's framing: one JSON message per line,
zcord.core.protocol). Two things change on the way: an initialize from the host loses any
role it asks for (the host is the bot, SPEC §5: `as_bot`, `BotLines`), and every reply line
zcord sends back is fenced for a model (zcord.core.fence.fence_reply_line).
"""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path

from ..core import protocol as P
from ..core.fence import fence_reply_line
from .paths import UnsafeSocket, check_client_socket, check_peer


def as_bot(line: bytes) -> bytes:
    """One line from the MCP host, with any role request taken out of an initialize: hosts
    are the bot, whoever runs `zcor mcp` (SPEC §5). Other lines pass unchanged."""
    if not line.strip():
        return line
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):
        return line  # zcord answers it with a parse error
    if not isinstance(msg, dict) or msg.get("method") != "initialize":
        return line
    caps = (msg.get("params") or {}).get("capabilities") if isinstance(msg.get("params"), dict) else None
    exp = caps.get("experimental") if isinstance(caps, dict) else None
    if isinstance(exp, dict) and "zcor" in exp:
        del exp["zcor"]
        return json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass") + b"\n"
    return line


class BotLines:
    """Split the host's byte stream into lines for as_bot; an over-long line is passed on raw
    (zcord refuses it as too large, so it can never be an initialize)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.raw = False  # inside an over-long line: forward until its newline

    def feed(self, data: bytes) -> bytes:
        out = bytearray()
        self.buf += data
        while True:
            nl = self.buf.find(b"\n")
            if nl < 0:
                if self.raw or len(self.buf) > P.MAX_LINE + 1:
                    out += self.buf
                    self.buf.clear()
                    self.raw = True
                return bytes(out)
            line = bytes(self.buf[:nl + 1])
            del self.buf[:nl + 1]
            out += line if self.raw else as_bot(line)
            self.raw = False

    def flush(self) -> bytes:
        rest, self.buf = bytes(self.buf), bytearray()
        return rest if self.raw else as_bot(rest)


def bridge_stdio(path: Path) -> str | None:
    """Bridge stdin/stdout (file descriptors 0 and 1) to zcord's socket at path until either
    side ends; None when it ended well (the host closed stdin, or went away), else why zcord
    could not be reached or the connection failed (a sentence for stderr)."""
    try:
        owner = check_client_socket(path)
    except UnsafeSocket as e:
        return str(e)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
        check_peer(sock, owner, path)
    except OSError as e:
        return f"cannot reach zcord at {path}: {e.strerror or e}"
    except UnsafeSocket as e:
        sock.close()
        return str(e)
    stdin_done = threading.Event()
    lines = BotLines()

    def pump_in() -> None:
        try:
            while True:
                data = os.read(0, 1 << 16)
                if not data:
                    sock.sendall(lines.flush())
                    break
                sock.sendall(lines.feed(data))
        except OSError:
            pass
        finally:
            stdin_done.set()
            try:
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    threading.Thread(target=pump_in, name="stdin", daemon=True).start()
    pending = bytearray()  # zcord's replies, a line at a time: tool results go to the host fenced

    def emit(data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(1, view):]

    try:
        while True:
            data = sock.recv(1 << 16)
            if not data:
                if pending:
                    emit(fence_reply_line(bytes(pending)))
                break
            pending += data
            end = pending.rfind(b"\n")
            if end < 0:
                continue
            whole, pending = bytes(pending[:end + 1]), pending[end + 1:]
            emit(b"".join(fence_reply_line(line + b"\n") for line in whole[:-1].split(b"\n")))
    except BrokenPipeError:
        return None  # the host went away
    except OSError as e:
        return f"connection to zcord failed: {e}"
    finally:
        sock.close()
    if not stdin_done.is_set():
        return "zcord closed the connection"
    return None
