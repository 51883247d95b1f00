"""The bot-facing `zcor/` methods: system prefix, auto-recall and the context header."""

from __future__ import annotations

import pytest

from zcord.client import RpcError, ToolError


def test_prefix_recall_context_round_trip(daemon):
    with daemon.client("operator") as op, daemon.client() as bot:
        cat = op.call_tool("zcor_memory_write", {"title": "小明的猫叫咪咪", "content": "橘猫，三岁"})
        op.call_tool("zcor_memory_write", {"title": "天气记录", "content": "晴"})
        op.call_tool("zcor_memory_important", {"id": cat["id"], "important": True})

        prefix = bot.prefix()
        assert isinstance(prefix, str) and "橘猫，三岁" in prefix

        # no external event: the set is unchanged (empty for a new session)
        assert bot.recall("qq:group:1", [{"text": "小明的猫", "origin": "internal"}]) == []
        ids = bot.recall("qq:group:1", [{"text": "小明的猫最近怎么样", "origin": "external", "senderKey": "qq:9"}])
        assert ids[0] == cat["id"]
        ctx = bot.context("qq:group:1")
        assert set(ctx) >= {"text", "ids"}
        assert ctx["ids"] == ids and "小明的猫叫咪咪" in ctx["text"]

        # sessions are separate; an unknown one has an empty header
        empty = bot.context("console")
        assert empty["text"] == "" and empty["ids"] == []

        # recall is not recorded in the history
        hist = op.call_tool("zcor_memory_history", {"keywords": ["qq:group:1"]})
        assert hist["total"] == 0


def test_bot_method_param_errors(shared_daemon):
    with shared_daemon.client() as bot:
        with pytest.raises(RpcError) as err:
            bot.request("zcor/recall", {"session": "s"})
        assert err.value.code == -32602
        with pytest.raises(RpcError):
            bot.request("zcor/context", {})
        with pytest.raises(ToolError) as bad:
            bot.recall("", [{"text": "x", "origin": "external"}])
        assert bad.value.field == "session"
        with pytest.raises(ToolError):
            bot.recall("s", [{"text": "x", "origin": "elsewhere"}])
