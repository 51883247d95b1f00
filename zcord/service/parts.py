"""What each part of the service needs of the Service that holds it, as Protocols.

The Service (service.py) holds its parts: the dispatcher (calls), the snapshots, the
restore gate, the review and trust books. The rooms (zcord.service.rooms) and the operator
operations (undo.py, review.py) see it through `Room` or `FlowRoom`, the dispatcher through
`CallHost`, the snapshots through `SnapshotHost`, so the type checker knows exactly what
each one reaches."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..core.config import Config
    from ..core.journal import SnapshotPos
    from ..core.oplog import OpLog
    from ..core.serializer import StateView
    from ..core.state import MemoryState, Tx
    from ..core.store import Seal, Store
    from ..retrieval.recall import Retriever
    from ..retrieval.synonyms import Synonyms
    from ..retrieval.twins import TwinIndex
    from .calls import Ctx, Steps
    from .gate import RestoreGate
    from .inputs import Args
    from .trust import TrustBook


# -- the parts, as their users see them (the concrete classes import this module, so it names
# none of them: the type checker matches them to these Protocols where the Service is passed)


class ToolEntry(Protocol):
    """What a flow reads of its tool's entry (tools.ToolSpec): its input model."""

    @property
    def input_model(self) -> type[Args]: ...


class Calls(Protocol):
    """The dispatcher (dispatcher.Dispatcher) as the rooms and the operator's operations use
    it: run a call by its steps, an operator's operation or action, number a preview."""

    def run(self, name: str, params: Any, actor: str, steps: Steps, *, recorded: bool = True,
            reconcile: bool = True, storage: str | None = None) -> dict[str, Any]: ...

    def run_operation(self, name: str, params: Any, fn: Callable[[Ctx], dict[str, Any]]) -> dict[str, Any]: ...

    def operate(self, name: str, params: dict[str, Any], actor: str,
                fn: Callable[[], tuple[dict[str, Any], list[dict[str, Any]]]], what: str) -> dict[str, Any]: ...

    def preview_ctx(self, tool: str) -> Ctx: ...


class Holds(Protocol):
    """The review book (review.ReviewBook) as the dispatcher, the rooms and the operator's
    operations use it: the held changes, holding, approving and reverting them."""

    @property
    def items(self) -> dict[int, dict[str, Any]]: ...
    @property
    def hidden(self) -> frozenset[str]: ...
    @property
    def rejected(self) -> dict[tuple[str, str], None]: ...

    def size_of(self, seq: int) -> int: ...

    def view(self, state: Any) -> Any: ...

    def hold(self, ctx: Ctx, changes: list[dict[str, Any]]) -> None: ...

    def forget(self, seq: int) -> None: ...

    def approve(self, seqs: list[int]) -> None: ...

    def start_reverting(self, seqs: list[int], by: int) -> None: ...

    def settle_after(self, run: Callable[[], dict[str, Any]]) -> dict[str, Any]: ...

    def hold_rejected(self, ctx: Ctx, state: Any) -> list[str]: ...


class Snapshotting(Protocol):
    """The snapshots (snapshots.Snapshots) as the dispatcher, the backup room and the warm-up
    use them."""

    @property
    def thread(self) -> threading.Thread | None: ...

    def start(self) -> None: ...

    def pos(self) -> SnapshotPos: ...

    def advance_pos(self) -> None: ...

    def journaled(self, nbytes: int) -> None: ...

    def save(self, pos: SnapshotPos) -> None: ...

    def settle(self) -> None: ...

    def written(self, pos: SnapshotPos | None = None) -> None: ...

    def adopt(self, pos: SnapshotPos, seal: Seal | None) -> None: ...

    def wait_background(self) -> None: ...

    def write_waited(self, pos: SnapshotPos, view: StateView | None = None) -> Seal | None: ...


class BackupFolder(Protocol):
    """The backups folder (rooms.backups.Backups) as the backup room and undo use it."""

    last_backup: float | None
    last_restore: float | None

    def read(self, name: str) -> MemoryState: ...

    def write(self, state: MemoryState | StateView, at: datetime, *, bot: bool, private: bool = False,
              pre_restore: bool = False) -> str: ...

    def exists(self, name: str) -> bool: ...

    def prune_bot(self) -> list[str]: ...


class UndoKeeping(Protocol):
    """What undo keeps between calls (undo.UndoBook)."""

    def log_from_the_start(self) -> bool: ...


# -- the Service, as each part sees it


class Live(Protocol):
    """The service lock and what it guards: the live state and the operation log."""

    @property
    def lock(self) -> AbstractContextManager[Any]: ...
    @property
    def state(self) -> MemoryState: ...
    @property
    def oplog(self) -> OpLog: ...


class SnapshotHost(Live, Protocol):
    """What the snapshots use besides: the directory and its store, and the restore gate
    (no snapshot starts while a restore writes its own)."""

    @property
    def dir(self) -> Path: ...
    @property
    def store(self) -> Store: ...
    @property
    def gate(self) -> RestoreGate: ...


class CallHost(SnapshotHost, Protocol):
    """What the dispatcher uses besides: the clock, the configuration, the trust and review
    books (per-sender trust, held changes) and the snapshots (journaled changes)."""

    @property
    def clock(self) -> Callable[[], datetime]: ...
    @property
    def config(self) -> Config: ...
    @property
    def trust(self) -> TrustBook: ...
    @property
    def review(self) -> Holds: ...
    @property
    def snapshots(self) -> Snapshotting: ...
    @property
    def private_sessions(self) -> set[str]: ...

    def note_private(self) -> None: ...


class Room(Live, Protocol):
    """What a tool's rule uses besides: the configuration, the retrieval parts, the review
    book (held changes are not recalled) and the call's transaction."""

    @property
    def config(self) -> Config: ...
    @property
    def retriever(self) -> Retriever: ...
    @property
    def synonyms(self) -> Synonyms: ...
    @property
    def review(self) -> Holds: ...
    @property
    def twins(self) -> TwinIndex: ...

    def begin(self, ctx: Ctx) -> Tx: ...

    def commit(self, ctx: Ctx) -> None: ...

    def refresh_synonyms(self) -> None: ...


class FlowRoom(Room, Protocol):
    """What the calls that let the lock go (search, backups, restores) and the operator's
    operations (revert, reinstate, review) use besides: the directory and its store, the
    dispatcher, the restore gate, the snapshots, the backups folder and the undo book."""

    @property
    def dir(self) -> Path: ...
    @property
    def store(self) -> Store: ...
    @property
    def calls(self) -> Calls: ...
    @property
    def gate(self) -> RestoreGate: ...
    @property
    def snapshots(self) -> Snapshotting: ...
    @property
    def backups(self) -> BackupFolder: ...
    @property
    def undo(self) -> UndoKeeping: ...
    @property
    def http_client(self) -> Any: ...

    def find_operation(self, seq: int) -> dict[str, Any] | None: ...

    def private_logged(self) -> bool: ...
