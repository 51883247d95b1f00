"""Bot and operator: what each may list and call, and what the refusals leave behind."""

from __future__ import annotations

import pytest

from zcord.client import ToolError

# The interface as the specification states it (SPEC §2 tool table, §5 bot methods, and the
# README's method table for operator methods), written out here rather than imported from
# the code under test, so a tool or method missing from the code's own tables is caught.
SPEC_TOOLS = {
    "zcor_memory_write", "zcor_memory_read", "zcor_memory_delete", "zcor_memory_children",
    "zcor_memory_trace", "zcor_memory_important", "zcor_memory_query", "zcor_memory_merge",
    "zcor_memory_supersede", "zcor_relationship_read", "zcor_relationship_query",
    "zcor_relationship_write", "zcor_relationship_delete", "zcor_memory_history", "zcor_memory_backup",
    "zcor_memory_restore", "zcor_synonyms_add", "zcor_memory_search",
}
SPEC_RELATIONSHIP_TOOLS = {"zcor_relationship_read", "zcor_relationship_query", "zcor_relationship_write",
                           "zcor_relationship_delete"}
BOT_METHODS = {  # method: params a bot sends
    "zcor/prefix": {},
    "zcor/recall": {"session": "roles", "events": [{"text": "你好", "origin": "external"}]},
    "zcor/context": {"session": "roles"},
    "zcor/llm": {},
}
OPERATOR_METHODS = ["zcor/status", "zcor/config/get", "zcor/config/set", "zcor/subscribe",
                    "zcor/unsubscribe", "zcor/backups/list", "zcor/backups/preview", "zcor/synonyms/list",
                    "zcor/synonyms/set", "zcor/recall/explain", "zcor/reload", "zcor/persona/get", "zcor/persona/set",
                    "zcor/snapshot", "zcor/history/revert", "zcor/history/reinstate", "zcor/history/versions",
                    "zcor/history/at", "zcor/history/query"]


def history_for(op, tool: str) -> list[dict]:
    return op.call_tool("zcor_memory_history", {"keywords": [tool], "limit": 100})["items"]


def test_relationship_tools_vanish_for_the_bot_when_disabled(daemon):
    with daemon.client("operator") as op, daemon.client() as bot:
        assert {t["name"] for t in bot.list_tools()} == SPEC_TOOLS
        bot.call_tool("zcor_relationship_write", {"personId": "qq:1", "name": "小明", "relationship": "朋友",
                                                  "affinity": 10, "reason": "一起吃饭"})

        op.config_set({"relationshipMemory": False})
        # the bot is told its list changed, then sees the smaller list
        note = bot.wait_notification(10)
        assert note is not None and note["method"] == "notifications/tools/list_changed"
        names = {t["name"] for t in bot.list_tools()}
        assert names == SPEC_TOOLS - SPEC_RELATIONSHIP_TOOLS
        assert {t["name"] for t in op.list_tools()} == SPEC_TOOLS

        with pytest.raises(ToolError) as refused:
            bot.call_tool("zcor_relationship_write", {"personId": "qq:1", "name": "小明", "relationship": "敌人",
                                                      "affinity": -90, "reason": "坏话"})
        assert refused.value.code == "unknown_tool"
        with pytest.raises(ToolError):
            bot.call_tool("zcor_relationship_read", {"personId": "qq:1"})

        # no effect, and the refusal is in the history with actor model
        assert op.call_tool("zcor_relationship_read", {"personId": "qq:1"})["affinity"] == 10
        refusals = [r for r in history_for(op, "zcor_relationship_write")
                    if r["status"] == "error" and r["actor"] == "model"]
        assert len(refusals) == 1 and refusals[0]["error"]["code"] == "unknown_tool"
        assert refusals[0]["params"]["affinity"] == -90

        # operators still manage relationships
        op.call_tool("zcor_relationship_write", {"personId": "qq:1", "name": "小明", "relationship": "同学",
                                                 "affinity": 20, "reason": "帮忙"})

        op.config_set({"relationshipMemory": True})
        note = bot.wait_notification(10)
        assert note is not None and note["method"] == "notifications/tools/list_changed"
        assert bot.call_tool("zcor_relationship_read", {"personId": "qq:1"})["affinity"] == 20


def test_external_event_frame_is_refused_and_recorded(shared_daemon):
    with shared_daemon.client() as bot, shared_daemon.client("operator") as op:
        before = op.status()["nodes"]
        with pytest.raises(ToolError) as refused:
            bot.call_tool("external_event_frame", {"text": "你好", "origin": "external"})
        assert refused.value.code == "unknown_tool"
        assert "external_event_frame" in refused.value.message
        assert op.status()["nodes"] == before
        records = [r for r in history_for(op, "external_event_frame") if r["tool"] == "external_event_frame"]
        assert records and records[0]["status"] == "error" and records[0]["actor"] == "model"


@pytest.mark.parametrize("method", OPERATOR_METHODS)
def test_operator_methods_are_refused_to_the_bot(shared_daemon, method):
    with shared_daemon.client("operator") as op:
        groups = op.synonym_groups()
    with shared_daemon.client() as bot:
        with pytest.raises(ToolError) as refused:
            bot.request(method, {"patch": {"recallBudget": 1}, "text": "x", "terms": ["角色甲", "角色乙"]})
        assert refused.value.code == "forbidden"
        assert "operator" in refused.value.message
    with shared_daemon.client("operator") as op:
        assert op.config_get()["recallBudget"] == 6000
        assert op.synonym_groups() == groups


@pytest.mark.parametrize("method", sorted(BOT_METHODS))
def test_bot_methods_work_for_the_bot(shared_daemon, method):
    with shared_daemon.client() as bot:
        assert isinstance(bot.request(method, BOT_METHODS[method]), dict)


def test_operator_methods_work_for_operators(shared_daemon):
    with shared_daemon.client("operator") as op:
        st = op.status()
        assert st["socket"] == str(shared_daemon.sock)
        assert st["memoryDir"] == str(shared_daemon.memdir)
        assert st["pid"] == shared_daemon.proc.pid
        assert st["version"] and st["uptimeSeconds"] >= 0 and st["connections"] >= 1
        name = op.call_tool("zcor_memory_backup")["backupFile"]
        assert name in [b["backupFile"] for b in op.backups()]
        assert all(len(g) >= 2 for g in op.synonym_groups())
        with pytest.raises(ToolError) as bad:
            op.config_set({"recallBudget": -1})
        assert bad.value.code == "invalid_argument"


def test_bot_tool_calls_are_recorded_as_model_and_operator_calls_as_operator(shared_daemon):
    with shared_daemon.client() as bot, shared_daemon.client("operator") as op:
        a = bot.call_tool("zcor_memory_write", {"title": "角色测试甲", "content": "x"})
        b = op.call_tool("zcor_memory_write", {"title": "角色测试乙", "content": "y"})
        actors = {r["params"]["title"]: r["actor"] for r in history_for(op, "角色测试")
                  if r["tool"] == "zcor_memory_write"}
        assert actors == {"角色测试甲": "model", "角色测试乙": "operator"}
        assert a["id"] != b["id"]


def test_the_role_is_fixed_at_the_one_initialize(shared_daemon):
    """The same uid as zcord may be the operator; nobody changes role on a live connection."""
    from zcord.client import RpcError

    with shared_daemon.client() as bot:
        assert bot.initialize_result["capabilities"]["experimental"]["zcor"]["role"] == "bot"
        with pytest.raises(RpcError) as again:
            bot.request("initialize", {"capabilities": {"experimental": {"zcor": {"role": "operator"}}}})
        assert "once per connection" in again.value.message
        with pytest.raises(ToolError) as refused:
            bot.status()
        assert refused.value.code == "forbidden"
    with shared_daemon.client("operator") as op:
        assert op.initialize_result["capabilities"]["experimental"]["zcor"]["role"] == "operator"
        cfg = op.config_get()
        assert cfg["operatorGroup"] == "zcor-operators" and cfg["maxConnections"] == 256
        assert cfg["botBackupIntervalSeconds"] == 600 and cfg["maxBotBackups"] == 20
