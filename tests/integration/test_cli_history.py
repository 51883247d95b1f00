"""`zcor history`, `zcor revert`, `zcor versions` and `zcor at` against a real daemon."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import datetime, timedelta

from .conftest import ZCOR_CMD


def _ok(out: subprocess.CompletedProcess) -> str:
    assert out.returncode == 0, out.stderr
    return out.stdout


def _rows(stdout: str) -> list[list[str]]:
    """The table rows under the header, split on runs of 2+ spaces."""
    lines = stdout.splitlines()
    return [re.split(r"\s{2,}", line.strip()) for line in lines[1:] if re.match(r"^\s*\d+\s", line)]


def test_history_filters_pages_and_json(daemon):
    first = json.loads(_ok(daemon.zcor("call", "zcor_memory_write", '{"title": "阿花的猫", "content": "叫团子"}')))
    _ok(daemon.zcor("call", "--bot", "zcor_memory_write", '{"title": "小王", "content": "同事，爱喝咖啡"}'))
    _ok(daemon.zcor("call", "zcor_memory_read", json.dumps({"id": first["id"]})))
    _ok(daemon.zcor("call", "zcor_relationship_write", json.dumps(
        {"personId": "qq:7", "name": "阿花", "relationship": "朋友", "affinity": 20, "reason": "一起养猫"})))

    rows = _rows(_ok(daemon.zcor("history")))
    assert [r[0] for r in rows] == ["4", "3", "2", "1"]
    assert rows[0][2:] == ["operator", "zcor_relationship_write", "qq:7", "ok · 1 change"]
    assert rows[2][2:4] == ["model", "zcor_memory_write"]
    assert rows[1][-1] == "ok"  # a read changes nothing

    assert [r[0] for r in _rows(_ok(daemon.zcor("history", "--actor", "model")))] == ["2"]
    assert [r[0] for r in _rows(_ok(daemon.zcor("history", "--changes-only", "--target", first["id"])))] == ["1"]
    assert [r[0] for r in _rows(_ok(daemon.zcor("history", "--tool", "zcor_memory_read")))] == ["3"]
    assert [r[0] for r in _rows(_ok(daemon.zcor("history", "咖啡")))] == ["2"]
    assert [r[0] for r in _rows(_ok(daemon.zcor("history", "--from", "2000-01-01", "--to", "2000-12-31")))] == []
    out = _ok(daemon.zcor("history", "--to", (datetime.now() + timedelta(days=1)).strftime("%Y-%m-%d")))
    assert len(_rows(out)) == 4

    page = _ok(daemon.zcor("history", "--limit", "2"))
    assert [r[0] for r in _rows(page)] == ["4", "3"] and "1–2 of 4 records" in page and "--offset 2" in page
    page = _ok(daemon.zcor("history", "--limit", "2", "--offset", "2"))
    assert [r[0] for r in _rows(page)] == ["2", "1"] and "--offset" not in page

    answer = json.loads(_ok(daemon.zcor("history", "--json", "--changes-only", "--limit", "1")))
    assert answer["total"] == 3 and answer["nextOffset"] == 1
    assert answer["items"][0]["changes"][0]["after"]["affinity"] == 20

    out = daemon.zcor("history", "--from", "last tuesday")
    assert out.returncode == 2 and "--from" in out.stderr and "last tuesday" in out.stderr
    out = daemon.zcor("history", "--limit", "500")
    assert out.returncode == 1 and "limit" in out.stderr and out.stdout == ""
    out = daemon.zcor("history", "--actor", "robot")
    assert out.returncode == 2


def test_revert_preview_force_and_versions(daemon):
    node = json.loads(_ok(daemon.zcor("call", "zcor_memory_write", '{"title": "生日", "content": "三月三日"}')))
    nid = node["id"]
    _ok(daemon.zcor("call", "zcor_memory_write", json.dumps({"id": nid, "title": "生日", "content": "三月四日"})))   # seq 2
    _ok(daemon.zcor("call", "zcor_memory_write", json.dumps({"id": nid, "title": "生日", "content": "三月五日"})))   # seq 3

    out = _ok(daemon.zcor("versions", nid))
    assert out.startswith(f"3 versions of {nid}")
    rows = _rows(out)
    assert [(r[0], r[1], r[4]) for r in rows] == [("1", "1", "node.create"), ("2", "2", "node.update"),
                                                  ("3", "3", "node.update")]
    assert rows[-1][-1] == "生日: 三月五日"
    versions = json.loads(_ok(daemon.zcor("versions", nid, "--json")))
    assert [v["record"]["content"] for v in versions["items"]] == ["三月三日", "三月四日", "三月五日"]

    # seq 3 can be undone cleanly; the preview changes and logs nothing
    out = _ok(daemon.zcor("revert", "3", "--preview"))
    assert "would make 1 change" in out and "before: 生日: 三月五日" in out and "after:  生日: 三月四日" in out
    with daemon.client("operator") as op:
        assert op.call_tool("zcor_memory_read", {"id": nid}, view=True)["content"] == "三月五日"
        assert len(op.history_versions(nid)["items"]) == 3
    preview = json.loads(_ok(daemon.zcor("revert", "3", "--preview", "--json")))
    assert preview["ok"] is True and preview["changes"][0]["after"]["content"] == "三月四日"

    # seq 2 was overwritten by seq 3: refused, the preview says why, --force writes it anyway
    out = daemon.zcor("revert", "2", "--preview")
    assert out.returncode == 1 and "cannot be reverted" in out.stdout and f"conflict: {nid}" in out.stdout
    assert "--force" in out.stderr
    out = daemon.zcor("revert", "2")
    assert out.returncode == 1 and out.stdout == ""
    assert "--force" in out.stderr and "Pass force" not in out.stderr  # the operator's flag, not the parameter
    out = _ok(daemon.zcor("revert", "2", "--force"))
    assert out.startswith("Reverted operation 2 as operation 5 (forced): 1 change") and f"node.update  {nid}" in out
    with daemon.client("operator") as op:
        assert op.call_tool("zcor_memory_read", {"id": nid}, view=True)["content"] == "三月三日"

    answer = json.loads(_ok(daemon.zcor("revert", "5", "--json")))  # seq 4: the refused revert
    assert answer == {"seq": 6, "reverted": 5, "forced": False, "changes": [{"kind": "node.update", "target": nid}]}
    assert _rows(_ok(daemon.zcor("versions", nid)))[-1][-1] == "生日: 三月五日"

    out = daemon.zcor("revert", "99")
    assert out.returncode == 1 and "99" in out.stderr
    out = daemon.zcor("revert", "two")
    assert out.returncode == 2
    out = daemon.zcor("versions", "m404")
    assert out.returncode == 1 and "m404" in out.stderr


def test_at_shows_the_memory_as_it_was(daemon):
    _ok(daemon.zcor("call", "zcor_memory_write", '{"title": "旧家", "content": "在河边"}'))
    with daemon.client("operator") as op:
        between = op.history_query({"limit": 1})["items"][0]["at"]
    child = json.loads(_ok(daemon.zcor("call", "zcor_memory_write", '{"title": "新家", "content": "在山上", '
                                                                       '"parentId": "m1"}')))
    _ok(daemon.zcor("call", "zcor_memory_important", '{"id": "m1", "important": true}'))
    _ok(daemon.zcor("call", "zcor_relationship_write", json.dumps(
        {"personId": "qq:9", "name": "房东", "relationship": "房东", "affinity": -5, "reason": "涨租"})))

    now = _ok(daemon.zcor("at", "0s", "ago"))
    assert "(0 later changes undone; read-only)" in now
    assert "\n2 memories:\n  m1  ★ 旧家\n    " + child["id"] + "  新家\n" in now
    assert "1 relationship:\n  qq:9  房东 — 房东, affinity -5, no memory: 涨租" in now

    past = _ok(daemon.zcor("at", between))
    assert "(3 later changes undone; read-only)" in past
    assert "1 memory:\n  m1  旧家\n0 relationships:" in past

    answer = json.loads(_ok(daemon.zcor("at", between, "--json")))
    assert [n["id"] for n in answer["nodes"]] == ["m1"] and answer["undoneChanges"] == 3

    out = daemon.zcor("at", "last", "tuesday")
    assert out.returncode == 2 and "TIME" in out.stderr and "-2h" not in out.stderr.split("write")[0]
    out = daemon.zcor("at", "2020-01-01T00:00:00+08:00")
    assert out.returncode == 0 and "0 memories:" in out.stdout


def test_history_commands_without_a_daemon(tmp_path):
    for args in (["history"], ["revert", "1"], ["versions", "m1"], ["at", "2h"]):
        out = subprocess.run(ZCOR_CMD + args + ["--socket", str(tmp_path / "none.sock")],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 3 and "cannot reach zcord" in out.stderr, args


def test_control_characters_from_the_model_never_reach_the_terminal(daemon):
    title = "坏\x1b]0;pwned\x07标题\x1b[2J"
    node = json.loads(_ok(daemon.zcor("call", "--bot", "zcor_memory_write",
                                      json.dumps({"title": title, "content": "x\x9bmore"}))))
    for args in (["versions", node["id"]], ["at", "0s"], ["history"], ["revert", "1", "--preview"]):
        out = _ok(daemon.zcor(*args))
        assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out, args
    out = _ok(daemon.zcor("versions", node["id"]))
    assert "坏␛]0;pwned␇标题␛[2J: x\\u009bmore" in out
    assert json.loads(_ok(daemon.zcor("versions", node["id"], "--json")))["items"][0]["record"]["title"] == title
