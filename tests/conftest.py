"""Shared fixtures: a Service on a fresh Memory directory, with a clock tests can steer."""

from __future__ import annotations

import errno
import os
import re
import stat
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from zcord.service import Service

TZ = timezone(timedelta(hours=8))


class FakeClock:
    """Each reading moves one second forward unless frozen; set() jumps anywhere (even back)."""

    def __init__(self, start: datetime = datetime(2026, 1, 1, 9, 0, tzinfo=TZ)):
        self.t = start
        self.step = timedelta(seconds=1)

    def __call__(self) -> datetime:
        t = self.t
        self.t = self.t + self.step
        return t

    def set(self, t: datetime) -> None:
        self.t = t


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def memdir(tmp_path):
    """A Memory directory that does not exist yet (zcord creates it)."""
    return tmp_path / "memory"


@pytest.fixture
def svc(memdir, clock):
    """An open Service on a fresh Memory directory; closed (lock released) after the test."""
    s = Service(memdir, clock=clock).open()
    yield s
    s.close()


class Caller:
    """Shorthand: svc.call with actor operator, returning the result dict."""

    def __init__(self, svc: Service):
        self.svc = svc

    def __getattr__(self, short: str):
        name = short if short.startswith("zcor_") else (
            f"zcor_{short}" if short.startswith(("relationship_", "synonyms_")) else f"zcor_memory_{short}")
        return lambda **params: self.svc.call(name, params)


@pytest.fixture
def t(svc) -> Caller:
    """Call tools as t.write(title=..., content=...), t.relationship_read(personId=...)."""
    return Caller(svc)


# -- fsync, off where durability is not what a test is about ---------------------------------


def _no_fsync(fd: int) -> None:
    """os.fsync that checks its argument is an open descriptor and syncs nothing."""
    os.fstat(fd)


@pytest.fixture
def fast_fsync(monkeypatch):
    """os.fsync made a no-op for this test (the unit and TUI suites use it, autouse): fsync
    was most of a unit test's set-up time. zcord's durable writes all go through os.fsync
    (zcord.core.fsutil's atomic_write and fsync_dir, the journal and the operation log), so
    this one patch covers them; a test that fails or counts fsyncs patches over it as before.
    The fault and durability suites, and every daemon subprocess, keep the real fsync."""
    monkeypatch.setattr(os, "fsync", _no_fsync)


# -- jieba's process-wide dictionary --------------------------------------------------------


class JiebaWords:
    """Undo log for jieba's process-wide dictionary: every word added during one test.

    jieba keeps one dictionary per process and zcor teaches it synonym terms and node
    keywords as user words (zcord.core.text.add_user_words). Without an undo, what one test
    taught changes how the next one segments text, so results would depend on test order.
    """

    _MISSING = object()

    def __init__(self, monkeypatch):
        import jieba

        import zcord.core.text as text

        self._text = text
        self._undo: list[tuple] = []
        self._user_words = set(text.analyzer.user_words)
        real = jieba.Tokenizer.add_word
        undo = self._undo
        missing = self._MISSING

        def add_word(tok, word, freq=None, tag=None):
            old = tok.FREQ.get(word, missing)
            fresh = [word[:n] for n in range(1, len(word)) if word[:n] not in tok.FREQ]
            total = tok.total
            real(tok, word, freq, tag)
            undo.append((tok, word, old, fresh, total, tag))

        monkeypatch.setattr(jieba.Tokenizer, "add_word", add_word)

    def __call__(self, *words: str) -> None:
        """Teach jieba these words for this test only (as zcor teaches its user words)."""
        self._text.add_user_words(words)

    def restore(self) -> None:
        for tok, word, old, fresh, total, tag in reversed(self._undo):
            if old is self._MISSING:
                tok.FREQ.pop(word, None)
            else:
                tok.FREQ[word] = old
            for frag in fresh:
                tok.FREQ.pop(frag, None)
            tok.total = total
            if tag:
                tok.user_word_tag_tab.pop(word, None)
        self._undo.clear()
        self._text.analyzer.user_words.intersection_update(self._user_words)
        for word in set(self._text.analyzer.corpus_freq) - self._user_words:
            del self._text.analyzer.corpus_freq[word]
        self._text.analyzer.lone.clear()  # head characters found with the forgotten words
        self._text.analyse_cached.cache_clear()  # cuts made with the forgotten words


@pytest.fixture
def jieba_words(monkeypatch):
    """jieba's dictionary for one test: words the test (or the code under test) teaches
    are forgotten afterwards. Call jieba_words("小明", ...) to teach words a test needs."""
    words = JiebaWords(monkeypatch)
    yield words
    words.restore()


# -- a disk that refuses writes, below atomic_write -------------------------------------------


_TMP_NAME = re.compile(r"^\.(.+)\.\d+\.[0-9a-f]+\.tmp$")


class FailingDisk:
    """Make writes into one directory fail at the system calls zcord.core.fsutil.atomic_write
    makes (os.write, os.fsync, os.replace), so the real atomic write is exercised and a
    write that bypasses it (e.g. one that rewrites the file in place) is caught.

    The operation log (operations.jsonl) and the lock file are left alone; `only` narrows
    the failure further to files whose target name it accepts (a temporary file of the
    atomic write counts as the file it replaces).
    """

    ERRORS = {"write": (errno.ENOSPC, "No space left on device"),
              "fsync": (errno.EIO, "Input/output error"),
              "replace": (errno.ENOSPC, "No space left on device")}
    SPARED = {"zcord.lock"}

    def __init__(self, monkeypatch, root: Path):
        self.monkeypatch = monkeypatch
        self.root = Path(root).resolve()
        self.at: str | None = None
        self.only = None
        self.failures = 0
        real = {name: getattr(os, name) for name in ("write", "fsync", "replace")}

        def failing(name):
            def call(*args, **kwargs):
                if self.at == name and self._hits(args):
                    self.failures += 1
                    raise OSError(*self.ERRORS[name])
                return real[name](*args, **kwargs)
            return call

        for name in real:
            monkeypatch.setattr(os, name, failing(name))

    def _hits(self, args) -> bool:
        if self.at == "replace":
            path = Path(os.fspath(args[1])).resolve()
        else:
            try:
                path = Path(os.readlink(f"/proc/self/fd/{args[0]}"))
            except OSError:
                return False
            if not stat.S_ISREG(os.fstat(args[0]).st_mode):
                return False
        if self.root not in path.parents:
            return False
        m = _TMP_NAME.match(path.name)
        target = path.with_name(m.group(1)) if m else path
        if target.name in self.SPARED:
            return False
        return self.only is None or self.only(target)

    def on(self, at: str = "write", only=None) -> None:
        """Fail every matching os.write (ENOSPC), os.fsync (EIO) or os.replace (ENOSPC)."""
        assert at in self.ERRORS
        self.at, self.only = at, only

    def off(self) -> None:
        self.at = self.only = None


@pytest.fixture
def failing_disk(monkeypatch, memdir):
    """A FailingDisk for the test's Memory directory (off until on() is called)."""
    disk = FailingDisk(monkeypatch, memdir)
    yield disk
    disk.off()


_SHARED_SCOPES = {"module", "package", "session"}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the marks
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (`make test` runs `-n 2 --dist loadgroup`), a test that uses a
    module-scoped fixture it asked for (one daemon for the module's snapshots, the built
    wheel and venvs, the fuzz suite's Memory) runs on the same worker as the rest of its
    module: the fixture is built once, not once per worker. Everything else is spread freely."""
    if not config.pluginmanager.has_plugin("xdist"):
        return
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        for defs in info.name2fixturedefs.values():
            fixture = defs[-1]
            if fixture.scope in _SHARED_SCOPES and not getattr(fixture, "_autouse", False):
                item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
                break


def _seed_line(config) -> str | None:
    seed = getattr(config.option, "randomly_seed", None)
    if seed is None or not config.pluginmanager.has_plugin("randomly"):
        return None
    return (f"tests ran in random order: replay it with --randomly-seed={seed} "
            f"(or keep file order with -p no:randomly)")


def pytest_sessionstart(session):
    """Print the seed first as well: under -q pytest shows no header (where pytest-randomly
    prints "Using --randomly-seed=N"), and an interrupted run never reaches the summary.
    Only where the run is reported (not in pytest-xdist's workers)."""
    config = session.config
    line = _seed_line(config)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if line and reporter is not None and config.option.verbose < 0 and not hasattr(config, "workerinput"):
        reporter.write_line(line)


def pytest_terminal_summary(terminalreporter, config):
    """Print the random order's seed even under -q (make test), so a failure can be replayed."""
    line = _seed_line(config)
    if line:
        terminalreporter.write_line(line)


def persisted_bytes(memdir: Path) -> bytes | None:
    """The Memory as the next start loads it (memory-state.json plus the changes journaled
    in operations.jsonl after it), encoded as memory-state.json would hold it after a
    snapshot; None when nothing was ever written. What "persisted" means with the journal."""
    from tests.persisted import read_persisted
    from zcord.core.serializer import StateSerializer

    if not (memdir / "memory-state.json").exists() and not (memdir / "operations.jsonl").exists():
        return None
    return StateSerializer().encode(read_persisted(memdir))


def log_records(memdir: Path) -> list[dict]:
    """Every record of the Memory's operation log (operations.jsonl), oldest first."""
    import json

    return [json.loads(line) for line in (memdir / "operations.jsonl").read_bytes().splitlines()]
