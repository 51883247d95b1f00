"""Connections: reading lines off the socket, answering each request on its own task, and
the limits that keep one client from starving the others (requests in flight, unread
output, the number of connections, the time to initialize). Service calls run in the one
worker thread (Worker), or in threads of their own for tools that wait (`slow_work`)."""

from __future__ import annotations

import asyncio
import collections
import contextvars
import errno
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..core import protocol as P
from ..core.errors import ZcorError
from ..service.calls import RestoreInProgress
from ..service.tools import TOOLS
from . import replies
from .metrics import Meters, status_of_error, status_of_result
from .peers import PeerCred, operator_refusal

if TYPE_CHECKING:
    from ..service.service import Service
    from .optable import Method

log = logging.getLogger(__name__)

READ_CHUNK = 1 << 16
MAX_IN_FLIGHT = 64
MAX_BATCHES = 256  # sessions whose latest batch senders a connection keeps (Connection.batches)
"""Requests one connection may have running at once; more wait (the reader pauses)."""
MAX_OUTPUT_BUFFER = 32 << 20
"""A client that lets this much unread output pile up is disconnected (more than the
largest single reply, a page of 100 history records)."""
MAX_TOTAL_OUTPUT = 128 << 20
"""Unread output of all clients together; past it the slowest reader is disconnected."""
TOTAL_CHECK_FROM = 1 << 20
"""A connection's buffer below this cannot push the total over (checked only above it)."""
ACCEPT_ERROR_LOG_INTERVAL = 1.0
IDLE_CLOSE_AFTER = 5.0
"""A bot's connection with nothing in flight for this long may be closed to make room for a
new client when a connection limit is reached (the oldest idle first)."""
BEFORE_INITIALIZE = frozenset({"initialize", "ping"})


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
        self.tasks: set[asyncio.Task[Any]] = set()
        self.task: asyncio.Task[Any] | None = None
        self.reading = False
        self.peer = PeerCred.of(writer.get_extra_info("socket"))
        self.server: ConnectionServer | None = None
        self.last_batch: tuple[str, list[str]] | tuple[str, list[str], bool] | None = None
        """The session and external senderKeys of this connection's latest zcor/recall batch:
        the origin of its tool calls when the bot tells none (zcord.core.origin)."""
        self.batches: collections.OrderedDict[str, list[str]] = collections.OrderedDict()
        """The senders of this connection's latest batch per session (the latest MAX_BATCHES
        sessions): judged with an origin the bot tells for that session (issue 33)."""
        self.may_operate = False  # the peer could be the operator: it may use the kept slots
        self.last_active = time.monotonic()

    def remember_batch(self, session: str, senders: list[str]) -> None:
        self.batches.pop(session, None)
        self.batches[session] = senders
        while len(self.batches) > MAX_BATCHES:
            self.batches.popitem(last=False)

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
        elif size > TOTAL_CHECK_FROM and self.server is not None:
            self.server.check_total_output()


CALLER: contextvars.ContextVar[int | None] = contextvars.ContextVar("zcord_caller", default=None)
"""The connection a request is being handled for: the worker takes turns between them."""


_Job = tuple["asyncio.Future[Any]", Callable[..., Any], tuple[Any, ...]]
"""A submitted call: its future, the function and its arguments."""


class WorkerStopped(RuntimeError):
    """Work submitted after the worker was told to stop (zcord is shutting down)."""


class Worker:
    """The one thread that runs Service calls: each connection's in submission order, the
    connections taking turns (one call each, round robin), so one client's pipelined queue
    cannot starve the others; an urgent job (the watchdog's probe) goes first.

    Like ThreadPoolExecutor(max_workers=1), but results travel back to the event loop in
    batches: one loop wake-up delivers every result finished meanwhile, which matters when
    many clients are busy (each wake-up costs a system call on both sides).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self._jobs: collections.deque[_Job] = collections.deque()  # urgent ones
        self._queues: dict[Any, collections.deque[_Job]] = {}  # caller -> jobs; dict order is the turn order
        self._cv = threading.Condition(threading.Lock())
        self._done: list[tuple[asyncio.Future[Any], bool, Any]] = []
        self._done_lock = threading.Lock()
        self._wake_posted = False
        self._stopping = False
        self.thread = threading.Thread(target=self._run, name="zcord-worker", daemon=True)
        self.thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any, caller: Any = None, urgent: bool = False) -> asyncio.Future[Any]:
        fut = self.loop.create_future()
        with self._cv:
            if self._stopping:
                raise WorkerStopped("the worker has stopped")
            if urgent:
                self._jobs.append((fut, fn, args))
            else:
                queue = self._queues.get(caller)
                if queue is None:
                    queue = self._queues[caller] = collections.deque()
                queue.append((fut, fn, args))
            self._cv.notify()
        return fut

    def _next_job(self) -> _Job | None:
        """The urgent job, else the next caller's oldest job (that caller goes to the end of
        the turn order); called with the condition held."""
        if self._jobs:
            return self._jobs.popleft()
        if not self._queues:
            return None
        caller = next(iter(self._queues))
        queue = self._queues.pop(caller)
        job = queue.popleft()
        if queue:
            self._queues[caller] = queue
        return job

    def stop(self, timeout: float | None = None) -> None:
        """Run what was submitted, then end the thread."""
        with self._cv:
            self._stopping = True
            self._cv.notify()
        self.thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._jobs and not self._queues and not self._stopping:
                    self._cv.wait()
                job = self._next_job()
                if job is None:
                    return
            fut, fn, args = job
            try:
                ok, value = True, fn(*args)
            except BaseException as e:  # handed to the awaiting request
                ok, value = False, e
            self._finish(fut, ok, value)

    def _finish(self, fut: asyncio.Future[Any], ok: bool, value: Any) -> None:
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


class Routes(Protocol):
    """What the connection server needs of the method table (zcord.transport.methods.Methods)."""

    def route(self, name: str) -> Method | None: ...

    async def handle(self, entry: Method, conn: Connection, params: dict[str, Any]) -> Any: ...


class ConnectionServer:
    """The connection side of the daemon: accepting, reading, dispatching each request to
    the method its Routes name, and running Service calls off the event loop (`work`,
    `slow_work`). The daemon holds one; the methods reach it as their Runner."""

    def __init__(self, service: Service):
        self.service = service
        self.routes: Routes | None = None
        self.conns: set[Connection] = set()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.worker: Worker | None = None
        self._slow_slots: asyncio.Semaphore | None = None
        self._long_slots: asyncio.Semaphore | None = None
        self._last_accept_error = 0.0
        self._accept_errors_quiet = 0
        self.meters = Meters(TOOLS)
        """Requests answered, by method, tool and status, and their latency (zcor/metrics)."""
        self.admission = Admission(self)

    def start(self, loop: asyncio.AbstractEventLoop, routes: Routes, max_slow: int, max_long: int,
              methods: frozenset[str] = frozenset()) -> None:
        """Start the worker thread; requests go to routes from now on (`methods`: the names
        the meters count by name, any other is `unknown`)."""
        self.loop = loop
        self.routes = routes
        self.meters.methods = methods
        self.worker = Worker(loop)
        self._slow_slots = asyncio.Semaphore(max_slow)
        self._long_slots = asyncio.Semaphore(max_long)

    def loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """accept() failures (EMFILE: out of file descriptors) are logged as one line at most
        once a second, never as tracebacks; asyncio itself retries the accept a second later.
        asyncio reports those, and only those, with the listening `socket` in the context
        (its message is words for a person, not a code)."""
        exc = context.get("exception")
        if "socket" in context and isinstance(exc, OSError):
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

    def _init_expired(self, conn: Connection) -> None:
        if conn.initialized or conn.writer.is_closing():
            return
        timeout = self.service.config.init_timeout_seconds
        log.info("connection %d sent no initialize within %gs; closing it", conn.id, timeout)
        err = P.RpcError(P.INVALID_REQUEST, f"Invalid Request: no initialize within {timeout:g}s "
                                            f"(initTimeoutSeconds); closing the connection")
        conn.send(P.error_response(None, err))
        conn.writer.transport.close()

    async def on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(reader, writer)
        refusal = self.admission.admit(conn)
        if refusal is not None:
            now = time.monotonic()
            if now - self._last_accept_error >= ACCEPT_ERROR_LOG_INTERVAL:
                self._last_accept_error = now
                log.warning("connection refused: %s (%d connections)", refusal[0], len(self.conns))
            self.admission.refuse(writer, refusal)
            return
        conn.server = self
        conn.task = asyncio.current_task()
        self.conns.add(conn)
        log.debug("connection %d opened", conn.id)
        assert self.loop is not None
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
        except (TimeoutError, ConnectionError, OSError):
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
        conn.last_active = time.monotonic()
        task = asyncio.create_task(self._handle(conn, msg))
        conn.tasks.add(task)
        task.add_done_callback(conn.tasks.discard)

    async def _handle(self, conn: Connection, msg: P.Message) -> None:
        CALLER.set(conn.id)  # this task's own context: its worker calls take this connection's turn
        started = time.perf_counter()
        status = "internal_error"
        try:
            assert self.routes is not None
            entry = self.routes.route(msg.method)
            if entry is None:
                raise P.method_not_found(msg.method)
            if not conn.initialized and msg.method not in BEFORE_INITIALIZE:
                raise P.RpcError(P.INVALID_REQUEST, f"Invalid Request: {msg.method} before initialize; only "
                                                    f"initialize and ping are served before it")
            if entry.operator_only and conn.role != P.OPERATOR:
                raise P.app_error(P.Forbidden(
                    f"{msg.method} is an operator method; connect as an operator "
                    f'(initialize with capabilities.experimental.zcor.role = "operator").'))
            params = P.object_params(msg.params)
            result = await self.routes.handle(entry, conn, params)
            data = P.encode_response(msg.id, result)
            if len(data) > replies.MAX_REPLY_BYTES:  # a clear error, not a disconnect for unread output
                raise P.app_error(replies.ReplyTooLarge(replies.too_large(len(data), msg.method)))
            status = status_of_result(result)
            conn.send_bytes(data)
        except P.RpcError as e:
            status = status_of_error(e)
            conn.send(P.error_response(msg.id, e))
        except ZcorError as e:
            status = e.code
            conn.send(P.error_response(msg.id, P.app_error(e)))
        except asyncio.CancelledError:
            status = "cancelled"  # shutdown gave up waiting for it
            raise
        except Exception as e:
            log.exception("internal error in %s", msg.method)
            conn.send(P.error_response(msg.id, P.RpcError(
                P.INTERNAL_ERROR, f"Internal error in {msg.method}: {type(e).__name__}: {e}")))
        finally:
            conn.last_active = time.monotonic()
            conn.slots.release()
            self.meters.call(msg.method, msg.params, status, time.perf_counter() - started)

    async def work(self, fn: Callable[..., Any], *args: Any, urgent: bool = False) -> Any:
        """Run fn in the one worker thread (every Service call goes through here), taking
        turns with the other connections' calls. A change that meets a restore in its slow
        phase waits here, off the worker, and runs again once the restore is over, so reads
        queued behind it are not held."""
        assert self.worker is not None
        while True:
            try:
                return await self.worker.submit(fn, *args, caller=CALLER.get(), urgent=urgent)
            except RestoreInProgress:
                await self._restore_over()

    async def _restore_over(self) -> None:
        loop = self.loop
        assert loop is not None
        done = loop.create_future()

        def wake() -> None:
            try:
                loop.call_soon_threadsafe(_settle, done)
            except RuntimeError:
                pass  # the loop is gone: the daemon is shutting down

        self.service.gate.when_restored(wake)
        await done

    async def slow_work(self, fn: Callable[[], Any], long: bool = False) -> Any:
        """Run fn in its own daemon thread: a hung provider can neither block the worker nor
        keep the process alive after shutdown. Among MAX_SLOW_CALLS such threads, or among
        MAX_LONG_CALLS for long work (restores, backup previews)."""
        loop = self.loop
        slots = self._long_slots if long else self._slow_slots
        assert loop is not None and slots is not None
        async with slots:
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


class Admission:
    """Who may connect: the limits a new connection is counted against (per process, per uid,
    the operators' reserve, in all), an idle bot connection closed to make room, and the
    refusal a client over a limit reads. A part of the ConnectionServer (`ConnectionServer.admission`)."""

    def __init__(self, server: ConnectionServer) -> None:
        self.server = server

    def rules(self, conn: Connection) -> list[tuple[str, int, Callable[[Connection], bool], str]]:
        """The limits a new connection is counted against, most specific first: (setting,
        limit, which open connections count, what the refusal says)."""
        cfg = self.server.service.config
        rules: list[tuple[str, int, Callable[[Connection], bool], str]] = []
        peer = conn.peer
        if not conn.may_operate:
            if peer is not None:
                rules.append(("maxConnectionsPerPid", cfg.max_connections_per_pid,
                              lambda c: not c.may_operate and c.peer is not None and c.peer.pid == peer.pid
                              and c.peer.uid == peer.uid, f"process {peer.pid} already has"))
                rules.append(("maxConnectionsPerUid", cfg.max_connections_per_uid,
                              lambda c: not c.may_operate and c.peer is not None and c.peer.uid == peer.uid,
                              f"uid {peer.uid} already has"))
            rules.append(("operatorConnections", max(0, cfg.max_connections - cfg.operator_connections),
                          lambda c: not c.may_operate,
                          f"the clients that may not be the operator already have (the last "
                          f"{cfg.operator_connections} of maxConnections are kept for operators)"))
        rules.append(("maxConnections", cfg.max_connections, lambda c: True, "zcord is serving"))
        return rules

    def admit(self, conn: Connection) -> tuple[str, str] | None:
        """None when the new connection may stay, else (setting, sentence) naming the limit
        that refuses it. At a limit, the bot connection counted against it that has been idle
        longest (nothing in flight for IDLE_CLOSE_AFTER seconds) is closed to make room."""
        conn.may_operate = operator_refusal(conn.peer, self.server.service.config.operator_group) is None
        now = time.monotonic()
        for setting, limit, counts, who in self.rules(conn):
            members = [c for c in self.server.conns if counts(c)]
            if len(members) < limit:
                continue
            idle = [c for c in members if c.role != P.OPERATOR and c.initialized and not c.tasks
                    and not c.subscribed and now - c.last_active >= IDLE_CLOSE_AFTER]
            if not idle:
                return setting, f"{who} {len(members)} connections, the limit ({setting} is {limit}); " \
                                f"close some or try again later"
            self.close_idle(min(idle, key=lambda c: c.last_active), setting)
        return None

    def close_idle(self, conn: Connection, setting: str) -> None:
        log.info("connection %d idle for %.0fs closed to make room for a new client (%s)", conn.id,
                 time.monotonic() - conn.last_active, setting)
        conn.send(P.notification("notifications/message", {
            "level": "warning", "logger": "zcord",
            "data": f"zcord closed this idle connection to make room for a new client ({setting}); "
                    f"connect again when needed"}))
        self.server.conns.discard(conn)
        conn.writer.transport.close()

    def refuse(self, writer: asyncio.StreamWriter, refusal: tuple[str, str] | None = None) -> None:
        limit = self.server.service.config.max_connections
        setting, sentence = refusal or ("maxConnections", f"zcord is serving its limit of {limit} connections "
                                                          f"(maxConnections); try again later")
        if refusal is not None:
            sentence = f"zcord refused this connection: {sentence}"
        err = P.RpcError(P.ZCOR_ERROR, sentence,
                         {"code": "too_many_connections", "rule": setting, "message": sentence})
        try:
            writer.write(P.encode(P.error_response(None, err)))
            writer.transport.close()  # after the line is out; never waits on the client
        except (ConnectionError, OSError, RuntimeError):
            writer.transport.abort()


def _settle(done: asyncio.Future[Any]) -> None:
    if not done.done():
        done.set_result(None)
