"""The origin of a change: which chat session and which senders' messages led the bot to
make it (issue 22). Pure rules, no I/O: validating a bot's `_meta` claim, the origin
inferred from a connection's latest recall batch, and how an origin reads to an operator.

An origin is a small JSON object carried by every operation record:

- `{"session": "qq:group:1", "senders": ["qq:42"]}` — told by the bot (`tools/call`
  `_meta: {"zcor/origin": {...}}`);
- the same plus `"inferred": true` — worked out by zcord from the connection's latest
  `zcor/recall` batch (its session and the senderKeys of its external events), or
  `{"senders": [], "inferred": true}` when the connection delivered none;
- `{"operator": true}` — an operator's call (the role comes from the kernel at initialize,
  never from the claim: a bot cannot say it is the operator); an import adds the file it
  read, `{"operator": true, "senders": ["import:lore.json"]}` (zcord.service.interop).
"""

from __future__ import annotations

import unicodedata
from typing import Any

from .errors import InvalidArgument

ORIGIN_META = "zcor/origin"
"""`tools/call` `_meta` key of the origin a bot tells."""
MAX_SESSION = 200
MAX_SENDER = 200
MAX_SENDERS = 50
OPERATOR_ORIGIN: dict[str, Any] = {"operator": True}


class _NoClaim:
    def __repr__(self) -> str:
        return "NO_CLAIM"


NO_CLAIM: Any = _NoClaim()
"""The bot told no origin (as opposed to telling a bad one)."""


def _bad(message: str) -> InvalidArgument:
    return InvalidArgument(f"_meta.{ORIGIN_META}: {message}; nothing was changed. Send "
                           f'{{"session": "qq:group:1", "senders": ["qq:42"]}}', field="_meta")


def _key(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str):
        raise _bad(f"{what} must be a string, not {type(value).__name__}")
    if not value.strip():
        raise _bad(f"{what} must not be empty")
    if len(value) > limit:
        raise _bad(f"{what} is {len(value)} characters; at most {limit}")
    if any(unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp") for ch in value):
        raise _bad(f"{what} must not hold control characters, line breaks or lone surrogates")
    return value


def parse_claim(value: Any) -> dict[str, Any]:
    """The origin a bot tells in `_meta["zcor/origin"]`, validated: `{session?, senders}`
    with bounded strings; anything else (including `operator` or `inferred`) is an
    InvalidArgument naming `_meta`."""
    if not isinstance(value, dict):
        raise _bad("must be an object {session?, senders}")
    unknown = sorted(set(value) - {"session", "senders"})
    if unknown:
        raise _bad(f"unknown field {unknown[0]!r} (only session and senders may be told)")
    out: dict[str, Any] = {}
    session = value.get("session")
    if session is not None:
        out["session"] = _key(session, "session", MAX_SESSION)
    senders = value.get("senders", [])
    if not isinstance(senders, list):
        raise _bad("senders must be an array of sender keys")
    if len(senders) > MAX_SENDERS:
        raise _bad(f"senders holds {len(senders)} keys; at most {MAX_SENDERS}")
    out["senders"] = list(dict.fromkeys(_key(s, f"senders[{i}]", MAX_SENDER) for i, s in enumerate(senders)))
    return out


def batch_senders(events: Any) -> list[str]:
    """The distinct senderKeys of a recall batch's external events, in order (the latest
    MAX_SENDERS; keys that are not usable sender keys are left out)."""
    out: dict[str, None] = {}
    if not isinstance(events, list):
        return []
    for e in events:
        if not isinstance(e, dict) or e.get("origin") != "external":
            continue
        key = e.get("senderKey")
        if isinstance(key, str) and key.strip() and len(key) <= MAX_SENDER and \
                not any(unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp") for ch in key):
            out.pop(key, None)
            out[key] = None
    return list(out)[-MAX_SENDERS:]


def inferred(session: str | None, senders: list[str]) -> dict[str, Any]:
    """The origin zcord works out from a connection's latest recall batch (or from nothing)."""
    out: dict[str, Any] = {}
    if session is not None:
        out["session"] = session[:MAX_SESSION]
    out["senders"] = list(senders)
    out["inferred"] = True
    return out


def resolve(actor: str, claim: Any, batch: tuple[str, list[str]] | None, claimed: bool) -> dict[str, Any]:
    """The origin of one call: the operator's mark for an operator; for the bot its claim
    when it made one (validated), else what its latest batch says."""
    if actor != "model":
        return dict(OPERATOR_ORIGIN)
    if claimed:
        return parse_claim(claim)
    if batch is None:
        return inferred(None, [])
    return inferred(batch[0], batch[1])


def senders(origin: Any) -> list[str]:
    """The sender keys of an origin (none for an operator's or an unknown one)."""
    if not isinstance(origin, dict):
        return []
    got = origin.get("senders")
    return [s for s in got if isinstance(s, str)] if isinstance(got, list) else []


def describe(origin: Any) -> str:
    """How an origin reads to an operator: "from qq:42 in qq:group:1", "operator",
    "from qq:42 in qq:group:1 (inferred)"; "" when nothing is known."""
    if not isinstance(origin, dict):
        return ""
    if origin.get("operator") is True:  # an import names its file: "operator (import:lore.json)"
        named = senders(origin)
        return "operator" + (f" ({', '.join(named[:3])})" if named else "")
    who = senders(origin)
    text = ""
    if who:
        text = "from " + ", ".join(who[:3]) + (f" +{len(who) - 3}" if len(who) > 3 else "")
    session = origin.get("session")
    if isinstance(session, str):
        text += (" in " if text else "in ") + session
    if text and origin.get("inferred") is True:
        text += " (inferred)"
    return text
