"""The origin of a change: which chat session and which senders' messages led the bot to
make it (issue 22). Pure rules, no I/O: validating a bot's `_meta` claim, the origin
inferred from a connection's latest recall batch, and how an origin reads to an operator.

An origin is a small JSON object carried by every operation record:

- `{"session": "qq:group:1", "senders": ["qq:42"]}` — told by the bot (`tools/call`
  `_meta: {"zcor/origin": {...}}`);
- the same plus `"inferred": true` — worked out by zcord from the connection's latest
  `zcor/recall` batch (its session and the senderKeys of its external events), or
  `{"senders": [], "inferred": true}` when the connection delivered none;
- `"private": true` added to either when the conversation is one-to-one (issue 34): what
  the call creates is scoped to its session (zcord.service.scope);
- `{"operator": true}` — an operator's call (the role comes from the kernel at initialize,
  never from the claim: a bot cannot say it is the operator); an import adds the file it
  read, `{"operator": true, "senders": ["import:lore.json"]}` (zcord.service.interop).

Sender keys are kept in their comparison form (zcord.core.text.sender_key, issue 33): NFKC,
invisible and format characters dropped, case folded, whitespace trimmed, so `MALLORY`,
`Ｍallory` and `Mal\u2060lory` are one sender everywhere a sender is compared.

The speaker (issue 33) is the sender whose message the batch ends with, or whose message a
tool call answers: a bot may name it (`"speaker"`); without it the speaker is the last of
`senders` (inferred senders are in the order of their latest message, the latest last). The
other senders were only present. Trust, review and undo by origin tell the two apart
(`speaker`, `present`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from typing import Any

from .errors import InvalidArgument
from .senderkey import sender_key

ORIGIN_META = "zcor/origin"
"""`tools/call` `_meta` key of the origin a bot tells."""
MAX_SESSION = 200
MAX_SENDER = 200
MAX_SENDERS = 50
OPERATOR_ORIGIN: dict[str, Any] = {"operator": True}

Batch = tuple[str, list[str]] | tuple[str, list[str], bool]
"""A connection's latest recall batch: (session, senders[, private])."""


class _NoClaim:
    def __repr__(self) -> str:
        return "NO_CLAIM"


NO_CLAIM: Any = _NoClaim()
"""The bot told no origin (as opposed to telling a bad one)."""


def _bad(message: str) -> InvalidArgument:
    return InvalidArgument(f"_meta.{ORIGIN_META}: {message}; nothing was changed. Send "
                           f'{{"session": "qq:group:1", "senders": ["qq:42"]}}', field="_meta")


def _key(value: Any, what: str, limit: int, canonical: bool = False) -> str:
    if not isinstance(value, str):
        raise _bad(f"{what} must be a string, not {type(value).__name__}")
    if not value.strip():
        raise _bad(f"{what} must not be empty")
    if len(value) > limit:
        raise _bad(f"{what} is {len(value)} characters; at most {limit}")
    if any(unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp") for ch in value):
        raise _bad(f"{what} must not hold control characters, line breaks or lone surrogates")
    if canonical:
        value = sender_key(value)
        if not value:
            raise _bad(f"{what} must not be empty (it holds only invisible characters)")
    return str(value)


def parse_claim(value: Any) -> dict[str, Any]:
    """The origin a bot tells in `_meta["zcor/origin"]`, validated: `{session?, senders,
    speaker?, private?}` with bounded strings, sender keys in their comparison form (a speaker
    not among the senders is added as the last), `private` a boolean (kept only when true);
    anything else (including `operator` or `inferred`) is an InvalidArgument naming `_meta`."""
    if not isinstance(value, dict):
        raise _bad("must be an object {session?, senders, speaker?, private?}")
    unknown = sorted(set(value) - {"session", "senders", "speaker", "private"})
    if unknown:
        raise _bad(f"unknown field {unknown[0]!r} (only session, senders, speaker and private may be told)")
    private = value.get("private", False)
    if not isinstance(private, bool):
        raise _bad("private must be true or false")
    out: dict[str, Any] = {}
    session = value.get("session")
    if session is not None:
        out["session"] = _key(session, "session", MAX_SESSION)
    senders = value.get("senders", [])
    if not isinstance(senders, list):
        raise _bad("senders must be an array of sender keys")
    if len(senders) > MAX_SENDERS:
        raise _bad(f"senders holds {len(senders)} keys; at most {MAX_SENDERS}")
    keys = list(dict.fromkeys(_key(s, f"senders[{i}]", MAX_SENDER, True) for i, s in enumerate(senders)))
    speaker = value.get("speaker")
    if speaker is not None:
        speaker = _key(speaker, "speaker", MAX_SENDER, True)
        if speaker not in keys:
            if len(keys) >= MAX_SENDERS:
                raise _bad(f"speaker is not among the {MAX_SENDERS} senders; name it in senders")
            keys.append(speaker)
    out["senders"] = keys
    if speaker is not None:
        out["speaker"] = speaker
    if private:
        out["private"] = True
    return out


def usable_key(key: Any) -> bool:
    """Whether a batch event's senderKey can be kept in an origin."""
    return isinstance(key, str) and bool(key.strip()) and len(key) <= MAX_SENDER and \
        not any(unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp") for ch in key) and bool(sender_key(key))


def batch_senders(events: Any, limit: int | None = MAX_SENDERS) -> list[str]:
    """The distinct senderKeys of a recall batch's external events (comparison form), in the
    order of their latest message, the speaker last; a bot keeps the latest `limit` (zcord
    keeps them all, and cuts them by trust: `cut`). Unusable keys are left out."""
    out: dict[str, None] = {}
    if not isinstance(events, list):
        return []
    for e in events:
        if not isinstance(e, dict) or e.get("origin") != "external":
            continue
        key = e.get("senderKey")
        if usable_key(key):
            key = sender_key(key)
            out.pop(key, None)
            out[key] = None
    got = list(out)
    return got if limit is None else got[-limit:]


def cut(senders: list[str], rank: Callable[[str], int], speaker: str | None = None,
        limit: int = MAX_SENDERS) -> list[str]:
    """At most `limit` senders, keeping the speaker and then the strictest (`rank`: higher
    is stricter), the latest first among equals; the order of the kept ones is kept. Never
    silently the last ones: a strict sender cannot hide among many others."""
    if len(senders) <= limit:
        return list(senders)
    if speaker is None and senders:
        speaker = senders[-1]
    order = sorted(range(len(senders)), key=lambda i: (senders[i] != speaker, -rank(senders[i]), -i))
    keep = sorted(order[:limit])
    return [senders[i] for i in keep]


def inferred(session: str | None, senders: list[str], private: bool = False) -> dict[str, Any]:
    """The origin zcord works out from a connection's latest recall batch (or from nothing)."""
    out: dict[str, Any] = {}
    if session is not None:
        out["session"] = session[:MAX_SESSION]
    out["senders"] = list(senders)
    if private:
        out["private"] = True
    out["inferred"] = True
    return out


def private_session(origin: Any) -> str | None:
    """The session of a private (one-to-one) origin, or None."""
    if isinstance(origin, dict) and origin.get("private") is True and isinstance(origin.get("session"), str):
        return str(origin["session"])
    return None


def resolve(actor: str, claim: Any, batch: Batch | None, claimed: bool) -> dict[str, Any]:
    """The origin of one call: the operator's mark for an operator; for the bot its claim
    when it made one (validated), else what its latest batch says."""
    if actor != "model":
        return dict(OPERATOR_ORIGIN)
    if claimed:
        return parse_claim(claim)
    if batch is None:
        return inferred(None, [])
    return inferred(batch[0], batch[1], len(batch) > 2 and batch[2] is True)


def senders(origin: Any) -> list[str]:
    """The sender keys of an origin in comparison form (none for an operator's or an
    unknown one; a record written before issue 33 may hold other forms)."""
    if not isinstance(origin, dict):
        return []
    got = origin.get("senders")
    return list(dict.fromkeys(k for k in (sender_key(s) for s in got if isinstance(s, str)) if k)) \
        if isinstance(got, list) else []


def speaker(origin: Any) -> str | None:
    """The sender whose message the call answers: the told `speaker`, else the last sender."""
    if isinstance(origin, dict) and isinstance(origin.get("speaker"), str) and sender_key(origin["speaker"]):
        return sender_key(origin["speaker"])
    who = senders(origin)
    return who[-1] if who else None


def present(origin: Any) -> list[str]:
    """The senders of an origin other than its speaker (bystanders)."""
    first = speaker(origin)
    return [s for s in senders(origin) if s != first]


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
    told = origin.get("speaker")
    if isinstance(told, str) and sender_key(told) in who and len(who) > 1:  # the speaker, the others present
        rest = [s for s in who if s != sender_key(told)]
        text = f"from {sender_key(told)} (with " + ", ".join(rest[:3]) + (f" +{len(rest) - 3}" if len(rest) > 3
                                                                          else "") + ")"
    elif who:
        text = "from " + ", ".join(who[:3]) + (f" +{len(who) - 3}" if len(who) > 3 else "")
    session = origin.get("session")
    if isinstance(session, str):
        text += (" in " if text else "in ") + session
    if text and origin.get("private") is True:
        text += " (private)"
    if text and origin.get("inferred") is True:
        text += " (inferred)"
    return text
