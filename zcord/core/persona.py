"""PERSONA.md, the persona text at the top of every system prefix: the template written on
first use and the rule that HTML comments are not part of the text."""

from __future__ import annotations

import re
from pathlib import Path

# What zcord writes as PERSONA.md on first use (never over an existing file). Everything in
# <!-- --> comments is left out of the prefix, so this template alone counts as empty.
PERSONA_TEMPLATE = """\
<!--
PERSONA.md: who the bot is. zcord puts this file at the top of the system prefix it gives
the model on every request, with comments like this one left out; edits take effect at the
next request, no restart. Write it in the language the bot should speak, for example:

# 小雪

你是小雪，一个温柔、有点毒舌的猫娘，在“周末爬山”群里陪大家聊天。说话简短，句尾喜欢加“喵”。
你记得群友们的事，但不会主动翻旧账。

A first heading (# 小雪) names the bot: auto-recall then reads its name in a message as
the bot being spoken to ("谢谢小雪"), not as a topic.

While this file has nothing outside comments, the prefix starts with a neutral default
identity and `zcor status` warns that the persona is empty. Edit it here, or in zcor-tui
(Config screen, ctrl+e).
-->
"""
_COMMENT_RE = re.compile(r"<!--.*?(?:-->|\Z)", re.S)


def persona_text(raw: str) -> str:
    """PERSONA.md as the model gets it: HTML comments removed, surrounding blanks stripped."""
    return _COMMENT_RE.sub("", raw).strip()


def read_persona(path: Path) -> str:
    """The persona text of the file at path ('' when it is missing or only comments)."""
    try:
        return persona_text(path.read_text(encoding="utf-8", errors="replace"))
    except FileNotFoundError:
        return ""


# The bot's own name: the first level-one Markdown heading of PERSONA.md ("# Juniper"), up to
# the first comma, colon, dash or bracket ("# Juniper, a companion bot" → Juniper).
_HEADING_RE = re.compile(r"^#[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
_NAME_END_RE = re.compile(r"[,，:：;；(（\[【|/]| [-–—] ")


def persona_name(text: str) -> str:
    """The bot's name in a PERSONA.md text: its first `# heading` (comments left out) cut at
    the first comma, colon, dash or bracket; '' when it has no such heading."""
    m = _HEADING_RE.search(persona_text(text))
    if m is None:
        return ""
    return _NAME_END_RE.split(m.group(1), maxsplit=1)[0].strip()


class PersonaName:
    """persona_name of a PERSONA.md file, read again only when the file changes (size,
    modification time or inode: an atomic replace), so recall can ask for it on every batch."""

    def __init__(self, path: Path):
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self._name = ""

    def __call__(self) -> str:
        try:
            st = self.path.stat()
        except OSError:
            self._stamp, self._name = None, ""
            return ""
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp != self._stamp:
            self._name = persona_name(read_persona(self.path))
            self._stamp = stamp
        return self._name
