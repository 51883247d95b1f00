"""`zcor-tui [--socket PATH] [--with-daemon] [--memory-dir DIR]`.

With --with-daemon, when nothing answers on the socket, a zcord is started on the Memory
directory (default: zcord's default) and socket, the app runs once it answers a ping, and
that zcord is stopped (SIGTERM) when the app exits. A zcord that already answers is used
as it is and left running.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from zcord.client import AsyncClient, Client, ClientError
from zcord.client import SYSTEM_SOCKET, client_socket, default_socket, memory_dir

DAEMON_CODE = "import sys; from zcord.cli import daemon_main; sys.exit(daemon_main())"
START_DEADLINE = 30.0
STOP_DEADLINE = 35.0


class LaunchError(Exception):
    """zcord could not be started (the message says why, with its log)."""


def answers(sock: Path, timeout: float = 2.0) -> bool:
    """Whether a zcord answers a ping on the socket."""
    try:
        with Client(sock, role="operator", timeout=timeout, connect_timeout=timeout,
                    client_name="zcor-tui-launcher") as c:
            c.ping()
        return True
    except (ClientError, OSError):
        return False


def serving_dir(sock: Path) -> str | None:
    """The Memory directory of the zcord on the socket (None if it cannot be asked)."""
    try:
        with Client(sock, role="operator", timeout=5, client_name="zcor-tui-launcher") as c:
            return c.status().get("memoryDir")
    except (ClientError, OSError):
        return None


@contextmanager
def running_daemon(memdir: Path, sock: Path, *, deadline: float = START_DEADLINE) -> Iterator[subprocess.Popen]:
    """Start zcord, wait until it answers a ping, yield its process, SIGTERM it afterwards."""
    log = tempfile.NamedTemporaryFile(prefix="zcord-", suffix=".log", delete=False)
    cmd = [sys.executable, "-c", DAEMON_CODE, "--memory-dir", str(memdir), "--socket", str(sock)]
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID")}
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                            start_new_session=True)  # the terminal's Ctrl-C belongs to the TUI
    log.close()
    clean = False
    try:
        end = time.monotonic() + deadline
        pause = 0.02
        while not answers(sock, timeout=1.0):
            if proc.poll() is not None:
                raise LaunchError(f"zcord exited with code {proc.returncode}:\n{_tail(log.name)}")
            if time.monotonic() > end:
                raise LaunchError(f"zcord did not answer on {sock} within {deadline:g}s; its log: {log.name}")
            time.sleep(pause)
            pause = min(pause * 2, 0.5)
        yield proc
        clean = True
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_DEADLINE)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if clean and proc.returncode == 0:
            os.unlink(log.name)
        elif proc.returncode not in (0, None):
            print(f"zcor-tui: zcord exited with code {proc.returncode}; its log: {log.name}", file=sys.stderr)


def _tail(path: str, lines: int = 20) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def run_app(sock: Path) -> int:
    from .app import ZcorApp

    app = ZcorApp(AsyncClient(sock, role="operator", max_backoff=2.0, client_name="zcor-tui"))
    app.run()
    return app.return_code or 0


TUI_MISSING = ("zcor-tui: the operator TUI needs the `tui` extra (Textual), which is not installed "
               "in this Python environment ({python}).\n"
               "Install it with:  {python} -m pip install 'zcor[tui]'\n"
               "  (from a wheel:  {python} -m pip install 'zcor-{version}-py3-none-any.whl[tui]')")


def installed_version() -> str:
    try:
        return importlib.metadata.version("zcor")
    except importlib.metadata.PackageNotFoundError:
        return "VERSION"


def textual_missing() -> bool:
    return importlib.util.find_spec("textual") is None


def main(argv: list[str] | None = None, *, run: Callable[[Path], int] = run_app) -> int:
    if textual_missing():
        print(TUI_MISSING.format(python=sys.executable, version=installed_version()), file=sys.stderr)
        return 1
    parser = argparse.ArgumentParser(prog="zcor-tui", description="The zcor operator TUI.")
    parser.add_argument("--socket", metavar="PATH",
                        help="zcord's socket (default: $ZCOR_SOCKET, else zcord's default)")
    parser.add_argument("--with-daemon", action="store_true",
                        help="start zcord if nothing answers on the socket, and stop it on exit")
    parser.add_argument("--memory-dir", metavar="DIR",
                        help="with --with-daemon: the Memory directory for the started zcord")
    args = parser.parse_args(argv)
    if args.memory_dir and not args.with_daemon:
        parser.error("--memory-dir only applies with --with-daemon (a running zcord owns its directory)")
    sock = client_socket(args.socket)
    if not args.with_daemon:
        return run(sock)
    if answers(sock):
        other = serving_dir(sock)
        if args.memory_dir and other and Path(other) != Path(args.memory_dir).absolute():
            print(f"zcor-tui: a zcord on {sock} already serves {other}, not {args.memory_dir}; stop it or "
                  f"use another --socket", file=sys.stderr)
            return 2
        return run(sock)
    if sock == SYSTEM_SOCKET and not args.socket and not os.environ.get("ZCOR_SOCKET"):
        sock = default_socket()  # the system service's socket is not ours to take over
    memdir = memory_dir(args.memory_dir)
    print(f"zcor-tui: starting zcord on {memdir} ({sock})…", file=sys.stderr)
    try:
        with running_daemon(memdir, sock):
            return run(sock)
    except LaunchError as e:
        print(f"zcor-tui: {e}", file=sys.stderr)
        return 1
