"""What the readers and the PNG reader share: the limits a memory has (the tools' limits,
zcord.service.inputs, which this package cannot import), and the error."""

from __future__ import annotations

from ..core.errors import InvalidArgument

MAX_TITLE = 200
MAX_CONTENT = 20_000
MAX_KEYWORD = 100
MAX_KEYWORDS = 50
MAX_SOURCE = 20_000
MAX_ID = 200
MAX_SHORT_TEXT = 2_000
MAX_ENTRIES = 20_000
"""Entries of one lorebook or World Info file (zcor's JSONL has no such limit: a whole Memory)."""
FORMATS = ("worldinfo", "card", "lorebook", "jsonl")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
JSONL_TYPE = "zcor-export"


class BadFile(InvalidArgument):
    """A file zcor cannot import: the message names the entry and the field."""

    def __init__(self, message: str, where: str = "data") -> None:
        super().__init__(f"{message}; nothing was imported.", field="data", data={"where": where})
