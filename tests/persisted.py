"""What a Memory directory holds on disk, read back for checks (never for writing)."""

from __future__ import annotations

from pathlib import Path

from zcord.core.journal import read_pos, replay
from zcord.core.layout import OPLOG_FILE
from zcord.core.state import MemoryState
from zcord.core.store import Store


def read_persisted(memdir: Path | str) -> MemoryState:
    """The Memory as the next start will load it (snapshot plus the changes journaled after
    it), read without taking the directory's lock."""
    memdir = Path(memdir)
    state = Store(memdir).load()
    replay(state, memdir / OPLOG_FILE, read_pos(memdir))
    return state
