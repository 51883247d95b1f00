"""A full disk and a read-only Memory directory, on real tmpfs mounts under a real daemon.

Writes must fail with a storage error that says why, leave every file byte for byte as it
was (no temporary files either) and leave the daemon serving reads; once the disk is
usable again, writes work and the operation log still accounts for every change.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from tests.conftest import persisted_bytes
from tests.persisted import read_persisted
from zcord.client import ToolError
from zcord.core.store import Store

pytestmark = pytest.mark.fault

WRITES = [
    ("zcor_memory_write", {"title": "满盘新记忆", "content": "x" * 3000, "keywords": ["满盘"]}),
    ("zcor_memory_write", {"id": "m1", "title": "改不了", "content": "y" * 3000}),
    ("zcor_memory_important", {"id": "m2", "important": True}),
    ("zcor_memory_merge", {"ids": ["m1", "m2"], "title": "合并", "content": "z", "reason": "重复"}),
    ("zcor_memory_supersede", {"ids": ["m1"], "replacementId": "m2", "reason": "过时"}),
    ("zcor_memory_delete", {"id": "m2"}),
    ("zcor_relationship_write", {"personId": "qq:2", "name": "小红", "relationship": "同学", "affinity": 5,
                                 "reason": "新认识"}),
    ("zcor_relationship_delete", {"personId": "qq:1"}),
    ("zcor_synonyms_add", {"terms": ["满盘甲", "满盘乙"]}),
    ("zcor_memory_backup", {}),
]
READS = [
    ("zcor_memory_read", {"id": "m1"}),
    ("zcor_memory_query", {"keywords": ["记忆"]}),
    ("zcor_memory_children", {}),
    ("zcor_memory_trace", {"id": "m3"}),
    ("zcor_relationship_read", {"personId": "qq:1"}),
    ("zcor_relationship_query", {}),
    ("zcor_memory_history", {"limit": 5}),
]


def snapshot(memdir: Path) -> dict[str, bytes]:
    """Every file of the Memory directory but the lock, the operation log (reads append to it)
    and its search index (derived from the log)."""
    out = {}
    for p in sorted(memdir.rglob("*")):
        if p.is_file() and p.name not in ("zcord.lock", "operations.jsonl") \
                and not p.name.startswith("operations.index.sqlite"):
            out[str(p.relative_to(memdir))] = p.read_bytes()
    out["(the Memory as persisted: snapshot and journal)"] = persisted_bytes(memdir)
    return out


def seed(op) -> list[dict]:
    nodes = [op.call_tool("zcor_memory_write", {"title": f"记忆{i}", "content": "内容" * 200, "keywords": ["记忆"]})
             for i in range(1, 4)]
    op.call_tool("zcor_relationship_write", {"personId": "qq:1", "name": "小明", "relationship": "朋友",
                                             "affinity": 30, "reason": "一起吃饭", "memoryNodeId": "m3"})
    op.call_tool("zcor_memory_important", {"id": "m1", "important": True})
    return nodes


def fill(path: Path, leave: int = 0) -> None:
    """Write path until the file system is full, then free `leave` bytes again."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        chunk = b"\0" * 4096
        try:
            while True:
                os.write(fd, chunk)
        except OSError as e:
            assert e.errno == errno.ENOSPC
        os.ftruncate(fd, max(0, os.fstat(fd).st_size - leave))
    finally:
        os.close(fd)


def fill_log(op, memdir: Path) -> None:
    """On a full file system, also fill the free tail of operations.jsonl's last page: log
    reads with ever smaller parameters until no record fits (a read whose record cannot be
    appended is still answered). Then no change record (a few hundred bytes at least) fits."""
    log = memdir / "operations.jsonl"
    for size in (4096, 2048, 1024, 512, 256, 128, 64, 32, 16, 8, 4, 2, 1):
        while True:
            before = log.stat().st_size
            with pytest.raises(ToolError):  # refused (unknown parameter), and logged with it
                op.call_tool("zcor_memory_read", {"id": "m1", "pad": "p" * size})
            if log.stat().st_size == before:
                break


def assert_refused_every_write(op, memdir: Path, reason: str, tools: list | None = None,
                               config: bool = True) -> None:
    before = snapshot(memdir)
    for tool, args in tools or WRITES:
        with pytest.raises(ToolError) as refused:
            op.call_tool(tool, args)
        err = refused.value
        assert err.code == "storage_error", (tool, err.code, err.message)
        assert reason in err.message, (tool, err.message)
        assert "nothing" in err.message or tool == "zcor_memory_backup", (tool, err.message)
        assert snapshot(memdir) == before, f"{tool} changed files although it failed"
    with pytest.raises(ToolError) as refused:
        op.synonyms_set(None, ["满盘丙", "满盘丁"])
    assert refused.value.code == "storage_error" and reason in refused.value.message
    if config:
        with pytest.raises(ToolError) as refused:
            op.config_set({"recallBudget": 100})
        assert refused.value.code == "storage_error" and reason in refused.value.message
    assert snapshot(memdir) == before
    assert not [p for p in memdir.rglob("*.tmp")], "a failed write left a temporary file"


def assert_serves_reads(op, bot, nodes: list[dict]) -> None:
    for tool, args in READS:
        op.call_tool(tool, args)
    assert op.call_tool("zcor_memory_read", {"id": "m1"})["content"] == nodes[0]["content"]
    assert op.call_tool("zcor_memory_query", {"keywords": ["记忆"]})["total"] == 3
    assert op.config_get()["recallBudget"] == 6000
    assert "记忆1" in bot.prefix()  # m1 is important
    bot.recall("s", "记忆")
    assert bot.context("s")["ids"]
    bot.ping()


def assert_log_matches_state(memdir: Path) -> None:
    state = read_persisted(memdir)  # the snapshot and the changes journaled after it
    committed = {c.change_id for c in Store(memdir).iter_history(state)}
    logged = [c["changeId"] for line in (memdir / "operations.jsonl").read_text().splitlines()
              for c in json.loads(line)["changes"] if c.get("changeId")]
    assert len(logged) == len(set(logged)) and set(logged) == committed


def test_full_disk_refuses_writes_keeps_the_state_and_serves_reads(make_daemon, mounts):
    d = make_daemon()
    mounts.tmpfs(d.memdir, size="1m")
    d.start()
    with d.client("operator") as op, d.client() as bot:
        nodes = seed(op)
        # full, but with a little room: a change record fits in the journal, a backup does not
        fill(d.memdir / "filler", leave=6000)
        small = op.call_tool("zcor_memory_important", {"id": "m3", "important": True})
        assert small["changed"], "the journal takes a small change while there is room"
        assert_refused_every_write(op, d.memdir, "No space left on device", tools=[WRITES[-1]],
                                   config=False)
        # full to the last byte of the log's last page: every change is refused
        fill(d.memdir / "filler")
        fill_log(op, d.memdir)
        assert_refused_every_write(op, d.memdir, "No space left on device")
        assert_serves_reads(op, bot, nodes)
        assert d.proc.poll() is None
        # room again: writes work, and the log still accounts for every change
        (d.memdir / "filler").unlink()
        created = op.call_tool(*WRITES[0])
        assert created["id"] == "m4"
        op.synonyms_set(None, ["满盘丙", "满盘丁"])
    assert_log_matches_state(d.memdir)
    assert d.stop() == 0
    d.start()
    with d.client("operator") as op:
        assert op.call_tool("zcor_memory_read", {"id": "m4"})["title"] == "满盘新记忆"
        assert ["满盘丙", "满盘丁"] in op.synonym_groups()


def test_memory_dir_turning_read_only_while_serving(make_daemon, mounts):
    """A read-only bind mount laid over the live directory: no file can be created or replaced
    there, while the log zcord already holds open stays writable. (A plain `mount -o
    remount,ro` is refused while zcord has files open for writing, so this is how a
    directory turns read-only under a running daemon.)"""
    d = make_daemon()
    mounts.tmpfs(d.memdir, size="4m")
    d.start()
    with d.client("operator") as op, d.client() as bot:
        nodes = seed(op)
        mounts.read_only_over(d.memdir)
        # changes still reach the journal zcord holds open (durable: its file system is
        # writable underneath); whatever needs a new file is refused
        kept = op.call_tool("zcor_memory_write", {"title": "只读时写的", "content": "journaled"})
        assert_refused_every_write(op, d.memdir, "Read-only file system",
                                   tools=[t for t in WRITES if t[0] in ("zcor_synonyms_add", "zcor_memory_backup")])
        assert_serves_reads(op, bot, nodes)
        failed = op.call_tool("zcor_memory_history", {"keywords": ["storage_error"], "limit": 100})
        assert failed["total"] >= 2, "failed calls are still recorded in the log"
        # writable again
        mounts.unmount(d.memdir)
        op.call_tool(*WRITES[0])
    assert_log_matches_state(d.memdir)
    assert d.stop() == 0  # the shutdown snapshot holds the change made while read-only
    assert "只读时写的" in json.dumps(json.loads((d.memdir / "memory-state.json").read_bytes()), ensure_ascii=False)
    assert kept["id"] in {n["id"] for n in json.loads((d.memdir / "memory-state.json").read_bytes())["nodes"]}


def test_read_only_memory_dir_at_start_is_refused_with_a_clear_message(make_daemon, mounts):
    d = make_daemon()
    mounts.tmpfs(d.memdir, size="4m")
    d.start()
    with d.client("operator") as op:
        seed(op)
    assert d.stop() == 0
    mounts.remount(d.memdir, "ro")
    before = snapshot(d.memdir)
    d.start(wait=False)
    assert d.proc.wait(30) == 1
    err = d.stderr()
    assert f"cannot open the Memory in {d.memdir}" in err and "Read-only file system" in err, err
    assert "Traceback" not in err
    assert snapshot(d.memdir) == before
    assert not d.sock.exists()
    # and an empty read-only directory (a fresh Memory that cannot be created)
    e = make_daemon()
    mounts.tmpfs(e.memdir, size="1m")
    mounts.remount(e.memdir, "ro")
    e.start(wait=False)
    assert e.proc.wait(30) == 1
    assert "Read-only file system" in e.stderr() and str(e.memdir) in e.stderr()
    assert not list(e.memdir.iterdir())


def test_full_disk_when_the_log_cannot_take_the_record_either(make_daemon, mounts):
    """Reads on a full disk still answer even though their log record cannot be written; the
    daemon says so on stderr instead of failing the read."""
    d = make_daemon()
    mounts.tmpfs(d.memdir, size="1m")
    d.start()
    with d.client("operator") as op, d.client() as bot:
        nodes = seed(op)
        fill(d.memdir / "filler")
        log = d.memdir / "operations.jsonl"
        # reads fill the log's last page; after that their records no longer fit
        sizes = [log.stat().st_size]
        for _ in range(500):
            op.call_tool("zcor_memory_query", {"keywords": ["记忆"], "limit": 100})
            sizes.append(log.stat().st_size)
            if sizes[-1] == sizes[-2]:
                break
        assert sizes[-1] == sizes[-2], "the log kept growing on a full disk"
        assert_serves_reads(op, bot, nodes)
        assert log.stat().st_size == sizes[-1]
        assert log.read_bytes().endswith(b"\n"), "a failed append left a torn line"
        with pytest.raises(ToolError) as refused:
            op.call_tool(*WRITES[0])
        assert refused.value.code == "storage_error"
    assert "could not write the operation log" in d.stderr()
    assert d.proc.poll() is None
