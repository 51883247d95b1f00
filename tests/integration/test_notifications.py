"""Subscribed operators hear about every committed change, and only about those."""

from __future__ import annotations

import asyncio

import pytest

from zcord.client import ToolError


async def test_subscribed_operator_receives_changes(shared_daemon):
    op = await shared_daemon.aclient("operator")
    quiet = await shared_daemon.aclient("operator")
    bot = await shared_daemon.aclient()
    try:
        events: asyncio.Queue = asyncio.Queue()
        await op.subscribe(events.put_nowait)
        unheard: list = []
        quiet.on_notification("zcor/changed", unheard.append)

        node = await bot.call_tool("zcor_memory_write", {"title": "订阅测试", "content": "x"},
                                   origin={"session": "qq:group:7", "senders": ["qq:42"]})
        ev = await asyncio.wait_for(events.get(), 10)
        assert ev["tool"] == "zcor_memory_write" and ev["actor"] == "model"
        assert ev["origin"] == {"session": "qq:group:7", "senders": ["qq:42"]}
        assert {"kind": "node.create", "target": node["id"]} in ev["changes"]
        assert isinstance(ev["seq"], int)

        await bot.call_tool("zcor_memory_important", {"id": node["id"], "important": True})
        ev = await asyncio.wait_for(events.get(), 10)
        assert ev["tool"] == "zcor_memory_important"

        # reads and failed calls change nothing and send nothing
        await bot.call_tool("zcor_memory_read", {"id": node["id"]})
        with pytest.raises(ToolError):
            await bot.call_tool("zcor_memory_delete", {"id": "m999999"})
        await op.config_set({"recallBudget": 5000})
        ev = await asyncio.wait_for(events.get(), 10)
        assert ev["tool"] == "zcor/config/set" and ev["actor"] == "operator"
        assert ev["origin"] == {"operator": True}
        await op.config_set({"recallBudget": 6000})
        await asyncio.wait_for(events.get(), 10)

        await op.unsubscribe()
        await bot.call_tool("zcor_memory_write", {"title": "订阅测试二", "content": "y"})
        await op.ping()
        await quiet.ping()
        assert events.empty()
        assert unheard == []
    finally:
        for c in (op, quiet, bot):
            await c.close()


async def test_client_reconnects_and_resubscribes(make_daemon):
    d = make_daemon().start()
    op = await d.aclient("operator", timeout=30)
    states: list[bool] = []
    op.on_connection_change(states.append)
    events: asyncio.Queue = asyncio.Queue()
    await op.subscribe(events.put_nowait)
    try:
        assert d.stop() == 0
        d.start()
        # requests made while reconnecting wait for the new connection
        status = await op.status()
        assert status["pid"] == d.proc.pid
        assert states[:2] == [False, True]
        with d.client() as bot:
            bot.call_tool("zcor_memory_write", {"title": "重连", "content": "z"})
        ev = await asyncio.wait_for(events.get(), 10)
        assert ev["tool"] == "zcor_memory_write"
    finally:
        await op.close()
