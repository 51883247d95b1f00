"""What checking a request's params against its method's params model costs (issue 39): every
method now validates its params with a pydantic model before the handler runs; this times that
step alone, per method, for typical params (a request's round trip over the socket is
hundreds of microseconds: bench_daemon.py).

Usage: python bench/bench_params.py [--samples 20000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import pct, table  # noqa: E402

from zcord.transport import params as M  # noqa: E402
from zcord.transport.methods import TABLE  # noqa: E402

TYPICAL = {
    "ping": {},
    "tools/call": {"name": "zcor_memory_read", "arguments": {"id": "m1"}, "_meta": {"zcor/view": True}},
    "zcor/recall": {"session": "qq:group:1", "events": [{"text": "今天吃火锅", "origin": "external",
                                                          "senderKey": "qq:42"}] * 5},
    "zcor/context": {"session": "qq:group:1"},
    "zcor/usage/report": {"session": "s", "inputTokens": 1200, "cachedTokens": 1000, "outputTokens": 80,
                          "frontEnd": "chat", "model": "m"},
    "zcor/history/revert": {"seq": 42, "preview": True},
    "zcor/history/revertOrigin": {"sender": "qq:42", "from": "2026-12-01T00:00:00+08:00", "preview": True},
    "zcor/history/query": {"keywords": ["火锅"], "limit": 20, "changesOnly": True},
    "zcor/review/reject": {"ids": [3, 5, 8], "preview": True},
    "zcor/erase": {"sender": "qq:42", "preview": True},
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=20_000)
    args = ap.parse_args()
    rows = []
    for name, params in TYPICAL.items():
        entry = TABLE.get(name)
        assert entry is not None, name
        model = entry.params
        times = []
        for _ in range(args.samples):
            t0 = time.perf_counter()
            M.validate(model, params)
            times.append(time.perf_counter() - t0)
        rows.append([name, model.__name__, f"{pct(times, 50) * 1e6:.1f}", f"{pct(times, 99) * 1e6:.1f}"])
    print(table(rows, ["method", "params model", "p50 µs", "p99 µs"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
