"""Backups and restores: zcor_memory_backup, zcor_memory_restore and the operator's preview.

A backup is encoded and written without the service lock; a restore runs in three steps
(restore_flow) so reads are answered throughout."""

from __future__ import annotations

import errno
import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...core.errors import InvalidArgument, RateLimited, StorageError, ZcorError, describe_os_error
from ...core.journal import SnapshotPos
from ...core.models import Change
from ...core.state import MemoryState
from ...core.store import RestoreLimits, StateView
from .. import inputs as I
from ..calls import Ctx, Steps, parse_args

if TYPE_CHECKING:
    from ..parts import FlowRoom
    from ..tools import ToolSpec

log = logging.getLogger("zcord")


def _summary(s: MemoryState | StateView) -> dict[str, Any]:
    """What a restore's change and result say of a state, before and after."""
    return {"nodes": len(s.nodes), "relationships": len(s.relationships), "important": list(s.important)}


class BotPace:
    """When the bot last backed up and restored (time.monotonic()), for its rate limits: a
    part of the Service, set at open from the newest files so a restart does not reset them."""

    def __init__(self) -> None:
        self.last_backup: float | None = None
        self.last_restore: float | None = None


def bot_backup_allowed(svc: FlowRoom, now: float) -> None:
    """RateLimited unless the bot's last backup is at least the configured interval old."""
    interval = svc.config.bot_backup_interval_seconds
    last = svc.pace.last_backup
    if last is not None and now - last < interval:
        raise RateLimited(
            f"The bot may back up the Memory at most once every {interval} s "
            f"(botBackupIntervalSeconds); the last backup was {int(now - last)} s ago. Try again in "
            f"{math.ceil(interval - (now - last))} s.", data={"retryAfterSeconds": math.ceil(interval - (now - last))})


def bot_restore_allowed(svc: FlowRoom, now: float) -> None:
    """RateLimited unless the bot's last restore is at least botRestoreIntervalSeconds old:
    each restore keeps a copy of the whole Memory that is never pruned (the way back)."""
    interval = svc.config.bot_restore_interval_seconds
    last = svc.pace.last_restore
    if last is not None and now - last < interval:
        wait = math.ceil(interval - (now - last))
        raise RateLimited(
            f"The bot may restore a backup at most once every {interval} s (botRestoreIntervalSeconds); the "
            f"last restore was {int(now - last)} s ago. Try again in {wait} s.", data={"retryAfterSeconds": wait})


class BackupSteps(Steps):
    """zcor_memory_backup: a copy of the state taken with the lock (dicts of immutable
    records: quick), encoded and written without it, so reads and writes go on
    meanwhile; the backup holds the Memory as it was when the call began."""

    def __init__(self, svc: FlowRoom, spec: ToolSpec, params: Any, actor: str) -> None:
        self.svc, self.spec, self.params = svc, spec, params
        self.bot = actor == "model"
        self.name = ""

    def prepare(self, ctx: Ctx) -> None:
        svc = self.svc
        parse_args(self.spec.input_model, self.params)
        self.now = time.monotonic()
        if self.bot:
            bot_backup_allowed(svc, self.now)
            self.previous, svc.pace.last_backup = svc.pace.last_backup, self.now  # one at a time
        self.view = StateView.of(svc.state)
        return None

    def work(self, ctx: Ctx) -> None:
        try:
            self.name = self.svc.store.write_backup(self.view, ctx.at, bot=self.bot, private=True)
        except OSError as e:
            raise StorageError(f"The backup could not be written ({describe_os_error(e)}).") from None

    def abandon(self, ctx: Ctx) -> None:
        if self.bot and self.svc.pace.last_backup == self.now:
            self.svc.pace.last_backup = self.previous

    def finish(self, ctx: Ctx) -> dict[str, Any]:
        ctx.log_result = {"backupFile": self.name}
        if self.bot:
            prune_bot_backups(self.svc, ctx)
        return {"backupFile": self.name}


def prune_bot_backups(svc: FlowRoom, ctx: Ctx) -> None:
    try:
        gone = svc.store.prune_bot_backups(svc.config.max_bot_backups)
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

    def __init__(self, svc: FlowRoom, spec: ToolSpec, params: Any, actor: str) -> None:
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
            else svc.store.read_backup(a.backup_file, RestoreLimits.of(svc.config))
        if isinstance(incoming, ZcorError):
            raise incoming
        self.name, self.incoming = a.backup_file, incoming
        svc.gate.hold_changes()
        return None

    def work(self, ctx: Ctx) -> None:
        """Step 2 (changes are held: nothing changes the state)."""
        svc = self.svc
        snap = svc.snapshots.thread
        if snap is not None:
            snap.join()  # a background snapshot finishes without the lock; no other starts now
        with svc.lock:
            svc.snapshots.settle()
            old = StateView.of(svc.state)
        try:
            self.auto = svc.store.write_backup(old, ctx.at, bot=ctx.actor == "model", private=True,
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
                        list(old.history_segments))
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
        if self.seal is not None:
            svc.store.apply_seal(svc.state, self.seal)
        svc.snapshots.written(self.pos)
        ctx.committed = ctx.snapshotted = True
        ctx.changes = [self.change.dump()]
        ctx.log_result = {"restoredFrom": self.name, "backupFile": self.auto}
        if ctx.actor == "model":
            svc.pace.last_restore = time.monotonic()
        return {"restoredFrom": self.name, "backupFile": self.auto, **_summary(svc.state)}

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


def _preload(svc: FlowRoom, spec: ToolSpec, params: Any) -> tuple[str, Any] | None:
    try:
        a = parse_args(I.RestoreArgs, params)
    except ZcorError:
        return None  # reported by the call itself
    try:
        return a.backup_file, svc.store.read_backup(a.backup_file, RestoreLimits.of(svc.config))
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
        incoming = svc.store.read_backup(a.backup_file, RestoreLimits.of(svc.config))
    bot = ctx.actor == "model"
    if bot:
        bot_restore_allowed(svc, time.monotonic())
    try:
        auto = svc.store.write_backup(st, ctx.at, bot=bot, pre_restore=True)
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
        svc.pace.last_restore = time.monotonic()
    return {"restoredFrom": a.backup_file, "backupFile": auto, **_summary(st)}


def preview(svc: FlowRoom, name: Any) -> dict[str, Any]:
    """What restoring backups/<name> would change, in counts; changes nothing. The backup
    is parsed without the lock; only the snapshot of the current parts takes it."""
    if not isinstance(name, str):
        raise InvalidArgument("backupFile must be a file name from backups/", field="backupFile")
    try:
        incoming = svc.store.read_backup(name, RestoreLimits.of(svc.config))
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
