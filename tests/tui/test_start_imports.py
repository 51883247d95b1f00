"""The TUI's start loads no jieba (nor pydantic): the app, headless in a fresh interpreter,
connects to a real zcord and shows its first screen; sys.modules is read afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

START = """
import asyncio, json, sys, time
from zcor_tui.app import ZcorApp
from zcord.client import AsyncClient

async def main(sock):
    app = ZcorApp(AsyncClient(sock, role="operator", timeout=20, client_name="zcor-tui-imports"))
    async with app.run_test(size=(100, 30)) as pilot:
        deadline = time.monotonic() + 60
        while not (app.connected and app.status is not None
                   and not any(w.is_running for w in app.workers)):
            assert time.monotonic() < deadline, "the app did not connect"
            await pilot.pause(0.05)
        screen = type(app.screen).__name__
    heavy = sorted({m.split(".")[0] for m in sys.modules} & {"jieba", "pydantic", "orjson"})
    print(json.dumps({"screen": screen, "heavy": heavy}))

asyncio.run(main(sys.argv[1]))
"""


def test_the_tui_starts_on_a_daemon_without_loading_jieba(memory):
    daemon, _ = memory
    done = subprocess.run([sys.executable, "-c", START, str(daemon.sock)], capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "TERM": "xterm"},
                          cwd=ROOT, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["screen"] == "BrowseScreen"  # it got as far as the first screen
    assert seen["heavy"] == []
