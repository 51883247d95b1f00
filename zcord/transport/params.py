"""The params models of the `zcor/…` methods whose parameters the transport checks itself
(pydantic v2, like the tools' Args in zcord.service.inputs). A method whose parameters the
Service checks (its own Args model, e.g. `zcor/history/query`) has no model here.

A bad value is refused as a tool's bad argument is: `invalid_argument`, naming the field
(zcord.service.calls.invalid_from), and nothing runs.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic.alias_generators import to_camel

from ..core import protocol as P
from ..core.errors import InvalidArgument
from ..core.origin import MAX_SENDER
from ..core.senderkey import sender_key
from ..retrieval.recall import MAX_SESSION_CHARS
from ..service.calls import invalid_from, parse_time_filter
from ..service.inputs import Args, OperatorHistoryArgs, SynonymsHeldParams
from ..service.review import MAX_IDS, MAX_PAGE_LIMIT, PAGE_LIMIT
from ..service.usage import KEEP_DAYS


class Params(Args):
    """Unknown parameters are ignored (as these methods always did)."""

    model_config = ConfigDict(extra="ignore")


class NoParams(Params):
    pass


class StrictNoParams(Args):
    """No parameters at all: any is refused by name."""


class BackupPreviewParams(Params):
    backup_file: StrictStr = Field(description="A file name from backups/ (zcor/backups/list).")


def _refused_unless(kind: type, message: str, field: str) -> BeforeValidator:
    """A value of `kind` (or None) passes; any other is refused with zcord's own sentence."""

    def check(value: Any) -> Any:
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            raise InvalidArgument(message, field=field)
        return value

    return BeforeValidator(check)


class RecallExplainParams(Params):
    text: StrictStr = Field(description="The text to explain, as a batch of one external event.")
    sender_key: Annotated[str | None, _refused_unless(str, "senderKey must be a string", "senderKey")] = Field(
        None, description="Whose relationship leads the header.")


class RecallLogParams(Args):
    session: StrictStr = Field(description="The session, as the bot names it in zcor/recall.")
    limit: StrictInt = Field(50, ge=1, le=200, description="Batches per page, newest first.")
    offset: StrictInt = Field(0, ge=0, description="Batches to skip.")
    before: StrictStr | None = Field(None, description="Only batches recalled at or before this ISO 8601 time.")


class ConsolidateListParams(Args):
    limit: StrictInt = Field(20, ge=1, le=100, description="Proposals per page.")
    offset: StrictInt = Field(0, ge=0, description="Proposals to skip.")
    kind: StrictStr | None = Field(None, description='"twins" or "chain"; omitted: both.')


class ConsolidateDismissParams(Args):
    ids: list[StrictStr] = Field(description="The proposal's ids (its `ids`), remembered as dismissed.")


class ConfigSetParams(Params):
    patch: dict[str, Any] = Field(description='Config changes, e.g. {"relationshipMemory": false}.')


class HistoryVersionsParams(Args):
    id: Annotated[str, _refused_unless(str, "id must be a memory id or a personId", "id")] = Field(
        description="A memory id or a personId.")


class HistoryAtParams(Args):
    time: StrictStr = Field(description="An ISO 8601 time with its UTC offset.")


class _Person(Args):
    """Exactly one of sender, personId: the person an erase or subject request names."""

    sender: StrictStr | None = Field(None, description="The person's sender key, e.g. qq:42.")
    person_id: StrictStr | None = Field(None, description="The person's relationship personId.")

    @model_validator(mode="after")
    def _one_person(self) -> _Person:
        given = [k for k, v in (("sender", self.sender), ("personId", self.person_id)) if v is not None]
        if len(given) != 1:
            raise InvalidArgument("give exactly one of sender or personId", field="sender")
        if not sender_key(self.person) or len(self.person) > MAX_SENDER:
            raise InvalidArgument(f"{given[0]} must be a non-empty string of at most {MAX_SENDER} characters",
                                  field=given[0])
        return self

    @property
    def person(self) -> str:
        """The sender key or personId given."""
        return self.sender if self.sender is not None else self.person_id or ""

    @property
    def field(self) -> str:
        """The parameter that named the person (what an error about them names)."""
        return "sender" if self.sender is not None else "personId"


class EraseParams(_Person):
    """`zcor/erase` (zcord.service.erasure): exactly one of sender, personId."""

    preview: StrictBool = Field(False, description="Only list what would go; nothing changes.")


class SubjectParams(_Person):
    """`zcor/subject` (zcord.service.erasure): exactly one of sender, personId."""


class ScopeSetParams(Args):
    """`zcor/scope/set` (zcord.service.scope): a memory and its new scope."""

    id: StrictStr = Field(description="A memory id, e.g. m17.")
    scope: Any = Field(description='"everywhere", or {"session": NAME}.')


class ImportParams(Args):
    """`zcor/import` (zcord.service.interop): the file as `data` or as a finished upload."""

    data: StrictStr | None = Field(None, description="The file: its text, or base64 with encoding base64.")
    upload_id: StrictStr | None = Field(None, description="A finished zcor/import/upload, instead of data.")
    encoding: Literal["text", "base64"] = Field("text", description="How data (or the upload) holds the file.")
    name: StrictStr = Field("import", description="The file's name: the origin import:<name>, and what a "
                                                  "second import of the same file updates by.")
    format: Literal["worldinfo", "card", "lorebook", "jsonl"] | None = Field(
        None, description="Insist on a format (default: found from the content).")
    preview: StrictBool = Field(False, description="Show what would be created; change nothing.")
    parent_id: StrictStr | None = Field(None, description="Put the imported roots under this memory.")
    persona: StrictBool = Field(False, description="Write a card's proposed PERSONA.md too.")


class UploadParams(Args):
    data: StrictStr = Field(description="The next piece of the file (base64 or text, as zcor/import's encoding).")
    upload_id: StrictStr | None = Field(None, description="The upload to add to; none starts one.")


class ExportParams(Args):
    format: Literal["lorebook", "worldinfo", "jsonl", "markdown"] = Field(
        "jsonl", description="lorebook (lorebook_v3), worldinfo (SillyTavern), jsonl (zcor) or markdown.")


class ExportReadParams(Args):
    export_id: StrictStr = Field(description="The exportId zcor/export returned.")
    file: StrictInt = Field(0, description="Which of its files (an index).")
    offset: StrictInt = Field(0, description="From this character (the last piece's nextOffset).")
MAX_REPORTED = 10**9
"""The largest count one usage report may carry (no prompt is a billion tokens long)."""
Count = Annotated[StrictInt, Field(ge=0, le=MAX_REPORTED)]
SHORT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,31}")


def _unicode(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text contains a lone surrogate code point, which is not valid Unicode") from None
    return value


def _short_name(value: str) -> str:
    if not SHORT_NAME.fullmatch(value):
        raise ValueError("must be a short name: up to 32 letters, digits, '.', '_', ':' or '-', e.g. \"chat\"")
    return value


Session = Annotated[str, StringConstraints(min_length=1, max_length=MAX_SESSION_CHARS), AfterValidator(_unicode)]
ShortName = Annotated[StrictStr, AfterValidator(_short_name)]


class UsageReportParams(Args):
    """`zcor/usage/report`: one provider call's usage, as the provider reported it."""

    session: Session = Field(description="The session the call was made for (as in zcor/recall).")
    front_end: ShortName | None = Field(None, description='Who reports: "chat", "endpoint", "astrbot", or another short name.')
    protocol: ShortName | None = Field(None, description='The provider protocol, e.g. "openai" or "anthropic".')
    model: Annotated[str, StringConstraints(max_length=200), AfterValidator(_unicode)] | None = Field(
        None, description="The model that answered.")
    input_tokens: Count = Field(description="The whole prompt in tokens, cached and cache-written tokens included.")
    cached_tokens: Count = Field(description="Tokens of the prompt read from the provider's prompt cache.")
    cache_write_tokens: Count = Field(0, description="Tokens written to the cache (Anthropic's cache_creation_input_tokens).")
    output_tokens: Count = Field(description="Tokens the model wrote.")
    prefix_chars: Count = Field(0, description="Characters of zcor's system prefix in the prompt.")
    header_chars: Count = Field(0, description="Characters of zcor's recall header in the prompt.")


class UsageParams(Args):
    """`zcor/usage`: the usage of the last `days` days, of one session or all."""

    session: Session | None = Field(None, description="One session only.")
    days: Annotated[StrictInt, Field(ge=1, le=KEEP_DAYS)] = Field(30, description=f"Days back, today included (1..{KEEP_DAYS}).")



# -- the bot's and MCP's methods: a bad param is a JSON-RPC -32602, worded as P.str_param words it


def _proto_str(value: Any, info: ValidationInfo) -> Any:
    """A required string param of a protocol method, refused as P.str_param refuses it."""
    if isinstance(value, str):
        return value
    name = to_camel(info.field_name or "")
    return P.str_param({name: value}, name)


ProtoStr = Annotated[str, BeforeValidator(_proto_str)]
"""A required string (give it a default of None with validate_default: missing is `… is required`)."""


def _proto_args(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise P.RpcError(P.INVALID_PARAMS, "Invalid params: arguments must be an object of strings",
                         {"field": "arguments"})
    return value


def _events(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise P.RpcError(P.INVALID_PARAMS, "Invalid params: events must be an array of "
                                           "{text, origin, ts?, source?, senderKey?}", {"field": "events"})
    return value


def _protocol_version(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise P.RpcError(P.INVALID_PARAMS, "Invalid params: protocolVersion must be a string")
    return value


class InitializeParams(Params):
    """MCP `initialize` (the role is read from capabilities.experimental.zcor.role)."""

    protocol_version: Annotated[str | None, BeforeValidator(_protocol_version)] = Field(
        None, description="The MCP version the client speaks.")
    capabilities: Any = Field(None, description="The client's capabilities (experimental.zcor.role).")


class ToolCallParams(Params):
    """MCP `tools/call`; the arguments are the tool's (checked by its input model)."""

    name: ProtoStr = Field(None, validate_default=True, description="The tool's name.")
    arguments: Any = Field(None, description="The tool's arguments (its input model checks them).")
    meta: Any = Field(None, alias="_meta", description="zcor/view and zcor/origin.")


class PromptGetParams(Params):
    name: ProtoStr = Field(None, validate_default=True, description="zcor_context or zcor_persona.")
    arguments: Annotated[dict[str, str], BeforeValidator(_proto_args)] = Field(
        None, validate_default=True, description="The prompt's arguments.")


class ResourceReadParams(Params):
    uri: ProtoStr = Field(None, validate_default=True, description="zcor://prefix or zcor://context/{session}.")


class RecallParams(Params):
    """`zcor/recall`: the session's latest events (zcord.service.inputs' events rules check each)."""

    session: ProtoStr = Field(None, validate_default=True, description="The bot's name for the conversation.")
    events: Annotated[list[Any], BeforeValidator(_events)] = Field(
        None, validate_default=True, description="{text, origin, ts?, source?, senderKey?} each.")
    private: StrictBool = Field(False, description="A one-to-one conversation: what it creates stays in its "
                                                   "session (privateScope).")


class ContextParams(Params):
    session: ProtoStr = Field(None, validate_default=True, description="The bot's name for the conversation.")


# -- operator methods -------------------------------------------------------------------------------


def _seq(value: int) -> int:
    if value < 1:
        raise ValueError("must be the positive sequence number of a logged operation")
    return value


def _sender(value: str) -> str:
    if not value.strip() or len(value) > MAX_SENDER or not sender_key(value):
        raise ValueError(f"must be a sender key (e.g. qq:42, at most {MAX_SENDER} characters)")
    return sender_key(value)  # in comparison form


Seq = Annotated[StrictInt, AfterValidator(_seq)]
SenderKey = Annotated[StrictStr, AfterValidator(_sender)]


class HistoryRevertParams(Args):
    seq: Seq = Field(description="The operation to revert (its seq in the operation log).")
    force: StrictBool = Field(False, description="Write the old values even where they changed since.")
    preview: StrictBool = Field(False, description="List the changes and conflicts; change nothing.")


class HistoryReinstateParams(Args):
    id: StrictStr = Field(description="A memory id or a personId.")
    change_id: StrictInt = Field(description="The change that wrote the version to make current.")


class HistoryRevertOriginParams(Args):
    sender: SenderKey = Field(description="Whose changes to undo (a sender key, e.g. qq:42).")
    from_: StrictStr | None = Field(None, alias="from", description="Only changes at or after this ISO 8601 time.")
    to: StrictStr | None = Field(None, description="Only changes at or before this ISO 8601 time.")
    shared: StrictBool = Field(False, description="Also the changes the sender was only present at.")
    force: StrictBool = Field(False, description="Write the old values even where they changed since.")
    preview: StrictBool = Field(False, description="List the changes and conflicts; change nothing.")

    @model_validator(mode="after")
    def _range(self) -> HistoryRevertOriginParams:
        start, end = self.start, self.end  # InvalidArgument naming from / to when not a time
        if start is not None and end is not None and start > end:
            raise InvalidArgument("from is later than to", field="from")
        return self

    @property
    def start(self) -> float | None:
        return parse_time_filter(self.from_, "from")

    @property
    def end(self) -> float | None:
        return parse_time_filter(self.to, "to")


class HistoryQueryParams(OperatorHistoryArgs):
    """`zcor/history/query`: the history tool's parameters and the operator's filters."""


class TrustSetParams(Args):
    """`zcor/trust/set`: the level's and the sender's rules are the trust book's (zcord.service.trust)."""

    sender: StrictStr = Field(description="A sender key, e.g. qq:42.")
    level: StrictStr | None = Field(description="trusted, normal, untrusted or blocked; null: the default.")


class ReviewListParams(Args):
    offset: Annotated[StrictInt, Field(ge=0, le=1 << 31)] = Field(0, description="Held operations to skip.")
    limit: Annotated[StrictInt, Field(ge=1, le=MAX_PAGE_LIMIT)] = Field(
        PAGE_LIMIT, description="Held operations per page (fewer when the page is large).")


def _distinct(ids: list[int]) -> list[int]:
    if len(set(ids)) != len(ids):
        raise ValueError("must be distinct")
    return ids


ReviewIds = Annotated[list[Annotated[StrictInt, Field(ge=1)]], Field(min_length=1, max_length=MAX_IDS),
                      AfterValidator(_distinct)]


class ReviewApproveParams(Args):
    ids: ReviewIds = Field(description="Operation seqs of held changes, as zcor/review/list gives them.")


class ReviewRejectParams(ReviewApproveParams):
    force: StrictBool = Field(False, description="Revert even where a memory changed since.")
    preview: StrictBool = Field(False, description="List what would be reverted; change nothing.")


class SynonymsSetParams(Params):
    """`zcor/synonyms/set` (the group's rules are zcord.service.rooms.synonyms')."""

    index: StrictInt | None = Field(None, description="The group to replace or remove; null adds one.")
    terms: list[Any] | None = Field(None, description="The group's terms; null removes the group.")


class PersonaSetParams(Params):
    text: StrictStr = Field(description="The whole new PERSONA.md.")


def validate(model: type[Args], params: dict[str, Any]) -> Args:
    """params as model; InvalidArgument naming every bad field otherwise."""
    try:
        return model.model_validate(params)
    except ValidationError as e:
        raise invalid_from(e, model) from None


__all__ = ["Args", "Params", "NoParams", "StrictNoParams", "BackupPreviewParams", "RecallExplainParams", "RecallLogParams",
           "ConsolidateListParams", "ConsolidateDismissParams",
           "ConfigSetParams", "HistoryVersionsParams", "HistoryAtParams", "UsageReportParams", "UsageParams",
           "InitializeParams", "ToolCallParams", "PromptGetParams", "ResourceReadParams", "RecallParams",
           "ContextParams", "HistoryRevertParams", "HistoryReinstateParams", "HistoryRevertOriginParams",
           "HistoryQueryParams", "TrustSetParams", "ReviewListParams", "ReviewApproveParams", "ReviewRejectParams",
           "SynonymsSetParams", "SynonymsHeldParams", "PersonaSetParams", "EraseParams", "SubjectParams", "ScopeSetParams",
           "ImportParams", "UploadParams", "ExportParams", "ExportReadParams", "validate", "InvalidArgument"]
