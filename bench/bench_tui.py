"""The operator TUI on a large Memory: how long the first tree, an expansion, the next page
of roots, a jump to a node, a search page and a history page take, headless, against a
real zcord. Prints a table; never asserts times.

Then `g` to the end of one long chain (issue 23.12: the deepest memory of a 20,000-deep
chain), from pressing Enter until the cursor is on it and the app is idle.

Usage: python bench/bench_tui.py [--sizes 10000,50000] [--depths 1000,20000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import build_chain, build_memory, table  # noqa: E402
from textual.screen import ModalScreen  # noqa: E402

from zcor_tui.app import ZcorApp  # noqa: E402
from zcor_tui.launcher import running_daemon  # noqa: E402
from zcor_tui.widgets.memory_tree import MemoryTree, Slot  # noqa: E402
from zcord.client import AsyncClient  # noqa: E402


async def idle(pilot) -> None:
    """Until no worker runs (polled; the time includes Textual's own work)."""
    quiet = 0
    while quiet < 2:
        await pilot.pause(0.005)
        quiet = 0 if any(w.is_running for w in pilot.app.workers) else quiet + 1


async def measure(sock: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    app = ZcorApp(AsyncClient(sock, role="operator"))

    async def timed(name: str, coro_fn) -> None:
        t = time.perf_counter()
        await coro_fn()
        out[name] = f"{(time.perf_counter() - t) * 1000:.0f} ms"

    async with app.run_test(size=(120, 40)) as pilot:
        tree = app.screen.query_one(MemoryTree)

        async def first_tree():
            while not tree.root.data.loaded:
                await pilot.pause(0.005)
            await idle(pilot)

        await timed("connect + first tree", first_tree)
        out["roots / tree nodes"] = f"{len(tree.root.data.items):,} / {len(tree.nodes_by_id):,}"

        async def expand():
            node = next(n for n in tree.root.children if isinstance(n.data, Slot) and n.data.item.child_count)
            node.expand()
            await idle(pilot)

        await timed("expand a root", expand)

        async def more():
            tree.show_more(tree.root.children[-1])
            await idle(pilot)

        await timed("next 200 roots", more)
        deep = max(tree.root.data.items[-1:], key=lambda i: i.id).id

        async def reveal():
            app.show_node(deep)
            await idle(pilot)

        await timed("jump to the last root", reveal)

        async def search():
            await pilot.press("2")
            await idle(pilot)

        await timed("search: first page", search)

        async def history():
            await pilot.press("escape", "3")
            await idle(pilot)

        await timed("history: changes only", history)
    return out


async def measure_deep(sock: Path, depth: int) -> str:
    app = ZcorApp(AsyncClient(sock, role="operator"))
    async with app.run_test(size=(120, 40)) as pilot:
        tree = app.screen.query_one(MemoryTree)
        while not tree.root.data.loaded:
            await pilot.pause(0.005)
        await idle(pilot)
        await pilot.press("g")
        while not isinstance(app.screen, ModalScreen):
            await pilot.pause(0.005)
        await pilot.press(*str(depth))
        t = time.perf_counter()
        await pilot.press("enter")
        while tree.cursor_item is None or tree.cursor_item.id != f"m{depth}":
            await pilot.pause(0.005)
        await idle(pilot)
        return f"{(time.perf_counter() - t) * 1000:.0f} ms"


def deep(depths: list[int]) -> None:
    rows = []
    for depth in depths:
        with tempfile.TemporaryDirectory(dir=os.environ.get("ZCOR_BENCH_DIR", "/tmp")) as tmp:
            memdir, sock = Path(tmp) / "memory", Path(tmp) / "zcord.sock"
            build_chain(memdir, depth)
            with running_daemon(memdir, sock):
                rows.append([f"{depth:,}", asyncio.run(measure_deep(sock, depth))])
    print(table(rows, ["chain depth", "g to the deepest memory"]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--depths", default="1000,20000")
    args = parser.parse_args()
    deep([int(s) for s in args.depths.split(",") if s])
    if not args.sizes:
        return
    rows = []
    headers = ["nodes"]
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(dir=os.environ.get("ZCOR_BENCH_DIR", "/tmp")) as tmp:
            memdir, sock = Path(tmp) / "memory", Path(tmp) / "zcord.sock"
            build_memory(memdir, size, history=size, oplog=size * 2)
            with running_daemon(memdir, sock):
                result = asyncio.run(measure(sock))
        headers = ["nodes", *result]
        rows.append([f"{size:,}", *result.values()])
    print(table(rows, headers))


if __name__ == "__main__":
    main()
