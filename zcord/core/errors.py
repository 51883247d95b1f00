"""Typed errors: a stable code for programs and a sentence a model or an operator can act on."""

from __future__ import annotations

from typing import Any


class ZcorError(Exception):
    """Base of every error zcor reports to a caller."""

    code = "error"

    def __init__(self, message: str, *, field: str | None = None, data: dict[str, Any] | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        self.data = data or {}

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


class ProviderError(ZcorError):
    """The LLM provider failed, timed out or answered something unusable."""

    code = "provider_error"


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
