"""Planning a revert: `Undo` builds the changes that undo logged operations inside the
caller's transaction (not yet committed), noting conflicts with what changed since; `plan`
for one operation, `plan_many` for several, newest first. The operator methods that run
them (revert, revertOrigin, reinstate, the review's reject) are zcord.service.undo's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.errors import Conflict, InvalidArgument, NotFound, advice
from ..core.models import Node, Relationship
from ..core.state import MemoryState
from .rebuild import before_restore

if TYPE_CHECKING:
    from .calls import Ctx
    from .parts import FlowRoom


def _differs(current: dict[str, Any] | None, expected: dict[str, Any] | None) -> list[str]:
    if current is None or expected is None:
        return [] if current == expected else ["(whole record)"]
    return sorted(k for k in set(current) | set(expected) if current.get(k) != expected.get(k))


class Undo:
    """Builds one revert inside the caller's transaction, collecting conflicts."""

    def __init__(self, svc: FlowRoom, ctx: Ctx, seq: int, force: bool, tx: Any = None):
        self.svc, self.ctx, self.seq, self.force = svc, ctx, seq, force
        self.st = svc.state
        self.tx = svc.begin(ctx) if tx is None else tx
        self.conflicts: list[dict[str, Any]] = []
        self.receipt = {"revertOf": seq}
        self.important_before: list[str] | None = None  # set when the operation changed the list
        self.dry = False  # a preview: write no file

    def conflict(self, target: str | None, problem: str, fields: list[str] | None = None, hard: bool = False) -> bool:
        """Note a conflict; True when the undo of this change must be skipped."""
        self.conflicts.append({"target": target, "problem": problem, **({"fields": fields} if fields else {}),
                               **({"forceable": False} if hard else {})})
        return hard or not self.force

    def record(self, kind: str, target: str | None, before: Any = None, after: Any = None) -> None:
        self.tx.record(kind, target, before=before, after=after, receipt=self.receipt)

    # node changes

    def _check_refs(self, rec: dict[str, Any], target: str) -> bool:
        parent, by = rec.get("parentId"), rec.get("supersededBy")
        if parent is not None and parent not in self.st.nodes:
            return not self.conflict(target, f"its parent {parent} no longer exists", hard=True)
        if by is not None and by not in self.st.nodes:
            return not self.conflict(target, f"the memory that superseded it, {by}, no longer exists", hard=True)
        return True

    def node_created(self, target: str, after: dict[str, Any]) -> None:
        cur = self.st.nodes.get(target)
        if cur is None:
            self.conflict(target, "it was deleted since", hard=True)
            return
        diff = _differs(cur.dump(), after)
        if diff and self.conflict(target, "it changed since", diff):
            return
        st = self.st
        kids, links, replaced = st.child_ids(target), st.links.get(target), st.replaced.get(target)
        if kids or links or replaced:
            what = ", ".join(x for x in (kids and f"children {', '.join(kids[:5])}",
                                         links and f"relationships {', '.join(sorted(links))}",
                                         replaced and f"superseded memories {', '.join(sorted(replaced))}") if x)
            self.conflict(target, f"removing it would orphan {what}", hard=True)
            return
        if target in st.important and self.important_before is None:
            new = [i for i in st.important if i != target]
            self.record("important.set", target, before=list(st.important), after=new)
            self.tx.set_important(new)
        self.record("node.delete", target, before=cur.dump())
        self.tx.remove_node(target)

    def node_changed(self, target: str, before: dict[str, Any], after: dict[str, Any]) -> None:
        cur = self.st.nodes.get(target)
        if cur is None:
            if self.conflict(target, "it was deleted since"):
                return
        else:
            diff = _differs(cur.dump(), after)
            if diff and self.conflict(target, "it changed since", diff):
                return
        if not self._check_refs(before, target):
            return
        node = Node.model_validate(before)
        if node.parent_id is not None and target in self.st.ancestors(node.parent_id):
            self.conflict(target, f"its old parent {node.parent_id} is now below it", hard=True)
            return
        if cur is None:
            self.record("node.create", target, after=node.dump())
            self.tx.add_node(node)
        else:
            self.record("node.update", target, before=cur.dump(), after=node.dump())
            self.tx.put_node(node)

    def node_deleted(self, target: str, before: dict[str, Any]) -> None:
        if target in self.st.nodes:
            self.conflict(target, "a memory with this id exists again", hard=True)
            return
        if not self._check_refs(before, target):
            return
        node = Node.model_validate(before)
        self.record("node.create", target, after=node.dump())
        self.tx.add_node(node)

    def check_important(self, before: list[str], after: list[str]) -> None:
        """Before anything is undone: the list must still be what the operation left."""
        if list(self.st.important) != after and self.conflict(None, "the important list changed since",
                                                               ["important"]):
            return
        self.important_before = before

    def finish_important(self) -> None:
        """After the memories are back: the list as it was, less memories no longer current."""
        if self.important_before is None:
            return
        cur = list(self.st.important)
        new = [i for i in self.important_before if i in self.st.nodes and self.st.nodes[i].superseded_by is None]
        if new != cur:
            self.record("important.set", None, before=cur, after=new)
            self.tx.set_important(new)

    # scopes (issue 34)

    def scope(self, target: str, before: Any, after: Any) -> None:
        cur = self.st.scopes.get(target)
        if cur != after and self.conflict(target, "its scope changed since", ["scope"]):
            return
        if cur != before:
            self.record("scope.set", target, before=cur, after=before)
            self.tx.set_scope(target, before)

    # relationships

    def rel(self, kind: str, target: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
        cur_obj = self.st.relationships.get(target)
        cur = cur_obj.dump() if cur_obj is not None else None
        expected = None if kind == "relationship.delete" else after
        diff = _differs(cur, expected)
        if diff and self.conflict(target, "it changed since" if cur is not None and expected is not None
                                  else "it was deleted since" if cur is None else "it exists again", diff):
            return
        if before is None:
            if cur is not None:
                self.record("relationship.delete", target, before=cur)
                self.tx.remove_rel(target)
            return
        link = before.get("memoryNodeId")
        if link is not None and link not in self.st.nodes:
            self.conflict(target, f"the memory it linked, {link}, no longer exists", hard=True)
            return
        rel = Relationship.model_validate(before)
        self.record("relationship.create" if cur is None else "relationship.update", target, before=cur,
                    after=rel.dump())
        if cur is None:
            self.tx.add_rel(rel)
        else:
            self.tx.put_rel(rel)

    # a restore

    def restore(self, change: dict[str, Any]) -> None:
        later = self.st.next_change_id() - 1 - change["changeId"]
        if later > 0 and self.conflict(None, f"{later} change(s) were made after the restore"):
            return
        name = (change.get("before") or {}).get("backupFile")
        incoming = before_restore(self.svc, change)
        rebuilt = {} if self.svc.backups.exists(str(name)) else {"rebuiltBefore": change["changeId"]}
        auto = "(a backup written when the revert runs)" if self.dry else \
            self.svc.backups.write(self.st, self.ctx.at, bot=False)

        def summary(s: MemoryState) -> dict[str, Any]:
            return {"nodes": len(s.nodes), "relationships": len(s.relationships), "important": list(s.important)}

        self.record("state.restore", None, before={"backupFile": auto, **summary(self.st)},
                    after={"restoredFrom": name, **rebuilt, **summary(incoming)})
        self.tx.replace_all(incoming)
        self.ctx.snapshot_first = True


def plan(svc: FlowRoom, ctx: Ctx, seq: int, force: bool, dry: bool = False) -> Undo:
    """Apply the revert inside a transaction (not yet committed); Conflict when refused."""
    rec = svc.find_operation(seq)
    if rec is None:
        raise NotFound(f"No operation with seq {seq} in the log", field="seq")
    if rec.get("tool") == "zcor/erase":
        raise InvalidArgument(f"Operation {seq} was an erasure (zcor/erase), which cannot be reverted: what it "
                              f"removed is gone from every file of the Memory", field="seq")
    own = [c for c in rec.get("changes", []) if c.get("changeId") and c.get("kind") != "erased"]
    if rec.get("status") != "ok" or not own:
        raise InvalidArgument(f"Operation {seq} ({rec.get('tool')}) changed nothing in the Memory; there is "
                              f"nothing to revert", field="seq")
    u = Undo(svc, ctx, seq, force)
    u.dry = dry
    undo_changes(u, own)
    refuse_conflicts(u, f"Operation {seq}", force)
    if not u.tx.changes:
        raise InvalidArgument(f"Reverting operation {seq} would change nothing: the Memory already holds what "
                              f"was there before it", field="seq")
    return u


def refuse_conflicts(u: Undo, what: str, force: bool, field: str = "seq") -> None:
    hard = [x for x in u.conflicts if x.get("forceable") is False]
    if u.conflicts and (hard or not force):
        shown = "; ".join((f"operation {x['seq']}, " if "seq" in x else "") + f"{x['target'] or 'the Memory'}: "
                          f"{x['problem']}" + (f" ({', '.join(x['fields'])})" if x.get("fields") else "")
                          for x in u.conflicts[:8])
        said = "" if hard else f" {advice('force_revert')}"
        raise Conflict(f"{what} cannot be reverted: {shown}.{said}", field=field,
                       data={"conflicts": u.conflicts}, hint=None if hard else "force_revert")


def undo_changes(u: Undo, own: list[dict[str, Any]]) -> None:
    """Undo one operation's changes (newest first) inside u's transaction, noting conflicts."""
    marks = [c for c in own if c["kind"].startswith("important.")]
    if marks:
        u.check_important(marks[0].get("before") or [], marks[-1].get("after") or [])
    for c in reversed(own):
        kind, target = c["kind"], c.get("target")
        if kind == "node.create":
            u.node_created(target, c["after"])
        elif kind in ("node.update", "node.supersede"):
            u.node_changed(target, c["before"], c["after"])
        elif kind == "node.delete":
            u.node_deleted(target, c["before"])
        elif kind.startswith("relationship."):
            u.rel(kind, target, c.get("before"), c.get("after"))
        elif kind == "scope.set":
            u.scope(target, c.get("before"), c.get("after"))
        elif kind == "state.restore":
            u.restore(c)
    u.finish_important()


def plan_many(svc: FlowRoom, ctx: Ctx, records: list[dict[str, Any]], force: bool, what: str, field: str,
              dry: bool = False, receipt: dict[str, Any] | None = None) -> Undo:
    """Undo several logged operations, newest first, in one transaction (not yet committed);
    Conflict when refused, as `plan` for one."""
    records = sorted(records, key=lambda r: r["seq"], reverse=True)
    u = Undo(svc, ctx, records[0]["seq"], force)
    u.dry = dry
    for rec in records:
        own = [c for c in rec.get("changes", []) if c.get("changeId")]
        u.seq, u.receipt, u.important_before = rec["seq"], {"revertOf": rec["seq"], **(receipt or {})}, None
        seen = len(u.conflicts)
        undo_changes(u, own)
        for x in u.conflicts[seen:]:
            x["seq"] = rec["seq"]
    refuse_conflicts(u, what, force, field)
    if not u.tx.changes:
        raise InvalidArgument(f"Reverting {what[0].lower() + what[1:]} would change nothing: the Memory already "
                              f"holds what was there before", field=field)
    return u
