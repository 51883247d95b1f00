"""The Service's warm-up (a part of it, `warmup`): what a daemon builds after a start so that
the first calls are answered at full speed: the retrieval indexes, jieba and the Memory's
words, the log's index, the query text and the twin index. Every step gives way to calls.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from ..core import nodecache
from ..core.indexes import build_text_piece
from ..core.text import kinds_of, tokenizer

if TYPE_CHECKING:
    from ..core.oplog import OpLog
    from ..core.state import MemoryState
    from ..core.store import Store
    from ..retrieval.recall import Retriever
    from ..retrieval.twins import TwinIndex
    from .consolidate import Consolidation
    from .gate import RestoreGate
    from .parts import Snapshotting


class WarmHost(Protocol):
    """What the warm-up uses of the Service."""

    @property
    def lock(self) -> AbstractContextManager[Any]: ...
    @property
    def state(self) -> MemoryState: ...
    @property
    def store(self) -> Store: ...
    @property
    def oplog(self) -> OpLog: ...
    @property
    def gate(self) -> RestoreGate: ...
    @property
    def retriever(self) -> Retriever: ...
    @property
    def twins(self) -> TwinIndex: ...
    @property
    def consolidation(self) -> Consolidation: ...
    @property
    def snapshots(self) -> Snapshotting: ...
    @property
    def seq(self) -> int: ...
    @property
    def is_open(self) -> bool: ...
    @property
    def index_cache_used(self) -> bool: ...

    def refresh_synonyms(self) -> None: ...


class Warmup:
    """Builds what calls need, in steps between them; `building_twins` says whether a twin
    build is under way (one at a time)."""

    def __init__(self, svc: WarmHost) -> None:
        self.svc = svc
        self.building_twins = False

    def warm_recall(self) -> None:
        """What a recall needs, so that the first one is answered at full speed: the
        retrieval indexes (loaded from memory-state.recall.cache by open when it belongs to
        the snapshot, else built here), jieba's dictionary and the Memory's words taught to
        it. A daemon runs this before it signals READY=1 (docs/reference.md)."""
        svc = self.svc
        with svc.lock:
            svc.state.ensure_index()
        tokenizer()
        with svc.lock:
            svc.refresh_synonyms()
            svc.retriever.teach_jieba()

    def giving_way(self, wait: float = 0.004, most: int = 25) -> Callable[[], None]:
        """The background warm-up's pause between batches: when calls came since the last
        pause (the operation count moved), wait until they stop, up to `most` waits, so a
        bot's writes right after a start are not slowed by a build sharing the interpreter
        with them (issue 24); a bot that never stops still lets the build go on."""
        svc = self.svc
        seen = svc.seq

        def pause() -> None:
            nonlocal seen
            for _ in range(most):
                if svc.seq == seen:
                    break
                seen = svc.seq
                time.sleep(wait)

        return pause

    def warm(self) -> None:
        """Build the retrieval indexes, load jieba, teach it the Memory's words, index the log
        and build the query text (a daemon runs this in the background after it is ready, so
        the first calls do not pay for it). The indexes are built in steps of 1,000 nodes under
        the lock, the text a 4,096-node piece at a time outside it, so calls are answered in
        between; a call that needs either finishes the build. A large Memory whose memories or
        indexes did not come from their caches is then snapshotted in the background, so the
        next start has both."""
        svc = self.svc
        while True:
            with svc.lock:
                if not svc.state.index_step():
                    break
            time.sleep(0.0005)  # let a waiting call take the lock
        tokenizer()
        kinds_of("")  # the kinds table, read once (some 20 ms), before a question needs it
        with svc.lock:
            svc.refresh_synonyms()
            svc.retriever.teach_jieba()
            cached = svc.store.cache_used and svc.index_cache_used
            if not cached and len(svc.state.nodes) >= nodecache.min_nodes() and \
                    svc.snapshots.thread is None and svc.is_open and not svc.gate.restoring:
                svc.snapshots.start()  # a large Memory without usable caches: the next start has them
        svc.oplog.warm()
        # last, the query text (it gives way to calls, so it may take a while: the log index
        # is not kept waiting behind it): each piece built outside the lock, kept under it, and
        # tried once; one whose memories changed while it was built is left to the next query
        # that needs it (a Memory written all the time would have its pieces built over and over)
        pause = self.giving_way()
        tried: set[Any] = set()
        while True:
            with svc.lock:
                wanted = svc.state.text_piece_wanted(tried)
            if wanted is None:
                break
            tried.add(wanted[0])
            made = build_text_piece(svc.state.nodes, wanted[1], pause)
            with svc.lock:
                svc.state.text_piece_made(*wanted, made)
        self.build_twins()

    def build_twins(self) -> None:
        """Index every current memory for the twin check (retrieval.twins), 100 at a time
        under the lock, giving way to calls between steps (the warm-up runs it last; a
        restore starts it in a thread of its own)."""
        svc = self.svc
        with svc.lock:
            if self.building_twins:
                return
            self.building_twins = svc.twins.building = True
        pause = self.giving_way()
        try:
            while True:
                with svc.lock:
                    # the index first, then the neighbourhoods of the memories it (re)indexed
                    if not svc.is_open or not (svc.twins.step(100) or svc.consolidation.step(100)):
                        break
                pause()
                time.sleep(0.0005)
        finally:
            with svc.lock:
                self.building_twins = svc.twins.building = False

    def build_twins_later(self, force: bool = False) -> None:
        """The twin index has more to do than a check does inline (after a restore), or a
        consolidation list found work left (`force`)."""
        svc = self.svc
        if not self.building_twins and svc.is_open:
            threading.Thread(target=self.build_twins, name="zcord-twins", daemon=True).start()
