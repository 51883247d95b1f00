"""The operator methods' rooms called in-process as the daemon calls them: params checked by
the method's params model (zcord.transport.params) first, then the room with what it parsed.
For unit tests that drive undo and review without a socket."""

from __future__ import annotations

from typing import Any

from zcord.service import review, undo
from zcord.transport import params as M


def revert(svc: Any, params: dict[str, Any]) -> dict[str, Any]:
    a = M.validate(M.HistoryRevertParams, params)
    assert isinstance(a, M.HistoryRevertParams)
    return undo.revert(svc, a.seq, a.force, a.preview, params)


def reinstate(svc: Any, params: dict[str, Any]) -> dict[str, Any]:
    a = M.validate(M.HistoryReinstateParams, params)
    assert isinstance(a, M.HistoryReinstateParams)
    return undo.reinstate(svc, a.id, a.change_id, params)


def revert_origin(svc: Any, params: dict[str, Any]) -> dict[str, Any]:
    a = M.validate(M.HistoryRevertOriginParams, params)
    assert isinstance(a, M.HistoryRevertOriginParams)
    return undo.revert_origin(svc, a.sender, a.start, a.end, a.shared, a.force, a.preview, params)


def reject(svc: Any, params: dict[str, Any]) -> dict[str, Any]:
    a = M.validate(M.ReviewRejectParams, params)
    assert isinstance(a, M.ReviewRejectParams)
    return review.reject(svc, a.ids, a.force, a.preview, params)
