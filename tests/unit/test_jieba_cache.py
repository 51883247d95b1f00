"""jieba's prefix dictionary cached under zcor's control (not jieba's /tmp/jieba.cache): read
back only when it is this user's own file, not a link, not writable by others, built from
jieba's dictionary as it is now and whole; then it is the very dictionary jieba builds, so
every cut is the same."""

from __future__ import annotations

import os

import pytest

from zcord.core import text


@pytest.fixture(scope="module")
def built():
    """A tokenizer whose prefix dictionary jieba built itself (no user words)."""
    jieba = text._import_jieba()
    tok = jieba.Tokenizer()
    tok.FREQ, tok.total = tok.gen_pfdict(tok.get_dict_file())
    tok.initialized = True
    return tok


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    where = tmp_path / "cache"
    monkeypatch.setenv("ZCOR_CACHE_DIR", str(where))
    return where


def fresh():
    tok = text._import_jieba().Tokenizer()
    return tok


def test_the_cache_holds_the_dictionary_jieba_builds_and_cuts_the_same(built, cache_dir):
    text._write_jieba_cache(built)
    path = text.jieba_cache_path()
    assert path.parent == cache_dir and path.exists()
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)
    tok = fresh()
    freq, total = text._read_jieba_cache(tok)
    assert freq == built.FREQ and total == built.total
    tok.FREQ, tok.total, tok.initialized = freq, total, True
    sample = "昨天和小明去吃火锅了他说周末想去看电影还提到他的猫咪最近生病了今年评教授没评上"
    assert tok.lcut(sample, HMM=False) == built.lcut(sample, HMM=False)
    assert not list(cache_dir.glob(".*.tmp"))


@pytest.mark.parametrize("damage", ["missing", "garbage", "truncated", "bit flip", "symlink", "writable by others",
                                    "another dictionary", "off"])
def test_a_damaged_foreign_or_stale_cache_is_not_read(built, cache_dir, damage, tmp_path, monkeypatch):
    text._write_jieba_cache(built)
    path = text.jieba_cache_path()
    data = path.read_bytes()
    if damage == "missing":
        path.unlink()
    elif damage == "garbage":
        path.write_bytes(b"zcor jieba prefix dictionary 1\n{}\n")
    elif damage == "truncated":
        path.write_bytes(data[:-100])
    elif damage == "bit flip":
        i = len(data) // 2
        path.write_bytes(data[:i] + bytes([data[i] ^ 1]) + data[i + 1:])
    elif damage == "symlink":
        (tmp_path / "planted").write_bytes(data)
        path.unlink()
        path.symlink_to(tmp_path / "planted")
    elif damage == "writable by others":
        os.chmod(path, 0o666)
    elif damage == "another dictionary":  # jieba's dict.txt changed since (an upgrade in place)
        stamp = text._jieba_dict_stamp(built)
        monkeypatch.setattr(text, "_jieba_dict_stamp", lambda tok: {**stamp, "crc": stamp["crc"] ^ 1})
    elif damage == "off":
        monkeypatch.setenv("ZCOR_CACHE_DIR", "off")
        assert text.jieba_cache_path() is None
    assert text._read_jieba_cache(fresh()) is None


def test_the_cache_goes_where_systemd_or_the_user_keeps_caches(monkeypatch, tmp_path):
    monkeypatch.delenv("ZCOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("CACHE_DIRECTORY", f"{tmp_path}/sd:{tmp_path}/other")
    assert text.jieba_cache_path().parent == tmp_path / "sd"
    monkeypatch.delenv("CACHE_DIRECTORY")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert text.jieba_cache_path().parent == tmp_path / "xdg" / "zcor"
    monkeypatch.setenv("ZCOR_CACHE_DIR", "relative/dir")
    assert text.jieba_cache_path() is None  # never relative to wherever zcord was started


def test_a_cache_that_cannot_be_written_is_only_a_warning(built, tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    monkeypatch.setenv("ZCOR_CACHE_DIR", str(blocker / "cache"))  # under a file: cannot be made
    text._write_jieba_cache(built)
    assert "could not write jieba's dictionary cache" in caplog.text


SAMPLE_CHARS = "的了小明去吃火锅周末想看电影猫咪生病今年评教授没上后端做王老师阿珍ひらがな한국㐀鿿龥"


def test_cutting_each_run_on_its_own_and_keeping_it_gives_jieba_s_own_tokens():
    """analyse cuts each CJK run alone (kept for the next text holding it): the same tokens
    as jieba's cut of the whole masked text, spaces included, for random texts."""
    tok = text.tokenizer()
    rng = __import__("random").Random(5)
    for _ in range(400):
        masked = "".join(rng.choice(SAMPLE_CHARS) if rng.random() < 0.8 else " " * rng.randint(1, 3)
                         for _ in range(rng.randint(1, 60)))
        assert text._cut(tok, masked) == tok.lcut(masked, HMM=False), masked
        assert text._cut(tok, masked) == tok.lcut(masked, HMM=False), masked  # from the kept runs


def test_kept_cuts_are_dropped_when_jieba_learns_a_word(jieba_words):
    tok = text.tokenizer()
    masked = "我们去吃了嘎嘣脆鸡了"
    before = text._cut(tok, masked)
    assert "嘎嘣脆鸡" not in before
    jieba_words("嘎嘣脆鸡")
    after = text._cut(tok, masked)
    assert "嘎嘣脆鸡" in after and after == tok.lcut(masked, HMM=False)


def test_kept_cuts_are_bounded_by_characters(monkeypatch):
    """A bot sending ever new long runs cannot grow the kept cuts without bound: a run over
    RUN_CUT_TEXT is never kept, and the kept ones hold at most RUN_CUTS_CHARS characters."""
    tok = text.tokenizer()
    monkeypatch.setattr(text, "RUN_CUTS_CHARS", 1_000)
    rng = __import__("random").Random(7)
    long_run = "".join(rng.choice(SAMPLE_CHARS[:30]) for _ in range(text.RUN_CUT_TEXT + 1))
    assert text._cut(tok, long_run) == tok.lcut(long_run, HMM=False)
    assert long_run not in text.analyzer.run_cuts
    for _ in range(200):
        run = "".join(rng.choice(SAMPLE_CHARS[:30]) for _ in range(40))
        assert text._cut(tok, run) == tok.lcut(run, HMM=False)
        assert sum(map(len, text.analyzer.run_cuts)) == text.analyzer.run_cuts_chars <= 1_000
