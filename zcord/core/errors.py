"""Typed errors: a stable code for programs and a sentence a model or an operator can act on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

HintKey = Literal["find_ids", "find_person", "list_backups", "unlink_first", "force_revert", "undeclared_tool"]


@dataclass(frozen=True, slots=True)
class Hint:
    """Advice written for the model inside an error message, named so that operator wording
    (zcord.transport.wording) can swap it by key instead of rewording prose.

    The raise site names the hint (`NotFound(f"… {advice('find_ids')}", hint="find_ids")`)
    and the error carries `data: {"hint": key, "advice": advice}`; an advice that names
    something (a tool) is given with the names in `data` (UnknownTool.undeclared).
    """

    key: HintKey
    code: str
    advice: str


HINTS: dict[str, Hint] = {h.key: h for h in (
    Hint("find_ids", "not_found", "Use zcor_memory_query or zcor_memory_children to find ids."),
    Hint("find_person", "not_found", "Use zcor_relationship_query to search by name, or "
                                     "zcor_relationship_write to create one."),
    Hint("list_backups", "not_found", "zcor_memory_backup returns names that can be restored."),
    Hint("unlink_first", "conflict", "unlink them with zcor_relationship_write(memoryNodeId=null) first"),
    Hint("force_revert", "conflict", "Pass force to write the old values anyway, as a new change."),
    Hint("undeclared_tool", "unknown_tool", "is not declared in this request; call only the tools you were given."),
)}
"""Every hint key; the operator's wording for each is in zcord.transport.wording.OPERATOR_ADVICE."""


def advice(key: HintKey) -> str:
    """The model-facing advice of a hint, for the raise site that names it (written once, here)."""
    return HINTS[key].advice


def undeclared_tool(tool: str) -> str:
    """The model-facing refusal of a call to a tool the request did not declare."""
    return f"Tool {tool!r} {advice('undeclared_tool')}"


class ZcorError(Exception):
    """Base of every error zcor reports to a caller."""

    code = "error"

    def __init__(self, message: str, *, field: str | None = None, data: dict[str, Any] | None = None,
                 hint: HintKey | None = None) -> None:
        """hint: the advice (HINTS) the message gives the model, named for operator wording."""
        super().__init__(message)
        self.message = message
        self.field = field
        self.data = data or {}
        if hint is not None:
            self.data = {**self.data, "hint": hint, "advice": advice(hint)}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field is not None:
            out["field"] = self.field
        if self.data:
            out["data"] = self.data
        return out


class InvalidArgument(ZcorError):
    """An argument does not fit the tool's schema or a value rule."""

    code = "invalid_argument"


class NotFound(ZcorError):
    """An id, personId or file named by the caller does not exist."""

    code = "not_found"


class Conflict(ZcorError):
    """The call is well-formed but the current state forbids it (children, links, cycles…)."""

    code = "conflict"


class Superseded(ZcorError):
    """The node named has been replaced and cannot be changed or marked."""

    code = "superseded"


class MemoryDirInUse(ZcorError):
    """Another process holds the Memory directory's lock."""

    code = "memory_dir_in_use"


class StateFileInvalid(ZcorError):
    """A state, log or config file cannot be parsed or fails validation; it is left untouched."""

    code = "state_file_invalid"


class StorageError(ZcorError):
    """The state could not be written; nothing changed."""

    code = "storage_error"


class MayHaveTakenEffect(ZcorError):
    """The state was committed but the operation log write failed."""

    code = "may_have_taken_effect"


class UnknownTool(ZcorError):
    """The tool named is not declared for this caller."""

    code = "unknown_tool"

    @classmethod
    def undeclared(cls, tool: str, field: str | None = "name") -> UnknownTool:
        """The refusal of a call to a tool the caller was not given, hinted with its name."""
        said = undeclared_tool(tool)
        return cls(said, field=field, data={"hint": "undeclared_tool", "advice": said, "tool": tool})


class ProviderError(ZcorError):
    """The LLM provider failed, timed out or answered something unusable. The subclasses say
    which (the endpoint's status and sentence follow the type); all share the code."""

    code = "provider_error"


class ProviderTimeout(ProviderError):
    """The provider did not answer, or did not finish its answer, within `seconds`."""

    def __init__(self, message: str, *, seconds: float) -> None:
        super().__init__(message)
        self.seconds = seconds


class ProviderUnreachable(ProviderError):
    """No connection to the provider (refused, unknown host, reset before an answer)."""


class ProviderStatus(ProviderError):
    """The provider answered with an HTTP error `status`; the message may quote its body."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class ProviderTooLarge(ProviderError):
    """The provider's answer passed the size cap and was cut off."""


class ProviderMidAnswer(ProviderError):
    """A streamed answer broke off: the provider reported an error, or sent a malformed event."""


class ProviderBadAnswer(ProviderError):
    """The provider answered, but not with a Chat Completions or Messages reply."""


class RateLimited(ZcorError):
    """The caller may not do this again yet (e.g. the bot's backups)."""

    code = "rate_limited"


class BlockedSender(ZcorError):
    """The change was asked for on behalf of a sender the operator blocked (per-sender trust)."""

    code = "blocked_sender"


class UntrustedSender(ZcorError):
    """A change an untrusted sender may not cause at all (it cannot be held for review)."""

    code = "untrusted_sender"


def describe_os_error(e: OSError) -> str:
    """An OSError as a cause an operator can act on: running out of file descriptors is said
    to be that, not a disk problem."""
    import errno

    if e.errno in (errno.EMFILE, errno.ENFILE):
        return ("zcord has too many open files (EMFILE: file descriptors exhausted, usually by too many "
                "connections; this is not a disk problem: lower maxConnections or raise LimitNOFILE)")
    return str(e.strerror or e)
