"""The zcord transport: an asyncio Unix-socket server that dispatches into one Service.

Every Service call runs in a single worker thread, so mutations are serialized and the
event loop never blocks on disk or on the Service lock; tools that wait on the LLM or take
seconds (the tool table's `runs`) run in threads of their own so nothing queues behind
them. Requests on one connection are handled concurrently and may be answered out of order.

Bot-facing methods: MCP (`initialize`, `ping`, `tools/list`, `tools/call`) and
`zcor/prefix`, `zcor/recall`, `zcor/context`. Operator methods (a client that says
`capabilities.experimental.zcor.role = "operator"` at initialize): `zcor/status`,
`zcor/config/get`, `zcor/config/set`, `zcor/subscribe`, `zcor/unsubscribe`,
`zcor/backups/list`, `zcor/backups/preview`, `zcor/synonyms/list`, `zcor/synonyms/held`, `zcor/recall/explain`, `zcor/reload`,
`zcor/history/query`; and `tools/call` with `_meta: {"zcor/view": true}` (an unrecorded
display read).

Roles come from the kernel: the operator role is granted only when the peer's
credentials (SO_PEERCRED, SO_PEERGROUPS) are zcord's own uid, root, or a member of the
configured operator group. `initialize` happens once per connection; nothing but `ping`
is served before it.
"""

from __future__ import annotations

import asyncio
import errno
import gc
import logging
import os
import signal
import socket
import stat
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ..core import protocol as P
from ..core.errors import MemoryDirInUse, ZcorError
from ..service.service import Service
from . import systemd
from .connections import Connection, ConnectionServer, WorkerStopped
from .methods import Methods
from .metrics import Meters
from .paths import UnsafeSocket, check_daemon_socket_dir, ensure_socket_dir

log = logging.getLogger(__name__)

SHUTDOWN_GRACE = 30.0
MAX_SLOW_CALLS = 4
MAX_LONG_CALLS = 2

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_IN_USE = 2


class SocketInUse(Exception):
    """Another live daemon answers on the socket path, or the path is not a socket."""


class Daemon:
    """Serves one open Service on one listening socket until stopped.

    Holds its parts instead of inheriting them: the connection server (accepting, reading,
    limits, the worker) and the methods (the method table's handlers), each reaching the
    other through a small Protocol (connections.Routes, methods.Runner and methods.Host).
    """

    def __init__(self, service: Service, listener: socket.socket | None, socket_path: Path | None,
                 owns_socket: bool = True):
        self.service = service
        self.listener = listener
        self.socket_path = socket_path
        self.owns_socket = owns_socket
        self.started = time.monotonic()
        self.server = ConnectionServer(service)
        self.methods = Methods(self, self.server)
        self.loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._server: asyncio.AbstractServer | None = None
        self._rel_memory = service.config.relationship_memory
        self._socket_ino = _inode(socket_path) if owns_socket and socket_path else None

    @property
    def conns(self) -> set[Connection]:
        return self.server.conns

    @property
    def meters(self) -> Meters:
        return self.server.meters

    # -- lifetime ---------------------------------------------------------------------

    async def serve(self) -> None:
        """Accept clients until SIGTERM/SIGINT (or stop()), then shut down cleanly."""
        self.loop = asyncio.get_running_loop()
        self.server.start(self.loop, self.methods, MAX_SLOW_CALLS, MAX_LONG_CALLS,
                          frozenset(m.name for m in self.methods.table))
        assert self.server.worker is not None
        self.service.gate.worker_thread = self.server.worker.thread  # a change held by a restore waits in work()
        self._stop = asyncio.Event()
        self.service.listeners.append(self._on_change)
        self.loop.set_exception_handler(self.server.loop_exception)
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.loop.add_signal_handler(sig, self.stop)
        self.loop.add_signal_handler(signal.SIGHUP, self._on_sighup)
        self._server = await asyncio.start_unix_server(self.server.on_client, sock=self.listener)
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
        assert self.server.worker is not None and self.loop is not None
        await self.loop.run_in_executor(None, self.server.worker.stop, SHUTDOWN_GRACE)
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
                # urgent: ahead of queued calls, so only one call running longer than the
                # interval (a stuck worker) skips the ping, never a long queue
                await asyncio.wait_for(self.server.work(lambda: None, urgent=True), timeout=max(interval, 0.05))
                systemd.notify("WATCHDOG=1")
            except TimeoutError:
                log.warning("worker busy for more than %.1fs; watchdog ping skipped", interval)
            except WorkerStopped:
                return  # zcord is shutting down: nothing left to ping for
            await asyncio.sleep(interval)

    def _on_sighup(self) -> None:
        asyncio.ensure_future(self.reload())

    async def reload(self) -> ZcorError | None:
        """Re-read config.json and synonyms.json; on error the old values stay and it is returned."""
        err: ZcorError | None = None
        try:
            await self.server.work(self.service.reload)
        except ZcorError as e:
            err = e
        except Exception as e:
            err = ZcorError(f"reload failed: {type(e).__name__}: {e}")
        finally:
            self.check_tools_changed()
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
            self.check_tools_changed()

    def check_tools_changed(self) -> None:
        now = self.service.config.relationship_memory
        if now == self._rel_memory:
            return
        self._rel_memory = now
        log.info("relationship memory %s; telling bots their tool list changed", "on" if now else "off")
        message = P.notification("notifications/tools/list_changed")
        for conn in list(self.conns):
            if conn.role == P.BOT and conn.initialized:
                conn.send(message)


WARM_UP_SWITCH_INTERVAL = 0.0005
"""Seconds a thread may hold the interpreter while the warm-up runs (Python's default is
0.005): a call's worker thread gives the interpreter up at each socket write and fsync and
then waits for it, so with the default a write during the warm-up waited 5 ms several
times over."""


def _warm_up(service: Service) -> None:
    interval = sys.getswitchinterval()
    sys.setswitchinterval(min(interval, WARM_UP_SWITCH_INTERVAL))
    try:
        service.warm()
    except Exception as e:  # only a head start; the first real use retries and reports
        log.warning("warm-up failed (the first call will retry): %r", e)
    finally:
        sys.setswitchinterval(interval)
    gc.freeze()  # the indexes just built, like the loaded Memory: not walked by full collections
    _trim_heap()


def _trim_heap() -> bool:
    """Hand malloc's free pages back to the system once the warm-up is done (glibc's
    malloc_trim): what the warm-up built and dropped (the twin index's merged arrays, feature
    sets, index builds) otherwise stays resident until malloc reuses it. Not glibc: nothing
    to do (False)."""
    try:
        import ctypes

        return bool(ctypes.CDLL(None).malloc_trim(0))
    except (OSError, AttributeError, ImportError) as e:  # not glibc, or no ctypes
        log.debug("malloc_trim not available: %r", e)
        return False


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
    check_daemon_socket_dir(parent, socket_name=path.name)
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


M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h)
MALLOC_ARENAS = 2


def _limit_malloc_arenas() -> bool:
    """At most MALLOC_ARENAS glibc malloc arenas (issue 24: RSS at 100,000 memories). By
    default every thread that allocates (the worker, the warm-up, the log indexer, the
    snapshot forker) gets an arena of its own, and the memory each frees stays in its arena:
    11 to 16 MiB more resident at 100,000 memories than with two (bench/bench_start.py). The
    threads take turns on the GIL anyway, so sharing arenas costs no speed. MALLOC_ARENA_MAX
    in the environment wins. Not glibc: nothing to do (False)."""
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        limited = bool(libc.mallopt(M_ARENA_MAX, MALLOC_ARENAS))
    except (OSError, AttributeError, ImportError) as e:  # not glibc, or no ctypes
        log.debug("malloc arenas left as they are: %r", e)
        return False
    log.debug("malloc arenas limited to %d", MALLOC_ARENAS)
    return limited


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


def _ready_to_recall(service: Service) -> None:
    """Before READY=1 (issue 24): the retrieval indexes (from memory-state.recall.cache
    when it belongs to the snapshot), jieba and the Memory's words, so that ready means
    serving — the first recall is answered at full speed and writes right after READY do
    not share the interpreter with an index build. The rest of the warm-up (the query text,
    the log index) runs in the background after READY."""
    if not service.index_cache_used and len(service.state.nodes) >= 10_000:
        # building the indexes (no usable memory-state.recall.cache): give systemd's start
        # timeout room for it (about 60 µs per memory on a 2-CPU machine, 20× that allowed)
        systemd.notify(f"EXTEND_TIMEOUT_USEC={60_000_000 + 1_200 * len(service.state.nodes)}",
                       "STATUS=Building the retrieval indexes")
    gc.disable()  # what this makes is no garbage either
    started = time.monotonic()
    try:
        service.warm_recall()
        log.info("recall ready in %.2fs (retrieval indexes %s)", time.monotonic() - started,
                 "from memory-state.recall.cache" if service.index_cache_used else "built")
    except Exception as e:  # only a head start; the first recall retries and reports
        log.warning("preparing recall failed (the first recall will retry): %r", e)
    finally:
        gc.freeze()
        gc.enable()
        # what the load and jieba's dictionary read freed (file bytes, decoded columns, a
        # dict's smaller tables) goes back to the system before READY, not after the whole
        # warm-up: 20 to 40 MiB at 100,000 memories, in about a millisecond
        _trim_heap()


def run(memory_dir: Path, socket_path: Path, log_level: str = "info") -> int:
    """Run the daemon until SIGTERM; returns the process exit code."""
    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO), stream=sys.stderr,
                        format="zcord: %(levelname)s: %(message)s")
    started = time.monotonic()
    _limit_malloc_arenas()  # before any thread of ours allocates
    _raise_fd_limit()
    if not os.environ.get("LISTEN_FDS"):
        # a socket another zcord serves: refuse before the Memory directory is made or opened
        try:
            taken = socket_path.exists() and _socket_is_live(socket_path)
        except SocketInUse as e:
            taken, why = True, str(e)
        else:
            why = f"another zcord is already listening on {socket_path}; stop it first or use another --socket"
        if taken:
            log.error("%s", why)
            return EXIT_IN_USE
    service = Service(memory_dir)
    # loading makes a few objects per memory and none of them garbage: no collection passes
    # meanwhile; then they go to the collector's permanent generation (gc.freeze), so later
    # full collections (pauses in the middle of calls) and snapshot children never walk them
    gc.disable()
    try:
        service.open()
    except MemoryDirInUse as e:
        log.error("%s", e.message)
        return EXIT_IN_USE
    except ZcorError as e:
        log.error("cannot open the Memory in %s: %s", memory_dir, e.message)
        return EXIT_FAILURE
    except OSError as e:
        log.error("cannot open the Memory in %s: %s (%s)", memory_dir, e.strerror or e, e.filename or memory_dir)
        return EXIT_FAILURE
    except Exception as e:  # a bug rather than a bad file, but still: a message, not a traceback
        log.error("cannot open the Memory in %s: %s: %s", memory_dir, type(e).__name__, e)
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
                log.error("%s", e)
                return EXIT_IN_USE
            except UnsafeSocket as e:
                log.error("refusing to start: %s", e)
                return EXIT_FAILURE
            except OSError as e:
                log.error("cannot listen on %s: %s", socket_path, e.strerror or e)
                return EXIT_FAILURE
            path: Path | None = socket_path
        else:
            name = listener.getsockname()
            path = Path(name) if isinstance(name, str) and name else None
        listener.setblocking(False)
        _ready_to_recall(service)  # the socket is bound: a client's first call waits for this
        daemon = Daemon(service, listener, path, owns_socket=owns)
        log.debug("state loaded and socket bound in %.3fs", time.monotonic() - started)
        asyncio.run(daemon.serve())
        return EXIT_OK
    except KeyboardInterrupt:  # Ctrl-C before the signal handlers were installed
        return 130
    finally:
        service.close()
