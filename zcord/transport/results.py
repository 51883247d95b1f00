"""The result models of zcord's methods and tools: what each answer holds, as TypedDicts.

The wire carries JSON objects; a TypedDict names their keys and types for the type checker
without changing a byte of them (the daemon still sends the dicts the Service builds, and
the clients still return plain dicts, so `result["ids"]` keeps working). The method table
(zcord.transport.methods) declares each method's result model beside its params model,
the tool table's entry names its tool's here (TOOL_RESULTS), and the generated clients
(zcord.transport.client_calls) return them.

Keys a result carries only sometimes are NotRequired; nested records that are themselves
documented in SPEC.md (a memory, a relationship, an operation record) are `Record`s.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict, TypeVar, cast

Record = dict[str, Any]
"""A JSON object the result passes on as it is (a memory, a relationship, a log record)."""

T = TypeVar("T")


def shaped(model: type[T], value: Any) -> T:
    """`value` as the result model says it is: the Service builds these dicts (the wire tests
    hold them to it); a cast, written once, that names the model."""
    return cast(T, value)


class Empty(TypedDict):
    """`{}`."""


# -- MCP and the bot's methods ---------------------------------------------------------------


class InitializeResult(TypedDict):
    protocolVersion: str
    capabilities: dict[str, Any]
    serverInfo: dict[str, str]
    instructions: NotRequired[str]


class ToolsListResult(TypedDict):
    tools: list[Record]


class ToolCallResult(TypedDict):
    content: list[Record]
    structuredContent: NotRequired[Record]
    isError: bool


class PromptsListResult(TypedDict):
    prompts: list[Record]


class PromptGetResult(TypedDict):
    description: str
    messages: list[Record]


class ResourcesListResult(TypedDict):
    resources: list[Record]


class ResourceTemplatesResult(TypedDict):
    resourceTemplates: list[Record]


class ResourceReadResult(TypedDict):
    contents: list[Record]


class TextResult(TypedDict):
    """`{text}`: zcor/prefix, zcor/metrics."""

    text: str


class RecallResult(TypedDict):
    ids: list[str]
    blocked: NotRequired[list[str]]


class ContextResult(TypedDict):
    text: str
    ids: list[str]


class RecordedResult(TypedDict):
    recorded: bool


class LlmResult(TypedDict):
    protocol: str
    baseUrl: str
    model: str
    timeoutSeconds: float
    promptCacheKey: str


# -- operator methods -------------------------------------------------------------------------


class StatusResult(TypedDict):
    memoryDir: str
    nodes: int
    currentNodes: int
    relationships: int
    important: list[str]
    historyChanges: int
    operations: int
    synonymGroups: int
    personaEmpty: bool
    journaledChanges: int
    pendingReview: int
    recallSessions: int
    usageToday: Record
    socket: str | None
    version: str
    pid: int
    uptimeSeconds: float
    connections: int
    subscribers: int


class UsageResult(TypedDict):
    sessions: list[Record]
    days: list[Record]
    totals: Record
    charsPerToken: float


class LlmConfigResult(TypedDict):
    """config.json's `llm`, and whether an API key is set (never the key)."""

    protocol: Literal["openai", "anthropic"]
    baseUrl: str
    model: str
    timeoutSeconds: float
    promptCacheKey: Literal["auto", "on", "off"]
    apiKeySet: bool
    apiKeyWithheld: bool
    apiKeyWithheldReason: str | None


class Config(TypedDict):
    """The public config (camelCase keys, never the API key): SPEC's config.json, as
    zcord.core.config.Config dumps it (a unit test holds the two to the same keys)."""

    recallBudget: int
    relationshipMemory: bool
    recallSenders: bool
    recallRanking: Literal["weighted", "seed"]
    recallLogEntries: int
    recallLogBytes: int
    llm: LlmConfigResult
    operatorGroup: str
    maxConnections: int
    operatorConnections: int
    maxConnectionsPerUid: int
    maxConnectionsPerPid: int
    initTimeoutSeconds: float
    botBackupIntervalSeconds: int
    maxBotBackups: int
    botRestoreIntervalSeconds: int
    maxBotSynonymGroups: int
    botLogBytesPerMinute: int
    botUsageReportsPerMinute: int
    maxRestoreBytes: int
    maxRestoreNodes: int
    maxRestoreRelationships: int
    maxRestoreDepth: int
    defaultTrust: Literal["trusted", "normal", "untrusted", "blocked"]
    privateScope: Literal["session", "everywhere"]


class SubscribedResult(TypedDict):
    subscribed: bool


class BackupItem(TypedDict):
    backupFile: str
    size: int
    modifiedAt: str
    bot: bool


class BackupsResult(TypedDict):
    items: list[BackupItem]


class BackupPreviewResult(TypedDict):
    backupFile: str
    memories: Record
    relationships: Record
    important: Record


class SynonymListing(TypedDict):
    groups: list[list[str]]
    botAdded: list[int]
    held: list[list[str]]


class SynonymGroupsResult(TypedDict):
    groups: int


class SynonymsHeldResult(TypedDict):
    action: str
    terms: list[str]
    groups: int
    held: int


class RecallExplainResult(TypedDict):
    ranking: str
    segmented: list[str]
    synonymTerms: list[str]
    expanded: list[str]
    hits: list[Record]
    senders: list[str]  # the speakers (relationship personIds) whose lines lead the header
    header: str
    ids: list[str]  # the memories the header shows


class Page(TypedDict):
    """A page of items: `{items, total, nextOffset}` (nextOffset None on the last page)."""

    items: list[Record]
    total: int
    nextOffset: int | None


class RecallLogResult(Page):
    session: str
    kept: int  # the batches a session's log keeps (config recallLogEntries, at least 1)


class ConsolidateListResult(Page):
    scan: Record


class ConsolidateDismissResult(TypedDict):
    dismissed: list[str]
    remembered: int


class SnapshotResult(TypedDict):
    changeId: int
    bytes: int


class PersonaResult(TypedDict):
    text: str
    empty: bool
    path: str


class Planned(TypedDict):
    """What a planned revert gives (zcord.service.revert_plan: a revert, a revert of a
    sender's operations, a rejection of held ones): its changes; with `preview`, or when
    conflicts stop it, `ok`, `message` and the `conflicts`; `forced` when run over them."""

    changes: list[Record]
    forced: NotRequired[bool]
    ok: NotRequired[bool]
    message: NotRequired[str]
    conflicts: NotRequired[list[Record]]


class RevertResult(Planned):
    """zcor/history/revert: the new operation, or with preview `{seq, ok, conflicts, changes}`."""

    seq: int
    reverted: NotRequired[int]


class ReinstateResult(TypedDict):
    seq: int
    id: str
    changeId: int
    changes: list[Record]


class VersionsResult(TypedDict):
    id: str
    items: list[Record]


class StateAtResult(TypedDict):
    at: str
    undoneChanges: int
    nodes: list[Record]
    relationships: list[Record]
    important: list[str]


class RevertOriginResult(Planned):
    sender: str
    seq: NotRequired[int]
    seqs: NotRequired[list[int]]
    reverted: NotRequired[list[int]]
    shared: list[int]


class TrustListing(TypedDict):
    default: str
    senders: list[Record]


class TrustSetResult(TypedDict):
    sender: str
    level: str
    explicit: bool


class ReviewListResult(TypedDict):
    items: list[Record]
    total: int
    nextOffset: NotRequired[int]


class ReviewApproveResult(TypedDict):
    approved: list[int]


class ReviewRejectResult(Planned):
    """The new operation, or with preview the planned changes and conflicts."""

    seq: NotRequired[int]
    ids: NotRequired[list[int]]
    rejected: NotRequired[list[int]]


class ErasedMemory(TypedDict):
    id: str
    title: str | None  # None: deleted before (its versions are in the history)
    current: bool


class ErasureCounts(TypedDict):
    memories: int
    relationships: int
    trustEntries: int
    recordsAbout: int


class ErasureResult(TypedDict):
    """zcor/erase: with `preview` what would go (`places`: file → lines or records naming
    them, -1 for a derived file rebuilt); else `erased` with the tombstone's `subject` and
    `seq` and what was rewritten (backups, history segments, log records, review items)."""

    preview: NotRequired[bool]
    erased: NotRequired[bool]
    person: str
    memories: list[ErasedMemory]
    relationships: list[str]
    trust: list[str]
    counts: ErasureCounts
    places: dict[str, int]
    erasedBefore: list[str]
    irreversible: bool
    note: str
    subject: NotRequired[str]
    seq: NotRequired[int]
    backups: NotRequired[int]
    historySegments: NotRequired[int]
    records: NotRequired[int]
    review: NotRequired[int]
    seconds: dict[str, float]


class SubjectMemory(TypedDict):
    id: str
    why: Literal["linked", "only them", "with others"]
    current: bool
    title: NotRequired[str]
    content: NotRequired[str]
    scope: NotRequired[dict[str, str]]


class SubjectHeld(TypedDict):
    seq: int
    at: str | None
    tool: str | None
    origin: Record | None
    changes: list[Record] | None


SubjectRecord = TypedDict("SubjectRecord", {
    "seq": int, "at": str, "actor": str, "tool": str, "as": Literal["speaker", "present", "named"],
    "params": Any, "changes": list[Record]})


class SubjectResult(TypedDict):
    """zcor/subject: everything the Memory holds about or from a person, and `report`, the
    same as readable text."""

    person: str
    relationships: list[Record]
    trust: str | None
    memories: list[SubjectMemory]
    held: list[SubjectHeld]
    records: list[SubjectRecord]
    report: str


class ScopeSetResult(TypedDict):
    """zcor/scope/set: the operation and the memory's scope now ("everywhere" or {session})."""

    seq: int
    id: str
    scope: Any

class ImportCounts(TypedDict):
    created: int
    updated: int
    unchanged: int


class ImportResult(TypedDict):
    """zcor/import: what the file made or would make (`preview`): memory counts, the items
    (at most 20,000; contents in a preview only), what was skipped or not marked important, the
    relationships' counts and the synonym groups added."""

    format: str
    name: str
    origin: str
    persona: str | None
    personaWritten: bool
    unkept: dict[str, int]
    preview: bool
    seq: int | None
    created: int
    updated: int
    unchanged: int
    items: list[Record]
    itemsTotal: int
    skipped: list[Record]
    important: list[str]
    notMarked: list[Record]
    relationships: ImportCounts
    synonymGroups: int


class UploadResult(TypedDict):
    uploadId: str
    size: int


class ExportFile(TypedDict):
    path: str
    chars: int
    text: NotRequired[str]  # in the reply when the export is small enough; else zcor/export/read


class ExportResult(TypedDict):
    format: str
    memories: int
    relationships: int
    important: list[str]
    exportedAt: str
    exportId: str | None
    files: list[ExportFile]


class ExportReadResult(TypedDict):
    text: str
    nextOffset: int | None


# -- tools (zcord.service.tools) --------------------------------------------------------------


class Held(TypedDict):
    """What a write's result gains when a strict sender's change is held for review."""

    review: NotRequired[Literal["pending"]]
    reviewNote: NotRequired[str]


class Node(TypedDict):
    """A memory as SPEC §1 gives it (`scope`: an operator's answer, for a memory of a private
    conversation)."""

    id: str
    title: str
    content: str
    keywords: list[str]
    parentId: str | None
    sourceMessage: str | None
    createdAt: str
    updatedAt: str
    supersededBy: str | None
    supersedeReason: str | None
    scope: NotRequired[dict[str, str]]


class Relationship(TypedDict):
    """A relationship as SPEC §1 gives it."""

    personId: str
    name: str
    aliases: list[str]
    relationship: str
    affinity: int
    reason: str
    memoryNodeId: str | None
    createdAt: str
    updatedAt: str


class Twin(TypedDict):
    id: str
    title: str
    score: float


class MemoryWriteResult(Node, Held):
    created: bool
    similar: NotRequired[list[Twin]]  # a new memory that nearly repeats these current ones
    note: NotRequired[str]


class MemoryReadResult(Node):
    important: bool
    parentTitle: str | None
    childCount: int


class MemoryDeleteResult(Held):
    id: str
    deleted: bool
    wasImportant: bool


class MemoryChildrenResult(TypedDict):
    parentId: str | None
    items: list[Record]
    total: int
    nextOffset: int | None
    truncated: NotRequired[bool]  # the page was cut to fit a reply (zcord.transport.replies)


class MemoryTraceResult(TypedDict):
    id: str
    path: list[Record]
    children: list[Record]
    childrenTotal: int
    childrenNextOffset: int | None
    truncated: NotRequired[bool]  # the page was cut to fit a reply (zcord.transport.replies)


class MemoryImportantResult(Held):
    id: str
    important: bool
    changed: bool
    importantIds: list[str]
    replaced: NotRequired[Record]
    reminder: NotRequired[str]


class QueryResult(TypedDict):
    items: list[Record]
    total: int
    nextOffset: int | None
    truncated: NotRequired[bool]  # the page was cut to fit a reply (zcord.transport.replies)


class MemoryMergeResult(Held):
    id: str
    node: Node
    superseded: list[str]
    movedChildren: list[str]
    relinkedRelationships: list[str]
    important: bool
    importantIds: list[str]


class MemorySupersedeResult(Held):
    replacementId: str
    superseded: list[str]
    importantIds: list[str]


class RelationshipWriteResult(Relationship, Held):
    created: bool


class RelationshipDeleteResult(Held):
    personId: str
    deleted: bool


class BackupResult(Held):
    backupFile: str


class RestoreResult(Held):
    restoredFrom: str
    backupFile: str
    nodes: int
    relationships: int
    important: list[str]
    heldAgain: NotRequired[list[str]]  # rejected versions the restore brought back, held again


SynonymsAddResult = TypedDict("SynonymsAddResult", {"terms": list[str], "added": bool, "class": list[str],
                                                     "held": NotRequired[bool],
                                                     "review": NotRequired[Literal["pending"]],
                                                     "reviewNote": NotRequired[str]})


class SearchResult(TypedDict):
    items: list[Record]
    candidateCount: int


TOOL_RESULTS: dict[str, Any] = {
    "zcor_memory_write": MemoryWriteResult,
    "zcor_memory_read": MemoryReadResult,
    "zcor_memory_delete": MemoryDeleteResult,
    "zcor_memory_children": MemoryChildrenResult,
    "zcor_memory_trace": MemoryTraceResult,
    "zcor_memory_important": MemoryImportantResult,
    "zcor_memory_query": QueryResult,
    "zcor_memory_merge": MemoryMergeResult,
    "zcor_memory_supersede": MemorySupersedeResult,
    "zcor_relationship_read": Relationship,
    "zcor_relationship_query": QueryResult,
    "zcor_relationship_write": RelationshipWriteResult,
    "zcor_relationship_delete": RelationshipDeleteResult,
    "zcor_memory_history": QueryResult,
    "zcor_memory_backup": BackupResult,
    "zcor_memory_restore": RestoreResult,
    "zcor_synonyms_add": SynonymsAddResult,
    "zcor_memory_search": SearchResult,
}
"""Each tool's result model, by name (the generated clients' typed tool calls return these)."""
