"""The relationship tools: one record per person, affinity -100..100 (SPEC §2.2)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...core.errors import InvalidArgument, NotFound, advice
from ...core.models import Relationship
from ...core.text import normalize
from .. import inputs as I
from .. import scope
from ..calls import Ctx, dedupe_words, newest_first, time_range
from .memories import current_node

if TYPE_CHECKING:
    from ..parts import Room


def find_rel(svc: Room, person_id: str) -> Relationship:
    rel = svc.state.relationships.get(person_id)
    if rel is None:
        raise NotFound(f"No relationship for personId {person_id!r}. {advice('find_person')}", field="personId",
                       hint="find_person")
    return rel


def read(svc: Room, a: I.PersonArgs, ctx: Ctx) -> dict[str, Any]:
    return find_rel(svc, a.person_id).dump()


def query(svc: Room, a: I.RelQueryArgs, ctx: Ctx) -> dict[str, Any]:
    st = svc.state
    start, end = time_range(a)
    if a.min_affinity is not None and a.max_affinity is not None and a.min_affinity > a.max_affinity:
        raise InvalidArgument("minAffinity is greater than maxAffinity", field="minAffinity")
    keys = [normalize(k) for k in a.keywords or ()]
    hits = []
    for pid, rel in st.relationships.items():
        idx = st.rel_index[pid]
        if (start is not None and idx.updated < start) or (end is not None and idx.updated > end):
            continue
        if (a.min_affinity is not None and rel.affinity < a.min_affinity) or \
                (a.max_affinity is not None and rel.affinity > a.max_affinity):
            continue
        if all(any(k in t for t in idx.norm_text) for k in keys):
            hits.append((idx.updated, idx.rank, pid))
    return newest_first(hits, a, lambda p: st.relationships[p].dump())


def write(svc: Room, a: I.RelWriteArgs, ctx: Ctx) -> dict[str, Any]:
    st = svc.state
    if scope.private_of(ctx, svc.config.private_scope) is not None:
        raise scope.refuse_shared("zcor_relationship_write", f"the relationship record of {a.person_id}", "personId")
    old = st.relationships.get(a.person_id)
    if a.memory_node_id is not None:
        current_node(svc, a.memory_node_id, "memoryNodeId", "linked")
    fields: dict[str, Any] = {"name": a.name, "relationship": a.relationship, "affinity": a.affinity,
                              "reason": a.reason, "updated_at": ctx.at}
    if a.given("aliases"):
        fields["aliases"] = dedupe_words(a.aliases or [])
    if a.given("memory_node_id"):
        fields["memory_node_id"] = a.memory_node_id
    tx = svc.begin(ctx)
    if old is None:
        rel = Relationship(person_id=a.person_id, created_at=ctx.at, **fields)
        tx.put_rel(rel)
        tx.record("relationship.create", a.person_id, after=rel.dump())
    else:
        rel = old.model_copy(update=fields)
        tx.put_rel(rel)
        tx.record("relationship.update", a.person_id, before=old.dump(), after=rel.dump())
    svc.commit(ctx)
    return {"created": old is None, **rel.dump()}


def delete(svc: Room, a: I.PersonArgs, ctx: Ctx) -> dict[str, Any]:
    rel = find_rel(svc, a.person_id)
    if scope.private_of(ctx, svc.config.private_scope) is not None:
        raise scope.refuse_shared("zcor_relationship_delete", f"the relationship record of {a.person_id}", "personId")
    tx = svc.begin(ctx)
    tx.remove_rel(a.person_id)
    tx.record("relationship.delete", a.person_id, before=rel.dump())
    svc.commit(ctx)
    return {"personId": a.person_id, "deleted": True}
