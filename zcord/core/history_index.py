"""The history index of the operation log: `operations.index.sqlite`, how it is kept up with
the log (HistoryIndex) and how history queries are answered from it (HistoryQueries).
The log file itself is zcord.core.oplog; its docstring describes the index's tables.
"""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import os
import re
import sqlite3
import stat
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from .errors import StateFileInvalid, ZcorError
from .senderkey import sender_key
from .text import normalize

log = logging.getLogger(__name__)

INDEX_SUFFIX = ".index.sqlite"
INDEX_VERSION = 5
"""3: NUL indexed as U+FFFD (version 2 indexes lost a record's text after a NUL). 4: the
senders of a record's origin (table `origins`, `bi` tokens `zo…`). 5: those senders in comparison form
(sender_key, issue 33)."""
HEAD_BYTES = 4096
"""The log's first bytes whose hash the index keeps (a different log at the same path)."""
READ_CHUNK = 1 << 20
"""Log bytes indexed per transaction."""
INDEX_DELAY = 0.05
"""The background indexer waits this long after an append, to index a batch at once."""
BUILD_STEP = 4 << 20
"""Log bytes indexed while holding the index: a query waits at most about this long."""
QUERY_CATCH_UP = 4 << 20
"""A query catches the index up by itself when it is at most this far behind; farther, while
a build is under way (the first start on a large log), it is refused with IndexBuilding."""
COUNTS_KEPT = 256
"""History query totals remembered (by the query's conditions) so that paging does not count again."""
ACTORS = ("model", "operator", "system")
TARGET_PARAMS = ("id", "personId")
"""Parameters whose string value names the record's target, besides its changes' targets."""
_SURROGATE = re.compile("[\ud800-\udfff]")

SCHEMA = """
CREATE TABLE meta(k TEXT PRIMARY KEY, v) WITHOUT ROWID;
CREATE TABLE ops(id INTEGER PRIMARY KEY, seq INTEGER NOT NULL, at REAL NOT NULL, actor TEXT NOT NULL,
                 tool TEXT NOT NULL, ok INTEGER NOT NULL, changed INTEGER NOT NULL,
                 off INTEGER NOT NULL, len INTEGER NOT NULL);
CREATE INDEX ops_at ON ops(at);
CREATE INDEX ops_changed ON ops(changed, at);
CREATE INDEX ops_actor ON ops(actor, at);
CREATE INDEX ops_tool ON ops(tool, at);
CREATE TABLE targets(target TEXT NOT NULL, id INTEGER NOT NULL, PRIMARY KEY(target, id)) WITHOUT ROWID;
CREATE TABLE origins(sender TEXT NOT NULL, id INTEGER NOT NULL, PRIMARY KEY(sender, id)) WITHOUT ROWID;
CREATE VIRTUAL TABLE tri USING fts5(t, tokenize='trigram case_sensitive 1', content='', detail=full,
                                   columnsize=0);
CREATE VIRTUAL TABLE bi USING fts5(t, tokenize='ascii', content='', detail=none, prefix='8', columnsize=0);
"""


def _record_text(value: Any, out: list[str]) -> None:
    if isinstance(value, dict):
        for v in value.values():
            _record_text(v, out)
    elif isinstance(value, list):
        for v in value:
            _record_text(v, out)
    elif value is not None:
        out.append(str(value))


def record_search_text(record: dict[str, Any]) -> str:
    """Every value of a record, normalized, one per line: what history keywords match."""
    out: list[str] = []
    _record_text(record, out)
    return normalize("\n".join(out))


def _indexable(text: str) -> str:
    """text as SQLite's full-text tables can take it: a hand-edited log may hold lone
    surrogates, and FTS5 reads a text only up to its first NUL; both become U+FFFD
    (keywords holding NUL or U+FFFD are answered by scanning the log)."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode()
        return text
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)


def _hex(text: str) -> str:
    return text.encode("utf-32-be").hex()


def bigram_doc(text: str) -> str:
    """The `bi` document of a text: its distinct character pairs and its last character."""
    h = _hex(text)
    n = len(h)
    if not n:
        return ""
    tokens = {h[i:i + 16] for i in range(0, n - 8, 8)}
    tokens.add(h[n - 8:])
    return " ".join(tokens)


CHANGED_TOKEN = "zc"


def filter_token(kind: str, value: str) -> str:
    """The `bi` token saying a record's actor ("a"), tool ("t") or a target ("g") is value
    (hex, so any string is one ASCII token; "z" keeps it apart from the character tokens)."""
    return f"z{kind}{value.encode('utf-8', 'surrogatepass').hex()}"


def _phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def search_keys(keywords: list[str]) -> list[str]:
    """The normalized keywords a record must all contain (empty ones and ones inside another dropped)."""
    keys = sorted({k for k in (normalize(w) for w in keywords) if k}, key=len, reverse=True)
    out: list[str] = []
    for k in keys:
        if not any(k in longer for longer in out):
            out.append(k)
    return out


def senders_of(rec: dict[str, Any]) -> set[str]:
    """The sender keys of a record's origin (whose messages led to the call), in their
    comparison form (zcord.core.text.sender_key): older records may hold other forms."""
    origin = rec.get("origin")
    got = origin.get("senders") if isinstance(origin, dict) else None
    return {k for k in (sender_key(x) for x in got if isinstance(x, str)) if k} if isinstance(got, list) else set()


def targets_of(rec: dict[str, Any]) -> set[str]:
    """The ids a record is about: its changes' targets and the id / personId it was called with."""
    out = {c["target"] for c in rec.get("changes") or () if isinstance(c, dict) and isinstance(c.get("target"), str)}
    params = rec.get("params")
    if isinstance(params, dict):
        out.update(params[k] for k in TARGET_PARAMS if isinstance(params.get(k), str))
    return out


class IndexBuilding(ZcorError):
    """A history query while the index is built from a large log (try again shortly)."""

    code = "busy"


class LogSource(Protocol):
    """What the history index and queries read of the operation log (zcord.core.oplog.OpLog)."""

    path: Path

    def end(self) -> int:
        """The log's length now: every record appended so far ends before it."""
        ...

    def pread(self, length: int, offset: int) -> bytes:
        """Bytes of the log."""
        ...

    def parse(self, line: bytes, offset: int) -> dict[str, Any]:
        """One record of the log (StateFileInvalid when the line is not one)."""
        ...


class HistoryIndex:
    """Keeping operations.index.sqlite up with the log (held by OpLog as `index`): opening
    and checking it, indexing new lines in steps, the background builder. Reads the log only
    through `LogSource`; `lock` guards the connection and every field below."""

    def __init__(self, log: LogSource, index_path: Path) -> None:
        self.log = log
        self.index_path = index_path
        self.lock = threading.Lock()
        self.db: sqlite3.Connection | None = None
        self.covered = 0  # log bytes indexed
        self.rows = 0  # records indexed
        self.meta: dict[str, Any] = {}
        self.warned = False  # a failure to index was said (once, until indexing works again)
        self.generation = 0  # new index files since opening (remembered totals are for one)
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._stopping = False
        self._builders = 0  # threads in build_steps
        self._builders_lock = threading.Lock()

    def close_db(self) -> None:
        """Close the connection (queries then scan the log)."""
        if self.db is not None:
            try:
                self.db.close()
            except sqlite3.Error:
                pass
            self.db = None

    def open(self) -> tuple[int, int, int]:
        """Open the index (or start a new one) and return what it covers: log bytes, the
        largest seq and the last change id it saw."""
        with self.lock:
            self._open_index()
            return self.covered, int(self.meta.get("max_seq", 0)), int(self.meta.get("last_change_id", 0))

    def close(self) -> None:
        """Stop the background builder (waiting for it) and close the connection."""
        self._stopping = True
        self._wake.set()
        with self.lock:  # a warm() starting the indexer finishes starting it first
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        self._thread = None
        with self.lock:
            self.close_db()

    def notify(self) -> None:
        """The log grew: the background builder (when running) indexes the new records soon."""
        if self._thread is not None:
            self._wake.set()

    def coverage(self) -> tuple[int, int]:
        """(records indexed, log bytes they cover)."""
        with self.lock:
            return self.rows, self.covered

    def building(self) -> bool:
        """Whether a build is under way (a thread in build_steps, or the background builder)."""
        thread = self._thread
        return bool(self._builders) or (thread is not None and thread.is_alive())

    def _index_files(self) -> list[Path]:
        p = self.index_path
        return [p, p.with_name(p.name + "-wal"), p.with_name(p.name + "-shm")]

    def note(self, message: str) -> None:
        log.warning("%s: %s", self.index_path.name, message)

    def _connect(self) -> sqlite3.Connection:
        """Connect to the index file, never through a symbolic link: a link (or anything but a
        regular file) in its place or its -wal/-shm's is removed first (the index is derived)."""
        for p in self._index_files():
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(st.st_mode):
                self.note(f"{p.name} is not a regular file (a symbolic link?); removing it and rebuilding")
                os.unlink(p)
                if p == self.index_path:
                    for other in self._index_files()[1:]:
                        try:
                            os.unlink(other)
                        except FileNotFoundError:
                            pass
        try:
            fd = os.open(self.index_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o640)
            os.fchmod(fd, 0o640)
            os.close(fd)
        except FileExistsError:
            pass
        before = os.lstat(self.index_path)
        db = sqlite3.connect(self.index_path, check_same_thread=False, isolation_level=None)
        try:
            after = os.lstat(self.index_path)
            if not stat.S_ISREG(after.st_mode) or (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
                raise sqlite3.DatabaseError("the index file was replaced while it was opened")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA temp_store=MEMORY")
        except BaseException:
            db.close()
            raise
        return db

    def _head_hash(self, upto: int) -> str:
        return hashlib.sha256(self.log.pread(min(HEAD_BYTES, upto), 0)).hexdigest()

    def _line_hash(self, off: int, length: int) -> str:
        return hashlib.sha256(self.log.pread(length, off)).hexdigest()

    def _open_index(self) -> None:
        """Open the index, or start a new one if it is not the log's; never raises (an index that
        cannot be opened leaves history queries to scan the log)."""
        try:
            self.db = self._connect()
            fresh = self.db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone() is None
            meta = {} if fresh else dict(self.db.execute("SELECT k, v FROM meta").fetchall())
            problem = self._mismatch(meta)  # "" for a fresh index: built without a word
            if problem is None:
                self.meta = meta
                self.covered = int(meta["covered"])
                self.rows = int(meta["rows"])
                return
            if problem:
                self.note(f"{problem}; rebuilding it from {self.log.path.name}")
        except (sqlite3.Error, OSError) as e:
            self.note(f"unusable ({e}); rebuilding it from {self.log.path.name}")
        self._reset()

    def _mismatch(self, meta: dict[str, Any]) -> str | None:
        """Why the index does not describe the log ("" for an empty index), or None."""
        if meta.get("version") != INDEX_VERSION:
            return "" if not meta else f"index format {meta.get('version')!r}, not {INDEX_VERSION}"
        covered = int(meta["covered"])
        size = self.log.end()
        if covered > size:
            return f"the log is shorter ({size} bytes) than the index covered ({covered})"
        if covered and meta["head"] != self._head_hash(covered):
            return "the log's first bytes changed"
        if covered and meta["last_hash"] != self._line_hash(int(meta["last_off"]), int(meta["last_len"])):
            return "the log's last indexed record changed"
        return None

    def _reset(self) -> None:
        """Start an empty index (deleting the old files); without one, queries scan the log."""
        self.close_db()
        self.meta, self.covered, self.rows = {}, 0, 0
        self.generation += 1
        try:
            for p in self._index_files():
                try:
                    os.unlink(p)
                except FileNotFoundError:
                    pass
            db = self._connect()
            try:
                db.executescript("BEGIN;" + SCHEMA + "COMMIT;")
                db.executemany("INSERT INTO meta VALUES (?, ?)", [("version", INDEX_VERSION), ("covered", 0),
                                                                  ("rows", 0)])
            except BaseException:
                db.close()
                raise
            self.db = db
        except (sqlite3.Error, OSError) as e:
            self.note(f"cannot be created ({e}); history queries will scan the log")
            self.close_db()

    # -- indexing ---------------------------------------------------------------------------

    def _catch_up(self, step: int | None = None) -> None:
        """Index the log's records after the covered bytes, or about `step` bytes of them (call
        with the db lock held)."""
        db = self.db
        assert db is not None
        end = self.log.end()
        pos = self.covered
        stop = end if step is None else min(end, pos + step)  # whole blocks: at least one
        pread = self.log.pread
        while pos < stop and not self._stopping:
            block = pread(min(READ_CHUNK, end - pos), pos)
            cut = block.rfind(b"\n") + 1
            while not cut:  # a line longer than READ_CHUNK
                block += pread(min(READ_CHUNK, end - pos - len(block)), pos + len(block))
                cut = block.rfind(b"\n") + 1
            self._index_block(db, block[:cut], pos)
            pos += cut

    def _index_block(self, db: sqlite3.Connection, block: bytes, pos: int) -> None:
        ops: list[tuple[int, int, float, str, str, int, int, int, int]] = []
        targets: list[tuple[str, int]] = []
        origins: list[tuple[str, int]] = []
        tri: list[tuple[int, str]] = []
        bi: list[tuple[int, str]] = []
        rid = self.rows
        meta = self.meta
        parse, name = self.log.parse, self.log.path.name
        max_seq = int(meta.get("max_seq", 0))
        last_change = int(meta.get("last_change_id", 0))
        max_at = float(meta.get("max_at", float("-inf")))
        monotone = int(meta.get("monotone", 1))
        last_off: int | None = None
        last_len = 0
        off = pos
        for line in block.split(b"\n")[:-1]:
            if not line:
                off += 1
                continue
            rec = parse(line, off)
            rid += 1
            at = _timestamp(rec, name, off)
            if at < max_at:
                monotone = 0
            else:
                max_at = at
            changes = rec.get("changes") or []
            ops.append((rid, rec["seq"], at, str(rec.get("actor", "")), str(rec.get("tool", "")),
                        int(rec.get("status") == "ok"), int(bool(changes)), off, len(line)))
            ids_ = targets_of(rec)
            targets.extend((t, rid) for t in ids_)
            text = _indexable(record_search_text(rec))
            tri.append((rid, text))
            marks = [filter_token("a", str(rec.get("actor", ""))), filter_token("t", str(rec.get("tool", "")))]
            marks += [filter_token("g", t) for t in ids_]
            who = senders_of(rec)
            if who:
                origins.extend((w, rid) for w in who)
                marks += [filter_token("o", w) for w in who]
            if changes:
                marks.append(CHANGED_TOKEN)
            bi.append((rid, bigram_doc(text) + " " + " ".join(marks)))
            max_seq = max(max_seq, rec["seq"])
            ids: list[int] = [c["changeId"] for c in changes
                              if isinstance(c, dict) and isinstance(c.get("changeId"), int)]
            if ids:
                last_change = max(last_change, *ids)
            last_off, last_len = off, len(line)
            off += len(line) + 1
        covered = pos + len(block)
        updates: dict[str, Any] = {"covered": covered, "rows": rid, "max_seq": max_seq,
                                   "last_change_id": last_change, "monotone": monotone}
        if max_at != float("-inf"):
            updates["max_at"] = max_at
        if last_off is not None:
            updates.update(last_off=last_off, last_len=last_len, last_hash=self._line_hash(last_off, last_len))
        if self.covered < HEAD_BYTES:
            updates["head"] = self._head_hash(covered)
        db.execute("BEGIN")
        try:
            db.executemany("INSERT INTO ops VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", ops)
            db.executemany("INSERT OR IGNORE INTO targets VALUES (?, ?)", targets)
            db.executemany("INSERT OR IGNORE INTO origins VALUES (?, ?)", origins)
            db.executemany("INSERT INTO tri(rowid, t) VALUES (?, ?)", tri)
            db.executemany("INSERT INTO bi(rowid, t) VALUES (?, ?)", bi)
            db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", list(updates.items()))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        meta.update(updates)
        self.covered, self.rows = covered, rid

    def warm(self, background: bool = False) -> None:
        """Bring the index up to the log's end (building it if new) and keep it there from a
        background thread (safe from any thread; a daemon calls it after it is ready).

        The work goes in steps, letting go of the index between them, so a query can see
        how far a long build is. background: only make sure the background thread runs.
        """
        if self._thread is None and self.db is not None and not self._stopping:
            with self.lock:
                if self._thread is None and not self._stopping:
                    self._thread = threading.Thread(target=self._indexer, name="zcord-oplog-index", daemon=True)
                    self._thread.start()
        if background:
            self._wake.set()
            return
        self.build_steps()

    def build_steps(self) -> None:
        """Bring the index up to the log's end, BUILD_STEP bytes per hold of the lock (what
        the background builder runs)."""
        with self._builders_lock:
            self._builders += 1
        try:
            while not self._stopping:
                with self.lock:
                    behind = self.log.end() - self.covered
                    if not behind or not self.try_catch_up(BUILD_STEP):
                        return
        finally:
            with self._builders_lock:
                self._builders -= 1

    def try_catch_up(self, step: int | None = None) -> bool:
        """Catch up (with the lock held); False (after saying why, once) when the index
        cannot be written now."""
        if self.db is None:
            return False
        try:
            self._catch_up(step)
            self.warned = False
            return True
        except sqlite3.OperationalError as e:  # a full disk, a read-only file: retried next time
            if not self.warned:
                self.note(f"cannot be updated ({e}); history queries scan the log meanwhile")
                self.warned = True
            return False
        except sqlite3.DatabaseError as e:  # corrupt: start over
            self.note(f"unusable ({e}); rebuilding it from {self.log.path.name}")
            self._reset()
            if self.db is None:
                return False
            try:
                self._catch_up()
                return True
            except sqlite3.Error as e2:
                self.note(f"cannot be rebuilt ({e2}); history queries scan the log")
                self.close_db()
                return False

    def _indexer(self) -> None:
        while not self._stopping:
            self._wake.wait()
            if self._stopping:
                return
            time.sleep(INDEX_DELAY)
            self._wake.clear()
            try:
                self.build_steps()
            except (OSError, StateFileInvalid) as e:  # the query that needs it reports it
                if not self.warned:
                    self.note(f"indexing stopped: {getattr(e, 'message', e)}")
                    self.warned = True


class HistoryQueries:
    """History queries answered from the index (or, when it cannot be used, by scanning the
    log), with exact totals remembered by their conditions (held by OpLog as `queries`).
    Reads the log through `LogSource` and the index through its public fields, under its lock."""

    def __init__(self, log: LogSource, index: HistoryIndex) -> None:
        self.log = log
        self.index = index
        # totals of recent queries by their conditions (see _counted): paging through a
        # query, or asking it again later, counts only the rows logged since
        self.totals: collections.OrderedDict[tuple[Any, ...], tuple[int, int]] = collections.OrderedDict()
        self._generation = index.generation  # of the index files the totals were counted in

    def query(self, keywords: list[str], start: float | None, end: float | None, limit: int, offset: int, *,
              changes_only: bool = False, actor: str | None = None, tool: str | None = None,
              target: str | None = None, origin: str | None = None) -> tuple[list[dict[str, Any]], int]:
        """Matching records newest first (ties: later-logged first), a page of them, and the total.

        Every keyword (normalized) must be a substring of the record's `record_search_text`;
        `start`/`end` bound its time (epoch seconds, inclusive); `changes_only` keeps records
        that changed something, `actor`/`tool` compare exactly, `target` keeps records whose
        changes target that id or that were called with it as `id` / `personId`, `origin` keeps
        records whose origin names that sender.
        """
        keys = search_keys(keywords)
        if origin is not None:
            origin = sender_key(origin)
        filters = (start, end, changes_only, actor, tool, target, origin)
        ix = self.index
        with ix.lock:
            size = self.log.end()
            behind = size - ix.covered
            if behind > QUERY_CATCH_UP and ix.building() and ix.db is not None and not ix.warned:
                done = ix.covered * 100 // max(size, 1)
                raise IndexBuilding(
                    f"The history index is being built from {self.log.path.name} ({done} % done, "
                    f"{behind >> 20} MiB to go); history queries answer when it is ready, in a minute or "
                    f"a few. Nothing else waits for it.", data={"retryAfterSeconds": 30})
            # NUL (which FTS5's query parser cuts at) and U+FFFD (which stands for the lone
            # surrogates of a hand-edited log in the index) are matched by scanning
            if ix.try_catch_up() and not any("\x00" in k or "\ufffd" in k for k in keys):
                if ix.generation != self._generation:  # a new index: totals counted in the old one are gone
                    self.totals.clear()
                    self._generation = ix.generation
                try:
                    spots, total = self._index_query(keys, filters, limit, offset)
                except sqlite3.OperationalError as e:
                    ix.note(f"query failed ({e}); scanning the log instead")
                    spots, total = self._scan_query(keys, filters, limit, offset)
            else:
                spots, total = self._scan_query(keys, filters, limit, offset)
        pread = self.log.pread
        return [json.loads(pread(length, off)) for off, length in spots], total

    def _index_query(self, keys: list[str], filters: tuple[Any, ...], limit: int,
                     offset: int) -> tuple[list[tuple[int, int]], int]:
        if int(self.index.meta.get("monotone", 1)):
            return self._fts_query(keys, filters, limit, offset)
        return self._sql_query(keys, filters, limit, offset)

    def _fts_query(self, keys: list[str], filters: tuple[Any, ...], limit: int,
                   offset: int) -> tuple[list[tuple[int, int]], int]:
        """A log whose times never went back: newest first is last logged first, a time range is
        a range of rows, and every filter is a token of `bi`, so the full-text tables answer
        the count and the page themselves (walking their matches backwards, stopping at the page)."""
        start, end, changes_only, actor, tool, target, origin = filters
        db = self.index.db
        assert db is not None
        lo, hi = 1, self.index.rows
        if start is not None:
            row = db.execute("SELECT id FROM ops WHERE at >= ? ORDER BY at, id LIMIT 1", (start,)).fetchone()
            lo = row[0] if row else hi + 1
        if end is not None:
            row = db.execute("SELECT id FROM ops WHERE at <= ? ORDER BY at DESC, id DESC LIMIT 1", (end,)).fetchone()
            hi = row[0] if row else 0
        if lo > hi:
            return [], 0
        long = [k for k in keys if len(k) >= 3]
        terms = [f'"{_hex(k)}"' if len(k) == 2 else f'"{_hex(k)}" *' for k in keys if len(k) < 3]
        if changes_only:
            terms.append(CHANGED_TOKEN)
        terms += [f'"{filter_token(kind, v)}"' for kind, v in (("a", actor), ("t", tool), ("g", target),
                                                               ("o", origin)) if v is not None]
        where: list[str] = ["rowid BETWEEN ? AND ?"]
        args: list[Any] = [lo, hi]
        if long and terms:  # walk bi's matches, test them against tri's (as a set: "+" keeps
            table = "bi"     # SQLite from running tri's query once per candidate row instead)
            where.append("bi MATCH ?")
            args.append(" AND ".join(terms))
            where.append("+rowid IN (SELECT rowid FROM tri WHERE tri MATCH ? AND rowid BETWEEN ?1 AND ?2)")
            args.append(" AND ".join(_phrase(k) for k in long))
        elif long:
            table = "tri"
            where.append("tri MATCH ?")
            args.append(" AND ".join(_phrase(k) for k in long))
        elif terms:
            table = "bi"
            where.append("bi MATCH ?")
            args.append(" AND ".join(terms))
        else:
            total = hi - lo + 1
            rows = db.execute("SELECT off, len FROM ops WHERE id BETWEEN ? AND ? ORDER BY id DESC LIMIT ? OFFSET ?",
                              (lo, hi, limit, offset)).fetchall()
            return rows, total
        cond = " AND ".join(where)
        key = (table, cond, *args[2:], lo)  # not hi: new rows are counted on top of a known total
        known = self._counted(key, hi)
        if known is None and long and terms:  # one pass (the set is built once), the page cut from all matches
            every = [r[0] for r in db.execute(f"SELECT rowid FROM {table} WHERE {cond} ORDER BY rowid DESC", args)]
            total, ids = len(every), every[offset:offset + limit]
            self._remember(key, hi, total)
        else:
            if known is None:
                total = db.execute(f"SELECT count(*) FROM {table} WHERE {cond}", args).fetchone()[0]
            else:  # counted up to an earlier row: count only the rows after it
                upto, total = known
                if upto < hi:
                    total += db.execute(f"SELECT count(*) FROM {table} WHERE {cond}",
                                        [upto + 1, hi, *args[2:]]).fetchone()[0]
            self._remember(key, hi, total)
            if not total or offset >= total:
                return [], total
            ids = [r[0] for r in db.execute(f"SELECT rowid FROM {table} WHERE {cond} ORDER BY rowid DESC "
                                            f"LIMIT ? OFFSET ?", [*args, limit, offset])]
        if not ids:
            return [], total
        spots = dict(((i, (o, n)) for i, o, n in db.execute(
            f"SELECT id, off, len FROM ops WHERE id IN ({','.join('?' * len(ids))})", ids)))
        return [spots[i] for i in ids], total

    def _counted(self, key: tuple[Any, ...], hi: int) -> tuple[int, int] | None:
        """(last row counted, total up to it) of an earlier query with the same conditions
        from the same first row, when that row is at most hi: rows are only ever appended,
        so the rows after it are all that is left to count."""
        hit = self.totals.get(key)
        if hit is None or hit[0] > hi:
            return None
        self.totals.move_to_end(key)
        return hit

    def _remember(self, key: tuple[Any, ...], hi: int, total: int) -> None:
        hit = self.totals.get(key)
        if hit is None or hit[0] <= hi:
            self.totals[key] = (hi, total)
            self.totals.move_to_end(key)
            while len(self.totals) > COUNTS_KEPT:
                self.totals.popitem(last=False)

    def _sql_query(self, keys: list[str], filters: tuple[Any, ...], limit: int,
                   offset: int) -> tuple[list[tuple[int, int]], int]:
        """Any log (also one whose times went back): the rows table ordered by time."""
        start, end, changes_only, actor, tool, target, origin = filters
        where: list[str] = []
        args: list[Any] = []
        if start is not None:
            where.append("at >= ?")
            args.append(start)
        if end is not None:
            where.append("at <= ?")
            args.append(end)
        long = [k for k in keys if len(k) >= 3]
        short = [k for k in keys if len(k) < 3]
        # with keywords the full-text match drives the query: "+" keeps SQLite from walking
        # the (rarely selective) changed/actor/tool indexes instead
        plus = "+" if keys else ""
        if changes_only:
            where.append(f"{plus}changed = 1")
        if actor is not None:
            where.append(f"{plus}actor = ?")
            args.append(actor)
        if tool is not None:
            where.append(f"{plus}tool = ?")
            args.append(tool)
        if target is not None:
            where.append("id IN (SELECT id FROM targets WHERE target = ?)")
            args.append(target)
        if origin is not None:
            where.append("id IN (SELECT id FROM origins WHERE sender = ?)")
            args.append(origin)
        if long:
            where.append("id IN (SELECT rowid FROM tri WHERE tri MATCH ?)")
            args.append(" AND ".join(_phrase(k) for k in long))
        if short:
            where.append("id IN (SELECT rowid FROM bi WHERE bi MATCH ?)")
            args.append(" AND ".join(f'"{_hex(k)}"' if len(k) == 2 else f'"{_hex(k)}" *' for k in short))
        db = self.index.db
        assert db is not None
        if not where:
            total = self.index.rows
        else:
            total = db.execute(f"SELECT count(*) FROM ops WHERE {' AND '.join(where)}", args).fetchone()[0]
        if not total or offset >= total:
            return [], total
        rows = db.execute(f"SELECT off, len FROM ops WHERE {' AND '.join(where) or '1'} "
                          f"ORDER BY at DESC, id DESC LIMIT ? OFFSET ?", [*args, limit, offset]).fetchall()
        return rows, total

    def _scan_query(self, keys: list[str], filters: tuple[Any, ...], limit: int,
                    offset: int) -> tuple[list[tuple[int, int]], int]:
        """The query without the index: read the whole log (when the index cannot be written)."""
        start, end, changes_only, actor, tool, target, origin = filters
        source = self.log
        size = source.end()
        name = source.path.name
        hits: list[tuple[float, int, int, int]] = []
        pos = n = 0
        while pos < size:
            block = source.pread(min(READ_CHUNK, size - pos), pos)
            cut = block.rfind(b"\n") + 1
            while not cut:
                block += source.pread(min(READ_CHUNK, size - pos - len(block)), pos + len(block))
                cut = block.rfind(b"\n") + 1
            off = pos
            for line in block[:cut].split(b"\n")[:-1]:
                if line:
                    rec = source.parse(line, off)
                    n += 1
                    at = _timestamp(rec, name, off)
                    if ((start is None or at >= start) and (end is None or at <= end)
                            and (not changes_only or rec.get("changes"))
                            and (actor is None or rec.get("actor") == actor)
                            and (tool is None or rec.get("tool") == tool)
                            and (target is None or target in targets_of(rec))
                            and (origin is None or origin in senders_of(rec))):
                        text = record_search_text(rec) if keys else ""
                        if all(k in text for k in keys):
                            hits.append((at, n, off, len(line)))
                off += len(line) + 1
            pos += cut
        hits.sort(reverse=True)
        return [(off, length) for _, _, off, length in hits[offset:offset + limit]], len(hits)


def _timestamp(rec: dict[str, Any], name: str, offset: int) -> float:
    try:
        return datetime.fromisoformat(rec["at"]).timestamp()
    except (KeyError, TypeError, ValueError):
        raise StateFileInvalid(f"{name} at byte {offset} holds a record without a valid time (at); "
                               f"fix or remove that line by hand") from None
