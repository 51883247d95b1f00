"""The fence (issue 22): how Memory text is put in front of a model so that it cannot forge
structure. Pure functions (and one memo of fenced memories, `fenced_node`), no I/O.

Memory and relationship text is chat text that anyone in a group may have shaped. Wherever
zcor shows it to a model (the context header, the system prefix, the MCP prompt and
resources) it goes through this module:

- an entry's first line is written by zcor only: ``[id] title``, the title forced onto that
  one line (each line break shown as ``⏎``);
- every line of its text begins with the fence mark ``│`` (``│ `` and the line, or ``│``
  alone for an empty line), so no memory line starts at column 0 and none can read as
  another entry, a ``## heading`` or one of zcor's ``[…]`` notes;
- every line break a program might honour (CR, LF, CRLF, VT, FF, FS, GS, RS, NEL, U+2028,
  U+2029) is one of the text's lines, other control characters are shown as their pictures
  (``␛``) or ``{U+0090}``;
- a reserved marker (``RESERVED_MARKERS``: HTML comments, so the AstrBot plugin's
  ``<!-- zcor memory -->`` block, and chat-template tokens) found in the text, also once
  look-alikes are folded (NFKD compatibility forms such as full-width ``＜``, zero-width and
  format characters and combining marks dropped, case folded, ``CONFUSABLES`` mapped), is
  broken visibly by a ``·`` after its first character: ``<!--`` becomes ``<·!--``.

docs/reference.md ("Fenced memory text") gives the grammar; `split_entries` parses it.
"""

from __future__ import annotations

import json
import re
import unicodedata
from functools import lru_cache
from typing import Any

FENCE = "│"                 # begins every line of an entry's text
TITLE_BREAK = "⏎"           # a line break inside a title (or a label)
BREAK = "·"                 # inserted into a reserved marker found in memory text

# Markers that memory text may never contain, after folding (see `fold`). Front ends declare
# theirs here: the AstrBot plugin's block markers (contrib/astrbot), any HTML comment, and
# chat-template special tokens such as <|im_start|>. Each contains "<" or ">" (checked below),
# which keeps text without either cheap to check.
RESERVED_MARKERS: tuple[str, ...] = (
    "<!-- zcor memory", "<!-- /zcor memory",   # contrib/astrbot/astrbot_plugin_zcor/main.py
    "<!--", "-->",                             # any HTML-comment-like marker
    "<|", "|>",                                # chat-template tokens
)
assert all("<" in m or ">" in m for m in RESERVED_MARKERS)

# Look-alikes that NFKD leaves alone, mapped to the character they imitate.
CONFUSABLES = str.maketrans({
    **dict.fromkeys("‹❮〈⟨〈˂ᐸ≺⟪《", "<"),
    **dict.fromkeys("›❯〉⟩〉˃ᐳ≻⟫》", ">"),
    **dict.fromkeys("‐‑‒–—―−⁃﹘﹣－˗➖ー─━⎯⸺⸻", "-"),
    **dict.fromkeys("ǃ！﹗ⵑꜝ", "!"),
    **dict.fromkeys("∣ǀ׀│┃❘￨⏐｜", "|"),
})
# Every character whose fold contains "<" or ">" (tests/unit/test_fence.py checks this
# against all of Unicode): text without any of them cannot hold a reserved marker.
TRIGGERS = "<>≮≯﹤﹥＜＞\u2329\u232a⊀⊁︽︾︿﹀" + "".join(chr(c) for c, t in CONFUSABLES.items() if t in "<>")
_TRIGGER = re.compile("[" + re.escape(TRIGGERS) + "]")

# Line breaks: CRLF counts as one. str.splitlines() splits at exactly these (and CRLF).
LINE_BREAK = re.compile(r"\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f]")
_DROPPED = frozenset(("Cf", "Mn", "Me"))


def _control(m: re.Match[str]) -> str:
    c = ord(m.group())
    if c < 0x20:
        return chr(0x2400 + c)   # ␀ … ␟
    if c == 0x7F:
        return "␡"
    return f"{{U+{c:04X}}}"


@lru_cache(maxsize=4096)
def fold(ch: str) -> str:
    """One character as the marker check sees it: NFKD, format characters (zero-width,
    joiners, bidi controls) and combining marks dropped, case folded, look-alikes mapped."""
    if unicodedata.category(ch) in _DROPPED:
        return ""
    s = unicodedata.normalize("NFKD", ch)
    if len(s) > 1 or s != ch:
        s = "".join(c for c in s if unicodedata.category(c) not in _DROPPED)
    return s.casefold().translate(CONFUSABLES)


def _skeleton(text: str) -> tuple[str, list[int]]:
    """The folded text and, for each of its characters, the index of the one it came from."""
    out: list[str] = []
    owner: list[int] = []
    for i, ch in enumerate(text):
        f = fold(ch)
        out.append(f)
        owner.extend([i] * len(f))
    return "".join(out), owner


_MARKER = re.compile("|".join(re.escape(m) for m in sorted(RESERVED_MARKERS, key=len, reverse=True)))
_REACH = max(map(len, RESERVED_MARKERS))


def _reach(text: str, i: int, step: int, stop: int) -> int:
    """The index `step` by `step` from i at which _REACH - 1 folded characters are passed."""
    n, j = 0, i
    while n < _REACH - 1:
        k = j + step
        if not stop <= k < len(text):
            break
        j = k
        n += len(fold(text[j]))
    return j


def _windows(text: str) -> list[tuple[int, int]]:
    """Disjoint spans of text holding every place a marker could be: a marker holds a trigger
    and folds to at most _REACH characters, so it lies within that reach of its trigger."""
    spans: list[tuple[int, int]] = []
    for m in _TRIGGER.finditer(text):
        i = m.start()
        stop = spans[-1][1] if spans else 0
        lo, hi = _reach(text, i, -1, stop), _reach(text, i, 1, 0) + 1
        if spans and lo <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(hi, spans[-1][1]))
        else:
            spans.append((lo, hi))
    return spans


def _break_all(piece: str) -> str:
    for _ in range(len(piece) + 1):  # each round breaks new boundaries or shows new characters
        skeleton, owner = _skeleton(piece)
        edits: dict[int, bool] = {}  # index → True: BREAK after it; False: show its code
        for hit in _MARKER.finditer(skeleton):
            start, end = hit.span()
            first = owner[start]
            edits[first] = any(owner[k] != first for k in range(start + 1, end))
        if not edits:
            return piece
        out = []
        for i, ch in enumerate(piece):
            edit = edits.get(i)
            out.append(f"{{U+{ord(ch):04X}}}" if edit is False else ch + BREAK if edit else ch)
        piece = "".join(out)
    return _TRIGGER.sub(lambda m: f"{{U+{ord(m.group()):04X}}}", piece)  # not reached


def break_markers(text: str) -> str:
    """`text` with every reserved marker (after folding) broken by a visible `BREAK` after its
    first character (or, when one character folds to a whole marker, that character shown
    as its code). Only the windows around trigger characters are folded."""
    if not _TRIGGER.search(text):
        return text
    out, last = [], 0
    for lo, hi in _windows(text):
        out += [text[last:lo], _break_all(text[lo:hi])]
        last = hi
    out.append(text[last:])
    return "".join(out)


def neutralize(text: str) -> str:
    """Memory text made safe to quote: line breaks as "\\n", other controls shown, reserved
    markers broken. The lines of the result are what an entry's fenced lines carry."""
    if not text.isprintable():  # printable: no line break, no control character
        text = _CONTROL.sub(_control, LINE_BREAK.sub("\n", text))
    return break_markers(text)


def one_line(text: str) -> str:
    """A title (or a name) neutralized and forced onto one line."""
    return neutralize(text).replace("\n", TITLE_BREAK)


_FENCED: dict[int, tuple[Any, int | None, str, str]] = {}  # id(node) → (node, cap, title, content): nodes never change


def fenced_node(node: Any, cap: int | None = None) -> tuple[str, str]:
    """A memory's title (`one_line`) and content (`neutralize`; only its first `cap`
    characters when given), remembered per node object: a node is immutable (an edit makes a
    new one), so the header of an unchanged memory is not neutralized again."""
    hit = _FENCED.get(id(node))
    if hit is not None and hit[0] is node and hit[1] == cap:
        return hit[2], hit[3]
    content = node.content if cap is None or len(node.content) <= cap else node.content[:cap]
    title, content = one_line(node.title), neutralize(content)
    if len(_FENCED) >= 4096:
        _FENCED.clear()
    _FENCED[id(node)] = (node, cap, title, content)
    return title, content


def label(text: str, spaces: bool = False) -> str:
    """An id as it goes between the brackets of an entry's first line: one line, no brackets,
    and (unless `spaces`, for the part after "person ") no whitespace, shown as ␠."""
    if text.isascii() and text.isalnum():
        return text
    out = one_line(text).replace("[", "⁅").replace("]", "⁆")
    return out if spaces else re.sub(r"\s", "␠", out)


def quote(text: str) -> str:
    """Neutralized text as an entry's fenced lines, each after a newline ("" for "")."""
    if "\n" not in text:
        return "\n" + FENCE + " " + text if text else ""
    return "".join("\n" + (FENCE + " " + line if line else FENCE) for line in text.split("\n"))


def quoted_len(text: str) -> int:
    """len(quote(text)), without building it."""
    if "\n" not in text:
        return len(text) + 3 if text else 0
    lines = text.split("\n")
    return len(text) + len(lines) + 1 + sum(1 for line in lines if line)


def cut_quoted(text: str, n: int) -> str:
    """The longest head of neutralized `text` whose `quote` is at most `n` characters, a cut
    line ending in "…"."""
    if quoted_len(text) <= n:
        return text
    out: list[str] = []
    used = 0
    for line in text.split("\n"):
        cost = 2 + (len(line) + 1 if line else 0)
        if used + cost <= n:
            out.append(line)
            used += cost
            continue
        room = n - used - 3
        if room >= 1:
            out.append(line[:room - 1] + "…")
        break
    return "\n".join(out)


def cut(text: str, n: int) -> str:
    """One-line text cut to at most `n` characters, ending in "…" when cut."""
    if len(text) <= n:
        return text
    return "" if n <= 0 else text[:n - 1] + "…"


# An entry's first line: "[" id "] " title, the id being a memory's (no whitespace) or
# "person " and a personId; zcor's own bracketed lines always have a space inside.
ENTRY_LINE = re.compile(r"\[(person [^\[\]\n]+|[^\[\]\s]+)\] ([^\n]*)")


def split_entries(header: str) -> list[tuple[str, str, str]]:
    """The entries of a fenced header or prefix section, as (id, title, text): the grammar of
    docs/reference.md. Blocks are separated by blank lines; a block whose first line is
    ``[id] title`` and whose other lines all begin with the fence mark is an entry; other
    blocks (zcor's own lines and notes) are skipped."""
    out = []
    for block in header.split("\n\n"):
        first, _, rest = block.partition("\n")
        m = ENTRY_LINE.fullmatch(first)
        lines = rest.split("\n") if rest else []
        if m is None or not all(ln == FENCE or ln.startswith(FENCE + " ") for ln in lines):
            continue
        out.append((m.group(1), m.group(2), "\n".join(ln[2:] for ln in lines)))
    return out


# -- every other path to the model (issue 33) --------------------------------------------------


def fence_tool_result(value: Any) -> Any:
    """A tool's result or error, as it goes back to a model: every string in it (at any
    depth; keys are zcor's own and left as they are) through `neutralize`, so memory text
    quoted by a read, a search, a receipt or an error message carries no reserved marker and
    no line break a program might honour other than "\\n". Numbers, booleans and null are
    kept. Idempotent: fencing a fenced result changes nothing.

    The one function every front end calls on what it hands back to a model: `MemoryBot.
    execute` (zcor chat), the MCP stdio bridge (`zcor mcp`, `fence_reply_line`), the
    OpenAI-compatible endpoint; zcord fences the search-filter prompt with it."""
    if isinstance(value, str):
        return neutralize(value) if not value.isascii() or _ASCII_RISK.search(value) else value
    if isinstance(value, dict):
        return {k: fence_tool_result(v) for k, v in value.items()}
    if isinstance(value, list):
        return [fence_tool_result(v) for v in value]
    return value


_ASCII_RISK = re.compile(r"[<>\x00-\x1f\x7f]")


def fence_reply_line(line: bytes) -> bytes:
    """One JSON-RPC message line from zcord to an MCP host (the stdio bridge): a tool call's
    result (`result.content` / `structuredContent`) and any error message fenced with
    `fence_tool_result`; other lines (prompts and resources carry fenced text already,
    notifications, lines that are not JSON) are passed on byte for byte."""
    body = line.rstrip(b"\r\n")
    if not body or (b'"content"' not in body and b'"error"' not in body):
        return line
    try:
        msg = json.loads(body)
    except ValueError:
        return line
    if not isinstance(msg, dict):
        return line
    result, error = msg.get("result"), msg.get("error")
    if isinstance(result, dict) and isinstance(result.get("content"), list):
        msg["result"] = fence_tool_result(result)
    elif isinstance(error, dict) and isinstance(error.get("message"), str):
        msg["error"] = {**error, "message": fence_tool_result(error["message"])}
    else:
        return line
    return json.dumps(msg, ensure_ascii=False).encode() + line[len(body):]
