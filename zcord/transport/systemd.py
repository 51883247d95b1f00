"""systemd integration with the standard library only: sd_notify, watchdog, socket activation.

Everything here is a no-op outside systemd (no NOTIFY_SOCKET, no LISTEN_FDS), so the
daemon calls it unconditionally.
"""

from __future__ import annotations

import os
import socket
from collections.abc import MutableMapping

SD_LISTEN_FDS_START = 3


def _notify_address(env: MutableMapping[str, str]) -> str | bytes | None:
    path = env.get("NOTIFY_SOCKET")
    if not path:
        return None
    if path.startswith("@"):  # abstract namespace
        return b"\0" + path[1:].encode()
    if path.startswith("/"):
        return path
    return None  # vsock and other exotic forms are not used by zcord


def notify(*lines: str, env: MutableMapping[str, str] | None = None) -> bool:
    """Send `READY=1`, `STOPPING=1`, `WATCHDOG=1`, `STATUS=…` to the service manager.

    Returns:
        True when a message was sent; False outside systemd or when sending failed
        (a lost status message must never take the daemon down).
    """
    addr = _notify_address(os.environ if env is None else env)
    if addr is None or not lines:
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            s.connect(addr)
            s.sendall("\n".join(lines).encode())
        return True
    except OSError:
        return False


def watchdog_interval(env: MutableMapping[str, str] | None = None) -> float | None:
    """Seconds between WATCHDOG=1 pings (half of WATCHDOG_USEC), or None when not asked for."""
    env = os.environ if env is None else env
    usec = env.get("WATCHDOG_USEC")
    pid = env.get("WATCHDOG_PID")
    if not usec:
        return None
    if pid and pid != str(os.getpid()):
        return None
    try:
        value = int(usec)
    except ValueError:
        return None
    if value <= 0:
        return None
    return value / 2 / 1_000_000


def listen_fds(unset: bool = True, env: MutableMapping[str, str] | None = None) -> list[int]:
    """The file descriptors systemd passed (socket activation), starting at fd 3.

    Args:
        unset: remove LISTEN_* from the environment so child processes do not inherit them.
    """
    env = os.environ if env is None else env
    try:
        if env.get("LISTEN_PID") != str(os.getpid()):
            return []
        count = int(env.get("LISTEN_FDS", "0"))
    except ValueError:
        return []
    finally:
        if unset:
            for key in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
                env.pop(key, None)
    fds = list(range(SD_LISTEN_FDS_START, SD_LISTEN_FDS_START + max(count, 0)))
    for fd in fds:
        try:
            os.set_inheritable(fd, False)
        except OSError:
            pass
    return fds


def activated_unix_listener(env: MutableMapping[str, str] | None = None) -> socket.socket | None:
    """The first passed fd that is a listening AF_UNIX stream socket, or None."""
    for fd in listen_fds(env=env):
        try:
            sock = socket.socket(fileno=fd)
        except OSError:
            continue
        if sock.family == socket.AF_UNIX and sock.type == socket.SOCK_STREAM:
            try:
                listening = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
            except OSError:
                listening = 1
            if listening:
                return sock
        sock.detach()
    return None
