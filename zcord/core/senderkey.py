"""The comparison form of a sender key, a personId or an alias (issue 33). No jieba, no
indexes: the client library and zcord.core.origin use it too."""

from __future__ import annotations

import functools
import unicodedata

# Characters that do not show but are not format characters (Cf): the combining grapheme
# joiner, Hangul fillers, Khmer inherent vowels, Mongolian variation selectors, variation
# selectors and tag characters. With every Cf character they are dropped from a sender key.
_IGNORABLE = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180e\u180f\u3164\uffa0"
                       + "".join(map(chr, range(0xFE00, 0xFE10))))


def _ignorable(ch: str) -> bool:
    return ch in _IGNORABLE or unicodedata.category(ch) == "Cf" or 0xE0000 <= ord(ch) <= 0xE0FFF


@functools.lru_cache(maxsize=8192)
def sender_key(text: str) -> str:
    """The one comparison form of a sender key, a personId or an alias (issue 33): NFKC,
    invisible and format characters (zero-width, joiners, bidi controls, fillers, variation
    selectors) dropped, Unicode case folding, surrounding whitespace trimmed. `Ｍallory`,
    `MALLORY`, ` Mallory ` and `Mal\u2060lory` are all `mallory`. Trust levels, origins,
    review, undo by origin and speaker lines compare senders in this form only."""
    s = unicodedata.normalize("NFKC", text)
    if not s.isascii():
        s = "".join(ch for ch in s if not _ignorable(ch))
    s = s.casefold()
    if not s.isascii():
        s = unicodedata.normalize("NFKC", s)
    return s.strip()
