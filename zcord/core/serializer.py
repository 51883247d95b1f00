"""The bytes of memory-state.json: StateSerializer, and StateView (what a snapshot writes,
copied from the state between calls)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

from .layout import segment_last_id
from .models import STATE_VERSION, Change, Node, Relationship
from .state import MemoryState


class StateSerializer:
    """Builds the bytes of memory-state.json; keeps the encoded inline history between calls
    (history entries never change once written). Nodes are encoded afresh each time: the
    snapshot is written in the background, and a per-node cache would double the RAM."""

    def __init__(self) -> None:
        self._history = bytearray()
        self._history_count = 0
        self._history_tail: Change | None = None

    def encode_history(self, history: list[Change]) -> None:
        """Bring the encoded inline history up to `history` (encoding only the changes added
        since the last call, unless the history is no longer the one encoded)."""
        n = self._history_count
        if n > len(history) or (n and history[n - 1] is not self._history_tail):
            # the encoded prefix is not this history's prefix (rolled back, or sealed)
            self._history = bytearray()
            self._history_count = 0
        for change in history[self._history_count:]:
            if self._history:
                self._history += b",\n"
            self._history += change.model_dump_json(by_alias=True).encode()
        self._history_count = len(history)
        self._history_tail = history[-1] if history else None

    @property
    def inline_history_bytes(self) -> int:
        return len(self._history)

    def history_blob(self) -> bytes:
        """The encoded inline history as it goes in the file's history array."""
        return bytes(self._history)

    def reset_history(self) -> None:
        self._history = bytearray()
        self._history_count = 0
        self._history_tail = None

    def history_lines(self) -> bytes:
        """The encoded inline history as JSON lines (compact JSON has no raw newlines)."""
        return bytes(self._history).replace(b",\n", b"\n") + b"\n"

    def encode(self, state: MemoryState | StateView, sealed: list[str] | None = None,
               history_blob: bytes | None = None) -> bytes:
        """The state file's bytes.

        Args:
            sealed: segment names to write instead of the state's (used when sealing).
            history_blob: inline history to write instead of the state's encoded one.
        """
        return b"".join(self.encode_parts(state, sealed, history_blob))

    def encode_parts(self, state: MemoryState | StateView, sealed: list[str] | None = None,
                     history_blob: bytes | None = None) -> Iterator[bytes]:
        """The state file's bytes in pieces of up to 1,024 nodes (written as they come, so a
        snapshot never holds the whole file in memory)."""
        if history_blob is None:
            self.encode_history(state.history)
            history_blob = bytes(self._history)
        segments = state.history_segments if sealed is None else sealed
        yield b'{"version":%d,"nextId":%d,\n"important":' % (STATE_VERSION, state.next_id)
        yield json.dumps(state.important, ensure_ascii=False).encode()
        yield b',\n"nodes":[\n'
        part: list[bytes] = []
        first = True
        for node in state.nodes.values():
            part.append(node.model_dump_json(by_alias=True).encode())
            if len(part) == 1024:
                yield (b"" if first else b",\n") + b",\n".join(part)
                first, part = False, []
                time.sleep(0)  # let a call in another thread have the interpreter
        if part:
            yield (b"" if first else b",\n") + b",\n".join(part)
        yield b'],\n"relationships":[\n'
        yield b",\n".join(rel.model_dump_json(by_alias=True).encode() for rel in state.relationships.values())
        yield b"]"
        scopes = getattr(state, "scopes", None)
        if scopes:  # memories of private conversations (issue 34); absent when there are none
            yield b',\n"scopes":' + json.dumps(scopes, ensure_ascii=False).encode()
        yield b',\n"historySegments":' + json.dumps(segments).encode()
        yield b',\n"history":[\n'
        yield history_blob
        yield b"]}\n"


@dataclass
class StateView:
    """What a snapshot writes, copied from the state between calls (nodes and relationships
    are immutable objects, so copying the dicts is enough)."""

    nodes: dict[str, Node]
    important: list[str]
    relationships: dict[str, Relationship]
    history: list[Change]
    next_id: int
    history_segments: list[str]
    scopes: dict[str, str]

    @classmethod
    def of(cls, state: MemoryState) -> StateView:
        return cls(dict(state.nodes), list(state.important), dict(state.relationships), list(state.history),
                   state.next_id, list(state.history_segments), dict(state.scopes))

    @property
    def last_change_id(self) -> int:
        if self.history:
            return self.history[-1].change_id
        if not self.history_segments:
            return 0
        return segment_last_id(self.history_segments[-1])
