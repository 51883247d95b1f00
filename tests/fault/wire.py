"""A bare line client for fault trials: send now, collect the reply later (or learn that the
daemon died first). zcord.client blocks on every call, which hides the instant we need."""

from __future__ import annotations

import json
import socket
import time
from typing import Any

from zcord.client import initialize_params
from zcord.core import protocol as P


class Wire:
    def __init__(self, path, role: str = "bot", timeout: float = 30.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self.buf = b""
        self.ids = 0
        self.closed = False
        self.others: list[dict[str, Any]] = []  # notifications and replies nobody asked for yet
        reply = self.call("initialize", initialize_params(role, "zcor-fault"))
        assert reply is not None and "result" in reply, reply
        self.sock.sendall(P.encode(P.notification("notifications/initialized")))

    def send(self, method: str, params: Any = None) -> int:
        self.ids += 1
        self.sock.sendall(P.encode(P.request(self.ids, method, params)))
        return self.ids

    def reply(self, msg_id: int, timeout: float = 30.0) -> dict[str, Any] | None:
        """The reply to msg_id, or None when the connection ends before it arrives."""
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                msg = json.loads(line)
                if msg.get("id") == msg_id:
                    return msg
                self.others.append(msg)
            if self.closed:
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no reply to request {msg_id} within {timeout}s")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(1 << 16)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self.closed = True
            self.buf += chunk

    def call(self, method: str, params: Any = None, timeout: float = 30.0) -> dict[str, Any] | None:
        return self.reply(self.send(method, params), timeout)

    def close(self) -> None:
        self.sock.close()
