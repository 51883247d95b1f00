"""Twins: current memories whose title and content nearly repeat one another (issue 38).

A memory's *features* come from its title and the start of its content, in the form recall
compares text in (`text.match_form`: NFKC, case folding, Traditional folded to Simplified):
each synonym term found is replaced by its synonym class (上班 and 打工 become one unit, and
so do 生日 and birthday), each Latin word by its stem (`text.stem`; function words dropped),
and each CJK stretch into its units (function characters left out) and the pairs of
adjacent characters (a class takes part in no pair: 小王在银行上班 and "Xiao Wang works at
a bank" are the same three classes where the table links them); the title's features count
twice. Two memories are twins when the
share of their features they have in common (Jaccard) reaches THRESHOLD.

`TwinIndex` answers "which current memories are twins of this text" without reading every
memory: per current memory it keeps a bottom-k sketch (the SKETCH smallest hashes of its
features, 8 bytes each) and a posting from each of its BUCKETS smallest hashes to it. Near
duplicates share their smallest hashes with high probability; a candidate's sketch gives an
estimate, and the few best are scored exactly. It follows the state through the change
history (the targets of the changes since it last looked), so a write updates only its own
entry; a restore is picked up in the background.
"""

from __future__ import annotations

import re
from array import array
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..core.lexicon import STOPWORDS
from ..core.models import Node
from ..core.text import fold_han, has_cjk, match_form, runs, stem, stem_key

if TYPE_CHECKING:
    from ..core.state import MemoryState
    from .synonyms import Synonyms

THRESHOLD = 0.4
"""Jaccard of two memories' features from which they are twins (bench/bench_twins.py)."""
SKETCH = 32
"""Smallest feature hashes kept per memory (the similarity estimate of the candidates)."""
BUCKETS = 8
"""Of them, how many are posted (a twin shares at least one of them, with high probability)."""
BUCKET_MAX = 256
"""A posting held by more memories than this is not looked into (a common feature)."""
CANDIDATES = 256
"""Memories gathered from the postings at most (the smallest postings first)."""
ESTIMATED = 16
"""Of them, the ones met in most postings whose sketches are compared."""
PREFILTER = 0.2
"""Candidates whose sketches' Jaccard is under this are not scored exactly."""
EXACT_MAX = 4
"""At most this many candidates are scored exactly, the best estimates first."""
TEXT_CHARS = 600
"""Characters of content read (a memory repeats another in its beginning, or not at all)."""
SYNC_INLINE = 500
"""Memories left to index that a check indexes itself before it answers (a small Memory is
complete at once), unless the background build is at work; more are left to it (`step`)."""
FEATURE_CACHE = 64
"""Candidates' feature sets kept (a twin is scored against the same memories again)."""

FUNCTION_CHARS = frozenset("的了着过地得之所在是有和与及跟同把被给让向从对为以于而并或且也都还又就才再很太更最挺吗呢吧啊呀哦嗯啦么这那个只一")
"""CJK characters left out of the units (particles, pronouns, connectives): a rewording
changes them freely."""
_DROP = dict.fromkeys(map(ord, FUNCTION_CHARS))
_PAIRS = re.compile(r"(?=(..))", re.S)  # every pair of adjacent characters, found in C


@dataclass(frozen=True, slots=True)
class Twin:
    id: str
    score: float


class Folding:
    """Recall's folding of a text into twin features, with the synonym tables it needs
    (rebuilt when the synonym groups change)."""

    def __init__(self, synonyms: Synonyms) -> None:
        self.synonyms = synonyms
        self._for: object = None
        self._starts: dict[str, tuple[int, ...]] = {}  # a term's first two characters -> its lengths
        self._ones: re.Pattern[str] | None = None  # the one-character terms
        self._cjk: dict[str, str] = {}
        self._latin: dict[str, list[tuple[tuple[str, ...], str]]] = {}  # first word -> (words, class), longest first

    def _tables(self) -> None:
        classes = self.synonyms.classes
        if self._for is classes:
            return
        starts: dict[str, set[int]] = {}
        cjk: dict[str, str] = {}
        latin: dict[str, list[tuple[tuple[str, ...], str]]] = {}
        tokens: dict[int, str] = {}
        for term, cls in classes.of.items():
            token = tokens.get(id(cls))
            if token is None:
                token = tokens[id(cls)] = "\x02" + min(fold_han(t) for t in cls) + "\x03"
            if has_cjk(term):
                folded = fold_han(term)
                if folded.translate(_DROP) != folded:
                    continue  # the text is matched without function characters: 对不起 is its characters
                cjk[folded] = token
                starts.setdefault(folded[:2], set()).add(len(folded))
            else:
                key = stem_key(term)
                if key:
                    words = tuple(key.split(" "))
                    latin.setdefault(words[0], []).append((words, token))
        self._starts = {k: tuple(sorted(v, reverse=True)) for k, v in starts.items()}
        ones = "".join(sorted(k for k in starts if len(k) == 1))
        self._ones = re.compile(f"[{re.escape(ones)}]") if ones else None
        self._cjk = cjk
        self._latin = {k: sorted(v, key=lambda wt: -len(wt[0])) for k, v in latin.items()}
        self._for = classes

    def features(self, title: str, content: str) -> frozenset[str]:
        """The features of a memory's title and content (see the module's docstring): those
        of the title and the content's start together, and the title's again on their own
        (a title says what the memory is about, so it counts twice)."""
        self._tables()
        feats: set[str] = set()
        self._add(feats, match_form(f"{title}\n{content[:TEXT_CHARS]}"), "")
        self._add(feats, match_form(title), "\x01")
        return frozenset(feats)

    def _add(self, feats: set[str], text: str, tag: str) -> None:
        words: list[str] = []  # the stems of the Latin words in a row
        for is_cjk, run in runs(text):
            if not is_cjk:
                words.append(stem(run))
                continue
            if words:
                self._add_words(feats, words, tag)
                words = []
            self._add_cjk(feats, run, tag)
        if words:
            self._add_words(feats, words, tag)

    def _add_cjk(self, feats: set[str], run: str, tag: str) -> None:
        """A CJK run without its function characters: its synonym terms by their classes
        (the longest term first, left to right), the rest by its characters and pairs. The
        usual run holds no term: found with set operations on the pairs the features need
        anyway, not a loop over its characters."""
        run = run.translate(_DROP)
        if not run:
            return
        pairs = set(_PAIRS.findall(run))
        starts = self._starts
        hit = starts.keys() & pairs
        if self._ones is not None:
            hit.update(self._ones.findall(run))
        if not hit:
            pieces = None
        else:
            at: set[int] = set()
            for pair in hit:
                i = run.find(pair)
                while i >= 0:
                    at.add(i)
                    i = run.find(pair, i + 1)
            cjk_terms = self._cjk
            pieces = []
            end = 0
            for i in sorted(at):
                if i < end:
                    continue
                for length in (*starts.get(run[i:i + 2], ()), *starts.get(run[i], ())):
                    token = cjk_terms.get(run[i:i + length])
                    if token is not None:
                        feats.add(tag + token)
                        pieces.append(run[end:i])
                        end = i + length
                        break
            if end:
                pieces.append(run[end:])
            else:
                pieces = None  # pairs of terms' beginnings, but no whole term
        for piece, piece_pairs in ((run, pairs),) if pieces is None else \
                ((p, _PAIRS.findall(p)) for p in pieces if p):
            if tag:
                feats.update(map(tag.__add__, piece))
                feats.update(map(tag.__add__, piece_pairs))
            else:
                feats.update(piece)
                feats.update(piece_pairs)

    def _add_words(self, feats: set[str], words: list[str], tag: str) -> None:
        """Latin words (stems, in order): a synonym term of one or more words by its class,
        any other word but a function word by itself."""
        latin = self._latin
        i, n = 0, len(words)
        while i < n:
            w = words[i]
            for seq, token in latin.get(w, ()):
                if tuple(words[i:i + len(seq)]) == seq:
                    feats.add(tag + token)
                    i += len(seq)
                    break
            else:
                if w not in STOPWORDS:
                    feats.add(tag + w)
                i += 1


def sketch_of(feats: Iterable[str]) -> array[int]:
    """The SKETCH smallest hashes of the features, ascending (Python's string hash: the
index lives in one process and is never written down)."""
    return array("q", sorted(map(hash, feats))[:SKETCH])


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    shared = len(a & b)
    return shared / (len(a) + len(b) - shared)


class TwinIndex:
    """The twin sketches of a MemoryState's current memories, kept in step with its changes.

    Reads the state through `state_ref()` (a restore replaces what it holds) and the synonym
    groups through `folding`. Not thread-safe: callers hold the service lock."""

    def __init__(self, state_ref: Callable[[], MemoryState], synonyms: Synonyms) -> None:
        self._state_ref = state_ref
        self.folding = Folding(synonyms)
        self.entries: dict[str, tuple[Node, array[int]]] = {}
        self.buckets: dict[int, str | set[str]] = {}
        self.todo: list[str] = []
        self._todo_at = 0
        self._nodes_ref: object = None
        self._seen = 0  # the last change id looked at …
        self._seen_change: object = None  # … and that change itself (an id can be given again after a rollback)
        self._synonyms_for: object = None
        self._cache: OrderedDict[str, tuple[Node, frozenset[str]]] = OrderedDict()
        self.on_pending: Callable[[], None] | None = None
        """Called when the background has memories to index (the service starts its builder)."""
        self.building = False
        """The background build is at work (set by the service): a check leaves the backlog to it."""
        self.on_change: Callable[[str | None], None] | None = None
        """Told each id whose entry is added or dropped, and None when everything is forgotten
        (the consolidation proposals follow the index by it)."""

    # -- following the state ------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Memories known to need (re)indexing."""
        return len(self.todo) - self._todo_at

    @property
    def complete(self) -> bool:
        return self._nodes_ref is not None and self.pending == 0

    def sync(self) -> None:
        """Catch up with the state: the targets of the changes since the last look are
        re-indexed now; a replaced node table (restore) or a gap in the history (sealed into
        segments) queues every memory whose indexed version is not the current one."""
        st = self._state_ref()
        classes = self.folding.synonyms.classes
        if self._nodes_ref is None or classes is not self._synonyms_for and self._synonyms_for is not None:
            self._reset(st)
            return
        self._synonyms_for = classes
        last = st.next_change_id() - 1
        history = st.history
        tail = history[-1] if history else None
        if last == self._seen and st.nodes is self._nodes_ref and tail is self._seen_change:
            return
        # a replaced node table (restore), changes sealed out of the inline history, or changes
        # taken back (a call whose log record could not be written, its change id then given
        # to another): compare every memory
        if st.nodes is not self._nodes_ref or last < self._seen or (last == self._seen) or \
                (not history or history[0].change_id > self._seen + 1):
            self._sweep(st)
            self._seen, self._seen_change = last, tail
            return
        targets: dict[str, None] = {}
        for c in reversed(history):
            if c.change_id <= self._seen:
                break
            if c.target is not None and c.kind.startswith("node."):
                targets[c.target] = None
        self._seen, self._seen_change = last, tail
        for node_id in targets:
            self._refresh(st, node_id)

    def _reset(self, st: MemoryState) -> None:
        """Forget everything and queue every node (a first look, or new synonym groups)."""
        self.entries.clear()
        self.buckets.clear()
        self._cache.clear()
        self._nodes_ref = st.nodes
        self._seen = st.next_change_id() - 1
        self._seen_change = st.history[-1] if st.history else None
        self._synonyms_for = self.folding.synonyms.classes
        self.todo, self._todo_at = list(st.nodes), 0
        if self.on_change is not None:
            self.on_change(None)
        self._announce()

    def _sweep(self, st: MemoryState) -> None:
        nodes = st.nodes
        self._nodes_ref = nodes
        for node_id in [i for i in self.entries if i not in nodes]:
            self._drop(node_id)
        entries = self.entries
        queued = []
        for i, n in nodes.items():
            e = entries.get(i)
            if (e is None and n.superseded_by is None) or (e is not None and e[0] is not n):
                queued.append(i)
        if queued:
            self.todo = [*self.todo[self._todo_at:], *queued]
            self._todo_at = 0
            self._announce()

    def _announce(self) -> None:
        if self.pending > SYNC_INLINE and self.on_pending is not None:
            self.on_pending()

    def step(self, n: int = 200) -> bool:
        """Index up to n queued memories; False when none is left."""
        self.sync()
        st = self._state_ref()
        end = min(len(self.todo), self._todo_at + n)
        for node_id in self.todo[self._todo_at:end]:
            self._refresh(st, node_id)
        self._todo_at = end
        if end >= len(self.todo):
            self.todo, self._todo_at = [], 0
            return False
        return True

    def _refresh(self, st: MemoryState, node_id: str) -> None:
        node = st.nodes.get(node_id)
        entry = self.entries.get(node_id)
        if entry is not None:
            if entry[0] is node:
                return
            self._drop(node_id)
        if node is not None and node.superseded_by is None:
            self.add(node, self.features_of(node))

    def _drop(self, node_id: str) -> None:
        entry = self.entries.pop(node_id, None)
        self._cache.pop(node_id, None)
        if entry is None:
            return
        if self.on_change is not None:
            self.on_change(node_id)
        for h in entry[1][:BUCKETS]:
            v = self.buckets.get(h)
            if v is None:
                continue
            if isinstance(v, str):
                if v == node_id:
                    del self.buckets[h]
            else:
                v.discard(node_id)
                if len(v) == 1:
                    self.buckets[h] = next(iter(v))

    def add(self, node: Node, feats: frozenset[str]) -> None:
        """Index a current node (not indexed now) with its features."""
        sk = sketch_of(feats)
        self.entries[node.id] = (node, sk)
        if self.on_change is not None:
            self.on_change(node.id)
        buckets = self.buckets
        for h in sk[:BUCKETS]:
            v = buckets.get(h)
            if v is None:
                buckets[h] = node.id
            elif isinstance(v, str):
                buckets[h] = {v, node.id}
            else:
                v.add(node.id)

    def written(self, node: Node, feats: frozenset[str]) -> None:
        """A node the caller has just committed, with the features it checked it by: indexed
        now, so the next sync finds it current and does no work for it."""
        self.sync()
        if node.id in self.entries:
            self._drop(node.id)
        if node.superseded_by is None:
            self.add(node, feats)

    def features_of(self, node: Node) -> frozenset[str]:
        cached = self._cache.get(node.id)
        if cached is not None and cached[0] is node:
            self._cache.move_to_end(node.id)
            return cached[1]
        feats = self.folding.features(node.title, node.content)
        self._cache[node.id] = (node, feats)
        if len(self._cache) > FEATURE_CACHE:
            self._cache.popitem(last=False)
        return feats

    # -- queries ----------------------------------------------------------------------------

    def ready(self) -> None:
        """Catch up; a small backlog is indexed now, a large one is left to the background."""
        self.sync()
        if 0 < self.pending <= SYNC_INLINE and not self.building:
            while self.step(SYNC_INLINE):
                pass

    def similar(self, feats: frozenset[str], exclude: Iterable[str] = (), limit: int = 3,
                threshold: float = THRESHOLD) -> list[Twin]:
        """The current memories whose features are twins of `feats`, best first."""
        self.ready()
        if not feats:
            return []
        sk = sketch_of(feats)
        return self._around(lambda: feats, sk, set(exclude), limit, threshold)

    def neighbours(self, node_id: str, limit: int = 10, threshold: float = THRESHOLD) -> list[Twin]:
        """The twins of an indexed current memory (itself left out)."""
        entry = self.entries.get(node_id)
        if entry is None:
            return []
        node = entry[0]
        return self._around(lambda: self.features_of(node), entry[1], {node_id}, limit, threshold)

    def _around(self, feats_of: Callable[[], frozenset[str]], sk: array[int], exclude: set[str], limit: int,
                threshold: float) -> list[Twin]:
        """The twins among the memories sharing a posted hash with sketch `sk`; `feats_of()`
        gives the features, worked out only when some candidate's estimate calls for it."""
        buckets, entries = self.buckets, self.entries
        found = [v for v in map(buckets.get, sk) if v is not None]
        if not found:
            return []
        # the smallest postings first (a rare feature names few memories), at most CANDIDATES
        # memories in all; those met in most postings are estimated first
        found.sort(key=lambda v: 1 if isinstance(v, str) else len(v))
        counts: Counter[str] = Counter()
        total = 0
        for v in found:
            n = 1 if isinstance(v, str) else len(v)
            if n > BUCKET_MAX or (total and total + n > CANDIDATES):
                break
            counts.update((v,) if isinstance(v, str) else v)
            total += n
        for i in exclude:
            counts.pop(i, None)
        scored = []
        mine = set(sk)
        for i, _n in counts.most_common(ESTIMATED):
            theirs = entries[i][1]
            shared = len(mine.intersection(theirs))
            e = shared / (len(mine) + len(theirs) - shared)  # the sketches' own Jaccard: a cheap estimate
            if e >= PREFILTER:
                scored.append((e, i))
        scored.sort(reverse=True)
        out = []
        feats = feats_of() if scored else frozenset()
        for _e, i in scored[:EXACT_MAX]:
            score = jaccard(feats, self.features_of(entries[i][0]))
            if score >= threshold:
                out.append(Twin(i, round(score, 3)))
        out.sort(key=lambda t: (-t.score, t.id))
        return out[:limit]
