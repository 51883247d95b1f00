"""The dispatcher: how every call runs. It finds the tool in the table, validates the
arguments against its input model, runs the room's rule under the service lock, commits
the change (memory and disk together, or neither), and records the call in the operation
log (the journal), then tells the listeners what changed.

Every tool call and operator operation runs by one path, `Dispatcher.run`, over the call's
steps (calls.Steps): a call that holds the lock throughout is one step; search, backup and
restore declare the middle they run without it."""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Callable, Collection, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

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
from ..core.protocol import VIEW_TOOLS, Forbidden
from ..core.state import Tx
from . import logbudget, scope
from .calls import Ctx, InternalError, Locked, RestoreInProgress, Steps, loggable, parse_args
from .judge import judge_origin
from .tools import TOOLS, ToolSpec

if TYPE_CHECKING:
    from .parts import CallHost

log = logging.getLogger(__name__)


class Dispatcher:
    """Runs tool calls and operator operations, each by one path (`run`): serialized by the
    service lock, one transaction each, journaled and recorded once, in seq order. A part of
    the Service (`Service.calls`), which it sees through CallHost."""

    def __init__(self, host: CallHost) -> None:
        self.host = host
        self.seq = 0
        """The last operation's sequence number (unique across restarts)."""
        self.last_at: datetime | None = None
        """The last operation's time: a new one never goes below it (restored from the log)."""
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        self.log_budget = logbudget.LogBudget()  # the bot's log bytes for calls that change nothing
        self._calling = threading.local()  # this thread's call: its origin and whether it is held
        self.call_log = CallLog(self)

    # -- the entry points: a tool call, an operator's operation -----------------------------

    def call(self, tool: str, params: Any = None, actor: str = "operator",
             allowed: Collection[str] | None = None, view: bool = False,
             claim: Any = O.NO_CLAIM, batch: O.Batch | None = None,
             present: Mapping[str, list[str]] | None = None) -> dict[str, Any]:
        """Run one tool call and record it. Raises ZcorError subclasses on failure.

        Args:
            allowed: the tools declared to this caller; any other name is refused (and recorded).
            view: an operator's read made only to display something (VIEW_TOOLS): answered
                but not recorded. Asked by the model, or for another tool, it is refused (and
                recorded).
            claim: the origin the bot told (`_meta["zcor/origin"]`), validated here; a bad one
                is refused (and recorded). batch: the connection's latest recall batch
                (session, senders), the origin when the bot told none. present: the senders
                of the connection's latest batch per session, judged with a told origin of
                that session (a strict sender cannot hide by being left out of a claim).
        """
        if params is None:
            params = {}
        spec = TOOLS.get(tool) if allowed is None or tool in allowed else None
        if spec is not None and view and actor != "model" and tool in VIEW_TOOLS:
            if spec.reads_log:
                self.host.oplog.warm(background=True)
            return self.run(tool, params, actor, ToolSteps(self.host, tool, spec, params, actor),
                            recorded=False, reconcile=spec.reads_log)
        origin, refusal, hold = judge_origin(self.host, spec, actor, claim, batch, view, present)
        if actor == "model" and origin.get("session") in self.host.private_sessions and not origin.get("private"):
            origin = {**origin, "private": True}  # recalled as private: every origin naming it is (scope.py)
        if origin.get("private") is True:
            self.host.note_private()
        self._calling.origin, self._calling.hold = origin, hold
        viewing = scope.viewing(scope.viewer_of(actor, origin, self.host.config.private_scope))
        viewing.__enter__()
        try:
            steps: Steps
            if refusal is None and spec is not None and spec.flow is not None and not view:
                steps = spec.flow(self.host, spec, params, actor)  # a tool that lets the lock go while it works
            else:
                if refusal is None and spec is not None and spec.reads_log:
                    self.host.oplog.warm(background=True)  # a large backlog is indexed by its thread, not here
                steps = ToolSteps(self.host, tool, spec, params, actor, view, refusal)
            return self.run(tool, params, actor, steps)
        finally:
            viewing.__exit__(None, None, None)
            self._calling.origin = self._calling.hold = None

    def operate(self, name: str, params: dict[str, Any], actor: str,
                fn: Callable[[], tuple[dict[str, Any], list[dict[str, Any]]]], what: str) -> dict[str, Any]:
        """An operator action on a file that is not the Memory (config, PERSONA.md, synonym
        groups, trust, review): fn() -> (result, the changes it made, as log change dicts);
        run and recorded as tools are. An OSError is a storage_error naming `what`."""
        def apply(ctx: Ctx) -> dict[str, Any]:
            result, changes = fn()
            if changes:
                ctx.committed = True
                ctx.changes = changes
            return result

        return self.run(name, params, actor, Locked(apply), storage=f"{what} could not be saved")

    def run_operation(self, name: str, params: Any, fn: Callable[[Ctx], dict[str, Any]]) -> dict[str, Any]:
        """An operator method that changes the Memory (revert, reinstate, reject): fn(ctx)
        under the lock, in one transaction, as a tool call is run."""
        return self.run(name, params, "operator", Locked(fn), storage=f"{name} could not be completed")

    # -- the one path -----------------------------------------------------------------------

    def run(self, name: str, params: Any, actor: str, steps: Steps, *, recorded: bool = True,
            reconcile: bool = True, storage: str | None = None) -> dict[str, Any]:
        """Run one call by its steps (calls.Steps): admit; with the lock, verify the
        directory, number the call and prepare; without it, work; with it again, finish; then
        record it (once, in seq order) and tell the listeners what it changed; release.

        Args:
            recorded: False for an operator's display read (zcor/view): not numbered, not logged.
            reconcile: log changes whose record failed before the call (so it sees them).
            storage: how an OSError reads as a storage_error ("config.json could not be
                saved"); without it, an unexpected error is an internal_error.
        """
        steps.admit()
        try:
            return self.host.gate.writes_wait(
                lambda: self._run(name, params, actor, steps, recorded, reconcile, storage))
        finally:
            steps.release()

    def _run(self, name: str, params: Any, actor: str, steps: Steps, recorded: bool, reconcile: bool,
             storage: str | None) -> Any:
        with self.host.lock:
            self.host.store.verify_lock()
            if reconcile:
                self.call_log.reconcile_or_say()  # so a history query sees changes whose log record failed
            ctx = self.new_ctx(name, actor) if recorded else \
                Ctx(actor=actor, tool=name, seq=0, at=self.host.clock())
            result = self._step(steps.prepare, ctx, params, recorded, storage)
            if result is not None:
                self._record(ctx, params, recorded)
                return self._with_extra(ctx, result)
        try:
            steps.work(ctx)
        except Exception as e:
            err = e if isinstance(e, ZcorError) else InternalError(
                f"internal error in {name}: {type(e).__name__}: {e}; nothing changed")
            with self.host.lock:
                steps.abandon(ctx)
                if steps.renumber:
                    self._renumber(ctx)
                if recorded:
                    self.call_log.log_call(ctx, params, error=err)
            if err is e:
                raise
            raise err from e
        with self.host.lock:
            if steps.renumber:
                self._renumber(ctx)
            result = self._step(steps.finish, ctx, params, recorded, storage)
            self._record(ctx, params, recorded)
            return self._with_extra(ctx, result)

    def _step(self, step: Callable[[Ctx], Any], ctx: Ctx, params: Any, recorded: bool,
              storage: str | None) -> Any:
        """Run a step with the lock held; on failure undo its transaction and record the error."""
        try:
            return step(ctx)
        except RestoreInProgress:
            self.rollback(ctx)  # not an operation: it runs again after the restore
            if recorded and ctx.seq == self.seq:
                self.seq -= 1
            raise
        except ZcorError as e:
            self.rollback(ctx)
            if recorded:
                self.call_log.log_call(ctx, params, error=e)
            raise
        except Exception as e:
            self.rollback(ctx)
            if storage is not None and isinstance(e, OSError):
                err: ZcorError = StorageError(f"{storage} ({describe_os_error(e)}); nothing changed.")
            else:
                err = InternalError(f"internal error in {ctx.tool}: {type(e).__name__}: {e}; nothing changed")
            if recorded:
                self.call_log.log_call(ctx, params, error=err)
            raise err from e

    def _with_extra(self, ctx: Ctx, result: Any) -> Any:
        """The result with what the call's `meanwhile` added (run now if the log did not run it)."""
        self.meanwhile(ctx)
        return {**result, **ctx.extra} if ctx.extra and isinstance(result, dict) else result

    def meanwhile(self, ctx: Ctx) -> None:
        """Run the call's `meanwhile` work once (Ctx.meanwhile); a failure only leaves its part
        out of the result (it is advice: the change stands)."""
        job, ctx.meanwhile = ctx.meanwhile, None
        if job is None:
            return
        try:
            extra = job()
        except Exception as e:
            log.warning("%s: the work after its change failed: %r", ctx.tool, e)
            return
        if extra:
            ctx.extra = {**(ctx.extra or {}), **extra}

    def _record(self, ctx: Ctx, params: Any, recorded: bool) -> None:
        if not recorded:
            return
        try:
            self.call_log.log_call(ctx, params)
        finally:
            if ctx.committed:
                self.notify(ctx)

    def new_ctx(self, tool: str, actor: str) -> Ctx:
        """The next operation: its sequence number and time (call with the lock held). The
        time never goes below the last one recorded: a wall clock stepped back (NTP, a VM
        snapshot) repeats that instant instead of writing times out of order."""
        self.seq += 1
        at = self.host.clock()
        if self.last_at is not None and at < self.last_at:
            at = self.last_at
        self.last_at = at
        ctx = Ctx(actor=actor, tool=tool, seq=self.seq, at=at)
        if actor == "model":
            ctx.origin = getattr(self._calling, "origin", None) or O.inferred(None, [])
            ctx.hold_by = list(getattr(self._calling, "hold", None) or ())
            ctx.hold = bool(ctx.hold_by)
        else:
            ctx.origin = dict(O.OPERATOR_ORIGIN)
        return ctx

    def rollback(self, ctx: Ctx) -> None:
        if ctx.tx is not None and not ctx.committed:
            ctx.tx.rollback()

    def begin(self, ctx: Ctx) -> Tx:
        if self.host.gate.restoring:
            raise RestoreInProgress
        ctx.tx = Tx(self.host.state, ctx.actor, ctx.tool, ctx.seq, ctx.at)
        return ctx.tx

    def commit(self, ctx: Ctx) -> None:
        tx = ctx.tx
        assert tx is not None
        mig = self.host.state.migration
        if mig is not None:
            tx.record("state.migrate", None, before={"version": mig.from_version, "file": mig.file},
                      after={"version": 3})
            tx.changes.insert(0, tx.changes.pop())
        numbered = tx.commit_changes()
        if ctx.hold and numbered:
            try:
                self.host.review.hold(ctx, [c.dump() for c in numbered])
            except ZcorError:  # no room left for the senders it would be held for
                tx.rollback()
                raise
            except OSError as e:
                tx.rollback()
                raise StorageError(f"The change could not be held for review ({describe_os_error(e)}); nothing "
                                   f"changed.") from None
            ctx.held = True
        # most changes become durable with their log record (log_call); these cannot be
        # replayed from it, so the snapshot is written first, as before the journal
        if mig is not None or ctx.snapshot_first or not self.host.store.state_path.exists():
            self.host.snapshots.settle()
            try:
                self.host.snapshots.save(self.host.snapshots.pos())
            except OSError as e:
                tx.rollback()
                if ctx.held:
                    self.host.review.forget(ctx.seq)
                if e.errno in (errno.EMFILE, errno.ENFILE):
                    raise StorageError(f"The Memory could not be saved: {describe_os_error(e)}; nothing "
                                       f"changed.") from None
                raise StorageError(f"The Memory could not be saved ({e.strerror or e}); nothing changed. "
                                   f"Check the disk and try again.") from None
            ctx.snapshotted = True
            self.host.snapshots.written()
        self.host.state.migration = None
        ctx.committed = True
        ctx.changes = [c.dump() for c in numbered]

    def notify(self, ctx: Ctx) -> None:
        """Tell listeners (the daemon's subscribers) what a committed call changed."""
        event = {"tool": ctx.tool, "actor": ctx.actor, "seq": ctx.seq, "origin": ctx.origin,
                 "changes": [{"kind": c["kind"], "target": c.get("target")} for c in ctx.changes]}
        for listener in list(self.listeners):
            try:
                listener(event)
            except Exception as e:  # a broken listener must not fail the call
                log.warning("change listener failed: %r", e)

    def _renumber(self, ctx: Ctx) -> None:
        """A record logged after the lock was let go takes the next seq now, so the log's seqs
        increase line by line and the largest is always the last (unique across restarts)."""
        if ctx.seq != self.seq:
            ctx.seq = self.new_ctx(ctx.tool, ctx.actor).seq

    def preview_ctx(self, tool: str) -> Ctx:
        """An operator's preview (a revert's, a reject's): numbered and timed as the next
        operation would be, but not an operation: its number is not taken."""
        ctx = self.new_ctx(tool, "operator")
        self.seq -= 1
        return ctx

    def reconcile(self, upto: int | None = None) -> None:
        """Log changes that reached the state but not the log (CallLog.reconcile)."""
        self.call_log.reconcile(upto)


class CallLog:
    """The dispatcher's log step: a finished call's record written to the operation log (its
    durable copy when it changed something), and the changes whose record failed earlier
    written before it (reconcile). A part of the Dispatcher (`Dispatcher.call_log`)."""

    def __init__(self, calls: Dispatcher) -> None:
        self.calls = calls
        self.host = calls.host

    def log_call(self, ctx: Ctx, params: Any, error: ZcorError | None = None) -> None:
        params = logbudget.bounded_params(
            params if isinstance(params, dict) else {"arguments": repr(params)[:1000]}, error is not None,
            ctx.actor == "model" and not ctx.changes, self.calls.log_budget, self.host.config.bot_log_bytes_per_minute)
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
            before = self.host.oplog.size
            # a call's `meanwhile` runs while its record is fsynced (the disk's wait, not the call's)
            beside = (lambda: self.calls.meanwhile(ctx)) if ctx.meanwhile is not None and ctx.committed else None
            try:
                self.host.oplog.append(record, durable=bool(ctx.changes), meanwhile=beside)
            except ValueError:  # JSON cannot carry these params (lone surrogates, nesting too deep)
                record = record.model_copy(update={"tool": loggable(record.tool), "params": loggable(record.params)})
                self.host.oplog.append(record, durable=bool(ctx.changes), meanwhile=beside)
        except OSError as e:
            if journal:
                # the record was the change's only durable copy: undo it in memory too
                assert ctx.tx is not None  # journal says so
                ctx.tx.rollback()
                ctx.committed = False
                ctx.changes = []
                if ctx.held:
                    self.host.review.forget(ctx.seq)
                err = StorageError(f"The Memory could not be saved ({describe_os_error(e)}); nothing changed. "
                                   f"Check the disk and try again.")
                try:  # the failed call is recorded like any other, if the disk takes it
                    self.host.oplog.append(record.model_copy(update={
                        "status": "error", "changes": [], "result": None,
                        "error": OpError(code=err.code, message=err.message)}), durable=False)
                except (OSError, ValueError):
                    pass
                raise err from None
            if ctx.committed:
                raise MayHaveTakenEffect(
                    f"The change was saved but the operation log could not be written ({describe_os_error(e)}); "
                    f"the operation may have taken effect. Read the memory before retrying.") from None
            log.warning("could not write the operation log: %s", e)
            return
        if journal:
            self.host.snapshots.journaled(self.host.oplog.size - before)
        self.host.snapshots.advance_pos()

    def reconcile_or_say(self) -> None:
        """reconcile before a call or a history read: a log that still cannot be written is
        reported here, and the call goes on (its own record meets the same failure)."""
        try:
            self.reconcile()
        except OSError as e:
            log.warning("could not write the operation log: %s", e)

    def reconcile(self, upto: int | None = None) -> None:
        """Log changes that reached the state but not the log (crash or failed log write).

        Args:
            upto: the last change id to consider (the call being logged owns the later ones).
        """
        history = self.host.state.history
        if (not history and self.host.state.sealed_last_change_id > self.host.oplog.last_change_id) or \
                (history and history[0].change_id > self.host.oplog.last_change_id + 1):
            # unlogged changes were already sealed into a segment (rare: read them back)
            history = list(self.host.store.iter_history(self.host.state))
        end = len(history)
        if upto is not None:
            while end > 0 and history[end - 1].change_id > upto:
                end -= 1
        if not end or history[end - 1].change_id <= self.host.oplog.last_change_id:
            return
        i = end
        while i > 0 and history[i - 1].change_id > self.host.oplog.last_change_id:
            i -= 1
        groups: dict[int | None, list[Any]] = {}
        for c in history[i:end]:
            groups.setdefault(c.op_seq, []).append(c)
        for op_seq, changes in groups.items():
            first = changes[0]
            self.host.oplog.append(OpRecord(
                seq=op_seq or self.calls.seq + 1, at=first.at, actor=first.actor, tool=first.tool,
                status="ok", changes=[c.dump() for c in changes], recovered=True), durable=True)
            self.calls.seq = max(self.calls.seq, op_seq or self.calls.seq + 1)


class ToolSteps(Steps):
    """A tool call that holds the lock throughout: its room's rule (ToolSpec.handler), or
    the refusal the call met before it (an unknown tool, a misused zcor/view, an origin
    refused by per-sender trust), which is recorded like any failure."""

    def __init__(self, svc: Any, tool: str, spec: ToolSpec[Any] | None, params: Any, actor: str,
                 view: bool = False, refusal: ZcorError | None = None) -> None:
        self.svc, self.tool, self.spec, self.params, self.actor = svc, tool, spec, params, actor
        self.view, self.refusal = view, refusal

    def prepare(self, ctx: Ctx) -> dict[str, Any]:
        if self.view:  # a display read (zcor/view) of a tool that is always recorded: refused
            raise (Forbidden("Only operators may make unrecorded display reads (zcor/view); "
                             "the model's calls are always recorded.", field="_meta")
                   if self.actor == "model" else
                   InvalidArgument(f"zcor/view is for the read-only tools ({', '.join(sorted(VIEW_TOOLS))}); "
                                   f"{self.tool} is always recorded.", field="_meta"))
        spec = self.spec
        if spec is None or spec.handler is None:
            raise UnknownTool.undeclared(self.tool)
        if self.refusal is not None:
            raise self.refusal
        result = spec.handler(self.svc, parse_args(spec.input_model, self.params), ctx)
        if ctx.held:
            from .review import REVIEW_NOTE
            result = {**result, "review": "pending", "reviewNote": REVIEW_NOTE}
        return result
