"""Forgetting a person (issue 34): `zcor/erase` and what it rewrites under the Memory
directory. No sockets; the Service runs it under its lock (`Service.erase`).

Who and what goes
- The person is named by a sender key or a personId, compared in sender-key form
  (zcord.core.senderkey): `QQ:Alice` and `qq:alice` are one person.
- Their relationship (every version of it) and their trust entry.
- The memories linked to them: every memory a version of their relationship linked
  (`memoryNodeId`).
- The memories only they caused: every change that wrote the memory's text
  (`node.create`, `node.update`) came from a call whose origin's speaker is them. A memory
  someone else (another sender, the operator, an import) also wrote stays, as it is; the
  person is only taken out of the origins of its records. A memory they were merely present
  for (not the speaker) stays.
- A kept memory filed under an erased one is lifted to the erased one's nearest kept parent;
  a kept memory superseded by an erased one is current again; another person's link to an
  erased memory is cleared. These pointers are rewritten in every version, so the history
  replays to the Memory as it now is.

Where it reaches (everything under the Memory directory)
- operations.jsonl: each change of an erased memory or relationship becomes a placeholder
  `{"kind": "erased"}` with its changeId, time and actor (ids stay contiguous, so replay,
  versions, time travel and revert of everything else keep working); a record whose params,
  result or error name the person (their key, an erased memory's id, any text of an erased
  memory or of their relationship, compared also in recall's match form: NFKC, case folded,
  Traditional folded to Simplified) keeps its seq, time, actor, tool and status but its
  params become `{"redacted": "erasure"}` and its result and error go; the person is taken
  out of every origin (a session named after them goes too).
- memory-state.json, history/ segments and every backup under backups/: the same for their
  nodes, relationships, important lists and inline history.
- review.json and review.log: held operations about them dropped; trust.json: their entry.
- Derived files are deleted and rebuilt from the above: the history index
  (operations.index.sqlite and its -wal/-shm), memory-state.cache, memory-state.recall.cache.
- The in-memory recall sessions (what each session was shown) are cleared.

What remains is one tombstone, the erasure's own record in operations.jsonl: tool
`zcor/erase`, actor operator, time, how many records it changed, and the person as
`hmac-sha256:<hex>` keyed with `erasure.key` (32 random bytes made at the first erasure,
mode 0600, never copied into backups): a later request for the same person gives the same
hash (`erasedBefore` in a preview), nothing names them. The erasure cannot be reverted.

Crash safety: the plan (the keys, texts and ids to remove) is written atomically to
`erase-plan.json` (0600) before any file changes: that is the commit point. Every step
after it rewrites one file atomically and is idempotent (a second pass over a scrubbed file
changes nothing; the tombstone is appended once, found by the plan's id), and the plan is
removed last. Killed before the plan is written, nothing changed; after it, the next start
(Store opened, before loading) runs the plan again to its end.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import signal
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from ..core import origin as O
from ..core.errors import InvalidArgument, NotFound
from ..core.fsutil import atomic_write, fsync_dir, read_nofollow
from ..core.indexcache import CACHE_FILE as RECALL_CACHE
from ..core.journal import POS_FILE
from ..core.layout import (
    BACKUPS_DIR,
    HISTORY_DIR,
    LEGACY_FILE,
    OPLOG_FILE,
    RECALL_LOG_DIR,
    STATE_FILE,
)
from ..core.nodecache import CACHE_FILE as NODE_CACHE
from ..core.senderkey import sender_key
from ..core.text import fold_han, match_form
from .usage import USAGE_FILE

log = logging.getLogger(__name__)

PLAN_FILE = "erase-plan.json"
KEY_FILE = "erasure.key"
TOOL = "zcor/erase"
REDACTED = {"redacted": "erasure"}
MIN_NEEDLE = 4
"""Texts shorter than this are matched whole (equal strings) only: a short title would
otherwise redact unrelated records."""
TRUST_FILE = "trust.json"
REVIEW_FILE = "review.json"
REVIEW_LOG = "review.log"
DERIVED = ("operations.index.sqlite", "operations.index.sqlite-wal", "operations.index.sqlite-shm",
           NODE_CACHE, RECALL_CACHE)
EXTRA_JSONL: tuple[str, ...] = (USAGE_FILE,)
"""Further JSON-lines files under the Memory directory whose lines naming the person (a
session named after them) are dropped: the token-usage record (zcord.service.usage)."""
EXTRA_JSONL_DIRS: tuple[str, ...] = (RECALL_LOG_DIR,)
"""Folders of such files: the recall log (zcord.service.recall_log), whose entries naming them
(a sender, a recalled memory of theirs, its title in the header) are dropped."""
CRASH_ENV = "ZCOR_TEST_ERASE_KILL_AT"
"""Tests only: the step at which the daemon kills itself (SIGKILL) mid-erasure."""


def _crash_point(step: str) -> None:
    if os.environ.get(CRASH_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)


# -- the keyed hash -----------------------------------------------------------------------------


def secret(memdir: Path, create: bool) -> bytes | None:
    """The Memory's erasure key (made on first use when create)."""
    path = memdir / KEY_FILE
    try:
        return read_nofollow(path, 4096)
    except FileNotFoundError:
        if not create:
            return None
    atomic_write(path, secrets.token_bytes(32), mode=0o600)
    return read_nofollow(path, 4096)


def subject_hash(key: bytes, person: str) -> str:
    return "hmac-sha256:" + hmac.new(key, sender_key(person).encode(), hashlib.sha256).hexdigest()


# -- reading what the Memory holds -----------------------------------------------------------


def _read_json(path: Path) -> Any:
    return orjson.loads(read_nofollow(path))


def _log_records(memdir: Path, wanted: Callable[[bytes], bool] | None = None) -> Iterator[dict[str, Any]]:
    try:
        f = open(memdir / OPLOG_FILE, "rb")  # noqa: SIM115
    except FileNotFoundError:
        return
    with f:
        for line in f:
            if line.endswith(b"\n") and (wanted is None or wanted(line)):
                try:
                    rec = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(rec, dict):
                    yield rec


def _state_changes(memdir: Path, doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for seg in doc.get("historySegments") or ():
        try:
            with open(memdir / HISTORY_DIR / seg, "rb") as f:
                for line in f:
                    if line.strip():
                        yield orjson.loads(line)
        except FileNotFoundError:
            continue
    yield from doc.get("history") or ()


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


# -- the plan ----------------------------------------------------------------------------------


def build_plan(memdir: Path, person: str, seq: int, at: datetime) -> dict[str, Any]:
    """What erasing `person` removes, read from the files (the caller has written a snapshot
    holding every change). Raises NotFound-like InvalidArgument when nothing names them."""
    key = sender_key(person)
    if not key:
        raise InvalidArgument("sender/personId must name someone (it is empty in sender-key form)",
                              field="sender")
    doc = _read_json(memdir / STATE_FILE) if (memdir / STATE_FILE).exists() else {}
    rel_versions: list[dict[str, Any]] = []
    linked: set[str] = set()
    authors: dict[str, bool] = {}  # memory id -> only this person wrote it so far
    parent_of: dict[str, str | None] = {}
    node_versions: dict[str, list[dict[str, Any]]] = {}
    records_about = 0
    key_re = _anchors([_fold(key)])
    for rec in _log_records(memdir, lambda line: b'"node.create"' in line or b'"node.update"' in line
                            or key_re is not None and key_re.search(line.decode("utf-8", "replace").lower()) is not None):
        origin = rec.get("origin")
        only_them = rec.get("actor") == "model" and O.speaker(origin) == key
        if key in O.senders(origin) or only_them:
            records_about += 1
        for c in rec.get("changes") or ():
            kind, target = c.get("kind"), c.get("target")
            if not isinstance(kind, str) or not isinstance(target, str):
                continue
            if kind in ("node.create", "node.update"):
                authors[target] = authors.get(target, True) and only_them
    for c in _state_changes(memdir, doc):
        kind, target = c.get("kind") or "", c.get("target")
        if kind.startswith("relationship.") and isinstance(target, str) and sender_key(target) == key:
            for v in (c.get("before"), c.get("after")):
                if isinstance(v, dict):
                    rel_versions.append(v)
                    if isinstance(v.get("memoryNodeId"), str):
                        linked.add(v["memoryNodeId"])
        elif kind.startswith("node.") and isinstance(target, str):
            for v in (c.get("before"), c.get("after")):
                if isinstance(v, dict):
                    node_versions.setdefault(target, []).append(v)
                    parent_of[target] = v.get("parentId")
    for n in doc.get("nodes") or ():
        parent_of[n["id"]] = n.get("parentId")
        node_versions.setdefault(n["id"], []).append(n)
    for r in doc.get("relationships") or ():
        if sender_key(r.get("personId", "")) == key:
            rel_versions.append(r)
            if isinstance(r.get("memoryNodeId"), str):
                linked.add(r["memoryNodeId"])
    trust_keys: list[str] = []
    try:
        trust = _read_json(memdir / TRUST_FILE)
        trust_keys = [k for k in (trust.get("senders") or {}) if sender_key(k) == key]
    except (FileNotFoundError, orjson.JSONDecodeError, AttributeError):
        pass
    memories = sorted(linked | {m for m, only in authors.items() if only}, key=_id_order)
    people = sorted({r["personId"] for r in rel_versions if isinstance(r.get("personId"), str)})
    gone = set(memories)

    def lift(mid: str | None) -> str | None:
        seen = set()
        while mid is not None and mid in gone and mid not in seen:
            seen.add(mid)
            mid = parent_of.get(mid)
        return mid

    keys = sorted({key, person.strip(), *people, *trust_keys} - {""})
    needles: set[str] = set()
    for mid in memories:
        for v in node_versions.get(mid, ()):
            needles.update(s for s in (v.get("title"), v.get("content"), v.get("sourceMessage"))
                           if isinstance(s, str))
    names: set[str] = set()
    for r in rel_versions:
        # texts are looked for inside other text; names only as whole words (an "Alice" inside
        # "Malice" or "qq:alice2" is someone else)
        needles.update(s for s in (r.get("relationship"), r.get("reason")) if isinstance(s, str))
        names.update(sender_key(s) for s in (r.get("name"), *(r.get("aliases") or ())) if isinstance(s, str))
    needles.discard("")
    keys = sorted(set(keys) | (names - {""}))
    return {"version": 1, "id": secrets.token_hex(8), "seq": seq, "at": at.isoformat(timespec="milliseconds"),
            "key": key, "people": people, "trust": trust_keys, "memories": memories,
            "lift": {m: lift(parent_of.get(m)) for m in memories},
            "keys": keys, "needles": sorted(needles), "recordsAbout": records_about}


def _id_order(mid: str) -> tuple[int, str]:
    return (int(mid[1:]), mid) if mid[1:].isdigit() else (1 << 62, mid)


_VARIANTS: dict[str, str] | None = None


def _fold(text: str) -> str:
    """Width (NFKC), invisible and format characters (dropped), case and Traditional/Simplified
    all folded: what sender_key and match_form fold (for needles; lines are searched with
    `_pattern`, which finds a folded needle in unfolded text)."""
    return fold_han(sender_key.__wrapped__(text))


def _variants() -> dict[str, str]:
    """Each Simplified character: itself and the Traditional characters folded to it."""
    global _VARIANTS
    if _VARIANTS is None:
        from ..core.hanzi import SIMPLIFIED, TRADITIONAL

        out: dict[str, str] = {}
        for t, simp in zip(TRADITIONAL, SIMPLIFIED, strict=True):
            out[simp] = out.get(simp, simp) + t
        _VARIANTS = out
    return _VARIANTS


def _anchors(forms: list[str]) -> re.Pattern[str] | None:
    """A regex of literal pieces, one of which a line's lower-cased text holds whenever it
    holds one of the folded forms: the first characters of each form, in Traditional and
    Simplified (a literal alternation: scanned at C speed). Lines it finds are then parsed
    and their strings compared in full (`Scrubber.names`)."""
    if not forms:
        return None
    variants = _variants()
    pieces: set[str] = set()
    for form in forms:
        combos = [""]
        for ch in form[:3]:
            alts = set(variants.get(ch, ch)) | {ch}
            if "!" <= ch <= "~":
                alts.add(chr(ord(ch) + 0xFEE0))  # its full-width form
            wider = [c + a for c in combos for a in alts]
            if len(wider) > 32:
                break
            combos = wider
        pieces.update(c.lower() for c in combos if c)
    return re.compile("|".join(re.escape(p) for p in sorted(pieces, key=len, reverse=True)))


# -- scrubbing -------------------------------------------------------------------------------


class Scrubber:
    """The pure rewrite of one record, change, node, relationship or state document."""

    def __init__(self, plan: dict[str, Any]):
        self.key: str = plan["key"]
        self.memories = frozenset(plan["memories"])
        self.lift: dict[str, str | None] = plan["lift"]
        long = [n for n in plan["needles"] if len(match_form(n).strip()) >= MIN_NEEDLE]
        self.exact = frozenset(n for n in plan["needles"]) | frozenset(match_form(n) for n in plan["needles"])
        self.keys = frozenset(sender_key(k) for k in plan["keys"])
        # a key inside a longer name (a private session "qq:private:alice"), as a whole token;
        # the part after the platform prefix too, when it is long enough to be theirs alone
        tokens = self.keys | {k.rsplit(":", 1)[1] for k in self.keys
                              if ":" in k and len(k.rsplit(":", 1)[1]) >= MIN_NEEDLE}
        self.tokens = tokens
        forms = {_fold(n) for n in [*plan["needles"], *plan["keys"], *tokens]}
        forms.update(f'"{m}"' for m in self.memories)
        self.forms = sorted(f for f in forms if f)
        self.ascii_forms = [f.encode() for f in self.forms if f.isascii()]
        self.pattern = _anchors(self.forms)
        self.key_re = re.compile("|".join(rf"(?<![0-9a-z]){re.escape(t)}(?![0-9a-z])"
                                          for t in sorted(tokens, key=len, reverse=True))) if tokens else None
        self.long = list(dict.fromkeys([*long, *(match_form(n) for n in long)]))

    # what names them

    def names(self, s: str) -> bool:
        if s in self.memories or s in self.exact:
            return True
        if len(s) <= O.MAX_SENDER:
            k = sender_key(s)
            if k in self.keys or self.key_re is not None and self.key_re.search(k):
                return True
        if any(n in s for n in self.long):
            return True
        form = match_form(s)
        return form in self.exact or any(n in form for n in self.long)

    def mentions(self, value: Any) -> bool:
        return any(self.names(s) for s in _strings(value))

    def maybe(self, line: bytes) -> bool:
        """A cheap test on a raw line: False only when nothing in it can name them (every
        needle, key and memory id is looked for in the line's folded form, a superset of
        what `names` finds in its strings)."""
        if b"\\u" in line:
            return True  # JSON escapes: only the parsed strings can tell
        if not line.isascii():
            return self.pattern is not None and self.pattern.search(line.decode("utf-8", "replace").lower()) is not None
        low = line.lower()
        return any(f in low for f in self.ascii_forms)

    # pieces

    def node(self, n: dict[str, Any]) -> dict[str, Any]:
        if n.get("parentId") in self.memories:
            n = {**n, "parentId": self.lift.get(n["parentId"])}
        if n.get("supersededBy") in self.memories:
            n = {**n, "supersededBy": None, "supersedeReason": None}
        return n

    def rel(self, r: dict[str, Any]) -> dict[str, Any]:
        if r.get("memoryNodeId") in self.memories:
            r = {**r, "memoryNodeId": None}
        return r

    def theirs(self, c: dict[str, Any]) -> bool:
        kind, target = c.get("kind") or "", c.get("target")
        if not isinstance(target, str):
            return False
        if kind.startswith(("node.", "scope.")):
            return target in self.memories
        return sender_key(target) in self.keys  # their relationship, their trust level

    def change(self, c: dict[str, Any]) -> dict[str, Any]:
        if c.get("kind") == "erased":
            return c
        if self.theirs(c):
            kept: dict[str, Any] = {k: c[k] for k in ("changeId", "at", "actor", "tool", "opSeq") if k in c}
            return {**kept, "kind": "erased", "target": None, "before": None, "after": None, "receipt": None}
        kind = c.get("kind") or ""
        out = dict(c)
        for side in ("before", "after"):
            v = out.get(side)
            if kind.startswith("node.") and isinstance(v, dict):
                out[side] = self.node(v)
            elif kind.startswith("relationship.") and isinstance(v, dict):
                out[side] = self.rel(v)
            elif kind.startswith("important.") and isinstance(v, list):
                out[side] = [i for i in v if i not in self.memories]
        if out.get("receipt") is not None and self.mentions(out["receipt"]):
            out["receipt"] = None
        if "origin" in out:
            out["origin"] = self.origin(out["origin"])
        return out

    def origin(self, origin: Any) -> Any:
        if not isinstance(origin, dict) or origin.get("operator") is True and not origin.get("senders"):
            return origin
        out = dict(origin)
        if isinstance(out.get("senders"), list):
            out["senders"] = [s for s in out["senders"] if not (isinstance(s, str) and self.names(s))]
        for name in ("speaker", "session"):
            if isinstance(out.get(name), str) and self.names(out[name]):
                del out[name]
        return out

    def record(self, rec: dict[str, Any]) -> dict[str, Any]:
        out = dict(rec)
        if out.get("tool") == TOOL:
            return out
        changes = out.get("changes") or []
        out["changes"] = [self.change(c) for c in changes]
        touched = any(c.get("kind") == "erased" for c in out["changes"])
        if touched or self.mentions([out.get("params"), out.get("result"), out.get("error")]):
            if out.get("params") != REDACTED:
                out["params"] = dict(REDACTED)
            out["result"] = None
            if out.get("error") is not None:
                out["error"] = {"code": (out["error"] or {}).get("code", "error"), "message": "(erased)",
                                "field": None}
        if "origin" in out:
            out["origin"] = self.origin(out["origin"])
        return out

    def state(self, doc: dict[str, Any]) -> dict[str, Any]:
        out = dict(doc)
        if isinstance(out.get("nodes"), list):
            out["nodes"] = [self.node(n) for n in out["nodes"] if n.get("id") not in self.memories]
        if isinstance(out.get("important"), list):
            out["important"] = [i for i in out["important"] if i not in self.memories]
        if isinstance(out.get("relationships"), list):
            out["relationships"] = [self.rel(r) for r in out["relationships"]
                                    if sender_key(r.get("personId", "")) != self.key]
        if isinstance(out.get("history"), list):
            out["history"] = [self.change(c) for c in out["history"]]
        if isinstance(out.get("scopes"), dict):  # the scopes of private conversations' memories (scope.py)
            out["scopes"] = {i: s for i, s in out["scopes"].items() if i not in self.memories}
            if not out["scopes"]:
                del out["scopes"]
        return out


# -- applying the plan ---------------------------------------------------------------------------


def _dump(value: Any) -> bytes:
    return orjson.dumps(value)


def _rewrite_lines(path: Path, fn: Callable[[bytes], bytes | None], tail: bytes = b"") -> int:
    """Rewrite a JSON-lines file line by line (fn: the new line, None to drop it), streamed
    into a temporary file beside it (a log of a million records is never held in memory),
    which replaces it atomically — or is removed when nothing changed. Returns how many
    lines changed."""
    try:
        f = open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        return 0
    changed = 0
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o640)
    try:
        with f, os.fdopen(fd, "wb", buffering=1 << 20) as out:
            for line in f:
                if not line.endswith(b"\n"):
                    break  # a torn last line: its writer never finished it
                new = fn(line)
                if new != line:
                    changed += 1
                if new is not None:
                    out.write(new)
            if changed or tail:
                out.write(tail)
                out.flush()
                os.fsync(out.fileno())
        if changed or tail:
            os.replace(tmp, path)
            fsync_dir(path.parent)
        else:
            os.unlink(tmp)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return changed


def _scrub_line(sc: Scrubber, what: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[bytes], bytes]:
    def fn(line: bytes) -> bytes:
        if not sc.maybe(line):
            return line
        rec = orjson.loads(line)
        new = what(rec)
        return line if new == rec else _dump(new) + b"\n"
    return fn


def _rewrite_state(path: Path, sc: Scrubber) -> bool:
    try:
        raw = read_nofollow(path)
    except FileNotFoundError:
        return False
    if not sc.maybe(raw):
        return False  # nothing in it names them (the usual backup taken before they came)
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        log.warning("erasure: %s is not JSON; left as it is", path)
        return False
    if not isinstance(doc, dict):
        return False
    new = sc.state(doc)
    if new == doc:
        return False
    atomic_write(path, orjson.dumps(new, option=orjson.OPT_INDENT_2) + b"\n")
    return True


def apply_plan(memdir: Path, plan: dict[str, Any]) -> dict[str, int]:
    """Carry out a written plan; idempotent (see the module docstring). Returns counts."""
    sc = Scrubber(plan)
    counts = {"backups": 0, "historySegments": 0, "records": 0, "review": 0}
    backups = memdir / BACKUPS_DIR
    if backups.is_dir():
        for name in sorted(os.listdir(backups)):
            if name.endswith(".json") and not name.startswith("."):
                counts["backups"] += _rewrite_state(backups / name, sc)
                _crash_point("backup")
    hist = memdir / HISTORY_DIR
    if hist.is_dir():
        for name in sorted(os.listdir(hist)):
            if name.endswith(".jsonl"):
                counts["historySegments"] += bool(_rewrite_lines(hist / name, _scrub_line(sc, sc.change)))
    for name in sorted(os.listdir(memdir)):  # the originals a migration kept, a legacy file
        if name.startswith("memory-state.v") and name.endswith(".json") or name == LEGACY_FILE:
            _rewrite_state(memdir / name, sc)
    _rewrite_state(memdir / STATE_FILE, sc)
    _crash_point("state")
    # the operation log, with the tombstone appended once
    log_path = memdir / OPLOG_FILE
    mark = f'"erasure":"{plan["id"]}"'.encode()
    present = False
    if log_path.exists():
        with open(log_path, "rb") as f:
            present = any(mark in line for line in f)
    counts["records"] = _rewrite_lines(log_path, _scrub_line(sc, sc.record))
    if not present:
        tomb = {"seq": plan["seq"], "at": plan["at"], "actor": "operator", "tool": TOOL,
                "params": {"subject": plan["subject"], "erasure": plan["id"]}, "status": "ok", "error": None,
                "changes": [], "result": {**plan["summary"], "recordsChanged": counts["records"],
                                          "irreversible": True},
                "recovered": False, "origin": {"operator": True}}
        tail = _dump(tomb) + b"\n"
        _rewrite_lines(log_path, lambda line: line, tail=tail)
    _crash_point("log")
    size = log_path.stat().st_size if log_path.exists() else 0
    last = _last_change_id(memdir)
    atomic_write(memdir / POS_FILE, json.dumps({"changeId": last, "logOffset": size}).encode() + b"\n")
    # review, trust
    counts["review"] = _scrub_review(memdir, sc)
    _scrub_trust(memdir, sc)
    for name in EXTRA_JSONL:
        _rewrite_lines(memdir / name, _drop_naming(sc))
    for folder in EXTRA_JSONL_DIRS:
        d = memdir / folder
        if d.is_dir():
            for name in sorted(os.listdir(d)):
                if not name.startswith("."):
                    _rewrite_lines(d / name, _drop_naming(sc))
    for name in DERIVED:
        try:
            os.unlink(memdir / name)
        except FileNotFoundError:
            pass
    _remove_stale_tmp(memdir)
    fsync_dir(memdir)
    return counts


def _remove_stale_tmp(memdir: Path) -> None:
    """Temporary files of atomic writes killed midway may hold old text: remove them all."""
    for d in (memdir, memdir / BACKUPS_DIR, memdir / HISTORY_DIR):
        if d.is_dir():
            for name in os.listdir(d):
                if name.startswith(".") and name.endswith(".tmp"):
                    try:
                        os.unlink(d / name)
                    except FileNotFoundError:
                        pass


def _drop_naming(sc: Scrubber) -> Callable[[bytes], bytes | None]:
    def fn(line: bytes) -> bytes | None:
        if not sc.maybe(line):
            return line
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            return line
        return None if sc.mentions(value) else line
    return fn


def _last_change_id(memdir: Path) -> int:
    doc = _read_json(memdir / STATE_FILE) if (memdir / STATE_FILE).exists() else {}
    last = 0
    for c in doc.get("history") or ():
        last = max(last, c.get("changeId") or 0)
    for seg in doc.get("historySegments") or ():
        last = max(last, int(seg.rsplit("-", 1)[1].split(".")[0]))
    return last


def _scrub_review(memdir: Path, sc: Scrubber) -> int:
    path = memdir / REVIEW_FILE
    dropped = 0
    if path.exists():
        doc = _read_json(path)
        pending = []
        for entry in doc.get("pending") or ():
            changes = [sc.change(c) for c in entry.get("changes") or ()]
            if any(c.get("kind") == "erased" for c in changes) or sc.mentions(entry.get("changes")):
                dropped += 1
                continue
            entry = {**entry, "changes": changes, "origin": sc.origin(entry.get("origin")),
                     "by": [b for b in entry.get("by") or () if not (isinstance(b, str) and sc.names(b))]}
            pending.append(entry)
        rejected = [p for p in doc.get("rejected") or ()
                    if not (isinstance(p, list) and p and isinstance(p[0], str) and sc.names(p[0]))]
        new = {**doc, "pending": pending, "rejected": rejected}
        if new != doc:
            atomic_write(path, json.dumps(new, ensure_ascii=False).encode() + b"\n")
    dropped += _rewrite_lines(memdir / REVIEW_LOG, _drop_naming(sc))
    return dropped


def _scrub_trust(memdir: Path, sc: Scrubber) -> None:
    path = memdir / TRUST_FILE
    if not path.exists():
        return
    doc = _read_json(path)
    senders = doc.get("senders") or {}
    kept = {k: v for k, v in senders.items() if sender_key(k) != sc.key}
    if kept != senders:
        atomic_write(path, json.dumps({**doc, "senders": kept}, ensure_ascii=False, indent=1).encode())


# -- the plan file ---------------------------------------------------------------------------------


def write_plan(memdir: Path, plan: dict[str, Any]) -> None:
    atomic_write(memdir / PLAN_FILE, json.dumps(plan, ensure_ascii=False).encode(), mode=0o600)


def finish(memdir: Path, plan: dict[str, Any]) -> dict[str, int]:
    """Apply a written plan and remove it (the erasure is then complete)."""
    counts = apply_plan(memdir, plan)
    _crash_point("before-unlink")
    os.unlink(memdir / PLAN_FILE)
    fsync_dir(memdir)
    return counts


def resume(memdir: Path) -> bool:
    """At start: complete an erasure a crash interrupted (True when there was one)."""
    path = memdir / PLAN_FILE
    if not path.exists():
        return False
    plan = json.loads(read_nofollow(path))
    log.warning("completing the erasure %s interrupted by a crash", plan.get("id"))
    finish(memdir, plan)
    return True


def previous(memdir: Path, subject: str) -> list[str]:
    """The times of earlier erasures of the same person (their tombstones)."""
    out = []
    needle = subject.encode()
    for rec in _log_records_matching(memdir, needle):
        if rec.get("tool") == TOOL and (rec.get("params") or {}).get("subject") == subject:
            out.append(str(rec.get("at")))
    return out


def _log_records_matching(memdir: Path, needle: bytes) -> Iterator[dict[str, Any]]:
    try:
        f = open(memdir / OPLOG_FILE, "rb")  # noqa: SIM115
    except FileNotFoundError:
        return
    with f:
        for line in f:
            if needle in line:
                yield orjson.loads(line)


def places(memdir: Path, sc: Scrubber) -> dict[str, int]:
    """A preview of where their words are kept: file (relative path) -> lines or records that
    name them (derived files are listed as rebuilt)."""
    out: dict[str, int] = {}

    def count_lines(path: Path, rel: str) -> None:
        n = 0
        try:
            with open(path, "rb") as f:
                for line in f:
                    if sc.maybe(line):
                        try:
                            value = orjson.loads(line)
                        except orjson.JSONDecodeError:
                            continue
                        if sc.mentions(value) or (isinstance(value, dict) and any(
                                sc.theirs(c) for c in value.get("changes") or () if isinstance(c, dict))) or (
                                isinstance(value, dict) and sc.theirs(value)):
                            n += 1
        except FileNotFoundError:
            return
        if n:
            out[rel] = n

    count_lines(memdir / OPLOG_FILE, OPLOG_FILE)
    count_lines(memdir / REVIEW_LOG, REVIEW_LOG)
    for d in (HISTORY_DIR, *EXTRA_JSONL_DIRS):
        if (memdir / d).is_dir():
            for name in sorted(os.listdir(memdir / d)):
                count_lines(memdir / d / name, f"{d}/{name}")
    for name in EXTRA_JSONL:
        count_lines(memdir / name, name)
    for rel in [STATE_FILE, REVIEW_FILE, TRUST_FILE] + [
            f"{BACKUPS_DIR}/{n}" for n in sorted(os.listdir(memdir / BACKUPS_DIR))
            if (memdir / BACKUPS_DIR).is_dir() and n.endswith(".json")]:
        try:
            raw = read_nofollow(memdir / rel)
        except FileNotFoundError:
            continue
        if not sc.maybe(raw):
            continue
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(doc, dict) and (sc.state(doc) != doc or rel in (REVIEW_FILE, TRUST_FILE) and sc.mentions(doc)):
            out[rel] = 1
    for name in DERIVED:
        if (memdir / name).exists():
            out[name] = -1  # rebuilt
    return out


# -- the operator method -------------------------------------------------------------------------


def _summary(plan: dict[str, Any]) -> dict[str, Any]:
    return {"memories": len(plan["memories"]), "relationships": len(plan["people"]),
            "trustEntries": len(plan["trust"]), "recordsAbout": plan["recordsAbout"]}


def erase(svc: Any, person: str, field: str, preview: bool) -> dict[str, Any]:
    """`zcor/erase {sender? | personId?, preview?}` (see the module docstring); its params
    model (zcord.transport.params.EraseParams) checked them: `person` is the one given and
    `field` its name."""
    memdir: Path = svc.dir
    svc.gate.wait_idle()
    clock = time.perf_counter()
    seconds: dict[str, float] = {}

    def took(step: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        seconds[step] = round(now - clock, 3)
        clock = now

    with svc.lock:
        took("waited")
        svc.snapshots.settle()
        svc.snapshots.save(svc.snapshots.pos())  # the state file then holds every change
        svc.review._compact(svc.review.items)
        took("snapshot")
        plan = build_plan(memdir, person, svc.calls.seq + 1, svc.clock())
        took("plan")
        key = secret(memdir, create=False)
        subject = subject_hash(key, person) if key is not None else None
        before = previous(memdir, subject) if subject is not None else []
        sc = Scrubber(plan)
        found = bool(plan["memories"] or plan["people"] or plan["trust"] or plan["recordsAbout"])
        nodes = svc.state.nodes
        listing = {
            "person": sender_key(person),
            "memories": [{"id": m, "title": nodes[m].title if m in nodes else None, "current": m in nodes}
                         for m in plan["memories"]],
            "relationships": plan["people"], "trust": plan["trust"], "counts": _summary(plan),
            "places": places(memdir, sc) if preview else {}, "erasedBefore": before, "irreversible": True,
            "note": "Erasure cannot be reverted: the history keeps only a tombstone.",
        }
        if preview:
            took("places")
            return {"preview": True, **listing, "seconds": seconds}
        if not found:
            raise NotFound(f"nothing in this Memory names {sender_key(person)!r}; nothing was erased"
                           + (" (it was erased before)" if before else ""), field=field)
        plan["subject"] = subject_hash(secret(memdir, create=True) or b"", person)
        plan["summary"] = _summary(plan)
        write_plan(memdir, plan)  # the commit point
        _crash_point("plan")
        svc.snapshots.settle()
        svc.oplog.close()
        svc.usage.close()
        svc.recall_log.flush()
        # usage reports and the recall log's writer do not take the service lock: they wait here
        with svc.usage.lock, svc.recall_log._io:
            counts = finish(memdir, plan)
            svc.recall_log._counts.clear()
            svc.recall_log._sizes = None
        took("rewrite")
        reopen(svc)
        took("reload")
        at = svc.clock()
        svc.calls.last_at = max(svc.calls.last_at or at, at)
        event = {"tool": TOOL, "actor": "operator", "seq": plan["seq"], "origin": {"operator": True},
                 "changes": [{"kind": "erased", "target": None}]}
    for listener in list(svc.calls.listeners):
        try:
            listener(event)
        except Exception as e:  # a broken listener must not fail the erasure
            log.warning("change listener failed: %r", e)
    return {"erased": True, **listing, "subject": plan["subject"], "seq": plan["seq"], **counts,
            "seconds": seconds}


def reopen(svc: Any) -> None:
    """(lock held) Load the Memory the erasure rewrote: state, log, index, review, trust."""
    from ..core import indexcache
    from ..core.history_index import HistoryIndex, HistoryQueries
    from ..core.journal import read_pos

    oplog = svc.oplog
    oplog.index = HistoryIndex(oplog, oplog.index_path)
    oplog.queries = HistoryQueries(oplog, oplog.index)
    oplog._count = None
    oplog.open()
    svc.state = svc.store.load()
    svc.index_cache_used = indexcache.read(svc.dir, svc.state, svc.store.cache_header)
    pos = read_pos(svc.dir)
    svc.snapshots.written(pos)
    svc.trust.load()
    svc.review.load(oplog.last_seq, svc.find_operation)
    svc.usage.load()
    svc.calls.seq = max(svc.calls.seq, oplog.last_seq)
    svc.sessions.sets.clear()
    svc.sessions.senders.clear()
    svc.twins.sync()  # the twin index (consolidation) drops the erased memories now
    oplog.warm(background=True)  # the history index is rebuilt from the rewritten log now


# -- what the Memory knows about a person ---------------------------------------------------------


def subject(svc: Any, person: str) -> dict[str, Any]:
    """`zcor/subject {sender | personId}` (checked by its params model): every memory,
    relationship, trust entry, held change and history record about or from the person, and
    the same as a readable report."""
    key = sender_key(person)
    with svc.lock:
        st = svc.state
        rels = [r.dump() for pid, r in st.relationships.items() if sender_key(pid) == key]
        level = next((lv for s, lv in svc.trust.levels.items() if sender_key(s) == key), None)
        held = [{"seq": seq, "at": e.get("at"), "tool": e.get("tool"), "origin": e.get("origin"),
                 "changes": e.get("changes")}
                for seq, e in sorted(svc.review.items.items())
                if key in O.senders(e.get("origin")) or any(sender_key(b) == key for b in e.get("by") or ()
                                                            if isinstance(b, str))]
        linked = {r["memoryNodeId"] for r in rels if r.get("memoryNodeId")}
        nodes = dict(st.nodes)
        scopes = dict(st.scopes)  # memories of private conversations (scope.py)
        log_path = svc.oplog.path
    roles: dict[str, set[str]] = {}
    records = []
    for rec in _log_records(log_path.parent):
        origin = rec.get("origin")
        who = O.senders(origin)
        how = "speaker" if rec.get("actor") == "model" and O.speaker(origin) == key else \
            "present" if key in who else None
        if how is None and any(sender_key(s) == key for s in _strings([rec.get("params"), rec.get("result")])
                               if len(s) <= O.MAX_SENDER):
            how = "named"
        for c in rec.get("changes") or ():
            t, kind = c.get("target"), c.get("kind") or ""
            if kind in ("node.create", "node.update") and isinstance(t, str):
                roles.setdefault(t, set()).add("them" if how == "speaker" else "others")
        if how is not None:
            records.append({"seq": rec.get("seq"), "at": rec.get("at"), "actor": rec.get("actor"),
                            "tool": rec.get("tool"), "as": how, "params": rec.get("params"),
                            "changes": [{"kind": c.get("kind"), "target": c.get("target")}
                                        for c in rec.get("changes") or ()]})
    memories = []
    for mid in sorted(set(linked) | {m for m, r in roles.items() if "them" in r}, key=_id_order):
        n = nodes.get(mid)
        why = "linked" if mid in linked else "only them" if roles.get(mid) == {"them"} else "with others"
        memories.append({"id": mid, "why": why, "current": n is not None,
                         **({"title": n.title, "content": n.content} if n is not None else {}),
                         **({"scope": {"session": scopes[mid]}} if mid in scopes else {})})
    out = {"person": key, "relationships": rels, "trust": level, "memories": memories, "held": held,
           "records": records}
    out["report"] = _report(out)
    return out


def _report(s: dict[str, Any]) -> str:
    lines = [f"What this Memory holds about {s['person']}", ""]
    lines.append(f"Trust: {s['trust'] or 'default'}")
    for r in s["relationships"]:
        lines.append(f"Relationship {r['personId']}: {r['name']} — {r['relationship']} (affinity {r['affinity']}; "
                     f"{r['reason']})")
    if not s["relationships"]:
        lines.append("Relationship: none")
    lines.append(f"Memories ({len(s['memories'])}):")
    for m in s["memories"]:
        state = "" if m["current"] else " [deleted; in the history]"
        if m.get("scope"):
            state += f" [private to {m['scope']['session']}]"
        lines.append(f"  {m['id']} ({m['why']}){state}: {m.get('title', '')}" + (
            f" — {m['content']}" if m.get("content") else ""))
    lines.append(f"Held for review ({len(s['held'])}): " + ", ".join(f"#{h['seq']} {h['tool']}" for h in s["held"]))
    lines.append(f"History records ({len(s['records'])}):")
    for r in s["records"]:
        lines.append(f"  #{r['seq']} {r['at']} {r['tool']} ({r['as']})")
    return "\n".join(lines) + "\n"
