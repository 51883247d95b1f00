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
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from zcord.client import (
    SYSTEM_SOCKET,
    AsyncClient,
    Client,
    ClientError,
    client_socket,
    default_socket,
    memory_dir,
)

DAEMON_CODE = "import sys; from zcord.cli import daemon_main; sys.exit(daemon_main())"
START_DEADLINE = 30.0
STOP_DEADLINE = 35.0
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C


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
def running_daemon(memdir: Path, sock: Path, *, deadline: float = START_DEADLINE) -> Iterator[subprocess.Popen[bytes]]:
    """Start zcord, wait until it answers a ping, yield its process, SIGTERM it afterwards.

    Its log (a temporary file) is removed unless a message points to it: when zcord did
    not answer in time, or stopped with an error while the app ran, or exited at start
    with more log than the LaunchError shows."""
    cmd = [sys.executable, "-c", DAEMON_CODE, "--memory-dir", str(memdir), "--socket", str(sock)]
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID")}
    log: Any = None
    proc: subprocess.Popen[bytes] | None = None
    ran = keep_log = False
    try:
        with _deferred_interrupts():  # a Ctrl-C in between would leave a log or a zcord nobody knows of
            log = tempfile.NamedTemporaryFile(prefix="zcord-", suffix=".log", delete=False)
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                    start_new_session=True)  # the terminal's Ctrl-C belongs to the TUI
        log.close()
        end = time.monotonic() + deadline
        pause = 0.02
        while not answers(sock, timeout=1.0):
            if proc.poll() is not None:
                tail, whole = _tail(log.name)
                keep_log = not whole
                raise LaunchError(f"zcord exited with code {proc.returncode}"
                                  + (f":\n{tail}" if tail else " and wrote nothing")
                                  + ("" if whole else f"\n(its whole log: {log.name})"))
            if time.monotonic() > end:
                keep_log = True
                raise LaunchError(f"zcord did not answer on {sock} within {deadline:g}s; its log: {log.name}")
            time.sleep(pause)
            pause = min(pause * 2, 0.5)
        ran = True
        yield proc
    finally:
        with _deferred_interrupts():  # a second Ctrl-C must not leave zcord running or its log behind
            if proc is not None and log is not None:
                keep_log = _stop(proc, log.name, ran) or keep_log
            if log is not None:
                log.close()
                if not keep_log:
                    try:
                        os.unlink(log.name)
                    except OSError:
                        pass


def _stop(proc: subprocess.Popen[bytes], log: str, ran: bool) -> bool:
    """SIGTERM zcord if it still runs; once the app has run, an error exit (then or before)
    is reported with the log. True when a message named the log."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_DEADLINE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if ran and proc.returncode != 0:
        print(f"zcor-tui: zcord exited with code {proc.returncode}; its log: {log}", file=sys.stderr)
        return True
    return False


@contextmanager
def _deferred_interrupts() -> Iterator[None]:
    """A SIGINT meanwhile is raised as KeyboardInterrupt at the end of the block, not inside
    it (in the main thread; elsewhere signals cannot be set and none arrive)."""
    caught: list[int] = []
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    except ValueError:
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught:
            raise KeyboardInterrupt


def _tail(path: str, lines: int = 20) -> tuple[str, bool]:
    """The log's last lines, and whether they are all of it."""
    try:
        every = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return "", False
    return "\n".join(every[-lines:]), len(every) <= lines


def run_app(sock: Path) -> int:
    from .app import ZcorApp

    app = ZcorApp(AsyncClient(sock, role="operator", max_backoff=2.0, client_name="zcor-tui"))
    app.run()
    return app.return_code or 0


TUI_MISSING = ("zcor-tui: the operator TUI needs the `tui` extra (Textual), which is not installed "
               "in this Python environment ({python}).\n"
               "Install it with:  {command}\n"
               "  (zcor is not on a package index: the extra comes from the checkout or wheel zcor was "
               "installed from{where})")


def install_hint(python: str = sys.executable) -> str:
    """TUI_MISSING filled in with a command that works here: pip given the checkout or wheel
    this zcor was installed from (pip records it), else Textual itself at zcor's pin."""
    source, pin = None, "textual"
    try:
        dist = importlib.metadata.distribution("zcor")
        origin = json.loads(dist.read_text("direct_url.json") or "{}").get("url", "")
        if origin.startswith("file://"):
            path = urllib.parse.unquote(urllib.parse.urlsplit(origin).path)
            if os.path.exists(path):
                source = path
        pin = next((r.split(";")[0].strip() for r in dist.requires or () if "extra == \"tui\"" in r
                    and r.startswith("textual")), pin)
    except (importlib.metadata.PackageNotFoundError, ValueError, OSError):
        pass
    if source:
        command = f"{python} -m pip install {shlex.quote(source + '[tui]')}"
        where = f": {source}"
    else:
        command = f"{python} -m pip install {shlex.quote(pin)}"
        where = "; without either, Textual alone at zcor's pinned version does"
    return TUI_MISSING.format(python=python, command=command, where=where)


def textual_missing() -> bool:
    return importlib.util.find_spec("textual") is None


def main(argv: list[str] | None = None, *, run: Callable[[Path], int] = run_app) -> int:
    try:
        return _main(argv, run)
    except KeyboardInterrupt:  # before a zcord was started (e.g. while asking the socket)
        print("zcor-tui: interrupted.", file=sys.stderr)
        return EXIT_INTERRUPTED


def _main(argv: list[str] | None, run: Callable[[Path], int]) -> int:
    if textual_missing():
        print(install_hint(), file=sys.stderr)
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
    started = False
    try:
        print(f"zcor-tui: starting zcord on {memdir} ({sock})…", file=sys.stderr)
        with running_daemon(memdir, sock):
            started = True
            return run(sock)
    except LaunchError as e:
        print(f"zcor-tui: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"zcor-tui: interrupted{'' if started else ' while zcord was starting'}; zcord is stopped.",
              file=sys.stderr)
        return EXIT_INTERRUPTED
