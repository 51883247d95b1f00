"""zcord limits glibc's malloc arenas at start (issue 24: resident memory at 100,000
memories), unless MALLOC_ARENA_MAX says otherwise. Each case in a fresh interpreter: the
setting is per process and can only be made before threads allocate."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from tests.integration.conftest import make_daemon  # noqa: F401  (fixture)

CODE = "from zcord.transport.server import _limit_malloc_arenas as f; print(f())"


def _run(env_extra: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    env.update(env_extra)
    out = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt(M_ARENA_MAX) is glibc's")
def test_arenas_are_limited_on_glibc():
    assert _run({}) == "True"


def test_the_environment_wins():
    assert _run({"MALLOC_ARENA_MAX": "8"}) == "False"


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt(M_ARENA_MAX) is glibc's")
def test_the_daemon_limits_them_before_it_serves(make_daemon, monkeypatch):
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    d = make_daemon()
    d.start(args=["--memory-dir", str(d.memdir), "--socket", str(d.sock), "--log-level", "debug"])
    assert "malloc arenas limited to 2" in d.stderr()
