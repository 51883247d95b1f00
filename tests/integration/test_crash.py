"""SIGKILL in the middle of writes: after a restart every acknowledged write is there."""

from __future__ import annotations

import asyncio
import json
import random

from zcord.client import ClientError


async def test_sigkill_during_writes_loses_no_acknowledged_write(make_daemon):
    d = make_daemon().start()
    rng = random.Random(7)
    acked: dict[str, str] = {}
    # an update in flight when the daemon died may have taken effect without its answer
    # arriving: the node then has that newer title, which is no lost write
    unanswered: dict[str, str] = {}
    clients = [await d.aclient(reconnect=False) for _ in range(4)]
    stop = asyncio.Event()

    async def writer(n: int, client) -> None:
        i = 0
        own: list[str] = []  # updates only to its own nodes: one connection, one order of acks
        while not stop.is_set():
            title = f"崩溃 c{n} w{i}"
            try:
                if i % 5 == 4 and own:
                    # updates must survive too: the acked title is the newest one
                    node_id = rng.choice(own)
                    try:
                        result = await client.call_tool("zcor_memory_write",
                                                        {"id": node_id, "title": title, "content": "u"})
                    except ClientError:
                        unanswered[node_id] = title
                        raise
                else:
                    result = await client.call_tool("zcor_memory_write", {"title": title, "content": "c" * 500})
            except ClientError:
                return  # the daemon died under us; this write was never acknowledged
            acked[result["id"]] = result["title"]
            if result["id"] not in own:
                own.append(result["id"])
            i += 1

    tasks = [asyncio.create_task(writer(n, c)) for n, c in enumerate(clients)]
    while len(acked) < 150:
        await asyncio.sleep(0.01)
    d.proc.kill()
    d.proc.wait(10)
    stop.set()
    await asyncio.gather(*tasks)
    for c in clients:
        await c.close()

    d.start()
    with d.client("operator") as op:
        for node_id, title in acked.items():
            assert op.call_tool("zcor_memory_read", {"id": node_id})["title"] in (title, unanswered.get(node_id))
        # every change in the state is also in the operation log (reconciled after the crash)
        status = op.status()
    records = [json.loads(line) for line in (d.memdir / "operations.jsonl").read_text().splitlines()]
    logged = {c["changeId"] for r in records for c in r["changes"] if c.get("changeId")}
    assert len(logged) >= status["historyChanges"]
