"""Lore files for the import tests, built here from the published formats (SillyTavern's
World Info entry template in public/scripts/world-info.js, Character Card V2 and V3, the
lorebook_v3 spec): nothing downloaded, nothing copied. PNG cards are made with Pillow."""

from __future__ import annotations

import base64
import io
import json
from typing import Any

from PIL import Image
from PIL.PngImagePlugin import PngInfo


def wi_entry(uid: int, keys: list[Any], content: str, comment: str = "", **extra: Any) -> dict[str, Any]:
    """A World Info entry with SillyTavern's defaults (newWorldInfoEntryTemplate)."""
    entry = {"uid": uid, "key": keys, "keysecondary": [], "comment": comment, "content": content,
             "constant": False, "vectorized": False, "selective": True, "selectiveLogic": 0, "addMemo": False,
             "order": 100, "position": 0, "disable": False, "excludeRecursion": False, "preventRecursion": False,
             "delayUntilRecursion": 0, "probability": 100, "useProbability": True, "depth": 4, "group": "",
             "groupOverride": False, "groupWeight": 100, "scanDepth": None, "caseSensitive": None,
             "matchWholeWords": None, "useGroupScoring": None, "automationId": "", "role": 0, "sticky": None,
             "cooldown": None, "delay": None, "displayIndex": uid}
    entry.update(extra)
    return entry


def world_info(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"entries": {str(e["uid"]): e for e in entries}}


def book_entry(keys: list[Any], content: str, **extra: Any) -> dict[str, Any]:
    """A lorebook entry (Character Card V2 character_book / lorebook_v3)."""
    entry = {"keys": keys, "content": content, "extensions": {}, "enabled": True, "insertion_order": 100,
             "use_regex": False, "constant": False}
    entry.update(extra)
    return entry


def card(entries: list[dict[str, Any]] | None, version: int = 2, name: str = "Aster",
         description: str = "A witch of the northern marsh.", personality: str = "Curious, blunt.",
         scenario: str = "A rainy evening at the inn.") -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": name, "description": description, "personality": personality, "scenario": scenario,
        "first_mes": "Hello.", "mes_example": "", "creator_notes": "", "system_prompt": "",
        "post_history_instructions": "", "alternate_greetings": [], "tags": [], "creator": "tests",
        "character_version": "1", "extensions": {}}
    if entries is not None:
        data["character_book"] = {"name": f"{name}'s book", "extensions": {}, "entries": entries}
    if version == 3:
        data.update(group_only_greetings=[], nickname=name)
        return {"spec": "chara_card_v3", "spec_version": "3.0", "data": data}
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": data}


def lorebook_v3(entries: list[dict[str, Any]], name: str = "Lore") -> dict[str, Any]:
    return {"spec": "lorebook_v3", "data": {"name": name, "extensions": {}, "entries": entries}}


def png_card(chunks: dict[str, dict[str, Any] | str], *, zip_chunk: bool = False, size: tuple[int, int] = (8, 8)) -> bytes:
    """A PNG with the given text chunks: a dict is written as SillyTavern does (base64 of its
    JSON), a str as it is."""
    info = PngInfo()
    for key, value in chunks.items():
        text = value if isinstance(value, str) else base64.b64encode(json.dumps(value).encode()).decode()
        info.add_text(key, text, zip=zip_chunk)
    buf = io.BytesIO()
    Image.new("RGB", size, (200, 120, 40)).save(buf, "PNG", pnginfo=info)
    return buf.getvalue()


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode()
