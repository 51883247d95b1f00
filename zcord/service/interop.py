"""Import and export (operator methods `zcor/import` and `zcor/export`, issue 36).

An import is one logged operation, `zcor/import`, whose origin is `import:<file name>`:
its memories, marks and relationships are changes of one transaction, so
`zcor/history/revert` takes the whole import back as one, and `zcor/history/revertOrigin
{sender: "import:<file name>"}` every import of that file. A preview runs the same code in
a transaction that is rolled back: it shows exactly what would be created, ids included.

Identity: each entry has an identity in its file (a World Info uid, a lorebook entry id or
position, a zcor memory id). The import's log record keeps, in its result, which memory
each identity became (`{"ids": {identity: memoryId}}`); importing a file of the same name
again reads those records back (oldest first, later ones winning) and updates those
memories instead of creating new ones. The operation log is kept for good, so nothing
else needs to be stored; a memory deleted (or an import reverted) since is created anew.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import InvalidArgument, ZcorError
from ..core.models import MAX_IMPORTANT, Node, Relationship, now
from ..interop import readers
from ..interop.common import MAX_TITLE
from ..interop.readers import BadFile, Book, Entry
from ..interop.writers import EXPORT_FORMATS, ExportFile, Snapshot, export
from ..retrieval.synonyms import key_of
from .rooms.memories import find_node
from .service import MAX_PERSONA

if TYPE_CHECKING:
    from .calls import Ctx
    from .parts import FlowRoom

IMPORT = "zcor/import"
ORIGIN_PREFIX = "import:"
MAX_IMPORT_BYTES = 256 << 20
"""The largest file an import takes (a whole Memory's JSONL export included)."""
MAX_NAME = 200
MAX_ITEMS = 20_000
"""Items an answer lists (a whole Memory's JSONL has more; the counts cover them all)."""
PREVIEW_CONTENT = 2_000_000
"""A preview whose contents add up to more than this many characters shows the first
PREVIEW_CONTENT / items characters of each (`contentCut: true`), so its reply stays
deliverable (a reply may be 16 MiB)."""


@dataclass
class Options:
    name: str
    fmt: str | None = None
    preview: bool = False
    parent_id: str | None = None
    persona: bool = False


@dataclass
class _Report:
    items: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    not_marked: list[dict[str, Any]] = field(default_factory=list)
    marked: list[str] = field(default_factory=list)
    ids: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: {"created": 0, "updated": 0, "unchanged": 0})
    rels: dict[str, int] = field(default_factory=lambda: {"created": 0, "updated": 0, "unchanged": 0})
    synonyms: list[list[str]] = field(default_factory=list)
    synonyms_before: list[list[str]] | None = None


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME or \
            any(ch in name for ch in "/\\\n\r\t\x00") or name in (".", ".."):
        raise InvalidArgument(f"name must be the file's name (no folders), 1 to {MAX_NAME} characters",
                              field="name")
    return name


def import_file(svc: FlowRoom, raw: bytes, opts: Options) -> dict[str, Any]:
    """Read the file (without the lock), then preview or run the import."""
    check_name(opts.name)
    if len(raw) > MAX_IMPORT_BYTES:
        raise InvalidArgument(f"the file is {len(raw):,} bytes; an import takes at most {MAX_IMPORT_BYTES:,}",
                              field="data")
    book = readers.read(raw, opts.fmt)
    if not book.has_book and not (opts.persona and book.persona):
        raise BadFile("data.character_book: the card has no lorebook, so there is nothing to import"
                      + (" (its description, personality and scenario can be taken as PERSONA.md with persona)"
                         if book.persona else ""), "data.character_book")
    if opts.persona and book.persona and len(book.persona) > MAX_PERSONA:
        raise BadFile(f"data.description: the card's PERSONA.md would be {len(book.persona):,} characters; "
                      f"PERSONA.md may have at most {MAX_PERSONA:,}", "data.description")
    base = {"format": book.format, "name": opts.name, "origin": ORIGIN_PREFIX + opts.name,
            "persona": book.persona, "personaWritten": False, "unkept": _unkept(book.entries)}
    if not book.has_book:  # a card without a book, taken for its persona only
        out = {**base, "preview": opts.preview, "seq": None, **_empty()}
    elif opts.preview:
        with svc.lock:
            ctx = svc.calls.preview_ctx(IMPORT)
            try:
                report = _apply(svc, ctx, book, opts)
            finally:
                if ctx.tx is not None:
                    ctx.tx.rollback()
        out = {**base, "preview": True, "seq": None, **_result(report, preview=True)}
    else:
        logged = {"name": opts.name, "format": book.format, "bytes": len(raw),
                  "sha256": hashlib.sha256(raw).hexdigest(), "parentId": opts.parent_id, "persona": opts.persona}

        def run(ctx: Ctx) -> dict[str, Any]:
            ctx.origin = {"operator": True, "senders": [ORIGIN_PREFIX + opts.name]}
            report = _apply(svc, ctx, book, opts)
            if ctx.tx is not None and ctx.tx.changes:
                _add_synonyms(svc, report)
                try:
                    svc.commit(ctx)
                except BaseException:
                    if report.synonyms_before is not None:  # synonyms.json as it was
                        svc.synonyms.replace_groups(report.synonyms_before)
                    raise
                ctx.changes.extend({"kind": "synonyms.add", "before": None, "after": g} for g in report.synonyms)
            ctx.log_result = {"import": opts.name, "format": book.format, "ids": report.ids,
                              **{k: v for k, v in report.counts.items()}}
            return {"seq": ctx.seq, **_result(report, preview=False)}

        out = {**base, "preview": False, **svc.calls.run_operation(IMPORT, logged, run)}
    if opts.persona and book.persona and not opts.preview:
        svc.persona_set(book.persona)  # type: ignore[attr-defined]  # the Service's, an operation of its own
        out["personaWritten"] = True
    return out


def _empty() -> dict[str, Any]:
    return _result(_Report(), preview=False)


def _result(r: _Report, preview: bool) -> dict[str, Any]:
    """The answer: counts, and the items (at most MAX_ITEMS, contents in a preview only, cut
    when they add up to more than PREVIEW_CONTENT), so that it fits in one reply."""
    shown = r.items[:MAX_ITEMS]
    if not preview:
        items = [{k: v for k, v in i.items() if k != "content"} for i in shown]
    elif sum(len(i["content"]) for i in shown) > PREVIEW_CONTENT:  # a reply may be 16 MiB
        cut = max(20, PREVIEW_CONTENT // len(shown))
        items = [{**i, "content": i["content"][:cut], "contentCut": True} if len(i["content"]) > cut else i
                 for i in shown]
    else:
        items = shown
    return {**r.counts, "items": items, "itemsTotal": len(r.items), "skipped": r.skipped[:MAX_ITEMS],
            "important": r.marked, "notMarked": r.not_marked, "relationships": r.rels,
            "synonymGroups": len(r.synonyms)}


def _unkept(entries: list[Entry]) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in entries:
        for f in e.unkept:
            out[f] = out.get(f, 0) + 1
    return dict(sorted(out.items()))


# -- what an earlier import of the same file made -------------------------------------------------


def earlier_ids(svc: FlowRoom, name: str) -> dict[str, str]:
    """identity → memory id, from the log records of earlier imports of a file of this name."""
    sender = ORIGIN_PREFIX + name
    try:
        records, _ = svc.oplog.query([], None, None, 1 << 30, 0, changes_only=False, tool=IMPORT, origin=sender)
    except ZcorError:  # the history index is being built (busy): read the log itself
        records = list(_scan_log(svc.oplog.path, sender))
    out: dict[str, str] = {}
    for rec in sorted(records, key=lambda r: r["seq"]):
        got = (rec.get("result") or {}).get("ids") if rec.get("status") == "ok" else None
        if isinstance(got, dict):
            out.update({k: v for k, v in got.items() if isinstance(k, str) and isinstance(v, str)})
    return out


def _scan_log(path: Path, sender: str) -> Iterator[dict[str, Any]]:
    """The log records of imports from `sender`, by reading operations.jsonl line by line."""
    needle = json.dumps(sender).encode()
    with open(path, "rb") as f:
        for line in f:
            if b'"zcor/import"' in line and needle in line:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("tool") == IMPORT and sender in ((rec.get("origin") or {}).get("senders") or ()):
                    yield rec


# -- the one path: applied in a transaction (committed by the caller, or rolled back) ---------------


def _apply(svc: FlowRoom, ctx: Ctx, book: Book, opts: Options) -> _Report:
    st = svc.state
    if opts.parent_id is not None:
        find_node(svc, opts.parent_id, "parentId")
    earlier = earlier_ids(svc, opts.name)
    report = _Report()
    tx = svc.begin(ctx)
    jsonl = book.format == "jsonl"

    # which entries are imported, and each one's existing memory (a second import)
    live: dict[str, Entry] = {}
    existing: dict[str, str] = {}
    for e in book.entries:
        if not e.enabled:
            report.skipped.append({"entry": e.where, "title": e.title, "reason": "disabled in the file"})
            continue
        old = earlier.get(e.ident)
        if old is not None and old in st.nodes:
            by = st.nodes[old].superseded_by
            if by is not None and not (jsonl and e.node and e.node.get("supersededBy")):
                report.skipped.append({"entry": e.where, "title": e.title, "id": old,
                                       "reason": f"its memory {old} was superseded by {by} since it was imported"})
                continue
            existing[e.ident] = old
        live[e.ident] = e

    # groups become parent memories (identity group:<name>)
    groups: list[str] = []
    for e in live.values():
        if e.group and (e.parent is None or e.parent not in live) and e.group not in groups:
            groups.append(e.group)
    ids: dict[str, str] = {}

    def parent_of(e: Entry | None, group: str | None) -> str | None:
        if e is not None and e.parent is not None and e.parent in ids:
            return ids[e.parent]
        if group is not None:
            return ids["group:" + group]
        return opts.parent_id

    for g in groups:
        if len(g) > MAX_TITLE:
            where = next(e.where for e in live.values() if e.group == g)
            raise BadFile(f"{where}.group is {len(g)} characters; a memory's title may have at most "
                          f"{MAX_TITLE}", f"{where}.group")
        ident = "group:" + g
        old = earlier.get(ident)
        _put(svc, ctx, report, ident, f"group {g!r}", old if old in st.nodes and
             st.nodes[old].superseded_by is None else None,
             {"title": g, "content": "", "keywords": [], "parent_id": opts.parent_id}, ids)

    for e in _parents_first(list(live.values()), live):
        fields: dict[str, Any] = {"title": e.title, "content": e.content, "keywords": e.keywords,
                                  "parent_id": parent_of(e, e.group if e.parent not in live else None)}
        if jsonl and e.node is not None:
            fields["source_message"] = e.node["sourceMessage"]
            fields["times"] = (e.node["createdAt"], e.node["updatedAt"])
        _put(svc, ctx, report, e.ident, e.where, existing.get(e.ident), fields, ids)
        report.items[-1]["important"] = False

    if jsonl:  # superseded memories: after every memory exists (the replacement may come later)
        for e in live.values():
            node = e.node or {}
            by = node.get("supersededBy")
            cur = st.nodes[ids[e.ident]]
            if by is not None and cur.superseded_by is None and by in ids:
                done = cur.model_copy(update={"superseded_by": ids[by], "supersede_reason": node["supersedeReason"]})
                tx.put_node(done)
                tx.record("node.supersede", cur.id, before=cur.dump(), after=done.dump())
        _relationships(svc, ctx, book, ids, report)
        report.synonyms = _new_synonyms(svc, book.synonyms)

    _mark(svc, ctx, book, live, ids, report)
    report.ids = ids
    return report


def _parents_first(entries: list[Entry], live: dict[str, Entry]) -> list[Entry]:
    """Entries in file order, except that a parent comes before its children (so a revert,
    which undoes the newest first, never removes a memory before its children)."""
    out: list[Entry] = []
    done: set[str] = set()
    for e in entries:
        chain = []
        cur: Entry | None = e
        while cur is not None and cur.ident not in done:
            chain.append(cur)
            done.add(cur.ident)
            cur = live.get(cur.parent) if cur.parent is not None else None
        out.extend(reversed(chain))
    return out


def _put(svc: FlowRoom, ctx: Ctx, report: _Report, ident: str, where: str, old_id: str | None,
         fields: dict[str, Any], ids: dict[str, str]) -> None:
    st = svc.state
    tx = ctx.tx
    assert tx is not None
    times = fields.pop("times", None)
    parent = fields["parent_id"]
    item: dict[str, Any] = {"entry": where, "title": fields["title"], "keywords": list(fields["keywords"]),
                            "parentId": parent, "content": fields["content"]}
    if old_id is None:
        nid = tx.take_id()
        created, updated = (ctx.at, ctx.at)
        node = Node(id=nid, created_at=created, updated_at=updated, **fields)
        if times is not None:
            node = Node.model_validate({**node.dump(), "createdAt": times[0], "updatedAt": times[1]})
        tx.put_node(node)
        tx.record("node.create", nid, after=node.dump())
        report.counts["created"] += 1
        item.update(action="create", id=nid)
    else:
        old = st.nodes[old_id]
        if parent is not None and old_id in st.ancestors(parent):
            raise BadFile(f"{where}: its parent would be its own descendant {parent} in this Memory "
                          f"(memory {old_id} was moved since it was imported)", where)
        new = old.model_copy(update={**fields, "keywords": tuple(fields["keywords"])})
        if new != old:
            new = new.model_copy(update={"updated_at": max(ctx.at, old.created_at)})
            tx.put_node(new)
            tx.record("node.update", old_id, before=old.dump(), after=new.dump())
            report.counts["updated"] += 1
            item.update(action="update", id=old_id)
        else:
            report.counts["unchanged"] += 1
            item.update(action="unchanged", id=old_id)
        nid = old_id
    ids[ident] = nid
    report.items.append(item)


def _mark(svc: FlowRoom, ctx: Ctx, book: Book, live: dict[str, Entry], ids: dict[str, str],
          report: _Report) -> None:
    """Constant entries (a zcor file: its important list) become important, in entry order,
    while the list has room; the rest are reported."""
    st = svc.state
    wanted = book.important if book.format == "jsonl" else [e.ident for e in book.entries if e.important]
    where = {e.ident: e for e in book.entries}
    new = list(st.important)
    for ident in wanted:
        e = where.get(ident)
        nid = ids.get(ident)
        if e is None or nid is None or ident not in live:
            if e is not None:
                report.not_marked.append({"entry": e.where, "title": e.title, "reason": "not imported"})
            continue
        if nid in new:
            report.marked.append(nid)
            continue
        if st.nodes[nid].superseded_by is not None:
            report.not_marked.append({"entry": e.where, "title": e.title, "reason": "superseded"})
        elif len(new) >= MAX_IMPORTANT:
            report.not_marked.append({"entry": e.where, "title": e.title, "id": nid,
                                      "reason": f"the important list already holds {MAX_IMPORTANT}"})
        else:
            new.append(nid)
            report.marked.append(nid)
    for item in report.items:
        item["important"] = item.get("id") in new
    if new != list(st.important):
        assert ctx.tx is not None
        ctx.tx.record("important.set", None, before=list(st.important), after=new)
        ctx.tx.set_important(new)


def _relationships(svc: FlowRoom, ctx: Ctx, book: Book, ids: dict[str, str], report: _Report) -> None:
    st = svc.state
    tx = ctx.tx
    assert tx is not None
    for r in book.relationships:
        rec = {k: v for k, v in r.items() if k != "where"}
        link = rec.get("memoryNodeId")
        rec["memoryNodeId"] = ids.get(link) if link is not None else None
        rel = Relationship.model_validate(rec)
        old = st.relationships.get(rel.person_id)
        if old is None:
            tx.put_rel(rel)
            tx.record("relationship.create", rel.person_id, after=rel.dump())
            report.rels["created"] += 1
        elif old != rel:
            tx.put_rel(rel)
            tx.record("relationship.update", rel.person_id, before=old.dump(), after=rel.dump())
            report.rels["updated"] += 1
        else:
            report.rels["unchanged"] += 1


def _new_synonyms(svc: FlowRoom, groups: list[list[str]]) -> list[list[str]]:
    svc.refresh_synonyms()
    have = {key_of(g) for g in svc.synonyms.groups}
    out = []
    for g in groups:
        k = key_of(g)
        if k not in have:
            have.add(k)
            out.append(list(g))
    return out


def _add_synonyms(svc: FlowRoom, report: _Report) -> None:
    """The file's new synonym groups into synonyms.json (written before the Memory's changes
    are committed, and put back if the commit fails)."""
    if report.synonyms:
        before = [list(g) for g in svc.synonyms.groups]
        svc.synonyms.replace_groups(before + report.synonyms)
        report.synonyms_before = before
        svc.retriever.teach_jieba()


# -- export ---------------------------------------------------------------------------------------------


def snapshot(svc: FlowRoom) -> Snapshot:
    """The Memory's parts as they are now (a shallow copy, under the lock: nodes are immutable)."""
    with svc.lock:
        svc.refresh_synonyms()
        return Snapshot(nodes=dict(svc.state.nodes), important=list(svc.state.important),
                        relationships=dict(svc.state.relationships),
                        synonyms=[list(g) for g in svc.synonyms.groups], at=now(), name=svc.dir.name)


def export_files(svc: FlowRoom, fmt: Any) -> tuple[list[ExportFile], dict[str, Any]]:
    """The export's files (rendered outside the lock) and a summary."""
    if fmt not in EXPORT_FORMATS:
        raise InvalidArgument(f"format must be one of {', '.join(EXPORT_FORMATS)}", field="format")
    snap = snapshot(svc)
    files = export(snap, fmt)
    current = sum(1 for n in snap.nodes.values() if n.superseded_by is None)
    memories = len(snap.nodes) if fmt in ("jsonl", "markdown") else current
    return files, {"format": fmt, "memories": memories, "relationships": len(snap.relationships) if fmt == "jsonl"
                   else 0, "important": list(snap.important), "exportedAt": snap.at.isoformat()}
