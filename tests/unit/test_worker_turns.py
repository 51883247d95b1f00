"""zcord's worker takes turns between connections (one call each, round robin) and runs an
urgent job (the watchdog's probe) first: one client's pipelined queue cannot starve another's
call. The fault tests' pipelined attacks cannot tell this from one queue for everyone (zcord
reads a connection about as fast as it answers it), so the order is asserted here."""

from __future__ import annotations

import asyncio
import threading

from zcord.transport.connections import Worker


async def test_connections_take_turns_and_the_urgent_job_goes_first():
    loop = asyncio.get_running_loop()
    worker = Worker(loop)
    ran: list[str] = []
    started, hold = threading.Event(), threading.Event()

    def busy() -> None:
        started.set()
        hold.wait()

    try:
        first = worker.submit(busy, caller="c")  # the worker is busy with another client's call
        assert started.wait(30)
        futures = [worker.submit(ran.append, f"a{i}", caller="a") for i in range(1, 6)]
        futures += [worker.submit(ran.append, f"b{i}", caller="b") for i in range(1, 3)]
        futures.append(worker.submit(ran.append, "probe", urgent=True))
        hold.set()
        await asyncio.wait_for(asyncio.gather(first, *futures), timeout=30)
    finally:
        hold.set()
        worker.stop(5)
    assert ran == ["probe", "a1", "b1", "a2", "b2", "a3", "a4", "a5"]
