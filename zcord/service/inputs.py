"""Input models of the tools: the JSON Schema a model sees and the checks every call passes.

Field names are the spec's camelCase parameter names. Omitted and null are different for
some parameters (parentId, sourceMessage, memoryNodeId, keywords on update); handlers tell
them apart with `model_fields_set`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StringConstraints,
    model_validator,
)
from pydantic.alias_generators import to_camel

from ..core.errors import InvalidArgument

MAX_TITLE = 200
MAX_CONTENT = 20_000
MAX_SOURCE = 20_000
MAX_KEYWORD = 100
MAX_KEYWORDS = 50
MAX_ID = 200
MAX_SHORT_TEXT = 2_000
MAX_TERMS = 50


def _no_surrogates(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text contains a lone surrogate code point, which is not valid Unicode") from None
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty or only whitespace")
    return value


Text = Annotated[str, AfterValidator(_no_surrogates)]
Word = Annotated[str, StringConstraints(min_length=1, max_length=MAX_KEYWORD), AfterValidator(_no_surrogates),
                 AfterValidator(_not_blank)]
Id = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID), AfterValidator(_no_surrogates),
               AfterValidator(_not_blank)]
Title = Annotated[str, StringConstraints(max_length=MAX_TITLE), AfterValidator(_no_surrogates),
                  AfterValidator(_not_blank)]
Content = Annotated[str, StringConstraints(max_length=MAX_CONTENT), AfterValidator(_no_surrogates)]
Source = Annotated[str, StringConstraints(max_length=MAX_SOURCE), AfterValidator(_no_surrogates)]
Reason = Annotated[str, StringConstraints(max_length=MAX_SHORT_TEXT), AfterValidator(_no_surrogates),
                   AfterValidator(_not_blank)]
ShortText = Annotated[str, StringConstraints(max_length=MAX_SHORT_TEXT), AfterValidator(_no_surrogates)]
Time = Annotated[str, StringConstraints(max_length=64)]
Limit = Annotated[StrictInt, Field(ge=1, le=100)]
Offset = Annotated[StrictInt, Field(ge=0)]
Affinity = Annotated[StrictInt, Field(ge=-100, le=100)]
Keywords = Annotated[list[Word], Field(max_length=MAX_KEYWORDS)]


class Args(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=False, extra="forbid",
                              frozen=True)

    def given(self, name: str) -> bool:
        """True when the caller passed this parameter (null counts as passed)."""
        return name in self.model_fields_set


class NoArgs(Args):
    pass


class WriteArgs(Args):
    title: Title = Field(description="Short title (≤200 chars). Recall matches words in titles.")
    content: Content = Field(description="The memory itself (≤20,000 chars).")
    id: Id | None = Field(None, description="Omit to create; give an existing id to update it.")
    keywords: Keywords | None = Field(
        None, description="Retrieval words. Omitted on create: taken from the title. Omitted on "
                          "update: kept. null on update: taken from the title again.")
    parent_id: Id | None = Field(
        None, description="Parent node id. Omitted: new node is a root, update keeps the parent. "
                          "null on update: move to root.")
    source_message: Source | None = Field(
        None, description="Original message text this memory came from (≤20,000 chars). null clears.")


class IdArgs(Args):
    id: Id = Field(description="Node id, e.g. m17.")


PageLimit = Annotated[StrictInt, Field(ge=1, le=100_000)]


class ChildrenArgs(Args):
    parent_id: Id | None = Field(None, description="Omit (or null) for the root nodes.")
    limit: PageLimit | None = Field(None, description="At most this many (1..100000); omit for all.")
    offset: Offset = Field(0, description="Skip this many (paging), default 0.")


class TraceArgs(IdArgs):
    limit: PageLimit | None = Field(None, description="At most this many children (1..100000); omit for all.")
    offset: Offset = Field(0, description="Skip this many children (paging), default 0.")


class ImportantArgs(Args):
    id: Id = Field(description="Node id.")
    important: StrictBool = Field(description="true to mark, false to unmark.")


class QueryArgs(Args):
    keywords: Keywords | None = Field(
        None, description="Every keyword must occur in the title or content (case-insensitive).")
    from_: Time | None = Field(None, alias="from",
                               description="Earliest updatedAt, ISO 8601 with offset, inclusive.")
    to: Time | None = Field(None, description="Latest updatedAt, ISO 8601 with offset, inclusive.")
    limit: Limit = Field(20, description="1..100, default 20.")
    offset: Offset = Field(0, description="Skip this many results (paging), default 0.")
    include_superseded: StrictBool = Field(False, description="Also return superseded memories.")


class MergeArgs(Args):
    ids: Annotated[list[Id], Field(min_length=2, max_length=100)] = Field(
        description="Two or more current node ids to merge.")
    title: Title = Field(description="Title of the merged memory.")
    content: Content = Field(description="Full content of the merged memory.")
    keywords: Keywords | None = Field(None, description="Omitted: taken from the title.")
    reason: Reason = Field(description="Why these memories are merged.")


class SupersedeArgs(Args):
    ids: Annotated[list[Id], Field(min_length=1, max_length=100)] = Field(
        description="Current node ids that are out of date.")
    replacement_id: Id = Field(description="The current node that replaces them.")
    reason: Reason = Field(description="Why they are replaced.")


class PersonArgs(Args):
    person_id: Id = Field(description="Stable id of the person, e.g. qq:12345.")


class RelQueryArgs(Args):
    keywords: Keywords | None = Field(
        None, description="Every keyword must occur in name, aliases, relationship or reason.")
    from_: Time | None = Field(None, alias="from", description="Earliest updatedAt, ISO 8601 with offset.")
    to: Time | None = Field(None, description="Latest updatedAt, ISO 8601 with offset.")
    min_affinity: Affinity | None = Field(None, description="Lowest affinity, -100..100.")
    max_affinity: Affinity | None = Field(None, description="Highest affinity, -100..100.")
    limit: Limit = Field(20, description="1..100, default 20.")
    offset: Offset = Field(0, description="Paging offset, default 0.")


class RelWriteArgs(Args):
    person_id: Id = Field(description="Stable id of the person.")
    name: Annotated[str, StringConstraints(max_length=MAX_TITLE), AfterValidator(_no_surrogates),
                    AfterValidator(_not_blank)] = Field(description="The person's name.")
    relationship: ShortText = Field(description="Free text: who they are to you.")
    affinity: Affinity = Field(description="Integer -100..100; 0 is neutral.")
    reason: Reason = Field(description="The evidence for this affinity.")
    aliases: Annotated[list[Word], Field(max_length=MAX_KEYWORDS)] | None = Field(
        None, description="Other names. Omitted on update: kept.")
    memory_node_id: Id | None = Field(
        None, description="A current node about this person. null unlinks; omitted keeps.")


class HistoryArgs(Args):
    keywords: Keywords | None = Field(None, description="Every keyword must occur somewhere in the record.")
    from_: Time | None = Field(None, alias="from", description="Earliest operation time, ISO 8601 with offset.")
    to: Time | None = Field(None, description="Latest operation time, ISO 8601 with offset.")
    limit: Limit = Field(20, description="1..100, default 20.")
    offset: Offset = Field(0, description="Paging offset, default 0.")


class OperatorHistoryArgs(HistoryArgs):
    """`zcor/history/query` (operators): the history tool's parameters and server-side filters."""

    changes_only: StrictBool = Field(False, description="Only records that changed something.")
    actor: Literal["model", "operator", "system"] | None = Field(None, description="Only this actor's calls.")
    tool: Annotated[str, StringConstraints(min_length=1, max_length=MAX_KEYWORD),
                    AfterValidator(_no_surrogates)] | None = Field(None, description="Only calls of this tool.")
    target: Id | None = Field(None, description="Only records whose changes target this memory id or "
                                                "personId, or that were called with it as id / personId.")
    origin: Annotated[str, StringConstraints(min_length=1, max_length=200), AfterValidator(_no_surrogates),
                      AfterValidator(_not_blank)] | None = Field(
        None, description="Only records whose origin names this sender key (e.g. qq:42).")


class RestoreArgs(Args):
    backup_file: Annotated[str, StringConstraints(min_length=1, max_length=255),
                           AfterValidator(_no_surrogates)] = Field(
        description="A file name from backups/, as returned by zcor_memory_backup.")


class SynonymsAddArgs(Args):
    terms: Annotated[list[Word], Field(min_length=2, max_length=MAX_TERMS)] = Field(
        description="Two or more words that mean the same thing.")


class SearchArgs(Args):
    keywords: Annotated[list[Word], Field(min_length=1, max_length=MAX_KEYWORDS)] = Field(
        description="Words to look for in memory titles (synonyms are added automatically).")


class SynonymsHeldParams(Args):
    """`zcor/synonyms/held`: checked inside the recorded call (a refusal is logged too)."""

    action: Literal["accept", "discard"] = Field(description="accept or discard.")
    held: StrictInt | None = Field(None, description="The index of a held group.")
    index: StrictInt | None = Field(None, description="The index of a group the bot added (discard only).")

    @model_validator(mode="after")
    def _one(self) -> SynonymsHeldParams:
        if self.given("held") == self.given("index"):
            raise InvalidArgument("give held (the index of a held group) or index (a group the bot added), "
                                  "not both", field="held")
        if self.action == "accept" and self.given("index"):
            raise InvalidArgument("only a held group can be accepted: the bot's other groups are in use already",
                                  field="index")
        return self
