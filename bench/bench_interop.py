"""Import and export (issue 36).

Import: a SillyTavern World Info book of --entries entries (keys, a comment, about 300
characters of content each, a group for every 100 entries, five constant entries), built
here: reading it (format detection and every entry checked), its preview, the import into
an empty Memory (one operation: every memory created, the log record fsynced) and importing
it again (every entry found by its identity, nothing changed), in process; then the same
import over a real daemon, the file sent in upload pieces, as `zcor import` does.

Export: a Memory of --memories memories (bench/common.build_memory, written directly),
exported in each format in process (the snapshot under the lock, the rendering outside
it), and as JSONL over the daemon (read back in pieces), with the output sizes.

Prints a table; never asserts. Usage: python bench/bench_interop.py [--entries 10000]
[--memories 100000] [--samples 3]
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
from bench_daemon import start_daemon  # noqa: E402
from common import build_memory, content, pct, table, title  # noqa: E402

from zcord.client import Client, export_steps, import_steps, run_steps  # noqa: E402
from zcord.interop import readers  # noqa: E402
from zcord.service import Service  # noqa: E402
from zcord.service import interop as X  # noqa: E402


def world_info(n: int, seed: int = 5) -> bytes:
    rng = random.Random(seed)
    entries = {}
    for i in range(n):
        entries[str(i)] = {
            "uid": i, "key": [f"key{i}", f"别名{i}"], "keysecondary": [f"k2-{i % 97}"], "comment": title(rng, i),
            "content": content(rng) * 2, "constant": i < 5, "vectorized": False, "selective": True,
            "selectiveLogic": 0, "addMemo": True, "order": 100 + i % 7, "position": 0, "disable": False,
            "excludeRecursion": False, "preventRecursion": False, "delayUntilRecursion": 0, "probability": 100,
            "useProbability": True, "depth": 4, "group": f"Region {i // 100}", "groupOverride": False,
            "groupWeight": 100, "scanDepth": None, "caseSensitive": None, "matchWholeWords": None,
            "useGroupScoring": None, "automationId": "", "role": 0, "sticky": None, "cooldown": None,
            "delay": None, "displayIndex": i}
    return json.dumps({"entries": entries}, ensure_ascii=False).encode()


def seconds(values: list[float]) -> str:
    return f"{pct(values, 50):.2f} / {max(values):.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entries", type=int, default=10_000)
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--samples", type=int, default=3)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="zcx", dir="/tmp"))
    rows: list[list[str]] = []
    try:
        raw = world_info(args.entries)
        size = f"{len(raw) / 1e6:.1f} MB"
        t_read, t_preview, t_import, t_again = [], [], [], []
        for k in range(args.samples):
            t = time.perf_counter()
            readers.read(raw)
            t_read.append(time.perf_counter() - t)
            with Service(root / f"imp{k}") as svc:
                t = time.perf_counter()
                X.import_file(svc, raw, X.Options(name="world.json", preview=True))
                t_preview.append(time.perf_counter() - t)
                t = time.perf_counter()
                r = X.import_file(svc, raw, X.Options(name="world.json"))
                t_import.append(time.perf_counter() - t)
                created = r["created"]
                t = time.perf_counter()
                X.import_file(svc, raw, X.Options(name="world.json"))
                t_again.append(time.perf_counter() - t)
        n = f"{args.entries:,} entries, {size}"
        rows += [["read + check (in process)", n, seconds(t_read), ""],
                 ["preview (in process)", n, seconds(t_preview), ""],
                 ["import (in process)", n, seconds(t_import), f"{created:,} memories"],
                 ["import again, unchanged", n, seconds(t_again), "0 created"]]

        memdir = root / "daemon-imp"
        proc, _ = start_daemon(memdir, root / "i.sock", root / "i.notify")
        try:
            with Client(root / "i.sock", role="operator", timeout=600) as c:
                t = time.perf_counter()
                run_steps(c, import_steps(raw, "world.json"))
                over = time.perf_counter() - t
        finally:
            proc.terminate()
            proc.wait(30)
        rows.append(["import over the daemon", n, f"{over:.2f}", "upload pieces + import"])

        memdir = root / "big"
        t = time.perf_counter()
        build_memory(memdir, args.memories, 0, 0)
        built = time.perf_counter() - t
        with Service(memdir) as svc:
            for fmt in ("jsonl", "worldinfo", "lorebook", "markdown"):
                times, out = [], None
                for _ in range(args.samples):
                    t = time.perf_counter()
                    out = X.export_files(svc, fmt)[0]
                    times.append(time.perf_counter() - t)
                assert out is not None
                chars = sum(len(f.text) for f in out)
                rows.append([f"export {fmt} (in process)", f"{args.memories:,} memories", seconds(times),
                             f"{len(out):,} file(s), {chars / 1e6:.1f} M chars"])
        proc, _ = start_daemon(memdir, root / "e.sock", root / "e.notify")
        try:
            with Client(root / "e.sock", role="operator", timeout=600) as c:
                t = time.perf_counter()
                summary, files = run_steps(c, export_steps("jsonl"))
                over = time.perf_counter() - t
        finally:
            proc.terminate()
            proc.wait(30)
        rows.append(["export jsonl over the daemon", f"{args.memories:,} memories", f"{over:.2f}",
                     f"read in pieces, {len(files[0][1]) / 1e6:.1f} M chars"])
        print(f"Memory of {args.memories:,} built directly in {built:.1f} s; seconds are p50 / max of "
              f"{args.samples} (one run over the daemon)")
        print(table(rows, ["what", "size", "seconds", "note"]))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
