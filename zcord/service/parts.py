"""What each part of the service needs of the Service that holds it, as Protocols.

The Service (service.py) holds its parts: the dispatcher (calls), the snapshots, the
restore gate, the review and trust books. The rooms (zcord.service.rooms) and the operator
operations (undo.py, review.py) see it through `Room` or `FlowRoom`, the dispatcher through
`CallHost`, the snapshots through `SnapshotHost`, so the type checker knows exactly what
each one reaches."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..core.config import Config
    from ..core.oplog import OpLog
    from ..core.state import MemoryState, Tx
    from ..core.store import Store
    from ..retrieval.recall import Retriever
    from ..retrieval.synonyms import Synonyms
    from ..retrieval.twins import TwinIndex
    from .calls import Ctx
    from .dispatcher import Dispatcher
    from .gate import RestoreGate
    from .review import ReviewBook
    from .rooms.backups import Backups
    from .snapshots import Snapshots
    from .trust import TrustBook
    from .undo import UndoBook


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
    def review(self) -> ReviewBook: ...
    @property
    def snapshots(self) -> Snapshots: ...
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
    def review(self) -> ReviewBook: ...
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
    def calls(self) -> Dispatcher: ...
    @property
    def gate(self) -> RestoreGate: ...
    @property
    def snapshots(self) -> Snapshots: ...
    @property
    def backups(self) -> Backups: ...
    @property
    def undo(self) -> UndoBook: ...
    @property
    def http_client(self) -> Any: ...

    def find_operation(self, seq: int) -> dict[str, Any] | None: ...

    def private_logged(self) -> bool: ...
