"""The restore gate: while a restore writes its new state (without the service lock),
changes wait and reads go on."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

from .calls import RestoreInProgress

log = logging.getLogger(__name__)

T = TypeVar("T")


class RestoreGate:
    """One restore at a time, and the changes that met one in its slow phase."""

    def __init__(self) -> None:
        self.one_at_a_time = threading.Lock()
        self.restoring = False
        """A restore is in its slow phase: Service.begin raises RestoreInProgress."""
        self.worker_thread: threading.Thread | None = None
        """The daemon's worker: a change it meets during a restore raises RestoreInProgress to
        the daemon, which runs it again after `when_restored`; other threads wait themselves."""
        self._idle = threading.Event()
        self._idle.set()
        self._waiters: list[Callable[[], None]] = []
        self._mutex = threading.Lock()  # guards restoring and _waiters (never held for long)

    def wait_idle(self) -> None:
        self._idle.wait()

    def writes_wait(self, fn: Callable[[], T]) -> T:
        """Run fn (which takes the lock); a change it met during a restore's slow phase was
        undone: raise RestoreInProgress (the worker) or wait for the restore and run it again."""
        while True:
            try:
                return fn()
            except RestoreInProgress:
                if threading.current_thread() is self.worker_thread:
                    raise
                self._idle.wait()

    def when_restored(self, callback: Callable[[], None]) -> None:
        """Call callback once no restore is in its slow phase (now, if none is). Never
        waits for the service lock (the daemon calls it from its event loop)."""
        with self._mutex:
            if self.restoring:
                self._waiters.append(callback)
                return
        callback()

    def hold_changes(self) -> None:
        """(service lock held) A restore's slow phase begins: changes wait for its end."""
        with self._mutex:
            self.restoring = True
            self._idle.clear()

    def let_changes_through(self) -> list[Callable[[], None]]:
        """(service lock held) The restore's slow phase is over: the waiters to call (wake)."""
        with self._mutex:
            self.restoring = False
            self._idle.set()
            waiters, self._waiters = self._waiters, []
            return waiters

    @staticmethod
    def wake(waiters: list[Callable[[], None]]) -> None:
        for callback in waiters:
            try:
                callback()
            except Exception as e:  # a waiter that cannot be woken must not fail the restore
                log.warning("could not resume a call held by a restore: %r", e)
