"""What holding a change for review costs as held changes pile up (issue 33, attack #7): an
untrusted sender's zcor_memory_write of --chars characters, held, one after another up to
--holds held changes (spread over senders so the per-sender caps do not refuse them), in
process on a fresh Memory. Prints per-hold wall time by how many were already held, the size
of the review files, the time of `zcor/review/list` (a page; the whole list on an older
checkout) and of a start that reads the record. Run the same script on an older checkout for
the figures before. Never asserts.

Usage: python bench/bench_review.py [--holds 150] [--chars 20000]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import FILLER, pct, table  # noqa: E402

from zcord.service import Service  # noqa: E402
from zcord.service import review as R  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--holds", type=int, default=150)
    ap.add_argument("--chars", type=int, default=20_000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(dir="/tmp", prefix="zcbr"))
    rng = random.Random(7)
    try:
        mem = tmp / "mem"
        mem.mkdir()
        (mem / "config.json").write_text(json.dumps({"defaultTrust": "untrusted"}))
        per_hold: list[float] = []
        with Service(mem) as svc:
            svc.warm()
            for n in range(args.holds):
                text = "".join(rng.choice(FILLER) for _ in range(args.chars))
                claim = {"session": "qq:group:1", "senders": [f"qq:t{n // 10}"]}
                t0 = time.perf_counter()
                out = svc.call("zcor_memory_write", {"title": f"held {n}", "content": text}, actor="model",
                               claim=claim)
                per_hold.append((time.perf_counter() - t0) * 1000)
                assert out.get("review") == "pending", out
            files = {name: (mem / name).stat().st_size for name in ("review.json", "review.log")
                     if (mem / name).exists()}
            t0 = time.perf_counter()
            listing = R.review_list(svc, 0, R.PAGE_LIMIT)
            list_ms = (time.perf_counter() - t0) * 1000
            list_bytes = len(json.dumps(listing, ensure_ascii=False).encode())
        t0 = time.perf_counter()
        with Service(mem) as svc:
            start_ms = (time.perf_counter() - t0) * 1000
            held = len(svc.review.items)
        head, tail = per_hold[:10], per_hold[-10:]
        print(f"{args.holds} held writes of {args.chars:,} characters (10 per sender), in process")
        print(table([
            ["hold ms, first 10 (p50 / p99)", f"{pct(head, 50):.1f} / {pct(head, 99):.1f}"],
            ["hold ms, last 10 (p50 / p99)", f"{pct(tail, 50):.1f} / {pct(tail, 99):.1f}"],
            ["hold ms, all (p50 / p99)", f"{pct(per_hold, 50):.1f} / {pct(per_hold, 99):.1f}"],
            *[[f"{k} bytes", f"{v:,}"] for k, v in files.items()],
            ["zcor/review/list (default) ms", f"{list_ms:.1f}"],
            ["zcor/review/list reply bytes", f"{list_bytes:,} ({len(listing['items'])} items)"],
            ["start with the record ms", f"{start_ms:.0f} ({held} held)"],
        ], ["", "value"]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    diff_views(rng)
    return 0


def diff_views(rng: random.Random) -> None:
    """The TUI's diff of one held rewrite (attack #10), built and rendered as the Review
    screen does, unified and side by side."""
    from rich.console import Console

    from zcor_tui.diff import change_view

    rows = []
    for chars in (1_000, 14_000, 16_000):
        before = "".join(rng.choice(FILLER) for _ in range(chars))
        after = "".join(rng.choice(FILLER) for _ in range(chars))
        edit = before[:chars // 2] + "改" + before[chars // 2 + 1:]
        for name, new in (("rewrite", after), ("one edit", edit)):
            cells = [f"{chars:,} chars, {name}"]
            for side in (False, True):
                t0 = time.perf_counter()
                view = change_view({"kind": "node.update", "target": "m1", "before": {"content": before},
                                    "after": {"content": new}}, side_by_side=side)
                console = Console(width=120, file=open("/dev/null", "w"), record=False)
                console.print(view)
                cells.append(f"{(time.perf_counter() - t0) * 1000:.0f}")
            rows.append(cells)
    print()
    print("The TUI's diff of one change (zcor_tui.diff.change_view), built and rendered, ms")
    print(table(rows, ["change", "unified", "side by side"]))


if __name__ == "__main__":
    sys.exit(main())
