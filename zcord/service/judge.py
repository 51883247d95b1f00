"""What per-sender trust says of a call (issue 33): `judge_origin` resolves the call's origin
and decides from its senders' trust levels (trust.TrustBook) whether the call runs, is
refused, or has its change held for an operator's review (review.ReviewBook). The
dispatcher asks it before every call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..core import origin as O
from ..core.errors import BlockedSender, InvalidArgument, UntrustedSender, ZcorError
from .review import HOLDABLE_TOOLS

if TYPE_CHECKING:
    from .parts import CallHost


class ToolEntry(Protocol):
    """What the judgement reads of the tool's entry (tools.ToolSpec)."""

    @property
    def name(self) -> str: ...
    @property
    def mutates(self) -> bool: ...


def judge_origin(host: CallHost, spec: ToolEntry | None, actor: str, claim: Any,
                 batch: O.Batch | None, view: bool, present: Mapping[str, list[str]] | None = None
                 ) -> tuple[dict[str, Any], ZcorError | None, list[str]]:
    """A call's origin, and what per-sender trust says of it: (origin, the refusal or
    None, the senders its change is held for: none when it is not held).

    The speaker (zcord.core.origin.speaker) blocked: refused. The speaker untrusted, or
    another sender present untrusted or blocked: held for review (the kinds of change
    that cannot be held are refused). Origins longer than MAX_SENDERS keep the speaker
    and the strictest senders (origin.cut)."""
    try:
        origin = O.resolve(actor, claim, batch, claim is not O.NO_CLAIM)
    except InvalidArgument as e:
        return O.resolve(actor, None, batch, False), e, []
    if actor != "model":
        return origin, None, []
    trust, default = host.trust, host.config.default_trust
    if claim is not O.NO_CLAIM and present and isinstance(origin.get("session"), str):
        # the session's batch on this connection: its strict senders count though the claim left them out
        told = set(origin["senders"])
        extra = [s for s in present.get(origin["session"], ()) if s not in told
                 and trust.level(s, default) in ("untrusted", "blocked")]
        if extra:
            first = O.speaker(origin)
            origin = {**origin, "senders": extra + origin["senders"], **({"speaker": first} if first else {})}
    if len(origin.get("senders", ())) > O.MAX_SENDERS:
        origin = {**origin, "senders": O.cut(origin["senders"], lambda s: trust.rank(s, default),
                                               O.speaker(origin))}
    if spec is None or not spec.mutates or view:
        return origin, None, []
    first = O.speaker(origin)
    level = trust.level(first, default) if first is not None else default
    named = first if first is not None else "an unknown sender (the default trust level)"
    if level == "blocked":
        return origin, BlockedSender(
            f"{spec.name} was refused by the per-sender trust rule: the operator blocked {named}, so "
            f"nothing is changed on their behalf. Do not retry; answer without changing the memory."), []
    strict = [s for s in O.present(origin) if trust.level(s, default) in ("untrusted", "blocked")]
    if level == "untrusted" or strict:
        if spec.name in HOLDABLE_TOOLS:
            by = ([first] if level == "untrusted" and first else []) + strict
            return origin, None, by or ["(unknown sender)"]
        who = ", ".join(([first] if level == "untrusted" and first else []) + strict) or named
        if level != "untrusted" and all(trust.level(s, default) == "blocked" for s in strict):
            return origin, BlockedSender(
                f"{spec.name} was refused by the per-sender trust rule: the operator blocked {who}, who took "
                f"part in this conversation, and this kind of change cannot be held for an operator's "
                f"review. Do not retry."), []
        return origin, UntrustedSender(
            f"{spec.name} was refused by the per-sender trust rule: {who} is untrusted, and this kind "
            f"of change cannot be held for an operator's review. Do not retry."), []
    return origin, None, []
