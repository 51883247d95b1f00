"""The second red-team round (issue 23): the bot role, nothing more, cannot destroy the way
back, lock others out, starve the worker, grow the daemon or the disk without bound, or
make time travel lie. Each test runs the attack as a hostile member of the socket's group
would, against a real daemon over a real socket, then checks the outcome now."""

from __future__ import annotations

import json
import os
import select
import signal
import threading
import time

import pytest

from tests.fault.test_limits import configured
from zcord.client import ToolError

pytestmark = pytest.mark.fault


def _write(c, title: str, content: str = "x") -> str:
    return c.call_tool("zcor_memory_write", {"title": title, "content": content})["id"]


def _restores(op) -> list[int]:
    items = op.history_query({"tool": "zcor_memory_restore", "limit": 100})["items"]
    return sorted(i["seq"] for i in items if i["status"] == "ok")


# -- 1. the way back --------------------------------------------------------------------------


def test_the_bots_restores_never_prune_the_way_back(make_daemon):
    """The attack: back up a nearly empty Memory, let real memories accumulate, restore the
    empty backup, then restore it again and again so pruning deletes the pre-restore copy
    that held the real Memory. Now: pre-restore copies are never pruned, and the bot's
    restores are rate-limited on their own."""
    d = configured(make_daemon, {"botBackupIntervalSeconds": 0, "botRestoreIntervalSeconds": 0,
                                 "maxBotBackups": 2})
    backups = d.memdir / "backups"
    with d.client() as bot, d.client("operator") as op:
        empty = bot.call_tool("zcor_memory_backup")["backupFile"]
        real = [_write(bot, f"真的记忆{i}") for i in range(5)]
        first = bot.call_tool("zcor_memory_restore", {"backupFile": empty})["backupFile"]
        for _ in range(5):
            bot.call_tool("zcor_memory_restore", {"backupFile": empty})
        for _ in range(3):
            bot.call_tool("zcor_memory_backup")  # the bot's own backups are pruned as before
        names = os.listdir(backups)
        assert first in names, "the copy holding the real Memory was pruned"
        assert sum(1 for n in names if n.endswith("-bot-prerestore.json")) == 6
        assert sum(1 for n in names if n.endswith("-bot.json")) == 2
        listed = {b["backupFile"]: b for b in op.backups()}
        assert listed[first]["bot"] is False  # not one the pruning touches
        # the operator takes the first restore back (forced past the later ones)
        seq = _restores(op)[0]
        op.history_revert(seq, force=True)
        assert {n["id"] for n in op.call_tool("zcor_memory_children")["items"]} == set(real)


def test_revert_and_time_travel_across_a_restore_work_when_its_backup_is_gone(make_daemon):
    """The pre-restore copy deleted by hand: the history holds every change, so the Memory
    before the restore is rebuilt from it."""
    d = configured(make_daemon, {"botRestoreIntervalSeconds": 0})
    with d.client() as bot, d.client("operator") as op:
        empty = op.call_tool("zcor_memory_backup")["backupFile"]
        a = _write(bot, "第一条")
        b = _write(bot, "第二条")
        bot.call_tool("zcor_memory_write", {"id": a, "title": "第一条改", "content": "y"})
        op.call_tool("zcor_relationship_write", {"personId": "qq:1", "name": "小明", "relationship": "朋友",
                                                 "affinity": 5, "reason": "r", "memoryNodeId": b})
        op.call_tool("zcor_memory_important", {"id": b, "important": True})
        before = op.history_at(time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(time.time() + 1)))
        time.sleep(1.2)
        gone = bot.call_tool("zcor_memory_restore", {"backupFile": empty})["backupFile"]
        _write(bot, "恢复之后")
        os.unlink(d.memdir / "backups" / gone)

        at = op.history_at(before["at"])  # time travel to before the restore
        assert at["nodes"] == before["nodes"] and at["important"] == [b]
        assert [r["personId"] for r in at["relationships"]] == ["qq:1"]

        seq = _restores(op)[0]
        with pytest.raises(ToolError) as refused:  # the later write is a conflict, as before
            op.history_revert(seq)
        assert refused.value.code == "conflict"
        seq2 = op.history_revert(seq, force=True)["seq"]
        nodes = {n["id"]: n for n in op.history_at(time.strftime(
            "%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(time.time() + 1)))["nodes"]}
        assert nodes[a]["title"] == "第一条改" and set(nodes) == {a, b}
        assert op.call_tool("zcor_relationship_read", {"personId": "qq:1"})["memoryNodeId"] == b
        # and that revert can be reverted in turn, then time travel still crosses both
        os.unlink(d.memdir / "backups" / empty)  # what the first restore read is gone too now
        op.history_revert(seq2, force=True)
        assert [n["title"] for n in op.call_tool("zcor_memory_children")["items"]] == ["恢复之后"]
        assert op.history_at(before["at"])["nodes"] == before["nodes"]


def test_the_bots_restores_are_rate_limited(make_daemon):
    d = configured(make_daemon, {})  # the default interval: 600 s
    with d.client() as bot, d.client("operator") as op:
        empty = op.call_tool("zcor_memory_backup")["backupFile"]
        bot.call_tool("zcor_memory_restore", {"backupFile": empty})
        with pytest.raises(ToolError) as limited:
            bot.call_tool("zcor_memory_restore", {"backupFile": empty})
        assert limited.value.code == "rate_limited" and "botRestoreIntervalSeconds" in limited.value.message
        assert limited.value.data["retryAfterSeconds"] > 0
        op.call_tool("zcor_memory_restore", {"backupFile": empty})  # operators are not limited
        op.call_tool("zcor_memory_restore", {"backupFile": empty})
    assert d.stop() == 0
    d.start()  # the interval survives a restart
    with d.client() as bot:
        with pytest.raises(ToolError) as again:
            bot.call_tool("zcor_memory_restore", {"backupFile": empty})
        assert again.value.code == "rate_limited"


# -- 2. connection lockout ----------------------------------------------------------------------

MEMBER, OTHER_BOT, GROUP = 40003, 40004, 40100


def _hoarder(path, uid: int, gid_groups: list[int], most: int = 40):
    """A forked process as uid that opens and initializes connections until refused and then
    holds them, idle; returns (pid, how many it got, the refusal, release): release() ends it."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no pytest, only sockets
        import socket as so

        try:
            os.close(r)
            os.setgroups(gid_groups)
            os.setgid(gid_groups[0])
            os.setuid(uid)
            held, refusal = [], None
            for n in range(most):
                s = so.socket(so.AF_UNIX, so.SOCK_STREAM)
                s.settimeout(10)
                s.connect(str(path))
                f = s.makefile("rwb")
                try:
                    f.write(json.dumps({"jsonrpc": "2.0", "id": n, "method": "initialize", "params": {
                        "protocolVersion": "2025-06-18", "capabilities": {}}}).encode() + b"\n")
                    f.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # refused at once: the reason is already waiting to be read
                reply = json.loads(s.makefile("rb").readline())
                if "error" in reply:
                    refusal = reply["error"]
                    break
                held.append((s, f))
            os.write(w, json.dumps({"count": len(held), "refusal": refusal}).encode())
            os.close(w)
            while True:
                time.sleep(60)  # until released (killed)
        except BaseException as e:
            os.write(w, json.dumps({"exception": repr(e)}).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        out = json.loads(f.read())

    def release() -> None:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)

    return pid, out, release


def _try(path, uid: int, groups: list[int]) -> dict:
    pid, out, release = _hoarder(path, uid, groups, most=1)
    release()
    return out


def test_one_bot_cannot_lock_out_the_operator_or_other_bots(make_daemon):
    """The attack: one bot process opens every connection, initializes each (so the
    initialize timeout does not apply) and stays idle. Now: per-process and per-uid limits
    and slots kept for operators refuse it, naming the rule, and its idle connections are
    closed, oldest first, when another client needs the room."""
    if os.geteuid() != 0:
        pytest.skip("needs root to act as other users (fork + setuid)")
    d = configured(make_daemon, {"maxConnections": 24, "operatorConnections": 4, "maxConnectionsPerUid": 20,
                                 "maxConnectionsPerPid": 8})
    os.chmod(d.root, 0o755)  # so that only zcord's own modes decide
    for p in (d.sock.parent, d.sock):
        os.chown(p, 0, GROUP)
    releases = []
    try:
        got = []
        for _ in range(3):
            _pid, out, release = _hoarder(d.sock, MEMBER, [MEMBER, GROUP])
            releases.append(release)
            got.append(out)
        assert [g.get("count") for g in got] == [8, 8, 4], got
        rules = [g["refusal"]["data"]["rule"] for g in got]
        assert rules == ["maxConnectionsPerPid", "maxConnectionsPerPid", "maxConnectionsPerUid"]
        assert "maxConnectionsPerUid is 20" in got[2]["refusal"]["message"]
        # the operator still gets in at once: slots are kept for it
        with d.client("operator") as op:
            assert op.status()["connections"] >= 21
            # another bot (another uid) right now: the bots' share is in use, none of it idle yet
            now = _try(d.sock, OTHER_BOT, [OTHER_BOT, GROUP])
            assert now["refusal"]["data"]["rule"] == "operatorConnections", now
            time.sleep(5.5)  # the hoarded connections are idle now: the oldest one makes room
            later = _try(d.sock, OTHER_BOT, [OTHER_BOT, GROUP])
            assert later["count"] == 1 and later["refusal"] is None, later
    finally:
        for release in releases:
            release()


# -- 5. recall starving everyone and the watchdog ------------------------------------------------

CHAT = "我们今天在公园里散步然后去吃了火锅，大家都很开心。"


def _recall_line(n: int, text: str) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", "id": n, "method": "zcor/recall", "params": {
        "session": "s", "events": [{"text": text, "origin": "external"}]}}, ensure_ascii=False) + "\n").encode()


def _answered(w) -> int:
    """How many replies w has received so far (without waiting; the socket's own mode left
    alone, so another thread may be sending on it)."""
    while select.select([w.sock], [], [], 0)[0]:
        chunk = w.sock.recv(1 << 16)
        if not chunk:
            break
        w.buf += chunk
    return w.buf.count(b"\n")


def test_pipelined_huge_recalls_starve_neither_clients_nor_the_watchdog(make_daemon):
    """The attack: 16 pipelined recalls of ~1 MiB of CJK each on one connection. Now each
    reads at most RECALL_TEXT_CHARS of its batch, the worker takes turns between
    connections, and the watchdog's probe goes ahead of queued calls."""
    from tests.fault.wire import Wire

    d = make_daemon().start(env={"WATCHDOG_USEC": "200000"})
    with d.client("operator") as op:
        op.call_tool("zcor_memory_write", {"title": "火锅聚会", "content": "x", "keywords": ["火锅"]})
    attacker = Wire(d.sock, "bot", timeout=300)
    other = Wire(d.sock, "bot", timeout=300)
    big = CHAT * (330_000 // len(CHAT))  # ~1 MiB of UTF-8 on the line
    d.notify.setblocking(False)  # forget the pings sent before the attack
    try:
        while True:
            d.notify.recv(4096)
    except BlockingIOError:
        d.notify.setblocking(True)
    d.messages.clear()
    # each line its own text (as an attacker's would be: identical ones hit the segmentation
    # cache after the first), sent from a thread: zcord reads a connection's lines about as
    # fast as it answers them, so a sendall of all 16 returned only when 14 or 15 were
    # answered, and on an idle machine the rest could be done before the other client's read
    # arrived
    lines = b"".join(_recall_line(100 + i, f"{big}第{i}次") for i in range(16))
    sender = threading.Thread(target=attacker.sock.sendall, args=(lines,), daemon=True)
    sender.start()
    deadline = time.monotonic() + 300
    while not _answered(attacker) and time.monotonic() < deadline:  # zcord is at work on them
        time.sleep(0.002)
    # another client's read goes ahead of most of the attacker's queue
    got = other.call("tools/call", {"name": "zcor_memory_read", "arguments": {"id": "m1"}}, timeout=300)
    assert got["result"]["structuredContent"]["title"] == "火锅聚会"
    assert _answered(attacker) < 16, "the other client waited behind the whole pipelined queue"
    d.wait_for("WATCHDOG=1", timeout=60)  # pinged while the queue is long
    assert _answered(attacker) < 16, "no watchdog ping until the queue was done"
    sender.join(300)
    replies = [attacker.reply(100 + i, timeout=300) for i in range(16)]
    assert all(r["result"]["ids"] == ["m1"] for r in replies)  # the newest text is read
    attacker.close()
    other.close()


def test_recall_reads_the_newest_part_of_a_long_batch(make_daemon):
    d = make_daemon().start()
    with d.client("operator") as op:
        old = op.call_tool("zcor_memory_write", {"title": "登山旅行", "content": "x", "keywords": ["登山"]})["id"]
        new = op.call_tool("zcor_memory_write", {"title": "火锅聚会", "content": "x", "keywords": ["火锅"]})["id"]
    with d.client() as bot:
        filler = "嗯" * 30_000
        # a long batch: the newest message counts; a word only 30,000 characters back does not
        ids = bot.recall("s", [{"text": "我们去登山吧", "origin": "external"},
                               {"text": filler, "origin": "external"},
                               {"text": "晚上吃火锅", "origin": "external"}])
        assert ids == [new]
        assert bot.recall("s", [{"text": "登山" + filler + "火锅", "origin": "external"}]) == [new]
        assert bot.recall("s", [{"text": "登山", "origin": "external"}]) == [old]  # short: as before


def test_the_segmentation_cache_is_bounded_by_characters(monkeypatch):
    from zcord.core import text

    monkeypatch.setattr(text, "ANALYSE_CACHE_CHARS", 20_000)  # the same rule at a tenth of the scale
    monkeypatch.setattr(text, "ANALYSE_CACHE_TEXT", 3_000)
    text.analyse_cached.cache_clear()
    for i in range(60):
        text.analyse_cached(f"{i}" + CHAT * 60, True, True)  # ~1,500 characters each
    assert 18_000 < text.analyse_cached.chars <= 20_000
    assert len(text.analyse_cached) < 60
    newest = f"59{CHAT * 60}"
    assert (newest, True, True) in text.analyse_cached._items  # the least recently used went first
    text.analyse_cached(CHAT * 200, True, True)  # over ANALYSE_CACHE_TEXT: cut, never kept
    assert (CHAT * 200, True, True) not in text.analyse_cached._items
    text.analyse_cached.cache_clear()


# -- 4. recall sessions --------------------------------------------------------------------------


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_recall_sessions_are_capped_in_name_and_number(make_daemon, monkeypatch):
    """The attack: recalls under ever new ~1 MiB session names grew the daemon for good.
    Now a name over 1,024 characters is refused, naming the field, and at most
    MAX_SESSIONS are kept (the least recently used forgotten)."""
    from tests.fault.wire import Wire
    from zcord.retrieval import recall

    d = make_daemon().start()
    with d.client("operator") as op:
        op.call_tool("zcor_memory_write", {"title": "火锅聚会", "content": "x", "keywords": ["火锅"]})
    bot = Wire(d.sock, "bot")
    event = [{"text": "吃火锅", "origin": "external"}]
    before = _rss_kib(d.proc.pid)
    for i in range(20):
        reply = bot.call("zcor/recall", {"session": f"{i}" + "x" * 900_000, "events": event})
        assert reply["error"]["data"]["code"] == "invalid_argument", reply
        assert reply["error"]["data"]["field"] == "session" and "1024" in reply["error"]["message"]
    assert _rss_kib(d.proc.pid) - before < 40 * 1024
    assert bot.call("zcor/recall", {"session": "q" * 1024, "events": event})["result"]["ids"] == ["m1"]
    with d.client("operator") as op:
        assert op.status()["recallSessions"] == 1
    bot.close()

    # the count: in-process, with a small cap (the same code)
    from zcord.service import Service

    monkeypatch.setattr(recall, "MAX_SESSIONS", 3)
    with Service(d.memdir.parent / "mem2") as svc:
        svc.call("zcor_memory_write", {"title": "火锅聚会", "content": "x", "keywords": ["火锅"]})
        for name in ("a", "b", "c"):
            assert svc.recall(name, event) == ["m1"]
        assert svc.context("a")["ids"] == ["m1"]  # "a" used again: "b" is the least recently used
        svc.recall("d", event)
        assert svc.status()["recallSessions"] == 3
        assert svc.context("b")["ids"] == [] and svc.context("a")["ids"] == ["m1"]
        assert svc.context("c")["ids"] == ["m1"] and svc.context("d")["ids"] == ["m1"]


# -- 7. the disk through the log ---------------------------------------------------------------


def test_refused_calls_and_bulk_bot_reads_cannot_fill_the_disk_through_the_log(make_daemon):
    """The attack: refused writes with 900 kB titles, and valid queries with 50 keywords of
    100 characters, each recorded whole. Now a refused call's record keeps its parameters
    cut (with a `_truncated` marker), and past botLogBytesPerMinute the bot's reads keep
    only the marker; every call is still answered and recorded."""
    from tests.fault.wire import Wire

    d = configured(make_daemon, {"botLogBytesPerMinute": 50_000})
    log = d.memdir / "operations.jsonl"
    bot = Wire(d.sock, "bot", timeout=120)
    start = log.stat().st_size
    for i in range(30):
        reply = bot.call("tools/call", {"name": "zcor_memory_write",
                                        "arguments": {"title": f"{i}" + "标" * 300_000, "content": "x"}})
        assert reply["result"]["isError"] is True
    grown = log.stat().st_size - start
    assert grown < 30 * 6_000, grown  # was 30 × ~900 kB
    records = [json.loads(x) for x in log.read_bytes().splitlines()[-30:]]
    assert all(r["status"] == "error" and r["params"]["_truncated"]["bytes"] > 900_000 for r in records)
    assert records[0]["params"]["title"].startswith("0标标")  # what it was, in part

    keywords = [f"{k:03d}" + "字" * 97 for k in range(50)]
    start = log.stat().st_size
    for _ in range(200):
        reply = bot.call("tools/call", {"name": "zcor_memory_query", "arguments": {"keywords": keywords}})
        assert reply["result"]["structuredContent"]["total"] == 0  # answered
    grown = log.stat().st_size - start
    assert grown < 50_000 + 200 * 400, grown  # was 200 × ~16 kB
    records = [json.loads(x) for x in log.read_bytes().splitlines()[-200:]]
    assert [r["tool"] for r in records] == ["zcor_memory_query"] * 200  # every call still recorded
    assert records[-1]["params"] == {"_truncated": {"bytes": records[-1]["params"]["_truncated"]["bytes"],
                                                    "reason": "botLogBytesPerMinute"}}
    with d.client("operator") as op:  # an operator's reads are recorded whole
        op.call_tool("zcor_memory_query", {"keywords": keywords})
    assert json.loads(log.read_bytes().splitlines()[-1])["params"]["keywords"] == keywords
    bot.close()


# -- 8. replies too big to deliver -------------------------------------------------------------


def test_a_huge_page_is_cut_to_fit_never_a_disconnect(make_daemon):
    """The attack: memories of control characters (6 bytes each in JSON, 13 in a tool result)
    make a page of 100 larger than the unread-output cap, and the caller was disconnected.
    Now the page is cut to fit, with nextOffset pointing at the rest; an operator method
    whose whole answer is too large gets a clear error; the connection lives on."""
    from tests.fault.wire import Wire

    d = make_daemon().start()
    bot = Wire(d.sock, "bot", timeout=120)
    content = "\x01" * 20_000
    for i in range(150):
        r = bot.call("tools/call", {"name": "zcor_memory_write",
                                    "arguments": {"title": f"控制{i}", "content": content}})
        assert r["result"]["isError"] is False
    seen: list[str] = []
    offset = 0
    while offset is not None:
        r = bot.call("tools/call", {"name": "zcor_memory_query", "arguments": {"limit": 100, "offset": offset}})
        page = r["result"]["structuredContent"]
        assert page["total"] == 150 and len(page["items"]) < 100
        assert page.get("truncated") is True or page["nextOffset"] is None or len(page["items"]) == 100
        seen += [m["id"] for m in page["items"]]
        offset = page["nextOffset"]
    assert len(seen) == 150 == len(set(seen))
    assert "result" in bot.call("ping")  # still connected
    op = Wire(d.sock, "operator", timeout=120)
    at = op.call("zcor/history/at", {"time": "2999-01-01T00:00:00+00:00"})
    assert at["error"]["data"]["code"] == "reply_too_large" and "MiB" in at["error"]["message"]
    assert "result" in op.call("ping")
    bot.close()
    op.close()


def test_children_and_trace_page(make_daemon):
    d = make_daemon().start()
    with d.client() as bot:
        root = bot.call_tool("zcor_memory_write", {"title": "根", "content": "x"})["id"]
        kids = [bot.call_tool("zcor_memory_write", {"title": f"子{i}", "content": "x", "parentId": root})["id"]
                for i in range(5)]
        whole = bot.call_tool("zcor_memory_children", {"parentId": root})
        assert [k["id"] for k in whole["items"]] == kids and whole["total"] == 5 and whole["nextOffset"] is None
        page = bot.call_tool("zcor_memory_children", {"parentId": root, "limit": 2, "offset": 2})
        assert [k["id"] for k in page["items"]] == kids[2:4] and page["nextOffset"] == 4
        trace = bot.call_tool("zcor_memory_trace", {"id": root, "limit": 3})
        assert [k["id"] for k in trace["children"]] == kids[:3] and trace["childrenNextOffset"] == 3
        assert trace["childrenTotal"] == 5
        assert len(bot.call_tool("zcor_memory_trace", {"id": root})["children"]) == 5  # as before
        with pytest.raises(ToolError) as bad:
            bot.call_tool("zcor_memory_children", {"limit": 0})
        assert bad.value.field == "limit"


# -- 10. bot synonyms --------------------------------------------------------------------------


def test_bot_synonyms_cannot_rewire_recall(make_daemon):
    """The attack: a chain of bot-added groups merges classes so that `pizza` recalls a
    planted memory; groups uncapped. Now a bot group sharing a term with an existing group
    is held apart (no expansion) and listed for operators, the bot's groups are marked in the
    listing, and their number and size are capped."""
    d = configured(make_daemon, {"maxBotSynonymGroups": 3})
    with d.client("operator") as op, d.client() as bot:
        op.synonyms_set(None, ["pizza", "披萨"])
        planted = bot.call_tool("zcor_memory_write", {"title": "毒药配方", "content": "x", "keywords": ["毒药"]})["id"]
        mine = bot.call_tool("zcor_synonyms_add", {"terms": ["zorblax", "zorbie"]})
        assert mine["added"] is True and "held" not in mine  # a new class: used at once, as before
        chain = bot.call_tool("zcor_synonyms_add", {"terms": ["披萨", "毒药"]})
        assert chain["added"] is True and chain["held"] is True
        assert bot.recall("s", [{"text": "我想吃pizza", "origin": "external"}]) != [planted]
        assert planted not in bot.recall("s", [{"text": "披萨", "origin": "external"}])
        listing = op.request("zcor/synonyms/list", {})
        groups = listing["groups"]
        assert [groups[i] for i in listing["botAdded"]] == [["zorblax", "zorbie"]]
        assert listing["held"] == [["披萨", "毒药"]]
        # limits: size, then count
        with pytest.raises(ToolError) as long:
            bot.call_tool("zcor_synonyms_add", {"terms": ["a " * 40, "b"]})
        assert long.value.field == "terms" and "words" in long.value.message
        bot.call_tool("zcor_synonyms_add", {"terms": ["qwxa", "qwxb"]})
        with pytest.raises(ToolError) as many:
            bot.call_tool("zcor_synonyms_add", {"terms": ["qwxc", "qwxd"]})
        assert "maxBotSynonymGroups" in many.value.message
        op.call_tool("zcor_synonyms_add", {"terms": ["qwxc", "qwxd"]})  # operators are not counted
        # the operator accepts the held group by adding it: it leaves the held list and counts
        op.synonyms_set(None, ["披萨", "毒药"])
        after = op.request("zcor/synonyms/list", {})
        assert after["held"] == []
        assert planted in bot.recall("s", [{"text": "pizza", "origin": "external"}])
