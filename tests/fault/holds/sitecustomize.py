"""Holds a backup or a restore in its slow phase (without the service lock) for as long as a
file exists, so a test can act meanwhile; the daemon has no hook for it.

A test daemon whose PYTHONPATH starts with this folder imports this module at start (Python
imports `sitecustomize` by itself) and is held by the paths in ZCOR_TEST_BACKUP_HOLD and
ZCOR_TEST_RESTORE_HOLD (`daemon_env`); an in-process test calls `hold_backup` or
`hold_restore` with monkeypatch.setattr."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def daemon_env(backup: Path | None = None, restore: Path | None = None) -> dict[str, str]:
    """The environment for Daemon.start that holds the daemon's backups and/or restores."""
    env = {"PYTHONPATH": os.pathsep.join([str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])])}
    if backup is not None:
        env["ZCOR_TEST_BACKUP_HOLD"] = str(backup)
    if restore is not None:
        env["ZCOR_TEST_RESTORE_HOLD"] = str(restore)
    return env


def _wait(path: str) -> None:
    """Create the file and wait until the test removes it."""
    Path(path).touch()
    while os.path.exists(path):
        time.sleep(0.01)


def hold_backup(path: str, patch: Callable[[Any, str, Any], None] = setattr) -> None:
    """zcor_memory_backup waits before it writes the backup file (its unlocked step)."""
    from zcord.service.rooms.backups import BackupSteps

    work = BackupSteps.work

    def held(self: Any, ctx: Any) -> None:
        _wait(path)
        work(self, ctx)

    patch(BackupSteps, "work", held)


def hold_restore(path: str, patch: Callable[[Any, str, Any], None] = setattr) -> None:
    """zcor_memory_restore waits after its pre-restore backup is written, before the new
    state's snapshot is."""
    from zcord.service.snapshots import Snapshots

    write_waited = Snapshots.write_waited

    def held(self: Any, pos: Any, view: Any = None) -> Any:
        if view is not None:  # the restore's new state (a plain snapshot passes none)
            _wait(path)
        return write_waited(self, pos, view)

    patch(Snapshots, "write_waited", held)


if os.environ.get("ZCOR_TEST_BACKUP_HOLD"):
    hold_backup(os.environ["ZCOR_TEST_BACKUP_HOLD"])
if os.environ.get("ZCOR_TEST_RESTORE_HOLD"):
    hold_restore(os.environ["ZCOR_TEST_RESTORE_HOLD"])
