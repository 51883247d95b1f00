"""Text normalization, segmentation, English inflection folding and keyword derivation.

The one place that decides how zcor compares text (NFKC + Unicode case folding) and how
it cuts text into words:

- CJK runs (Han, kana, Hangul) go to jieba (loaded once per process) and are matched as
  substrings of titles.
- Every other run of letters and digits (Latin, Greek, Cyrillic, digits, mixed like
  ``mp3``) is one whole word. Such words are matched on word boundaries only, after light
  English inflection folding (`fold`), never as fragments of a longer word.
"""

from __future__ import annotations

import collections
import functools
import json
import logging
import os
import re
import threading
import unicodedata
import zlib
from array import array
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .fsutil import atomic_write, read_derived
from .lexicon import (
    IRREGULAR,
    KEYWORD_LIGHT,
    LIGHT_WORDS,
    NAME_PREFIXES,
    NAME_SUFFIXES,
    PRODUCT_HEADS,
    SINGLE_STOP,
    STEM_KEEP,
    STOPWORDS,
    SURNAMES,
    VERB_SUFFIXES,
)

MIN_WORD_CHARS = 2
FOLDING_VERSION = 2
"""The version of the rules by which text is compared and indexed: `normalize`, `fold`,
`term_key`, `runs`/`title_seq`, the CJK ranges and anything else the retrieval indexes are
built with (zcord.core.indexes). Part of the fingerprint of memory-state.recall.cache
(zcord.core.indexcache): bump it with any change to those rules, or a start would load
indexes built by the old ones. 2: Snowball stems with irregular forms (the weighted tables),
titles, keywords and the query text in `match_form` (Traditional folded to Simplified)."""
# A user word's jieba frequency: high enough to win over overlapping dictionary words
# ("小明说" → 小明/说, not 小/明说), the way a moderately common word would.
USER_WORD_FREQ = 20_000

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\U00020000-\U0003134f"
_CJK_CHAR = re.compile(f"[{_CJK}]")
_CJK_RUN = re.compile(f"[{_CJK}]+")
all_cjk = _CJK_RUN.fullmatch
"""A match when every character of the text is CJK (most titles of a Chinese Memory)."""
# a CJK run, or a run of other letters and digits (underscore splits words, as punctuation does)
_RUNS = re.compile(f"([{_CJK}]+)|((?:(?![{_CJK}])[^\\W_])+)")
_ALPHA_PARTS = re.compile(r"[^\W\d_]+")
_ASCII_WORD = re.compile(r"[a-z]+")
# characters that never start or end a name or an unknown word jieba's HMM guessed
_FUNCTION_CHARS = frozenset("的了着过地得是在有和与跟把被给让向从对为以而并或且也都还又就才再很太更最挺没不别吗呢吧啊呀哦嗯啦么这那哪我你您他她它们个")


def normalize(text: str) -> str:
    """The comparison form of text: NFKC, then Unicode case folding."""
    return unicodedata.normalize("NFKC", text).casefold()




@functools.cache
def _han_tables() -> tuple[frozenset[str], dict[int, int]]:
    """The Traditional characters and their translation table to Simplified, read on first use."""
    from .hanzi import SIMPLIFIED, TRADITIONAL

    return frozenset(TRADITIONAL), str.maketrans(TRADITIONAL, SIMPLIFIED)


@functools.cache
def _traditional_search() -> Callable[[str], re.Match[str] | None]:
    """A search that finds each Traditional character below U+10000 and every character above
    it (Traditional or not): where it finds nothing there is no Traditional character. In C,
    several times faster than the set's isdisjoint (which makes a string of each character)."""
    traditional, _ = _han_tables()
    below = "".join(sorted(c for c in traditional if c <= "\uffff"))
    return re.compile(f"[{re.escape(below)}\U00010000-\U0010ffff]").search


def fold_han(text: str) -> str:
    """Traditional Chinese characters folded to Simplified, one character for one (so every
    position is kept): 喜歡 → 喜欢, 後來 → 后来. The table (zcord/core/hanzi.py) comes from
    OpenCC's character dictionary; Simplified text is left as it is."""
    if text.isascii():
        return text
    traditional, t2s = _han_tables()
    if _traditional_search()(text) is None or traditional.isdisjoint(text):  # Simplified text: nothing copied
        return text
    return text.translate(t2s)


def match_form(text: str) -> str:
    """The form recall and zcor_memory_query match text in: `normalize`, then Traditional
    folded to Simplified (`fold_han`). Stored text is never changed."""
    return fold_han(normalize(text))


def has_cjk(text: str) -> bool:
    return _CJK_CHAR.search(text) is not None


def runs(text: str) -> list[tuple[bool, str]]:
    """The text's word runs in order: (True, CJK run) or (False, a whole non-CJK word)."""
    return [(m.group(1) is not None, m.group(0)) for m in _RUNS.finditer(text)]


def latin_words(text: str) -> list[str]:
    """The non-CJK whole words of text, in order."""
    return [m.group(2) for m in _RUNS.finditer(text) if m.group(2) is not None]


# -- English inflection folding (Porter's step 1: plurals, -ed, -ing, final y) ------------

_VOWELS = frozenset("aeiou")


def _is_consonant(w: str, i: int) -> bool:
    ch = w[i]
    if ch in _VOWELS:
        return False
    if ch == "y":
        return i == 0 or not _is_consonant(w, i - 1)
    return True


def _measure(stem: str) -> int:
    """Porter's m: the number of vowel-consonant sequences in the stem."""
    m, prev_vowel = 0, False
    for i in range(len(stem)):
        cons = _is_consonant(stem, i)
        if cons and prev_vowel:
            m += 1
        prev_vowel = not cons
    return m


def _has_vowel(stem: str) -> bool:
    return any(not _is_consonant(stem, i) for i in range(len(stem)))


def _cvc(w: str) -> bool:
    return (len(w) >= 3 and _is_consonant(w, -3 % len(w)) and not _is_consonant(w, len(w) - 2)
            and _is_consonant(w, len(w) - 1) and w[-1] not in "wxy")


def _fold(w: str) -> str:
    # step 1a: plurals
    if w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("ies"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith("ss") and not w.endswith("us") and len(w) > 3:
        w = w[:-1]
    # step 1b: -eed, -ed, -ing
    if w.endswith("eed"):
        if _measure(w[:-3]) > 0:
            w = w[:-1]
    else:
        for suffix in ("ed", "ing"):
            stem = w[:-len(suffix)]
            if w.endswith(suffix) and _has_vowel(stem) and len(stem) >= 2:
                w = stem
                if w.endswith(("at", "bl", "iz")):
                    w += "e"
                elif len(w) >= 2 and w[-1] == w[-2] and w[-1] not in "lsz" and _is_consonant(w, len(w) - 1):
                    w = w[:-1]
                elif _measure(w) == 1 and _cvc(w):
                    w += "e"
                break
    # step 1c: final y after a vowel-bearing stem
    if w.endswith("y") and len(w) > 2 and _has_vowel(w[:-1]):
        w = w[:-1] + "i"
    return w


_fold_cache: dict[str, str] = {}


def fold(word: str) -> str:
    """Light English inflection folding of one normalized word: dogs → dog, studied/studies/
    study → studi, baking/baked → bake, running → run. Only words of ASCII letters of at
    least 4 characters are folded; everything else (digits, other scripts, short words)
    is kept as it is. Deterministic (Porter's step 1); irregular forms (ran, went) stay apart.
    """
    out = _fold_cache.get(word)
    if out is None:
        out = _fold(word) if len(word) >= 4 and _ASCII_WORD.fullmatch(word) else word
        if len(_fold_cache) < 200_000:
            _fold_cache[word] = out
    return out


def term_key(term: str) -> str:
    """How a term or keyword is compared: a CJK-bearing term by its normalized text (matched
    as a substring of titles), any other by its folded whole words joined by one space.
    Both in `match_form` (Traditional folded to Simplified)."""
    norm = match_form(term).strip()
    if has_cjk(norm):
        return norm
    return " ".join(fold(w) for w in latin_words(norm))


def title_seq(norm_title: str) -> tuple[str | None, ...]:
    """A normalized title's non-CJK words, folded, in order; None stands for a CJK run, so a
    phrase never matches across one."""
    seq = tuple(None if cjk else fold(run) for cjk, run in runs(norm_title))
    return seq if any(seq) else ()  # an all-CJK title needs no word sequence


def title_word_keys(seq: tuple[str | None, ...], fold: Callable[[str], str] = fold) -> set[str]:
    """The keys a title's words answer to: each folded word, and the letter part of a mixed
    word (iphone15 is found by iphone), folded by `fold`."""
    keys: set[str] = set()
    for w in seq:
        if w is None or len(w) < MIN_WORD_CHARS:
            continue
        keys.add(w)
        if not w.isalpha():
            keys.update(fold(p) for p in _ALPHA_PARTS.findall(w) if len(p) >= MIN_WORD_CHARS)
    return keys


# -- English stemming for weighted recall (Snowball English, irregular forms) ---------------


_stem_cache: dict[str, str] = {}


@functools.cache
def _stemmer() -> Any:
    """Snowball's English stemmer, made on first use."""
    import snowballstemmer

    return snowballstemmer.stemmer("english")


def stem(word: str) -> str:
    """Weighted recall's English folding of one normalized word: irregular forms to their
    base (went → go, bought → buy, children → child), then the Snowball English stemmer
    (travelling → travel, studies → studi, longer → longer); words of fewer than 3 ASCII
    letters, other scripts, digits and the few words a stemmer would turn into another word
    (longing, evening, news: `STEM_KEEP`) are kept as they are. Deterministic."""
    out = _stem_cache.get(word)
    if out is None:
        base = IRREGULAR.get(word, word)
        if base in STEM_KEEP or len(base) < 3 or not _ASCII_WORD.fullmatch(base):
            return base  # worked out in less time than a cache entry would save: not kept (a
            # Memory's numbers and ids, "#1" to "#100000", filled the cache with 10 MiB)
        out = _stemmer().stemWord(base)
        if len(_stem_cache) < 200_000:
            _stem_cache[word] = out
    return out


@functools.lru_cache(maxsize=1 << 16)
def stem_key(term: str) -> str:
    """`term_key` for weighted recall: a CJK-bearing term by its normalized text, any other
    by its stemmed whole words joined by one space."""
    norm = match_form(term).strip()
    if has_cjk(norm):
        return norm
    return " ".join(stem(w) for w in latin_words(norm))


@functools.lru_cache(maxsize=4096)
def stem_seq(norm_title: str) -> tuple[str | None, ...]:
    """`title_seq` with stems (weighted recall): the title's non-CJK words stemmed, in order."""
    seq = tuple(None if cjk else stem(run) for cjk, run in runs(norm_title))
    return seq if any(seq) else ()


def stem_word_keys(seq: tuple[str | None, ...]) -> set[str]:
    """`title_word_keys` for a stemmed word sequence (letter parts of mixed words stemmed)."""
    return title_word_keys(seq, stem)


def cjk_count(text: str) -> int:
    return len(_CJK_CHAR.findall(text))


# -- jieba ----------------------------------------------------------------------------


def tokenizer() -> Any:
    """The process-wide jieba tokenizer (TextAnalyzer.tokenizer)."""
    return analyzer.tokenizer()


def _import_jieba() -> Any:
    """import jieba, without the pkg_resources it would import only to find its own
    dictionary file (some 80 ms of a start); it then opens the file by its path."""
    import sys

    if "jieba" in sys.modules or "pkg_resources" in sys.modules:
        import jieba
        return jieba
    sys.modules["pkg_resources"] = None  # type: ignore[assignment]  # ImportError inside jieba._compat
    try:
        import jieba
    finally:
        del sys.modules["pkg_resources"]
    return jieba


JIEBA_CACHE_MAGIC = b"zcor jieba prefix dictionary 1\n"
"""Layout: this line, one JSON line (what it was built from, counts, checksum), then the
prefix dictionary's words joined by newlines (UTF-8) and their frequencies (4 bytes each)."""


def jieba_cache_path() -> Path | None:
    """Where zcor keeps jieba's prefix dictionary (instead of jieba's own /tmp/jieba.cache,
    which any local user could plant): $ZCOR_CACHE_DIR, else systemd's $CACHE_DIRECTORY
    (CacheDirectory=), else $XDG_CACHE_HOME/zcor, else ~/.cache/zcor; one file per jieba
    version. ZCOR_CACHE_DIR=off: no cache (built each time)."""
    import jieba

    where = os.environ.get("ZCOR_CACHE_DIR") or os.environ.get("CACHE_DIRECTORY", "").split(":")[0]
    if where == "off":
        return None
    if not where:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        where = os.path.join(base, "zcor")
    if not os.path.isabs(where):
        return None
    return Path(where) / f"jieba-{jieba.__version__}.cache"


def _jieba_dict_stamp(tok: Any) -> dict[str, Any]:
    """What the prefix dictionary is derived from: jieba's dictionary file (size, time, checksum)."""
    import jieba

    path = os.path.join(os.path.dirname(jieba.__file__), jieba.DEFAULT_DICT_NAME) if tok.dictionary is None \
        else tok.dictionary
    with open(path, "rb") as f:
        data = f.read()
    st = os.stat(path)
    return {"jieba": jieba.__version__, "dict": str(path), "size": len(data), "mtimeNs": st.st_mtime_ns,
            "crc": zlib.crc32(data)}


def _read_jieba_cache(tok: Any) -> tuple[dict[str, int], int] | None:
    """(FREQ, total) from the cache when it is ours (owned by this user, not writable by others,
    not a link) and was built from jieba's dictionary as it is now; None otherwise."""
    path = jieba_cache_path()
    if path is None:
        return None
    got = read_derived(path, JIEBA_CACHE_MAGIC, owner_only=True)
    if got is None:
        return None
    header, payload = got
    try:
        if header.get("stamp") != _jieba_dict_stamp(tok):
            return None
        count = header.get("entries")
        words_len = header.get("wordsBytes")
        if type(count) is not int or type(words_len) is not int or len(payload) != words_len + 4 * count:
            return None
        words = payload[:words_len].decode().split("\n")
        freqs = array("I", payload[words_len:])
        if len(words) != count or len(freqs) != count:
            return None
        return dict(zip(words, freqs.tolist())), header["total"]
    except (OSError, ValueError, TypeError, EOFError, AttributeError):
        return None


def _write_jieba_cache(tok: Any) -> None:
    """Cache the prefix dictionary just built (atomically; a failure only costs the next start time)."""
    path = jieba_cache_path()
    if path is None:
        return
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if any("\n" in w for w in tok.FREQ) or not 0 <= min(tok.FREQ.values()) <= max(tok.FREQ.values()) < 2**32:
            return  # not a dictionary this layout can hold
        words = "\n".join(tok.FREQ).encode()
        payload = words + array("I", tok.FREQ.values()).tobytes()
        header = {"stamp": _jieba_dict_stamp(tok), "entries": len(tok.FREQ), "wordsBytes": len(words),
                  "total": tok.total, "payloadCrc": zlib.crc32(payload)}
        atomic_write(path, [JIEBA_CACHE_MAGIC, json.dumps(header).encode() + b"\n", payload], mode=0o600,
                     sync=False)
    except OSError as e:
        logging.getLogger(__name__).warning("could not write jieba's dictionary cache %s (%s)", path, e)


def add_user_words(words: Iterable[str]) -> None:
    """Teach jieba words it must keep whole (TextAnalyzer.add_user_words)."""
    analyzer.add_user_words(words)


def _all_cjk(word: str) -> bool:
    return all(_CJK_CHAR.match(ch) for ch in word)


def _known(tok: Any, word: str) -> bool:
    return analyzer.known(tok, word)


def _crosses_dictionary_word(tok: Any, run: str, start: int, end: int) -> bool:
    """True when a dictionary word of the run straddles an edge of run[start:end]
    (做后 in 做后端: 后端 straddles its end)."""
    for edge in (start, end):
        for i in range(max(0, edge - 3), edge):
            for j in range(edge + 1, min(len(run), i + 4) + 1):
                if _known(tok, run[i:j]):
                    return True
    return False


_NON_CJK = re.compile(f"[^{_CJK}]+")


def _guesses(tok: Any, text: str, pos: int, stretch: str, words: list[tuple[int, str]]) -> None:
    """Words in a stretch of single characters the dictionary cut left at text[pos:]: jieba's
    HMM guesses for unknown words (阿珍) unless a guess crosses a dictionary word (做后 in
    做后端) or starts or ends with a function character; then dictionary words the cut
    passed over for likelier single characters (后端 in 做后端)."""
    from jieba import finalseg

    taken = [False] * len(stretch)
    off = 0
    for guess_word in finalseg.cut(stretch):
        a = off
        off += len(guess_word)
        if (len(guess_word) >= MIN_WORD_CHARS and guess_word[0] not in _FUNCTION_CHARS
                and guess_word[-1] not in _FUNCTION_CHARS
                and not _crosses_dictionary_word(tok, text, pos + a, pos + off)):
            words.append((pos + a, guess_word))
            taken[a:off] = [True] * len(guess_word)
    i = 0
    while i < len(stretch) - 1:
        for n in (4, 3, 2):
            piece = stretch[i:i + n]
            if len(piece) == n and not any(taken[i:i + n]) and tok.FREQ.get(piece) \
                    and piece[0] not in _FUNCTION_CHARS and piece[-1] not in _FUNCTION_CHARS:
                words.append((pos + i, piece))
                i += n - 1
                break
        i += 1


def analyse(text: str, guess: bool = True, hmm: bool = True) -> tuple[list[str], list[str]]:
    """The words of at least two characters in text, in order of appearance, and the CJK
    characters that stand alone in its cut and may carry a topic (腿 in 王小二的腿好了吗).

    CJK is cut by jieba without HMM (every synonym term and keyword is a user word), in one
    call over the text with everything else blanked out; every other run of letters and
    digits is one whole word. With `guess`, the single characters the cut leaves are looked
    at again: nicknames (小李, 老张 in 老/张家, 李哥) and, with `hmm`, unknown words
    (`_guesses`; keyword derivation uses it, recall need not: the Memory's keywords are
    user words already).
    """
    tok = tokenizer()
    found: list[tuple[int, str]] = [(m.start(), m.group(2)) for m in _RUNS.finditer(text)
                                    if m.group(2) is not None and len(m.group(2)) >= MIN_WORD_CHARS]
    singles: dict[str, None] = {}
    masked = _NON_CJK.sub(lambda m: " " * len(m.group()), text)  # keeps every position
    tokens = _cut(tok, masked) if masked.strip() else []
    pos = 0
    k = 0
    n = len(tokens)
    while k < n:
        w = tokens[k]
        if len(w) >= MIN_WORD_CHARS:
            found.append((pos, w))
            pos += len(w)
            k += 1
            continue
        if w == " " or not _CJK_CHAR.match(w):
            pos += len(w)
            k += 1
            continue
        # a stretch of single CJK characters
        j = k
        while j < n and len(tokens[j]) == 1 and tokens[j] != " " and _CJK_CHAR.match(tokens[j]):
            j += 1
        stretch = "".join(tokens[k:j])
        names = _unknown_names(tokens, k, j)
        for kk in range(k, j):
            ch = tokens[kk]
            if kk in names:
                if guess and names[kk]:
                    found.append((pos + kk - k, names[kk]))
                continue
            if ch not in SINGLE_STOP:
                singles[ch] = None
            if guess:
                nxt = tokens[kk + 1] if kk + 1 < n else ""
                if (ch in NAME_PREFIXES and nxt[:1] in SURNAMES) or \
                        (ch in SURNAMES and len(nxt) == 1 and nxt in NAME_SUFFIXES):
                    found.append((pos + kk - k, ch + nxt[0]))
        if guess and hmm and j - k >= 2:
            _guesses(tok, masked, pos, stretch, found)
        pos += len(stretch)
        k = j
    found.sort(key=lambda pw: pw[0])
    return list(dict.fromkeys(w for _, w in found)), list(singles)


def _unknown_names(tokens: list[str], k: int, j: int) -> dict[int, str]:
    """The lone characters of tokens[k:j] that spell a full name the dictionary does not
    know: a surname followed by two lone characters that are neither particles nor common
    verbs (陈/奕/迅 in 陈奕迅的新歌). Maps each one's index to the name at its first
    character ("" for the others). A bare surname is no topic: 陈 must not find 陈姐."""
    out: dict[int, str] = {}
    kk = k
    while kk + 2 < j:
        a, b, c = tokens[kk], tokens[kk + 1], tokens[kk + 2]
        if a in SURNAMES and b not in SINGLE_STOP and c not in SINGLE_STOP \
                and b not in _FUNCTION_CHARS and c not in _FUNCTION_CHARS:
            out[kk], out[kk + 1], out[kk + 2] = a + b + c, "", ""
            kk += 3
        else:
            kk += 1
    return out


_PIECES = re.compile(" +|[^ ]+")
RUN_CUTS_MAX = 50_000
"""CJK runs whose cut is kept (a dialogue repeats its phrases; cutting one costs about 2 µs
per character in jieba's Python code)."""
RUN_CUTS_CHARS = 2_000_000
"""The kept runs hold at most this many characters in all (a bot cannot grow it without bound)."""
RUN_CUT_TEXT = 4_096
"""A run longer than this is cut every time, never kept."""


def _cut(tok: Any, masked: str) -> list[str]:
    """tok.lcut(masked, HMM=False), the same tokens, with each CJK run's cut kept (TextAnalyzer.cut)."""
    return analyzer.cut(tok, masked)


ANALYSE_CACHE_ENTRIES = 4096
ANALYSE_CACHE_CHARS = 2_000_000
"""The segmentation cache keeps at most this many characters of text in all (its answers
take a few times more), the least recently used dropped first."""
ANALYSE_CACHE_TEXT = 32_768
"""A text longer than this is cut every time, never kept (a bot's messages are shorter)."""


class _AnalyseCache:
    """`analyse` with its answers kept for recently seen texts: a bot's batches repeat the
    dialogue so far, so most messages have been cut before. Bounded by count and by the
    characters it holds; cleared when jieba learns a word."""

    def __init__(self) -> None:
        self._items: collections.OrderedDict[tuple[str, bool, bool], tuple[tuple[str, ...], tuple[str, ...]]] = \
            collections.OrderedDict()
        self.chars = 0
        self._lock = threading.Lock()

    def __call__(self, text: str, guess: bool, hmm: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
        key = (text, guess, hmm)
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
                return found
        words, singles = analyse(text, guess, hmm)
        out = (tuple(words), tuple(singles))
        if len(text) > ANALYSE_CACHE_TEXT:
            return out
        with self._lock:
            if key not in self._items:
                self._items[key] = out
                self.chars += len(text)
                while self._items and (len(self._items) > ANALYSE_CACHE_ENTRIES or self.chars > ANALYSE_CACHE_CHARS):
                    (old, _, _), _ = self._items.popitem(last=False)
                    self.chars -= len(old)
        return out

    def cache_clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.chars = 0

    def __len__(self) -> int:
        return len(self._items)


def segment(text: str, hmm: bool = True) -> list[str]:
    """Words of at least two characters in text, in order, as they appear (not normalized);
    `hmm` turns the guesses for nicknames and unknown words on (see `analyse`)."""
    return analyse(text, guess=hmm)[0]


_LIGHT_FOLDED = frozenset(fold(w) for w in LIGHT_WORDS if _ASCII_WORD.fullmatch(w))
_KEYWORD_LIGHT_FOLDED = frozenset(fold(w) for w in KEYWORD_LIGHT if _ASCII_WORD.fullmatch(w))


def is_stopword(key: str) -> bool:
    """Whether a normalized word is a function word."""
    return key in STOPWORDS


def is_light(key: str) -> bool:
    """Whether a normalized word is chat filler: light words, and their inflected forms."""
    return key in LIGHT_WORDS or (key not in STOPWORDS and fold(key) in _LIGHT_FOLDED)


def is_light_term(term: str) -> bool:
    """`is_light` for a synonym term: a phrase of several words is filler when each of its
    words is a function word or filler (`good night`, `see you`)."""
    if is_light(term):
        return True
    if " " not in term:
        return False
    words = latin_words(term)
    return len(words) > 1 and not has_cjk(term) and all(is_stopword(w) or is_light(w) for w in words)


@functools.lru_cache(maxsize=1 << 14)
def compound_parts(word: str) -> tuple[str, ...]:
    """The parts of a CJK compound that it is about (weighted recall, issue 37): its head when
    the compound is a kind of it (医院 in 宠物医院, 冰箱 in 电冰箱), or its first part when
    the compound is a product made of it (花生 in 花生酱, 芒果 in 芒果汁: the head is one of
    `lexicon.PRODUCT_HEADS`). A part that only modifies the head is not (茶叶 in 茶叶蛋, 宠物
    in 宠物医院). The two parts are the likeliest cut of the word in two by jieba's word
    frequencies; a part has at least two characters; a head whose modifier is a function
    word or chat filler (今天天气) is none; words of fewer than three characters, and words
    with other letters, have none."""
    if len(word) < 3 or not _all_cjk(word):
        return ()
    freq = tokenizer().FREQ
    best, at = 0.0, 0
    for k in range(1, len(word)):  # the likeliest cut in two, as jieba weighs words
        a, b = freq.get(word[:k]), freq.get(word[k:])
        if a and b and a * b > best:
            best, at = a * b, k
    if not at:
        return ()
    first, head = word[:at], word[at:]
    if len(head) >= MIN_WORD_CHARS:
        # 今天天气 is chat about now, not about the weather
        return () if first in STOPWORDS or is_light(first) else (head,)
    return (first,) if head in PRODUCT_HEADS and len(first) >= MIN_WORD_CHARS else ()


def _kind_key(word: str) -> str:
    """How kinds_of compares words: English ones by their light fold (pets → pet), each word
    of a phrase; others as they are."""
    return " ".join(fold(w) for w in word.split(" ")) if word.isascii() else word


def kinds_of(word: str) -> tuple[str, ...]:
    """The words related to a normalized word by kind (zcord/core/kinds.py: WordNet 3.0 for
    English, a hand-written table for Chinese): the kinds of a category (家电 → 洗衣机, pet
    → cat) and the categories of a kind (shrimp → shellfish). English words are looked up
    by their light fold (pets → pet). The table is read on first use (some 20 ms)."""
    return _kinds_table().get(_kind_key(word), ())


@functools.cache
def _kinds_table() -> dict[str, tuple[str, ...]]:
    """zcord/core/kinds.py's table by `_kind_key`, read on first use."""
    from .kinds import TABLE

    table: dict[str, tuple[str, ...]] = {}
    for line in TABLE.splitlines():
        word_, _, related = line.partition("\t")
        key = _kind_key(word_)
        old = table.get(key)
        table[key] = tuple(related.split("|")) if old is None else tuple(dict.fromkeys([*old, *related.split("|")]))
    return table


LONE_CACHE_ENTRIES = 10_000


RARE_PAIR_FREQ = 20
"""A two-character dictionary word jieba's corpus saw fewer times than this (狗叫 and 猫叫 3
times, 买车 3; 戒烟 133, 干净 1,860) is two words glued by the cut rather than a compound: both
its characters head a word for the lone-character rule below. User words (synonym terms,
keywords) are never rare (USER_WORD_FREQ)."""


def head_chars(norm_title: str) -> str:
    """The CJK characters a title's words end with, in its cut (TextAnalyzer.head_chars)."""
    return analyzer.head_chars(norm_title)


def derive_keywords(title: str) -> list[str]:
    """Keywords for a node whose writer gave none: the title's words without function words
    and chat filler, names kept whole, first occurrence kept."""
    seen: set[str] = set()
    keywords = []
    text = unicodedata.normalize("NFKC", title)
    folded = fold_han(text)  # jieba cuts Simplified best; the keywords keep the title's characters
    for word in segment(folded):
        if folded is not text:
            at = folded.find(word)
            word = text[at:at + len(word)]
        key = match_form(word)
        if key in seen or is_stopword(key) or (key.isdigit() and len(key) < 4) or key in KEYWORD_LIGHT \
                or (key not in STOPWORDS and fold(key) in _KEYWORD_LIGHT_FOLDED):
            continue
        seen.add(key)
        keywords.append(word)
    return keywords


# -- the process's jieba state ----------------------------------------------------------------


class TextAnalyzer:
    """jieba's dictionary as zcor uses it and what is kept from cutting with it: the tokenizer
    (loaded on first use), the user words taught to it and the corpus frequencies they
    replaced, the kept cuts of CJK runs, the head characters of recent titles and the
    `analyse` answers kept for recent texts. One per process (`analyzer`): jieba's dictionary
    is process-wide. The module's functions (`tokenizer`, `add_user_words`, `head_chars`,
    `analyse_cached`) are this object's; `lock` guards the tokenizer and the user words."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tok: Any = None
        self.user_words: set[str] = set()
        self.corpus_freq: dict[str, int] = {}  # user words jieba's corpus knew: their corpus frequency
        self.run_cuts: dict[str, list[str]] = {}
        self.run_cuts_chars = 0
        # the dictionary the kept cuts were made with: its FREQ (held, so never mistaken for a
        # later one at the same address), total and size
        self._run_cuts_for: tuple[dict[str, int], int, int] | None = None
        self.lone: dict[str, str] = {}  # head_chars of recent titles
        self.analysed = _AnalyseCache()

    def forget(self) -> None:
        """Forget the tokenizer and the user words (the next use loads jieba's dictionary again)."""
        with self.lock:
            self.tok = None
            self.user_words.clear()

    def tokenizer(self) -> Any:
        """The process-wide jieba tokenizer, initialised on first use: its prefix dictionary
        from zcor's own cache of it (`jieba_cache_path`, about 0.3 s), else built from jieba's
        dictionary (about a second) and cached for the next process."""
        if self.tok is None:
            with self.lock:
                if self.tok is None:
                    jieba = _import_jieba()
                    jieba.setLogLevel(logging.WARNING)
                    tok = jieba.Tokenizer()
                    loaded = _read_jieba_cache(tok)
                    if loaded is None:
                        tok.FREQ, tok.total = tok.gen_pfdict(tok.get_dict_file())
                        _write_jieba_cache(tok)
                    else:
                        tok.FREQ, tok.total = loaded
                    tok.initialized = True
                    self.tok = tok
        return self.tok

    def add_user_words(self, words: Iterable[str]) -> None:
        """Teach jieba words it must keep whole (synonym terms, node keywords, people's names).

        Only all-CJK words: jieba only ever sees CJK runs (other words are cut by `runs`)."""
        tok = self.tokenizer()
        added = False
        with self.lock:
            for word in words:
                word = word.strip()
                if len(word) < MIN_WORD_CHARS or word in self.user_words or not _all_cjk(word):
                    continue
                self.user_words.add(word)
                prior = tok.FREQ.get(word) or 0
                if 0 < prior < USER_WORD_FREQ:
                    self.corpus_freq[word] = prior  # what jieba's corpus says of it (head_chars asks)
                tok.add_word(word, freq=max(prior, USER_WORD_FREQ))
                added = True
        if added:
            self.analysed.cache_clear()  # a new word can change how known texts are cut
            compound_parts.cache_clear()  # … and where a compound's likeliest cut in two is

    def known(self, tok: Any, word: str) -> bool:
        """Whether word is in tok's dictionary or a user word."""
        return bool(tok.FREQ.get(word)) or word in self.user_words

    def cut(self, tok: Any, masked: str) -> list[str]:
        """tok.lcut(masked, HMM=False), the same tokens, with each CJK run's cut kept: jieba
        cuts the blocks between spaces independently (a space is one token of its own), so a
        run cut alone gives the words it gives inside the text. The kept cuts belong to the
        dictionary as it was (which one, its total and size): when jieba learns a word they are
        dropped."""
        freq = tok.FREQ
        generation = (freq, tok.total, len(freq))
        cache = self.run_cuts
        kept_for = self._run_cuts_for
        if kept_for is None or kept_for[0] is not freq or kept_for[1:] != generation[1:]:
            cache.clear()
            self.run_cuts_chars = 0
            self._run_cuts_for = generation
        out: list[str] = []
        for m in _PIECES.finditer(masked):
            piece = m.group()
            if piece[0] == " ":
                out.extend(piece)
                continue
            words = cache.get(piece)
            if words is None:
                words = tok.lcut(piece, HMM=False)
                if len(piece) <= RUN_CUT_TEXT and tok.FREQ is freq and (tok.total, len(freq)) == generation[1:]:
                    if len(cache) >= RUN_CUTS_MAX or self.run_cuts_chars + len(piece) > RUN_CUTS_CHARS:
                        cache.clear()
                        self.run_cuts_chars = 0
                    cache[piece] = words
                    self.run_cuts_chars += len(piece)
            out.extend(words)
        return out

    def rare_pair(self, tok: Any, word: str) -> bool:
        """Whether jieba's own corpus (not a user word's frequency: a derived keyword such as
        狗叫 becomes one) hardly knows the word; a user word the corpus lacks is never rare."""
        freq = self.corpus_freq.get(word) if word in self.user_words else tok.FREQ.get(word)
        return freq is not None and freq < RARE_PAIR_FREQ

    def head_chars(self, norm_title: str) -> str:
        """The CJK characters a title's words end with, in its cut (jieba, no HMM, as recall cuts
        messages): words of one character (猫 in 家里的猫叫年糕) and the last character of longer
        ones, the head of a Chinese compound (鸟 of 画眉鸟, 店 of 奶茶店) or the object of a verb
        (烟 of 戒烟), the verb before an aspect or result suffix (跑 of 跑过, 戒 of 戒掉:
        lexicon.VERB_SUFFIXES), and both characters of a rare pair (RARE_PAIR_FREQ: 狗 of 狗叫).
        A character that begins or is inside a word otherwise only
        modifies it: 干 is in none of 干净, 干洗店. Kept for the last titles asked."""
        lone = self.lone
        out = lone.get(norm_title)
        if out is None:
            tok = self.tokenizer()
            chars = []
            for _, run in runs(norm_title) if has_cjk(norm_title) else ():
                if not _CJK_CHAR.match(run):
                    continue
                for w in self.cut(tok, run):
                    if len(w) == 2 and self.rare_pair(tok, w) and _CJK_CHAR.match(w[0]):
                        chars.append(w[0])  # a pair jieba's corpus hardly knows: two words (狗 of 狗叫)
                    if _CJK_CHAR.match(w[-1]):
                        chars.append(w[-1])
                        if len(w) > 1 and w[-1] in VERB_SUFFIXES:
                            chars.append(w[-2])  # 跑 of 跑过: the verb heads a verb and its suffix
            out = "".join(sorted(set(chars)))  # a few characters: `ch in out` as for a set, in less memory
            if len(lone) >= LONE_CACHE_ENTRIES:
                lone.clear()
            lone[norm_title] = out
        return out


analyzer = TextAnalyzer()
analyse_cached = analyzer.analysed
"""`analyse` with its answers kept for recently seen texts (TextAnalyzer.analysed)."""
