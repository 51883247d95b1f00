"""Where the Memory directory and the daemon's socket live when nobody says (SPEC §5).

The daemon and every client compute the same default, so `zcor` finds a `zcord` started
in the same environment without flags.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

SOCKET_NAME = "zcord.sock"
SOCKET_ENV = "ZCOR_SOCKET"
SYSTEM_SOCKET = Path("/run/zcor/default/zcord.sock")
"""Where contrib/systemd/zcord.service puts the socket."""


def _first(value: str | None) -> str | None:
    """systemd passes several directories colon-separated; the first is ours."""
    if not value:
        return None
    head = value.split(":", 1)[0]
    return head or None


def default_memory_dir(env: Mapping[str, str] | None = None) -> Path:
    """$STATE_DIRECTORY, else $XDG_DATA_HOME/zcor/memory, else ~/.local/share/zcor/memory."""
    env = os.environ if env is None else env
    state = _first(env.get("STATE_DIRECTORY"))
    if state:
        return Path(state)
    data = env.get("XDG_DATA_HOME")
    base = Path(data) if data else Path(env.get("HOME") or Path.home()) / ".local" / "share"
    return base / "zcor" / "memory"


def default_socket(env: Mapping[str, str] | None = None) -> Path:
    """$RUNTIME_DIRECTORY/zcord.sock, else $XDG_RUNTIME_DIR/zcor/zcord.sock, else /tmp/zcor-$UID/zcord.sock."""
    env = os.environ if env is None else env
    runtime = _first(env.get("RUNTIME_DIRECTORY"))
    if runtime:
        return Path(runtime) / SOCKET_NAME
    xdg = env.get("XDG_RUNTIME_DIR")
    if xdg:
        return Path(xdg) / "zcor" / SOCKET_NAME
    return Path("/tmp") / f"zcor-{os.getuid()}" / SOCKET_NAME


def memory_dir(arg: str | os.PathLike | None, env: Mapping[str, str] | None = None) -> Path:
    """The daemon's Memory directory: --memory-dir, else the default."""
    return Path(arg) if arg else default_memory_dir(env)


def daemon_socket(arg: str | os.PathLike | None, env: Mapping[str, str] | None = None) -> Path:
    """The socket zcord binds: --socket, else the default (ZCOR_SOCKET is for clients)."""
    return Path(arg) if arg else default_socket(env)


def client_socket(arg: str | os.PathLike | None = None, env: Mapping[str, str] | None = None) -> Path:
    """The socket a client connects to: --socket, else $ZCOR_SOCKET, else the daemon's default.

    When nothing listens at the default but the system service's socket exists (an operator
    logged in over SSH, zcord running under systemd), that one is used.
    """
    env = os.environ if env is None else env
    if arg:
        return Path(arg)
    if env.get(SOCKET_ENV):
        return Path(env[SOCKET_ENV])
    path = default_socket(env)
    if not path.exists() and SYSTEM_SOCKET.exists():
        return SYSTEM_SOCKET
    return path
