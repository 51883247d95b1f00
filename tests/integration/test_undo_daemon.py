"""Undo over a real daemon: an operator reverts what the bot did; the bot may not."""

from __future__ import annotations

import pytest

from zcord.client import ToolError


def test_operator_reverts_the_bots_merge_and_the_bot_cannot(daemon):
    with daemon.client("operator") as op, daemon.client() as bot:
        a = bot.call_tool("zcor_memory_write", {"title": "小王爱吃辣", "content": "火锅要特辣"})["id"]
        b = bot.call_tool("zcor_memory_write", {"title": "小王能吃辣", "content": "川菜"})["id"]
        merged = bot.call_tool("zcor_memory_merge", {"ids": [a, b], "title": "小王吃辣", "content": "都行",
                                                     "reason": "重复"})
        seq = op.call_tool("zcor_memory_history", {"limit": 1})["items"][0]["seq"]
        with pytest.raises(ToolError) as refused:
            bot.request("zcor/history/revert", {"seq": seq})
        assert refused.value.code == "forbidden"
        res = op.request("zcor/history/revert", {"seq": seq})
        assert res["reverted"] == seq
        assert {(c["kind"], c["target"]) for c in res["changes"]} >= {("node.delete", merged["id"]),
                                                                       ("node.update", a), ("node.update", b)}
        assert bot.call_tool("zcor_memory_read", {"id": a})["supersededBy"] is None
        with pytest.raises(ToolError) as gone:
            bot.call_tool("zcor_memory_read", {"id": merged["id"]})
        assert gone.value.code == "not_found"
        versions = op.request("zcor/history/versions", {"id": a})["items"]
        assert [v["kind"] for v in versions] == ["node.create", "node.supersede", "node.update"]
        earlier = op.request("zcor/history/at", {"time": versions[1]["at"]})
        assert merged["id"] in {n["id"] for n in earlier["nodes"]}
        with pytest.raises(ToolError) as bad:
            op.request("zcor/history/at", {"time": "yesterday"})
        assert bad.value.code == "invalid_argument" and bad.value.field == "time"
