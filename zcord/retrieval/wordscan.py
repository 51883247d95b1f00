"""Finding multi-word synonym terms (`ice cream`, a bot's 50-word phrase) in a sequence of
words in one pass: an Aho-Corasick automaton over whole words, so the cost is linear in the
text's words however long the terms are (issue 23 item 5: a words × term-length scan let one
1 MiB `a a a …` recall hold the daemon for half a minute).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable


class WordScanner:
    """The terms (tuples of words, each with the value to report) found in a word sequence.

    States are numbered; state 0 is the root. `steps` counts the transitions the last `scan`
    took (each goto and each failure link followed), for tests of its cost."""

    def __init__(self, terms: Iterable[tuple[tuple[str, ...], str]]):
        goto: list[dict[str, int]] = [{}]
        out: list[str | None] = [None]
        for words, value in terms:
            s = 0
            for w in words:
                nxt = goto[s].get(w)
                if nxt is None:
                    nxt = len(goto)
                    goto[s][w] = nxt
                    goto.append({})
                    out.append(None)
                s = nxt
            out[s] = value
        fail = [0] * len(goto)
        link = [0] * len(goto)  # the nearest proper suffix state that ends a term (0: none)
        queue = deque(goto[0].values())
        while queue:
            s = queue.popleft()
            for w, t in goto[s].items():
                queue.append(t)
                f = fail[s]
                while f and w not in goto[f]:
                    f = fail[f]
                g = goto[f].get(w, 0)
                fail[t] = g if g != t else 0
                link[t] = fail[t] if out[fail[t]] is not None else link[fail[t]]
        self._goto, self._fail, self._out, self._link = goto, fail, out, link
        self.steps = 0

    def __bool__(self) -> bool:
        return len(self._goto) > 1

    def scan(self, seq: Iterable[str | None], found: dict[str, None]) -> None:
        """Add to `found` (in order of first occurrence) every term occurring as consecutive
        words of seq; None in seq is a break no term crosses (a CJK run)."""
        goto, fail, out, link = self._goto, self._fail, self._out, self._link
        s = steps = 0
        for w in seq:
            steps += 1
            if w is None:
                s = 0
                continue
            while s and w not in goto[s]:
                s = fail[s]
                steps += 1
            s = goto[s].get(w, 0)
            t = s if out[s] is not None else link[s]
            # the terms ending here: a term already found had its shorter suffixes found with it
            while t and out[t] not in found:
                found[out[t]] = None  # type: ignore[index]  # t != 0: a state where a term ends (link skips the others)
                t = link[t]
                steps += 1
        self.steps = steps
