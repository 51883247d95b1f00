"""The params models of the `zcor/…` methods whose parameters the transport checks itself
(pydantic v2, like the tools' Args in zcord.service.inputs). A method whose parameters the
Service checks (its own Args model, e.g. `zcor/history/query`) has no model here.

A bad value is refused as a tool's bad argument is: `invalid_argument`, naming the field
(zcord.service.calls.invalid_from), and nothing runs.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

from ..core.errors import InvalidArgument
from ..service.calls import invalid_from
from ..service.inputs import Args


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


def validate(model: type[Args], params: dict[str, Any]) -> Args:
    """params as model; InvalidArgument naming every bad field otherwise."""
    try:
        return model.model_validate(params)
    except ValidationError as e:
        raise invalid_from(e, model) from None


__all__ = ["Params", "NoParams", "StrictNoParams", "BackupPreviewParams", "RecallExplainParams",
           "ConfigSetParams", "HistoryVersionsParams", "HistoryAtParams", "validate", "InvalidArgument"]
