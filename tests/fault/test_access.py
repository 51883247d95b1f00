"""Who may connect: the socket's owner and group only (socket 0660 in a 0750 directory), and
what the bot role may not do (every operator-only `zcor/` method is refused to it).

Other users are real: the test forks children that drop to other uids and gids (it runs as
root; without root it is skipped) and try to connect.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import stat

import pytest

from tests.fault.wire import Wire
from zcord.core import protocol as P
from zcord.transport.methods import TABLE

pytestmark = pytest.mark.fault

OWNER, STRANGER, MEMBER = 40001, 40002, 40003
GROUP = 40100


def as_user(uid: int, gid: int, groups: list[int], fn) -> dict:
    """Run fn() in a forked child with these ids; returns what it returned (JSON)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no pytest, no threads, only the call
        try:
            os.close(r)
            os.setgroups(groups)
            os.setgid(gid)
            os.setuid(uid)
            out = fn()
        except BaseException as e:  # reported to the parent
            out = {"exception": repr(e)}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def try_connect(path) -> callable:
    def fn() -> dict:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        try:
            s.connect(str(path))
        except OSError as e:
            return {"errno": e.errno}
        f = s.makefile("rwb")
        replies = []
        for n, (method, params) in enumerate([
                ("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}}),
                ("tools/call", {"name": "zcor_memory_query", "arguments": {}}),
                ("zcor/status", {})]):
            f.write(json.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params}).encode() + b"\n")
            f.flush()
            replies.append(json.loads(f.readline()))
        return {"connected": True, "replies": replies}

    return fn


@pytest.fixture
def root_only():
    if os.geteuid() != 0:
        pytest.skip("needs root to act as other users (fork + setuid)")


def test_only_the_sockets_owner_and_group_can_connect(make_daemon, root_only):
    d = make_daemon()
    os.chmod(d.root, 0o755)  # so that only zcord's own modes decide below
    d.start()
    run_dir = d.sock.parent
    assert stat.S_IMODE(os.stat(run_dir).st_mode) == 0o750
    assert stat.S_IMODE(os.lstat(d.sock).st_mode) == 0o660
    assert stat.S_IMODE(os.stat(d.memdir).st_mode) == 0o750
    for name in ("memory-state.json", "operations.jsonl", "synonyms.json", "zcord.lock"):
        if (d.memdir / name).exists():
            assert stat.S_IMODE(os.stat(d.memdir / name).st_mode) & 0o007 == 0, name
    with d.client("operator") as op:  # the daemon's own user (root here)
        op.call_tool("zcor_memory_write", {"title": "秘密", "content": "只给自己人看", "keywords": ["秘密"]})

    # a stranger: neither the directory (0750) nor the socket (0660) lets them in
    assert as_user(STRANGER, STRANGER, [], try_connect(d.sock)) == {"errno": errno.EACCES}
    os.chmod(run_dir, 0o755)
    assert as_user(STRANGER, STRANGER, [], try_connect(d.sock)) == {"errno": errno.EACCES}
    os.chmod(run_dir, 0o750)
    # nor can they read the Memory itself
    readable = as_user(STRANGER, STRANGER, [], lambda: os.listdir(d.memdir))
    assert "PermissionError" in readable["exception"]

    # the owner: a daemon running as its own user (as under systemd, User=zcor)
    for p in (run_dir, d.sock):
        os.chown(p, OWNER, GROUP)
    ok = as_user(OWNER, OWNER, [], try_connect(d.sock))
    assert ok.get("connected"), ok
    assert ok["replies"][1]["result"]["structuredContent"]["total"] == 1
    # the socket's group, as a supplementary group (usermod -aG zcor alice)
    ok = as_user(MEMBER, MEMBER, [GROUP], try_connect(d.sock))
    assert ok.get("connected"), ok
    init, query, status = ok["replies"]
    assert init["result"]["capabilities"]["experimental"]["zcor"]["role"] == "bot"
    assert query["result"]["structuredContent"]["items"][0]["title"] == "秘密"
    assert status["error"]["data"]["code"] == "forbidden"
    # and as a primary group
    assert as_user(MEMBER, GROUP, [], try_connect(d.sock)).get("connected")
    # everyone else still out
    assert as_user(STRANGER, STRANGER, [], try_connect(d.sock)) == {"errno": errno.EACCES}
    assert as_user(STRANGER, STRANGER, [MEMBER], try_connect(d.sock)) == {"errno": errno.EACCES}


def operator_methods() -> list[str]:
    """Every operator-only method, straight from the daemon's method table."""
    return sorted(m.name for m in TABLE if m.operator_only)


def test_the_bot_reaches_no_operator_method(shared_daemon):
    methods = operator_methods()
    assert "zcor/synonyms/set" in methods and "zcor/config/set" in methods and len(methods) >= 10
    d = shared_daemon
    with d.client("operator") as op:
        config = op.config_get()
        groups = op.synonym_groups()
    bot = Wire(d.sock, "bot")
    params = {"patch": {"recallBudget": 1, "relationshipMemory": False}, "index": 0, "terms": ["越权", "越界"],
              "text": "x"}
    for method in methods:
        reply = bot.call(method, params)
        assert reply["error"]["code"] == P.ZCOR_ERROR, (method, reply)
        assert reply["error"]["data"]["code"] == "forbidden", (method, reply)
        assert "operator" in reply["error"]["message"]
    # nothing happened: no config or synonym change, and no subscription: a committed change
    # is announced before its reply, so it would be here before the bot's next ping reply
    with d.client("operator") as op:
        op.call_tool("zcor_memory_write", {"title": "越权测试", "content": "x", "keywords": ["越权"]})
        assert op.config_get() == config
        assert op.synonym_groups() == groups
    assert bot.call("ping")["result"] == {}
    assert not [m for m in bot.others if m.get("method") == "zcor/changed"]
    bot.close()


def test_the_daemons_own_user_may_be_the_operator(shared_daemon):
    """The socket's modes decide who connects; the peer's kernel credentials decide who may
    be the operator (zcord's uid, root, the operator group: tests/fault/test_trust.py tries
    the others). Here the test and zcord run as the same user."""
    op = Wire(shared_daemon.sock, "operator")
    assert "result" in op.call("zcor/status", {})
    op.close()
