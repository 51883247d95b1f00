"""Who is on the other end of the socket, as the kernel says (SO_PEERCRED, SO_PEERGROUPS),
and whether that may be an operator: zcord's own uid, root, or a member of the configured
operator group. Nothing the client sends decides it."""

from __future__ import annotations

import grp
import os
import pwd
import socket
import struct

SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)


class PeerCred:
    """The kernel's word on who is at the other end of a connection."""

    def __init__(self, pid: int, uid: int, gid: int, groups: list[int] | None):
        self.pid, self.uid, self.gid, self.groups = pid, uid, gid, groups

    @classmethod
    def of(cls, sock: socket.socket | None) -> PeerCred | None:
        if sock is None:
            return None
        try:
            pid, uid, gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                                struct.calcsize("3i")))
        except OSError:
            return None
        groups: list[int] | None
        try:
            raw = sock.getsockopt(socket.SOL_SOCKET, SO_PEERGROUPS, 1024)
            groups = list(struct.unpack(f"{len(raw) // 4}I", raw[:len(raw) // 4 * 4]))
        except OSError:  # an old kernel, or more groups than fit: the group database decides
            groups = None
        return cls(pid, uid, gid, groups)


def operator_refusal(peer: PeerCred | None, group: str) -> str | None:
    """Why this peer may not be the operator, or None when it may (SPEC §5 roles)."""
    me = os.geteuid()
    if peer is None:
        return ("the operator role is refused: zcord cannot learn who is connected (no SO_PEERCRED on this "
                "socket)")
    if peer.uid in (0, me):
        return None
    try:
        g = grp.getgrnam(group)
    except KeyError:
        return (f"the operator role is refused: uid {peer.uid} is not zcord's user (uid {me}) nor root, and "
                f"the operator group {group!r} does not exist on this host")
    if peer.gid == g.gr_gid or (peer.groups is not None and g.gr_gid in peer.groups):
        return None
    if peer.groups is None:
        try:
            if pwd.getpwuid(peer.uid).pw_name in g.gr_mem:
                return None
        except KeyError:
            pass
    return (f"the operator role is refused: only zcord's own user (uid {me}), root and members of the "
            f"operator group {group!r} may be the operator, and uid {peer.uid} is none of them. Connect "
            f"without asking for a role to be the bot, or have an administrator run "
            f"`usermod -aG {group} USER`.")
