"""Backups and restores: zcor_memory_backup, zcor_memory_restore and the operator's preview.

A backup is encoded and written without the service lock; a restore runs in three steps
(restore_flow) so reads are answered throughout."""

from __future__ import annotations

import errno
import math
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...core.errors import InvalidArgument, RateLimited, StorageError, ZcorError, describe_os_error
from ...core.journal import SnapshotPos
from ...core.models import Change
from ...core.parsing import RestoreLimits
from ...core.serializer import StateView
from ...core.state import MemoryState
from .. import inputs as I
from ..calls import Ctx, InternalError, parse_args

if TYPE_CHECKING:
    from ..service import Service
    from ..tools import ToolSpec


def _summary(s: MemoryState | StateView) -> dict[str, Any]:
    """What a restore's change and result say of a state, before and after."""
    return {"nodes": len(s.nodes), "relationships": len(s.relationships), "important": list(s.important)}


def _test_hold(kind: str) -> None:
    """Tests only: with ZCOR_TEST_RESTORE_HOLD (or _BACKUP_HOLD) set to a path, a restore (a
    backup) in its slow phase creates that file and waits until it is removed (so a test can
    act meanwhile)."""
    path = os.environ.get(f"ZCOR_TEST_{kind}_HOLD")
    if not path:
        return
    Path(path).touch()
    while os.path.exists(path):
        time.sleep(0.01)


def bot_backup_allowed(svc: Service, now: float) -> None:
    """RateLimited unless the bot's last backup is at least the configured interval old."""
    interval = svc.config.bot_backup_interval_seconds
    last = svc.last_bot_backup
    if last is not None and now - last < interval:
        raise RateLimited(
            f"The bot may back up the Memory at most once every {interval} s "
            f"(botBackupIntervalSeconds); the last backup was {int(now - last)} s ago. Try again in "
            f"{math.ceil(interval - (now - last))} s.", data={"retryAfterSeconds": math.ceil(interval - (now - last))})


def bot_restore_allowed(svc: Service, now: float) -> None:
    """RateLimited unless the bot's last restore is at least botRestoreIntervalSeconds old:
    each restore keeps a copy of the whole Memory that is never pruned (the way back)."""
    interval = svc.config.bot_restore_interval_seconds
    last = svc.last_bot_restore
    if last is not None and now - last < interval:
        wait = math.ceil(interval - (now - last))
        raise RateLimited(
            f"The bot may restore a backup at most once every {interval} s (botRestoreIntervalSeconds); the "
            f"last restore was {int(now - last)} s ago. Try again in {wait} s.", data={"retryAfterSeconds": wait})


def backup_flow(svc: Service, spec: ToolSpec, params: Any, actor: str) -> dict[str, Any]:
    """zcor_memory_backup: a copy of the state taken with the lock (dicts of immutable
    records: quick), encoded and written without it, so reads and writes go on
    meanwhile; the backup holds the Memory as it was when the call began."""
    bot = actor == "model"
    with svc.lock:
        svc.store.verify_lock()
        ctx = svc.new_ctx(spec.name, actor)
        try:
            parse_args(spec.input_model, params)
            now = time.monotonic()
            if bot:
                bot_backup_allowed(svc, now)
                previous, svc.last_bot_backup = svc.last_bot_backup, now  # one at a time
            view = StateView.of(svc.state)
        except ZcorError as e:
            svc.log_call(ctx, params, error=e)
            raise
    try:
        _test_hold("BACKUP")
        name = svc.store.write_backup(view, ctx.at, bot=bot, private=True)
    except (OSError, ZcorError) as e:
        err = e if isinstance(e, ZcorError) else \
            StorageError(f"The backup could not be written ({describe_os_error(e)}).")
        with svc.lock:
            if bot and svc.last_bot_backup == now:
                svc.last_bot_backup = previous
            svc.renumber(ctx)
            svc.log_call(ctx, params, error=err)
        raise err from None
    with svc.lock:
        ctx.log_result = {"backupFile": name}
        if bot:
            prune_bot_backups(svc, ctx)
        svc.renumber(ctx)
        svc.log_call(ctx, params)
    return {"backupFile": name}


def prune_bot_backups(svc: Service, ctx: Ctx) -> None:
    try:
        gone = svc.store.prune_bot_backups(svc.config.max_bot_backups)
    except (OSError, ZcorError) as e:  # the backup itself is written; pruning retries next time
        print(f"zcord: could not prune the bot's old backups: {e}", file=sys.stderr)
        return
    if gone:
        ctx.log_result = {**(ctx.log_result or {}), "pruned": gone}


def restore_flow(svc: Service, spec: ToolSpec, params: Any, actor: str) -> dict[str, Any]:
    """zcor_memory_restore in three steps, so reads are answered throughout:

    1. with the lock: check the arguments (the backup was parsed before, without it) and
       stop changes (they wait, RestoreInProgress) and background snapshots;
    2. without it: write the pre-restore backup of the (unchanging) state, then the new
       state's snapshot, which names the restore's change, atomically: a crash before
       the rename leaves the old state, after it the new one (the next start records
       the change from the snapshot if its log record is missing);
    3. with the lock: switch the live state to the new one and record the call.
    Reads meanwhile see the old state, and from the switch the new one."""
    with svc.gate.one_at_a_time:
        # parsing a large backup must not hold the lock (nor run for a refused bot restore)
        preloaded = None if actor == "model" and _bot_restore_refused(svc) else _preload(svc, spec, params)
        with svc.lock:
            svc.store.verify_lock()
            svc.reconcile_or_say()
            if svc.state.migration is not None:  # the first change after a migration: all at once
                ctx = svc.new_ctx(spec.name, actor)
                ctx.preloaded = preloaded
                return svc.run_logged(ctx, params,
                                      lambda: restore(svc, parse_args(spec.input_model, params), ctx))
            ctx = svc.new_ctx(spec.name, actor)
            try:
                a = parse_args(spec.input_model, params)
                if actor == "model":
                    bot_restore_allowed(svc, time.monotonic())
                incoming = preloaded[1] if preloaded is not None and preloaded[0] == a.backup_file \
                    else svc.store.read_backup(a.backup_file, RestoreLimits.of(svc.config))
                if isinstance(incoming, ZcorError):
                    raise incoming
            except ZcorError as e:
                svc.log_call(ctx, params, error=e)
                raise
            svc.gate.set(True)
        try:
            return _restore_slow(svc, ctx, params, a.backup_file, incoming)
        finally:
            with svc.lock:
                waiters = svc.gate.set(False) if svc.gate.restoring else []
            svc.gate.wake(waiters)


def _bot_restore_refused(svc: Service) -> bool:
    try:
        bot_restore_allowed(svc, time.monotonic())
    except RateLimited:
        return True
    return False


def _preload(svc: Service, spec: ToolSpec, params: Any) -> tuple[str, Any] | None:
    try:
        a = parse_args(spec.input_model, params)
    except ZcorError:
        return None  # reported by the call itself
    try:
        return a.backup_file, svc.store.read_backup(a.backup_file, RestoreLimits.of(svc.config))
    except ZcorError as e:
        return a.backup_file, e
    except OSError as e:
        return a.backup_file, StorageError(f"The backup could not be read ({describe_os_error(e)}).")


def _restore_slow(svc: Service, ctx: Ctx, params: Any, name: str, incoming: MemoryState) -> dict[str, Any]:
    """Steps 2 and 3 of restore_flow (changes are held: nothing changes the state)."""
    bot = ctx.actor == "model"
    snap = svc.snapshots.thread
    if snap is not None:
        snap.join()  # a background snapshot finishes without the lock; no other starts now

    try:
        with svc.lock:
            svc.snapshots.settle()
            old = StateView.of(svc.state)
        try:
            auto = svc.store.write_backup(old, ctx.at, bot=bot, private=True, pre_restore=True)
        except OSError as e:
            raise StorageError(f"The pre-restore backup could not be written ({describe_os_error(e)}); "
                               f"nothing was restored.") from None
        change = Change(change_id=old.last_change_id + 1, at=ctx.at, actor=ctx.actor, tool=ctx.tool,
                        op_seq=ctx.seq, kind="state.restore", target=None,
                        before={"backupFile": auto, **_summary(old)},
                        after={"restoredFrom": name, **_summary(incoming)})
        new = StateView(incoming.nodes, list(incoming.important), incoming.relationships,
                        [*old.history, change], max(old.next_id, incoming.next_id),
                        list(old.history_segments))
        pos = SnapshotPos(min(change.change_id, svc.oplog.last_change_id), svc.oplog.size)
        _test_hold("RESTORE")
        try:
            seal = svc.snapshots.write_waited(pos, new)
        except OSError as e:
            check = "" if e.errno in (errno.EMFILE, errno.ENFILE) else " Check the disk and try again."
            raise StorageError(f"The Memory could not be saved ({describe_os_error(e)}); nothing "
                               f"changed.{check}") from None
    except ZcorError as e:
        with svc.lock:
            svc.log_call(ctx, params, error=e)
        raise
    except Exception as e:
        err = InternalError(f"internal error in {ctx.tool}: {type(e).__name__}: {e}; nothing changed")
        with svc.lock:
            svc.log_call(ctx, params, error=err)
        raise err from e
    with svc.lock:  # the switch
        waiters = svc.gate.set(False)
        tx = svc.begin(ctx)
        tx.replace_all(incoming)
        svc.state.history.append(change)
        if seal is not None:
            svc.store.apply_seal(svc.state, seal)
        svc.snapshots.written(pos)
        ctx.committed = ctx.snapshotted = True
        ctx.changes = [change.dump()]
        ctx.log_result = {"restoredFrom": name, "backupFile": auto}
        if bot:
            svc.last_bot_restore = time.monotonic()
        result = {"restoredFrom": name, "backupFile": auto, **_summary(svc.state)}
        try:
            svc.log_call(ctx, params)
        finally:
            svc.notify(ctx)
    svc.gate.wake(waiters)
    return result


def restore(svc: Service, a: I.RestoreArgs, ctx: Ctx) -> dict[str, Any]:
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
        svc.last_bot_restore = time.monotonic()
    return {"restoredFrom": a.backup_file, "backupFile": auto, **_summary(st)}


def preview(svc: Service, name: Any) -> dict[str, Any]:
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
