"""The socket directory refusal gives advice that works: never `chmod go-w` on a shared
directory such as /tmp, and the AstrBot README's first command starts a zcord."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_shared_directory_is_refused_with_a_private_one_suggested(make_daemon):
    d = make_daemon()
    shared = d.root / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # as /tmp is
    d.sock = shared / "zcor-persona.sock"
    d.start(wait=False)
    assert d.proc.wait(30) == 1
    err = d.stderr()
    assert f"socket directory {shared} is writable by group or others (mode 1777)" in err
    assert "chmod" not in err and "Remove it" not in err
    suggested = shared / "zcor-persona" / "zcord.sock"
    assert f"private directory instead, e.g. --socket {suggested} " in err

    d.sock = suggested  # the advice works
    d.start()
    with d.client() as c:
        c.ping()
    assert (suggested.parent.stat().st_mode & 0o777) == 0o750


def test_a_group_writable_own_directory_may_still_be_fixed_with_chmod(make_daemon):
    d = make_daemon()
    d.sock.parent.mkdir(mode=0o770)
    os.chmod(d.sock.parent, 0o770)
    d.start(wait=False)
    assert d.proc.wait(30) == 1
    assert "(mode 0770); chmod go-w it or choose another --socket" in d.stderr()


def test_the_astrbot_readmes_first_command_starts_zcord(make_daemon):
    text = (REPO / "contrib" / "astrbot" / "README.md").read_text(encoding="utf-8")
    command = re.search(r"`(zcord --memory-dir [^`]+)`", text).group(1)
    args = shlex.split(command)[1:]
    socket = Path(args[args.index("--socket") + 1])
    assert socket.parent != Path("/tmp") and socket.parent.parent == Path("/tmp")
    d = make_daemon()
    shared = d.root / "tmp"  # the README's /tmp, here a sticky shared directory of the test's own
    shared.mkdir()
    os.chmod(shared, 0o1777)
    d.memdir = d.root / "persona"
    d.sock = shared / socket.relative_to("/tmp")
    d.start()  # as the README has it, with /tmp and ~ moved under the test's directory
    with d.client() as c:
        c.ping()
