"""The journal under SIGKILL at start: replaying the changes logged after the snapshot
writes nothing, so a daemon killed while replaying (or right after) loses nothing, and
the next start replays the same changes again."""

from __future__ import annotations

import random
import time

import pytest

from tests.fault.wire import Wire
from tests.persisted import read_persisted

pytestmark = pytest.mark.fault

NO_SNAPSHOTS = {"ZCOR_SNAPSHOT_CHANGES": "1000000", "ZCOR_SNAPSHOT_SECONDS": "100000"}


def test_sigkill_during_replay_loses_nothing(make_daemon):
    d = make_daemon()
    d.start(env=NO_SNAPSHOTS)
    bot = Wire(d.sock, "bot")
    ids = []
    for i in range(400):
        reply = bot.call("tools/call", {"name": "zcor_memory_write", "arguments": {
            "title": f"日志{i}", "content": "重放" * 200, "keywords": ["重放"]}})
        ids.append(reply["result"]["structuredContent"]["id"])
    bot.close()
    d.proc.kill()  # no shutdown snapshot: 399 changes live only in the journal
    d.proc.wait(10)
    snapshot = (d.memdir / "memory-state.json").read_bytes()
    assert len(read_persisted(d.memdir).nodes) == 400
    rng = random.Random(20261201)
    t0 = time.monotonic()
    d.start(env=NO_SNAPSHOTS)
    ready_after = time.monotonic() - t0
    d.proc.kill()
    d.proc.wait(10)
    for _ in range(12):
        d.start(wait=False, env=NO_SNAPSHOTS)
        time.sleep(rng.uniform(0, ready_after * 1.2))
        d.proc.kill()
        d.proc.wait(10)
        # replay writes nothing: the snapshot is untouched, the persisted Memory whole
        assert (d.memdir / "memory-state.json").read_bytes() == snapshot
        assert len(read_persisted(d.memdir).nodes) == 400
    d.start(env=NO_SNAPSHOTS)
    op = Wire(d.sock, "operator")
    got = op.call("tools/call", {"name": "zcor_memory_query", "arguments": {"keywords": ["重放"], "limit": 100}})
    assert got["result"]["structuredContent"]["total"] == 400
    op.close()
    assert d.stop() == 0  # a clean stop writes the snapshot: the next start replays nothing
    assert "日志399" in (d.memdir / "memory-state.json").read_text()
    assert len(read_persisted(d.memdir).nodes) == 400
