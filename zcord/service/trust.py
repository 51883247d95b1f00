"""Per-sender trust (issue 22): each chat sender's level, kept in `trust.json` in the Memory
directory, and what a level means for a change the bot makes on their behalf.

- `trusted`, `normal`: as if there were no levels.
- `untrusted`: a change they cause is applied but held for review (zcord.service.review).
- `blocked`: a change they cause is refused; their messages recall nothing.

A sender without a level of its own has the config's `defaultTrust` (default `normal`).
Senders are compared in one form only (zcord.core.text.sender_key: NFKC, invisible and
format characters dropped, case folded, trimmed): `MALLORY` and `Ｍallory` have mallory's
level, and trust.json keeps that form.

What an origin's levels mean (issue 33, zcord.service.judge.judge_origin):
the speaker's level counts as above; another sender only present in the batch at
`untrusted` or `blocked` makes a change held for review (or refused, for the kinds that
cannot be held) rather than refusing everyone's. An origin naming no sender (the bot
delivered no batch and told nothing) has the default level.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..core.errors import InvalidArgument, StateFileInvalid
from ..core.fsutil import atomic_write, read_nofollow
from ..core.origin import MAX_SENDER
from ..core.origin import senders as origin_senders
from ..core.senderkey import sender_key

TRUST_FILE = "trust.json"
LEVELS = ("trusted", "normal", "untrusted", "blocked")
_STRICTNESS = {level: i for i, level in enumerate(LEVELS)}
MAX_TRUST_FILE = 16 << 20


def read_small_file(path: Path, limit: int, hint: str) -> bytes | None:
    """A file of zcord's own in the Memory directory (no link followed, at most `limit`
    bytes), None when missing; StateFileInvalid naming it when it cannot be read."""
    try:
        return read_nofollow(path, limit)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise StateFileInvalid(f"{path.name} cannot be read ({getattr(e, 'strerror', None) or e}); fix it or "
                               f"remove it{hint}") from None


class TrustBook:
    """trust.json: `{"version": 1, "senders": {"qq:42": "untrusted", ...}}`, written atomically."""

    def __init__(self, path: Path):
        self.path = path
        self.levels: dict[str, str] = {}

    def load(self) -> None:
        """Read the file (missing: no levels). A file that does not parse stops zcord with a
        message naming it: silently trusting everyone would be worse."""
        raw = read_small_file(self.path, MAX_TRUST_FILE, "")
        if raw is None:
            self.levels = {}
            return
        try:
            doc = json.loads(raw)
            levels = doc["senders"]
            if doc.get("version") != 1 or not isinstance(levels, dict) or \
                    any(not isinstance(k, str) or v not in LEVELS for k, v in levels.items()):
                raise ValueError(f"expected {{\"version\": 1, \"senders\": {{sender: one of {', '.join(LEVELS)}}}}}")
        except (ValueError, KeyError, TypeError) as e:
            raise StateFileInvalid(f"{self.path.name} is not a valid trust file ({e}); fix it by hand or remove "
                                   f"it (every sender then has the defaultTrust level)") from None
        folded: dict[str, str] = {}
        for k, v in levels.items():  # a file written before issue 33 may hold other forms: the strictest wins
            key = sender_key(k)
            if key and (key not in folded or _STRICTNESS[v] > _STRICTNESS[folded[key]]):
                folded[key] = v
        self.levels = folded

    def level(self, sender: str, default: str) -> str:
        return self.levels.get(sender_key(sender), default) if self.levels else default

    def rank(self, sender: str, default: str) -> int:
        """How strict a sender's level is (higher: stricter)."""
        return _STRICTNESS[self.level(sender, default)]

    def judge(self, origin: Any, default: str) -> tuple[str, list[str]]:
        """The strictest level among an origin's senders, and the senders at that level (an
        origin without senders: the default level)."""
        who = origin_senders(origin)
        if not who:
            return default, []
        levels = {s: self.level(s, default) for s in who}
        worst = max(levels.values(), key=_STRICTNESS.__getitem__)
        return worst, [s for s, lv in levels.items() if lv == worst]

    def listing(self, default: str) -> dict[str, Any]:
        return {"default": default,
                "senders": [{"sender": s, "level": lv} for s, lv in sorted(self.levels.items())]}

    def set(self, sender: Any, level: Any) -> tuple[str | None, str | None]:
        """Give a sender a level (None: back to the default); saves the file atomically and
        returns (before, after). Bad input is an InvalidArgument and changes nothing."""
        if not isinstance(sender, str) or not sender.strip() or len(sender) > MAX_SENDER or not sender_key(sender):
            raise InvalidArgument(f"sender must be a sender key (a non-empty string of at most {MAX_SENDER} "
                                  f"characters, e.g. qq:42)", field="sender")
        sender = sender_key(sender)
        if level is not None and level not in LEVELS:
            raise InvalidArgument(f"level must be one of {', '.join(LEVELS)} (or null for the default), not "
                                  f"{level!r}", field="level")
        before = self.levels.get(sender)
        if before == level:
            return before, level
        new = dict(self.levels)
        if level is None:
            new.pop(sender, None)
        else:
            new[sender] = level
        data = json.dumps({"version": 1, "senders": dict(sorted(new.items()))}, ensure_ascii=False, indent=1)
        atomic_write(self.path, data.encode() + b"\n")
        self.levels = new
        return before, level
