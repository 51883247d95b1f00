"""Real zcord daemons as subprocesses, on short /tmp paths, ready when READY=1 arrives.

Every daemon gets its own NOTIFY_SOCKET datagram socket, so tests wait on the daemon's
own readiness message instead of sleeping.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from zcord.client import AsyncClient, Client

DAEMON_CMD = [sys.executable, "-c", "import sys; from zcord.cli import daemon_main; sys.exit(daemon_main())"]
ZCOR_CMD = [sys.executable, "-c", "import sys; from zcord.cli import main; sys.exit(main())"]
READY_TIMEOUT = 30.0
CRASH_MARKERS = ("Traceback", "Task exception was never retrieved", "Exception in callback",
                 "internal error")


class Daemon:
    """One zcord process on a Memory directory and socket under `root`."""

    def __init__(self, root: Path, memdir: Path | None = None, sock: Path | None = None):
        self.root = root
        self.memdir = memdir or root / "mem"
        self.sock = sock or root / "run" / "zcord.sock"
        self.proc: subprocess.Popen | None = None
        self.notify_path = root / f"n{len(list(root.glob('n*')))}"
        self.notify: socket.socket | None = None
        self.messages: list[str] = []
        self.stderr_path = root / "stderr.log"

    # -- process --------------------------------------------------------------------------

    def start(self, wait: bool = True, env: dict[str, str] | None = None, args: list[str] | None = None,
              cmd_prefix: list[str] | None = None, pass_fds: tuple[int, ...] = ()) -> Daemon:
        if self.notify is not None:
            self.notify.close()
            self.notify_path.unlink(missing_ok=True)
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(str(self.notify_path))
        self.messages = []
        full_env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("ZCOR_", "LISTEN_", "WATCHDOG_", "NOTIFY_"))}
        full_env["NOTIFY_SOCKET"] = str(self.notify_path)
        # every answer held to its result model (zcord.transport.conform): a difference fails
        # the request (ZCOR_TEST_CHECK_RESULTS=/some/file lists them there instead)
        full_env["ZCOR_CHECK_RESULTS"] = os.environ.get("ZCOR_TEST_CHECK_RESULTS", "1")
        full_env.update(env or {})
        cmd = (cmd_prefix or []) + DAEMON_CMD + (args if args is not None else
                                                 ["--memory-dir", str(self.memdir), "--socket", str(self.sock)])
        with open(self.stderr_path, "ab") as log:  # the child keeps its own copy of the fd
            self.proc = subprocess.Popen(cmd, env=full_env, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=log, pass_fds=pass_fds)
        if wait:
            self.wait_for("READY=1")
        return self

    def wait_for(self, token: str, timeout: float = READY_TIMEOUT) -> list[str]:
        """Collect notify datagrams until one carries `token`; fail if the process exits first."""
        assert self.notify is not None and self.proc is not None
        deadline = time.monotonic() + timeout
        while True:
            if any(token in m.split("\n") for m in self.messages):
                return self.messages
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no {token} within {timeout}s; stderr:\n{self.stderr()}")
            self.notify.settimeout(min(remaining, 0.2))
            try:
                self.messages.append(self.notify.recv(4096).decode())
                continue
            except TimeoutError:
                pass
            if self.proc.poll() is not None:
                # drain what it sent before exiting
                self.notify.settimeout(0)
                try:
                    while True:
                        self.messages.append(self.notify.recv(4096).decode())
                except (TimeoutError, BlockingIOError):
                    pass
                if any(token in m.split("\n") for m in self.messages):
                    return self.messages
                raise AssertionError(f"zcord exited with {self.proc.returncode} before {token}; "
                                     f"stderr:\n{self.stderr()}")

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def cleanup(self) -> None:
        self.kill()
        if self.notify is not None:
            self.notify.close()

    # -- clients --------------------------------------------------------------------------

    def client(self, role: str = "bot", **kw) -> Client:
        return Client(self.sock, role=role, timeout=kw.pop("timeout", 30), **kw).connect()

    async def aclient(self, role: str = "bot", **kw) -> AsyncClient:
        return await AsyncClient(self.sock, role=role, timeout=kw.pop("timeout", 30), **kw).connect()

    def zcor(self, *args: str, input: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        """Run the zcor CLI against this daemon."""
        return subprocess.run(ZCOR_CMD + list(args) + ["--socket", str(self.sock)], input=input,
                              capture_output=True, text=True, timeout=timeout)


class Factory:
    def __init__(self) -> None:
        self.roots: list[Path] = []
        self.daemons: list[Daemon] = []

    def root(self) -> Path:
        root = Path(tempfile.mkdtemp(dir="/tmp", prefix="zc"))
        self.roots.append(root)
        return root

    def __call__(self, root: Path | None = None, **kw) -> Daemon:
        d = Daemon(root or self.root(), **kw)
        self.daemons.append(d)
        return d

    def cleanup(self) -> list[str]:
        """Stop everything; returns daemon stderr excerpts that show a crash inside zcord."""
        problems = []
        for d in self.daemons:
            d.cleanup()
            text = d.stderr()
            if any(marker in text for marker in CRASH_MARKERS):
                problems.append(text[-3000:])
        for r in self.roots:
            shutil.rmtree(r, ignore_errors=True)
        return problems


@pytest.fixture
def make_daemon():
    """Build daemons (not yet started); every one is killed and its files removed afterwards."""
    f = Factory()
    yield f
    problems = f.cleanup()
    assert not problems, "zcord logged a crash:\n" + "\n---\n".join(problems)


@pytest.fixture(scope="module")
def shared_daemon():
    """One running daemon for tests that only add to the Memory (saves start-ups)."""
    f = Factory()
    d = f().start()
    yield d
    problems = f.cleanup()
    assert not problems, "zcord logged a crash:\n" + "\n---\n".join(problems)


@pytest.fixture
def daemon(make_daemon) -> Daemon:
    """A running daemon on a fresh Memory directory."""
    return make_daemon().start()
