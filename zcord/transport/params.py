"""The params models of the `zcor/…` methods whose parameters the transport checks itself
(pydantic v2, like the tools' Args in zcord.service.inputs). A method whose parameters the
Service checks (its own Args model, e.g. `zcor/history/query`) has no model here.

A bad value is refused as a tool's bad argument is: `invalid_argument`, naming the field
(zcord.service.calls.invalid_from), and nothing runs.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, StrictInt, StrictStr, ValidationError

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


def validate(model: type[Args], params: dict[str, Any]) -> Args:
    """params as model; InvalidArgument naming every bad field otherwise."""
    try:
        return model.model_validate(params)
    except ValidationError as e:
        raise invalid_from(e, model) from None


__all__ = ["Params", "NoParams", "StrictNoParams", "BackupPreviewParams", "RecallExplainParams", "RecallLogParams",
           "ConsolidateListParams", "ConsolidateDismissParams",
           "ConfigSetParams", "HistoryVersionsParams", "HistoryAtParams", "validate", "InvalidArgument"]
