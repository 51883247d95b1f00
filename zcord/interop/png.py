"""A character card inside a PNG: the `ccv3` (V3) or `chara` (V2) text chunk, base64 JSON.

The chunks are read by Pillow's PNG chunk reader, which checks every chunk's CRC, bounds
compressed text (a zTXt / iTXt chunk may not inflate past PngImagePlugin.MAX_TEXT_CHUNK, so
a decompression bomb is refused) and the text of the whole file (MAX_TEXT_MEMORY). The image
itself is never decoded: its data chunks are skipped, so a huge picture costs nothing.
"""

from __future__ import annotations

import base64
import binascii
import io
import struct
import zlib

from PIL import PngImagePlugin

from .common import PNG_MAGIC, BadFile

CARD_CHUNKS = ("ccv3", "chara")
"""The text chunks that hold a card, the one read first first (as SillyTavern does)."""
_TEXT = (b"tEXt", b"zTXt", b"iTXt")


def text_chunks(raw: bytes) -> dict[str, str]:
    """The PNG's text chunks (keyword → text), read up to IEND; BadFile for a broken file."""
    fp = io.BytesIO(raw)
    if fp.read(8) != PNG_MAGIC:
        raise BadFile("the file is not a PNG image")
    stream = PngImagePlugin.PngStream(fp)
    try:
        while True:
            cid, pos, length = stream.read()
            if cid == b"IEND":
                break
            if len(raw) - pos < length + 4:
                raise BadFile(f"the PNG is truncated: its {cid.decode('latin-1')} chunk at byte {pos} needs "
                              f"{length + 4:,} bytes and {max(0, len(raw) - pos):,} are left", "png")
            if cid in _TEXT:
                data = stream.call(cid, pos, length)
            else:
                data = raw[pos:pos + length]  # image data and the rest: not decoded
                fp.seek(pos + length)
            stream.crc(cid, data)
    except BadFile:
        raise
    except ValueError as e:  # Pillow's bounds on compressed text
        raise BadFile(f"the PNG's text is too large to read ({e}); a decompression bomb?", "png") from None
    except (SyntaxError, OSError, struct.error, EOFError, zlib.error) as e:
        raise BadFile(f"the PNG is broken or truncated ({e})", "png") from None
    return {k: str(v) for k, v in stream.im_text.items()}


def card_json(raw: bytes) -> str:
    """The card's JSON text from its PNG: `ccv3` first, else `chara` (keywords compared
    case-insensitively, as SillyTavern does)."""
    chunks = {k.lower(): v for k, v in text_chunks(raw).items()}
    for name in CARD_CHUNKS:
        if name in chunks:
            try:
                data = base64.b64decode("".join(chunks[name].split()), validate=True)
            except (binascii.Error, ValueError):
                raise BadFile(f"the PNG's {name} text chunk is not base64", f"png.{name}") from None
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError:
                raise BadFile(f"the PNG's {name} text chunk is not UTF-8 JSON", f"png.{name}") from None
    raise BadFile("the PNG holds no character card (no ccv3 or chara text chunk)", "png")
