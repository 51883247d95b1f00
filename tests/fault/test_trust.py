"""The trust boundary (issue 11), tried the way an attacker with access to the socket would:
roles from the kernel, the API key kept to deployment-confirmed URLs, planted sockets.

Other users are real: forked children drop to other uids and gids (the suite runs as root;
elsewhere these tests are skipped). The operator group is a real group made with groupadd
for the test and removed afterwards.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.fakellm import FakeLLM, openai_text
from tests.fault.test_access import as_user
from tests.integration.conftest import ZCOR_CMD
from zcord.client import Client, ToolError, UnsafeSocketError

pytestmark = pytest.mark.fault

STRANGER, MEMBER, PRIMARY = 40012, 40013, 40014
LOCAL = {"NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}


@pytest.fixture
def root_only():
    if os.geteuid() != 0:
        pytest.skip("needs root to act as other users (fork + setuid) and to create a group")


@pytest.fixture
def ops_group(root_only):
    """A throwaway operator group (groupadd); its name and gid."""
    name = f"zcops{uuid.uuid4().hex[:6]}"
    done = subprocess.run(["groupadd", name], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot create a group here: {done.stderr.strip() or done.returncode}")
    import grp

    yield name, grp.getgrnam(name).gr_gid
    subprocess.run(["groupdel", name], capture_output=True)


def line_call(path, messages: list[tuple[str, dict]]) -> callable:
    """A bare client for a forked child: send each (method, params), collect every reply."""
    def fn() -> dict:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(20)
        s.connect(str(path))
        f = s.makefile("rwb")
        replies = []
        for n, (method, params) in enumerate(messages):
            f.write(json.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params}).encode() + b"\n")
            f.flush()
            replies.append(json.loads(f.readline()))
        return {"replies": replies}
    return fn


AS_OPERATOR = {"protocolVersion": "2025-06-18", "capabilities": {"experimental": {"zcor": {"role": "operator"}}}}
AS_BOT = {"protocolVersion": "2025-06-18", "capabilities": {}}


def open_to_everyone(d) -> None:
    """Let any uid reach the socket: what is tested here is the role, not the file modes."""
    os.chmod(d.root, 0o755)
    os.chmod(d.sock.parent, 0o755)
    os.chmod(d.sock, 0o666)


def test_operator_role_comes_from_kernel_credentials(make_daemon, ops_group):
    group, gid = ops_group
    d = make_daemon()
    d.memdir.mkdir(mode=0o750)
    (d.memdir / "config.json").write_text(json.dumps({"operatorGroup": group}))
    d.start()
    open_to_everyone(d)

    # a stranger asking for operator is refused, naming the rule; the connection may still be the bot
    out = as_user(STRANGER, STRANGER, [], line_call(d.sock, [
        ("tools/call", {"name": "zcor_memory_query", "arguments": {}}),
        ("initialize", AS_OPERATOR), ("zcor/status", {}), ("initialize", AS_BOT),
        ("tools/call", {"name": "zcor_memory_query", "arguments": {}}),
        ("zcor/config/set", {"patch": {"llm": {"baseUrl": "http://127.0.0.1:9/v1"}}}),
        ("initialize", AS_OPERATOR)]))
    early, refused, status, bot, query, config_set, again = out["replies"]
    assert "before initialize" in early["error"]["message"]
    assert refused["error"]["data"]["code"] == "forbidden"
    message = refused["error"]["message"]
    assert f"uid {STRANGER}" in message and group in message and "root" in message
    assert "before initialize" in status["error"]["message"]
    assert bot["result"]["capabilities"]["experimental"]["zcor"]["role"] == "bot"
    assert query["result"]["isError"] is False
    assert config_set["error"]["data"]["code"] == "forbidden"
    assert "once per connection" in again["error"]["message"]

    # a member of the operator group (supplementary, then primary) is the operator
    for uid, primary, extra in ((MEMBER, MEMBER, [gid]), (PRIMARY, gid, [])):
        out = as_user(uid, primary, extra, line_call(d.sock, [("initialize", AS_OPERATOR), ("zcor/status", {})]))
        init, status = out["replies"]
        assert init["result"]["capabilities"]["experimental"]["zcor"]["role"] == "operator", out
        assert status["result"]["pid"] == d.proc.pid
    # zcord's own uid (root here) is the operator too
    with d.client("operator") as op:
        assert op.status()["pid"] == d.proc.pid
        # and who may be the operator is never changed over the socket
        with pytest.raises(ToolError) as bad:
            op.config_set({"operatorGroup": "users"})
        assert bad.value.code == "invalid_argument" and "deployment" in bad.value.message
        assert op.config_get()["operatorGroup"] == group


def test_zcor_mcp_never_passes_on_a_hosts_role_request(make_daemon):
    daemon = make_daemon().start()
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": AS_OPERATOR},
        {"jsonrpc": "2.0", "id": 2, "method": "zcor/status"},
        {"jsonrpc": "2.0", "id": 3, "method": "zcor/synonyms/set", "params": {"index": 0, "terms": None}},
    ]
    # the escaped spelling of the same request must not slip through either
    sneaky = ('{"jsonrpc":"2.0","id":4,"method":"\\u0069nitialize","params":{"capabilities":{"experimental":'
              '{"\\u007acor":{"role":"operator"}}}}}')
    text = "\n".join(json.dumps(m) for m in lines) + "\n" + sneaky + "\n"
    out = subprocess.run(ZCOR_CMD + ["mcp", "--socket", str(daemon.sock)], input=text, capture_output=True,
                         text=True, timeout=60)
    replies = {r["id"]: r for r in map(json.loads, out.stdout.splitlines())}
    assert replies[1]["result"]["capabilities"]["experimental"]["zcor"]["role"] == "bot"
    assert replies[2]["error"]["data"]["code"] == "forbidden"
    assert replies[3]["error"]["data"]["code"] == "forbidden"
    assert "once per connection" in replies[4]["error"]["message"]
    with daemon.client("operator") as op:
        assert len(op.synonym_groups()) > 0


def test_the_api_key_goes_only_to_the_deployments_base_url(make_daemon, tmp_path):
    key = "sk-deployment-" + uuid.uuid4().hex
    with FakeLLM() as good, FakeLLM() as evil:
        creds = tmp_path / "creds"
        creds.mkdir()
        (creds / "llm-api-key").write_text(key + "\n")
        (creds / "llm-base-url").write_text(good.url + "\n")  # what a unit's LoadCredential= provides
        d = make_daemon().start(env={"CREDENTIALS_DIRECTORY": str(creds), "ZCOR_LLM_MODEL": "fake", **LOCAL})
        with d.client("operator") as op:
            m = op.call_tool("zcor_memory_write", {"title": "密钥测试咖啡", "content": "x"})["id"]
            op.config_set({"llm": {"baseUrl": good.url}})
            cfg = op.config_get()["llm"]
            assert cfg["apiKeySet"] is True and cfg["apiKeyWithheld"] is False
        good.script.append(openai_text(json.dumps([m])))
        with d.client() as bot:
            assert [i["id"] for i in bot.call_tool("zcor_memory_search", {"keywords": ["咖啡"]})["items"]] == [m]
        assert good.requests[-1]["headers"]["Authorization"] == f"Bearer {key}"

        # the attack: point baseUrl at a listener (even a legitimate operator may not do this with the key)
        with d.client("operator") as op:
            after = op.config_set({"llm": {"baseUrl": evil.url}})
            assert after["llm"]["baseUrl"] == evil.url
            assert after["llm"]["apiKeyWithheld"] is True
            assert evil.url in after["llm"]["apiKeyWithheldReason"]
            assert "ZCOR_LLM_BASE_URL" in after["llm"]["apiKeyWithheldReason"]
        evil.script.append(openai_text(json.dumps([m])))
        with d.client() as bot:
            bot.call_tool("zcor_memory_search", {"keywords": ["咖啡"]})
        sent = evil.requests[-1]["headers"]
        assert "Authorization" not in sent and "x-api-key" not in sent
        assert key not in json.dumps(evil.requests)
        with d.client("operator") as op:
            everything = json.dumps([op.config_get(), op.status(),
                                     op.call_tool("zcor_memory_history", {"limit": 100})])
        assert key not in everything
        assert d.stop() == 0
        assert key not in d.stderr()
        for f in d.memdir.rglob("*"):
            if f.is_file():
                assert key.encode() not in f.read_bytes(), f


def test_zcord_refuses_a_socket_directory_others_control(make_daemon, root_only):
    d = make_daemon()
    run = d.sock.parent
    run.mkdir(mode=0o750)
    os.chown(run, STRANGER, STRANGER)  # /tmp/zcor-$UID made first by someone else
    d.start(wait=False)
    assert d.proc.wait(30) == 1
    assert str(run) in d.stderr() and f"uid {STRANGER}" in d.stderr()
    os.chown(run, 0, 0)
    os.chmod(run, 0o777)
    d.start(wait=False)
    assert d.proc.wait(30) == 1
    assert "writable by group or others" in d.stderr()
    os.chmod(run, 0o750)
    d.start()
    with d.client() as c:
        c.ping()


def test_directories_and_socket_get_their_modes_under_any_umask(make_daemon):
    for umask in ("000", "077"):
        d = make_daemon()
        d.sock = d.root / "a" / "b" / "zcord.sock"
        d.start(cmd_prefix=["sh", "-c", f'umask {umask}; exec "$@"', "sh"])
        with d.client("operator") as op:
            op.call_tool("zcor_memory_write", {"title": "模式", "content": "x"})
            op.call_tool("zcor_memory_backup")
        assert stat.S_IMODE(os.lstat(d.sock).st_mode) == 0o660, umask
        for p in (d.root / "a", d.root / "a" / "b", d.memdir, d.memdir / "backups", d.memdir / "history"):
            assert stat.S_IMODE(os.stat(p).st_mode) == 0o750, (umask, p)
        for p in [d.memdir / n for n in ("memory-state.json", "operations.jsonl", "zcord.lock", "synonyms.json")] \
                + list((d.memdir / "backups").iterdir()):
            assert stat.S_IMODE(os.stat(p).st_mode) == 0o640, (umask, p)
        assert d.stop() == 0


def plant_listener(path: Path, uid: int, group: int | None = None) -> tuple[int, int]:
    """A fake zcord: a child that binds path as root, then runs as uid and answers anything
    (with group: the socket is handed to uid:group, mode 0660, as zcord's own would be).
    Returns (pid, 0) once it listens."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(str(path))
            if group is not None:
                os.chown(path, uid, group)
                os.chmod(path, 0o660)
            os.setgid(uid)
            os.setuid(uid)
            s.listen(4)  # the kernel records the listener's credentials now (SO_PEERCRED)
            os.close(w)
            while True:
                c, _ = s.accept()
                c.recv(65536)
                c.sendall(b'{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},'
                          b'"serverInfo":{"name":"zcord","version":"evil"}}}\n')
        finally:
            os._exit(0)
    os.close(w)
    os.read(r, 1)  # EOF once the child is listening
    os.close(r)
    return pid, 0


def test_clients_refuse_planted_sockets(make_daemon, root_only):
    root = make_daemon.root()
    # 1. a directory owned by another user in a place everyone may write (/tmp/zcor-$UID squatted)
    shared = root / "tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    squat = shared / "zcor-0"
    squat.mkdir(mode=0o700)
    pid, _ = plant_listener(squat / "zcord.sock", 0)
    try:
        os.chown(squat, STRANGER, STRANGER)
        os.chown(squat / "zcord.sock", STRANGER, STRANGER, follow_symlinks=False)
        with pytest.raises(UnsafeSocketError) as refused:
            Client(squat / "zcord.sock").connect()
        assert f"uid {STRANGER}" in str(refused.value)
        out = subprocess.run(ZCOR_CMD + ["status", "--socket", str(squat / "zcord.sock")], capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 3 and "planted" in out.stderr and "evil" not in out.stdout
        out = subprocess.run(ZCOR_CMD + ["mcp", "--socket", str(squat / "zcord.sock")], input="", capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 3 and "planted" in out.stderr
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)

    # 2. a directory anyone may write to
    open_dir = root / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    pid, _ = plant_listener(open_dir / "zcord.sock", 0)
    try:
        with pytest.raises(UnsafeSocketError, match="writable by group or others"):
            Client(open_dir / "zcord.sock").connect()
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)

    # 3. a safe directory, but the process answering is not the socket's owner
    safe = root / "safe"
    safe.mkdir(mode=0o750)
    pid, _ = plant_listener(safe / "zcord.sock", STRANGER)
    try:
        with pytest.raises(UnsafeSocketError, match=f"runs as uid {STRANGER}"):
            Client(safe / "zcord.sock").connect()
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)


def test_an_operator_reaches_a_daemon_run_by_a_service_user(make_daemon, root_only):
    """As under systemd: /run/zcor (root, 0755) / NAME (zcor, 0750) / zcord.sock owned by zcor;
    the client runs as a member of the socket's group, not as the daemon's user. (The
    daemon is a forked stand-in: the interpreter may not be reachable by other uids.)"""
    root = make_daemon.root()
    os.chmod(root, 0o755)
    run = root / "svc"
    run.mkdir(mode=0o750)
    os.chown(run, STRANGER, MEMBER)
    pid, _ = plant_listener(run / "zcord.sock", STRANGER, group=MEMBER)
    try:
        def connect() -> dict:
            try:
                c = Client(run / "zcord.sock", timeout=20, connect_timeout=20).connect()
                version = c.initialize_result["serverInfo"]["version"]
                c.close()
                return {"version": version}
            except Exception as e:  # reported to the parent
                return {"error": repr(e)}

        assert as_user(PRIMARY, PRIMARY, [MEMBER], connect) == {"version": "evil"}
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
