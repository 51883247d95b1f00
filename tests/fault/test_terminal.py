"""Terminal takeover through zcor's output (issue 23.6): a memory written by the bot carries
OSC 2 (window title), OSC 52 (clipboard), CSI 2J (wipe) and U+202E; `zcor prefix`,
`zcor context`, `zcor recall --context`, `zcor chat`'s /prefix and /recall print it. None of
those bytes may reach the terminal: the text is shown with the controls marked (`␛`,
`\\u202e`), and `--json`-style output stays the same JSON value."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.integration.conftest import ZCOR_CMD
from zcord.client import UNSAFE, json_shown, shown

pytestmark = pytest.mark.fault

ATTACK = ("\x1b]2;PWNED-TITLE\x07\x1b]52;c;Y3VybCBldmlsLnNofHNo\x07\x1b[2J\u202eevil\u2066x\u2069"
          "\x9b31m\x90q\x9c\x7f\rback")
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""What must not reach a terminal (new line and tab may: the output is plain text)."""


def run(*args: str, sock, input: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZCOR_")}
    done = subprocess.run(ZCOR_CMD + list(args) + ["--socket", str(sock)], input=input, capture_output=True,
                          timeout=60, env=env)
    for stream in (done.stdout, done.stderr):
        text = stream.decode("utf-8")  # also: the output is valid UTF-8
        assert not RAW.search(text), f"zcor {args[0]}: raw control {RAW.search(text).group()!r} in the output"
    return done


@pytest.fixture
def attacked(make_daemon):
    """A daemon whose Memory the bot filled with the attack: an important memory, a relationship."""
    d = make_daemon().start()
    with d.client("bot") as bot:
        node = bot.call_tool("zcor_memory_write", {"title": f"奶茶 {ATTACK}", "content": f"三分糖 {ATTACK}",
                                                   "keywords": ["奶茶"]})
        bot.call_tool("zcor_memory_important", {"id": node["id"], "important": True})
    return d, node


def test_prefix_context_and_recall_mark_the_controls(attacked):
    d, node = attacked
    out = run("prefix", sock=d.sock)
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode()
    assert "奶茶 ␛]2;PWNED-TITLE␇␛]52;c;Y3VybCBldmlsLnNofHNo␇␛[2J\\u202eevil" in text
    # the fence already shows C1 controls as {U+009B} and a CR as a line break of the title (⏎)
    assert "{U+009B}31m" in text and "␡⏎back" in text

    out = run("recall", "console", "今天想喝奶茶", "--context", sock=d.sock)
    assert out.returncode == 0 and node["id"] in out.stdout.decode()
    assert "三分糖 ␛]2;PWNED-TITLE␇" in out.stdout.decode()
    out = run("context", "console", sock=d.sock)
    assert out.returncode == 0 and "三分糖 ␛]2;PWNED-TITLE␇" in out.stdout.decode()


def test_json_output_keeps_the_value_and_escapes_every_control(attacked):
    d, node = attacked
    out = run("call", "zcor_memory_read", json.dumps({"id": node["id"]}), sock=d.sock)
    assert out.returncode == 0
    assert json.loads(out.stdout)["title"] == f"奶茶 {ATTACK}"  # the same value, escaped in JSON
    assert "\\u202e" in out.stdout.decode() and "\\u009b" in out.stdout.decode()


def test_an_error_quoting_memory_text_is_marked_too(attacked):
    d, node = attacked
    out = run("call", "zcor_memory_write", json.dumps({"id": node["id"], "title": "x", "content": "y",
                                                       "parentId": f"m404{ATTACK}"}), sock=d.sock)
    assert out.returncode == 1 and b"m404" in out.stderr


def test_zcor_chat_prefix_and_recall(attacked):
    d, _ = attacked
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZCOR_")}
    subprocess.run(ZCOR_CMD + ["recall", "console", "奶茶", "--socket", str(d.sock)], capture_output=True,
                   timeout=60, env=env)
    proc = subprocess.run([sys.executable, "-m", "zcord.cli", "chat", "--socket", str(d.sock)],
                          input=b"/prefix\n/recall\n/quit\n", capture_output=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout.decode()
    assert not RAW.search(text), f"raw control {RAW.search(text).group()!r} in zcor chat's output"
    assert text.count("奶茶 ␛]2;PWNED-TITLE␇") >= 1


def test_the_shared_rule():
    assert shown("a\x1b[2Jb\nc\td\u202e") == "a␛[2Jb\nc\td\\u202e"
    assert shown("a\nb\tc", lines=False) == "a␊b␉c"
    assert shown(None) == "" and shown(shown(ATTACK)) == shown(ATTACK)  # marking twice changes nothing
    assert not UNSAFE.search(shown(ATTACK, lines=False))
    dumped = json.dumps({"t": ATTACK}, ensure_ascii=False)
    assert json.loads(json_shown(dumped)) == {"t": ATTACK} and not RAW.search(json_shown(dumped))


def test_opening_zcor_tui_in_a_terminal(attacked):
    """The real app in a pseudo-terminal: what it writes to the terminal holds none of the attack."""
    import pty
    import select
    import time

    d, node = attacked
    pid, fd = pty.fork()
    if pid == 0:  # the child: zcor-tui on the attacked daemon
        os.environ.update(TERM="xterm-256color", COLUMNS="120", LINES="40")
        os.execv(sys.executable, [sys.executable, "-c", "import sys; from zcor_tui.launcher import main; "
                                  "sys.exit(main())", "--socket", str(d.sock)])
    import fcntl
    import struct
    import termios

    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    seen = b""
    deadline = time.monotonic() + 30
    quit_sent = False
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break  # the app exited
                if not chunk:
                    break
                seen += chunk
            if not quit_sent and "三分糖".encode() in seen:  # the detail pane is drawn
                time.sleep(0.5)
                os.write(fd, b"q")
                quit_sent = True
    finally:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
        os.close(fd)
    assert quit_sent, "zcor-tui never drew the memory:\n" + seen.decode(errors="replace")[-2000:]
    assert "␛]2;PWNED-TITLE␇".encode() in seen  # shown, marked
    for bad in (b"\x1b]2;PWNED", b"\x1b]52;c;Y3Vy", "\u202e".encode(), "\u2066".encode(), b"\xc2\x9b", b"\xc2\x90"):
        assert bad not in seen, f"{bad!r} reached the terminal"
