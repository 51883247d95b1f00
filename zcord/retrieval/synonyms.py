"""Synonym groups and their equivalence classes (bidirectional, transitive, normalized).

synonyms.json: {"version": 1, "groups": [["昨天", "昨日"], ...]} — one group per line, so
operators can edit it by hand; a bare array of groups is read too.
"""

from __future__ import annotations

import json
import os
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path

from ..core.errors import StateFileInvalid
from ..core.fsutil import atomic_write, read_plain_file
from ..core.text import normalize


def encode_groups(groups: list[list[str]], extra: dict[str, list[list[str]]] | None = None) -> bytes:
    """The file; extra: the bot's lists (`botAdded`, `held`), written only when not empty."""
    return encode_lines([group_line(g) for g in groups], extra)


def group_line(group: list[str]) -> str:
    """One group as the file holds it (one line)."""
    return "    " + json.dumps(group, ensure_ascii=False)


def encode_lines(group_lines: list[str], extra: dict[str, list[list[str]]] | None = None) -> bytes:
    """The file from the groups' lines already encoded (group_line), so an add encodes one."""
    lines = ",\n".join(group_lines)
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


def key_of(group: Iterable[str]) -> frozenset[str]:
    """A group's normalized terms: two groups with the same key are the same group."""
    return frozenset(normalize(t) for t in group)


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
        for member_set in members.values():
            frozen = frozenset(member_set)
            for t in member_set:
                self.of[t] = frozen
        self._base: weakref.ref[SynonymClasses] | None = None
        self.new_terms: frozenset[str] = frozenset()

    @property
    def base(self) -> SynonymClasses | None:
        """The classes these extend by new_terms (held weakly: a chain of adds keeps no old
        tables alive), or None."""
        return self._base() if self._base is not None else None

    def extended(self, terms: frozenset[str]) -> SynonymClasses:
        """These classes plus one new class of normalized terms none of which has a class yet
        (what an add that merges nothing makes), without re-deriving the others. `base` and
        `new_terms` say what changed, so jieba is taught the new terms only."""
        assert not any(t in self.of for t in terms)
        out = SynonymClasses.__new__(SynonymClasses)
        out.of = dict(self.of)
        for t in terms:
            out.of[t] = terms
        out._base, out.new_terms = weakref.ref(self), terms
        return out

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
        self._keys: set[frozenset[str]] = set()  # every group's normalized terms
        self._lines: list[str] = []  # every group as encoded in the file (group_line)

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
        self._derive()
        self._stamp = stamp

    def _derive(self) -> None:
        self._keys = {key_of(g) for g in self.groups}
        self._lines = [group_line(g) for g in self.groups]

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
        self._derive()
        self._stamp = self._file_stamp()

    def _with_bot(self, bot: dict[str, list[list[str]]], write: Callable[[], None]) -> None:
        """Take the bot's new lists and run write (which saves the file); a failed write puts
        the old lists back, so the table stays what the file holds."""
        old, self.bot = self.bot, bot
        try:
            write()
        except BaseException:
            self.bot = old
            raise

    def _save_bot_lists(self) -> None:
        """Rewrite the file after a change to the bot's lists only (the groups, their classes
        and what jieba was taught stay as they are)."""
        atomic_write(self.path, encode_lines(self._lines, self.bot))
        self._stamp = self._file_stamp()

    def _append(self, terms: list[str]) -> None:
        """Add one group at the end: the whole file is written (temporary file, fsync, rename,
        directory fsync) from the lines already encoded; a group that merges nothing extends
        the classes instead of deriving them all again."""
        line = group_line(terms)
        atomic_write(self.path, encode_lines([*self._lines, line], self.bot))
        key = key_of(terms)
        self.groups = [*self.groups, list(terms)]
        self._lines.append(line)
        self._keys.add(key)
        self.classes = self.classes.extended(key) if not any(t in self.classes.of for t in key) \
            else SynonymClasses(self.groups)
        self._stamp = self._file_stamp()

    def add_group(self, terms: list[str]) -> bool:
        """Add a group; False when an existing group already holds exactly these terms."""
        if key_of(terms) in self._keys:
            return False
        self._append(terms)
        return True

    def bot_indexes(self) -> list[int]:
        """Indexes of the groups the bot added (as listed in `botAdded`)."""
        mine = {key_of(g) for g in self.bot["botAdded"]}
        return [i for i, g in enumerate(self.groups) if key_of(g) in mine]

    def add_bot_group(self, terms: list[str]) -> tuple[bool, bool]:
        """The bot's add: (added, held). A group sharing a term with an existing group is held
        apart (not merged into anyone's class) until an operator adds it."""
        key = key_of(terms)
        if key in self._keys or any(key_of(g) == key for g in self.bot["held"]):
            return False, False
        if any(t in self.classes.of for t in key):
            self._with_bot({**self.bot, "held": [*self.bot["held"], list(terms)]}, self._save_bot_lists)
            return True, True
        self._with_bot({**self.bot, "botAdded": [*self.bot["botAdded"], list(terms)]}, lambda: self._append(terms))
        return True, False

    def take_held(self, i: int, accept: bool) -> list[str]:
        """The operator's decision on held group i: accept adds it to the groups as an
        operator's group (merging classes as any operator's add does), or drop it. Returns it."""
        held = self.bot["held"]
        group = list(held[i])
        bot = {**self.bot, "held": held[:i] + held[i + 1:]}
        if accept and key_of(group) not in self._keys:
            self._with_bot(bot, lambda: self._append(group))
        else:
            self._with_bot(bot, self._save_bot_lists)
        return group

    def discard_bot_group(self, index: int) -> list[str]:
        """Remove group `index`, one the bot added, from the groups and from `botAdded`."""
        group = self.groups[index]
        key = key_of(group)
        self._with_bot({**self.bot, "botAdded": [g for g in self.bot["botAdded"] if key_of(g) != key]},
                       lambda: self.replace_groups(self.groups[:index] + self.groups[index + 1:]))
        return list(group)

    def bot_count(self) -> int:
        return len(self.bot["botAdded"]) + len(self.bot["held"])

