"""Keeping a blocked sender's messages from the model (issue 33).

zcord keeps a blocked sender out of recall and out of changes; what the model reads of the
chat is the front end's. `zcor/recall` names the batch's blocked senders (`blocked`, their
senderKeys as the bot gave them); a front end passes its batch and that list to
`filter_blocked` and shows the model only what it returns. `zcor chat` (Conversation) and
the OpenAI-compatible endpoint do; the AstrBot plugin drops such a request before the model.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from ..core.senderkey import sender_key

log = logging.getLogger(__name__)


def filter_blocked(events: list[dict[str, Any]], blocked: Iterable[str],
                   logger: logging.Logger | None = None) -> list[dict[str, Any]]:
    """The events without the external ones whose senderKey is blocked (compared as sender
    keys: case, width and invisible characters do not matter); says in a log line how many
    were left out and whose. Other events (the bot's own, system ones) are kept."""
    keys = {sender_key(b) for b in blocked if isinstance(b, str)}
    if not keys:
        return list(events)
    kept, dropped = [], []
    for e in events:
        who = e.get("senderKey") if isinstance(e, dict) else None
        if isinstance(e, dict) and e.get("origin", "external") == "external" and isinstance(who, str) \
                and sender_key(who) in keys:
            dropped.append(who)
        else:
            kept.append(e)
    if dropped:
        (logger or log).warning("zcor: left %d message(s) of blocked sender(s) %s out of what the model sees",
                                len(dropped), ", ".join(sorted(set(dropped))))
    return kept
