"""Backups and restores: zcor_memory_backup, zcor_memory_restore and the operator's preview.

A backup is encoded and written without the service lock (BackupSteps); a restore runs in
three steps (RestoreSteps) so reads are answered throughout. Backups is the part of the
Service that owns the backups/ folder."""

from __future__ import annotations

import errno
import logging
import math
import os
import re
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...core.errors import InvalidArgument, RateLimited, StorageError, ZcorError, describe_os_error
from ...core.journal import SnapshotPos
from ...core.layout import BOT_BACKUP_RE, PRE_RESTORE_RE
from ...core.models import Change
from ...core.parsing import RestoreLimits
from ...core.serializer import StateView
from ...core.state import MemoryState
from ...core.store import Store
from .. import inputs as I
from ..calls import Ctx, Steps, parse_args

if TYPE_CHECKING:
    from ...core.config import Config
    from ..parts import FlowRoom, ToolEntry

log = logging.getLogger(__name__)


def _summary(s: MemoryState | StateView) -> dict[str, Any]:
    """What a restore's change and result say of a state, before and after."""
    return {"nodes": len(s.nodes), "relationships": len(s.relationships), "important": list(s.important)}


class Backups:
    """The backups/ folder as the service uses it (a part of the Service): read a backup
    within the configuration's restore limits, write one, prune the bot's old ones; and when
    the bot last backed up and restored (time.monotonic()), for its rate limits, taken at
    open from the newest files so a restart does not reset them."""

    def __init__(self, store: Store, config: Callable[[], Config]) -> None:
        self._store, self._config = store, config
        self.last_backup: float | None = None
        self.last_restore: float | None = None

    def read(self, name: str) -> MemoryState:
        """Parse backups/<name> (InvalidArgument past the restore limits or for a bad name)."""
        return self._store.read_backup(name, RestoreLimits.of(self._config()))

    def write(self, state: MemoryState | StateView, at: datetime, *, bot: bool, private: bool = False,
              pre_restore: bool = False) -> str:
        """Write a backup of state; its file name."""
        return self._store.write_backup(state, at, bot=bot, private=private, pre_restore=pre_restore)

    def exists(self, name: str) -> bool:
        return os.path.exists(self._store.backups / name)

    def prune_bot(self) -> list[str]:
        """Delete the bot's oldest backups beyond maxBotBackups; the names deleted."""
        return self._store.prune_bot_backups(self._config().max_bot_backups)

    def read_clocks(self) -> None:
        """The bot's last backup and restore, from the newest files of each kind."""
        self.last_backup = self._newest(BOT_BACKUP_RE)
        self.last_restore = self._newest(PRE_RESTORE_RE)

    def _newest(self, pattern: re.Pattern[str]) -> float | None:
        """The newest file of the pattern's time on the monotonic clock."""
        try:
            newest = max((e.stat(follow_symlinks=False).st_mtime for e in os.scandir(self._store.backups)
                          if pattern.match(e.name)), default=None)
        except OSError:
            return None
        if newest is None:
            return None
        return time.monotonic() - max(0.0, time.time() - newest)


def bot_backup_allowed(svc: FlowRoom, now: float) -> None:
    """RateLimited unless the bot's last backup is at least the configured interval old."""
    interval = svc.config.bot_backup_interval_seconds
    last = svc.backups.last_backup
    if last is not None and now - last < interval:
        raise RateLimited(
            f"The bot may back up the Memory at most once every {interval} s "
            f"(botBackupIntervalSeconds); the last backup was {int(now - last)} s ago. Try again in "
            f"{math.ceil(interval - (now - last))} s.", data={"retryAfterSeconds": math.ceil(interval - (now - last))})


def bot_restore_allowed(svc: FlowRoom, now: float) -> None:
    """RateLimited unless the bot's last restore is at least botRestoreIntervalSeconds old:
    each restore keeps a copy of the whole Memory that is never pruned (the way back)."""
    interval = svc.config.bot_restore_interval_seconds
    last = svc.backups.last_restore
    if last is not None and now - last < interval:
        wait = math.ceil(interval - (now - last))
        raise RateLimited(
            f"The bot may restore a backup at most once every {interval} s (botRestoreIntervalSeconds); the "
            f"last restore was {int(now - last)} s ago. Try again in {wait} s.", data={"retryAfterSeconds": wait})


class BackupSteps(Steps):
    """zcor_memory_backup: a copy of the state taken with the lock (dicts of immutable
    records: quick), encoded and written without it, so reads and writes go on
    meanwhile; the backup holds the Memory as it was when the call began."""

    def __init__(self, svc: FlowRoom, spec: ToolEntry, params: Any, actor: str) -> None:
        self.svc, self.spec, self.params = svc, spec, params
        self.bot = actor == "model"
        self.name = ""

    def prepare(self, ctx: Ctx) -> None:
        svc = self.svc
        parse_args(self.spec.input_model, self.params)
        self.now = time.monotonic()
        if self.bot:
            bot_backup_allowed(svc, self.now)
            self.previous, svc.backups.last_backup = svc.backups.last_backup, self.now  # one at a time
        self.view = StateView.of(svc.state)
        return None

    def work(self, ctx: Ctx) -> None:
        try:
            self.name = self.svc.backups.write(self.view, ctx.at, bot=self.bot, private=True)
        except OSError as e:
            raise StorageError(f"The backup could not be written ({describe_os_error(e)}).") from None

    def abandon(self, ctx: Ctx) -> None:
        if self.bot and self.svc.backups.last_backup == self.now:
            self.svc.backups.last_backup = self.previous

    def finish(self, ctx: Ctx) -> dict[str, Any]:
        ctx.log_result = {"backupFile": self.name}
        if self.bot:
            prune_bot_backups(self.svc, ctx)
        return {"backupFile": self.name}


def prune_bot_backups(svc: FlowRoom, ctx: Ctx) -> None:
    try:
        gone = svc.backups.prune_bot()
    except (OSError, ZcorError) as e:  # the backup itself is written; pruning retries next time
        log.warning("could not prune the bot's old backups: %s", e)
        return
    if gone:
        ctx.log_result = {**(ctx.log_result or {}), "pruned": gone}


class RestoreSteps(Steps):
    """zcor_memory_restore in three steps, so reads are answered throughout:

    1. prepare, with the lock: check the arguments (the backup was parsed before, without
       it, in admit) and stop changes (they wait, RestoreInProgress) and background
       snapshots;
    2. work, without it: write the pre-restore backup of the (unchanging) state, then the
       new state's snapshot, which names the restore's change, atomically: a crash before
       the rename leaves the old state, after it the new one (the next start records the
       change from the snapshot if its log record is missing);
    3. finish, with the lock: switch the live state to the new one.
    Reads meanwhile see the old state, and from the switch the new one. The first change
    after a migration is made all at once, with the lock (prepare answers it)."""

    renumber = False  # the new snapshot names the restore's change with its seq

    def __init__(self, svc: FlowRoom, spec: ToolEntry, params: Any, actor: str) -> None:
        self.svc, self.spec, self.params, self.actor = svc, spec, params, actor
        self.preloaded: tuple[str, Any] | None = None
        self.waiters: list[Callable[[], None]] = []
        self.admitted = False

    def admit(self) -> None:
        self.svc.gate.one_at_a_time.acquire()
        self.admitted = True
        # parsing a large backup must not hold the lock (nor run for a refused bot restore)
        if not (self.actor == "model" and _bot_restore_refused(self.svc)):
            self.preloaded = _preload(self.svc, self.spec, self.params)

    def prepare(self, ctx: Ctx) -> dict[str, Any] | None:
        svc = self.svc
        ctx.preloaded = self.preloaded
        if svc.state.migration is not None:  # the first change after a migration: all at once
            return restore(svc, parse_args(I.RestoreArgs, self.params), ctx)
        a = parse_args(I.RestoreArgs, self.params)
        if self.actor == "model":
            bot_restore_allowed(svc, time.monotonic())
        pre = self.preloaded
        incoming = pre[1] if pre is not None and pre[0] == a.backup_file \
            else svc.backups.read(a.backup_file)
        if isinstance(incoming, ZcorError):
            raise incoming
        self.name, self.incoming = a.backup_file, incoming
        svc.gate.hold_changes()
        return None

    def work(self, ctx: Ctx) -> None:
        """Step 2 (changes are held: nothing changes the state)."""
        svc = self.svc
        svc.snapshots.wait_background()
        with svc.lock:
            svc.snapshots.settle()
            old = StateView.of(svc.state)
        try:
            self.auto = svc.backups.write(old, ctx.at, bot=ctx.actor == "model", private=True,
                                          pre_restore=True)
        except OSError as e:
            raise StorageError(f"The pre-restore backup could not be written ({describe_os_error(e)}); "
                               f"nothing was restored.") from None
        incoming = self.incoming
        self.change = Change(change_id=old.last_change_id + 1, at=ctx.at, actor=ctx.actor, tool=ctx.tool,
                             op_seq=ctx.seq, kind="state.restore", target=None,
                             before={"backupFile": self.auto, **_summary(old)},
                             after={"restoredFrom": self.name, **_summary(incoming)})
        new = StateView(incoming.nodes, list(incoming.important), incoming.relationships,
                        [*old.history, self.change], max(old.next_id, incoming.next_id),
                        list(old.history_segments), {**old.scopes, **incoming.scopes})
        self.pos = SnapshotPos(min(self.change.change_id, svc.oplog.last_change_id), svc.oplog.size)
        try:
            self.seal = svc.snapshots.write_waited(self.pos, new)
        except OSError as e:
            check = "" if e.errno in (errno.EMFILE, errno.ENFILE) else " Check the disk and try again."
            raise StorageError(f"The Memory could not be saved ({describe_os_error(e)}); nothing "
                               f"changed.{check}") from None

    def finish(self, ctx: Ctx) -> dict[str, Any]:
        """Step 3: the switch."""
        svc = self.svc
        self.waiters = svc.gate.let_changes_through()
        tx = svc.begin(ctx)
        tx.replace_all(self.incoming)
        svc.state.history.append(self.change)
        svc.snapshots.adopt(self.pos, self.seal)
        ctx.committed = ctx.snapshotted = True
        ctx.changes = [self.change.dump()]
        ctx.log_result = {"restoredFrom": self.name, "backupFile": self.auto}
        if ctx.actor == "model":
            svc.backups.last_restore = time.monotonic()
        return {"restoredFrom": self.name, "backupFile": self.auto, **_summary(svc.state),
                **_held_again(svc, ctx)}

    def release(self) -> None:
        svc = self.svc
        try:
            with svc.lock:
                waiters = svc.gate.let_changes_through() if svc.gate.restoring else []
            svc.gate.wake(self.waiters + waiters)
        finally:
            if self.admitted:
                svc.gate.one_at_a_time.release()


def _bot_restore_refused(svc: FlowRoom) -> bool:
    try:
        bot_restore_allowed(svc, time.monotonic())
    except RateLimited:
        return True
    return False


def _preload(svc: FlowRoom, spec: ToolEntry, params: Any) -> tuple[str, Any] | None:
    try:
        a = parse_args(I.RestoreArgs, params)
    except ZcorError:
        return None  # reported by the call itself
    try:
        return a.backup_file, svc.backups.read(a.backup_file)
    except ZcorError as e:
        return a.backup_file, e
    except OSError as e:
        return a.backup_file, StorageError(f"The backup could not be read ({describe_os_error(e)}).")


def restore(svc: FlowRoom, a: I.RestoreArgs, ctx: Ctx) -> dict[str, Any]:
    st = svc.state
    if ctx.preloaded is not None and ctx.preloaded[0] == a.backup_file:
        incoming = ctx.preloaded[1]
        if isinstance(incoming, ZcorError):
            raise incoming
    else:
        incoming = svc.backups.read(a.backup_file)
    bot = ctx.actor == "model"
    if bot:
        bot_restore_allowed(svc, time.monotonic())
    try:
        auto = svc.backups.write(st, ctx.at, bot=bot, pre_restore=True)
    except OSError as e:
        raise StorageError(f"The pre-restore backup could not be written ({describe_os_error(e)}); "
                           f"nothing was restored.") from None

    ctx.snapshot_first = True  # a restore is not replayed from its record: snapshot first
    tx = svc.begin(ctx)
    tx.record("state.restore", None, before={"backupFile": auto, **_summary(st)},
              after={"restoredFrom": a.backup_file, **_summary(incoming)})
    tx.replace_all(incoming)
    svc.commit(ctx)
    ctx.log_result = {"restoredFrom": a.backup_file, "backupFile": auto}
    if bot:
        svc.backups.last_restore = time.monotonic()
    return {"restoredFrom": a.backup_file, "backupFile": auto, **_summary(st), **_held_again(svc, ctx)}


def _held_again(svc: FlowRoom, ctx: Ctx) -> dict[str, Any]:
    """A restore brings back what an operator rejected while it was held: held again
    (ReviewBook.hold_rejected), and the result says so (`heldAgain`)."""
    try:
        got = svc.review.hold_rejected(ctx, svc.state)
    except OSError as e:
        log.warning("could not hold the restored versions of rejected changes again: %s", e)
        return {}
    return {"heldAgain": got} if got else {}


def preview(svc: FlowRoom, name: Any) -> dict[str, Any]:
    """What restoring backups/<name> would change, in counts; changes nothing. The backup
    is parsed without the lock; only the snapshot of the current parts takes it."""
    if not isinstance(name, str):
        raise InvalidArgument("backupFile must be a file name from backups/", field="backupFile")
    try:
        incoming = svc.backups.read(name)
    except OSError as e:
        raise StorageError(f"The backup could not be read ({describe_os_error(e)}).") from None
    with svc.lock:
        nodes, rels = dict(svc.state.nodes), dict(svc.state.relationships)
        important = list(svc.state.important)

    def compare(now: dict[str, Any], after: dict[str, Any]) -> dict[str, int]:
        return {"now": len(now), "after": len(after),
                "added": sum(1 for k in after if k not in now),
                "removed": sum(1 for k in now if k not in after),
                "changed": sum(1 for k, v in after.items() if k in now and now[k].dump() != v.dump())}

    return {"backupFile": name, "memories": compare(nodes, incoming.nodes),
            "relationships": compare(rels, incoming.relationships),
            "important": {"now": important, "after": list(incoming.important),
                          "changed": important != list(incoming.important)}}
