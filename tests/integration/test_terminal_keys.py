"""Keys at a real terminal (a pty): Ctrl-C in `zcor chat` and in `zcor-tui --with-daemon`
while zcord starts, and `zcor chat`'s line editing and history."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from tests.fakellm import FakeLLM, openai_text
from tests.ptyterm import CTRL_C, CTRL_D, LEFT, UP, Terminal

REPO = Path(__file__).resolve().parents[2]
CHAT = [sys.executable, "-m", "zcord.cli", "chat"]
LAUNCHER = [sys.executable, "-c", "import sys; from zcor_tui.launcher import main; sys.exit(main())"]


def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZCOR_", "NOTIFY_", "LISTEN_"))}
    env.update(TERM="xterm", LANG="C.UTF-8", XDG_STATE_HOME=str(tmp / "state"), TMPDIR=str(tmp / "tmp"),
               PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    (tmp / "tmp").mkdir(exist_ok=True)
    env.update(extra)
    return env


@pytest.fixture
def short_tmp():
    """A short /tmp directory (socket paths must stay under 108 bytes)."""
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="zk"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def chat(daemon, tmp: Path, *args: str, **env: str) -> Terminal:
    term = Terminal(CHAT + ["--socket", str(daemon.sock), *args], clean_env(tmp, **env))
    term.expect(b"/help for commands.")
    return term


def test_ctrl_c_at_the_chat_prompt_leaves_without_a_traceback(daemon, tmp_path):
    term = chat(daemon, tmp_path)
    try:
        term.expect(b"> ")
        term.until_waiting()
        term.send(CTRL_C)
        assert term.wait() == 130
        assert "Traceback" not in term.text and "KeyboardInterrupt" not in term.text
        assert term.text.count("interrupted") == 1 and "zcor chat: interrupted (Ctrl-C); bye." in term.text
    finally:
        term.close()


def test_ctrl_c_while_the_provider_is_slow(daemon, tmp_path):
    release = threading.Event()
    with FakeLLM() as llm:
        llm.script.append(("wait", release, openai_text("太晚了")))
        with daemon.client("operator") as op:
            op.config_set({"llm": {"protocol": "openai", "baseUrl": llm.url, "model": "scripted",
                                   "timeoutSeconds": 30}})
        term = chat(daemon, tmp_path, ZCOR_LLM_API_KEY="sk-chat")
        try:
            term.expect(b"> ")
            term.send("你好\r".encode())
            assert llm.arrived.wait(30), term.text
            term.until_waiting()
            term.send(CTRL_C)
            assert term.wait() == 130
            assert "Traceback" not in term.text and "KeyboardInterrupt" not in term.text
            assert term.text.count("interrupted") == 1
            assert "the reply that was coming is dropped" in term.text
        finally:
            release.set()
            term.close()


def test_chat_line_editing_and_history(daemon, tmp_path):
    term = chat(daemon, tmp_path)
    try:
        at = term.expect(b"> ")
        # "/tols", two steps left, "o": the line is "/tools" (without readline it would be
        # "/tols^[[D^[[Do", sent as a message, and no tool list would follow)
        term.send(b"/tols" + LEFT + LEFT + b"o\r")
        at = term.expect(b"zcor_memory_write:", start=at)
        at = term.expect(b"> ", start=at)
        term.send(UP + b"\r")  # the previous line again
        at = term.expect(b"zcor_memory_write:", start=at)
        term.expect(b"> ", start=at)  # reading again (an early Ctrl-D would meet the tty's cooked mode)
        assert "^[[" not in term.text
        term.send(CTRL_D)
        assert term.wait() == 0
    finally:
        term.close()
    history = tmp_path / "state" / "zcor" / "chat_history"
    assert "/tools" in history.read_text().splitlines()
    assert history.stat().st_mode & 0o077 == 0

    term = chat(daemon, tmp_path)  # the next run recalls it
    try:
        at = term.expect(b"> ")
        term.send(UP + b"\r")
        at = term.expect(b"zcor_memory_write:", start=at)
        term.expect(b"> ", start=at)
        term.send(b"/quit\r")
        assert term.wait() == 0
    finally:
        term.close()

    term = chat(daemon, tmp_path, "--no-history-file")  # keeps its lines to itself
    try:
        at = term.expect(b"> ")
        term.send(b"/prefix\r")
        term.expect(b"external_event_frame", start=at)
        term.send(b"/quit\r")
        assert term.wait() == 0
    finally:
        term.close()
    assert "/prefix" not in history.read_text()


def test_chat_reads_plain_lines_where_readline_is_missing(daemon, tmp_path):
    blocker = tmp_path / "noreadline"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['readline'] = None\n")
    env = clean_env(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join([str(blocker), env["PYTHONPATH"]])
    term = Terminal(CHAT + ["--socket", str(daemon.sock)], env)
    try:
        at = term.expect(b"> ")
        term.send(b"/tools\r")
        term.expect(b"zcor_memory_write:", start=at)
        term.send(b"/quit\r")
        assert term.wait() == 0 and "Traceback" not in term.text
    finally:
        term.close()
    assert not (tmp_path / "state" / "zcor" / "chat_history").exists()


SLOW_START = """import os, sys, time
if '--memory-dir' in sys.argv and '--with-daemon' not in sys.argv:
    time.sleep(60)  # this zcord is still "starting" when the test presses Ctrl-C
"""


def test_ctrl_c_while_zcord_starts_stops_it_and_leaves_no_log(short_tmp):
    slow = short_tmp / "slow"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(SLOW_START)
    env = clean_env(short_tmp)
    env["PYTHONPATH"] = os.pathsep.join([str(slow), env["PYTHONPATH"]])
    sock = short_tmp / "run" / "zcord.sock"
    term = Terminal(LAUNCHER + ["--with-daemon", "--socket", str(sock), "--memory-dir", str(short_tmp / "mem")], env)
    try:
        term.expect(b"starting zcord")
        term.send(CTRL_C)
        assert term.wait() == 130
    finally:
        term.close()
    assert "Traceback" not in term.text and "KeyboardInterrupt" not in term.text
    assert term.text.count("interrupted") == 1 and "while zcord was starting" in term.text
    assert list((short_tmp / "tmp").iterdir()) == []  # no zcord-*.log left behind
    assert not [pid for pid in running_with(str(sock))], "the starting zcord was not stopped"


def running_with(word: str) -> list[str]:
    """Processes whose command line holds `word`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and word.encode() in (entry / "cmdline").read_bytes():
                found.append(entry.name)
        except OSError:
            pass
    return found


def test_a_failed_start_is_told_once_and_leaves_no_log(short_tmp):
    (short_tmp / "mem").mkdir()
    (short_tmp / "mem" / "memory-state.json").write_text("{not json")
    env = clean_env(short_tmp)
    out = subprocess.run(LAUNCHER + ["--with-daemon", "--socket", str(short_tmp / "s.sock"),
                                     "--memory-dir", str(short_tmp / "mem")],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 1
    assert out.stderr.count("zcord exited with code 1") == 1, out.stderr
    assert "memory-state.json" in out.stderr  # the log's words are shown
    assert list((short_tmp / "tmp").iterdir()) == []


def test_keys_typed_at_once_after_esc_reach_what_esc_made_current(daemon, short_tmp):
    """Issue 35: Esc and the next key in one read (a fast typist, a paste, a macro) are Esc,
    then that key: from History's keyword field, where `q` is text, `Esc q` quits, the first
    time (Textual reads ESC q as Alt+q, which nothing binds)."""
    env = clean_env(short_tmp)
    term = Terminal([sys.executable, "-c", "import sys; from zcor_tui.launcher import main; sys.exit(main())",
                     "--socket", str(daemon.sock)], env)
    try:
        at = term.expect(b"connected")
        term.send(b"3")
        term.expect(b"changes", start=at)  # History, its keyword field focused
        term.until_waiting()
        term.send(b"\x1bq")
        assert term.wait(20) == 0, term.text
    finally:
        term.close()
