"""The app outlives its daemon: it says so, keeps running, and reconnects when zcord returns.
And the launcher starts (and stops) a zcord of its own with --with-daemon."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from zcor_tui import launcher
from zcor_tui.widgets.memory_tree import MemoryTree
from zcord.client import Client, DaemonUnavailable

from .conftest import screen_text, settle, until


async def test_app_keeps_running_while_the_daemon_is_away_and_reconnects(memory, app_for):
    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert app.link_state == "connected"
        assert d.stop() == 0
        await until(pilot, lambda: app.link_state != "connected", what="the app to notice")
        await settle(pilot)
        assert app.is_running
        assert "reconnecting" in screen_text(app) or "not answering" in screen_text(app)
        # working on while it is away: errors are notifications, not crashes
        for key in ("r", "2", "3", "4", "5", "6", "1"):
            await pilot.press("escape", key)
        await settle(pilot)
        assert app.is_running

        d.start()
        await until(pilot, lambda: app.link_state == "connected", timeout=30, what="the reconnect")
        await settle(pilot)
        assert "Reconnected" in app.noted()
        assert "● connected" in screen_text(app)
        # the subscription came back too: the bot's change shows up by itself
        with d.client() as bot:
            node = bot.call_tool("zcor_memory_write", {"title": "重连之后", "content": "x"})
        tree = app.screen.query_one(MemoryTree)
        await until(pilot, lambda: node["id"] in tree.nodes_by_id, what="the live update after reconnecting")


async def test_app_started_before_the_daemon_connects_when_it_comes(make_daemon, app_for):
    d = make_daemon()
    app = app_for(d)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.link_state == "unreachable", what="the first failed connect")
        assert "not answering" in screen_text(app)
        d.start()
        await until(pilot, lambda: app.link_state == "connected", timeout=30, what="the connect")
        await settle(pilot)
        assert "0 memories" in screen_text(app)


def test_launcher_starts_waits_for_and_stops_its_own_daemon():
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="zt"))
    sock, memdir = root / "run" / "zcord.sock", root / "mem"
    seen: dict[str, object] = {}

    def fake_app(path: Path) -> int:
        with Client(path, role="operator") as c:
            seen["status"] = c.status()
        return 7

    try:
        code = launcher.main(["--socket", str(sock), "--with-daemon", "--memory-dir", str(memdir)], run=fake_app)
        assert code == 7
        assert seen["status"]["memoryDir"] == str(memdir)
        assert not launcher.answers(sock)  # stopped with SIGTERM: it removed its socket
        assert not sock.exists()
        try:
            Client(sock).connect()
            raise AssertionError("a daemon still answers")
        except DaemonUnavailable:
            pass
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_launcher_uses_a_running_daemon_and_leaves_it_running(memory):
    d, _ = memory
    code = launcher.main(["--socket", str(d.sock), "--with-daemon"], run=lambda path: 0)
    assert code == 0 and d.proc.poll() is None and launcher.answers(d.sock)
    other = launcher.main(["--socket", str(d.sock), "--with-daemon", "--memory-dir", "/tmp/elsewhere"],
                          run=lambda path: 0)
    assert other == 2


def test_launcher_reports_a_daemon_that_cannot_start(capsys):
    bad = Path(tempfile.mkdtemp(dir="/tmp", prefix="zt"))
    try:
        (bad / "mem").mkdir()
        (bad / "mem" / "memory-state.json").write_text("{not json")
        code = launcher.main(["--socket", str(bad / "s.sock"), "--with-daemon", "--memory-dir", str(bad / "mem")],
                             run=lambda path: 0)
        assert code == 1
        assert "zcord exited with code 1" in capsys.readouterr().err
    finally:
        shutil.rmtree(bad, ignore_errors=True)
