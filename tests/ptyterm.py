"""A program on a pseudo-terminal, as a person at a keyboard would run it: keys in (Ctrl-C
reaches it as SIGINT through the terminal), everything it writes out."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import termios
import time
from pathlib import Path

LEFT, RIGHT, UP, DOWN = b"\x1b[D", b"\x1b[C", b"\x1b[A", b"\x1b[B"
CTRL_C, CTRL_D = b"\x03", b"\x04"


class Terminal:
    """`argv` run on a new pty of 80×24, in its own session with the pty as its terminal."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str | None = None):
        pid, fd = pty.fork()
        if pid == 0:  # the child: exec at once (no Python code of the test runs here)
            try:
                if cwd:
                    os.chdir(cwd)
                os.execvpe(argv[0], argv, env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        self.output = b""
        self.status: int | None = None

    def send(self, data: bytes) -> None:
        os.write(self.fd, data)

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            return False
        if not chunk:
            return False
        self.output += chunk
        return True

    def expect(self, token: bytes, timeout: float = 30.0, start: int = 0) -> int:
        """Read until `token` appears in the output after `start`; returns the end of it."""
        deadline = time.monotonic() + timeout
        while (at := self.output.find(token, start)) < 0:
            left = deadline - time.monotonic()
            open_ = self._read(min(max(left, 0), 0.2))
            if (left <= 0 or not open_) and self.output.find(token, start) < 0:
                raise AssertionError(f"{token!r} did not appear; the terminal shows:\n"
                                     f"{self.output.decode(errors='replace')}")
        return at + len(token)

    def until_waiting(self, timeout: float = 30.0) -> None:
        """Wait until the program's main thread sleeps (blocked reading the terminal, once its
        prompt is out). A key sent before that can fall into the gap between readline's
        prompt and its select(), where CPython only sees a signal at the next key."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                return  # no /proc: nothing to wait on
            if state == "S":
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the program never waited for input (state {state})")
            self._read(0.01)

    def poll(self) -> int | None:
        if self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
        return self.status

    def wait(self, timeout: float = 30.0) -> int:
        """The exit code (negative: killed by that signal), reading output meanwhile."""
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                self.close()
                raise AssertionError("still running; the terminal shows:\n" + self.output.decode(errors="replace"))
            self._read(0.05)
        while self._read(0.05) and select.select([self.fd], [], [], 0)[0]:
            pass
        return self.status  # type: ignore[return-value]

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", errors="replace")

    def close(self) -> None:
        if self.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
            self.status = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        try:
            os.close(self.fd)
        except OSError:
            pass
