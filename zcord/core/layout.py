"""The Memory directory's layout: the names of its files and folders, of sealed history
segments, of backups and of the copy a migration keeps. No I/O but the packaged synonyms.

memory-state.json (format 3), operations.jsonl (the operation log, see oplog.py),
synonyms.json, config.json, PERSONA.md, backups/, blobs/, history/, recall-log/, zcord.lock.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

STATE_FILE = "memory-state.json"
LEGACY_FILE = "memories.json"
OPLOG_FILE = "operations.jsonl"
SYNONYMS_FILE = "synonyms.json"
CONFIG_FILE = "config.json"
PERSONA_FILE = "PERSONA.md"
LOCK_FILE = "zcord.lock"
BACKUPS_DIR = "backups"
BLOBS_DIR = "blobs"
HISTORY_DIR = "history"
RECALL_LOG_DIR = "recall-log"
"""The recall log (issue 38): per session, the latest auto-recall batches; not in backups."""

SEGMENT_RE = re.compile(r"^changes-(\d{9})-(\d{9})\.jsonl$")
"""A sealed history segment under history/: the first and last change id it holds."""

BOT_BACKUP_RE = re.compile(r"^memory-state-.+-bot(-\d+)?\.json$")
"""Backups made by the bot's zcor_memory_backup calls: pruned."""
PRE_RESTORE_RE = re.compile(r"^memory-state-.+-bot-prerestore(-\d+)?\.json$")
"""The copy taken before a restore the bot asked for: never pruned (it is the way back)."""


def segment_name(first_id: int, last_id: int) -> str:
    """The file name of a sealed segment holding changes first_id..last_id."""
    return f"changes-{first_id:09d}-{last_id:09d}.jsonl"


def segment_last_id(name: str) -> int:
    """The last change id a segment named by segment_name holds."""
    return int(name.rsplit("-", 1)[1].split(".")[0])


def backup_names(at: datetime, bot: bool = False, pre_restore: bool = False) -> Iterator[str]:
    """The names a backup taken at `at` may have, in the order to try them (the first free
    one is taken): memory-state-<UTC time to the millisecond>[-bot|-bot-prerestore][-n].json."""
    stamp = at.astimezone(UTC).strftime("%Y%m%dT%H%M%S.%f")[:-3] + "Z"
    tag = ("-bot-prerestore" if pre_restore else "-bot") if bot else ""
    yield f"memory-state-{stamp}{tag}.json"
    n = 2
    while True:
        yield f"memory-state-{stamp}{tag}-{n}.json"
        n += 1


def kept_original_name(from_version: str, at: datetime | None = None) -> str:
    """The name of the version-1/2 file a migration keeps (stamped with `at` when the plain
    name already holds another file)."""
    if at is None:
        return f"memory-state.v{from_version}.json"
    return f"memory-state.v{from_version}.{at.astimezone(UTC).strftime('%Y%m%dT%H%M%S%fZ')}.json"


def default_synonyms_bytes() -> bytes:
    """The default synonym groups: packaged into zcord by the build, else (a source checkout
    or an editable install) the top-level synonyms.json, which is the one source of both."""
    packaged = resources.files("zcord").joinpath(SYNONYMS_FILE)
    if packaged.is_file():
        return packaged.read_bytes()
    return (Path(__file__).resolve().parents[2] / SYNONYMS_FILE).read_bytes()
