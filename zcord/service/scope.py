"""Private stays private (issue 34): what a one-to-one conversation creates is scoped to its
session.

A conversation is private when the bot says so: `"private": true` in `zcor/recall` params
(for that batch's session: the origin zcord infers for the connection's next calls carries
it) or in the origin it tells (`_meta["zcor/origin"]`, zcord.core.origin). A session recalled
as private stays private for every origin naming it until it is recalled without the flag.

The rule (config `privateScope`, "session" by default):

- A memory created by a call whose origin is private is scoped to that session: the state's
  side map `scopes` (memory id -> session) gets it by a `scope.set` change in the same
  operation as the `node.create`, so it is journaled, snapshotted, replayed, backed up and
  reverted with the memory (crash-safe as every change). Memories without a scope (every
  memory made before, by the operator, by an import, by a shared conversation) are visible
  everywhere.
- For the model, a scoped memory exists only in calls whose origin names its session:
  elsewhere it is not recalled, not in the context header (nor as a person's memory line),
  never in the system prefix (no scoped memory is, in any session: the prefix is shared), and
  every tool answers as if it did not exist (read, children, trace, query, search, history,
  its children counts; a write naming it as parent or target is "not found").
- A private conversation changes only what it created: updating, deleting, merging or
  superseding a memory visible elsewhere, marking important, writing or deleting a
  relationship and adding synonyms are refused there with a sentence saying why and what to
  do instead (save a new memory: it stays private). So nothing said only in private ever
  reaches a shared memory, the shared prefix or a relationship record.
- The history tool, for the model, leaves out every record another session's private
  conversation made and every record that touched a memory hidden from the caller (not
  listed, not counted).
- Operators see everything, with each memory's scope, and change it with `zcor/scope/set`
  (a logged operation, revertible like any other).
- `privateScope: "everywhere"`: nothing new is scoped and scopes are not enforced (the
  behaviour before issue 34); the scopes kept apply again when it is set back to "session".
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..core import origin as O
from ..core.errors import Conflict, InvalidArgument, NotFound
from ..core.origin import MAX_SESSION

if TYPE_CHECKING:
    from .calls import Ctx

SET = "zcor/scope/set"
PRIVATE_MARK = b'"private":true'
"""How a private origin reads in a log record (compact JSON)."""
EVERYWHERE = "everywhere"


class _All:
    def __repr__(self) -> str:
        return "ALL"


ALL: Any = _All()
"""The viewer who sees every memory: an operator, or any caller when scopes are off."""
_viewer: contextvars.ContextVar[Any] = contextvars.ContextVar("zcor_scope_viewer", default=ALL)


@contextmanager
def viewing(session: Any) -> Iterator[None]:
    """Run a call as seen from `session` (a session name, None for a model call whose
    session is unknown, ALL for an operator)."""
    token = _viewer.set(session)
    try:
        yield
    finally:
        _viewer.reset(token)


def viewer() -> Any:
    return _viewer.get()


def viewer_of(actor: str, origin: Any, mode: str) -> Any:
    """Who a call sees as: ALL for an operator or with scopes off, else its origin's session."""
    if actor != "model" or mode != "session":
        return ALL
    session = origin.get("session") if isinstance(origin, dict) else None
    return session if isinstance(session, str) else None


def hides(state: Any, node_id: Any) -> bool:
    """Whether the current call must not see this memory."""
    scopes = state.scopes
    if not scopes:
        return False
    v = _viewer.get()
    if v is ALL:
        return False
    s = scopes.get(node_id)
    return s is not None and s != v


def hidden_for(state: Any, session: Any) -> frozenset[str]:
    """The memory ids a session must not see (none for ALL)."""
    scopes = state.scopes
    if not scopes or session is ALL:
        return frozenset()
    return frozenset(i for i, s in scopes.items() if s != session)


def hidden_now(state: Any) -> frozenset[str]:
    return hidden_for(state, _viewer.get())


def visible(state: Any, ids: list[str]) -> list[str]:
    """ids without the memories hidden from the current call."""
    if not state.scopes or _viewer.get() is ALL:
        return ids
    return [i for i in ids if not hides(state, i)]


def private_of(ctx: Ctx, mode: str) -> str | None:
    """The session a model's call is private to (its changes are scoped there), or None."""
    if ctx.actor != "model" or mode != "session":
        return None
    return O.private_session(ctx.origin)


WHY = ("this conversation is private, and what is said here must not reach other conversations")


def refuse_shared(tool: str, what: str, field: str | None = None) -> Conflict:
    return Conflict(f"{tool} was refused: {WHY}, while {what} is shared with every conversation. Nothing was "
                    f"changed. Save what you learned as a new memory with zcor_memory_write (it stays private to "
                    f"this conversation).", field=field)


def own(state: Any, session: str, node_id: str, tool: str, field: str = "id") -> None:
    """A private conversation may change a memory only when it is scoped to that session."""
    if state.scopes.get(node_id) != session:
        raise refuse_shared(tool, f"memory {node_id}", field)


def scope_of(state: Any, node_id: str) -> Any:
    """A memory's scope as operators see it: "everywhere" or {"session": name}."""
    s = state.scopes.get(node_id)
    return EVERYWHERE if s is None else {"session": s}


def mark(state: Any, out: dict[str, Any]) -> dict[str, Any]:
    """An operator's result for a memory (`out`, with its `id`) gains `scope` when the memory
    is scoped to a session (absent: visible everywhere); the model's never does."""
    if state.scopes and _viewer.get() is ALL:
        s = state.scopes.get(out.get("id"))
        if s is not None:
            out["scope"] = {"session": s}
    return out


def parse_scope(value: Any) -> str | None:
    """`zcor/scope/set`'s scope: "everywhere" (None) or {"session": name}."""
    if value == EVERYWHERE:
        return None
    if isinstance(value, dict) and set(value) == {"session"}:
        session = value["session"]
        if isinstance(session, str) and session.strip() and len(session) <= MAX_SESSION and \
                not any(ord(ch) < 32 for ch in session):
            return session
    raise InvalidArgument(f'scope must be "everywhere" or {{"session": NAME}} (a session name of 1 to '
                          f'{MAX_SESSION} characters, no control characters)', field="scope")


def set_scope(svc: Any, params: Any) -> dict[str, Any]:
    """`zcor/scope/set {id, scope}`: an operator changes a memory's scope, as a logged
    operation (a `scope.set` change), revertible with zcor/history/revert."""
    if not isinstance(params, dict):
        raise InvalidArgument("params must be an object {id, scope}")
    unknown = sorted(set(params) - {"id", "scope"})
    if unknown:
        raise InvalidArgument(f"unknown parameter {unknown[0]} (zcor/scope/set takes id and scope)", field=unknown[0])
    node_id = params.get("id")
    if not isinstance(node_id, str) or not node_id:
        raise InvalidArgument("id must be a memory id, e.g. m17", field="id")
    if "scope" not in params:
        raise InvalidArgument('scope is required: "everywhere" or {"session": NAME}', field="scope")
    session = parse_scope(params["scope"])

    def run(ctx: Ctx) -> dict[str, Any]:
        st = svc.state
        if node_id not in st.nodes:
            raise NotFound(f"No memory with id {node_id!r}", field="id")
        before = st.scopes.get(node_id)
        if before == session:
            raise InvalidArgument(f"{node_id} already has that scope", field="scope")
        if session is not None and node_id in st.important:
            raise Conflict(f"{node_id} is marked important, and important memories are shown in every "
                           f"conversation; unmark it first, then scope it to a session", field="id")
        tx = svc.begin(ctx)
        tx.set_scope(node_id, session)
        tx.record("scope.set", node_id, before=before, after=session)
        svc.commit(ctx)
        return {"seq": ctx.seq, "id": node_id, "scope": scope_of(st, node_id)}

    out: dict[str, Any] = svc.calls.run_operation(SET, params, run)
    return out


def filter_hidden(ids: AbstractSet[str] | list[str], hidden: AbstractSet[str]) -> list[str]:
    return [i for i in ids if i not in hidden]


class WithoutScoped:
    """A MemoryState seen without scoped memories in the important list (the system prefix
    is shared by every session)."""

    def __init__(self, state: Any):
        self._state = state
        scopes = state.scopes
        self.important = [i for i in state.important if i not in scopes]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._state, name)


def file_holds(path: Any, needle: bytes, chunk: int = 1 << 20) -> bool:
    """Whether a file holds these bytes (read a chunk at a time; a missing file holds nothing)."""
    try:
        f = open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        return False
    with f:
        tail = b""
        while True:
            block = f.read(chunk)
            if not block:
                return False
            if needle in tail + block:
                return True
            tail = block[-len(needle):]
