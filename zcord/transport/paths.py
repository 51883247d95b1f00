"""Where the Memory directory and the daemon's socket live when nobody says (SPEC §5).

The daemon and every client compute the same default, so `zcor` finds a `zcord` started
in the same environment without flags.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import socket

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


def memory_dir(arg: str | os.PathLike[str] | None, env: Mapping[str, str] | None = None) -> Path:
    """The daemon's Memory directory: --memory-dir, else the default."""
    return Path(arg) if arg else default_memory_dir(env)


def daemon_socket(arg: str | os.PathLike[str] | None, env: Mapping[str, str] | None = None) -> Path:
    """The socket zcord binds: --socket, else the default (ZCOR_SOCKET is for clients)."""
    return Path(arg) if arg else default_socket(env)


def client_socket(arg: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Path:
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


class UnsafeSocket(Exception):
    """The socket or its directory could be controlled by someone else than zcord's user."""


def ensure_socket_dir(directory: Path) -> None:
    """Create the socket's directory (and missing parents) 0750 whatever the umask."""
    missing = []
    d = directory
    while not os.path.lexists(d):
        missing.append(d)
        if d.parent == d:
            break
        d = d.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o750)
        except FileExistsError:
            continue
        os.chmod(d, 0o750, follow_symlinks=False)


def check_daemon_socket_dir(directory: Path, uid: int | None = None, socket_name: str = "zcord.sock") -> None:
    """zcord's rule: the socket directory is a real directory owned by zcord's uid that no
    one else can write to (else another user could swap the socket). Raises UnsafeSocket."""
    uid = os.geteuid() if uid is None else uid
    try:
        st = os.lstat(directory)
    except OSError as e:
        raise UnsafeSocket(f"socket directory {directory}: {e.strerror or e}") from None
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeSocket(f"socket directory {directory} is a symbolic link; use a real directory")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeSocket(f"socket directory {directory} is not a directory")
    if st.st_mode & (stat.S_ISVTX | stat.S_IWOTH):
        # /tmp and its kind are meant to be shared: never advise changing or removing them
        private = directory / (Path(socket_name).stem if socket_name != "zcord.sock" else "zcor") / "zcord.sock"
        raise UnsafeSocket(f"socket directory {directory} is writable by group or others (mode "
                           f"{stat.S_IMODE(st.st_mode):04o}): a directory shared with other users, where "
                           f"someone else could swap the socket. Put the socket in a private directory "
                           f"instead, e.g. --socket {private} (zcord creates the directory, for its user only)")
    if st.st_uid != uid:
        raise UnsafeSocket(f"socket directory {directory} is owned by uid {st.st_uid}, not by zcord's uid {uid}; "
                           f"someone else may control it. Remove it (or choose another --socket) and start again")
    if st.st_mode & 0o022:
        raise UnsafeSocket(f"socket directory {directory} is writable by group or others (mode "
                           f"{stat.S_IMODE(st.st_mode):04o}); chmod go-w it or choose another --socket")


def check_client_socket(path: Path) -> int:
    """A client's rule before connecting; returns the uid the daemon must run as.

    The socket's directory must be writable by its owner only, the socket file must belong
    to that same owner, and the owner must be the caller, root, or a user an administrator
    set up: the directory sits in a root-owned directory nobody else can write (as
    /run/zcor/NAME under systemd). So /tmp/zcor-$UID made by another user is refused.
    """
    directory = Path(os.path.realpath(path.parent))
    try:
        st = os.stat(directory)
    except OSError as e:
        raise UnsafeSocket(f"socket directory {directory}: {e.strerror or e}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeSocket(f"socket directory {directory} is not a directory")
    if st.st_mode & 0o022:
        raise UnsafeSocket(f"refusing {path}: its directory {directory} is writable by group or others (mode "
                           f"{stat.S_IMODE(st.st_mode):04o}), so anyone could have put that socket there")
    me = os.geteuid()
    if st.st_uid not in (me, 0):
        try:
            up = os.stat(directory.parent)
        except OSError:
            up = None
        if up is None or up.st_uid != 0 or up.st_mode & 0o022:
            raise UnsafeSocket(f"refusing {path}: its directory {directory} belongs to uid {st.st_uid} (not you, "
                               f"not root) and lies in {directory.parent}, which others can change; it may "
                               f"have been planted by another user")
    try:
        sst = os.lstat(directory / path.name)
    except FileNotFoundError:
        return st.st_uid  # nothing there: connect() reports it
    except OSError as e:
        raise UnsafeSocket(f"socket {path}: {e.strerror or e}") from None
    if stat.S_ISSOCK(sst.st_mode) and sst.st_uid != st.st_uid:
        raise UnsafeSocket(f"refusing {path}: the socket belongs to uid {sst.st_uid} but its directory to uid "
                           f"{st.st_uid}; it may have been swapped in by someone else")
    return st.st_uid


def check_peer(sock: socket.socket, expected_uid: int, path: Path) -> None:
    """After connect: the process answering must run as the socket's owner (or root)."""
    import socket as _socket
    import struct

    try:
        _, uid, _ = struct.unpack("3i", sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED,
                                                        struct.calcsize("3i")))
    except OSError:
        return  # not a Unix socket peer we can ask: the directory checks above still held
    if uid not in (expected_uid, 0):
        raise UnsafeSocket(f"refusing {path}: the process answering runs as uid {uid}, not as the socket's "
                           f"owner uid {expected_uid}")
