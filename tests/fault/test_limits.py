"""No client can starve the rest, fill the disk, or corrupt the Memory (issue 11): connection
cap, initialize timeout, unread output, file descriptors, slow and huge provider answers,
the bot's backups, crafted restores, planted symlinks, lost locks, stale temporary files
and sequence numbers across restarts. Real daemons over real sockets."""

from __future__ import annotations

import json
import os
import select
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.fakellm import FakeLLM, openai_text
from tests.fault.holds.sitecustomize import daemon_env
from tests.fault.wire import Wire
from zcord.client import ToolError

pytestmark = pytest.mark.fault

LOCAL = {"NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}


def configured(make_daemon, config: dict, **start):
    """A daemon whose config.json says config before it starts."""
    d = make_daemon()
    d.memdir.mkdir(mode=0o750)
    (d.memdir / "config.json").write_text(json.dumps(config))
    return d.start(**start)


def raw_connect(path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(str(path))
    return s


def read_until_closed(s: socket.socket) -> bytes:
    buf = b""
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            return buf
        if not chunk:
            return buf
        buf += chunk


def test_the_connection_cap_refuses_clearly_and_frees_up(make_daemon):
    d = configured(make_daemon, {"maxConnections": 4})
    held = [Wire(d.sock, "bot") for _ in range(4)]
    extra = raw_connect(d.sock)
    reply = json.loads(read_until_closed(extra).splitlines()[0])
    assert reply["id"] is None and reply["error"]["data"]["code"] == "too_many_connections"
    assert "4 connections" in reply["error"]["message"]
    with pytest.raises(ToolError) as refused:
        d.client()
    assert refused.value.code == "too_many_connections"
    for w in held:  # the ones inside are served as before
        assert w.call("ping")["result"] == {}
    held.pop().close()
    with d.client("operator") as op:  # a freed slot is usable again
        assert op.status()["connections"] == 4
    for w in held:
        w.close()


def test_connections_that_never_initialize_are_closed(make_daemon):
    d = configured(make_daemon, {"initTimeoutSeconds": 0.5})
    ready = Wire(d.sock, "bot")  # initialized: stays
    idle = raw_connect(d.sock)
    lines = read_until_closed(idle).splitlines()
    assert "no initialize within 0.5s" in json.loads(lines[0])["error"]["message"]
    assert ready.call("ping")["result"] == {}
    ready.close()


def test_a_client_that_never_reads_is_cut_off_alone(make_daemon):
    d = make_daemon().start()
    with d.client("operator") as op:
        for i in range(50):
            op.call_tool("zcor_memory_write", {"title": f"大回复 {i}", "content": "长" * 20_000})
    hog = raw_connect(d.sock)
    hog.sendall(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}\n')
    query = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "zcor_memory_query", "arguments": {"limit": 100}}}).encode() + b"\n"
    hog.sendall(query * 12)  # ~ 70 MB of replies it will never read
    with d.client(connect_timeout=60, timeout=60) as other:
        for _ in range(10):
            assert other.call_tool("zcor_memory_query", {"limit": 1})["total"] == 50
    # the hog is disconnected once its unread output passes the cap
    read_until_closed(hog)
    hog.close()
    assert "is not reading its replies" in d.stderr()
    with d.client() as c:
        c.ping()


def test_out_of_file_descriptors_is_named_and_logged_quietly(make_daemon):
    limit = 64
    wrapper = (f"import os, resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, {limit})); "
               f"os.execv(sys.argv[1], sys.argv[1:])")
    d = configured(make_daemon, {"maxConnections": 1000}, cmd_prefix=[sys.executable, "-c", wrapper])
    first = Wire(d.sock, "bot")
    assert first.call("tools/call", {"name": "zcor_memory_write", "arguments": {"title": "先写", "content": "x"}})
    flood = [raw_connect(d.sock) for _ in range(limit + 20)]
    # every descriptor is taken by the flood: a change goes to the journal zcord holds
    # open, but a backup (a new file) fails, and says why
    wrote = first.call("tools/call", {"name": "zcor_memory_write", "arguments": {"title": "再写", "content": "y"}})
    assert wrote["result"]["isError"] is False, wrote
    for _ in range(50):
        reply = first.call("tools/call", {"name": "zcor_memory_backup", "arguments": {}})
        if reply["result"]["isError"]:
            break
        first.call("tools/call", {"name": "zcor_memory_query", "arguments": {}})
    err = reply["result"]["structuredContent"]
    assert err["code"] == "storage_error", reply
    assert "EMFILE" in err["message"] and "not a disk problem" in err["message"]
    assert "Check the disk" not in err["message"]
    for s in flood:
        s.close()
    # zcord closes the flood's connections as it sees them end; then backups work again
    for _ in range(200):
        again = first.call("tools/call", {"name": "zcor_memory_backup", "arguments": {}})
        if not again["result"]["isError"]:
            break
        time.sleep(0.05)
    assert again["result"]["isError"] is False, again
    first.close()
    log = d.stderr()
    accept_lines = [ln for ln in log.splitlines() if "cannot accept a new connection" in ln]
    assert accept_lines and all("EMFILE" in ln for ln in accept_lines)
    assert "Traceback" not in log
    assert len(accept_lines) < 30


def test_a_dripping_or_huge_provider_answer_is_an_error(make_daemon):
    with FakeLLM() as llm:
        d = make_daemon().start(env={"ZCOR_LLM_BASE_URL": llm.url, "ZCOR_LLM_MODEL": "fake", **LOCAL})
        with d.client("operator") as op:
            op.config_set({"llm": {"timeoutSeconds": 1}})
            op.call_tool("zcor_memory_write", {"title": "滴答咖啡", "content": "x"})
        llm.script.append(("drip", 0.2))
        with d.client(timeout=60) as bot:
            with pytest.raises(ToolError) as slow:
                bot.call_tool("zcor_memory_search", {"keywords": ["咖啡"]})
            assert slow.value.code == "provider_error" and "within 1 s" in slow.value.message
            llm.script.append(("raw", "[" + " " * (9 << 20) + "]"))
            with pytest.raises(ToolError) as huge:
                bot.call_tool("zcor_memory_search", {"keywords": ["咖啡"]})
            assert huge.value.code == "provider_error" and "larger than 8 MiB" in huge.value.message


def test_a_trickling_provider_ends_at_the_whole_request_deadline(make_daemon):
    """One byte every 0.4 s never lets a single read time out (1 s): in the headers that
    held a search forever, in the body up to twice the timeout. The whole request now ends
    at timeoutSeconds with the timeout error, and zcord hangs up on the provider."""
    with FakeLLM() as llm:
        d = make_daemon().start(env={"ZCOR_LLM_BASE_URL": llm.url, "ZCOR_LLM_MODEL": "fake", **LOCAL})
        with d.client("operator") as op:
            op.config_set({"llm": {"timeoutSeconds": 1}})
            op.call_tool("zcor_memory_write", {"title": "涓流咖啡", "content": "x"})
        with d.client(timeout=60) as bot:
            for phase, wording in (("head", "did not answer"), ("body", "did not finish its answer")):
                llm.script.append(("trickle", 0.4, phase))
                with pytest.raises(ToolError) as slow:
                    bot.call_tool("zcor_memory_search", {"keywords": ["咖啡"]})
                assert slow.value.code == "provider_error"
                assert f"{wording} within 1 s." in slow.value.message, slow.value.message
                # the provider's writes fail once zcord has hung up: it read a bounded few bytes
                assert llm.trickle_done.wait(30), f"{phase}: zcord kept reading the trickle"
                assert llm.trickled <= 8, (phase, llm.trickled)
            bot.ping()


def test_the_bots_backups_are_rate_limited_and_pruned(make_daemon):
    d = configured(make_daemon, {"botBackupIntervalSeconds": 0, "maxBotBackups": 3})
    backups = d.memdir / "backups"
    with d.client("operator") as op, d.client() as bot:
        mine = [op.call_tool("zcor_memory_backup")["backupFile"] for _ in range(2)]
        made = [bot.call_tool("zcor_memory_backup")["backupFile"] for _ in range(6)]
        names = sorted(os.listdir(backups))
        assert set(mine) <= set(names)  # an operator's backups are never pruned
        assert sorted(set(names) - set(mine)) == sorted(made[-3:])
    assert d.stop() == 0

    (d.memdir / "config.json").write_text(json.dumps({"maxBotBackups": 3}))  # default interval: 600 s
    d.start()
    with d.client() as bot, d.client("operator") as op:
        # the interval survives a restart: the newest bot backup is seconds old
        with pytest.raises(ToolError) as limited:
            bot.call_tool("zcor_memory_backup")
        assert limited.value.code == "rate_limited" and "600" in limited.value.message
        assert limited.value.data["retryAfterSeconds"] > 0
        op.call_tool("zcor_memory_backup")  # operators are not limited
        op.call_tool("zcor_memory_backup")


def test_crafted_backups_are_invalid_arguments(make_daemon):
    d = make_daemon().start()
    backups = d.memdir / "backups"
    (backups / "deep.json").write_bytes(b"[" * 200_000 + b"]" * 200_000)
    (backups / "deep3.json").write_bytes(b'{"version":3,"nodes":' + b"[" * 200_000 + b"]" * 200_000 + b"}")
    with d.client("operator") as op:
        for name in ("deep.json", "deep3.json"):
            with pytest.raises(ToolError) as bad:
                op.call_tool("zcor_memory_restore", {"backupFile": name})
            assert bad.value.code == "invalid_argument", bad.value.message
            assert "deep" in bad.value.message
        assert op.status()["nodes"] == 0


def big_backup(n: int) -> bytes:
    nodes = ",".join(json.dumps({"id": f"m{i}", "title": f"节点 {i}", "content": "内容" * 20, "keywords": ["节点"],
                                 "createdAt": "2026-01-01T00:00:00+00:00", "updatedAt": "2026-01-01T00:00:00+00:00"})
                     for i in range(1, n + 1))
    return (f'{{"version":3,"nextId":{n + 1},"important":[],"nodes":[{nodes}],"relationships":[],'
            f'"historySegments":[],"history":[]}}').encode()


def test_the_restore_bounds_are_settings_named_in_the_refusal(make_daemon):
    d = make_daemon().start()
    backups = d.memdir / "backups"
    with d.client("operator") as op:
        for i in range(4):
            op.call_tool("zcor_memory_write", {"title": f"界限{i}", "content": "x"})
        for p in ("p1", "p2"):
            op.call_tool("zcor_relationship_write", {"personId": p, "name": p, "relationship": "友",
                                                     "affinity": 1, "reason": "r"})
        full = op.call_tool("zcor_memory_backup")["backupFile"]
        doc = json.loads((backups / full).read_bytes())
        nested: list = []
        for _ in range(20):
            nested = [nested]
        doc["history"][0]["receipt"] = {"deep": nested}  # the top, history, change, receipt, 21 lists: 25 deep
        (backups / "deep.json").write_text(json.dumps(doc))
        size = (backups / full).stat().st_size
        ops_before = op.status()["historyChanges"]

        def refused(name: str, patch: dict, *words: str) -> None:
            op.config_set(patch)
            with pytest.raises(ToolError) as bad:
                op.call_tool("zcor_memory_restore", {"backupFile": name})
            assert bad.value.code == "invalid_argument", bad.value.message
            for w in words:
                assert w in bad.value.message, bad.value.message

        refused(full, {"maxRestoreNodes": 3}, "4 memories", "at most 3", "maxRestoreNodes")
        refused(full, {"maxRestoreNodes": 4, "maxRestoreRelationships": 1}, "2 relationships", "at most 1",
                "maxRestoreRelationships")
        refused(full, {"maxRestoreRelationships": 2, "maxRestoreBytes": size - 1}, f"{size} bytes",
                f"{size - 1}", "maxRestoreBytes")
        refused("deep.json", {"maxRestoreBytes": 1 << 20, "maxRestoreDepth": 24}, "more than 24 deep",
                "maxRestoreDepth")
        status = op.status()  # nothing was restored
        assert (status["nodes"], status["relationships"], status["historyChanges"]) == (4, 2, ops_before)
        with pytest.raises(ToolError) as low:
            op.config_set({"maxRestoreDepth": 4})
        assert low.value.code == "invalid_argument" and "maxRestoreDepth" in low.value.message
        # at the bounds, the same files restore
        op.config_set({"maxRestoreDepth": 25})
        assert op.call_tool("zcor_memory_restore", {"backupFile": "deep.json"})["nodes"] == 4
        op.config_set({"maxRestoreBytes": size})
        assert op.call_tool("zcor_memory_restore", {"backupFile": full})["relationships"] == 2


def test_reads_are_answered_while_a_large_restore_is_parsed(make_daemon):
    d = make_daemon().start()
    (d.memdir / "backups" / "big.json").write_bytes(big_backup(25_000))
    op = Wire(d.sock, "operator", timeout=120)
    reader = Wire(d.sock, "bot")
    node = reader.call("tools/call", {"name": "zcor_memory_write", "arguments": {"title": "读", "content": "x"}})
    node_id = node["result"]["structuredContent"]["id"]
    restore = op.send("tools/call", {"name": "zcor_memory_restore", "arguments": {"backupFile": "big.json"}})
    # a read sent after the restore is answered while the backup is still being parsed
    assert reader.call("tools/call", {"name": "zcor_memory_read", "arguments": {"id": node_id}}
                       )["result"]["isError"] is False
    assert reader.call("ping")["result"] == {}
    assert select.select([op.sock], [], [], 0)[0] == [], "the restore answered first"
    result = op.reply(restore, timeout=120)
    assert result["result"]["structuredContent"]["nodes"] == 25_000
    op.close()
    reader.close()


def _tool(wire: Wire, name: str, args: dict) -> dict:
    reply = wire.call("tools/call", {"name": name, "arguments": args})
    assert reply["result"]["isError"] is False, reply
    return reply["result"]["structuredContent"]


def _until_exists(path: Path, d) -> None:
    for _ in range(6000):
        if path.exists():
            return
        assert d.proc.poll() is None, d.stderr()
        time.sleep(0.01)
    raise AssertionError(f"{path} never appeared")


def test_reads_and_the_watchdog_go_on_while_a_restore_writes_and_changes_wait(make_daemon):
    """The restore's slow phase (pre-restore backup written, new snapshot not yet) is held
    open by the test (tests/fault/holds): meanwhile reads see the old state, the watchdog is fed, a write
    waits without holding the reads behind it, and runs after the restore."""
    d = make_daemon()
    hold = d.root / "restore-held"
    d.start(env={**daemon_env(restore=hold), "WATCHDOG_USEC": "200000"})
    op = Wire(d.sock, "operator", timeout=120)
    bot = Wire(d.sock, "bot")
    kept = _tool(bot, "zcor_memory_write", {"title": "备份前", "content": "x"})["id"]
    backup = _tool(op, "zcor_memory_backup", {})["backupFile"]
    dropped = _tool(bot, "zcor_memory_write", {"title": "备份后", "content": "y"})["id"]
    restore = op.send("tools/call", {"name": "zcor_memory_restore", "arguments": {"backupFile": backup}})
    _until_exists(hold, d)
    d.messages.clear()
    d.wait_for("WATCHDOG=1")  # pinged while the restore is in its slow phase
    assert _tool(bot, "zcor_memory_read", {"id": dropped})["id"] == dropped  # the old state
    write = bot.send("tools/call", {"name": "zcor_memory_write",
                                    "arguments": {"title": "恢复中写", "content": "z"}})
    # a read sent after the waiting write is answered before it (the worker is not held)
    assert _tool(bot, "zcor_memory_read", {"id": kept})["id"] == kept
    assert write not in [m.get("id") for m in bot.others], "the write ran during the restore"
    assert select.select([op.sock], [], [], 0)[0] == [], "the restore answered while held"
    hold.unlink()
    restored = op.reply(restore, timeout=120)["result"]
    assert restored["isError"] is False, restored
    written = bot.reply(write)["result"]
    assert written["isError"] is False, written
    new_id = written["structuredContent"]["id"]
    missing = bot.call("tools/call", {"name": "zcor_memory_read", "arguments": {"id": dropped}})["result"]
    assert missing["isError"] is True and missing["structuredContent"]["code"] == "not_found"
    assert _tool(bot, "zcor_memory_read", {"id": new_id})["title"] == "恢复中写"
    records = [json.loads(line) for line in (d.memdir / "operations.jsonl").read_text().splitlines()]
    seqs = [r["seq"] for r in records]
    assert len(seqs) == len(set(seqs))
    restore_rec = next(r for r in records if r["tool"] == "zcor_memory_restore")
    write_rec = next(r for r in records if r["params"].get("title") == "恢复中写")
    assert write_rec["changes"][0]["changeId"] == restore_rec["changes"][0]["changeId"] + 1
    op.close()
    bot.close()
    assert d.stop() == 0
    d.start()  # what was acknowledged is what the next start loads
    with d.client() as c:
        assert {n["id"] for n in c.call_tool("zcor_memory_query", {})["items"]} == {kept, new_id}


def test_reads_and_writes_go_on_while_a_backup_is_written(make_daemon):
    """A backup is encoded and written off the worker (held open here by the test, tests/fault/holds):
    calls go on meanwhile, and the backup holds the Memory as it was when it was asked for."""
    d = make_daemon()
    hold = d.root / "backup-held"
    d.start(env=daemon_env(backup=hold))
    op = Wire(d.sock, "operator", timeout=120)
    bot = Wire(d.sock, "bot")
    before = _tool(bot, "zcor_memory_write", {"title": "备份中", "content": "x"})["id"]
    backup = op.send("tools/call", {"name": "zcor_memory_backup", "arguments": {}})
    _until_exists(hold, d)
    assert _tool(bot, "zcor_memory_read", {"id": before})["id"] == before
    after = _tool(bot, "zcor_memory_write", {"title": "备份后写", "content": "y"})["id"]
    assert select.select([op.sock], [], [], 0)[0] == [], "the backup answered while held"
    hold.unlink()
    reply = op.reply(backup, timeout=120)["result"]
    assert reply["isError"] is False, reply
    saved = json.loads((d.memdir / "backups" / reply["structuredContent"]["backupFile"]).read_bytes())
    assert [n["id"] for n in saved["nodes"]] == [before] and after != before
    records = [json.loads(line) for line in (d.memdir / "operations.jsonl").read_text().splitlines()]
    seqs = [r["seq"] for r in records]
    assert seqs == sorted(seqs) and len(seqs) == len(set(seqs))  # the backup's record took a later seq
    op.close()
    bot.close()


def test_a_restore_killed_in_its_slow_phase_leaves_the_old_state(make_daemon):
    d = make_daemon()
    hold = d.root / "restore-held"
    d.start(env=daemon_env(restore=hold))
    op = Wire(d.sock, "operator", timeout=120)
    kept = _tool(op, "zcor_memory_write", {"title": "甲", "content": "x"})["id"]
    backup = _tool(op, "zcor_memory_backup", {})["backupFile"]
    later = _tool(op, "zcor_memory_write", {"title": "乙", "content": "y"})["id"]
    op.send("tools/call", {"name": "zcor_memory_restore", "arguments": {"backupFile": backup}})
    _until_exists(hold, d)
    d.kill()
    op.close()
    hold.unlink()
    d.start()
    with d.client() as c:
        assert {n["id"] for n in c.call_tool("zcor_memory_query", {})["items"]} == {kept, later}
        history = c.call_tool("zcor_memory_history", {})["items"]
        assert all(h["tool"] != "zcor_memory_restore" for h in history)


def test_planted_symlinks_are_refused(make_daemon):
    d = make_daemon().start()
    assert d.stop() == 0
    target = d.root / "victim.txt"
    target.write_text("keep me\nsecond line\n")
    for name in ("zcord.lock", "operations.jsonl"):
        real = d.memdir / name
        real.rename(d.root / f"{name}.real")
        real.symlink_to(target)
        d.start(wait=False)
        assert d.proc.wait(30) == 1, d.stderr()
        assert f"{name} is a symbolic link" in d.stderr()
        assert target.read_text() == "keep me\nsecond line\n"
        real.unlink()
        (d.root / f"{name}.real").rename(real)
    elsewhere = d.root / "elsewhere"
    elsewhere.mkdir()
    (d.memdir / "backups").rename(d.root / "backups.real")
    (d.memdir / "backups").symlink_to(elsewhere)
    d.start(wait=False)
    assert d.proc.wait(30) == 1
    assert "backups/" in d.stderr() and "symbolic link" in d.stderr()
    (d.memdir / "backups").unlink()
    (d.root / "backups.real").rename(d.memdir / "backups")
    d.start()
    with d.client() as c:
        c.ping()


def test_a_lost_lock_stops_writes_and_a_second_daemon_takes_over(make_daemon):
    first = make_daemon().start()
    with first.client("operator") as op:
        op.call_tool("zcor_memory_write", {"title": "锁前", "content": "x"})
        (first.memdir / "zcord.lock").unlink()
        second = make_daemon(root=make_daemon.root(), memdir=first.memdir).start()
        with pytest.raises(ToolError) as lost:
            op.call_tool("zcor_memory_write", {"title": "锁后", "content": "y"})
        assert lost.value.code == "storage_error" and "no longer holds" in lost.value.message
    with second.client("operator") as op2:
        op2.call_tool("zcor_memory_write", {"title": "新主人", "content": "z"})
        titles = {n["title"] for n in op2.call_tool("zcor_memory_query", {})["items"]}
    assert titles == {"锁前", "新主人"}
    assert second.stop() == 0

    # a renamed Memory directory: the old daemon stops writing as well
    third = make_daemon().start()
    moved = third.memdir.with_name("moved")
    third.memdir.rename(moved)
    with third.client("operator") as op:
        with pytest.raises(ToolError) as gone:
            op.call_tool("zcor_memory_write", {"title": "搬走", "content": "y"})
        assert "no longer holds" in gone.value.message


def test_stale_temporary_files_are_removed_at_start(make_daemon):
    d = make_daemon().start()
    assert d.stop() == 0
    leftovers = [d.memdir / ".memory-state.json.4242.deadbeef.tmp",
                 d.memdir / "backups" / ".memory-state-20260101T000000.000Z.json.4242.0badf00d.tmp",
                 d.memdir / "history" / ".changes-000000001-000000009.jsonl.77.12345678.tmp"]
    for f in leftovers:
        f.write_bytes(b"x" * 1000)
    keep = d.memdir / "backups" / "notes.tmp"  # not ours: left alone
    keep.write_text("mine")
    d.start()
    assert not any(f.exists() for f in leftovers)
    assert keep.exists()
    assert "removed 3 temporary file(s)" in d.stderr()


def seqs(memdir: Path) -> list[int]:
    return [json.loads(line)["seq"] for line in (memdir / "operations.jsonl").read_bytes().splitlines()]


def test_seq_stays_unique_across_a_restart_after_a_late_search(make_daemon):
    with FakeLLM() as llm:
        d = make_daemon().start(env={"ZCOR_LLM_BASE_URL": llm.url, "ZCOR_LLM_MODEL": "fake", **LOCAL})
        with d.client("operator") as op:
            m = op.call_tool("zcor_memory_write", {"title": "慢搜索咖啡", "content": "x"})["id"]
        release = threading.Event()
        llm.script.append(("wait", release, openai_text(json.dumps([m]))))
        bot = Wire(d.sock, "bot", timeout=60)
        search = bot.send("tools/call", {"name": "zcor_memory_search", "arguments": {"keywords": ["咖啡"]}})
        assert llm.arrived.wait(30), "the search never reached the provider"
        with d.client("operator") as op:
            op.call_tool("zcor_memory_write", {"title": "搜索中写入一", "content": "a"})
            op.call_tool("zcor_memory_write", {"title": "搜索中写入二", "content": "b"})
        release.set()
        assert bot.reply(search, timeout=60)["result"]["isError"] is False
        bot.close()
        assert d.stop() == 0
        before = seqs(d.memdir)
        assert before == sorted(before) and len(set(before)) == len(before)
        d.start(env={"ZCOR_LLM_BASE_URL": llm.url, "ZCOR_LLM_MODEL": "fake", **LOCAL})
        with d.client("operator") as op:
            op.call_tool("zcor_memory_write", {"title": "重启后", "content": "c"})
            op.call_tool("zcor_memory_read", {"id": m})
        after = seqs(d.memdir)
        assert len(set(after)) == len(after), after
        assert after == sorted(after)


def test_an_old_log_with_a_late_search_record_is_read_by_its_largest_seq(make_daemon):
    """A log written before the fix: the slow search's record (seq 2) after later calls."""
    d = make_daemon().start()
    with d.client("operator") as op:
        for i in range(3):
            op.call_tool("zcor_memory_query", {"keywords": [f"q{i}"]})
    assert d.stop() == 0
    log = d.memdir / "operations.jsonl"
    lines = log.read_bytes().splitlines()
    records = [json.loads(x) for x in lines]
    assert len(records) == 3
    records[-1]["seq"], records[0]["seq"] = records[0]["seq"], records[-1]["seq"]  # the late one last
    log.write_bytes(b"".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
                             for r in records))
    d.start()
    with d.client("operator") as op:
        op.call_tool("zcor_memory_query", {})
    after = seqs(d.memdir)
    assert len(set(after)) == len(after), after
    assert after[-1] == max(after[:-1]) + 1
