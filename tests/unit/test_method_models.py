"""The params models of the method table refuse what the rooms used to refuse by hand, naming
the field (issue 39): no room checks its params a second time, so these are the only checks."""

from __future__ import annotations

import pytest

from zcord.core import protocol as P
from zcord.core.errors import InvalidArgument
from zcord.transport import params as M


@pytest.mark.parametrize("model, params, field, words", [
    (M.HistoryRevertParams, {"seq": 0}, "seq", "positive sequence number"),
    (M.HistoryRevertParams, {"seq": 1, "force": "yes"}, "force", "true or false"),
    (M.HistoryRevertParams, {"seq": 1, "x": 1}, "x", "unknown parameter x"),
    (M.HistoryReinstateParams, {"id": "m1", "changeId": "2"}, "changeId", "whole number"),
    (M.HistoryRevertOriginParams, {"sender": " "}, "sender", "sender key"),
    (M.HistoryRevertOriginParams, {"sender": "qq:1", "from": "yesterday"}, "from", "ISO 8601"),
    (M.HistoryRevertOriginParams, {"sender": "qq:1", "from": "2026-01-02T00:00:00+00:00",
                                   "to": "2026-01-01T00:00:00+00:00"}, "from", "from is later than to"),
    (M.HistoryRevertOriginParams, {"sender": "qq:1", "from": 5}, "from", "text"),
    (M.ReviewApproveParams, {"ids": []}, "ids", "at least 1"),
    (M.ReviewApproveParams, {"ids": [3, 3]}, "ids", "distinct"),
    (M.ReviewRejectParams, {"ids": [1], "preview": 1}, "preview", "true or false"),
    (M.ReviewListParams, {"limit": 0}, "limit", "between 1 and"),
    (M.SynonymsHeldParams, {"action": "accept", "held": 0, "index": 1}, "held", "not both"),
    (M.SynonymsHeldParams, {"action": "accept", "index": 1}, "index", "only a held group"),
    (M.SynonymsHeldParams, {"action": "discard"}, "held", "not both"),
    (M.TrustSetParams, {"sender": "qq:1"}, "level", "level is required"),
    (M.EraseParams, {}, "sender", "exactly one"),
    (M.EraseParams, {"sender": "qq:1", "personId": "qq:1"}, "sender", "exactly one"),
    (M.SubjectParams, {"personId": " "}, "personId", "non-empty"),
    (M.HistoryVersionsParams, {"id": 5}, "id", "memory id or a personId"),
    (M.RecallExplainParams, {"text": "x", "senderKey": 5}, "senderKey", "senderKey must be a string"),
])
def test_a_bad_param_is_refused_naming_its_field(model, params, field, words):
    with pytest.raises(InvalidArgument) as e:
        M.validate(model, params)
    assert e.value.field == field and words in e.value.message, e.value.message


def test_what_the_rooms_get_is_parsed():
    a = M.validate(M.HistoryRevertOriginParams, {"sender": "QQ:42", "from": "2026-01-01T00:00:00+08:00"})
    assert isinstance(a, M.HistoryRevertOriginParams)
    assert a.sender == "qq:42" and a.start == 1767196800.0 and a.end is None  # comparison form, epoch seconds
    e = M.validate(M.EraseParams, {"personId": "qq:7", "preview": True})
    assert isinstance(e, M.EraseParams) and (e.person, e.field, e.preview) == ("qq:7", "personId", True)


@pytest.mark.parametrize("model, params, message", [
    (M.RecallParams, {"events": []}, "Invalid params: session is required"),
    (M.RecallParams, {"session": "s", "events": "hi"}, "Invalid params: events must be an array of"),
    (M.ContextParams, {"session": 3}, "Invalid params: session must be a string"),
    (M.ResourceReadParams, {"uri": 7}, "Invalid params: uri must be a string"),
    (M.PromptGetParams, {"name": "zcor_context", "arguments": {"message": 1}},
     "Invalid params: arguments must be an object of strings"),
    (M.ToolCallParams, {"arguments": {}}, "Invalid params: name is required"),
    (M.InitializeParams, {"protocolVersion": 2025}, "Invalid params: protocolVersion must be a string"),
])
def test_the_bot_and_mcp_methods_refuse_as_json_rpc_does(model, params, message):
    with pytest.raises(P.RpcError) as e:
        M.validate(model, params)
    assert e.value.code == P.INVALID_PARAMS and str(e.value).startswith(message)
