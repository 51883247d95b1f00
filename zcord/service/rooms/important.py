"""zcor_memory_important: at most five important memories, the earliest unmarked by a sixth."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...core.errors import Conflict, Superseded
from ...core.models import MAX_IMPORTANT
from .. import inputs as I
from .. import scope
from ..calls import Ctx
from .memories import find_node

if TYPE_CHECKING:
    from ..parts import Room


def important(svc: Room, a: I.ImportantArgs, ctx: Ctx) -> dict[str, Any]:
    st = svc.state
    node = find_node(svc, a.id)
    if scope.private_of(ctx, svc.config.private_scope) is not None:
        raise scope.refuse_shared("zcor_memory_important", "the important list (shown in every conversation)", "id")
    result: dict[str, Any] = {"id": a.id, "important": a.important, "changed": False}
    if a.important:
        if node.superseded_by is not None:
            raise Superseded(f"Memory {a.id} was superseded by {node.superseded_by} and cannot be "
                             f"marked important; mark {node.superseded_by} instead.", field="id")
        if a.id in st.scopes and svc.config.private_scope == "session":
            raise Conflict(f"Memory {a.id} is private to one conversation's session, and important memories are "
                           f"shown in every conversation; it cannot be marked important while it is private.",
                           field="id")
        if a.id in svc.review.hidden:
            raise Conflict(f"Memory {a.id} is held for an operator's review (it came from an untrusted sender) "
                           f"and cannot be marked important until it is approved.", field="id")
        if a.id not in st.important:
            after = [*st.important, a.id]
            receipt = None
            if len(after) > MAX_IMPORTANT:
                gone = after.pop(0)
                title = st.nodes[gone].title
                receipt = {
                    "replaced": {"id": gone, "title": title},
                    "reminder": f"At most {MAX_IMPORTANT} memories can be important, so {gone} "
                                f"({title}) is no longer marked. The memory itself is kept; mark it "
                                f"again if it still matters more than another.",
                }
            tx = svc.begin(ctx)
            tx.record("important.mark", a.id, before=list(st.important), after=after, receipt=receipt)
            tx.set_important(after)
            svc.commit(ctx)
            result["changed"] = True
            if receipt:
                result.update(receipt)
    elif a.id in st.important:
        after = [i for i in st.important if i != a.id]
        tx = svc.begin(ctx)
        tx.record("important.unmark", a.id, before=list(st.important), after=after)
        tx.set_important(after)
        svc.commit(ctx)
        result["changed"] = True
    result["importantIds"] = scope.visible(st, list(st.important))
    return result
