"""Writing a Memory out: `lorebook_v3`, SillyTavern World Info, zcor JSONL, Markdown.

Each writer takes a `Snapshot` (the Memory's parts, copied under the service lock; nodes
are immutable, so the copy is shallow) and returns `ExportFile`s: one for the single-file
formats, one per memory for Markdown.

- lorebook / worldinfo: the current memories (superseded ones are history, not lore), one
  entry each: keywords as keys, the title above the content (SillyTavern sends an entry's
  content, never its comment) and as the comment / name, important memories as constant
  entries; the tree and the memory's id in `extensions.zcor`, so an import back keeps them.
- jsonl: every memory (superseded too, every field), the important list, every
  relationship and synonym group: a move between zcor installs.
- markdown: one file per memory, its fields as YAML front matter and its content as the
  body; a memory with children has a folder of the same name beside its file.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from ..core.models import Node, Relationship, format_time
from .common import JSONL_TYPE

EXPORT_FORMATS = ("lorebook", "worldinfo", "jsonl", "markdown")


@dataclass
class Snapshot:
    nodes: Mapping[str, Node]
    """In creation order."""
    important: list[str]
    relationships: Mapping[str, Relationship]
    synonyms: list[list[str]]
    at: datetime
    name: str = "zcor"


@dataclass
class ExportFile:
    path: str
    """Relative, `/`-separated."""
    text: str


def export(snap: Snapshot, fmt: str) -> list[ExportFile]:
    if fmt == "lorebook":
        return [ExportFile("lorebook.json", lorebook(snap))]
    if fmt == "worldinfo":
        return [ExportFile("worldinfo.json", world_info(snap))]
    if fmt == "jsonl":
        return [ExportFile("memories.jsonl", jsonl(snap))]
    if fmt == "markdown":
        return markdown(snap)
    raise ValueError(fmt)


def _current(snap: Snapshot) -> list[Node]:
    return [n for n in snap.nodes.values() if n.superseded_by is None]


def _entry_content(n: Node) -> str:
    return f"{n.title}\n\n{n.content}" if n.content else n.title


def _zcor_ext(n: Node, snap: Snapshot) -> dict[str, Any]:
    parent = n.parent_id if n.parent_id is not None and n.parent_id in snap.nodes else None
    return {"id": n.id, "parentId": parent, "titleInContent": True}


def lorebook(snap: Snapshot) -> str:
    important = set(snap.important)
    entries = []
    for i, n in enumerate(_current(snap)):
        entries.append({
            "keys": list(n.keywords), "content": _entry_content(n), "extensions": {"zcor": _zcor_ext(n, snap)},
            "enabled": True, "insertion_order": 100, "use_regex": False, "constant": n.id in important,
            "name": n.title, "comment": n.title, "id": i, "selective": False, "secondary_keys": [],
            "position": "after_char",
        })
    book = {"spec": "lorebook_v3", "data": {"name": snap.name, "description": f"Exported from zcor on "
                                           f"{format_time(snap.at)}", "extensions": {}, "entries": entries}}
    return orjson.dumps(book, option=orjson.OPT_INDENT_2).decode()


def world_info(snap: Snapshot) -> str:
    """SillyTavern's own World Info file (its entry fields at SillyTavern's defaults)."""
    important = set(snap.important)
    entries: dict[str, Any] = {}
    for i, n in enumerate(_current(snap)):
        entries[str(i)] = {
            "uid": i, "key": list(n.keywords), "keysecondary": [], "comment": n.title,
            "content": _entry_content(n), "constant": n.id in important, "vectorized": False, "selective": True,
            "selectiveLogic": 0, "addMemo": True, "order": 100, "position": 0, "disable": False,
            "excludeRecursion": False, "preventRecursion": False, "delayUntilRecursion": 0, "probability": 100,
            "useProbability": True, "depth": 4, "group": "", "groupOverride": False, "groupWeight": 100,
            "scanDepth": None, "caseSensitive": None, "matchWholeWords": None, "useGroupScoring": None,
            "automationId": "", "role": 0, "sticky": None, "cooldown": None, "delay": None, "displayIndex": i,
            "extensions": {"zcor": _zcor_ext(n, snap)},
        }
    return orjson.dumps({"entries": entries}, option=orjson.OPT_INDENT_2).decode()


def jsonl(snap: Snapshot) -> str:
    dumps = orjson.dumps
    parts = [dumps({"type": JSONL_TYPE, "version": 1, "exportedAt": format_time(snap.at),
                    "memories": len(snap.nodes), "relationships": len(snap.relationships),
                    "synonymGroups": len(snap.synonyms)})]
    parts.extend(dumps({"type": "memory", **n.dump()}) for n in snap.nodes.values())
    parts.append(dumps({"type": "important", "ids": list(snap.important)}))
    parts.extend(dumps({"type": "relationship", **r.dump()}) for r in snap.relationships.values())
    parts.extend(dumps({"type": "synonyms", "terms": list(g)}) for g in snap.synonyms)
    return b"\n".join(parts).decode() + "\n"


# -- Markdown ------------------------------------------------------------------------------------

_UNSAFE = re.compile(r'[\\/:*?"<>|\x00-\x1f\x7f]+')


def file_stem(n: Node) -> str:
    """`Title (m17)`: a name every file system takes (no separators or control characters, not
    starting with a dot, at most 60 characters of title); the id keeps names distinct."""
    title = unicodedata.normalize("NFC", n.title)
    title = _UNSAFE.sub(" ", title)
    title = "".join(ch for ch in title if unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Zl", "Zp"))
    title = " ".join(title.split()).strip(" .")[:60].strip(" .")
    return f"{title} ({n.id})" if title else n.id


@functools.cache
def _dumper() -> Any:
    """PyYAML's safe dumper (its C emitter, libyaml, when PyYAML was built with it: some five
    times faster), with text of several lines as block scalars. Loaded on first use: only a
    Markdown export needs it."""
    import yaml

    class Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    return Dumper


def front_matter(n: Node, important: bool) -> str:
    fields: dict[str, Any] = {"id": n.id, "title": n.title, "keywords": list(n.keywords),
                              "parentId": n.parent_id, "important": important,
                              "createdAt": format_time(n.created_at), "updatedAt": format_time(n.updated_at)}
    if n.superseded_by is not None:
        fields["supersededBy"] = n.superseded_by
        fields["supersedeReason"] = n.supersede_reason
    if n.source_message is not None:
        fields["sourceMessage"] = n.source_message
    import yaml

    return str(yaml.dump(fields, Dumper=_dumper(), allow_unicode=True, sort_keys=False, width=1 << 20))


def markdown(snap: Snapshot) -> list[ExportFile]:
    nodes = snap.nodes
    important = set(snap.important)
    stems: dict[str, str] = {}
    folders: dict[str, str] = {}

    def stem(node_id: str) -> str:
        got = stems.get(node_id)
        if got is None:
            got = stems[node_id] = file_stem(nodes[node_id])
        return got

    def folder(node_id: str) -> str:
        """The folder a memory's file is in: its ancestors' stems, root first."""
        chain = []
        cur = node_id
        while cur not in folders:
            parent = nodes[cur].parent_id
            if parent is None or parent not in nodes:
                folders[cur] = ""
                break
            chain.append(cur)
            cur = parent
        for nid in reversed(chain):
            parent = nodes[nid].parent_id
            assert parent is not None
            folders[nid] = f"{folders[parent]}{stem(parent)}/"
        return folders[node_id]

    out = []
    for n in nodes.values():
        body = n.content if n.content.endswith("\n") or not n.content else n.content + "\n"
        out.append(ExportFile(f"{folder(n.id)}{stem(n.id)}.md",
                              f"---\n{front_matter(n, n.id in important)}---\n\n{body}"))
    return out


def iter_sizes(files: Iterable[ExportFile]) -> list[dict[str, Any]]:
    return [{"path": f.path, "chars": len(f.text)} for f in files]
