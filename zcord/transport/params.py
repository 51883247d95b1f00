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
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    StringConstraints,
    ValidationError,
)

from ..core.errors import InvalidArgument
from ..retrieval.recall import MAX_SESSION_CHARS
from ..service.calls import invalid_from
from ..service.inputs import Args
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


class RecallExplainParams(Params):
    text: StrictStr = Field(description="The text to explain, as a batch of one external event.")
    sender_key: Any = Field(None, description="Whose relationship leads the header (checked by the Service).")


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
    id: Any = Field(None, description="A memory id or a personId (checked by the Service).")


class HistoryAtParams(Args):
    time: StrictStr = Field(description="An ISO 8601 time with its UTC offset.")


class EraseParams(Args):
    """`zcor/erase` (zcord.service.erasure): exactly one of sender, personId."""

    sender: StrictStr | None = Field(None, description="The person's sender key, e.g. qq:42.")
    person_id: StrictStr | None = Field(None, description="The person's relationship personId.")
    preview: StrictBool = Field(False, description="Only list what would go; nothing changes.")


class SubjectParams(Args):
    """`zcor/subject` (zcord.service.erasure): exactly one of sender, personId."""

    sender: StrictStr | None = Field(None, description="The person's sender key, e.g. qq:42.")
    person_id: StrictStr | None = Field(None, description="The person's relationship personId.")


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


def validate(model: type[Args], params: dict[str, Any]) -> Args:
    """params as model; InvalidArgument naming every bad field otherwise."""
    try:
        return model.model_validate(params)
    except ValidationError as e:
        raise invalid_from(e, model) from None


__all__ = ["Params", "NoParams", "StrictNoParams", "BackupPreviewParams", "RecallExplainParams", "RecallLogParams",
           "ConsolidateListParams", "ConsolidateDismissParams",
           "ConfigSetParams", "HistoryVersionsParams", "HistoryAtParams", "UsageReportParams", "UsageParams",
           "validate", "InvalidArgument"]
