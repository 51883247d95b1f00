"""The memory tools: write, read, delete, children, trace, query, merge, supersede (SPEC §2.1)."""

from __future__ import annotations

from collections.abc import Collection
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

from ...core.errors import Conflict, InvalidArgument, NotFound, Superseded, advice
from ...core.models import Node
from ...core.state import Tx
from ...core.text import derive_keywords, match_form
from .. import inputs as I
from .. import scope
from ..calls import Ctx, dedupe_words, newest_first, time_range

if TYPE_CHECKING:
    from ..parts import Room


NARROW_FROM = 2000
"""zcor_memory_query: past this many nodes holding the first keyword, each further keyword is
found in the query text too and the sets intersected, rather than normalizing every
candidate's title and content (at 100,000 memories, in process: two common keywords 125 → 90 ms,
three 155 → 93 ms; bench/RESULTS.md)."""


def find_node(svc: Room, node_id: str, name: str = "id") -> Node:
    node = svc.state.nodes.get(node_id)
    if node is None or scope.hides(svc.state, node_id):  # another session's private memory does not exist here
        raise NotFound(f"No memory with {name} {node_id!r}. {advice('find_ids')}", field=name, hint="find_ids")
    return node


def current_node(svc: Room, node_id: str, name: str = "id", action: str = "changed") -> Node:
    node = find_node(svc, node_id, name)
    if node.superseded_by is not None:
        raise Superseded(f"Memory {node_id} was superseded by {node.superseded_by} and cannot be "
                         f"{action}; use {node.superseded_by} instead.", field=name)
    return node


def check_parent(svc: Room, parent_id: str, node_id: str | None) -> None:
    find_node(svc, parent_id, "parentId")
    if node_id is not None and node_id in svc.state.ancestors(parent_id):
        raise Conflict(f"Moving {node_id} under {parent_id} would create a cycle: {parent_id} is "
                       f"{node_id} itself or one of its descendants.", field="parentId")


def derive(svc: Room, title: str) -> list[str]:
    """Keywords from a title, cut by a jieba that knows every synonym term and keyword."""
    svc.retriever.teach_jieba()
    return derive_keywords(title)


def child_ids(svc: Room, parent_id: str | None) -> list[str]:
    """The children the current call may see (scope.py)."""
    return scope.visible(svc.state, svc.state.child_ids(parent_id))


def item(svc: Room, node_id: str) -> dict[str, Any]:
    node = svc.state.nodes[node_id]
    out = {"id": node.id, "title": node.title, "superseded": node.superseded_by is not None,
           "childCount": len(child_ids(svc, node_id))}
    scope.mark(svc.state, out)  # operators see a scoped memory's scope
    return out


TWINS_SHOWN = 3
"""At most this many near-duplicates are named in a create's result."""


def twins_note(similar: list[dict[str, Any]]) -> str:
    """The sentence a create's result carries when it nearly repeats current memories."""
    ids = ", ".join(s["id"] for s in similar)
    first = similar[0]["id"]
    return (f"This new memory nearly repeats {ids}. Next time update the existing memory instead "
            f"(zcor_memory_write with id {first}), or merge them with zcor_memory_merge; nothing was refused.")


def write(svc: Room, a: I.WriteArgs, ctx: Ctx) -> dict[str, Any]:
    st = svc.state
    private = scope.private_of(ctx, svc.config.private_scope)
    if a.keywords is not None:
        keywords = dedupe_words(a.keywords)
    if a.id is None:
        if a.parent_id is not None:
            check_parent(svc, a.parent_id, None)
        # the twin check (issue 38) is made against the index as it is now (caught up here), but
        # while the change's log record is fsynced (twin_check)
        if svc.twins.check:
            svc.twins.ready()
        scoped = scope.hidden_now(st)  # another session's private memories are never named here
        hidden = svc.review.hidden | scoped if scoped else svc.review.hidden
        tx = svc.begin(ctx)
        node = Node(
            id=tx.take_id(), title=a.title, content=a.content,
            keywords=keywords if a.keywords is not None else derive(svc, a.title),
            parent_id=a.parent_id, source_message=a.source_message,
            created_at=ctx.at, updated_at=ctx.at)
        tx.put_node(node)
        tx.record("node.create", node.id, after=node.dump())
        if private is not None:  # created in a private conversation: scoped to it (scope.py)
            tx.set_scope(node.id, private)
            tx.record("scope.set", node.id, before=None, after=private)
        created = True
    else:
        old = find_node(svc, a.id)
        if private is not None:
            scope.own(st, private, a.id, "zcor_memory_write")
        if old.superseded_by is not None:
            raise Superseded(f"Memory {a.id} was superseded by {old.superseded_by} and cannot be "
                             f"updated; update {old.superseded_by} instead.", field="id")
        update: dict[str, Any] = {"title": a.title, "content": a.content,
                                  "updated_at": max(ctx.at, old.created_at)}  # never before its creation
        if a.given("parent_id"):
            if a.parent_id is not None:
                check_parent(svc, a.parent_id, a.id)
            update["parent_id"] = a.parent_id
        if a.given("keywords"):
            update["keywords"] = keywords if a.keywords is not None else derive(svc, a.title)
        if a.given("source_message"):
            update["source_message"] = a.source_message
        node = old.model_copy(update=update)
        if {**node.dump(), "updatedAt": None} == {**old.dump(), "updatedAt": None}:
            return {"created": False, **old.dump()}  # nothing changes (a move to its own parent): no record
        tx = svc.begin(ctx)
        tx.put_node(node)
        tx.record("node.update", node.id, before=old.dump(), after=node.dump())
        created = False
    svc.commit(ctx)
    out = {"created": created, **st.nodes[node.id].dump()}
    if created and svc.twins.check:
        ctx.meanwhile = lambda: twin_check(svc, st.nodes[node.id], a.title, a.content, hidden)
    return out


def twin_check(svc: Room, node: Node, title: str, content: str, hidden: AbstractSet[str]) -> dict[str, Any]:
    """A create's twin check (issue 38): the current memories the new one nearly repeats, named
    in the result with a note (nothing is refused), then the new memory indexed. Run while the
    create's log record is fsynced, the service lock held by the call's thread (Ctx.meanwhile):
    against the index as the rule left it, caught up just before the change, so the new
    memory is not among them."""
    tw = svc.twins
    feats = tw.folding.features(title, content)
    twins = tw.similar(feats, exclude=hidden, limit=TWINS_SHOWN, synced=True)
    tw.written(node, feats)
    nodes = svc.state.nodes
    similar = [{"id": t.id, "title": nodes[t.id].title, "score": t.score} for t in twins if t.id in nodes]
    return {"similar": similar, "note": twins_note(similar)} if similar else {}


def read(svc: Room, a: I.IdArgs, ctx: Ctx) -> dict[str, Any]:
    node = find_node(svc, a.id)
    parent = svc.state.nodes.get(node.parent_id) if node.parent_id else None
    if parent is not None and scope.hides(svc.state, parent.id):
        parent = None
    out = {**node.dump(), "important": node.id in svc.state.important,
           "parentTitle": parent.title if parent else None,
           "childCount": len(child_ids(svc, node.id))}
    scope.mark(svc.state, out)
    return out


def delete(svc: Room, a: I.IdArgs, ctx: Ctx) -> dict[str, Any]:
    st = svc.state
    node = find_node(svc, a.id)
    private = scope.private_of(ctx, svc.config.private_scope)
    if private is not None:
        scope.own(st, private, a.id, "zcor_memory_delete")
    problems = []
    children = st.child_ids(a.id)
    if children:
        shown = ", ".join(children)
        problems.append(f"it has {len(children)} child{'ren' if len(children) != 1 else ''} ({shown}); "
                        f"move or delete them first")
    links = sorted(st.links.get(a.id, ()))
    if links:
        problems.append(f"relationship(s) {', '.join(links)} link to it; {advice('unlink_first')}")
    replaced = sorted(st.replaced.get(a.id, ()), key=st.rank.__getitem__)
    if replaced:
        problems.append(f"it replaces superseded memor{'ies' if len(replaced) != 1 else 'y'} "
                        f"{', '.join(replaced)}, so it must stay")
    if problems:
        raise Conflict(f"Memory {a.id} cannot be deleted: " + "; ".join(problems) + ".", field="id",
                       data={"children": children, "relationships": links, "replaces": replaced},
                       hint="unlink_first" if links else None)
    tx = svc.begin(ctx)
    was_important = a.id in st.important
    if was_important:
        after = [i for i in st.important if i != a.id]
        tx.record("important.unmark", a.id, before=list(st.important), after=after)
        tx.set_important(after)
    tx.remove_node(a.id)
    tx.record("node.delete", a.id, before=node.dump())
    svc.commit(ctx)
    return {"id": a.id, "deleted": True, "wasImportant": was_important}


def _page(ids: list[str], limit: int | None, offset: int) -> tuple[list[str], int | None]:
    """The ids of one page, and the offset of the next (None at the end)."""
    end = len(ids) if limit is None else min(len(ids), offset + limit)
    return ids[offset:end], (end if end < len(ids) else None)


def children(svc: Room, a: I.ChildrenArgs, ctx: Ctx) -> dict[str, Any]:
    if a.parent_id is not None:
        find_node(svc, a.parent_id, "parentId")
    ids = child_ids(svc, a.parent_id)
    page, nxt = _page(ids, a.limit, a.offset)
    return {"parentId": a.parent_id, "items": [item(svc, i) for i in page], "total": len(ids), "nextOffset": nxt}


def trace(svc: Room, a: I.TraceArgs, ctx: Ctx) -> dict[str, Any]:
    find_node(svc, a.id)
    path = [{"id": i, "title": svc.state.nodes[i].title} for i in reversed(svc.state.ancestors(a.id))
            if not scope.hides(svc.state, i)]
    ids = child_ids(svc, a.id)
    page, nxt = _page(ids, a.limit, a.offset)
    return {"id": a.id, "path": path, "children": [item(svc, i) for i in page], "childrenTotal": len(ids),
            "childrenNextOffset": nxt}


def query(svc: Room, a: I.QueryArgs, ctx: Ctx) -> dict[str, Any]:
    st = svc.state
    start, end = time_range(a)
    keys = [match_form(k) for k in a.keywords or ()]  # Traditional and Simplified alike
    # the longest keyword is usually the rarest: find its nodes in one pass, check the rest
    keys.sort(key=len, reverse=True)
    found: Collection[str] | None = st.text_matches(keys[0]) if keys else None
    rest = keys if found is None else keys[1:]
    while found is not None and rest and len(found) > NARROW_FROM:
        more = st.text_matches(rest[0])  # many candidates: one more pass costs less than their texts
        if more is None:
            break
        found = set(found).intersection(more)
        rest = rest[1:]
    candidates = st.nodes.keys() if found is None else found
    hits = []
    nodes, index, rank = st.nodes, st.index, st.rank
    # the model reads as if no held change had been made: the memories held changes touched
    # as last approved, matched below one by one (review caps how many)
    view = svc.retriever.approved_view() if ctx.actor == "model" else None
    masked: AbstractSet[str] = view.masked if view is not None else frozenset()
    hidden = scope.hidden_now(st)  # another session's private memories
    if hidden:
        masked = masked | hidden
    for node_id in candidates:
        if node_id in masked:
            continue
        node = nodes[node_id]
        if node.superseded_by is not None and not a.include_superseded:
            continue
        idx = index.get(node_id)
        updated = idx.updated if idx is not None else node.updated_at.timestamp()
        if (start is not None and updated < start) or (end is not None and updated > end):
            continue
        if rest:
            title, content = match_form(node.title), match_form(node.content)
            if not all(k in title or k in content for k in rest):
                continue
        hits.append((updated, rank[node_id], node_id))
    if view is not None:
        for node_id, node in view.approved.items():
            if node_id in hidden:
                continue
            updated = node.updated_at.timestamp()
            if (node.superseded_by is not None and not a.include_superseded) or \
                    (start is not None and updated < start) or (end is not None and updated > end):
                continue
            title, content = match_form(node.title), match_form(node.content)
            if all(k in title or k in content for k in keys):
                hits.append((updated, rank.get(node_id, 0), node_id))
        nodes = view.nodes
    return newest_first(hits, a, lambda i: scope.mark(st, nodes[i].dump()))


def merge(svc: Room, a: I.MergeArgs, ctx: Ctx) -> dict[str, Any]:
    st = svc.state
    if len(set(a.ids)) != len(a.ids):
        raise InvalidArgument("ids must be distinct", field="ids")
    sources = [current_node(svc, i, "ids", "merged") for i in a.ids]
    private = scope.private_of(ctx, svc.config.private_scope)
    if private is not None:
        for i in a.ids:
            scope.own(st, private, i, "zcor_memory_merge", "ids")
    # the new memory keeps its sources' scope (an operator's merge of a private conversation's
    # memories must not share them); sources private to different sessions cannot be merged
    scoped = sorted({s for i in a.ids if (s := st.scopes.get(i)) is not None}) \
        if svc.config.private_scope == "session" else []
    if len(scoped) > 1:
        raise Conflict(f"Memories {', '.join(a.ids)} are private to different sessions ({', '.join(scoped)}); "
                       f"one memory cannot be private to both. Change their scope first (zcor/scope/set).",
                       field="ids")
    private = scoped[0] if scoped else private
    parents = {n.parent_id for n in sources}
    parent = parents.pop() if len(parents) == 1 else None
    tx = svc.begin(ctx)
    new = Node(id=tx.take_id(), title=a.title, content=a.content,
               keywords=dedupe_words(a.keywords) if a.keywords is not None else derive(svc, a.title),
               parent_id=parent, created_at=ctx.at, updated_at=ctx.at)
    tx.put_node(new)
    tx.record("node.create", new.id, after=new.dump())
    if private is not None:
        tx.set_scope(new.id, private)
        tx.record("scope.set", new.id, before=None, after=private)
    moved, relinked = redirect(svc, tx, sources, new.id, a.reason, ctx, move_links=True)
    svc.commit(ctx)
    return {"id": new.id, "node": st.nodes[new.id].dump(), "superseded": list(a.ids),
            "movedChildren": moved, "relinkedRelationships": relinked,
            "important": new.id in st.important, "importantIds": scope.visible(st, list(st.important))}


def redirect(svc: Room, tx: Tx, sources: list[Node], target: str, reason: str, ctx: Ctx,
             move_links: bool) -> tuple[list[str], list[str]]:
    """Supersede sources by target; move important marks (and for merge children and links)."""
    st = svc.state
    moved: list[str] = []
    relinked: list[str] = []
    for src in sources:
        cur = st.nodes[src.id]
        done = cur.model_copy(update={"superseded_by": target, "supersede_reason": reason,
                                      "updated_at": ctx.at})
        tx.put_node(done)
        tx.record("node.supersede", src.id, before=cur.dump(), after=done.dump())
    if move_links:
        for src in sources:
            for child_id in list(st.child_ids(src.id)):
                child = st.nodes[child_id]
                after = child.model_copy(update={"parent_id": target, "updated_at": ctx.at})
                tx.put_node(after)
                tx.record("node.update", child_id, before=child.dump(), after=after.dump())
                moved.append(child_id)
            for pid in sorted(st.links.get(src.id, ())):
                rel = st.relationships[pid]
                after_rel = rel.model_copy(update={"memory_node_id": target, "updated_at": ctx.at})
                tx.put_rel(after_rel)
                tx.record("relationship.update", pid, before=rel.dump(), after=after_rel.dump())
                relinked.append(pid)
    ids = {s.id for s in sources}
    slots = [n for n, i in enumerate(st.important) if i in ids]
    if slots:
        after_imp = []
        for n, i in enumerate(st.important):
            if i not in ids:
                after_imp.append(i)
            elif n == slots[0] and target not in st.important:
                after_imp.append(target)
        tx.record("important.move", target, before=list(st.important), after=after_imp)
        tx.set_important(after_imp)
    return moved, relinked


def supersede(svc: Room, a: I.SupersedeArgs, ctx: Ctx) -> dict[str, Any]:
    st = svc.state
    if len(set(a.ids)) != len(a.ids):
        raise InvalidArgument("ids must be distinct", field="ids")
    if a.replacement_id in a.ids:
        raise InvalidArgument(f"replacementId {a.replacement_id} is also listed in ids; a memory "
                              f"cannot replace itself", field="replacementId")
    sources = [current_node(svc, i, "ids", "superseded again") for i in a.ids]
    current_node(svc, a.replacement_id, "replacementId", "used as a replacement")
    private = scope.private_of(ctx, svc.config.private_scope)
    if private is not None:
        for i in a.ids:
            scope.own(st, private, i, "zcor_memory_supersede", "ids")
    tx = svc.begin(ctx)
    redirect(svc, tx, sources, a.replacement_id, a.reason, ctx, move_links=False)
    svc.commit(ctx)
    return {"replacementId": a.replacement_id, "superseded": list(a.ids),
            "importantIds": scope.visible(st, list(st.important))}
