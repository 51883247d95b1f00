"""The TUI against real zcord subprocesses on temporary Memory directories.

Memories are built before the daemon starts, through zcord.service.Service with a fixed
clock (the one place these tests use the Service directly), so times, ids and history
are the same on every run and snapshots stay stable.
"""

from __future__ import annotations

import io
import json
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.pilot import Pilot
from textual.screen import ModalScreen
from textual.widgets import Input

from tests.conftest import TZ, FakeClock
from tests.integration.conftest import Daemon, Factory
from zcor_tui.app import ZcorApp
from zcord.client import AsyncClient
from zcord.service import Service

START = datetime(2026, 1, 1, 9, 0, tzinfo=TZ)
SYNONYMS = [["妈妈", "母亲", "老妈"], ["爸爸", "父亲"], ["工作", "上班", "职场"], ["苹果", "apple"],
            ["喜欢", "爱", "喜爱"], ["生日", "诞辰"], ["同事", "工友"]]


class RecordingApp(ZcorApp):
    """ZcorApp that keeps every notification, so tests can read what the operator was told."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.notes: list[tuple[str, str, str]] = []

    def notify(self, message: str, *, title: str = "", severity: str = "information", **kwargs: Any) -> None:
        self.notes.append((severity, title, message))
        super().notify(message, title=title, severity=severity, **kwargs)

    def noted(self, severity: str | None = None) -> str:
        return "\n".join(f"{t} {m}" for s, t, m in self.notes if severity is None or s == severity)


class SnapshotApp(ZcorApp):
    """ZcorApp with the temporary Memory path replaced by a fixed one in the status line."""

    def display_path(self, path: str) -> str:
        return "/var/lib/zcor/demo"


def build_memory(memdir: Path) -> dict[str, str]:
    """A small Memory with every kind of record, at fixed times; returns names → ids.

    Every new memory names its keywords (an update without them keeps them): derived ones would come from this process's jieba, whose
    dictionary holds whatever earlier tests taught it, and the daemon later teaches jieba
    those keywords, which changes how the recall preview cuts a text (喜欢吃 or 喜欢 · 吃)."""
    memdir.mkdir(parents=True, exist_ok=True)
    (memdir / "synonyms.json").write_text(json.dumps({"version": 1, "groups": SYNONYMS}, ensure_ascii=False))
    clock = FakeClock(START)
    clock.step = timedelta(minutes=1)
    ids: dict[str, str] = {}
    with Service(memdir, clock=clock) as svc:
        def call(tool: str, actor: str = "operator", **params: Any) -> dict[str, Any]:
            return svc.call(tool, params, actor=actor)

        def write(name: str, actor: str = "operator", **params: Any) -> str:
            ids[name] = call("zcor_memory_write", actor, **params)["id"]
            return ids[name]

        family = write("family", title="家人", content="和家里人有关的记忆。", keywords=["家人"])
        write("mom", title="妈妈", content="妈妈是小学老师，喜欢养花。", parentId=family,
              keywords=["妈妈", "老师"], sourceMessage="我妈是小学老师，平时最爱养花。")
        write("dad", title="爸爸", content="爸爸在工厂上班。", parentId=family, keywords=["爸爸"])
        write("birthday", title="妈妈的生日", content="三月五日，要提前订蛋糕。", parentId=ids["mom"],
              keywords=["妈妈", "生日"])
        clock.set(START + timedelta(days=4))
        work = write("work", actor="model", title="工作", content="在一家做游戏的公司上班。", keywords=["工作"])
        write("old_plan", actor="model", title="旧的项目安排", content="原定二月上线。", parentId=work,
              keywords=["项目", "安排"])
        write("deadline", actor="model", title="项目截止日期", content="三月底上线。", parentId=work,
              keywords=["项目", "截止", "日期"])
        write("colleague", actor="model", title="同事小王", content="坐在旁边，爱喝咖啡。", parentId=work,
              keywords=["同事", "小王"])
        call("zcor_memory_supersede", "model", ids=[ids["old_plan"]], replacementId=ids["deadline"],
             reason="上线时间改了")
        clock.set(START + timedelta(days=9))
        hobby = write("hobby", title="爱好", content="周末的安排。", keywords=["爱好"])
        write("apple", title="喜欢吃苹果", content="每天一个苹果，最喜欢红富士。", parentId=hobby, keywords=["苹果"])
        call("zcor_memory_write", id=ids["deadline"], title="项目截止日期", content="四月中旬上线，三月底提测。")
        temp = write("temp", title="临时记录", content="稍后删除。", keywords=["临时"])
        call("zcor_memory_delete", id=temp)
        del ids["temp"]
        call("zcor_memory_important", id=ids["mom"], important=True)
        call("zcor_memory_important", id=ids["apple"], important=True)
        call("zcor_relationship_write", "model", personId="qq:10001", name="小王", aliases=["王同学"],
             relationship="同事", affinity=40, reason="经常一起吃午饭", memoryNodeId=ids["colleague"])
        call("zcor_relationship_write", personId="qq:10002", name="张老师", relationship="以前的班主任",
             affinity=-20, reason="批评过我")
    return ids


async def settle(pilot: Pilot, timeout: float = 15.0) -> None:
    """Wait until no worker runs (but an action waiting for its dialog) and messages are handled."""
    deadline = time.monotonic() + timeout
    quiet = 0
    while time.monotonic() < deadline:
        await pilot.pause(0.02)
        if pilot.app._exception is not None:  # a crash inside a worker: fail here, loudly
            raise AssertionError("the app crashed") from pilot.app._exception
        dialog_open = isinstance(pilot.app.screen, ModalScreen)
        busy = [w for w in pilot.app.workers if w.is_running and not (dialog_open and w.group == "action")]
        if busy:
            quiet = 0
            continue
        quiet += 1
        if quiet >= 3:
            return
    raise AssertionError(f"the app did not settle: {busy}")


async def press(pilot: Pilot, *keys: str) -> None:
    """Press the keys, then settle: what the operator sees once the app has answered them."""
    await pilot.press(*keys)
    await settle(pilot)


async def until(pilot: Pilot, predicate, timeout: float = 15.0, what: str = "condition") -> None:
    """Pause until predicate() is true (a deadline, not a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def text_of(renderable: Any, width: int = 160) -> str:
    """Plain text of a Rich renderable (a Static's content)."""
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None, legacy_windows=False)
    console.print(renderable)
    return console.export_text()


def screen_text(app: ZcorApp) -> str:
    """What the terminal shows right now, as text."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, record=True,
                      legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


def steady_cursors(app: ZcorApp) -> None:
    """A blinking cursor would make snapshots flaky."""
    for box in app.screen.query(Input):
        box.cursor_blink = False


@pytest.fixture(autouse=True)
def _fast_fsync(fast_fsync):
    """Memories built here in process skip fsync (the daemons the TUI talks to keep it)."""
    yield


@pytest.fixture
def make_daemon():
    """Daemons on fresh /tmp directories; killed and removed after the test."""
    f = Factory()
    yield f
    problems = f.cleanup()
    assert not problems, "zcord logged a crash:\n" + "\n---\n".join(problems)


@pytest.fixture
def memory(make_daemon) -> tuple[Daemon, dict[str, str]]:
    """A running daemon on the standard test Memory, and the ids of its memories by name."""
    d = make_daemon()
    ids = build_memory(d.memdir)
    return d.start(), ids


@pytest.fixture
def app_for():
    """Build apps on a daemon's socket (each app closes its client when it exits)."""
    def make(daemon: Daemon, cls: type[ZcorApp] = RecordingApp) -> ZcorApp:
        client = AsyncClient(daemon.sock, role="operator", timeout=20, max_backoff=0.5, client_name="zcor-tui-test")
        return cls(client)

    return make
