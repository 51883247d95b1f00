"""Synonym groups and their equivalence classes (bidirectional, transitive, normalized).

synonyms.json: {"version": 1, "groups": [["昨天", "昨日"], ...]} — one group per line, so
operators can edit it by hand; a bare array of groups is read too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from ..core.errors import StateFileInvalid
from ..core.fsutil import atomic_write, read_plain_file
from ..core.text import normalize


def encode_groups(groups: list[list[str]], extra: dict[str, list[list[str]]] | None = None) -> bytes:
    """The file; extra: the bot's lists (`botAdded`, `held`), written only when not empty."""
    lines = ",\n".join("    " + json.dumps(g, ensure_ascii=False) for g in groups)
    more = "".join(f',\n  "{k}": [\n' + ",\n".join("    " + json.dumps(g, ensure_ascii=False) for g in v) + "\n  ]"
                   for k, v in (extra or {}).items() if v)
    return ('{\n  "version": 1,\n  "groups": [\n' + lines + "\n  ]" + more + "\n}\n").encode()


BOT_KEYS = ("botAdded", "held")
"""synonyms.json's lists of the bot's additions: `botAdded`, the groups among `groups` the
bot added (so operators see which); `held`, groups the bot added that share a term with an
existing group: kept apart (not used for expansion) until an operator adds them."""


def parse_bot_lists(raw: bytes) -> dict[str, list[list[str]]]:
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {k: [] for k in BOT_KEYS}
    out = {}
    for k in BOT_KEYS:
        v = doc.get(k) if isinstance(doc, dict) else None
        out[k] = [list(g) for g in v if isinstance(g, list) and all(isinstance(t, str) for t in g)] \
            if isinstance(v, list) else []
    return out


def parse_groups(raw: bytes, name: str) -> list[list[str]]:
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise StateFileInvalid(f"{name} is not valid JSON ({e})") from None
    groups = doc.get("groups") if isinstance(doc, dict) else doc
    if not isinstance(groups, list):
        raise StateFileInvalid(f'{name}: expected {{"version": 1, "groups": [[term, ...], ...]}}')
    for i, g in enumerate(groups):
        if not (isinstance(g, list) and all(isinstance(t, str) and t.strip() for t in g)):
            raise StateFileInvalid(f"{name}: groups[{i}] must be an array of non-empty strings")
    return [list(g) for g in groups]


class SynonymClasses:
    """Union-find over normalized terms: groups sharing a term form one class."""

    def __init__(self, groups: Iterable[list[str]]):
        parent: dict[str, str] = {}

        def find(x: str) -> str:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for group in groups:
            terms = [normalize(t) for t in group]
            for t in terms:
                parent.setdefault(t, t)
            for t in terms[1:]:
                a, b = find(terms[0]), find(t)
                if a != b:
                    parent[b] = a
        members: dict[str, set[str]] = {}
        for t in parent:
            members.setdefault(find(t), set()).add(t)
        self.of: dict[str, frozenset[str]] = {}
        for group in members.values():
            frozen = frozenset(group)
            for t in group:
                self.of[t] = frozen

    def expand(self, terms: Iterable[str]) -> set[str]:
        """The normalized terms and every term of their classes."""
        out: set[str] = set()
        for term in terms:
            key = normalize(term)
            out |= self.of.get(key, {key})
        return out


class Synonyms:
    """The Memory directory's synonyms.json, kept in step with hand edits."""

    def __init__(self, path: Path):
        self.path = path
        self.groups: list[list[str]] = []
        self.classes = SynonymClasses([])
        self._stamp: tuple[int, int] | None = None
        self.bot: dict[str, list[list[str]]] = {k: [] for k in BOT_KEYS}

    def _file_stamp(self) -> tuple[int, int] | None:
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def load(self) -> None:
        stamp = self._file_stamp()
        raw = read_plain_file(self.path) if stamp else b""
        groups = parse_groups(raw, self.path.name) if stamp else []
        self.bot = parse_bot_lists(raw) if stamp else {k: [] for k in BOT_KEYS}
        self.groups = groups
        self.classes = SynonymClasses(groups)
        self._stamp = stamp

    def reload_if_changed(self) -> bool:
        """Reload after a hand edit; a broken file keeps the last good groups and raises."""
        if self._file_stamp() != self._stamp:
            self.load()
            return True
        return False

    def terms(self) -> set[str]:
        return set(self.classes.of)

    def replace_groups(self, groups: list[list[str]]) -> None:
        """Write a new list of groups atomically, then use it."""
        atomic_write(self.path, encode_groups(groups, self.bot))
        self.groups = [list(g) for g in groups]
        self.classes = SynonymClasses(self.groups)
        self._stamp = self._file_stamp()

    def add_group(self, terms: list[str]) -> bool:
        """Add a group; False when an existing group already holds exactly these terms."""
        key = frozenset(normalize(t) for t in terms)
        if any(frozenset(normalize(t) for t in g) == key for g in self.groups):
            return False
        self.replace_groups(self.groups + [list(terms)])
        return True

    def bot_indexes(self) -> list[int]:
        """Indexes of the groups the bot added (as listed in `botAdded`)."""
        mine = {frozenset(normalize(t) for t in g) for g in self.bot["botAdded"]}
        return [i for i, g in enumerate(self.groups) if frozenset(normalize(t) for t in g) in mine]

    def add_bot_group(self, terms: list[str]) -> tuple[bool, bool]:
        """The bot's add: (added, held). A group sharing a term with an existing group is held
        apart (not merged into anyone's class) until an operator adds it."""
        key = frozenset(normalize(t) for t in terms)
        if any(frozenset(normalize(t) for t in g) == key for g in [*self.groups, *self.bot["held"]]):
            return False, False
        if any(t in self.classes.of for t in key):
            self.bot = {**self.bot, "held": [*self.bot["held"], list(terms)]}
            self.replace_groups(self.groups)
            return True, True
        self.bot = {**self.bot, "botAdded": [*self.bot["botAdded"], list(terms)]}
        self.replace_groups(self.groups + [list(terms)])
        return True, False

    def bot_count(self) -> int:
        return len(self.bot["botAdded"]) + len(self.bot["held"])

