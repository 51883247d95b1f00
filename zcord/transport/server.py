"""The zcord transport: an asyncio Unix-socket server that dispatches into one Service.

Every Service call runs in a single worker thread, so mutations are serialized and the
event loop never blocks on disk or on the Service lock; tools that wait on the LLM
(SLOW_TOOLS) run in threads of their own so nothing queues behind them. Requests on one
connection are handled concurrently and may be answered out of order.

Bot-facing methods: MCP (`initialize`, `ping`, `tools/list`, `tools/call`) and
`zcor/prefix`, `zcor/recall`, `zcor/context`. Operator methods (a client that says
`capabilities.experimental.zcor.role = "operator"` at initialize): `zcor/status`,
`zcor/config/get`, `zcor/config/set`, `zcor/subscribe`, `zcor/unsubscribe`,
`zcor/backups/list`, `zcor/backups/preview`, `zcor/synonyms/list`, `zcor/recall/explain`, `zcor/reload`,
`zcor/history/query`; and `tools/call` with `_meta: {"zcor/view": true}` (an unrecorded
display read).

Roles come from the kernel: the operator role is granted only when the peer's
credentials (SO_PEERCRED, SO_PEERGROUPS) are zcord's own uid, root, or a member of the
configured operator group. `initialize` happens once per connection; nothing but `ping`
is served before it.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import gc
import grp
import json
import logging
import os
import pwd
import signal
import socket
import stat
import struct
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from .. import __version__
from . import mcp_extras
from ..service import undo
from ..core import protocol as P
from . import systemd
from ..core.errors import InvalidArgument, MemoryDirInUse, ZcorError
from .paths import UnsafeSocket, check_daemon_socket_dir, ensure_socket_dir
from ..service.service import RestoreInProgress, Service
from ..core.store import BOT_BACKUP_RE
from ..service.tools import TOOLS, declared_tools

log = logging.getLogger("zcord")

READ_CHUNK = 1 << 16
MAX_IN_FLIGHT = 64
"""Requests one connection may have running at once; more wait (the reader pauses)."""
MAX_OUTPUT_BUFFER = 32 << 20
"""A client that lets this much unread output pile up is disconnected (more than the
largest single reply, a page of 100 history records)."""
MAX_TOTAL_OUTPUT = 128 << 20
"""Unread output of all clients together; past it the slowest reader is disconnected."""
TOTAL_CHECK_FROM = 1 << 20
"""A connection's buffer below this cannot push the total over (checked only above it)."""
ACCEPT_ERROR_LOG_INTERVAL = 1.0
SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)
BEFORE_INITIALIZE = frozenset({"initialize", "ping"})
SHUTDOWN_GRACE = 30.0
SLOW_TOOLS = frozenset({"zcor_memory_search"})
"""Tools that wait on the network (the LLM). They run outside the worker, so reads and
writes never queue behind them; Service.call must not hold its lock while it waits."""
MAX_SLOW_CALLS = 4
LONG_TOOLS = frozenset({"zcor_memory_restore", "zcor_memory_history", "zcor_memory_backup"})
"""Tools that can take seconds without the Service lock (parsing a backup and writing the
new state, building the history index, writing a backup): they run in threads of their
own, like SLOW_TOOLS, so the worker keeps answering reads and the watchdog keeps being fed."""
MAX_LONG_CALLS = 2

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_IN_USE = 2


class SocketInUse(Exception):
    """Another live daemon answers on the socket path, or the path is not a socket."""


class PeerCred:
    """The kernel's word on who is at the other end of a connection."""

    def __init__(self, pid: int, uid: int, gid: int, groups: list[int] | None):
        self.pid, self.uid, self.gid, self.groups = pid, uid, gid, groups

    @classmethod
    def of(cls, sock: socket.socket | None) -> "PeerCred | None":
        if sock is None:
            return None
        try:
            pid, uid, gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                                struct.calcsize("3i")))
        except OSError:
            return None
        groups: list[int] | None
        try:
            raw = sock.getsockopt(socket.SOL_SOCKET, SO_PEERGROUPS, 1024)
            groups = list(struct.unpack(f"{len(raw) // 4}I", raw[:len(raw) // 4 * 4]))
        except OSError:  # an old kernel, or more groups than fit: the group database decides
            groups = None
        return cls(pid, uid, gid, groups)


def operator_refusal(peer: PeerCred | None, group: str) -> str | None:
    """Why this peer may not be the operator, or None when it may (SPEC §5 roles)."""
    me = os.geteuid()
    if peer is None:
        return ("the operator role is refused: zcord cannot learn who is connected (no SO_PEERCRED on this "
                "socket)")
    if peer.uid in (0, me):
        return None
    try:
        g = grp.getgrnam(group)
    except KeyError:
        return (f"the operator role is refused: uid {peer.uid} is not zcord's user (uid {me}) nor root, and "
                f"the operator group {group!r} does not exist on this host")
    if peer.gid == g.gr_gid or (peer.groups is not None and g.gr_gid in peer.groups):
        return None
    if peer.groups is None:
        try:
            if pwd.getpwuid(peer.uid).pw_name in g.gr_mem:
                return None
        except KeyError:
            pass
    return (f"the operator role is refused: only zcord's own user (uid {me}), root and members of the "
            f"operator group {group!r} may be the operator, and uid {peer.uid} is none of them. Connect "
            f"without asking for a role to be the bot, or have an administrator run "
            f"`usermod -aG {group} USER`.")


class Connection:
    """One client: its role, its subscription and its in-flight requests."""

    _next_id = 0

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        Connection._next_id += 1
        self.id = Connection._next_id
        self.reader = reader
        self.writer = writer
        self.role = P.BOT
        self.initialized = False
        self.subscribed = False
        self.slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        self.tasks: set[asyncio.Task] = set()
        self.task: asyncio.Task | None = None
        self.reading = False
        self.peer = PeerCred.of(writer.get_extra_info("socket"))
        self.daemon: "Daemon | None" = None

    @property
    def actor(self) -> str:
        return "operator" if self.role == P.OPERATOR else "model"

    def send(self, message: dict[str, Any]) -> None:
        self.send_bytes(P.encode(message))

    def send_bytes(self, data: bytes) -> None:
        if self.writer.is_closing():
            return
        self.writer.write(data)
        transport = self.writer.transport
        size = transport.get_write_buffer_size()
        if size > MAX_OUTPUT_BUFFER:
            log.warning("connection %d: client is not reading its replies (%d MiB unread); disconnecting",
                        self.id, size >> 20)
            transport.abort()
        elif size > TOTAL_CHECK_FROM and self.daemon is not None:
            self.daemon.check_total_output()


Handler = Callable[[Connection, dict[str, Any]], Awaitable[Any]]


class Worker:
    """The one thread that runs Service calls, in submission order.

    Like ThreadPoolExecutor(max_workers=1), but results travel back to the event loop in
    batches: one loop wake-up delivers every result finished meanwhile, which matters when
    many clients are busy (each wake-up costs a system call on both sides).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self._jobs: collections.deque = collections.deque()
        self._cv = threading.Condition(threading.Lock())
        self._done: list[tuple[asyncio.Future, bool, Any]] = []
        self._done_lock = threading.Lock()
        self._wake_posted = False
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="zcord-worker", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future:
        fut = self.loop.create_future()
        with self._cv:
            if self._stopping:
                raise RuntimeError("the worker has stopped")
            self._jobs.append((fut, fn, args))
            self._cv.notify()
        return fut

    def stop(self, timeout: float | None = None) -> None:
        """Run what was submitted, then end the thread."""
        with self._cv:
            self._stopping = True
            self._cv.notify()
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._jobs and not self._stopping:
                    self._cv.wait()
                if not self._jobs:
                    return
                batch = list(self._jobs)
                self._jobs.clear()
            for fut, fn, args in batch:
                try:
                    ok, value = True, fn(*args)
                except BaseException as e:  # handed to the awaiting request
                    ok, value = False, e
                self._finish(fut, ok, value)

    def _finish(self, fut: asyncio.Future, ok: bool, value: Any) -> None:
        with self._done_lock:
            self._done.append((fut, ok, value))
            if self._wake_posted:
                return
            self._wake_posted = True
        try:
            self.loop.call_soon_threadsafe(self._deliver)
        except RuntimeError:
            pass  # the loop is closed: nobody is waiting any more

    def _deliver(self) -> None:
        with self._done_lock:
            done, self._done = self._done, []
            self._wake_posted = False
        for fut, ok, value in done:
            if fut.done():
                continue
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)


class Daemon:
    """Serves one open Service on one listening socket until stopped."""

    def __init__(self, service: Service, listener: socket.socket, socket_path: Path | None,
                 owns_socket: bool = True):
        self.service = service
        self.listener = listener
        self.socket_path = socket_path
        self.owns_socket = owns_socket
        self.worker: Worker | None = None
        self._slow_slots: asyncio.Semaphore | None = None
        self._long_slots: asyncio.Semaphore | None = None
        self.conns: set[Connection] = set()
        self.started = time.monotonic()
        self.loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._server: asyncio.AbstractServer | None = None
        self._rel_memory = service.config.relationship_memory
        self._declared_names: dict[bool, frozenset[str]] = {}
        self._tool_lists: dict[tuple[bool, str], P.RawJSON] = {}
        self._socket_ino = _inode(socket_path) if owns_socket and socket_path else None
        self._last_accept_error = 0.0
        self._accept_errors_quiet = 0
        self.methods: dict[str, tuple[Handler, bool]] = {
            "initialize": (self._initialize, False),
            "ping": (self._ping, False),
            "tools/list": (self._tools_list, False),
            "tools/call": (self._tools_call, False),
            "zcor/prefix": (self._prefix, False),
            "zcor/recall": (self._recall, False),
            "zcor/context": (self._context, False),
            "zcor/status": (self._status, True),
            "zcor/config/get": (self._config_get, True),
            "zcor/config/set": (self._config_set, True),
            "zcor/subscribe": (self._subscribe, True),
            "zcor/unsubscribe": (self._unsubscribe, True),
            "zcor/backups/list": (self._backups_list, True),
            "zcor/backups/preview": (self._backups_preview, True),
            "zcor/synonyms/list": (self._synonyms_list, True),
            "zcor/synonyms/set": (self._synonyms_set, True),
            "zcor/llm": (self._llm, False),
            "zcor/recall/explain": (self._recall_explain, True),
            "zcor/reload": (self._reload_method, True),
            "zcor/snapshot": (self._snapshot_method, True),
            "zcor/history/revert": (self._history_revert, True),
            "zcor/history/reinstate": (self._history_reinstate, True),
            "zcor/history/versions": (self._history_versions, True),
            "zcor/history/at": (self._history_at, True),
            "zcor/persona/get": (self._persona_get, True),
            "zcor/persona/set": (self._persona_set, True),
            "zcor/history/query": (self._history_query, True),
            # MCP prompts and resources: recall and the prefix for hosts that speak only MCP
            "prompts/list": (self._prompts_list, False),
            "prompts/get": (self._prompts_get, False),
            "resources/list": (self._resources_list, False),
            "resources/templates/list": (self._resource_templates_list, False),
            "resources/read": (self._resources_read, False),
        }

    # -- lifetime ---------------------------------------------------------------------

    async def serve(self) -> None:
        """Accept clients until SIGTERM/SIGINT (or stop()), then shut down cleanly."""
        self.loop = asyncio.get_running_loop()
        self.worker = Worker(self.loop)
        self.service.worker_thread = self.worker._thread  # a change held by a restore waits in _work
        self._stop = asyncio.Event()
        self._slow_slots = asyncio.Semaphore(MAX_SLOW_CALLS)
        self._long_slots = asyncio.Semaphore(MAX_LONG_CALLS)
        self.service.listeners.append(self._on_change)
        self.loop.set_exception_handler(self._loop_exception)
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.loop.add_signal_handler(sig, self.stop)
        self.loop.add_signal_handler(signal.SIGHUP, self._on_sighup)
        self._server = await asyncio.start_unix_server(self._on_client, sock=self.listener)
        watchdog = None
        interval = systemd.watchdog_interval()
        if interval:
            watchdog = asyncio.create_task(self._watchdog(interval))
        st = self.service.status()
        where = self.socket_path or "an activated socket"
        systemd.notify("READY=1", f"STATUS=Serving {st['nodes']} memories on {where}", f"MAINPID={os.getpid()}")
        log.info("ready: %s on %s (%d memories)", self.service.dir, where, st["nodes"])
        # load jieba, teach it the Memory's words and index the log now rather than inside the
        # first write, recall or history query (a second or more on a large Memory)
        threading.Thread(target=_warm_up, args=(self.service,), name="zcord-warmup", daemon=True).start()
        try:
            await self._stop.wait()
        finally:
            systemd.notify("STOPPING=1", "STATUS=Shutting down")
            log.info("stopping")
            if watchdog:
                watchdog.cancel()
            await self._shutdown()

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    async def _shutdown(self) -> None:
        """Stop accepting and reading; every connection finishes its in-flight calls and closes."""
        assert self._server is not None
        self._server.close()
        conns = list(self.conns)
        for conn in conns:
            if conn.reading and conn.task is not None:
                conn.task.cancel()
        in_flight = sum(len(c.tasks) for c in conns)
        if in_flight:
            log.info("finishing %d in-flight request(s)", in_flight)
        handlers = [c.task for c in conns if c.task is not None]
        if handlers:
            _, late = await asyncio.wait(handlers, timeout=SHUTDOWN_GRACE)
            for task in late:
                task.cancel()
            if late:
                log.warning("%d connection(s) did not finish within %gs; dropped", len(late), SHUTDOWN_GRACE)
                await asyncio.wait(late, timeout=5)
        if self._on_change in self.service.listeners:
            self.service.listeners.remove(self._on_change)
        assert self.worker is not None
        await self.loop.run_in_executor(None, self.worker.stop, SHUTDOWN_GRACE)
        self._remove_socket()

    def _remove_socket(self) -> None:
        if not self.owns_socket or self.socket_path is None:
            return
        # only our own socket file: never one another daemon bound in its place
        if self._socket_ino is not None and _inode(self.socket_path) == self._socket_ino:
            try:
                self.socket_path.unlink()
            except FileNotFoundError:
                pass

    async def _watchdog(self, interval: float) -> None:
        """Ping systemd while the worker still answers; a stuck worker lets the watchdog fire."""
        while True:
            try:
                await asyncio.wait_for(self._work(lambda: None), timeout=max(interval, 0.05))
                systemd.notify("WATCHDOG=1")
            except asyncio.TimeoutError:
                log.warning("worker busy for more than %.1fs; watchdog ping skipped", interval)
            await asyncio.sleep(interval)

    def _on_sighup(self) -> None:
        asyncio.ensure_future(self._reload())

    async def _reload(self) -> ZcorError | None:
        """Re-read config.json and synonyms.json; on error the old values stay and it is returned."""
        err: ZcorError | None = None
        try:
            await self._work(self.service.reload)
        except ZcorError as e:
            err = e
        except Exception as e:
            err = ZcorError(f"reload failed: {type(e).__name__}: {e}")
        finally:
            self._check_tools_changed()
        if err is not None:
            log.error("reload failed, keeping the previous values: %s", err.message)
        else:
            log.info("reloaded config.json and synonyms.json")
        return err

    # -- change notifications -----------------------------------------------------------

    def _on_change(self, event: dict[str, Any]) -> None:
        """Service listener: runs in the worker thread, so hop to the loop."""
        loop = self.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._broadcast_change, event)

    def _broadcast_change(self, event: dict[str, Any]) -> None:
        message = P.notification("zcor/changed", event)
        for conn in list(self.conns):
            if conn.subscribed:
                conn.send(message)
        if event.get("tool") == "zcor/config/set":
            self._check_tools_changed()

    def _check_tools_changed(self) -> None:
        now = self.service.config.relationship_memory
        if now == self._rel_memory:
            return
        self._rel_memory = now
        log.info("relationship memory %s; telling bots their tool list changed", "on" if now else "off")
        message = P.notification("notifications/tools/list_changed")
        for conn in list(self.conns):
            if conn.role == P.BOT and conn.initialized:
                conn.send(message)

    # -- connections ----------------------------------------------------------------------

    def _loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """accept() failures (EMFILE: out of file descriptors) are logged as one line at most
        once a second, never as tracebacks; asyncio itself retries the accept a second later."""
        exc = context.get("exception")
        if "accept" in str(context.get("message", "")) and isinstance(exc, OSError):
            now = time.monotonic()
            if now - self._last_accept_error < ACCEPT_ERROR_LOG_INTERVAL:
                self._accept_errors_quiet += 1
                return
            quiet, self._accept_errors_quiet = self._accept_errors_quiet, 0
            self._last_accept_error = now
            what = errno.errorcode.get(exc.errno or 0, str(exc.errno))
            hint = (f"zcord is out of file descriptors with {len(self.conns)} connections open; raise "
                    f"LimitNOFILE or lower maxConnections" if exc.errno in (errno.EMFILE, errno.ENFILE)
                    else "retrying in a second")
            log.error("cannot accept a new connection: %s (%s); %s%s", exc.strerror or exc, what, hint,
                      f" ({quiet} more since the last message)" if quiet else "")
            return
        loop.default_exception_handler(context)

    def check_total_output(self) -> None:
        """Past MAX_TOTAL_OUTPUT of unread replies in all, disconnect the slowest reader."""
        sizes = [(c.writer.transport.get_write_buffer_size(), c) for c in self.conns
                 if not c.writer.is_closing()]
        total = sum(size for size, _ in sizes)
        while total > MAX_TOTAL_OUTPUT and sizes:
            size, slowest = max(sizes, key=lambda x: x[0])
            log.warning("%d MiB of replies unread by all clients; disconnecting the slowest reader "
                        "(connection %d, %d MiB)", total >> 20, slowest.id, size >> 20)
            slowest.writer.transport.abort()
            sizes.remove((size, slowest))
            total -= size

    def _refuse_connection(self, writer: asyncio.StreamWriter) -> None:
        limit = self.service.config.max_connections
        err = P.RpcError(P.ZCOR_ERROR, f"zcord is serving its limit of {limit} connections "
                                       f"(maxConnections); try again later",
                         {"code": "too_many_connections", "message": f"zcord is serving its limit of {limit} "
                          f"connections (maxConnections); try again later"})
        try:
            writer.write(P.encode(P.error_response(None, err)))
            writer.transport.close()  # after the line is out; never waits on the client
        except (ConnectionError, OSError, RuntimeError):
            writer.transport.abort()

    def _init_expired(self, conn: Connection) -> None:
        if conn.initialized or conn.writer.is_closing():
            return
        timeout = self.service.config.init_timeout_seconds
        log.info("connection %d sent no initialize within %gs; closing it", conn.id, timeout)
        err = P.RpcError(P.INVALID_REQUEST, f"Invalid Request: no initialize within {timeout:g}s "
                                            f"(initTimeoutSeconds); closing the connection")
        conn.send(P.error_response(None, err))
        conn.writer.transport.close()

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self.conns) >= self.service.config.max_connections:
            now = time.monotonic()
            if now - self._last_accept_error >= ACCEPT_ERROR_LOG_INTERVAL:
                self._last_accept_error = now
                log.warning("connection refused: already %d connections (maxConnections)", len(self.conns))
            self._refuse_connection(writer)
            return
        conn = Connection(reader, writer)
        conn.daemon = self
        conn.task = asyncio.current_task()
        self.conns.add(conn)
        log.debug("connection %d opened", conn.id)
        timer = self.loop.call_later(self.service.config.init_timeout_seconds, self._init_expired, conn)
        try:
            conn.reading = True
            try:
                await self._read_loop(conn)
            except asyncio.CancelledError:
                pass  # shutdown: stop reading, but answer what is already running
            except (ConnectionError, OSError) as e:
                log.debug("connection %d: %s", conn.id, e)
            except Exception:
                log.exception("connection %d: unexpected error; closing it", conn.id)
            finally:
                conn.reading = False
            if conn.tasks:
                await asyncio.wait(list(conn.tasks))
            await self._close_conn(conn)
        except asyncio.CancelledError:
            # cancelled again: shutdown gave up waiting; the stream callback must not see this
            writer.transport.abort()
        finally:
            timer.cancel()
            self.conns.discard(conn)

    async def _close_conn(self, conn: Connection) -> None:
        self.conns.discard(conn)
        try:
            if not conn.writer.is_closing():
                await asyncio.wait_for(conn.writer.drain(), timeout=5)
            conn.writer.close()
            await asyncio.wait_for(conn.writer.wait_closed(), timeout=5)
        except (ConnectionError, OSError, asyncio.TimeoutError):
            pass
        log.debug("connection %d closed", conn.id)

    async def _read_loop(self, conn: Connection) -> None:
        """Split the byte stream into lines; a line over MAX_LINE is answered and skipped."""
        buf = bytearray()
        discarding = False
        reader = conn.reader
        while True:
            chunk = await reader.read(READ_CHUNK)
            if not chunk:
                return
            start = 0
            while True:
                nl = chunk.find(b"\n", start)
                if nl < 0:
                    if not discarding:
                        buf += chunk[start:]
                        if len(buf) > P.MAX_LINE:
                            buf.clear()
                            discarding = True
                            self._reply_error(conn, P.too_large())
                    break
                piece = chunk[start:nl]
                start = nl + 1
                if discarding:
                    discarding = False
                    continue
                if buf:
                    buf += piece
                    line = bytes(buf)
                    buf.clear()
                else:
                    line = piece
                if len(line) > P.MAX_LINE:
                    self._reply_error(conn, P.too_large())
                    continue
                await self._on_line(conn, line)
            await conn.writer.drain()

    def _reply_error(self, conn: Connection, err: P.ProtocolError) -> None:
        conn.send(P.error_response(err.id, err))

    async def _on_line(self, conn: Connection, line: bytes) -> None:
        try:
            msg = P.decode(line)
        except P.ProtocolError as e:
            self._reply_error(conn, e)
            return
        if msg is None:
            return
        if not msg.is_request:
            return  # notifications (initialized, cancelled, …) need no answer
        await conn.slots.acquire()
        task = asyncio.create_task(self._handle(conn, msg))
        conn.tasks.add(task)
        task.add_done_callback(conn.tasks.discard)

    async def _handle(self, conn: Connection, msg: P.Message) -> None:
        try:
            entry = self.methods.get(msg.method)
            if entry is None:
                raise P.method_not_found(msg.method)
            handler, operator_only = entry
            if not conn.initialized and msg.method not in BEFORE_INITIALIZE:
                raise P.RpcError(P.INVALID_REQUEST, f"Invalid Request: {msg.method} before initialize; only "
                                                    f"initialize and ping are served before it")
            if operator_only and conn.role != P.OPERATOR:
                raise P.app_error(P.Forbidden(
                    f"{msg.method} is an operator method; connect as an operator "
                    f'(initialize with capabilities.experimental.zcor.role = "operator").'))
            params = P.object_params(msg.params)
            result = await handler(conn, params)
            conn.send_bytes(P.encode_response(msg.id, result))
        except P.RpcError as e:
            conn.send(P.error_response(msg.id, e))
        except ZcorError as e:
            conn.send(P.error_response(msg.id, P.app_error(e)))
        except Exception as e:
            log.exception("internal error in %s", msg.method)
            conn.send(P.error_response(msg.id, P.RpcError(
                P.INTERNAL_ERROR, f"Internal error in {msg.method}: {type(e).__name__}: {e}")))
        finally:
            conn.slots.release()

    async def _work(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run fn in the one worker thread (every Service call goes through here). A change
        that meets a restore in its slow phase waits here, off the worker, and runs again
        once the restore is over, so reads queued behind it are not held."""
        assert self.worker is not None
        while True:
            try:
                return await self.worker.submit(fn, *args)
            except RestoreInProgress:
                await self._restore_over()

    async def _restore_over(self) -> None:
        loop = self.loop
        assert loop is not None
        done = loop.create_future()

        def wake() -> None:
            try:
                loop.call_soon_threadsafe(lambda: done.done() or done.set_result(None))
            except RuntimeError:
                pass  # the loop is gone: the daemon is shutting down

        self.service.when_restored(wake)
        await done

    async def _slow_work(self, fn: Callable[[], Any], slots: asyncio.Semaphore | None = None) -> Any:
        """Run fn in its own daemon thread: a hung provider can neither block the worker nor
        keep the process alive after shutdown."""
        loop = self.loop
        assert loop is not None and self._slow_slots is not None
        async with slots or self._slow_slots:
            fut = loop.create_future()

            def settle(ok: bool, value: Any) -> None:
                if not fut.done():
                    fut.set_result(value) if ok else fut.set_exception(value)

            def target() -> None:
                try:
                    result, ok = fn(), True
                except BaseException as e:  # delivered to the awaiting request
                    result, ok = e, False
                try:
                    loop.call_soon_threadsafe(settle, ok, result)
                except RuntimeError:
                    pass  # the loop is gone: the daemon is shutting down

            threading.Thread(target=target, name="zcord-slow", daemon=True).start()
            return await fut

    # -- MCP --------------------------------------------------------------------------------

    async def _initialize(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        version = params.get("protocolVersion")
        if version is not None and not isinstance(version, str):
            raise P.RpcError(P.INVALID_PARAMS, "Invalid params: protocolVersion must be a string")
        if conn.initialized:
            raise P.RpcError(P.INVALID_REQUEST, f"Invalid Request: this connection already initialized (as "
                                                f"{conn.role}); initialize happens once per connection and its "
                                                f"role is fixed: open a new connection for another role")
        role = P.client_role(params)
        if role == P.OPERATOR:
            refusal = operator_refusal(conn.peer, self.service.config.operator_group)
            if refusal is not None:
                log.info("connection %d: %s", conn.id, refusal)
                raise P.app_error(P.Forbidden(refusal))
        conn.role = role
        conn.initialized = True
        instructions = None
        if conn.role == P.BOT:
            try:
                instructions = await self._work(self.service.prefix)
            except Exception as e:  # the handshake must not fail because PERSONA.md is odd
                log.warning("system prefix unavailable for initialize: %r", e)
        log.debug("connection %d initialized as %s", conn.id, conn.role)
        result = P.initialize_result(version, __version__, conn.role, instructions)
        result["capabilities"].update(mcp_extras.CAPABILITIES)
        return result

    async def _ping(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    def _bot_tool_names(self, relationship_memory: bool) -> frozenset[str]:
        names = self._declared_names.get(relationship_memory)
        if names is None:
            names = frozenset(t.name for t in declared_tools(relationship_memory, P.BOT))
            self._declared_names[relationship_memory] = names
        return names

    async def _tools_list(self, conn: Connection, params: dict[str, Any]) -> P.RawJSON:
        key = (self.service.config.relationship_memory, conn.role)
        tools = self._tool_lists.get(key)
        if tools is None:
            listing = {"tools": [spec.describe() for spec in declared_tools(*key)]}
            tools = self._tool_lists[key] = P.RawJSON(json.dumps(listing, ensure_ascii=False).encode())
        return tools

    async def _tools_call(self, conn: Connection, params: dict[str, Any]) -> Any:
        name = P.str_param(params, "name")
        arguments = params.get("arguments")
        meta = params.get("_meta")
        view = isinstance(meta, dict) and meta.get(P.VIEW_META) is True
        service = self.service
        actor = conn.actor
        bot = conn.role == P.BOT

        def run() -> dict[str, Any]:
            if conn.writer.is_closing():  # disconnected (e.g. for not reading) while this waited
                return {}
            allowed = self._bot_tool_names(service.config.relationship_memory) if bot else None
            return service.call(name, arguments, actor=actor, allowed=allowed, view=view)

        spec = TOOLS.get(name)
        slow = name in SLOW_TOOLS or bool(getattr(spec, "slow", False))
        try:
            if slow:
                result = await self._slow_work(run)
            elif name in LONG_TOOLS:
                result = await self._slow_work(run, self._long_slots)
            else:
                result = await self._work(run)
        except ZcorError as e:
            return P.tool_failure(e)
        return P.tool_success_raw(result)

    # -- zcor/ methods for the bot -------------------------------------------------------------

    async def _prefix(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return {"text": await self._work(self.service.prefix)}

    async def _recall(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        session = P.str_param(params, "session")
        events = params.get("events")
        if not isinstance(events, list):
            raise P.RpcError(P.INVALID_PARAMS, "Invalid params: events must be an array of "
                                               "{text, origin, ts?, source?, senderKey?}", {"field": "events"})
        ids = await self._work(self.service.recall, session, events)
        return {"ids": list(ids)}

    async def _context(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        session = P.str_param(params, "session")
        return await self._work(self.service.context, session)

    # -- operator methods ------------------------------------------------------------------------

    async def _status(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        status = await self._work(self.service.status)
        status.update({
            "socket": str(self.socket_path) if self.socket_path else None,
            "version": __version__,
            "pid": os.getpid(),
            "uptimeSeconds": round(time.monotonic() - self.started, 3),
            "connections": len(self.conns),
            "subscribers": sum(1 for c in self.conns if c.subscribed),
        })
        return status

    async def _config_get(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(self.service.public_config)

    async def _config_set(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        patch = params.get("patch")
        if not isinstance(patch, dict):
            raise P.RpcError(P.INVALID_PARAMS, "Invalid params: patch must be an object of config changes, "
                                               'e.g. {"relationshipMemory": false}', {"field": "patch"})
        try:
            return await self._work(self.service.update_config, patch, conn.actor)
        finally:
            self._check_tools_changed()

    async def _subscribe(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        conn.subscribed = True
        return {"subscribed": True}

    async def _unsubscribe(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        conn.subscribed = False
        return {"subscribed": False}

    async def _backups_list(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        store = self.service.store

        def listing() -> list[dict[str, Any]]:
            items = []
            for name in store.list_backups():
                try:
                    st = (store.backups / name).stat()
                except OSError:
                    continue
                items.append({"backupFile": name, "size": st.st_size,
                              "modifiedAt": _iso(st.st_mtime), "bot": bool(BOT_BACKUP_RE.match(name))})
            return items

        return {"items": await self._work(listing)}

    async def _backups_preview(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        """The counts a restore of the backup would change (parsed off the worker, like a restore)."""
        name = P.str_param(params, "backupFile")
        return await self._slow_work(lambda: self.service.backup_preview(name), self._long_slots)

    async def _synonyms_list(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return {"groups": await self._work(self.service.synonym_groups)}

    async def _synonyms_set(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(self.service.set_synonym_group, params.get("index"), params.get("terms"),
                                conn.actor)

    async def _llm(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        """The deployment's provider settings (never the key), for bots such as `zcor chat`."""
        cfg = (await self._work(lambda: self.service.config)).llm
        return cfg.model_dump(mode="json", by_alias=True)

    async def _recall_explain(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        text = P.str_param(params, "text")
        return await self._work(self.service.recall_explain, text, params.get("senderKey"))

    async def _persona_get(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(self.service.persona_get)

    async def _persona_set(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(self.service.persona_set, params.get("text"), conn.actor)

    async def _history_query(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(self.service.history_query, params)

    # -- MCP prompts and resources (zcord/transport/mcp_extras.py) ------------------------------------------

    async def _prompts_list(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return {"prompts": mcp_extras.PROMPTS}

    async def _prompts_get(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(mcp_extras.get_prompt, self.service, params)

    async def _resources_list(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return mcp_extras.list_resources()

    async def _resource_templates_list(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return mcp_extras.list_resource_templates()

    async def _resources_read(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(mcp_extras.read_resource, self.service, params)

    async def _history_revert(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(undo.revert, self.service, params)

    async def _history_reinstate(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(undo.reinstate, self.service, params)

    async def _history_versions(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        if set(params) - {"id"}:
            raise InvalidArgument("params must be {id}")
        return await self._work(undo.versions, self.service, params.get("id"))

    async def _history_at(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        if set(params) - {"time"} or not isinstance(params.get("time"), str):
            raise InvalidArgument("params must be {time}: an ISO 8601 time with its UTC offset", field="time")
        try:
            when = datetime.fromisoformat(params["time"])
        except ValueError:
            raise InvalidArgument(f"time {params['time']!r} is not an ISO 8601 time", field="time") from None
        if when.tzinfo is None:
            raise InvalidArgument("time must carry its UTC offset, e.g. 2026-12-01T20:00:00+08:00", field="time")
        return await self._work(undo.state_at, self.service, when)

    async def _snapshot_method(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(self.service.snapshot)

    async def _reload_method(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        err = await self._reload()
        if err is not None:
            raise err
        return await self._work(self.service.public_config)


def _warm_up(service: Service) -> None:
    try:
        service.warm()
    except Exception as e:  # only a head start; the first real use retries and reports
        log.warning("warm-up failed (the first call will retry): %r", e)
    gc.freeze()  # the indexes just built, like the loaded Memory: not walked by full collections


def _iso(ts: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ts, timezone.utc).astimezone().isoformat(timespec="seconds")


def _inode(path: Path | None) -> int | None:
    if path is None:
        return None
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


# -- binding --------------------------------------------------------------------------------


def _socket_is_live(path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2.0)
    try:
        probe.connect(str(path))
        return True
    except (ConnectionRefusedError, FileNotFoundError):
        return False
    except OSError as e:
        if e.errno in (errno.ECONNREFUSED, errno.ENOENT):
            return False
        raise SocketInUse(f"{path} exists and cannot be probed ({e.strerror}); remove it if no zcord "
                          f"is running") from None
    finally:
        probe.close()


def bind_socket(path: Path) -> socket.socket:
    """Bind and listen on path: socket 0660 from the start (umask around bind), directories we
    create 0750 whatever the umask, stale sockets replaced.

    Raises:
        UnsafeSocket: the directory is not zcord's own or others may write to it.
        SocketInUse: a live daemon answers there, or the path is something else than a socket.
        OSError: the path cannot be created (permissions, too long, …).
    """
    parent = path.parent
    ensure_socket_dir(parent)
    check_daemon_socket_dir(parent)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old_umask = os.umask(0o117)
        try:
            try:
                sock.bind(str(path))
            except OSError as e:
                if e.errno != errno.EADDRINUSE:
                    raise
                try:
                    mode = os.lstat(path).st_mode
                except FileNotFoundError:
                    mode = None
                if mode is not None and not stat.S_ISSOCK(mode):
                    raise SocketInUse(f"{path} exists and is not a socket; refusing to replace it") from None
                if mode is not None and _socket_is_live(path):
                    raise SocketInUse(f"another zcord is already listening on {path}; stop it first or "
                                      f"use another --socket") from None
                if mode is not None:
                    log.info("replacing stale socket %s", path)
                    path.unlink()
                sock.bind(str(path))
        finally:
            os.umask(old_umask)
        # no chmod by path: it would follow whatever was swapped in after bind
        st = os.lstat(path)
        if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.geteuid():
            raise SocketInUse(f"{path} changed right after bind; refusing to serve on it")
        sock.listen(512)
    except BaseException:
        sock.close()
        raise
    return sock


# -- entry point ------------------------------------------------------------------------------


def _raise_fd_limit() -> None:
    """Use the hard file-descriptor limit: connections are capped by maxConnections, not by a
    soft limit of 1024 that then fails every file open (under systemd: LimitNOFILE)."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = min(hard if hard != resource.RLIM_INFINITY else 1 << 16, 1 << 16)
        if soft != resource.RLIM_INFINITY and soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (ImportError, OSError, ValueError) as e:  # e.g. a seccomp filter without @resources
        log.debug("file descriptor limit left as it is: %r", e)


def run(memory_dir: Path, socket_path: Path, log_level: str = "info") -> int:
    """Run the daemon until SIGTERM; returns the process exit code."""
    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO), stream=sys.stderr,
                        format="zcord: %(levelname)s: %(message)s")
    started = time.monotonic()
    _raise_fd_limit()
    service = Service(memory_dir)
    # loading makes a few objects per memory and none of them garbage: no collection passes
    # meanwhile; then they go to the collector's permanent generation (gc.freeze), so later
    # full collections (pauses in the middle of calls) and snapshot children never walk them
    gc.disable()
    try:
        service.open()
    except MemoryDirInUse as e:
        print(f"zcord: {e.message}", file=sys.stderr)
        return EXIT_IN_USE
    except ZcorError as e:
        print(f"zcord: cannot open the Memory in {memory_dir}: {e.message}", file=sys.stderr)
        return EXIT_FAILURE
    except OSError as e:
        print(f"zcord: cannot open the Memory in {memory_dir}: {e.strerror or e} "
              f"({e.filename or memory_dir})", file=sys.stderr)
        return EXIT_FAILURE
    except Exception as e:  # a bug rather than a bad file, but still: a message, not a traceback
        print(f"zcord: cannot open the Memory in {memory_dir}: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_FAILURE
    finally:
        gc.freeze()
        gc.enable()
    try:
        listener = systemd.activated_unix_listener()
        owns = listener is None
        if listener is None:
            try:
                listener = bind_socket(socket_path)
            except SocketInUse as e:
                print(f"zcord: {e}", file=sys.stderr)
                return EXIT_IN_USE
            except UnsafeSocket as e:
                print(f"zcord: refusing to start: {e}", file=sys.stderr)
                return EXIT_FAILURE
            except OSError as e:
                print(f"zcord: cannot listen on {socket_path}: {e.strerror or e}", file=sys.stderr)
                return EXIT_FAILURE
            path: Path | None = socket_path
        else:
            name = listener.getsockname()
            path = Path(name) if isinstance(name, str) and name else None
        listener.setblocking(False)
        daemon = Daemon(service, listener, path, owns_socket=owns)
        log.debug("state loaded and socket bound in %.3fs", time.monotonic() - started)
        asyncio.run(daemon.serve())
        return EXIT_OK
    except KeyboardInterrupt:  # Ctrl-C before the signal handlers were installed
        return 130
    finally:
        service.close()
