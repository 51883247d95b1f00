"""The method table: every method zcord serves, declared once (like pygls's features).

Each entry says the method's name, who may call it (the bot and operators, or operators
only), its params model (zcord.transport.params) and result model (zcord.transport.results),
its handler (typed against both), where its work runs, and the typed calls the clients offer
for it. The daemon dispatches from this table (zcord.transport.methods) and
the clients' typed calls are generated from it (zcord.transport.client_calls, by
`python -m zcord.transport.gen_client`; tests/unit/test_client_table.py fails when the
generated file is stale).

No pydantic and nothing of the daemon here: the entries are filled in by methods.py.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

Runs = Literal["loop", "worker", "slow", "long", "tool"]
"""Where a handler's work runs: `loop` (nothing of the Service, on the event loop), `worker`
(the one worker thread that serializes Service calls), `slow` (a thread of its own, for
calls that wait on the LLM provider), `long` (a thread of its own among few, for calls that
take seconds: backup previews), `tool` (where the tool table says the tool runs)."""

Role = Literal["bot", "operator"]


@dataclass(frozen=True, slots=True)
class ClientCall:
    """One typed call of the generated clients.

    `signature` and `params` are Python source: the parameters after self, and the
    expression that builds the request's params from them (None: no params sent).
    """

    name: str
    signature: str = ""
    params: str | None = None
    returns: str | None = None
    """The return type (None: the method's result model, or its `result` key's type)."""
    result: str | None = None
    """The key of the result to return (None: the whole result)."""
    doc: str = ""


@dataclass(frozen=True, slots=True)
class Method:
    name: str
    role: Role
    handler: Callable[[Any, Any], Awaitable[Any]]
    """(the Methods, the Call with its params model) -> the result model (methods.py types it)."""
    params: type
    """The params model (zcord.transport.params)."""
    result: Any
    """The result model (zcord.transport.results): a TypedDict, or an alias of dict[str, Any]."""
    runs: Runs = "worker"
    client: tuple[ClientCall, ...] = ()
    validate: bool = True
    """False: the handler validates params itself, inside the recorded call (a refusal is logged)."""

    @property
    def operator_only(self) -> bool:
        return self.role == "operator"


@dataclass
class MethodTable:
    """name → Method, filled by the `method` decorator."""

    entries: dict[str, Method] = field(default_factory=dict)

    def add(self, entry: Method) -> None:
        if entry.name in self.entries:
            raise ValueError(f"method {entry.name} declared twice")
        self.entries[entry.name] = entry

    def get(self, name: str) -> Method | None:
        return self.entries.get(name)

    def __iter__(self) -> Iterator[Method]:
        return iter(self.entries.values())

    def __len__(self) -> int:
        return len(self.entries)
