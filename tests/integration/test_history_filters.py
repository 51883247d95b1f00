"""zcor/history/query (operator filters over the socket) and unrecorded display reads."""

from __future__ import annotations

import json

import pytest

from zcord.client import ToolError


def log_lines(daemon) -> list[dict]:
    return [json.loads(x) for x in (daemon.memdir / "operations.jsonl").read_bytes().splitlines()]


def test_filters_page_changes_among_many_reads_with_exact_totals(daemon):
    with daemon.client("operator") as op, daemon.client() as bot:
        a = bot.call_tool("zcor_memory_write", {"title": "小王的生日", "content": "三月五日"})["id"]
        for _ in range(60):  # a chatty bot: many reads between the changes
            bot.call_tool("zcor_memory_read", {"id": a})
        b = op.call_tool("zcor_memory_write", {"title": "爬山计划", "content": "周末去香山"})["id"]
        for i in range(30):
            bot.call_tool("zcor_memory_query", {"keywords": [f"q{i}"]})
        bot.call_tool("zcor_memory_write", {"id": a, "title": "小王的生日", "content": "三月六日"})
        op.call_tool("zcor_relationship_write", {"personId": "qq:7", "name": "小王", "relationship": "同事",
                                                 "affinity": 5, "reason": "一起爬山"})

        changes = op.history_query({"changesOnly": True, "limit": 2})
        assert changes["total"] == 4 and changes["nextOffset"] == 2
        assert [r["tool"] for r in changes["items"]] == ["zcor_relationship_write", "zcor_memory_write"]
        rest = op.history_query({"changesOnly": True, "limit": 2, "offset": 2})
        assert [r["params"]["title"] for r in rest["items"]] == ["爬山计划", "小王的生日"]
        assert rest["nextOffset"] is None and all(r["changes"] for r in rest["items"])

        by_model = op.history_query({"actor": "model", "changesOnly": True})
        assert by_model["total"] == 2 and {r["actor"] for r in by_model["items"]} == {"model"}
        reads = op.history_query({"tool": "zcor_memory_read", "limit": 100})
        assert reads["total"] == 60 and {r["tool"] for r in reads["items"]} == {"zcor_memory_read"}
        about_a = op.history_query({"target": a, "limit": 100})
        assert about_a["total"] == 62  # its create, 60 reads, its update
        about_a_changes = op.history_query({"target": a, "changesOnly": True})
        assert [r["changes"][0]["after"]["content"] for r in about_a_changes["items"]] == ["三月六日", "三月五日"]
        assert op.history_query({"target": "qq:7"})["items"][0]["tool"] == "zcor_relationship_write"
        # filters and keywords together (2-character and 1-character CJK keywords)
        assert op.history_query({"keywords": ["小王"], "actor": "operator"})["total"] == 1
        assert op.history_query({"keywords": ["香"], "changesOnly": True})["items"][0]["changes"][0]["target"] == b

        # the operator's queries are displays: not recorded
        before = len(log_lines(daemon))
        op.history_query({"changesOnly": True})
        assert len(log_lines(daemon)) == before


@pytest.mark.parametrize("params, field", [
    ({"actor": "robot"}, "actor"), ({"changesOnly": "yes"}, "changesOnly"), ({"limit": 0}, "limit"),
    ({"tool": ""}, "tool"), ({"target": "x" * 201}, "target"), ({"from": "yesterday"}, "from"),
    ({"unknown": 1}, "unknown"),
])
def test_bad_filters_are_refused_by_name(shared_daemon, params, field):
    with shared_daemon.client("operator") as op:
        with pytest.raises(ToolError) as refused:
            op.history_query(params)
        assert refused.value.code == "invalid_argument"
        assert refused.value.field == field


def test_display_reads_are_answered_but_not_recorded(daemon):
    with daemon.client("operator") as op, daemon.client() as bot:
        node = op.call_tool("zcor_memory_write", {"title": "茶", "content": "乌龙"})
        n = len(log_lines(daemon))
        assert op.call_tool("zcor_memory_read", {"id": node["id"]}, view=True)["content"] == "乌龙"
        assert op.call_tool("zcor_memory_trace", {"id": node["id"]}, view=True)
        assert op.call_tool("zcor_memory_history", {"limit": 1}, view=True)["total"] == n
        with pytest.raises(ToolError) as missing:
            op.call_tool("zcor_memory_read", {"id": "m999"}, view=True)
        assert missing.value.code == "not_found"
        assert len(log_lines(daemon)) == n

        # a change is never a display: refused, recorded, nothing written
        with pytest.raises(ToolError) as refused:
            op.call_tool("zcor_memory_write", {"title": "x", "content": "y"}, view=True)
        assert refused.value.code == "invalid_argument" and refused.value.field == "_meta"
        # the bot cannot hide its reads
        with pytest.raises(ToolError) as hidden:
            bot.call_tool("zcor_memory_read", {"id": node["id"]}, view=True)
        assert hidden.value.code == "forbidden"
        lines = log_lines(daemon)
        assert [(r["tool"], r["actor"], r["status"]) for r in lines[n:]] == [
            ("zcor_memory_write", "operator", "error"), ("zcor_memory_read", "model", "error")]
        assert op.status()["nodes"] == 1
        # the bot's ordinary reads stay recorded
        bot.call_tool("zcor_memory_read", {"id": node["id"]})
        assert log_lines(daemon)[-1]["actor"] == "model"
