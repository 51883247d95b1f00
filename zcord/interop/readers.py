"""Reading lore files into a `Book`: which format a file is (by its content, never its
name), and its entries as zcor will keep them. Pure: bytes in, a Book or an
InvalidArgument naming the entry and the field out.

Formats (docs/reference.md, "Import and export", has the mapping):

- SillyTavern World Info: `{"entries": {"<uid>": {uid, key, keysecondary, comment, content,
  constant, disable, order, position, group, …}}}`;
- Character Card V2 / V3 (`spec: "chara_card_v2"` / `"chara_card_v3"`), as JSON or as a PNG
  whose `ccv3` or `chara` text chunk holds the card as base64 JSON (`ccv3` first), with the
  lorebook in `data.character_book`;
- a standalone lorebook, `{"spec": "lorebook_v3", "data": {entries: […]}}` (or a bare
  character book `{"entries": […]}`);
- zcor's own JSONL export (zcord.interop.writers.jsonl).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import InvalidArgument
from .common import (
    FORMATS,
    JSONL_TYPE,
    MAX_CONTENT,
    MAX_ENTRIES,
    MAX_ID,
    MAX_KEYWORD,
    MAX_KEYWORDS,
    MAX_SHORT_TEXT,
    MAX_SOURCE,
    MAX_TITLE,
    PNG_MAGIC,
    BadFile,
)

_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass
class Entry:
    """One entry, as the memory it becomes."""

    ident: str
    """Its identity in the file (`uid:3`, `id:7`, `#2`, `m17`): what a second import updates by."""
    where: str
    """How messages name it: `entries["3"]`, `data.character_book.entries[2]`, `line 4`."""
    title: str
    content: str
    keywords: list[str]
    important: bool = False
    enabled: bool = True
    group: str | None = None
    parent: str | None = None
    """The ident of the entry that is its parent in this file (a zcor export), if any."""
    unkept: list[str] = field(default_factory=list)
    """Fields set in the file that zcor has no place for (reported)."""
    node: dict[str, Any] | None = None
    """zcor JSONL only: the memory as exported (every field)."""


@dataclass
class Book:
    format: str
    entries: list[Entry]
    name: str | None = None
    persona: str | None = None
    """A card's description, personality and scenario, as a proposed PERSONA.md."""
    has_book: bool = True
    important: list[str] = field(default_factory=list)
    """zcor JSONL: the important list, as idents in their order."""
    relationships: list[dict[str, Any]] = field(default_factory=list)
    synonyms: list[list[str]] = field(default_factory=list)
    kept_notes: list[str] = field(default_factory=list)


# -- JSON with repeated keys seen --------------------------------------------------------------


class _Obj(dict[str, Any]):
    """A JSON object that remembers keys given more than once (JSON keeps only the last)."""

    repeated: list[str] = []


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = _Obj(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        obj.repeated = [k for k, _ in pairs if k in seen or seen.add(k)]  # type: ignore[func-returns-value]
    return obj


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _json(text: str, what: str, where: str = "") -> Any:
    try:
        obj = json.loads(text, object_pairs_hook=_pairs)
    except json.JSONDecodeError as e:
        raise BadFile(f"{what} is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})", where or "data") \
            from None
    except RecursionError:
        raise BadFile(f"{what} is nested too deeply to be a lore file", where or "data") from None
    if _SURROGATE_ESCAPE.search(text):  # an escaped surrogate: fine in a pair, not alone
        path = _lone_surrogate(obj, where)
        if path is not None:
            raise BadFile(f"{path or what} holds a lone surrogate (not valid Unicode)", path or "data")
    return obj


def _lone_surrogate(value: Any, path: str) -> str | None:
    """Where in a parsed JSON value a lone surrogate is (a key or a string), or None."""
    stack = [(value, path)]
    while stack:
        v, p = stack.pop()
        if isinstance(v, str):
            if _SURROGATE.search(v):
                return p
        elif isinstance(v, dict):
            for k, item in v.items():
                name = (f"{p}.{k}" if p else k) if k.isidentifier() else f"{p}[{json.dumps(k)}]"
                if _SURROGATE.search(k):
                    return name
                stack.append((item, name))
        elif isinstance(v, list):
            stack.extend((item, f"{p}[{i}]") for i, item in enumerate(v))
    return None


# -- detection -----------------------------------------------------------------------------------


def read(raw: bytes, fmt: str | None = None) -> Book:
    """The file's entries; `fmt` (one of FORMATS) insists on a format, else it is found from
    the content. BadFile, naming the entry and field, when the file is not one zcor reads."""
    if fmt is not None and fmt not in FORMATS:
        raise InvalidArgument(f"format must be one of {', '.join(FORMATS)} (or left out)", field="format")
    if raw.startswith(PNG_MAGIC):
        if fmt not in (None, "card"):
            raise BadFile(f"the file is a PNG image, which can only be a character card, not {fmt}")
        from .png import card_json  # Pillow only when a PNG comes

        return _card(_json(card_json(raw), "the PNG's character card"), "the PNG's card")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadFile(f"the file is neither a PNG character card nor UTF-8 text (byte {e.start} is not "
                      f"UTF-8)") from None
    text = text.lstrip("\ufeff")
    stripped = text.lstrip()
    if not stripped.startswith("{"):
        raise _none_of_them()
    first = stripped.split("\n", 1)[0]
    if '"type"' in first and JSONL_TYPE in first:
        if fmt not in (None, "jsonl"):
            raise BadFile(f"the file is zcor's JSONL export, not {fmt}")
        return _jsonl(stripped)
    obj = _json(text, "the file")
    if not isinstance(obj, dict):
        raise _none_of_them()
    spec = obj.get("spec")
    if spec in ("chara_card_v2", "chara_card_v3"):
        found = "card"
    elif spec == "lorebook_v3":
        found = "lorebook"
    elif isinstance(obj.get("entries"), dict):
        found = "worldinfo"
    elif isinstance(obj.get("entries"), list):
        found = "lorebook"
    elif "first_mes" in obj or "char_name" in obj:
        raise BadFile("the file is a Character Card V1, which has no lorebook", "spec")
    else:
        raise _none_of_them()
    if fmt not in (None, found):
        raise BadFile(f"the file is a {_NAMES[found]}, not a {_NAMES[fmt]}")
    if found == "card":
        return _card(obj, "the card")
    if found == "lorebook":
        data = obj.get("data") if spec == "lorebook_v3" else obj
        if not isinstance(data, dict):
            raise BadFile("data must be the lorebook object {entries: […]}", "data")
        return _lorebook(data, "data." if spec == "lorebook_v3" else "", "lorebook")
    return _world_info(obj)


_NAMES = {"worldinfo": "SillyTavern World Info file", "card": "character card", "lorebook": "lorebook",
          "jsonl": "zcor JSONL export", None: "file"}


def _none_of_them() -> BadFile:
    return BadFile("the file is none of the formats zcor imports: a SillyTavern World Info file "
                   "({\"entries\": {…}}), a Character Card V2/V3 (JSON or PNG), a lorebook_v3 file, or "
                   "zcor's JSONL export")


# -- field checks --------------------------------------------------------------------------------


def _text(value: Any, where: str, name: str, limit: int | None, default: str = "") -> str:
    if value is None:
        return default
    if not isinstance(value, str):
        raise BadFile(f"{where}.{name} must be a string, not {_kind(value)}", f"{where}.{name}")
    if _SURROGATE.search(value):
        raise BadFile(f"{where}.{name} holds a lone surrogate (not valid Unicode)", f"{where}.{name}")
    if limit is not None and len(value) > limit:
        raise BadFile(f"{where}.{name} is {len(value):,} characters; {_WHAT.get(name, 'this field')} may have "
                      f"at most {limit:,}", f"{where}.{name}")
    return value


_WHAT = {"comment": "a memory's title", "title": "a memory's title", "content": "a memory's content",
         "sourceMessage": "a memory's source message"}


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", bool: "true/false", type(None): "null", int: "a number",
            float: "a number"}.get(type(value), type(value).__name__)


def _keys(value: Any, where: str, name: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadFile(f"{where}.{name} must be an array of strings, not {_kind(value)}", f"{where}.{name}")
    out = []
    for i, k in enumerate(value):
        if not isinstance(k, str):
            raise BadFile(f"{where}.{name}[{i}] must be a string, not {_kind(k)}", f"{where}.{name}[{i}]")
        k = _text(k, where, f"{name}[{i}]", None)
        if len(k) > MAX_KEYWORD:
            raise BadFile(f"{where}.{name}[{i}] is {len(k)} characters; a keyword may have at most {MAX_KEYWORD}",
                          f"{where}.{name}[{i}]")
        if k.strip():  # kept as written (a key's spaces can matter to its matching); blank ones dropped
            out.append(k)
    return out


def _words(primary: list[str], secondary: list[str], where: str) -> list[str]:
    out: dict[str, None] = {}
    for k in (*primary, *secondary):
        out.setdefault(k, None)
    if len(out) > MAX_KEYWORDS:
        raise BadFile(f"{where} has {len(out)} distinct keys; a memory may have at most {MAX_KEYWORDS} keywords",
                      f"{where}.key")
    return list(out)


def _title(explicit: str, keys: list[str], content: str, fallback: str) -> str:
    if explicit.strip():
        return explicit
    if keys:
        joined = ", ".join(keys)
        return joined if len(joined) <= MAX_TITLE else joined[:MAX_TITLE - 1] + "…"
    line = content.strip().split("\n", 1)[0].strip()
    if line:
        return line if len(line) <= 80 else line[:79] + "…"
    return fallback


def _bool(value: Any, where: str, name: str, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise BadFile(f"{where}.{name} must be true or false, not {_kind(value)}", f"{where}.{name}")
    return value


def _repeated(obj: Any, where: str) -> None:
    rep = getattr(obj, "repeated", None)
    if rep:
        raise BadFile(f"{where}: field {rep[0]!r} is given twice", f"{where}.{rep[0]}")


def _zcor_ext(entry: dict[str, Any], where: str) -> dict[str, Any]:
    ext = entry.get("extensions")
    z = ext.get("zcor") if isinstance(ext, dict) else None
    return z if isinstance(z, dict) else {}


def _strip_title(content: str, title: str, z: dict[str, Any]) -> str:
    """A zcor export puts the title above the content (SillyTavern sends only the content);
    a file that still has it gets it back off."""
    if z.get("titleInContent") and content.startswith(title):
        rest = content[len(title):]
        if rest == "" or rest.startswith("\n\n"):
            return rest[2:]
    return content


# -- SillyTavern World Info ------------------------------------------------------------------------

_WI_KEPT = {"uid", "key", "keysecondary", "comment", "content", "constant", "disable", "group", "extensions",
            "displayIndex", "addMemo"}
_WI_DEFAULTS: dict[str, Any] = {
    "vectorized": False, "selective": True, "selectiveLogic": 0, "order": 100, "position": 0,
    "excludeRecursion": False, "preventRecursion": False, "delayUntilRecursion": 0, "probability": 100,
    "useProbability": True, "depth": 4, "groupOverride": False, "groupWeight": 100, "scanDepth": None,
    "caseSensitive": None, "matchWholeWords": None, "useGroupScoring": None, "automationId": "", "role": 0,
    "sticky": None, "cooldown": None, "delay": None, "ignoreBudget": False, "outletName": "",
    "triggers": [], "characterFilter": None,
}


def _world_info(obj: dict[str, Any]) -> Book:
    entries = obj["entries"]
    rep = getattr(entries, "repeated", None)
    if rep:
        raise BadFile(f"entries: uid {rep[0]!r} is given twice", f"entries[{json.dumps(rep[0])}]")
    if len(entries) > MAX_ENTRIES:
        raise BadFile(f"entries holds {len(entries):,} entries; zcor imports at most {MAX_ENTRIES:,} from one "
                      f"file", "entries")
    out: list[Entry] = []
    uids: dict[str, str] = {}
    by_zcor_id: dict[str, str] = {}
    parents: dict[str, str] = {}
    for key, e in entries.items():
        where = f"entries[{json.dumps(key, ensure_ascii=False)}]"
        if not isinstance(e, dict):
            raise BadFile(f"{where} must be an object, not {_kind(e)}", where)
        _repeated(e, where)
        uid = e.get("uid", key)
        if isinstance(uid, bool) or not isinstance(uid, (int, str)):
            raise BadFile(f"{where}.uid must be a number, not {_kind(uid)}", f"{where}.uid")
        uid_s = str(uid)
        if uid_s in uids:
            raise BadFile(f"{where}.uid {uid_s} is also the uid of {uids[uid_s]} (duplicate uids)", f"{where}.uid")
        uids[uid_s] = where
        keys = _keys(e.get("key"), where, "key")
        second = _keys(e.get("keysecondary"), where, "keysecondary")
        comment = _text(e.get("comment"), where, "comment", MAX_TITLE)
        content = _text(e.get("content"), where, "content", None)
        z = _zcor_ext(e, where)
        title = _title(comment, keys, content, f"Entry {uid_s}")
        content = _strip_title(content, title, z)
        if len(content) > MAX_CONTENT:
            raise BadFile(f"{where}.content is {len(content):,} characters; a memory's content may have at most "
                          f"{MAX_CONTENT:,}", f"{where}.content")
        group = _text(e.get("group"), where, "group", None).split(",")[0].strip() or None
        unkept = sorted(k for k, v in e.items() if k not in _WI_KEPT and (k not in _WI_DEFAULTS or v != _WI_DEFAULTS[k]))
        if len(_text(e.get("group"), where, "group", None).split(",")) > 1:
            unkept.append("group (only the first group is kept)")
        ident = f"uid:{uid_s}"
        if isinstance(z.get("id"), str):
            by_zcor_id[z["id"]] = ident
            if isinstance(z.get("parentId"), str):
                parents[ident] = z["parentId"]
        out.append(Entry(ident=ident, where=where, title=_title_checked(title, where), content=content,
                         keywords=_words(keys, second, where),
                         important=_bool(e.get("constant"), where, "constant", False),
                         enabled=not _bool(e.get("disable"), where, "disable", False), group=group, unkept=unkept))
    _link_parents(out, by_zcor_id, parents)
    return Book(format="worldinfo", entries=out, name=_name(obj.get("name")))


def _title_checked(title: str, where: str) -> str:
    if len(title) > MAX_TITLE:
        raise BadFile(f"{where}.comment is {len(title)} characters; a memory's title may have at most {MAX_TITLE}",
                      f"{where}.comment")
    return title


def _link_parents(entries: list[Entry], by_zcor_id: dict[str, str], parents: dict[str, str]) -> None:
    """Entries a zcor export made keep their tree: extensions.zcor.parentId names the parent's
    memory id, found among the entries' extensions.zcor.id."""
    for e in entries:
        pid = parents.get(e.ident)
        if pid is not None and pid in by_zcor_id and by_zcor_id[pid] != e.ident:
            e.parent = by_zcor_id[pid]
            e.group = None


def _name(value: Any) -> str | None:
    return value.strip()[:MAX_TITLE] or None if isinstance(value, str) else None


# -- character books and lorebook_v3 --------------------------------------------------------------

_BOOK_KEPT = {"keys", "secondary_keys", "comment", "content", "constant", "enabled", "name", "id", "extensions",
              "insertion_order", "use_regex", "case_sensitive", "selective", "position", "priority"}


def _lorebook(book: dict[str, Any], prefix: str, fmt: str) -> Book:
    entries = book.get("entries")
    if not isinstance(entries, list):
        raise BadFile(f"{prefix}entries must be an array of entries, not {_kind(entries)}", f"{prefix}entries")
    if len(entries) > MAX_ENTRIES:
        raise BadFile(f"{prefix}entries holds {len(entries):,} entries; zcor imports at most {MAX_ENTRIES:,} from "
                      f"one file", f"{prefix}entries")
    out: list[Entry] = []
    ids: dict[str, str] = {}
    by_zcor_id: dict[str, str] = {}
    parents: dict[str, str] = {}
    for i, e in enumerate(entries):
        where = f"{prefix}entries[{i}]"
        if not isinstance(e, dict):
            raise BadFile(f"{where} must be an object, not {_kind(e)}", where)
        _repeated(e, where)
        eid = e.get("id")
        if eid is not None:
            if isinstance(eid, bool) or not isinstance(eid, (int, str)):
                raise BadFile(f"{where}.id must be a number or a string, not {_kind(eid)}", f"{where}.id")
            if str(eid) in ids:
                raise BadFile(f"{where}.id {eid} is also the id of {ids[str(eid)]} (duplicate ids)", f"{where}.id")
            ids[str(eid)] = where
        keys = _keys(e.get("keys"), where, "keys")
        second = _keys(e.get("secondary_keys"), where, "secondary_keys")
        name = _text(e.get("name"), where, "name", MAX_TITLE)
        comment = _text(e.get("comment"), where, "comment", None)
        content = _text(e.get("content"), where, "content", None)
        z = _zcor_ext(e, where)
        explicit = comment if comment.strip() and len(comment) <= MAX_TITLE else name
        title = _title(explicit, keys, content, f"Entry {eid if eid is not None else i}")
        content = _strip_title(content, title, z)
        if len(content) > MAX_CONTENT:
            raise BadFile(f"{where}.content is {len(content):,} characters; a memory's content may have at most "
                          f"{MAX_CONTENT:,}", f"{where}.content")
        ext = e.get("extensions")
        raw_group = ext.get("group") if isinstance(ext, dict) else None
        group: str = raw_group if isinstance(raw_group, str) else ""
        unkept = sorted(k for k in e if k not in _BOOK_KEPT)
        if e.get("use_regex") is True:
            unkept.append("use_regex (the keys are kept as plain words)")
        if comment.strip() and explicit is not comment:
            unkept.append("comment (longer than a title; the name was used)")
        ident = f"id:{eid}" if eid is not None else f"#{i}"
        if isinstance(z.get("id"), str):
            by_zcor_id[z["id"]] = ident
            if isinstance(z.get("parentId"), str):
                parents[ident] = z["parentId"]
        out.append(Entry(ident=ident, where=where, title=_title_checked(title, where), content=content,
                         keywords=_words(keys, second, where),
                         important=_bool(e.get("constant"), where, "constant", False),
                         enabled=_bool(e.get("enabled"), where, "enabled", True),
                         group=group.split(",")[0].strip() or None, unkept=unkept))
    _link_parents(out, by_zcor_id, parents)
    return Book(format=fmt, entries=out, name=_name(book.get("name")))


def _card(obj: Any, what: str) -> Book:
    if not isinstance(obj, dict):
        raise BadFile(f"{what} must be a JSON object")
    spec = obj.get("spec")
    if spec not in ("chara_card_v2", "chara_card_v3"):
        raise BadFile(f"{what} has spec {spec!r}; zcor reads chara_card_v2 and chara_card_v3", "spec")
    data = obj.get("data")
    if not isinstance(data, dict):
        raise BadFile(f"{what}'s data must be an object, not {_kind(data)}", "data")
    name = _text(data.get("name"), "data", "name", None).strip()
    parts = []
    if name:
        parts.append(f"# {name}")
    for field_name, heading in (("description", None), ("personality", "Personality"), ("scenario", "Scenario")):
        text = _text(data.get(field_name), "data", field_name, None).strip()
        if text:
            parts.append(f"## {heading}\n\n{text}" if heading else text)
    persona = "\n\n".join(parts) + "\n" if len(parts) > (1 if name else 0) else None
    book = data.get("character_book")
    if book is None:
        return Book(format="card", entries=[], name=name or None, persona=persona, has_book=False)
    if not isinstance(book, dict):
        raise BadFile(f"data.character_book must be a lorebook object, not {_kind(book)}", "data.character_book")
    out = _lorebook(book, "data.character_book.", "card")
    out.name = out.name or name or None
    out.persona = persona
    return out


# -- zcor JSONL ---------------------------------------------------------------------------------------


def _jsonl(text: str) -> Book:
    from pydantic import ValidationError

    from ..core.models import NodeModel, Relationship

    entries: list[Entry] = []
    seen: dict[str, str] = {}
    important: list[str] = []
    rels: list[dict[str, Any]] = []
    synonyms: list[list[str]] = []
    person_ids: set[str] = set()
    lines = text.split("\n")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"line {n}"
        rec = _json(line, where, where)
        if not isinstance(rec, dict) or not isinstance(rec.get("type"), str):
            raise BadFile(f"{where} must be an object with a type", f"{where}.type")
        _repeated(rec, where)
        kind = rec.pop("type")
        if kind == JSONL_TYPE:
            if n != 1 and any(x.strip() for x in lines[:n - 1]):
                raise BadFile(f"{where}: the {JSONL_TYPE} header must be the first line", where)
            if rec.get("version") != 1:
                raise BadFile(f"{where}.version is {rec.get('version')!r}; this zcor reads version 1",
                              f"{where}.version")
        elif kind == "memory":
            try:
                node = NodeModel.model_validate(rec).dump()
            except ValidationError as e:
                err = e.errors()[0]
                loc = ".".join(str(x) for x in err["loc"])
                raise BadFile(f"{where}.{loc}: {err['msg']}", f"{where}.{loc}") from None
            for name, limit in (("title", MAX_TITLE), ("content", MAX_CONTENT), ("sourceMessage", MAX_SOURCE)):
                _text(node[name], where, name, limit)
            if not node["title"].strip():
                raise BadFile(f"{where}.title must not be empty", f"{where}.title")
            _words(_keys(node["keywords"], where, "keywords"), [], where)
            _text(node["id"], where, "id", MAX_ID)
            if node["id"] in seen:
                raise BadFile(f"{where}.id {node['id']} is also the id of {seen[node['id']]} (duplicate ids)",
                              f"{where}.id")
            seen[node["id"]] = where
            entries.append(Entry(ident=node["id"], where=where, title=node["title"], content=node["content"],
                                 keywords=list(node["keywords"]), node=node))
        elif kind == "important":
            ids = rec.get("ids")
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids) or len(ids) > 5:
                raise BadFile(f"{where}.ids must be an array of at most 5 memory ids", f"{where}.ids")
            important = list(ids)
        elif kind == "relationship":
            try:
                rel = Relationship.model_validate(rec).dump()
            except ValidationError as e:
                err = e.errors()[0]
                loc = ".".join(str(x) for x in err["loc"])
                raise BadFile(f"{where}.{loc}: {err['msg']}", f"{where}.{loc}") from None
            for name, limit in (("personId", MAX_ID), ("name", MAX_TITLE), ("relationship", MAX_SHORT_TEXT),
                                ("reason", MAX_SHORT_TEXT)):
                _text(rel[name], where, name, limit)
            if not rel["personId"].strip() or not rel["name"].strip():
                raise BadFile(f"{where}: personId and name must not be empty", f"{where}.personId")
            _words(_keys(rel["aliases"], where, "aliases"), [], where)
            if rel["personId"] in person_ids:
                raise BadFile(f"{where}.personId {rel['personId']!r} is given twice", f"{where}.personId")
            person_ids.add(rel["personId"])
            rels.append({**rel, "where": where})
        elif kind == "synonyms":
            terms = rec.get("terms")
            if not isinstance(terms, list) or len(terms) < 2 or not all(isinstance(t, str) and t.strip()
                                                                        for t in terms):
                raise BadFile(f"{where}.terms must be an array of at least 2 terms", f"{where}.terms")
            synonyms.append(list(terms))
        else:
            raise BadFile(f"{where}.type {kind!r} is not one of {JSONL_TYPE}, memory, important, relationship, "
                          f"synonyms", f"{where}.type")
    for entry in entries:
        assert entry.node is not None
        for ref in ("parentId", "supersededBy"):
            target = entry.node[ref]
            if target is not None and target not in seen:
                raise BadFile(f"{entry.where}.{ref} names {target}, which is not a memory of this file",
                              f"{entry.where}.{ref}")
        entry.parent = entry.node["parentId"]
    for i in important:
        if i not in seen:
            raise BadFile(f"important names {i}, which is not a memory of this file", "important")
    for r in rels:
        link = r.get("memoryNodeId")
        if link is not None and link not in seen:
            raise BadFile(f"{r['where']}.memoryNodeId names {link}, which is not a memory of this file",
                          f"{r['where']}.memoryNodeId")
    _no_cycles(entries)
    return Book(format="jsonl", entries=entries, important=important, relationships=rels, synonyms=synonyms)


def _no_cycles(entries: list[Entry]) -> None:
    parent = {e.ident: e.parent for e in entries}
    done: set[str] = set()
    for e in entries:
        path: list[str] = []
        cur: str | None = e.ident
        while cur is not None and cur not in done:
            if cur in path:
                raise BadFile(f"{e.where}.parentId: the parents go round in a circle ({' → '.join(path)})",
                              f"{e.where}.parentId")
            path.append(cur)
            cur = parent.get(cur)
        done.update(path)


def decode_data(data: str, encoding: str) -> bytes:
    """A file sent as text or base64 (a PNG), as bytes."""
    if encoding == "base64":
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidArgument("data is not valid base64 (encoding is base64)", field="data") from None
    try:
        return data.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument("data holds a lone surrogate (not valid Unicode)", field="data") from None


__all__ = ["Book", "BadFile", "Entry", "FORMATS", "decode_data", "read"]
