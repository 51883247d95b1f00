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


async def test_the_client_helpers_speak_the_undo_methods(daemon):
    """Client.history_* and AsyncClient.history_* send the documented params."""
    with daemon.client("operator") as op:
        m = op.call_tool("zcor_memory_write", {"title": "旧标题", "content": "a"})["id"]
        op.call_tool("zcor_memory_write", {"id": m, "title": "新标题", "content": "a"})
        seq = op.call_tool("zcor_memory_history", {"limit": 1})["items"][0]["seq"]
        preview = op.history_revert(seq, preview=True)
        assert preview["ok"] and [(c["kind"], c["target"]) for c in preview["changes"]] == [("node.update", m)]
        assert op.call_tool("zcor_memory_read", {"id": m})["title"] == "新标题"
        versions = op.history_versions(m)["items"]
        assert [v["record"]["title"] for v in versions] == ["旧标题", "新标题"]
        past = op.history_at(versions[0]["at"])
        assert {n["id"]: n["title"] for n in past["nodes"]}[m] == "旧标题"
    op = await daemon.aclient("operator")
    try:
        reverted = await op.history_revert(seq)
        assert reverted["reverted"] == seq and reverted["seq"] > seq
        assert (await op.call_tool("zcor_memory_read", {"id": m}))["title"] == "旧标题"
        back = await op.history_reinstate(m, versions[1]["changeId"])
        assert back["changeId"] == versions[1]["changeId"]
        assert [v["record"]["title"] for v in (await op.history_versions(m))["items"]][-1] == "新标题"
        with pytest.raises(ToolError) as bad:
            await op.history_at("2026-01-01T00:00:00")  # no offset
        assert bad.value.field == "time"
        with pytest.raises(ToolError) as conflict:
            await op.history_revert(reverted["seq"])  # the reinstate changed the title since
        assert conflict.value.code == "conflict" and m in conflict.value.message
    finally:
        await op.close()
