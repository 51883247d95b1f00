"""Memory text on a terminal: what zcor prints or draws never carries terminal controls.

A title, a reason or a synonym term is whatever a model or a bot wrote; printed raw, an
OSC 2 sets the window title, OSC 52 the clipboard, CSI 2J wipes the screen, and U+202E
turns the rest of a line around. The CLI (`zcor prefix`, `zcor context`…), `zcor chat` and
zcor-tui show such text through these functions, so C0/C1 controls and bidi overrides
and isolates appear as visible marks (`␛`, `\\u202e`) instead of acting on the terminal.

The same rule, in one place, decides which characters count:

- C0 controls (U+0000–U+001F) and DEL: shown as Control Pictures (`␛`, `␍`, `␡`), except
  a new line and a tab where the text is shown as text;
- C1 controls (U+0080–U+009F), bidi embeddings/overrides (U+202A–U+202E), isolates
  (U+2066–U+2069): shown as `\\uXXXX`.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

__all__ = ["UNSAFE", "shown", "json_shown", "invisible_marked"]

UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]|\t")
"""Every character a terminal would act on (or that reorders the line), tab and newline included."""


def _mark(ch: str) -> str:
    code = ord(ch)
    if code < 0x20:
        return chr(0x2400 + code)  # ␀ … ␟ (␉ for a tab, ␊ for a new line)
    if code == 0x7F:
        return "␡"
    return f"\\u{code:04x}"


def shown(text: Any, *, lines: bool = True) -> str:
    """The text with every terminal control made visible and harmless.

    Args:
        text: anything; None is "" and a non-string is `str()`-ed.
        lines: keep new lines and tabs (text printed as text); False marks them too (one
            line: a table cell, a tree label, a title).
    """
    if text is None:
        return ""
    if not isinstance(text, str):
        text = str(text)
    if lines:
        return UNSAFE.sub(lambda m: m.group() if m.group() in "\n\t" else _mark(m.group()), text)
    return UNSAFE.sub(lambda m: _mark(m.group()), text)


_JSON_UNSAFE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def json_shown(dumped: str) -> str:
    """JSON text (from `json.dumps(…, ensure_ascii=False)`) with C1 controls, DEL and bidi
    overrides written as `\\uXXXX` escapes: the same JSON value, nothing a terminal acts on
    (json.dumps already escapes C0 controls; these it leaves raw)."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", dumped)


# Characters that do not show, or that NFKC folds into another: two personIds that differ
# only by them look identical on a screen.
_INVISIBLE = re.compile("[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
                        "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\U000e0000-\U000e0fff]")


def invisible_marked(text: str) -> str:
    """An id with its invisible characters and its compatibility characters (those NFKC
    changes: full-width letters, ligatures, superscripts) made visible as `⟨U+XXXX⟩`, so two
    ids that look alike can be told apart. Controls are marked as by `shown`."""
    out: list[str] = []
    for ch in text:
        if UNSAFE.match(ch):
            out.append(_mark(ch))
        elif _INVISIBLE.match(ch) or (ord(ch) > 0x7F and unicodedata.normalize("NFKC", ch) != ch):
            out.append(f"⟨U+{ord(ch):04X}⟩")
        else:
            out.append(ch)
    return "".join(out)
