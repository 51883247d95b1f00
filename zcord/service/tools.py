"""The tool table: each tool once, with the description the model reads, its input model
(from which the JSON Schema is generated) and its rule in the room named after its concern
(zcord.service.rooms). The dispatcher reads it; nothing else declares a tool.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from . import inputs as I
from .calls import Ctx, Steps
from .rooms import backups, history, important, memories, relationships, search, synonyms

RELATIONSHIP_TOOLS = frozenset({
    "zcor_relationship_read", "zcor_relationship_query", "zcor_relationship_write", "zcor_relationship_delete",
})


if TYPE_CHECKING:
    from .parts import FlowRoom

A = TypeVar("A", bound=I.Args)


@dataclass(frozen=True)
class ToolSpec(Generic[A]):
    """One tool. Its params model is `input_model`; its result model is named by the tool in
    zcord.transport.results.TOOL_RESULTS (the clients' typed tool calls return it)."""

    name: str
    description: str
    input_model: type[A]
    handler: Callable[[FlowRoom, A, Ctx], dict[str, Any]] | None
    """The rule, run under the service lock: (service, the arguments its input model parsed,
    Ctx) -> result."""
    mutates: bool = False
    flow: Callable[[Any, ToolSpec[Any], Any, str], Steps] | None = None
    """For a tool that lets the lock go while it works (an LLM call, writing a backup, a
    restore's slow phase): (service, this spec, raw arguments, actor) -> the call's steps
    (calls.Steps), which the dispatcher runs by its one path, recording the call."""
    reads_log: bool = False
    """The tool queries the operation log: its index is warmed (in the background) first."""
    runs: Literal["worker", "network", "long"] = "worker"
    """Where the daemon runs the call: in its one worker thread; "network", in a thread of
    its own because it waits on the LLM (reads and writes never queue behind it); "long",
    in one of a few threads for calls that can take seconds without the service lock
    (parsing and writing a restore, building the history index, writing a backup), so the
    worker keeps answering and the watchdog keeps being fed."""

    @cached_property
    def input_schema(self) -> dict[str, Any]:
        schema = self.input_model.model_json_schema(by_alias=True)
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        schema.setdefault("properties", {})
        return schema

    def describe(self) -> dict[str, Any]:
        """The MCP tools/list entry."""
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema}


def _tool(name: str, description: str, input_model: type[A], handler: Callable[[FlowRoom, A, Ctx], dict[str, Any]] | None,
          **options: Any) -> ToolSpec[Any]:
    """A ToolSpec whose handler the type checker holds to its input model."""
    return ToolSpec(name, description, input_model, handler, **options)


_TABLE: list[ToolSpec[Any]] = [
    _tool("zcor_memory_write",
             "Save a memory or update one. Omit id to create a new node; pass an existing id to "
             "update it. Use parentId to file it under a related node (a person, a topic). Put the "
             "user's original words in sourceMessage when the memory comes from a message.",
             I.WriteArgs, memories.write, mutates=True),
    _tool("zcor_memory_read",
             "Read one memory in full by id (superseded ones too), with whether it is important, "
             "its parent's title and how many children it has.",
             I.IdArgs, memories.read),
    _tool("zcor_memory_delete",
             "Delete a memory that is wrong or no longer wanted. Refused while it has children, is "
             "linked from a relationship or replaces a superseded memory. Prefer zcor_memory_supersede "
             "for memories that are merely out of date.",
             I.IdArgs, memories.delete, mutates=True),
    _tool("zcor_memory_children",
             "List the root memories (no parentId) or the direct children of parentId, oldest first.",
             I.ChildrenArgs, memories.children),
    _tool("zcor_memory_trace",
             "Show where a memory sits: the path from its root down to it, and its direct children.",
             I.TraceArgs, memories.trace),
    _tool("zcor_memory_important",
             "Mark (important=true) or unmark a memory as important. Important memories are shown to "
             "you in every conversation. At most 5: a 6th mark unmarks the earliest one and tells you "
             "which.",
             I.ImportantArgs, important.important, mutates=True),
    _tool("zcor_memory_query",
             "Find current memories whose title or content contains every keyword (exact substrings, "
             "case-insensitive, no synonyms), optionally within an updatedAt range. Newest first, "
             "paged with limit/offset.",
             I.QueryArgs, memories.query),
    _tool("zcor_memory_merge",
             "Merge two or more memories about the same thing into one new memory. The old ones are "
             "kept as superseded; their children, relationship links and important marks move to the "
             "new one.",
             I.MergeArgs, memories.merge, mutates=True),
    _tool("zcor_memory_supersede",
             "Mark memories as out of date, replaced by an existing current memory (replacementId). "
             "They stay readable by id but drop out of recall and queries.",
             I.SupersedeArgs, memories.supersede, mutates=True),
    _tool("zcor_relationship_read",
             "Read what you know about a person by personId: name, aliases, relationship, affinity "
             "(-100..100) and why.",
             I.PersonArgs, relationships.read),
    _tool("zcor_relationship_query",
             "Find people by words in name, aliases, relationship or reason, by affinity range or by "
             "updatedAt range. Newest first, paged.",
             I.RelQueryArgs, relationships.query),
    _tool("zcor_relationship_write",
             "Create or update a person's relationship record. Change affinity only on new evidence "
             "from an interaction, and say what it was in reason.",
             I.RelWriteArgs, relationships.write, mutates=True),
    _tool("zcor_relationship_delete",
             "Delete a person's relationship record (history keeps a copy).",
             I.PersonArgs, relationships.delete, mutates=True),
    _tool("zcor_memory_history",
             "Search the log of every memory operation (who did what, before and after), newest "
             "first, by words anywhere in the record and by time.",
             I.HistoryArgs, history.history, reads_log=True, runs="long"),
    _tool("zcor_memory_backup",
             "Write a timestamped backup of the whole Memory and return its file name.",
             I.NoArgs, None, flow=backups.BackupSteps, runs="long"),
    _tool("zcor_memory_restore",
             "Replace the Memory with a backup from backups/ (a file name from zcor_memory_backup). "
             "The current state is backed up first; the result names that backup.",
             I.RestoreArgs, backups.restore, mutates=True, flow=backups.RestoreSteps,
             runs="long"),
    _tool("zcor_synonyms_add",
             "Teach recall that some words mean the same thing (e.g. a nickname and a name). Adds "
             "one group of two or more terms.",
             I.SynonymsAddArgs, synonyms.add, mutates=True),
    _tool("zcor_memory_search",
             "Search memories by keywords when zcor_memory_query finds nothing or the wording may "
             "differ: keywords are expanded with synonyms, matched against memory titles (not "
             "bodies), and a model picks at most 5 relevant results. Slower than query: it calls "
             "an LLM.",
             I.SearchArgs, None, flow=search.SearchSteps, runs="network"),
]

TOOLS: dict[str, ToolSpec[Any]] = {t.name: t for t in _TABLE}


def declared_tools(relationship_memory: bool, role: str) -> list[ToolSpec[Any]]:
    """The tools a caller may see and call: operators get all; the model loses the
    relationship tools when relationship memory is off."""
    if role == "operator" or relationship_memory:
        return list(_TABLE)
    return [t for t in _TABLE if t.name not in RELATIONSHIP_TOOLS]
