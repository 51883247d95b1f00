"""Start, refuse, reload and stop: the daemon as systemd and operators see it."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time

from zcord.client import Client

from .conftest import DAEMON_CMD


def test_sigterm_exits_0_and_removes_the_socket(daemon):
    assert stat.S_IMODE(os.stat(daemon.sock).st_mode) == 0o660
    assert stat.S_IMODE(os.stat(daemon.sock.parent).st_mode) == 0o750
    assert stat.S_ISSOCK(os.stat(daemon.sock).st_mode)
    with daemon.client() as c:
        c.ping()
    assert daemon.stop() == 0
    assert not daemon.sock.exists()
    daemon.wait_for("STOPPING=1", timeout=1)
    assert any("READY=1" in m for m in daemon.messages)


def test_sigterm_finishes_in_flight_calls(make_daemon):
    d = make_daemon().start()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(d.sock))
    s.settimeout(30)
    n = 40
    s.sendall(b'{"jsonrpc":"2.0","id":"init","method":"initialize","params":{}}\n')
    buf = b""
    while b"\n" not in buf:
        buf += s.recv(65536)
    s.sendall(b"".join(json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
        "name": "zcor_memory_write", "arguments": {"title": f"关机 {i}", "content": "x" * 5000}}}).encode() + b"\n"
        for i in range(n)))
    # wait until the first answer is back, so calls are in flight, then stop
    buf = b""
    while b"\n" not in buf:
        buf += s.recv(65536)
    d.signal(signal.SIGTERM)
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    s.close()
    assert d.proc.wait(30) == 0
    replies = [json.loads(line) for line in buf.splitlines()]
    acked = {r["result"]["structuredContent"]["id"]: r["id"] for r in replies if "result" in r}
    assert acked and all("result" in r for r in replies)
    d.start()
    with d.client("operator") as op:
        for node_id, i in acked.items():
            assert op.call_tool("zcor_memory_read", {"id": node_id})["title"] == f"关机 {i}"


def test_second_daemon_on_the_same_memory_dir_is_refused(daemon, make_daemon):
    other = make_daemon(memdir=daemon.memdir)
    other.start(wait=False)
    assert other.proc.wait(30) == 2
    assert "in use" in other.stderr() and f"pid {daemon.proc.pid}" in other.stderr()
    with daemon.client() as c:
        c.ping()


def test_second_daemon_on_the_same_socket_is_refused(daemon, make_daemon):
    other = make_daemon(sock=daemon.sock)
    other.start(wait=False)
    assert other.proc.wait(30) == 2
    assert "already listening" in other.stderr()
    assert daemon.sock.exists()
    with daemon.client() as c:
        assert c.request("ping") == {}


def test_a_daemon_refused_for_a_taken_socket_makes_no_memory_dir(daemon, make_daemon):
    """Issue 35: the refusal comes before anything is created."""
    fresh = daemon.memdir.parent / "never-made"
    other = make_daemon(sock=daemon.sock, memdir=fresh)
    other.start(wait=False)
    assert other.proc.wait(30) == 2
    assert "already listening" in other.stderr()
    assert not fresh.exists()


def test_stale_socket_is_replaced_and_other_files_are_not(make_daemon):
    d = make_daemon()
    d.sock.parent.mkdir(mode=0o750)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(d.sock))
    stale.close()  # the file stays, nobody listens: what a crashed daemon leaves
    d.start()
    with d.client() as c:
        c.ping()
    assert d.stop() == 0

    e = make_daemon()
    e.sock.parent.mkdir(mode=0o750)
    e.sock.write_text("not a socket")
    e.start(wait=False)
    assert e.proc.wait(30) == 2
    assert "not a socket" in e.stderr()
    assert e.sock.read_text() == "not a socket"


def test_unloadable_state_or_config_exits_1_and_is_not_overwritten(make_daemon):
    for name, content in [("memory-state.json", b'{"version": 3, "nodes": [oops'),
                          ("memory-state.json", b'{"version": 3, "nextId": 1, "nodes": [{"id": "m1"}]}'),
                          ("config.json", b'{"recallBudget": "lots"}')]:
        d = make_daemon()
        d.memdir.mkdir()
        (d.memdir / name).write_bytes(content)
        d.start(wait=False)
        assert d.proc.wait(30) == 1
        assert name in d.stderr()
        assert (d.memdir / name).read_bytes() == content
        assert not d.sock.exists()


def test_sighup_reloads_hand_edited_config(daemon):
    with daemon.client("operator") as op, daemon.client() as bot:
        assert op.config_get()["relationshipMemory"] is True
        cfg = daemon.memdir / "config.json"
        cfg.write_text(json.dumps({"recallBudget": 1234, "relationshipMemory": False}))
        daemon.signal(signal.SIGHUP)
        note = bot.wait_notification(10)  # relationship tools went away
        assert note is not None and note["method"] == "notifications/tools/list_changed"
        assert op.config_get()["recallBudget"] == 1234
        assert not any(t["name"].startswith("zcor_relationship") for t in bot.list_tools())

        # a broken edit keeps the old values and the daemon
        cfg.write_text("{broken")
        daemon.signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while "reload failed" not in daemon.stderr():
            assert time.monotonic() < deadline, daemon.stderr()
            op.ping()
        assert op.config_get()["recallBudget"] == 1234
        assert cfg.read_text() == "{broken"


def test_defaults_from_systemd_directories_and_zcor_socket(make_daemon):
    d = make_daemon()
    state, runtime = d.root / "state", d.root / "rt"
    runtime.mkdir(mode=0o750)
    d.sock = runtime / "zcord.sock"
    d.start(args=[], env={"STATE_DIRECTORY": f"{state}:{d.root}/other", "RUNTIME_DIRECTORY": str(runtime)})
    assert d.sock.exists() and (state / "memory-state.json").exists() is False
    env = {**os.environ, "ZCOR_SOCKET": str(d.sock)}
    with Client(env["ZCOR_SOCKET"], role="operator") as op:
        assert op.status()["memoryDir"] == str(state)
    out = subprocess.run(DAEMON_CMD[:2] + ["import sys; from zcord.cli import main; sys.exit(main())", "status"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["socket"] == str(d.sock)


def test_socket_activation_and_watchdog(make_daemon):
    d = make_daemon()
    d.sock.parent.mkdir(mode=0o750)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(d.sock))
    listener.listen(16)
    fd = listener.fileno()
    # LISTEN_PID must be the daemon's own pid: a wrapper puts the socket on fd 3 and execs
    wrapper = (f"import os, sys; os.dup2({fd}, 3); os.environ.update(LISTEN_PID=str(os.getpid()), "
               f"LISTEN_FDS='1'); os.execv(sys.argv[1], sys.argv[1:])")
    prefix = [sys.executable, "-c", wrapper]
    d.start(cmd_prefix=prefix, pass_fds=(fd,), env={"WATCHDOG_USEC": "200000"},
            args=["--memory-dir", str(d.memdir), "--socket", str(d.root / "unused.sock")])
    listener.close()
    with d.client() as c:
        c.ping()
    assert not (d.root / "unused.sock").exists()
    d.wait_for("WATCHDOG=1", timeout=10)
    assert d.stop() == 0
    assert d.sock.exists()  # systemd owns an activated socket; zcord leaves it alone
