"""The command line's papercuts a new operator hit (issue 35): `zcor at -2h`, versions that
tell a link from an unlink, history's wording when nothing matches, backups newest first,
and sizes written the same way on both sides of a refusal."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time

from .conftest import ZCOR_CMD


def _ok(out: subprocess.CompletedProcess) -> str:
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_at_takes_a_time_ago_written_with_a_minus(daemon):
    _ok(daemon.zcor("call", "zcor_memory_write", '{"title": "旧家", "content": "在河边"}'))
    out = daemon.zcor("at", "yesterday")
    assert out.returncode == 2 and "-2h" in out.stderr  # what it suggests…
    for args in (["at", "-2h"], ["at", "-1d", "6h"], ["at", "--json", "-90m"], ["--timeout", "30", "at", "-2h"]):
        out = _ok(daemon.zcor(*args))  # …works
        if "--json" in args:
            assert json.loads(out)["nodes"] == []
        else:
            assert "0 memories:" in out and "later change undone" in out
    assert "1 memory:" in _ok(daemon.zcor("at", "-0s"))
    out = daemon.zcor("at", "-2x")
    assert out.returncode == 2


def test_versions_show_the_linked_memory(daemon):
    node = json.loads(_ok(daemon.zcor("call", "zcor_memory_write", '{"title": "小王", "content": "同事"}')))
    rel = {"personId": "qq:42", "name": "小王", "relationship": "同事", "affinity": 10, "reason": "午饭"}
    _ok(daemon.zcor("call", "zcor_relationship_write", json.dumps(rel)))
    _ok(daemon.zcor("call", "zcor_relationship_write", json.dumps({**rel, "memoryNodeId": node["id"]})))
    _ok(daemon.zcor("call", "zcor_relationship_write", json.dumps({**rel, "memoryNodeId": None})))
    lines = _ok(daemon.zcor("versions", "qq:42")).splitlines()
    records = [line.split("  ")[-1].strip() for line in lines[2:]]
    assert records == ["小王 — 同事, affinity 10, no memory: 午饭", f"小王 — 同事, affinity 10, memory {node['id']}: 午饭",
                       "小王 — 同事, affinity 10, no memory: 午饭"], lines


def test_history_says_no_records_without_none_of_zero(daemon):
    out = _ok(daemon.zcor("history"))
    assert out.strip() == "No records yet."
    _ok(daemon.zcor("call", "zcor_memory_write", '{"title": "旧家", "content": "在河边"}'))
    assert _ok(daemon.zcor("history", "nothing-like-this")).strip() == "No records match."
    assert _ok(daemon.zcor("history", "--offset", "5")).strip() == "No records from --offset 5 on; 1 record match"
    assert "1–1 of 1 record, newest first" in _ok(daemon.zcor("history"))
    assert "none of" not in _ok(daemon.zcor("history", "--actor", "system"))


def test_backup_list_is_newest_first(daemon):
    names = []
    for _ in range(3):
        names.append(_ok(daemon.zcor("backup")).strip())
    backups = daemon.memdir / "backups"
    for age, name in zip((300, 200, 100), names, strict=True):  # the first written is the oldest
        t = time.time() - age
        os.utime(backups / name, (t, t))
    listed = [line.split()[0] for line in _ok(daemon.zcor("backup", "--list")).splitlines()]
    assert [n for n in listed if n in names] == names[::-1]


def test_a_refused_size_is_written_with_separators_on_both_sides(daemon):
    out = daemon.zcor("call", "zcor_memory_write", "-", input=json.dumps({"title": "长", "content": "x" * 500_000}))
    assert out.returncode == 1
    assert re.search(r"at most \d{1,3}(,\d{3})+ characters long; got 500,000", out.stderr), out.stderr


def test_the_at_rewrite_leaves_other_commands_alone(tmp_path):
    out = subprocess.run([*ZCOR_CMD, "--socket", str(tmp_path / "none.sock"), "history", "-2h"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "-2h" in out.stderr
