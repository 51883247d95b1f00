"""`zcor` subcommands against a running daemon: output, exit codes, messages."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from zcord.client import ToolError

from .conftest import ZCOR_CMD


def test_call_prints_json_and_fails_with_message(shared_daemon):
    out = shared_daemon.zcor("call", "zcor_memory_write", '{"title": "命令行", "content": "来自 zcor call"}')
    assert out.returncode == 0, out.stderr
    node = json.loads(out.stdout)
    assert node["title"] == "命令行"

    out = shared_daemon.zcor("call", "zcor_memory_read", json.dumps({"id": node["id"]}))
    assert json.loads(out.stdout)["content"] == "来自 zcor call"

    out = shared_daemon.zcor("call", "zcor_memory_read", '{"id": "m424242"}')
    assert out.returncode == 1 and out.stdout == ""
    assert "m424242" in out.stderr
    # worded for the operator: their next step, not the model's ("Use zcor_memory_query…")
    assert "does not exist or was deleted" in out.stderr and "Use zcor_" not in out.stderr
    out = shared_daemon.zcor("call", "zcor_relationship_read", '{"personId": "qq:nobody"}')
    assert out.returncode == 1 and "qq:nobody" in out.stderr and "Use zcor_" not in out.stderr
    out = shared_daemon.zcor("call", "zcor_memory_nope", "{}")
    assert out.returncode == 1 and "zcord has no tool 'zcor_memory_nope'" in out.stderr
    assert "tools you were given" not in out.stderr

    out = shared_daemon.zcor("call", "zcor_memory_read", "{oops")
    assert out.returncode == 2 and "not valid JSON" in out.stderr

    out = shared_daemon.zcor("call", "zcor_memory_read", "-", input=json.dumps({"id": node["id"]}))
    assert out.returncode == 0 and json.loads(out.stdout)["id"] == node["id"]

    # --bot calls as the model: relationship tools follow the config, operators' do not
    out = shared_daemon.zcor("call", "--bot", "external_event_frame", "{}")
    assert out.returncode == 1 and "external_event_frame" in out.stderr


def test_status_tools_prefix_backup_config(shared_daemon):
    out = shared_daemon.zcor("status")
    assert out.returncode == 0, out.stderr
    status = json.loads(out.stdout)
    assert status["socket"] == str(shared_daemon.sock) and status["pid"] == shared_daemon.proc.pid

    out = shared_daemon.zcor("tools")
    names = [line.split()[0] for line in out.stdout.splitlines()]
    assert "zcor_memory_write" in names and "external_event_frame" not in names
    out = shared_daemon.zcor("tools", "--json")
    assert all("inputSchema" in t for t in json.loads(out.stdout))

    out = shared_daemon.zcor("prefix")
    assert out.returncode == 0 and "external_event_frame" in out.stdout

    out = shared_daemon.zcor("backup")
    assert out.returncode == 0
    name = out.stdout.strip()
    assert (shared_daemon.memdir / "backups" / name).is_file()
    listed = shared_daemon.zcor("backup", "--list").stdout.splitlines()
    line = next(line for line in listed if line.startswith(name + " "))
    size = (shared_daemon.memdir / "backups" / name).stat().st_size
    assert re.search(r"\d+(\.\d)? (B|KB|MB)  \d{4}-\d\d-\d\d \d\d:\d\d:\d\d$", line), line
    assert (f"{size} B" if size < 1024 else f"{size / 1024:.1f} KB") in line

    out = shared_daemon.zcor("config")
    assert json.loads(out.stdout)["recallBudget"] >= 0
    out = shared_daemon.zcor("config", '{"recallBudget": "much"}')
    assert out.returncode == 1 and "recallBudget" in out.stderr


def test_recall_and_context(shared_daemon):
    shared_daemon.zcor("call", "zcor_memory_write", '{"title": "阿花喜欢草莓蛋糕", "content": "生日那天吃的"}')
    out = shared_daemon.zcor("recall", "cli:test", "阿花", "今天", "想吃", "草莓蛋糕")
    assert out.returncode == 0, out.stderr
    ids = json.loads(out.stdout)["ids"]
    assert ids
    out = shared_daemon.zcor("context", "cli:test")
    assert "阿花喜欢草莓蛋糕" in out.stdout


def test_unreachable_daemon_exit_code(tmp_path):
    out = subprocess.run(ZCOR_CMD + ["status", "--socket", str(tmp_path / "none.sock")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 3
    assert "cannot reach zcord" in out.stderr
    out = subprocess.run(ZCOR_CMD + ["mcp", "--socket", str(tmp_path / "none.sock")],
                         capture_output=True, text=True, timeout=60, input="")
    assert out.returncode == 3


def test_mcp_bridge_passes_lines_through_as_the_bot(shared_daemon):
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "zcor/status"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "zcor_memory_write", "arguments": {"title": "桥", "content": "bridge"}}},
    ]
    out = subprocess.run(ZCOR_CMD + ["mcp", "--socket", str(shared_daemon.sock)],
                         input="".join(json.dumps(m) + "\n" for m in lines),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    replies = {r["id"]: r for r in map(json.loads, out.stdout.splitlines())}
    assert replies[1]["result"]["protocolVersion"] == "2025-06-18"
    assert replies[1]["result"]["capabilities"]["experimental"]["zcor"]["role"] == "bot"
    assert replies[2]["error"]["data"]["code"] == "forbidden"
    assert replies[3]["result"]["isError"] is False


@pytest.mark.skipif(not (Path(sys.executable).parent / "zcor").exists(), reason="zcor is not installed "
                    "as a console script next to this Python (pip install -e .)")
def test_console_scripts_are_installed():
    bindir = Path(sys.executable).parent
    for name in ("zcor", "zcord"):
        out = subprocess.run([str(bindir / name), "--version"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and out.stdout.startswith(name), out.stderr


def test_chat_subcommand_is_wired(shared_daemon):
    out = subprocess.run(ZCOR_CMD + ["chat", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "--session" in out.stdout
    out = shared_daemon.zcor("status", "--no-such-flag")
    assert out.returncode == 2 and "unrecognized arguments" in out.stderr


def test_status_warns_about_an_empty_persona_until_one_is_written(daemon):
    assert (daemon.memdir / "PERSONA.md").read_text(encoding="utf-8").lstrip().startswith("<!--")
    out = daemon.zcor("status")
    assert out.returncode == 0 and json.loads(out.stdout)["personaEmpty"] is True
    assert "PERSONA.md" in out.stderr and "empty" in out.stderr

    with daemon.client() as bot:  # a bot may neither read nor write the persona
        for method, params in (("zcor/persona/get", {}), ("zcor/persona/set", {"text": "x"})):
            with pytest.raises(ToolError) as e:
                bot.request(method, params)
            assert e.value.code == "forbidden"
    with daemon.client("operator") as op:
        with pytest.raises(ToolError) as e:
            op.persona_set(42)
        assert e.value.field == "text"
        assert op.persona_get()["empty"] is True  # the refused call changed nothing
        op.persona_set("你是阿澈，一个沉默寡言的剑客。")
    out = daemon.zcor("status")
    assert json.loads(out.stdout)["personaEmpty"] is False and out.stderr == ""
    assert daemon.zcor("prefix").stdout.startswith("你是阿澈，一个沉默寡言的剑客。\n")


def test_relationship_history_shows_affinity_over_time_with_the_reasons(daemon):
    """Issue 27.10: the series comes from the change history (every relationship write is in it)."""
    with daemon.client("bot") as bot:
        for affinity, reason in ((40, "经常一起吃午饭"), (40, "经常一起吃午饭"), (-10, "借钱不还"), (-60, "又借钱不还")):
            bot.call_tool("zcor_relationship_write", {"personId": "qq:777", "name": "小李", "relationship": "同事",
                                                      "affinity": affinity, "reason": reason})
        bot.call_tool("zcor_relationship_write", {"personId": "qq:777", "name": "小李", "relationship": "前同事",
                                                  "affinity": -60, "reason": "又借钱不还"})  # no affinity change
    out = daemon.zcor("relationship-history", "qq:777", "--json")
    assert out.returncode == 0, out.stderr
    series = json.loads(out.stdout)
    assert series["personId"] == "qq:777"
    assert [(p["affinity"], p["reason"]) for p in series["items"]] == [
        (40, "经常一起吃午饭"), (-10, "借钱不还"), (-60, "又借钱不还")]
    assert all(p["actor"] == "model" and p["at"] and not p["deleted"] for p in series["items"])

    out = daemon.zcor("relationship-history", "qq:777")
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert lines[0] == "qq:777  █▅▁  (-60 ▁ … █ +40)"  # scaled to its own range
    assert "-10" in lines[2] and "借钱不还" in lines[2] and "+40" in lines[1]

    out = daemon.zcor("relationship-history", "qq:nobody")
    assert out.returncode == 1 and "qq:nobody" in out.stderr and out.stdout == ""
