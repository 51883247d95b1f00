"""Review of untrusted changes (issue 22, issue 33): the changes a bot made on behalf of an
untrusted sender (or with an untrusted or blocked sender present) are applied and logged but
held — invisible to the model — until an operator approves them (`zcor/review/approve`) or
rejects them (`zcor/review/reject`, a revert of each).

Held means invisible (issue 33): the model reads as if a held change had not been made.
Recall, search candidates and the model's query see every memory a held change touched as
last approved (`approved_nodes`, laid over the live indexes by retrieval.approved: a held
supersede, merge or delete leaves its sources recallable, a held rewrite is found by its
approved words, a held new memory nowhere); a held memory is left out of the system prefix
and is not markable important; person entries show memories and relationships as last
approved (`approved_rels`; a relationship a held change created hides only that person);
the important list in the system prefix is the approved one (a held merge, supersede or
delete moves no important mark). Memory ids and personIds are kept apart (`hidden_nodes`,
`hidden_people`).

The pending set is kept as a snapshot, `review.json` (`{"version": 1, "pending": [...]}`,
written atomically), and an append-only record of what happened since, `review.log` (one
JSON line per event, fsynced: `hold`, `drop`, `mark`, `unmark`), so a hold appends one line
instead of rewriting the set. The record is compacted into a new snapshot at start and when
it outgrows the snapshot. Every event sets a state (an entry present, absent, marked), so a
record replayed over the snapshot it was compacted into gives that snapshot again: a crash
during compaction leaves the old or the new pending set. A torn last line is ignored.

One entry per held operation, keyed by the operation's `seq` (the number the History screen
shows, and what `zcor/history/revert` takes), holding its time, tool, origin, the senders it
is held for (`by`) and its changes (before and after). Each sender may have at most
MAX_HELD_PER_SENDER held operations and MAX_HELD_BYTES_PER_SENDER bytes of them; past that
the model's change is refused with a message saying so.

Crash safety (a crash at any instant leaves the old or the new pending set):

- holding: the entry is recorded before the operation's log record; an entry whose seq the
  log never got (seq above the log's last) is dropped at the next start.
- reverting (reject, revert, revertOrigin of a held operation): the entry is first marked
  `reverting` by the reverting operation's seq, and removed after that operation is
  logged; at start a marked entry is removed when that operation is in the log, and put
  back to pending when it is not.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import NotFound, StateFileInvalid, UntrustedSender
from ..core.fsutil import atomic_write
from ..core.models import Node, Relationship
from ..retrieval.approved import ApprovedViews
from .trust import read_small_file

if TYPE_CHECKING:
    from .calls import Ctx
    from .parts import FlowRoom

log = logging.getLogger(__name__)

REVIEW_FILE = "review.json"
REVIEW_LOG = "review.log"
HIDING_KINDS = frozenset({"node.create", "node.update", "relationship.create", "relationship.update"})
"""Changes whose new record came from the untrusted sender: their targets are held."""
HOLDABLE_TOOLS = frozenset({"zcor_memory_write", "zcor_memory_delete", "zcor_memory_merge", "zcor_memory_supersede",
                            "zcor_relationship_write", "zcor_relationship_delete"})
"""Tools whose changes an untrusted sender may cause, held for review; their other changing
tools (important marks, restore, synonyms) they may not cause at all."""
MAX_IDS = 100
MAX_REVIEW_FILE = 1 << 40
"""review.json is read whatever its size (issue 33): refusing to start over it would be worse."""
MAX_HELD_PER_SENDER = 50
MAX_HELD_BYTES_PER_SENDER = 2 << 20
PAGE_LIMIT = 20
MAX_PAGE_LIMIT = 100
PAGE_BYTES = 4 << 20
"""A `zcor/review/list` page stops before this many bytes of items (at least one item)."""
APPROVE = "zcor/review/approve"
REVIEW_NOTE = ("Saved, but held for an operator's review because the message came from an untrusted sender: "
               "it is not recalled until approved. Do not write it again.")


MAX_REJECTED = 100_000
COMPACT_FROM = 1 << 20
"""review.log is compacted into review.json once it is this large and larger than the snapshot."""


def fingerprint(version: dict[str, Any]) -> str:
    """A memory's or relationship's version (its dump) as a short hash."""
    return hashlib.sha256(json.dumps(version, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:32]


def _size(entry: dict[str, Any]) -> int:
    return len(json.dumps(entry, ensure_ascii=False).encode())


class ReviewBook:
    """The held operations (review.json + review.log) and what they hide."""

    def __init__(self, path: Path, lock: threading.RLock):
        self.path = path
        self.lock = lock
        self.items: dict[int, dict[str, Any]] = {}
        self.sizes: dict[int, int] = {}
        self.hidden_nodes: frozenset[str] = frozenset()
        """Memory ids a held change created or rewrote."""
        self.hidden_people: frozenset[str] = frozenset()
        """personIds a held change created or rewrote."""
        self.approved_nodes: dict[str, dict[str, Any] | None] = {}
        """Each memory a held change touched: its last approved version (None: it had none)."""
        self.held_important: list[tuple[list[str], list[str]]] = []
        """The important-list changes of held operations (before, after), oldest first."""
        self.approved_rels: dict[str, dict[str, Any] | None] = {}
        """Each relationship a held change touched: its last approved version (None: it had none)."""
        self.held_removed: frozenset[str] = frozenset()
        """Memory ids a held delete, supersede or merge took away (recalled as approved)."""
        self._views = ApprovedViews()
        self.rejected: dict[tuple[str, str], None] = {}
        """(target, fingerprint of the rejected version): what an operator rejected (or a revert
        undid) while it was held, oldest first; a restore bringing one back holds it again."""
        self.files = ReviewFiles(self)

    @property
    def hidden(self) -> frozenset[str]:
        """The memory ids held back (hidden_nodes)."""
        return self.hidden_nodes

    # -- the files ------------------------------------------------------------------------

    def load(self, last_seq: int, find: Callable[[int], dict[str, Any] | None]) -> None:
        """Read review.json and review.log, settle what a crash left half done (see the module
        docstring) and compact them into one snapshot."""
        raw = read_small_file(self.path, MAX_REVIEW_FILE, " (held changes then count as approved)")
        items: dict[int, dict[str, Any]] = {}
        if raw is not None:
            try:
                doc = json.loads(raw)
                if doc.get("version") != 1 or not isinstance(doc.get("pending"), list):
                    raise ValueError('expected {"version": 1, "pending": [...]}')
                for entry in doc["pending"]:
                    if not isinstance(entry, dict) or not isinstance(entry.get("seq"), int) or \
                            not isinstance(entry.get("changes"), list):
                        raise ValueError("an entry without seq or changes")
                    items[entry["seq"]] = entry
                self.rejected = {}
                self._reject_pairs(doc.get("rejected") or [])
            except (ValueError, TypeError, AttributeError) as e:
                raise StateFileInvalid(f"{self.path.name} is not a valid review file ({e}); fix it by hand or "
                                       f"remove it (held changes then count as approved)") from None
        had_snapshot = raw is not None
        del raw
        replayed = self.files.replay(items)
        settled: dict[int, dict[str, Any]] = {}
        for seq, entry in items.items():
            if seq > last_seq and not entry.get("restore"):
                continue  # its operation never reached the log: it did not happen
            by = entry.get("reverting")
            if by is not None:
                rec = find(by) if isinstance(by, int) and by <= last_seq else None
                if rec is not None and rec.get("status") == "ok" and rec.get("changes"):
                    continue  # reverted
                entry = {k: v for k, v in entry.items() if k != "reverting"}
            settled[seq] = entry
        self.files.snapshot_bytes = self.path.stat().st_size if had_snapshot else 0
        if settled != items or (replayed and self.files.log_bytes > max(COMPACT_FROM, self.files.snapshot_bytes)):
            self._compact(settled)
        else:
            self._set(items)

    def _set(self, items: dict[int, dict[str, Any]]) -> None:
        self.items = items
        self.sizes = {k: v for k, v in self.sizes.items() if k in items}  # the rest measured when asked
        nodes: set[str] = set()
        people: set[str] = set()
        approved: dict[str, dict[str, Any] | None] = {}
        important: list[tuple[list[str], list[str]]] = []
        removed: set[str] = set()
        rels: dict[str, dict[str, Any] | None] = {}
        for _, entry in sorted(items.items()):
            for c in entry["changes"]:
                kind, target = c.get("kind"), c.get("target")
                if not isinstance(kind, str) or not isinstance(target, str):
                    continue
                if kind.startswith("node."):
                    approved.setdefault(target, c.get("before") if isinstance(c.get("before"), dict) else None)
                    if kind in HIDING_KINDS:
                        nodes.add(target)
                    elif kind in ("node.delete", "node.supersede"):
                        removed.add(target)
                elif kind.startswith("relationship."):
                    rels.setdefault(target, c.get("before") if isinstance(c.get("before"), dict) else None)
                elif kind.startswith("important.") and isinstance(c.get("before"), list) and \
                        isinstance(c.get("after"), list):
                    important.append((c["before"], c["after"]))
        # a relationship a held change made has no approved version: that person is hidden
        people.update(t for t, v in rels.items() if v is None)
        self.hidden_nodes, self.hidden_people = frozenset(nodes), frozenset(people)
        self.approved_nodes, self.held_important = approved, important
        self.held_removed = frozenset(removed)
        self.approved_rels = rels

    # -- holding, reverting ---------------------------------------------------------------

    def size_of(self, seq: int) -> int:
        """An entry's bytes as JSON (measured once)."""
        got = self.sizes.get(seq)
        if got is None:
            got = self.sizes[seq] = _size(self.items[seq])
        return got

    def held_for(self, sender: str) -> tuple[int, int]:
        """How many operations are held for a sender, and their bytes."""
        n = size = 0
        for k, e in self.items.items():
            if sender in (e.get("by") or ()):
                n += 1
                size += self.size_of(k)
        return n, size

    def hold(self, ctx: Ctx, changes: list[dict[str, Any]]) -> None:
        """Hold one operation's committed changes (lock held); OSError when the record cannot
        be written, UntrustedSender when a sender it is held for has no room left."""
        from ..core.models import format_time

        entry = {"seq": ctx.seq, "at": format_time(ctx.at), "tool": ctx.tool, "origin": ctx.origin,
                 "by": list(ctx.hold_by),
                 "changes": [{k: c.get(k) for k in ("changeId", "kind", "target", "before", "after")}
                             for c in changes]}
        size = _size(entry)
        for sender in ctx.hold_by:
            n, used = self.held_for(sender)
            if n + 1 > MAX_HELD_PER_SENDER or used + size > MAX_HELD_BYTES_PER_SENDER:
                raise UntrustedSender(
                    f"{ctx.tool} was refused: {n} change(s) ({used} bytes) caused with {sender} taking part already "
                    f"wait for an operator's review, the most that may wait ({MAX_HELD_PER_SENDER} changes, "
                    f"{MAX_HELD_BYTES_PER_SENDER} bytes per sender). Nothing was changed. Do not retry; answer "
                    f"without changing the memory.")
        self.files.record({"hold": entry})
        self.sizes[ctx.seq] = size

    def forget(self, seq: int) -> None:
        """Drop a hold whose operation was undone before it was logged (best effort: a stale
        entry is dropped at the next start anyway)."""
        if seq in self.items:
            try:
                self.files.record({"drop": [seq]})
            except OSError as e:
                log.warning("%s: could not drop held operation %s (%s)", self.path.name, seq, e)

    def approve(self, seqs: list[int]) -> None:
        """The held operations become ordinary (lock held); OSError when the record cannot be
        written. A version approved is no longer a rejected one (a later restore keeps it)."""
        approved = [[c["target"], fingerprint(c["after"])] for k in seqs if k in self.items
                    for c in self.items[k]["changes"] if isinstance(c.get("target"), str)
                    and isinstance(c.get("after"), dict)]
        self.files.record({"drop": list(seqs), **({"approved": approved} if approved else {})})

    def start_reverting(self, seqs: list[int], by: int) -> None:
        """Mark the held ones among seqs as being reverted by operation `by` (before it commits)."""
        held = [s for s in seqs if s in self.items]
        if held:
            self.files.record({"mark": held, "by": by})

    def settle_after(self, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Run a reverting operation; then drop the entries it marked (or unmark them when it failed)."""
        try:
            result = run()
        except BaseException:
            with self.lock:
                marked = [k for k, v in self.items.items() if "reverting" in v]
                if marked:
                    try:
                        self.files.record({"unmark": marked})
                    except OSError as e:
                        log.warning("%s: %s (settled at the next start)", self.path.name, e)
            raise
        by = result.get("seq")
        with self.lock:
            done = [k for k, v in self.items.items() if v.get("reverting") == by]
            if done:
                rejected = [[c["target"], fingerprint(c["after"])] for k in done for c in self.items[k]["changes"]
                            if c.get("kind") in HIDING_KINDS and isinstance(c.get("target"), str)
                            and isinstance(c.get("after"), dict)]
                try:
                    self.files.record({"drop": done, "rejected": rejected})
                except OSError as e:
                    log.warning("%s: %s (settled at the next start)", self.path.name, e)
        return result

    def _approve_pairs(self, pairs: Any) -> None:
        for p in pairs if isinstance(pairs, list) else ():
            if isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p):
                self.rejected.pop((p[0], p[1]), None)

    def _reject_pairs(self, pairs: Any) -> None:
        for p in pairs if isinstance(pairs, list) else ():
            if isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p):
                self.rejected.pop((p[0], p[1]), None)
                self.rejected[(p[0], p[1])] = None
        while len(self.rejected) > MAX_REJECTED:
            del self.rejected[next(iter(self.rejected))]

    def hold_rejected(self, ctx: Ctx, state: Any) -> list[str]:
        """After a restore (lock held): hold again every memory or relationship the restored
        state brings back exactly as a rejected version, as changes of the restore operation
        (`restore: true` entries, kept though a crash loses the restore's log record: they
        hide only what was rejected). Returns their targets."""
        from ..core.models import format_time

        changes = []
        for target, fp in self.rejected:
            node = state.nodes.get(target)
            rel = state.relationships.get(target)
            for kind, got in (("node.update", node), ("relationship.update", rel)):
                if got is not None and fingerprint(got.dump()) == fp:
                    changes.append({"changeId": None, "kind": kind, "target": target, "before": None,
                                    "after": got.dump()})
        if not changes:
            return []
        entry = {"seq": ctx.seq, "at": format_time(ctx.at), "tool": ctx.tool, "origin": ctx.origin,
                 "by": [], "restore": True, "changes": changes}
        self.files.record({"hold": entry})
        return [c["target"] for c in changes]

    # -- what the model sees ----------------------------------------------------------------

    def approved_important(self, current: list[str]) -> list[str]:
        """The important list without the moves of held operations (newest undone first)."""
        imp = list(current)
        for before, after in reversed(self.held_important):
            added = [i for i in after if i not in before]
            removed = [i for i in before if i not in after and i not in imp]
            pos = next((imp.index(a) for a in added if a in imp), None)
            imp = [i for i in imp if i not in added]
            if pos is None:
                imp += removed
            else:
                imp[min(pos, len(imp)):min(pos, len(imp))] = removed
        return imp

    def approved_view(self, state: Any) -> Any:
        """The state as ranking and the model's reads see it: every memory a held change
        touched as last approved, in the indexes too (retrieval.approved); None when nothing
        is held."""
        return self._views.view(state, self.approved_nodes, self.held_removed, self.approved_rels)

    def view(self, state: Any) -> Any:
        """The state as the model may see it (HeldView), or the state itself when nothing is held."""
        if not self.items:
            return state
        return HeldView(state, self)

    def _compact(self, items: dict[int, dict[str, Any]]) -> None:
        """Write the pending set as the snapshot, then empty the record (ReviewFiles.compact)."""
        self.files.compact(items)


class ReviewFiles:
    """The review book's files: review.log's events replayed and appended (fsynced), and
    review.json written as the compacted snapshot. A part of the ReviewBook (`ReviewBook.files`)."""

    def __init__(self, book: ReviewBook) -> None:
        self.book = book
        self.log_path = book.path.with_name(REVIEW_LOG)
        self.log_bytes = 0
        self.snapshot_bytes = 0

    def replay(self, items: dict[int, dict[str, Any]]) -> bool:
        """Apply review.log's events to items; whether there were any."""
        try:
            fd = os.open(self.log_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        except OSError as e:
            raise StateFileInvalid(f"{self.log_path.name} cannot be read ({e.strerror or e}); fix it or remove it "
                                   f"(changes held since the last snapshot then count as approved)") from None
        any_event = False
        good = 0  # the bytes of whole lines
        torn = False
        with os.fdopen(fd, "rb") as f:
            for n, line in enumerate(f, 1):
                try:
                    if not line.endswith(b"\n"):
                        raise ValueError("torn")
                    event = json.loads(line)
                    if not isinstance(event, dict):
                        raise ValueError("not an object")
                except ValueError:
                    if not line.endswith(b"\n"):
                        log.warning("%s: ignoring a torn last line (a crash while it was written)",
                                    self.log_path.name)
                        torn = True
                        break
                    raise StateFileInvalid(f"{self.log_path.name} line {n} is not a review event; fix it by hand "
                                           f"or remove the file") from None
                any_event = True
                good += len(line)
                _apply(items, event)
                self.book._reject_pairs(event.get("rejected") or [])
                self.book._approve_pairs(event.get("approved") or [])
        if torn:  # cut it off, so that the next event starts a line of its own
            os.truncate(self.log_path, good)
        self.log_bytes = good
        return any_event

    def compact(self, items: dict[int, dict[str, Any]]) -> None:
        """Write the pending set as the snapshot, then empty the record."""
        def pieces() -> Iterator[bytes]:
            yield b'{"version": 1, "pending": ['
            for n, k in enumerate(sorted(items)):
                yield (b",\n" if n else b"\n") + json.dumps(items[k], ensure_ascii=False).encode()
            yield b'\n], "rejected": ' + json.dumps([list(p) for p in self.book.rejected]).encode() + b"}\n"

        atomic_write(self.book.path, pieces())
        try:
            os.truncate(self.log_path, 0)
        except FileNotFoundError:
            pass
        self.log_bytes = 0
        self.snapshot_bytes = self.book.path.stat().st_size
        self.book._set(items)

    def record(self, event: dict[str, Any]) -> None:
        """Append one event to review.log (fsynced) and apply it; OSError when it cannot be written."""
        line = json.dumps(event, ensure_ascii=False).encode() + b"\n"
        fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640)
        try:
            size = os.fstat(fd).st_size
            written = os.write(fd, line)
            if written != len(line):  # a short write (disk full): take it back, the record stays whole
                os.ftruncate(fd, size)
                raise OSError(errno.ENOSPC, "no space left on the device")
            os.fsync(fd)
        finally:
            os.close(fd)
        self.log_bytes += len(line)
        items = dict(self.book.items)
        _apply(items, event)
        self.book._reject_pairs(event.get("rejected") or [])
        self.book._approve_pairs(event.get("approved") or [])
        self.book._set(items)
        if self.log_bytes > max(COMPACT_FROM, self.snapshot_bytes):
            try:
                self.compact(self.book.items)
            except OSError as e:  # the record holds it all; compacted at the next start
                log.warning("%s: could not compact the review record (%s)", self.book.path.name, e)


def _apply(items: dict[int, dict[str, Any]], event: dict[str, Any]) -> None:
    """One review event applied to the pending set (each sets a state: replaying is harmless)."""
    if "hold" in event:
        entry = event["hold"]
        if isinstance(entry, dict) and isinstance(entry.get("seq"), int) and isinstance(entry.get("changes"), list):
            items[entry["seq"]] = entry
    for seq in event.get("drop") or ():
        items.pop(seq, None)
    by = event.get("by")
    for seq in event.get("mark") or ():
        if seq in items:
            items[seq] = {**items[seq], "reverting": by}
    for seq in event.get("unmark") or ():
        if seq in items:
            items[seq] = {k: v for k, v in items[seq].items() if k != "reverting"}


class _Approved(Mapping[str, Any]):
    """A state's mapping (`nodes` or `relationships`) with each held entry as last approved
    (absent when it had no approved version), made as `model` when first asked for."""

    model: Any = None

    def __init__(self, live: Mapping[str, Any], approved: dict[str, dict[str, Any] | None]):
        self._live, self._approved = live, approved
        self._made: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        if key not in self._approved:
            return self._live[key]
        got = self._approved[key]
        if got is None:
            raise KeyError(key)
        if key not in self._made:
            self._made[key] = self.model.model_validate(got)
        return self._made[key]

    def __contains__(self, key: object) -> bool:
        if key in self._approved:
            return self._approved[key] is not None
        return key in self._live

    def __iter__(self) -> Iterator[str]:
        return iter(self._live)

    def __len__(self) -> int:
        return len(self._live)


class _ApprovedNodes(_Approved):
    """state.nodes with each held memory as last approved."""

    model = Node


class _ApprovedRels(_Approved):
    """state.relationships with each held relationship as last approved."""

    model = Relationship


class HeldView:
    """A MemoryState as the model may see it while changes are held: memories and
    relationships as last approved (`nodes`, `relationships`), the approved important list
    (`important`)."""

    def __init__(self, state: Any, book: ReviewBook):
        self._state = state
        self.nodes = _ApprovedNodes(state.nodes, book.approved_nodes)
        self.relationships = _ApprovedRels(state.relationships, book.approved_rels)
        self.important = [i for i in book.approved_important(state.important) if i in self.nodes]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._state, name)


class WithoutHeld:
    """A MemoryState seen without its held memories in the important list."""

    def __init__(self, state: Any, hidden: frozenset[str]):
        self._state = state
        self.important = [i for i in state.important if i not in hidden]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._state, name)


# -- operator methods ----------------------------------------------------------------------


def _pending(svc: FlowRoom, ids: list[int]) -> None:
    missing = [i for i in ids if i not in svc.review.items or "reverting" in svc.review.items[i]]
    if missing:
        raise NotFound(f"No held change with seq {', '.join(map(str, missing))}; zcor/review/list gives the held "
                       f"ones", field="ids")


def review_list(svc: FlowRoom, offset: int, limit: int) -> dict[str, Any]:
    """`zcor/review/list {offset?, limit?}` (its params model checks them): the held
    operations, newest first, with their origin and changes, a page at a time: at most
    `limit` (default PAGE_LIMIT, at most MAX_PAGE_LIMIT) and fewer when they pass PAGE_BYTES
    (always at least one); `total` counts them all and `nextOffset` (absent on the last page)
    is where the next page starts."""
    with svc.lock:
        book = svc.review
        seqs = [k for k in sorted(book.items, reverse=True) if "reverting" not in book.items[k]]
        page: list[dict[str, Any]] = []
        used = 0
        for k in seqs[offset:offset + limit]:
            size = book.size_of(k)
            if page and used + size > PAGE_BYTES:
                break
            page.append(dict(book.items[k]))
            used += size
    out: dict[str, Any] = {"items": page, "total": len(seqs)}
    if offset + len(page) < len(seqs):
        out["nextOffset"] = offset + len(page)
    return out


def approve(svc: FlowRoom, ids: list[int], params: dict[str, Any]) -> dict[str, Any]:
    """`zcor/review/approve {ids}`: the held operations become ordinary (recalled); recorded
    (`params` as the log records them)."""

    def apply() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        _pending(svc, ids)
        svc.review.approve(ids)
        return {"approved": ids}, [{"kind": "review.approve", "target": str(i)} for i in ids]

    return svc.calls.operate(APPROVE, params, "operator", apply, "review.json")


def reject(svc: FlowRoom, ids: list[int], force: bool, preview: bool, params: dict[str, Any]) -> dict[str, Any]:
    """`zcor/review/reject {ids, force?, preview?}`: revert the held operations, newest first,
    as one operation (conflicts as `zcor/history/revert`; `params` as the log records them)."""
    from . import undo

    def plan(ctx: Ctx, dry: bool) -> undo.Undo:
        _pending(svc, ids)
        records = []
        for i in ids:
            rec = svc.find_operation(i)
            if rec is None or rec.get("status") != "ok":
                raise NotFound(f"Operation {i} is not in the log as a change; approve it to clear it", field="ids")
            records.append(rec)
        return undo.plan_many(svc, ctx, records, force, f"Held operation(s) {', '.join(map(str, ids))}", "ids",
                              dry, {"rejected": True})

    if preview:
        return {"ids": ids, **undo.preview_many(svc, undo.REJECT, lambda ctx: plan(ctx, True))}

    def run(ctx: Ctx) -> dict[str, Any]:
        u = plan(ctx, False)
        svc.review.start_reverting(ids, ctx.seq)
        svc.commit(ctx)
        ctx.log_result = {"reverted": ids}
        return {"seq": ctx.seq, "rejected": ids, "forced": bool(u.conflicts),
                "changes": [{"kind": c["kind"], "target": c.get("target")} for c in ctx.changes]}

    return svc.review.settle_after(lambda: svc.calls.run_operation(undo.REJECT, params, run))
