"""Text normalization, segmentation and keyword derivation.

The one place that decides how zcor compares text (NFKC + Unicode case folding) and how
it cuts Chinese text into words (jieba, loaded once per process). Retrieval reuses it.
"""

from __future__ import annotations

import logging
import threading
import unicodedata
from collections.abc import Iterable

MIN_WORD_CHARS = 2
# A user word's jieba frequency: high enough to win over overlapping dictionary words
# ("小明说" → 小明/说, not 小/明说), the way a moderately common word would.
USER_WORD_FREQ = 20_000

_jieba_lock = threading.Lock()
_tokenizer = None
_user_words: set[str] = set()


def normalize(text: str) -> str:
    """The comparison form of text: NFKC, then Unicode case folding."""
    return unicodedata.normalize("NFKC", text).casefold()


def _is_wordlike(word: str) -> bool:
    """True when a token carries at least one letter, digit or CJK character."""
    return any(ch.isalnum() for ch in word)


def tokenizer():
    """The process-wide jieba tokenizer, initialised on first use (about a second)."""
    global _tokenizer
    if _tokenizer is None:
        with _jieba_lock:
            if _tokenizer is None:
                import jieba

                jieba.setLogLevel(logging.WARNING)
                tok = jieba.Tokenizer()
                tok.initialize()
                _tokenizer = tok
    return _tokenizer


def add_user_words(words: Iterable[str]) -> None:
    """Teach jieba words it must keep whole (synonym terms, node keywords)."""
    tok = tokenizer()
    with _jieba_lock:
        for word in words:
            word = word.strip()
            if len(word) < MIN_WORD_CHARS or word in _user_words or any(ch.isspace() for ch in word):
                continue
            _user_words.add(word)
            tok.add_word(word, freq=max(tok.FREQ.get(word) or 0, USER_WORD_FREQ))


def segment(text: str, hmm: bool = True) -> list[str]:
    """Words of at least two characters in text, in order, as they appear (not normalized).

    Args:
        hmm: let jieba guess words missing from its dictionary (slower; recall turns it off,
            since every keyword and synonym term is in the dictionary as a user word).
    """
    words = []
    for token in tokenizer().lcut(text, HMM=hmm):
        token = token.strip()
        if len(normalize(token)) >= MIN_WORD_CHARS and _is_wordlike(token):
            words.append(token)
    return words


def derive_keywords(title: str) -> list[str]:
    """Keywords for a node whose writer gave none: the title's words, first occurrence kept."""
    seen: set[str] = set()
    keywords = []
    for word in segment(title):
        key = normalize(word)
        if key not in seen:
            seen.add(key)
            keywords.append(word)
    return keywords
