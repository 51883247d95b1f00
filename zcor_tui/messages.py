"""Messages of the zcor TUI: small past-tense dataclasses.

The daemon client calls back from its reader task; the App turns those callbacks into
these messages so every reaction runs in Textual's message loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from textual.message import Message


@dataclass
class MemoryChanged(Message):
    """zcord committed a change (from the bot, this TUI or another operator)."""

    event: dict[str, Any] = field(default_factory=dict)
    """The `zcor/changed` params: `{tool, actor, seq, changes: [{kind, target}]}`."""

    @property
    def kinds(self) -> set[str]:
        return {str(c.get("kind", "")) for c in self.event.get("changes", ())}

    def touches(self, *prefixes: str) -> bool:
        """Whether any change kind starts with one of the prefixes (`node.`, `relationship.`…)."""
        return any(k.startswith(prefixes) for k in self.kinds) or not self.kinds


@dataclass
class ConnectionChanged(Message):
    """The connection to zcord came up (initial connect or reconnect) or dropped."""

    connected: bool


@dataclass
class NodeRequested(Message):
    """Some screen asked to show a memory in Browse (jump to node)."""

    node_id: str
