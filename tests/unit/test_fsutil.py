"""zcord.core.fsutil: the crash-safe write, the no-follow reads, directory creation and the
clean-up of a dead writer's temporary files (SPEC §3: nothing is ever lost)."""

from __future__ import annotations

import errno
import os

import pytest

from zcord.core import fsutil
from zcord.core.errors import StateFileInvalid
from zcord.core.fsutil import (
    TMP_RE,
    atomic_write,
    fsync_dir,
    make_dir,
    read_nofollow,
    read_plain_file,
    remove_stale_tmp,
)


@pytest.fixture
def umask():
    """Set the process umask for one test (restored afterwards)."""
    old = os.umask(0o022)
    os.umask(old)
    yield os.umask
    os.umask(old)


def mode_of(path) -> int:
    return os.lstat(path).st_mode & 0o777


@pytest.mark.parametrize("mask", [0o000, 0o077])
def test_atomic_write_mode_is_0640_whatever_the_umask(tmp_path, umask, mask):
    umask(mask)
    atomic_write(tmp_path / "f.json", b"new")
    assert mode_of(tmp_path / "f.json") == 0o640
    atomic_write(tmp_path / "g.json", b"new", mode=0o600)
    assert mode_of(tmp_path / "g.json") == 0o600


def test_atomic_write_replaces_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "state.json"
    path.write_bytes(b"old content, longer than the new")
    atomic_write(path, b"new")
    assert path.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_atomic_write_takes_pieces_of_every_bytes_kind(tmp_path):
    path = tmp_path / "f"
    atomic_write(path, iter([b"ab", bytearray(b"cd"), memoryview(b"ef"), b"", b"g"]))
    assert path.read_bytes() == b"abcdefg"
    atomic_write(path, bytearray(b"whole"))
    assert path.read_bytes() == b"whole"
    atomic_write(path, memoryview(b"view"))
    assert path.read_bytes() == b"view"
    atomic_write(path, b"")
    assert path.read_bytes() == b""


def test_atomic_write_finishes_short_writes(tmp_path, monkeypatch):
    """os.write may write less than asked (a signal, a pipe-like file system): the rest
    is written, not lost."""
    real = os.write
    sizes = []

    def short_write(fd, data):
        sizes.append(len(data))
        return real(fd, bytes(data)[:3])

    monkeypatch.setattr(os, "write", short_write)
    atomic_write(tmp_path / "f", b"0123456789")
    monkeypatch.undo()
    assert (tmp_path / "f").read_bytes() == b"0123456789"
    assert sizes == [10, 7, 4, 1]


@pytest.mark.parametrize("at", ["write", "fsync", "replace"])
def test_atomic_write_failure_keeps_the_old_file_and_removes_its_temporary(tmp_path, monkeypatch, at):
    path = tmp_path / "state.json"
    path.write_bytes(b"old")

    def refuse(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, at, refuse)
    with pytest.raises(OSError) as e:
        atomic_write(path, b"new")
    monkeypatch.undo()
    assert e.value.errno == errno.ENOSPC
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_atomic_write_temporary_file_is_one_the_clean_up_recognises(tmp_path, monkeypatch):
    """A writer that dies between the write and the rename leaves a file that
    remove_stale_tmp (run at the next start) removes, and nothing else."""
    seen = []
    real = os.replace

    def record(src, dst):
        seen.append(os.path.basename(src))
        return real(src, dst)

    monkeypatch.setattr(os, "replace", record)
    atomic_write(tmp_path / "memory-state.json", b"x")
    monkeypatch.undo()
    (name,) = seen
    assert name.startswith(".memory-state.json.") and TMP_RE.match(name)
    (tmp_path / name).write_bytes(b"half")  # as if the rename never happened
    assert remove_stale_tmp(tmp_path) == [name]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory-state.json"]


def test_atomic_write_target_directory_must_exist(tmp_path):
    with pytest.raises(FileNotFoundError):
        atomic_write(tmp_path / "missing" / "f", b"x")


def test_remove_stale_tmp_only_removes_atomic_write_leftovers(tmp_path):
    keep = ["memory-state.json", ".memory-state.json.12.abcdef01.tmpx", "x.12.abcdef01.tmp",
            ".f.12.abcdef0.tmp", ".f.pid.abcdef01.tmp", ".f.12.ABCDEF01.tmp", "notes.tmp"]
    stale = [".memory-state.json.123.0badc0de.tmp", ".synonyms.json.7.00000000.tmp"]
    for name in keep + stale:
        (tmp_path / name).write_bytes(b"")
    assert sorted(remove_stale_tmp(tmp_path)) == sorted(stale)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(keep)
    assert remove_stale_tmp(tmp_path) == []


def test_remove_stale_tmp_of_a_missing_directory_or_a_file(tmp_path):
    assert remove_stale_tmp(tmp_path / "missing") == []
    (tmp_path / "file").write_bytes(b"")
    assert remove_stale_tmp(tmp_path / "file") == []


def test_remove_stale_tmp_tolerates_a_file_gone_meanwhile(tmp_path, monkeypatch):
    names = [".a.1.00000000.tmp", ".b.1.00000000.tmp"]
    for name in names:
        (tmp_path / name).write_bytes(b"")
    real = os.unlink

    def racing_unlink(path, *args, **kwargs):
        if str(path).endswith(names[0]):
            real(path)  # someone else removed it first
            raise FileNotFoundError(errno.ENOENT, "gone")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", racing_unlink)
    assert remove_stale_tmp(tmp_path) == [names[1]]
    assert list(tmp_path.iterdir()) == []


def test_read_nofollow_reads_large_files_whole(tmp_path):
    data = os.urandom(1 << 20) + b"tail" + os.urandom(1 << 20)
    (tmp_path / "big").write_bytes(data)
    assert read_nofollow(tmp_path / "big") == data
    (tmp_path / "empty").write_bytes(b"")
    assert read_nofollow(tmp_path / "empty") == b""


def test_read_nofollow_limit(tmp_path):
    (tmp_path / "f.json").write_bytes(b"12345")
    assert read_nofollow(tmp_path / "f.json", limit=5) == b"12345"
    with pytest.raises(ValueError) as e:
        read_nofollow(tmp_path / "f.json", limit=4)
    assert str(e.value) == "f.json is 5 bytes, more than the 4 accepted"


def test_read_nofollow_refuses_a_symbolic_link(tmp_path):
    (tmp_path / "target").write_bytes(b"secret")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    with pytest.raises(OSError) as e:
        read_nofollow(tmp_path / "link")
    assert e.value.errno == errno.ELOOP


def test_read_plain_file(tmp_path):
    (tmp_path / "config.json").write_bytes(b"{}")
    assert read_plain_file(tmp_path / "config.json") == b"{}"
    with pytest.raises(FileNotFoundError):
        read_plain_file(tmp_path / "absent.json")
    (tmp_path / "synonyms.json").symlink_to(tmp_path / "config.json")
    with pytest.raises(StateFileInvalid) as e:
        read_plain_file(tmp_path / "synonyms.json")
    assert e.value.message == (f"synonyms.json in {tmp_path} is a symbolic link; zcord does not follow "
                               "links in the Memory directory: replace it with the file itself")
    with pytest.raises(IsADirectoryError):
        read_plain_file(tmp_path)


@pytest.mark.parametrize("mask", [0o000, 0o077])
def test_make_dir_mode_whatever_the_umask(tmp_path, umask, mask):
    umask(mask)
    make_dir(tmp_path / "d")
    assert mode_of(tmp_path / "d") == 0o750
    make_dir(tmp_path / "e", mode=0o700)
    assert mode_of(tmp_path / "e") == 0o700


def test_make_dir_leaves_an_existing_directory_as_it_is(tmp_path):
    (tmp_path / "d").mkdir(mode=0o755)
    os.chmod(tmp_path / "d", 0o755)
    (tmp_path / "d" / "f").write_bytes(b"kept")
    make_dir(tmp_path / "d")
    assert mode_of(tmp_path / "d") == 0o755
    assert (tmp_path / "d" / "f").read_bytes() == b"kept"


def test_make_dir_refuses_a_link_or_a_file_in_its_place(tmp_path):
    (tmp_path / "real").mkdir()
    os.chmod(tmp_path / "real", 0o700)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(NotADirectoryError) as e:
        make_dir(tmp_path / "link")
    assert str(e.value) == f"{tmp_path / 'link'} is not a plain directory (a symbolic link or a file)"
    assert mode_of(tmp_path / "real") == 0o700
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(NotADirectoryError):
        make_dir(tmp_path / "file")


def test_fsync_dir_opens_directories_only(tmp_path, monkeypatch):
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    fsync_dir(tmp_path)
    assert len(synced) == 1
    (tmp_path / "f").write_bytes(b"")
    with pytest.raises(NotADirectoryError):
        fsync_dir(tmp_path / "f")


def test_atomic_write_syncs_the_file_and_then_its_directory(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(("fsync", os.path.isdir(f"/proc/self/fd/{fd}"))),
                                                 real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(("replace", None)), real_replace(a, b))[1])
    atomic_write(tmp_path / "f", b"x")
    monkeypatch.undo()
    assert events == [("fsync", False), ("replace", None), ("fsync", True)]


@pytest.mark.parametrize("planted", ["symlink", "file"])
def test_atomic_write_never_writes_through_something_at_its_temporary_name(tmp_path, monkeypatch, planted):
    """The temporary name is created, never reused: a link or file already there (its name
    guessed) is refused, and what it points at is untouched."""
    monkeypatch.setattr(fsutil.secrets, "token_hex", lambda n: "0badc0de")
    tmp = tmp_path / f".f.json.{os.getpid()}.0badc0de.tmp"
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    if planted == "symlink":
        tmp.symlink_to(victim)
    else:
        tmp.write_bytes(b"precious")
        victim = tmp
    with pytest.raises(FileExistsError):
        atomic_write(tmp_path / "f.json", b"evil")
    assert victim.read_bytes() == b"precious"
    assert not (tmp_path / "f.json").exists()
