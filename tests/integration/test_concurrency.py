"""Many clients at once: every acknowledged write is in the Memory and in the history."""

from __future__ import annotations

import asyncio
import json

CLIENTS = 8
WRITES = 200


async def test_concurrent_clients_all_writes_present_with_complete_history(daemon):
    async def writer(n: int) -> list[str]:
        client = await daemon.aclient()
        try:
            ids = []
            # a few requests in flight per client, so replies can come back out of order
            for start in range(0, WRITES, 4):
                batch = [client.call_tool("zcor_memory_write",
                                          {"title": f"并发 c{n} w{i}", "content": f"client {n} write {i}"})
                         for i in range(start, min(start + 4, WRITES))]
                ids += [r["id"] for r in await asyncio.gather(*batch)]
            return ids
        finally:
            await client.close()

    results = await asyncio.gather(*(writer(n) for n in range(CLIENTS)))
    all_ids = [i for ids in results for i in ids]
    assert len(all_ids) == len(set(all_ids)) == CLIENTS * WRITES

    op = await daemon.aclient("operator")
    try:
        status = await op.status()
        assert status["nodes"] == CLIENTS * WRITES
        page = await op.call_tool("zcor_memory_query", {"keywords": ["并发"], "limit": 100})
        assert page["total"] == CLIENTS * WRITES
        for n, ids in enumerate(results):
            for i in (0, WRITES // 2, WRITES - 1):
                node = await op.call_tool("zcor_memory_read", {"id": ids[i]})
                assert node["title"] == f"并发 c{n} w{i}"
        history = await op.call_tool("zcor_memory_history", {"keywords": ["zcor_memory_write", "并发"]})
        assert history["total"] == CLIENTS * WRITES
    finally:
        await op.close()

    # the operation log on disk: one ok record per write, each with its node.create change
    records = [json.loads(line) for line in (daemon.memdir / "operations.jsonl").read_text().splitlines()]
    writes = [r for r in records if r["tool"] == "zcor_memory_write"]
    assert len(writes) == CLIENTS * WRITES
    assert all(r["status"] == "ok" and r["actor"] == "model" for r in writes)
    created = {c["target"] for r in writes for c in r["changes"] if c["kind"] == "node.create"}
    assert created == set(all_ids)
    seqs = [r["seq"] for r in records]
    assert len(seqs) == len(set(seqs))


async def test_replies_can_overtake_each_other(shared_daemon):
    """A slow request does not hold back the answers of later ones on the same connection."""
    client = await shared_daemon.aclient("operator")
    try:
        order: list[str] = []

        async def tagged(name, coro):
            await coro
            order.append(name)

        big = "字" * 19_000
        slow = [tagged(f"w{i}", client.call_tool("zcor_memory_write", {"title": f"大 {i}", "content": big}))
                for i in range(5)]
        pings = [tagged(f"p{i}", client.ping()) for i in range(5)]
        await asyncio.gather(*slow, *pings)
        assert sorted(order) == sorted([f"w{i}" for i in range(5)] + [f"p{i}" for i in range(5)])
        # pings never wait for the writes queued in front of them in the worker
        assert order.index("p4") < order.index("w4")
    finally:
        await client.close()
