"""Fault trials: real zcord daemons (the integration suite's `Daemon` helper), tmpfs mounts,
other uids. Every test here is marked `fault`, so `pytest -m fault` runs the suite alone."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.integration.conftest import Daemon, Factory, make_daemon, shared_daemon  # noqa: F401  (fixtures)


class Mounts:
    """tmpfs mounts made by one test; all unmounted (lazily, so open files cannot block it)."""

    def __init__(self) -> None:
        self.points: list[Path] = []

    def tmpfs(self, path: Path, size: str = "4m", mode: str = "0750") -> Path:
        path.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode={mode}", "tmpfs", str(path)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}); without "
                        f"root, the injected-ENOSPC tests in tests/unit/test_store.py cover the write layer")
        self.points.append(path)
        return path

    def remount(self, path: Path, options: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{options}", str(path)], check=True, capture_output=True)

    def read_only_over(self, path: Path) -> None:
        """Lay a read-only bind mount of path over itself: new opens through the path fail
        with EROFS, while files already open (through the mount below) stay writable."""
        subprocess.run(["mount", "--bind", str(path), str(path)], check=True, capture_output=True)
        self.points.append(path)
        self.remount(path, "bind,ro")

    def unmount(self, path: Path) -> None:
        """Take away the most recent mount on path."""
        subprocess.run(["umount", str(path)], check=True, capture_output=True)
        self.points.reverse()
        self.points.remove(path)
        self.points.reverse()

    def cleanup(self) -> None:
        for p in reversed(self.points):
            subprocess.run(["umount", "-l", str(p)], capture_output=True)


@pytest.fixture(scope="module", autouse=True)
def fresh_jieba_afterwards():
    """In-process Services teach the process-wide jieba their synonym terms and keywords;
    forget them after the module, so later tests segment text as a fresh process does."""
    yield
    import zcord.core.text as text

    text.analyzer.forget()


@pytest.fixture
def mounts():
    """Mount small tmpfs file systems (root only; the test is skipped elsewhere), unmounted afterwards."""
    m = Mounts()
    yield m
    m.cleanup()
