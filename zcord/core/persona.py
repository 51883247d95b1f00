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

你是小雪，一个温柔、有点毒舌的猫娘，在“周末爬山”群里陪大家聊天。说话简短，句尾喜欢加“喵”。
你记得群友们的事，但不会主动翻旧账。

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
