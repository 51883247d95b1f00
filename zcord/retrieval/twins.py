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
features, stored by their low 16 bits: 128 bytes) in one array, and a posting from each of
its BUCKETS smallest hashes to it (8 bytes each: the hash's top 32 bits and the memory's
slot, in one sorted array, the latest ones in a small dict until they are merged in). Near duplicates share their smallest
hashes with high probability; a candidate's sketch gives an estimate, and the few best are
scored exactly. It follows the state through the change history (the targets of the changes
since it last looked), so a write updates only its own entry; a restore is picked up in the
background.
"""

from __future__ import annotations

import os
import re
from array import array
from bisect import bisect_left
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import add, itemgetter
from typing import TYPE_CHECKING

from ..core.lexicon import STOPWORDS
from ..core.models import Node
from ..core.text import fold_han, has_cjk, match_form, runs, stem, stem_key

if TYPE_CHECKING:
    from ..core.state import MemoryState
    from .synonyms import Synonyms

THRESHOLD = 0.4
"""Jaccard of two memories' features from which they are twins (bench/bench_twins.py)."""
SKETCH = 64
"""Smallest feature hashes kept per memory (the similarity estimate of the candidates): 64
of them give an estimate twice as steady as 32 (a standard error of 0.06 at a Jaccard of 0.4),
so PREFILTER can sit nearer the threshold and far fewer candidates are scored exactly."""
LOOKUP = 32
"""Of a checked text's smallest hashes, how many are looked up in the postings."""
BUCKETS = 8
"""Of a memory's smallest hashes, how many are posted (a twin shares at least one of them, with
high probability)."""
BUCKET_MAX = 256
"""A posting held by more memories than this is not looked into (a common feature)."""
CANDIDATES = 256
"""Memories gathered from the postings at most (the smallest postings first)."""
ESTIMATED = 16
"""Of them, the ones met in most postings whose sketches are compared."""
PREFILTER = 0.26
"""Candidates whose sketches' Jaccard is under this are not scored exactly. With SKETCH 64 a
twin at the threshold (0.4) falls under it about as often as under 0.2 with 32 hashes (2.3
standard errors; bench/RESULTS.md, issue 38 speed), while two unrelated memories of a
Memory whose texts share most characters (Jaccard 0.18) pass it 1 % of the time, not 35 %."""
EXACT_MAX = 4
"""At most this many candidates are scored exactly, the best estimates first."""
TEXT_CHARS = 600
"""Characters of content read (a memory repeats another in its beginning, or not at all)."""
SYNC_INLINE = 500
"""Memories left to index that a check indexes itself before it answers (a small Memory is
complete at once), unless the background build is at work; more are left to it (`step`)."""
CHECK_ENV = "ZCOR_TWIN_CHECK"
"""Set to "off", creates are not checked for twins (read when the index is made)."""
FEATURE_CACHE = 64
"""Candidates' feature sets kept (a twin is scored against the same memories again)."""

FUNCTION_CHARS = frozenset("的了着过地得之所在是有和与及跟同把被给让向从对为以于而并或且也都还又就才再很太更最挺吗呢吧啊呀哦嗯啦么这那个只一")
"""CJK characters left out of the units (particles, pronouns, connectives): a rewording
changes them freely."""
_DROP = dict.fromkeys(map(ord, FUNCTION_CHARS))
_DROP_RE = re.compile(f"[{''.join(sorted(FUNCTION_CHARS))}]")  # the same, removed in C (translate's dict is slower)


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
        run = _DROP_RE.sub("", run)
        if not run:
            return
        chars = list(run)
        pairs = list(map(add, chars, chars[1:]))  # pairs[i] = run[i:i + 2] (from the characters made once)
        found = set(pairs)
        starts = self._starts
        hit = starts.keys() & found
        if self._ones is not None:
            hit.update(self._ones.findall(run))
        cuts: list[tuple[int, int]] | None = None  # (start, end) of the stretches between the terms found
        if hit:
            at: set[int] = set()
            for pair in hit:
                i = run.find(pair)
                while i >= 0:
                    at.add(i)
                    i = run.find(pair, i + 1)
            cjk_terms = self._cjk
            cuts = []
            end = 0
            for i in sorted(at):
                if i < end:
                    continue
                for length in (*starts.get(run[i:i + 2], ()), *starts.get(run[i], ())):
                    token = cjk_terms.get(run[i:i + length])
                    if token is not None:
                        feats.add(tag + token)
                        cuts.append((end, i))
                        end = i + length
                        break
            if end:
                cuts.append((end, len(run)))
            else:
                cuts = None  # pairs of terms' beginnings, but no whole term
        if cuts is None:
            pieces: Iterable[tuple[Iterable[str], Iterable[str]]] = ((chars, found),)
        else:
            pieces = ((chars[a:b], pairs[a:b - 1]) for a, b in cuts if a < b)
        for piece, piece_pairs in pieces:
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


_H32 = 0xFFFFFFFF
_LOW = 0xFFFF
PAD = 0xFFFF
"""Fills a sketch of fewer than SKETCH hashes (no stored hash takes it)."""
MERGE_FROM = 4096
"""Postings held in the dict before they are merged into the sorted array (or a 32nd of it)."""
COMPACT_FROM = 1024
"""Dropped slots from which the arrays are rebuilt without them (or a quarter of the entries)."""
SEEN_BITS = 1 << 22
"""Bits of `Postings.seen` (512 KiB): with 8 postings a memory, a key not in the array is
taken for one in it by 1 lookup in 6 at 100,000 memories of distinct texts."""
_SEEN_MASK = (SEEN_BITS >> 3) - 1


def hashes_of(feats: Iterable[str]) -> list[int]:
    """The SKETCH smallest hashes of the features, ascending (Python's 64-bit string hash: the
    index lives in one process and is never written down)."""
    return sorted(map(hash, feats))[:SKETCH]


def _key(h: int) -> int:
    """A hash's posting key: its top 32 bits as an unsigned number (in the hashes' order)."""
    return (h >> 32) + 0x80000000


def _long(post: array[int], k: int) -> bool:
    """The posting of key k in the sorted array `post` is longer than BUCKET_MAX."""
    i = bisect_left(post, k << 32) + BUCKET_MAX
    return i < len(post) and post[i] >> 32 == k


def _lows(hashes: list[int]) -> list[int]:
    """A sketch as stored: each hash's low 16 bits (PAD never taken). Two sketches of 64 share
    a stored value by chance about 0.06 times: no matter for an estimate."""
    lows = list(map(_LOW.__and__, hashes))  # in C
    return [x if x != PAD else PAD - 1 for x in lows] if PAD in lows else lows


_FIRST_BYTES = int.from_bytes(b"\x01\x00" * (ESTIMATED * SKETCH), "big")
"""As a big-endian number of bytes: 1 in each stored value's first byte (counted from the end)."""


def _both_bytes(mine: set[int], sketches: bytes) -> bytes:
    """Per byte of `sketches` (stored values of 16 bits, in the machine's byte order): 1 in the
    first byte of each value whose low byte is the low byte of some value of `mine` and whose
    high byte is the high byte of some value (maybe another) of it (or is 1), else 0. So a
    sketch has at least as many ones as values shared with `mine`. All of it in C."""
    raw = array("H", mine).tobytes()
    firsts, seconds = raw[0::2], raw[1::2]  # each value's first and second byte
    a = int.from_bytes(sketches.translate(_member_table(firsts)), "big")
    b = int.from_bytes(sketches.translate(_member_table(seconds)), "big")  # a value's second byte onto its first:
    return (a & b << 8 & _FIRST_BYTES).to_bytes(len(sketches), "big")


def _member_table(members: bytes) -> bytes:
    """A translation table: 1 for the bytes of `members` (and for 1 itself), 0 for the others."""
    return bytes.maketrans(members, _ONES[:len(members)]).translate(_ONE)


_ONES = b"\x01" * 256
_ONE = bytes(i == 1 for i in range(256))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    shared = len(a & b)
    return shared / (len(a) + len(b) - shared)


class Postings:
    """The twin index's postings in flat arrays: `post` (sorted `key << 32 | slot`, `_key` of a
    hash) with `delta` (key -> slots) for the latest, merged into the array now and then. A
    dropped slot stays until the owner compacts (`renumber`); walks skip it."""

    def __init__(self) -> None:
        self.post = array("Q")
        self.delta: dict[int, list[int]] = {}
        self.delta_n = 0
        self.big: set[int] = set()
        """The keys whose posting in `post` is longer than BUCKET_MAX (a common feature's): a
        lookup passes them by at the cost of a set lookup."""
        self.seen = bytearray(SEEN_BITS >> 3)
        """A bit per `key % SEEN_BITS`, set for every key merged into `post` (and never cleared):
        a key whose bit is clear is not in `post`, and is not looked for there."""

    def slots(self) -> set[int]:
        """Every slot posted (dropped ones included)."""
        slots = {k & _H32 for k in self.post}
        for v in self.delta.values():
            slots.update(v)
        return slots

    def add(self, slot: int, hashes: list[int]) -> None:
        """Post a new slot under its first BUCKETS hashes."""
        delta = self.delta
        for h in hashes[:BUCKETS]:
            k = _key(h)
            v = delta.get(k)
            if v is None:
                delta[k] = [slot]
            else:
                v.append(slot)
        self.delta_n += min(len(hashes), BUCKETS)
        if self.delta_n > max(MERGE_FROM, len(self.post) >> 5):
            self._merge()

    def _merge(self) -> None:
        """The dict's postings into the sorted array (slices copied in C between the new keys)."""
        keys = sorted(h << 32 | s for h, v in self.delta.items() for s in v)
        post, out, lo = self.post, array("Q"), 0
        for k in keys:
            i = bisect_left(post, k, lo)
            out += post[lo:i]
            out.append(k)
            lo = i
        out += post[lo:]
        self.post = out
        big, seen = self.big, self.seen
        for k in self.delta:
            seen[k >> 3 & _SEEN_MASK] |= 1 << (k & 7)
            if k not in big and _long(out, k):
                big.add(k)
        self.delta, self.delta_n = {}, 0

    def renumber(self, remap: array[int]) -> None:
        """The postings with each slot renumbered by `remap` (-1: dropped, left out); renumbered
        in order, so the array stays sorted."""
        post = array("Q")
        for k in self.post:
            s = remap[k & _H32]
            if s >= 0:
                post.append(k >> 32 << 32 | s)
        delta: dict[int, list[int]] = {}
        for h, v in self.delta.items():
            kept = [remap[s] for s in v if remap[s] >= 0]
            if kept:
                delta[h] = kept
        self.post, self.delta = post, delta
        self.delta_n = sum(map(len, delta.values()))
        self.big = {k for k in self.big if _long(post, k)}

    def candidates(self, hashes: list[int]) -> list[int]:
        """The slots met in the postings of `hashes` (a sketch), once per posting met: the
        smallest postings first (a rare feature names few memories), at most CANDIDATES slots
        in all, a posting longer than BUCKET_MAX not walked."""
        post, delta, big, seen = self.post, self.delta, self.big, self.seen
        end = len(post)
        found = []
        for h in hashes[:LOOKUP]:
            k = _key(h)
            if k in big:  # longer than BUCKET_MAX whatever the dict adds: never walked
                continue
            if seen[k >> 3 & _SEEN_MASK] >> (k & 7) & 1:
                lo = hi = bisect_left(post, k << 32)
                if lo < end and post[lo] >> 32 == k:
                    hi = bisect_left(post, (k + 1) << 32, lo + 1, min(end, lo + BUCKET_MAX + 1))
            else:
                lo = hi = 0  # not in the array
            d = delta.get(k)
            n = hi - lo + (len(d) if d else 0)
            if n:
                found.append((n, lo, hi, d))
        if not found:
            return []
        found.sort(key=itemgetter(0))  # by length only: ties stay in the hashes' order
        slots: list[int] = []
        total = 0
        for n, lo, hi, d in found:
            if n > BUCKET_MAX or (total and total + n > CANDIDATES):
                break
            slots += map(_H32.__and__, post[lo:hi])
            if d:
                slots += d
            total += n
        return slots


class TwinIndex:
    """The twin sketches of a MemoryState's current memories, kept in step with its changes.

    Each indexed memory has a slot: `entries` maps its id to it, `_nodes` the slot to the node
    indexed (None once dropped), `_sk` holds SKETCH stored hashes per slot, and the postings
    are `postings` (Postings: flat arrays). A dropped slot stays in the postings until the
    arrays are compacted; walks skip it.

    Reads the state through `state_ref()` (a restore replaces what it holds) and the synonym
    groups through `folding`. Not thread-safe: callers hold the service lock (or, for a write's
    check, run while the thread holding it waits: Service's `during_fsync`)."""

    def __init__(self, state_ref: Callable[[], MemoryState], synonyms: Synonyms) -> None:
        self._state_ref = state_ref
        self.folding = Folding(synonyms)
        self.entries: dict[str, int] = {}
        self._nodes: list[Node | None] = []
        self._sk = array("H")
        self._distinct = array("B")  # per slot: the distinct values in its sketch
        self.postings = Postings()
        self._dead = 0
        self.todo: list[str] = []
        self._todo_at = 0
        self._nodes_ref: object = None
        self._seen = 0  # the last change id looked at …
        self._seen_change: object = None  # … and that change itself (an id can be given again after a rollback)
        self._synonyms_for: object = None
        self._cache: OrderedDict[str, tuple[Node, frozenset[str]]] = OrderedDict()
        self._last: tuple[frozenset[str], list[int]] | None = None  # the last features hashed, and their hashes
        self.on_pending: Callable[[], None] | None = None
        """Called when the background has memories to index (the service starts its builder)."""
        self.building = False
        """The background build is at work (set by the service): a check leaves the backlog to it."""
        self.on_change: Callable[[str | None], None] | None = None
        """Told each id whose entry is added or dropped, and None when everything is forgotten
        (the consolidation proposals follow the index by it)."""
        self.check = os.environ.get(CHECK_ENV, "on") != "off"
        """A create is checked for twins (CHECK_ENV=off: not, for the benchmarks' rows without it;
        the index still serves the consolidation proposals)."""

    # -- following the state ------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Memories known to need (re)indexing."""
        return len(self.todo) - self._todo_at

    @property
    def complete(self) -> bool:
        return self._nodes_ref is not None and self.pending == 0

    @property
    def _post(self) -> array[int]:
        """The sorted postings array (`postings.post`)."""
        return self.postings.post

    def indexed(self, node_id: str) -> Node | None:
        """The version of a memory the index holds (None: not indexed)."""
        slot = self.entries.get(node_id)
        return None if slot is None else self._nodes[slot]

    def posted(self) -> set[str]:
        """The ids the postings lead to (dropped slots left out)."""
        nodes = self._nodes
        return {n.id for s in self.postings.slots() if (n := nodes[s]) is not None}

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

    def _clear(self) -> None:
        self.entries = {}
        self._nodes = []
        self._sk = array("H")
        self._distinct = array("B")
        self.postings = Postings()
        self._dead = 0
        self._cache.clear()

    def _reset(self, st: MemoryState) -> None:
        """Forget everything and queue every node (a first look, or new synonym groups)."""
        self._clear()
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
        entries, held = self.entries, self._nodes
        queued = []
        for i, n in nodes.items():
            slot = entries.get(i)
            if (slot is None and n.superseded_by is None) or (slot is not None and held[slot] is not n):
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
        slot = self.entries.get(node_id)
        if slot is not None:
            if self._nodes[slot] is node:
                return
            self._drop(node_id)
        if node is not None and node.superseded_by is None:
            self.add(node, self.features_of(node))

    def _drop(self, node_id: str) -> None:
        slot = self.entries.pop(node_id, None)
        self._cache.pop(node_id, None)
        if slot is None:
            return
        if self.on_change is not None:
            self.on_change(node_id)
        self._nodes[slot] = None  # its postings stay until the arrays are compacted
        self._dead += 1
        if self._dead > max(COMPACT_FROM, len(self.entries) // 4):
            self._compact()

    def add(self, node: Node, feats: frozenset[str]) -> None:
        """Index a current node (not indexed now) with its features."""
        hashes = self.hashes(feats)
        slot = len(self._nodes)
        self._nodes.append(node)
        self.entries[node.id] = slot
        lows = _lows(hashes)
        self._distinct.append(len(set(lows)))
        if len(lows) < SKETCH:
            lows += [PAD] * (SKETCH - len(lows))
        self._sk.extend(lows)
        if self.on_change is not None:
            self.on_change(node.id)
        self.postings.add(slot, hashes)

    def _compact(self) -> None:
        """Rebuild the arrays without the dropped slots (renumbered in order, so the postings
        stay sorted)."""
        old, sk, distinct = self._nodes, self._sk, self._distinct
        remap = array("l", [-1]) * len(old)
        nodes: list[Node | None] = []
        new_sk, new_distinct = array("H"), array("B")
        for s, n in enumerate(old):
            if n is not None:
                remap[s] = len(nodes)
                nodes.append(n)
                new_sk += sk[s * SKETCH:(s + 1) * SKETCH]
                new_distinct.append(distinct[s])
        self.postings.renumber(remap)
        self._nodes, self._sk, self._distinct = nodes, new_sk, new_distinct
        self._dead = 0
        self.entries = {n.id: i for i, n in enumerate(nodes) if n is not None}

    def written(self, node: Node, feats: frozenset[str]) -> None:
        """A node the caller has just committed, with the features it checked it by: indexed
        now (its features kept for the sync that sees its change), so the next sync finds it
        current and does no work for it."""
        self._remember(node, feats)
        self.sync()
        if self.indexed(node.id) is node or node.superseded_by is not None:
            return
        if node.id in self.entries:
            self._drop(node.id)
        self.add(node, feats)

    def _remember(self, node: Node, feats: frozenset[str]) -> None:
        self._cache[node.id] = (node, feats)
        self._cache.move_to_end(node.id)
        if len(self._cache) > FEATURE_CACHE:
            self._cache.popitem(last=False)

    def hashes(self, feats: frozenset[str]) -> list[int]:
        """`hashes_of(feats)`, not worked out again for the features hashed last (a create's
        are checked, then indexed)."""
        last = self._last
        if last is not None and last[0] is feats:
            return last[1]
        hashes = hashes_of(feats)
        self._last = (feats, hashes)
        return hashes

    def features_of(self, node: Node) -> frozenset[str]:
        cached = self._cache.get(node.id)
        if cached is not None and cached[0] is node:
            self._cache.move_to_end(node.id)
            return cached[1]
        feats = self.folding.features(node.title, node.content)
        self._remember(node, feats)
        return feats

    # -- queries ----------------------------------------------------------------------------

    def ready(self) -> None:
        """Catch up; a small backlog is indexed now, a large one is left to the background."""
        self.sync()
        if 0 < self.pending <= SYNC_INLINE and not self.building:
            while self.step(SYNC_INLINE):
                pass

    def similar(self, feats: frozenset[str], exclude: Iterable[str] = (), limit: int = 3,
                threshold: float = THRESHOLD, *, synced: bool = False) -> list[Twin]:
        """The current memories whose features are twins of `feats`, best first (`synced`: the
        caller has just called `ready` and nothing was indexed since)."""
        if not synced:
            self.ready()
        if not feats:
            return []
        return self._around(lambda: feats, self.hashes(feats), exclude, limit, threshold)

    def neighbours(self, node_id: str, limit: int = 10, threshold: float = THRESHOLD) -> list[Twin]:
        """The twins of an indexed current memory (itself left out)."""
        node = self.indexed(node_id)
        if node is None:
            return []
        feats = self.features_of(node)
        return self._around(lambda: feats, self.hashes(feats), (node_id,), limit, threshold)

    def _around(self, feats_of: Callable[[], frozenset[str]], hashes: list[int], exclude: Iterable[str],
                limit: int, threshold: float) -> list[Twin]:
        """The twins among the memories sharing a posted hash with `hashes` (a sketch);
        `feats_of()` gives the features, worked out only when some candidate's estimate calls
        for it."""
        nodes = self._nodes
        slots = self.postings.candidates(hashes)
        if not slots:
            return []
        # those met in most postings are estimated first: the most met first, ties in the order
        # met (Counter.most_common's order, sorted in C), dropped and excluded slots passed by
        counts = Counter(slots)
        order: Iterable[int] = counts if len(counts) == len(slots) else \
            sorted(counts, key=counts.__getitem__, reverse=True)
        entries = self.entries
        excluded = {x for i in exclude if (x := entries.get(i)) is not None}
        estimated = []
        for s in order:
            if nodes[s] is not None and s not in excluded:
                estimated.append(s)
                if len(estimated) == ESTIMATED:
                    break
        scored = []
        mine = set(_lows(hashes))
        sk, distinct = self._sk, self._distinct
        # first, in C for all of them at once, a bound of the values each shares with mine: its
        # values whose low byte is some value's of mine and whose high byte is some value's
        # (`_both_bytes`); the values shared are counted only where that bound passes the prefilter
        flags = _both_bytes(mine, b"".join([sk[s * SKETCH:(s + 1) * SKETCH] for s in estimated]))
        size = len(mine)
        for i, s in enumerate(estimated):
            at_most = min(flags.count(1, i * 2 * SKETCH, (i + 1) * 2 * SKETCH), size, distinct[s])
            if at_most / (size + distinct[s] - at_most) < PREFILTER:
                continue  # its estimate is below that bound's
            shared = len(mine.intersection(sk[s * SKETCH:(s + 1) * SKETCH]))  # PAD is never in mine
            e = shared / (size + distinct[s] - shared)  # the sketches' own Jaccard: a cheap estimate
            if e >= PREFILTER:
                scored.append((e, s))
        scored.sort(reverse=True)
        out = []
        feats = feats_of() if scored else frozenset()
        for _e, s in scored[:EXACT_MAX]:
            node = nodes[s]
            assert node is not None
            score = jaccard(feats, self.features_of(node))
            if score >= threshold:
                out.append(Twin(node.id, round(score, 3)))
        out.sort(key=lambda t: (-t.score, t.id))
        return out[:limit]
