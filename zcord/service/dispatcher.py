"""The dispatcher: how every call runs. It finds the tool in the table, validates the
arguments against its input model, runs the room's rule under the service lock, commits
the change (memory and disk together, or neither), and records the call in the operation
log (the journal), then tells the listeners what changed."""

from __future__ import annotations

import errno
import sys
import threading
from collections.abc import Callable, Collection
from datetime import datetime
from typing import Any

from ..core import origin as O
from ..core.errors import (
    InvalidArgument,
    MayHaveTakenEffect,
    StorageError,
    UnknownTool,
    ZcorError,
    describe_os_error,
)
from ..core.models import OpError, OpRecord
from ..core.oplog import OpLog
from ..core.protocol import VIEW_TOOLS, Forbidden
from ..core.state import MemoryState, Tx
from ..core.store import Store
from . import logbudget
from .calls import Ctx, InternalError, RestoreInProgress, loggable, parse_args
from .gate import RestoreGate
from .snapshots import Snapshots
from .tools import TOOLS, ToolSpec


class Dispatcher:
    """Runs tool calls and operator changes: serialized by `lock`, one transaction each,
    journaled and recorded. Service adds the Memory's lifetime and the views."""

    store: Store
    oplog: OpLog
    state: MemoryState
    clock: Callable[[], datetime]
    trust: Any  # zcord.service.trust.TrustBook
    review: Any  # zcord.service.review.ReviewBook
    config: Any

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.seq = 0
        """The last operation's sequence number (unique across restarts)."""
        self.last_at: datetime | None = None
        """The last operation's time: a new one never goes below it (restored from the log)."""
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        self.log_budget = logbudget.LogBudget()  # the bot's log bytes for calls that change nothing
        self.gate = RestoreGate()
        self.snapshots = Snapshots(self)
        self._calling = threading.local()  # this thread's call: its origin and whether it is held

    def call(self, tool: str, params: Any = None, actor: str = "operator",
             allowed: Collection[str] | None = None, view: bool = False,
             claim: Any = O.NO_CLAIM, batch: tuple[str, list[str]] | None = None) -> dict[str, Any]:
        """Run one tool call and record it. Raises ZcorError subclasses on failure.

        Args:
            allowed: the tools declared to this caller; any other name is refused (and recorded).
            view: an operator's read made only to display something (VIEW_TOOLS): answered
                but not recorded. Asked by the model, or for another tool, it is refused (and
                recorded).
            claim: the origin the bot told (`_meta["zcor/origin"]`), validated here; a bad one
                is refused (and recorded). batch: the connection's latest recall batch
                (session, senders), the origin when the bot told none.
        """
        if params is None:
            params = {}
        spec = TOOLS.get(tool) if allowed is None or tool in allowed else None
        if spec is not None and view and actor != "model" and tool in VIEW_TOOLS:
            return self._view_call(spec, params, actor)
        origin, refusal, hold = self.judge_origin(spec, actor, claim, batch, view)
        self._calling.origin, self._calling.hold = origin, hold
        try:
            if refusal is not None:
                return self.gate.writes_wait(lambda: self._call_locked(tool, spec, params, actor, view, refusal))
            if spec is not None and spec.flow is not None and not view:
                return spec.flow(self, spec, params, actor)  # a tool that lets the lock go while it works
            if spec is not None and spec.reads_log:
                self.oplog.warm(background=True)  # a large backlog is indexed by its thread, not here
            return self.gate.writes_wait(lambda: self._call_locked(tool, spec, params, actor, view))
        finally:
            self._calling.origin = self._calling.hold = None

    def judge_origin(self, spec: ToolSpec | None, actor: str, claim: Any, batch: tuple[str, list[str]] | None,
                     view: bool) -> tuple[dict[str, Any], ZcorError | None, bool]:
        """A call's origin, and what per-sender trust says of it: (origin, the refusal or
        None, whether its change is held for review)."""
        try:
            origin = O.resolve(actor, claim, batch, claim is not O.NO_CLAIM)
        except InvalidArgument as e:
            return O.resolve(actor, None, batch, False), e, False
        if actor != "model" or spec is None or not spec.mutates or view:
            return origin, None, False
        from ..core.errors import BlockedSender, UntrustedSender
        from .review import HOLDABLE_TOOLS

        level, who = self.trust.judge(origin, self.config.default_trust)
        named = ", ".join(who) if who else "an unknown sender (the default trust level)"
        if level == "blocked":
            return origin, BlockedSender(
                f"{spec.name} was refused by the per-sender trust rule: the operator blocked {named}, so "
                f"nothing is changed on their behalf. Do not retry; answer without changing the memory."), False
        if level == "untrusted":
            if spec.name in HOLDABLE_TOOLS:
                return origin, None, True
            return origin, UntrustedSender(
                f"{spec.name} was refused by the per-sender trust rule: {named} is untrusted, and this kind "
                f"of change cannot be held for an operator's review. Do not retry."), False
        return origin, None, False

    def _call_locked(self, tool: str, spec: ToolSpec | None, params: Any, actor: str, view: bool,
                     refusal: ZcorError | None = None) -> dict[str, Any]:
        with self.lock:
            self.store.verify_lock()
            self.reconcile_or_say()  # so a history query sees changes whose log record failed
            ctx = self.new_ctx(tool, actor)

            def run() -> dict[str, Any]:
                if view:
                    raise (Forbidden("Only operators may make unrecorded display reads (zcor/view); "
                                     "the model's calls are always recorded.", field="_meta")
                           if actor == "model" else
                           InvalidArgument(f"zcor/view is for the read-only tools ({', '.join(sorted(VIEW_TOOLS))}); "
                                           f"{tool} is always recorded.", field="_meta"))
                if spec is None or spec.handler is None:
                    raise UnknownTool.undeclared(tool)
                if refusal is not None:
                    raise refusal
                result = spec.handler(self, parse_args(spec.input_model, params), ctx)
                if ctx.held:
                    from .review import REVIEW_NOTE
                    result = {**result, "review": "pending", "reviewNote": REVIEW_NOTE}
                return result

            return self.run_logged(ctx, params, run)

    def _view_call(self, spec: ToolSpec, params: Any, actor: str) -> dict[str, Any]:
        """A read-only tool answered for display: same checks and result, no log record."""
        if spec.reads_log:
            self.oplog.warm(background=True)
        with self.lock:
            self.store.verify_lock()
            if spec.reads_log:
                self.reconcile_or_say()
            ctx = Ctx(actor=actor, tool=spec.name, seq=0, at=self.clock())
            try:
                return spec.handler(self, parse_args(spec.input_model, params), ctx)
            except ZcorError:
                raise
            except Exception as e:
                raise InternalError(f"internal error in {spec.name}: {type(e).__name__}: {e}; nothing changed") from e

    def operate(self, name: str, params: dict[str, Any], actor: str,
                fn: Callable[[], tuple[Any, list[dict[str, Any]]]], what: str) -> Any:
        """Run an operator action that is not a tool (config, synonym groups) the way tools
        run: serialized, recorded in the operation log, announced to listeners."""
        with self.lock:
            self.store.verify_lock()
            ctx = self.new_ctx(name, actor)
            try:
                result, changes = fn()
            except ZcorError as e:
                self.log_call(ctx, params, error=e)
                raise
            except OSError as e:
                err = StorageError(f"{what} could not be saved ({describe_os_error(e)}); nothing changed.")
                self.log_call(ctx, params, error=err)
                raise err from None
            if changes:
                ctx.committed = True
                ctx.changes = changes
            try:
                self.log_call(ctx, params)
            finally:
                if changes:
                    self.notify(ctx)
            return result

    def run_operation(self, name: str, params: Any, fn: Callable[[Ctx], dict[str, Any]]) -> dict[str, Any]:
        """An operator method that changes the Memory (revert, reinstate) run as a tool call
        is: serialized, one transaction, journaled, recorded in the log, announced."""
        def attempt() -> dict[str, Any]:
            with self.lock:
                self.store.verify_lock()
                ctx = self.new_ctx(name, "operator")
                return self.run_logged(ctx, params, lambda: fn(ctx), storage_errors=True)

        return self.gate.writes_wait(attempt)

    def run_logged(self, ctx: Ctx, params: Any, fn: Callable[[], dict[str, Any]],
                   storage_errors: bool = False) -> dict[str, Any]:
        """Run one call (lock held): on failure undo it and record the error; on success
        record it and announce what it changed. storage_errors: an OSError is a
        storage_error (else, like anything unexpected, an internal_error)."""
        name = ctx.tool
        try:
            result = fn()
        except RestoreInProgress:
            self.rollback(ctx)  # not an operation: it runs again after the restore
            if ctx.seq == self.seq:
                self.seq -= 1
            raise
        except ZcorError as e:
            self.rollback(ctx)
            self.log_call(ctx, params, error=e)
            raise
        except Exception as e:
            self.rollback(ctx)
            if storage_errors and isinstance(e, OSError):
                err: ZcorError = StorageError(f"{name} could not be completed ({describe_os_error(e)}); "
                                              f"nothing changed.")
            else:
                err = InternalError(f"internal error in {name}: {type(e).__name__}: {e}; nothing changed")
            self.log_call(ctx, params, error=err)
            raise err from e
        try:
            self.log_call(ctx, params)
        finally:
            if ctx.committed:
                self.notify(ctx)
        return result

    def new_ctx(self, tool: str, actor: str) -> Ctx:
        """The next operation: its sequence number and time (call with the lock held). The
        time never goes below the last one recorded: a wall clock stepped back (NTP, a VM
        snapshot) repeats that instant instead of writing times out of order."""
        self.seq += 1
        at = self.clock()
        if self.last_at is not None and at < self.last_at:
            at = self.last_at
        self.last_at = at
        ctx = Ctx(actor=actor, tool=tool, seq=self.seq, at=at)
        if actor == "model":
            ctx.origin = getattr(self._calling, "origin", None) or O.inferred(None, [])
            ctx.hold = bool(getattr(self._calling, "hold", False))
        else:
            ctx.origin = dict(O.OPERATOR_ORIGIN)
        return ctx

    def rollback(self, ctx: Ctx) -> None:
        if ctx.tx is not None and not ctx.committed:
            ctx.tx.rollback()

    def begin(self, ctx: Ctx) -> Tx:
        if self.gate.restoring:
            raise RestoreInProgress
        ctx.tx = Tx(self.state, ctx.actor, ctx.tool, ctx.seq, ctx.at)
        return ctx.tx

    def commit(self, ctx: Ctx) -> None:
        tx = ctx.tx
        assert tx is not None
        mig = self.state.migration
        if mig is not None:
            tx.record("state.migrate", None, before={"version": mig.from_version, "file": mig.file},
                      after={"version": 3})
            tx.changes.insert(0, tx.changes.pop())
        numbered = tx.commit_changes()
        if ctx.hold and numbered:
            try:
                self.review.hold(ctx, [c.dump() for c in numbered])
            except OSError as e:
                tx.rollback()
                raise StorageError(f"The change could not be held for review ({describe_os_error(e)}); nothing "
                                   f"changed.") from None
            ctx.held = True
        # most changes become durable with their log record (log_call); these cannot be
        # replayed from it, so the snapshot is written first, as before the journal
        if mig is not None or ctx.snapshot_first or not self.store.state_path.exists():
            self.snapshots.settle()
            try:
                self.snapshots.save(self.snapshots.pos())
            except OSError as e:
                tx.rollback()
                if ctx.held:
                    self.review.forget(ctx.seq)
                if e.errno in (errno.EMFILE, errno.ENFILE):
                    raise StorageError(f"The Memory could not be saved: {describe_os_error(e)}; nothing "
                                       f"changed.") from None
                raise StorageError(f"The Memory could not be saved ({e.strerror or e}); nothing changed. "
                                   f"Check the disk and try again.") from None
            ctx.snapshotted = True
            self.snapshots.written()
        self.state.migration = None
        ctx.committed = True
        ctx.changes = [c.dump() for c in numbered]

    def log_call(self, ctx: Ctx, params: Any, error: ZcorError | None = None) -> None:
        params = logbudget.bounded_params(
            params if isinstance(params, dict) else {"arguments": repr(params)[:1000]}, error is not None,
            ctx.actor == "model" and not ctx.changes, self.log_budget, self.config.bot_log_bytes_per_minute)
        record = OpRecord(
            seq=ctx.seq, at=ctx.at, actor=ctx.actor, tool=ctx.tool,
            params=params,
            status="error" if error else "ok",
            error=OpError(code=error.code, message=logbudget.cut_message(error.message), field=error.field)
            if error else None,
            changes=ctx.changes, result=ctx.log_result, origin=ctx.origin)
        journal = ctx.committed and ctx.tx is not None and not ctx.snapshotted
        try:
            own = [c["changeId"] for c in ctx.changes if c.get("changeId")]
            self.reconcile(upto=own[0] - 1 if own else None)
            before = self.oplog.size
            try:
                self.oplog.append(record, durable=bool(ctx.changes))
            except ValueError:  # JSON cannot carry these params (lone surrogates, nesting too deep)
                record = record.model_copy(update={"tool": loggable(record.tool), "params": loggable(record.params)})
                self.oplog.append(record, durable=bool(ctx.changes))
        except OSError as e:
            if journal:
                # the record was the change's only durable copy: undo it in memory too
                ctx.tx.rollback()
                ctx.committed = False
                ctx.changes = []
                if ctx.held:
                    self.review.forget(ctx.seq)
                err = StorageError(f"The Memory could not be saved ({describe_os_error(e)}); nothing changed. "
                                   f"Check the disk and try again.")
                try:  # the failed call is recorded like any other, if the disk takes it
                    self.oplog.append(record.model_copy(update={
                        "status": "error", "changes": [], "result": None,
                        "error": OpError(code=err.code, message=err.message)}), durable=False)
                except (OSError, ValueError):
                    pass
                raise err from None
            if ctx.committed:
                raise MayHaveTakenEffect(
                    f"The change was saved but the operation log could not be written ({describe_os_error(e)}); "
                    f"the operation may have taken effect. Read the memory before retrying.") from None
            print(f"zcord: could not write the operation log: {e}", file=sys.stderr)
            return
        if journal:
            self.snapshots.journaled(self.oplog.size - before)
        self.snapshots.advance_pos()

    def reconcile_or_say(self) -> None:
        """reconcile before a call or a history read: a log that still cannot be written is
        reported here, and the call goes on (its own record meets the same failure)."""
        try:
            self.reconcile()
        except OSError as e:
            print(f"zcord: could not write the operation log: {e}", file=sys.stderr)

    def reconcile(self, upto: int | None = None) -> None:
        """Log changes that reached the state but not the log (crash or failed log write).

        Args:
            upto: the last change id to consider (the call being logged owns the later ones).
        """
        history = self.state.history
        if (not history and self.state.sealed_last_change_id > self.oplog.last_change_id) or \
                (history and history[0].change_id > self.oplog.last_change_id + 1):
            # unlogged changes were already sealed into a segment (rare: read them back)
            history = list(self.store.iter_history(self.state))
        end = len(history)
        if upto is not None:
            while end > 0 and history[end - 1].change_id > upto:
                end -= 1
        if not end or history[end - 1].change_id <= self.oplog.last_change_id:
            return
        i = end
        while i > 0 and history[i - 1].change_id > self.oplog.last_change_id:
            i -= 1
        groups: dict[int | None, list] = {}
        for c in history[i:end]:
            groups.setdefault(c.op_seq, []).append(c)
        for op_seq, changes in groups.items():
            first = changes[0]
            self.oplog.append(OpRecord(
                seq=op_seq or self.seq + 1, at=first.at, actor=first.actor, tool=first.tool,
                status="ok", changes=[c.dump() for c in changes], recovered=True), durable=True)
            self.seq = max(self.seq, op_seq or self.seq + 1)

    def notify(self, ctx: Ctx) -> None:
        """Tell listeners (the daemon's subscribers) what a committed call changed."""
        event = {"tool": ctx.tool, "actor": ctx.actor, "seq": ctx.seq, "origin": ctx.origin,
                 "changes": [{"kind": c["kind"], "target": c.get("target")} for c in ctx.changes]}
        for listener in list(self.listeners):
            try:
                listener(event)
            except Exception as e:  # a broken listener must not fail the call
                print(f"zcord: change listener failed: {e!r}", file=sys.stderr)

    def renumber(self, ctx: Ctx) -> None:
        """A record logged after the lock was let go takes the next seq now, so the log's seqs
        increase line by line and the largest is always the last (unique across restarts)."""
        if ctx.seq != self.seq:
            ctx.seq = self.new_ctx(ctx.tool, ctx.actor).seq

    def find_operation(self, seq: int) -> dict[str, Any] | None:
        """The operation-log record with this seq, or None."""
        from ..core.journal import find_record

        return find_record(self.oplog.path, seq)
