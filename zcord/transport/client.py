"""Clients of zcord: `AsyncClient` (asyncio) and `Client` (blocking). The TUI, the CLI and
bots talk to the daemon only through this module.

Both speak JSON-RPC 2.0 lines over the Unix socket, do the MCP `initialize` handshake
(as the bot, or as an operator with `role="operator"`), time out requests and turn
errors into exceptions:

- a failed tool call or `zcor/…` method raises `ToolError(code, message, field)`;
- a protocol error raises `JsonRpcError(code, message, data)` (also importable as `RpcError`);
- no daemon raises `DaemonUnavailable`; a connection lost while a request was out
  raises `ConnectionLost` (the request may or may not have taken effect);
- a socket someone else could have planted (its directory writable by others, owned by
  another user in a place others can change, or answered by an unexpected uid) raises
  `UnsafeSocketError` before anything is sent.

`AsyncClient` reconnects with backoff, re-initializes and re-subscribes; requests made
while it is reconnecting wait (up to their timeout). `Client` reconnects on the next call.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import itertools
import json
import logging
import os
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .. import __version__
from ..core import protocol as P
from .client_calls import AsyncCalls, SyncCalls
from .paths import UnsafeSocket, check_client_socket, check_peer, client_socket

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 30.0
CONNECT_TIMEOUT = 5.0
READ_LIMIT = 256 << 20
"""Largest reply line a client accepts (a page of 100 full memories is a few MB)."""

Role = str  # "bot" | "operator"
NotificationHandler = Callable[[dict[str, Any]], Any]


class ClientError(Exception):
    """Base of every error this module raises."""


class DaemonUnavailable(ClientError):
    """No daemon answers on the socket."""


class UnsafeSocketError(DaemonUnavailable):
    """The socket fails the safety checks (zcord.transport.paths.check_client_socket); nothing was sent."""


def _checked_owner(path: Path) -> int:
    try:
        return check_client_socket(path)
    except UnsafeSocket as e:
        raise UnsafeSocketError(str(e)) from None


def _check_peer(sock: socket.socket, owner: int, path: Path) -> None:
    try:
        check_peer(sock, owner, path)
    except UnsafeSocket as e:
        raise UnsafeSocketError(str(e)) from None


class ConnectionLost(ClientError):
    """The connection dropped before the reply came; the request may have taken effect."""


class _NotSent(ConnectionLost):
    """The request never left the client (the connection was already gone)."""


class RequestTimeout(ClientError, TimeoutError):
    """No reply within the timeout; the request may still take effect."""


class JsonRpcError(ClientError):
    """A JSON-RPC error from the daemon (bad request, unknown method, internal error); not to
    be confused with zcord.core.protocol.RpcError, the daemon's side of the same error."""

    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


RpcError = JsonRpcError
"""The name bots, the CLI and tests import (kept; the class is JsonRpcError)."""


class ToolError(ClientError):
    """A tool call or `zcor/…` method failed; mirrors zcord's ZcorError."""

    def __init__(self, code: str, message: str, field: str | None = None, data: Any = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.data = data

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToolError:
        return cls(str(d.get("code", "error")), str(d.get("message", "")), d.get("field"), d.get("data"))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field is not None:
            out["field"] = self.field
        if self.data:
            out["data"] = self.data
        return out


def initialize_params(role: Role, client_name: str) -> dict[str, Any]:
    caps: dict[str, Any] = {}
    if role == P.OPERATOR:
        caps["experimental"] = {"zcor": {"role": P.OPERATOR}}
    return {"protocolVersion": P.SUPPORTED_VERSIONS[0], "capabilities": caps,
            "clientInfo": {"name": client_name, "version": __version__}}


def _raise_error(error: Any) -> None:
    if not isinstance(error, dict):
        raise JsonRpcError(P.INTERNAL_ERROR, f"malformed error from zcord: {error!r}")
    code = error.get("code")
    message = str(error.get("message", ""))
    data = error.get("data")
    if code == P.ZCOR_ERROR and isinstance(data, dict):
        raise ToolError.from_dict(data)
    raise JsonRpcError(code if isinstance(code, int) else P.INTERNAL_ERROR, message, data)


def tool_result(result: Any) -> dict[str, Any]:
    """The structured result of an MCP tools/call result, or ToolError when isError."""
    if not isinstance(result, dict):
        raise JsonRpcError(P.INTERNAL_ERROR, f"malformed tools/call result: {result!r}")
    structured = result.get("structuredContent")
    if result.get("isError"):
        if isinstance(structured, dict) and "message" in structured:
            raise ToolError.from_dict(structured)
        text = " ".join(c.get("text", "") for c in result.get("content", []) if isinstance(c, dict))
        raise ToolError("error", text)
    if isinstance(structured, dict):
        return structured
    for c in result.get("content", []):  # a server without structuredContent
        if isinstance(c, dict) and c.get("type") == "text":
            loaded: dict[str, Any] = json.loads(c["text"])
            return loaded
    return {}


class _AsyncMethods(AsyncCalls):
    """AsyncClient's hand-written calls (the rest are generated from the method table);
    AsyncClient provides `request`, `on_notification` and the subscription flag kept
    across reconnects."""

    _subscribed: bool
    on_notification: Callable[[str, NotificationHandler], None]

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None, *,
                        timeout: float | None = None, view: bool | None = False,
                        origin: dict[str, Any] | None = None) -> dict[str, Any]:
        """The tool's structured result; ToolError when the tool refuses or fails.

        view: (operators, read-only tools) a read made only to display something, which the
        daemon answers without recording it in the operation log; None: when the tool is one
        of this client's `view_tools`.
        """
        return tool_result(await self.request("tools/call", self._call_tool_params(name, arguments, view, origin),
                                              timeout=timeout))

    async def subscribe(self, handler: NotificationHandler | None = None) -> None:
        """Receive `zcor/changed` after every committed change (kept across reconnects)."""
        if handler is not None:
            self.on_notification("zcor/changed", handler)
        await self.request("zcor/subscribe")
        self._subscribed = True

    async def unsubscribe(self) -> None:
        self._subscribed = False
        await self.request("zcor/unsubscribe")


class AsyncClient(_AsyncMethods):
    """An asyncio client with concurrent requests, notifications and auto-reconnect.

    Usage:
        async with AsyncClient(role="operator") as c:
            node = await c.call_tool("zcor_memory_read", {"id": "m1"})
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, role: Role = P.BOT,
                 timeout: float = DEFAULT_TIMEOUT, connect_timeout: float = CONNECT_TIMEOUT,
                 reconnect: bool = True, max_backoff: float = 5.0, client_name: str = "zcor-client"):
        self.path = client_socket(path)
        self.role = role
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.reconnect = reconnect
        self.max_backoff = max_backoff
        self.client_name = client_name
        self.initialize_result: dict[str, Any] | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._handlers: dict[str, list[NotificationHandler]] = {}
        self._state_handlers: list[Callable[[bool], Any]] = []
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._reconnect_task: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self._closing = False
        self._started = False
        self._subscribed = False

    # -- lifetime ---------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    async def connect(self) -> AsyncClient:
        """Connect and initialize; raises DaemonUnavailable when nobody answers."""
        self._closing = False
        await self._open()
        self._started = True
        return self

    async def close(self) -> None:
        self._closing = True
        self._started = False
        if self._reconnect_task is not None:
            self._reconnect_task.cancel()
            try:
                await self._reconnect_task
            except (asyncio.CancelledError, Exception):
                pass
        await self._teardown(ConnectionLost("client closed"))

    async def __aenter__(self) -> AsyncClient:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def on_notification(self, method: str, handler: NotificationHandler) -> None:
        """Call handler(params) for each notification `method` (sync or async handler)."""
        self._handlers.setdefault(method, []).append(handler)

    def on_connection_change(self, handler: Callable[[bool], Any]) -> None:
        """Call handler(True/False) when the connection comes up or drops."""
        self._state_handlers.append(handler)

    async def _open(self) -> None:
        owner = _checked_owner(self.path)
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_unix_connection(str(self.path), limit=READ_LIMIT), self.connect_timeout)
        except (TimeoutError, OSError) as e:
            raise DaemonUnavailable(f"cannot reach zcord at {self.path}: "
                                    f"{getattr(e, 'strerror', None) or e or 'timed out'}") from None
        try:
            _check_peer(writer.get_extra_info("socket"), owner, self.path)
        except UnsafeSocketError:
            writer.close()
            raise
        self._writer = writer
        self._reader_task = asyncio.create_task(self._read_loop(reader, writer))
        try:
            self.initialize_result = await self._raw_request(
                "initialize", initialize_params(self.role, self.client_name), self.connect_timeout)
            await self._send(P.notification("notifications/initialized"))
            if self._subscribed:
                await self._raw_request("zcor/subscribe", {}, self.connect_timeout)
        except BaseException:
            await self._teardown(ConnectionLost("initialize failed"))
            raise
        self._connected.set()
        self._emit_state(True)

    async def _teardown(self, reason: ClientError) -> None:
        self._connected.clear()
        writer, self._writer = self._writer, None
        task, self._reader_task = self._reader_task, None
        if writer is not None:
            writer.close()
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        self._fail_pending(reason)

    def _fail_pending(self, reason: ClientError) -> None:
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(reason)

    def _emit_state(self, up: bool) -> None:
        for handler in list(self._state_handlers):
            try:
                out = handler(up)
                if inspect.isawaitable(out):
                    asyncio.ensure_future(out)
            except Exception:
                log.exception("connection state handler failed")

    async def _read_loop(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                try:
                    msg = json.loads(line)
                except ValueError:
                    log.warning("zcord sent a line that is not JSON; ignored")
                    continue
                if isinstance(msg, dict):
                    self._dispatch(msg)
        except (ConnectionError, OSError, asyncio.LimitOverrunError, ValueError) as e:
            log.debug("connection to zcord failed: %r", e)
        if self._writer is writer:
            self._writer = None
            self._connected.clear()
            self._fail_pending(ConnectionLost("the connection to zcord was lost; the request may or may "
                                              "not have taken effect"))
            writer.close()
            self._emit_state(False)
            if self.reconnect and not self._closing:
                self._reconnect_task = asyncio.create_task(self._reconnect_loop())

    def _dispatch(self, msg: dict[str, Any]) -> None:
        if "method" in msg and "id" not in msg:
            params = msg.get("params") or {}
            for handler in list(self._handlers.get(msg["method"], ())):
                try:
                    out = handler(params)
                    if inspect.isawaitable(out):
                        asyncio.ensure_future(out)
                except Exception:
                    log.exception("notification handler for %s failed", msg["method"])
            return
        if msg.get("id") is None and "error" in msg:
            # about the connection, not one request (too many connections, no initialize in time)
            try:
                _raise_error(msg["error"])
            except ClientError as e:
                self._fail_pending(e)
            return
        fut = self._pending.pop(msg.get("id"), None)  # type: ignore[arg-type]
        if fut is None or fut.done():
            return
        if "error" in msg:
            try:
                _raise_error(msg["error"])
            except ClientError as e:
                fut.set_exception(e)
        else:
            fut.set_result(msg.get("result"))

    async def _reconnect_loop(self) -> None:
        delay = 0.05
        while not self._closing:
            await asyncio.sleep(delay)
            try:
                await self._open()
                log.info("reconnected to zcord at %s", self.path)
                return
            except (ClientError, OSError) as e:
                log.debug("reconnect failed: %s", e)
            delay = min(delay * 2, self.max_backoff)

    # -- requests -----------------------------------------------------------------------

    async def _send(self, message: dict[str, Any]) -> None:
        writer = self._writer
        if writer is None:
            raise _NotSent("not connected to zcord")
        try:
            writer.write(P.encode(message))
            await writer.drain()
        except (ConnectionError, OSError) as e:
            # the transport was already gone, so the message never left this process
            if self._writer is writer:
                self._connected.clear()
            raise _NotSent(f"the connection to zcord was lost: {e}") from None

    async def _raw_request(self, method: str, params: Any, timeout: float | None) -> Any:
        msg_id = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = fut
        try:
            await self._send(P.request(msg_id, method, params))
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise RequestTimeout(f"zcord did not answer {method} within {timeout:g}s") from None
        finally:
            self._pending.pop(msg_id, None)

    async def request(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        """Send one request and return its result (raises ToolError/JsonRpcError/…).

        While the client is reconnecting the request waits; a request that could not be
        sent at all is sent again on the new connection, one that was sent is not.
        """
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            if not self._connected.is_set():
                await self._wait_connected(deadline)
            try:
                return await self._raw_request(method, params, max(deadline - time.monotonic(), 0.001))
            except _NotSent:
                if self._closing or not self.reconnect:
                    raise
                await asyncio.sleep(0)  # let the reader see the end and start reconnecting

    async def _wait_connected(self, deadline: float) -> None:
        if self._closing:
            raise ConnectionLost(f"the connection to zcord at {self.path} is closed")
        if not self._started:  # never reached (or connect() not called yet)
            raise ConnectionLost(f"not connected to zcord at {self.path}: nothing has answered there yet "
                                 f"(is zcord running? `zcor status` checks)")
        if not self.reconnect:
            raise ConnectionLost(f"the connection to zcord at {self.path} was lost")
        try:
            await asyncio.wait_for(self._connected.wait(), max(deadline - time.monotonic(), 0.001))
        except TimeoutError:
            raise DaemonUnavailable(f"zcord at {self.path} is not reachable") from None

    async def notify(self, method: str, params: Any = None) -> None:
        await self._send(P.notification(method, params))


async def connect(path: str | os.PathLike[str] | None = None, role: Role = P.BOT,
                  timeout: float = DEFAULT_TIMEOUT, **kwargs: Any) -> AsyncClient:
    """A connected, initialized AsyncClient."""
    return await AsyncClient(path, role=role, timeout=timeout, **kwargs).connect()


class Client(SyncCalls):
    """A blocking client: one request at a time over its own socket (not thread-safe; give
    each thread its own).

    Notifications that arrive while waiting for a reply are passed to the handlers
    registered with `on_notification`, or picked up with `wait_notification`.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, role: Role = P.BOT,
                 timeout: float = DEFAULT_TIMEOUT, connect_timeout: float = CONNECT_TIMEOUT,
                 client_name: str = "zcor-client"):
        self.path = client_socket(path)
        self.role = role
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.client_name = client_name
        self.initialize_result: dict[str, Any] | None = None
        self._sock: socket.socket | None = None
        self._buf = bytearray()
        self._ids = itertools.count(1)
        self._handlers: dict[str, list[NotificationHandler]] = {}
        # notifications nobody handled yet; the oldest are dropped if nobody ever asks
        self._inbox: collections.deque[dict[str, Any]] = collections.deque(maxlen=10_000)
        self._subscribed = False

    def connect(self) -> Client:
        self.close()
        owner = _checked_owner(self.path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.connect_timeout)
        try:
            sock.connect(str(self.path))
            _check_peer(sock, owner, self.path)
        except OSError as e:
            sock.close()
            raise DaemonUnavailable(f"cannot reach zcord at {self.path}: {e.strerror or e}") from None
        except UnsafeSocketError:
            sock.close()
            raise
        self._sock = sock
        self._buf.clear()
        try:
            self.initialize_result = self._request("initialize", initialize_params(self.role, self.client_name),
                                                   self.connect_timeout)
            self._sendall(P.encode(P.notification("notifications/initialized")))
            if self._subscribed:
                self._request("zcor/subscribe", {}, self.connect_timeout)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def __enter__(self) -> Client:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def on_notification(self, method: str, handler: NotificationHandler) -> None:
        self._handlers.setdefault(method, []).append(handler)

    # -- wire ------------------------------------------------------------------------------

    def _sendall(self, data: bytes) -> None:
        assert self._sock is not None
        try:
            self._sock.sendall(data)
        except OSError as e:
            refusal = self._pending_refusal()
            self.close()
            if refusal is not None:  # zcord said why before it closed (too many connections)
                _raise_error(refusal)
            raise ConnectionLost(f"the connection to zcord was lost: {e}") from None

    def _pending_refusal(self) -> dict[str, Any] | None:
        """An error about the connection (id null) that zcord sent before closing it, if it
        is already in the socket's receive buffer."""
        sock = self._sock
        if sock is None:
            return None
        try:
            sock.settimeout(0.2)
            while b"\n" not in self._buf:
                chunk = sock.recv(1 << 16)
                if not chunk:
                    break
                self._buf += chunk
        except OSError:
            pass
        for line in bytes(self._buf).splitlines():
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and msg.get("id") is None and isinstance(msg.get("error"), dict):
                error: dict[str, Any] = msg["error"]
                return error
        return None

    def _read_message(self, deadline: float | None) -> dict[str, Any] | None:
        """The next message, or None when the deadline passes first."""
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line = bytes(self._buf[:nl])
                del self._buf[:nl + 1]
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if isinstance(msg, dict):
                    return msg
                continue
            if self._sock is None:
                raise ConnectionLost("not connected to zcord")
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return None
            self._sock.settimeout(remaining)
            try:
                chunk = self._sock.recv(1 << 16)
            except TimeoutError:
                return None
            except OSError as e:
                self.close()
                raise ConnectionLost(f"the connection to zcord was lost: {e}") from None
            if not chunk:
                self.close()
                raise ConnectionLost("zcord closed the connection; the request may or may not have "
                                     "taken effect")
            self._buf += chunk
            if len(self._buf) > READ_LIMIT:
                self.close()
                raise ConnectionLost("zcord sent a reply larger than the client accepts")

    def _deliver(self, msg: dict[str, Any]) -> None:
        handlers = self._handlers.get(msg["method"])
        if not handlers:
            self._inbox.append(msg)
            return
        for handler in handlers:
            try:
                handler(msg.get("params") or {})
            except Exception:
                log.exception("notification handler for %s failed", msg["method"])

    def _request(self, method: str, params: Any, timeout: float) -> Any:
        msg_id = next(self._ids)
        self._sendall(P.encode(P.request(msg_id, method, params)))
        deadline = time.monotonic() + timeout
        while True:
            msg = self._read_message(deadline)
            if msg is None:
                # the reply may still come; a fresh connection keeps ids unambiguous
                self.close()
                raise RequestTimeout(f"zcord did not answer {method} within {timeout:g}s")
            if "method" in msg and "id" not in msg:
                self._deliver(msg)
                continue
            if msg.get("id") is None and "error" in msg:
                self.close()  # about the connection (too many connections, no initialize in time)
                _raise_error(msg["error"])
            if msg.get("id") != msg_id:
                continue
            if "error" in msg:
                _raise_error(msg["error"])
            return msg.get("result")

    def request(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        """Send one request and return its result; reconnects first if the last one was lost."""
        if self._sock is None:
            self.connect()
        return self._request(method, params, self.timeout if timeout is None else timeout)

    def wait_notification(self, timeout: float) -> dict[str, Any] | None:
        """The next notification without a registered handler ({method, params}), or None."""
        if self._inbox:
            return self._inbox.popleft()
        if self._sock is None:
            self.connect()
        deadline = time.monotonic() + timeout
        while True:
            msg = self._read_message(deadline)
            if msg is None:
                return None
            if "method" in msg and "id" not in msg:
                self._deliver(msg)
                if self._inbox:
                    return self._inbox.popleft()

    # -- hand-written calls (the rest are generated from the method table) ------------------

    def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None, *,
                  timeout: float | None = None, view: bool | None = False,
                  origin: dict[str, Any] | None = None) -> dict[str, Any]:
        """The tool's structured result (see AsyncClient.call_tool)."""
        return tool_result(self.request("tools/call", self._call_tool_params(name, arguments, view, origin),
                                        timeout=timeout))

    def subscribe(self, handler: NotificationHandler | None = None) -> None:
        """Receive `zcor/changed` after every committed change (kept across reconnects)."""
        if handler is not None:
            self.on_notification("zcor/changed", handler)
        self.request("zcor/subscribe")
        self._subscribed = True

    def unsubscribe(self) -> None:
        self._subscribed = False
        self.request("zcor/unsubscribe")


VIEW_TOOLS = P.VIEW_TOOLS
"""Read-only tools an operator may call with `view=True` (answered, not recorded)."""

__all__ = [
    "VIEW_TOOLS", "AsyncClient", "Client", "connect", "ClientError", "DaemonUnavailable", "UnsafeSocketError", "ConnectionLost",
    "RequestTimeout", "JsonRpcError", "RpcError", "ToolError", "tool_result",
]
