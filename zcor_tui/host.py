"""The app as its screens use it: `ZcorHost`, the base of ZcorApp (zcor_tui.app).

The screens name this class, not ZcorApp: app.py imports every screen, so a screen that
imported app.py (even for an annotation) would close a circle.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

from textual.app import App
from textual.reactive import reactive
from textual.signal import Signal

from zcord.client import (
    VIEW_TOOLS,
    AsyncClient,
    ClientError,
    ToolError,
    for_operator,
    shown,
)

from .messages import MemoryChanged

T = TypeVar("T")

TOAST_SECONDS = 8.0
"""The longest a toast stays (app.tcss keeps toasts above the status line and the footer)."""


class ZcorHost(App[None]):
    """What the screens and widgets use of the app: the client, the calls that notify instead
    of raising (`tool`, `try_tool`, `rpc`), the signals, the status and the relationship
    cache. ZcorApp adds the screens, the keys and the connection's lifecycle."""

    link_state: reactive[str] = reactive("connecting")
    """connecting | connected | unreachable | lost"""
    link_detail: reactive[str] = reactive("")
    status: reactive[dict[str, Any] | None] = reactive(None)
    """The last `zcor/status` (counts, memoryDir, important ids)."""
    relationships_version: reactive[int] = reactive(0)
    """Bumped whenever the relationship cache was reloaded."""

    def __init__(self, client: AsyncClient, *, close_client: bool = True):
        """Args:
            client: an operator AsyncClient, not yet connected (ZcorApp connects it).
            close_client: close the client when the app exits.
        """
        super().__init__()
        self.client = client
        client.view_tools = VIEW_TOOLS  # the read-only tools' calls are display reads, never recorded
        self.close_client = close_client
        self.memory_changed: Signal[MemoryChanged] = Signal(self, "memory-changed")
        self.connection_changed: Signal[bool] = Signal(self, "connection-changed")
        self.relationships: dict[str, dict[str, Any]] = {}
        self.selected_node: tuple[str, str] | None = None
        """(id, title) under Browse's cursor: the first choice when picking a memory elsewhere."""
        self.pending_reveal: str | None = None

    @property
    def connected(self) -> bool:
        return self.link_state == "connected"

    @property
    def important(self) -> list[str]:
        return list((self.status or {}).get("important") or [])

    def display_path(self, path: str) -> str:
        """How the status line shows the Memory directory (a hook for fixed snapshots)."""
        return path

    def links_for(self, node_id: str) -> list[dict[str, Any]]:
        """Relationships whose memoryNodeId is this node (from the cache)."""
        return [r for r in self.relationships.values() if r.get("memoryNodeId") == node_id]

    async def tool(self, call: Coroutine[Any, Any, T], *, quiet: bool = False) -> T | None:
        """Await a typed tool call of the client (`app.client.zcor_memory_read({...})`); on any
        daemon error notify (unless quiet) and return None."""
        result, err = await self.try_tool(call)
        if err is not None and not quiet:
            self.show_error(err, getattr(call, "__name__", "call"))
        return result

    async def try_tool(self, call: Coroutine[Any, Any, T]) -> tuple[T | None, ClientError | None]:
        """Await a typed tool call and return (result, None) or (None, the error); never raises
        ClientError.

        Read-only tools (VIEW_TOOLS, the client's view_tools) are called as display reads, which
        zcord does not record: the operator's browsing must not bury what the bot did in
        History. Changes are recorded.
        """
        if not self.client.connected:
            call.close()
            return None, ClientError("zcord is not connected; the status line shows when it is back")
        try:
            return await call, None
        except ClientError as e:
            return None, e

    async def rpc(self, call: Coroutine[Any, Any, T], *, quiet: bool = False) -> T | None:
        """Await a typed operator call of the client (`app.client.status()`, …); None on error."""
        if not self.client.connected:
            call.close()
            if not quiet:
                self.notify("zcord is not connected; the status line shows when it is back",
                            severity="warning")
            return None
        try:
            return await call
        except ClientError as e:
            if not quiet:
                self.show_error(e, getattr(call, "__name__", "call"))
            return None

    def notify(self, message: str, *, title: str = "", severity: Any = "information", timeout: float | None = None,
               markup: bool = False) -> None:
        """A toast whose text is never read as markup (messages quote Memory text: a title
        with `[/]` would crash the app) and never carries a terminal control."""
        super().notify(shown(message), title=shown(title, lines=False), severity=severity,
                       timeout=min(timeout, TOAST_SECONDS) if timeout else None, markup=False)

    def show_error(self, err: ClientError, what: str) -> None:
        if isinstance(err, ToolError):
            self.notify(for_operator(err.code, err.message, data=err.data), title=f"{what}: {err.code}", severity="error",
                        timeout=10)
        else:
            self.notify(str(err), title=what, severity="error", timeout=10)
