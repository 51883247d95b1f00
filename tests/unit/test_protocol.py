"""The wire envelopes (SPEC §5) without a socket: decoding one line into a request or a
clear JSON-RPC error, encoding answers, and the MCP shapes. The daemon-level behaviour
(connections live on, oversized lines) is in tests/integration/test_malformed.py."""

from __future__ import annotations

import json

import pytest

from zcord.core import protocol as P
from zcord.core.errors import InvalidArgument


def line(obj) -> bytes:
    return json.dumps(obj).encode() + b"\n"


# -- decode ---------------------------------------------------------------------------


def test_request_and_notification():
    m = P.decode(line({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"a": 1}}))
    assert (m.method, m.params, m.id, m.is_request) == ("tools/list", {"a": 1}, 7, True)
    n = P.decode(line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    assert (n.method, n.params, n.is_request) == ("notifications/initialized", None, False)
    c = P.decode(line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}))
    assert (c.method, c.params, c.is_request) == ("notifications/cancelled", {"requestId": 3}, False)
    # an explicit null id is a request (it is answered), not a notification
    assert P.decode(line({"jsonrpc": "2.0", "id": None, "method": "ping"})).is_request
    for good_id in ("abc", 0, -3, 1.5):
        assert P.decode(line({"jsonrpc": "2.0", "id": good_id, "method": "ping"})).id == good_id
    assert P.decode(line({"jsonrpc": "2.0", "id": 1, "method": "x", "params": [1, 2]})).params == [1, 2]


@pytest.mark.parametrize("raw", [b"", b"\n", b"   \r\n", b"\t"])
def test_blank_lines_need_no_answer(raw):
    assert P.decode(raw) is None


@pytest.mark.parametrize("obj", [
    {"jsonrpc": "2.0", "id": 3, "result": {}},
    {"jsonrpc": "2.0", "id": 3, "error": {"code": 1, "message": "x"}},
])
def test_responses_from_the_client_are_ignored(obj):
    assert P.decode(line(obj)) is None


EXACT = {
    "Invalid Request: batches (JSON arrays) are not supported; send one JSON-RPC message per line",
    "Invalid Request: a message must be a JSON object",
    "Invalid Request: id must be a string or a number",
    'Invalid Request: "jsonrpc" must be "2.0"',
    'Invalid Request: "method" is missing',
    'Invalid Request: "method" must be a string',
    "Invalid params: params must be an object",
}


def refused(raw: bytes) -> P.ProtocolError:
    with pytest.raises(P.ProtocolError) as ei:
        P.decode(raw)
    return ei.value


@pytest.mark.parametrize("raw, code, needle, reply_id", [
    (b"{not json", P.PARSE_ERROR, "Parse error", None),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"n": NaN}}', P.PARSE_ERROR, "NaN is not valid JSON",
     None),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"n": Infinity}}', P.PARSE_ERROR, "Infinity", None),
    (b"\xff\xfe{}", P.PARSE_ERROR, "not valid UTF-8", None),
    (b"[1, 2]", P.INVALID_REQUEST, "batches", None),
    (b'"ping"', P.INVALID_REQUEST, "must be a JSON object", None),
    (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', P.INVALID_REQUEST, "id must be a string or a number",
     None),
    (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', P.INVALID_REQUEST, "id must be", None),
    (b'{"jsonrpc": "2.0", "id": [1], "method": "ping"}', P.INVALID_REQUEST, "id must be", None),
    (b'{"id": 5, "method": "ping"}', P.INVALID_REQUEST, '"jsonrpc" must be "2.0"', 5),
    (b'{"jsonrpc": "1.0", "id": "a", "method": "ping"}', P.INVALID_REQUEST, '"jsonrpc" must be "2.0"', "a"),
    (b'{"jsonrpc": "2.0", "id": 6}', P.INVALID_REQUEST, '"method" is missing', 6),
    (b'{"jsonrpc": "2.0", "result": {}}', P.INVALID_REQUEST, '"method" is missing', None),
    (b'{"jsonrpc": "2.0", "id": 8, "method": 12}', P.INVALID_REQUEST, '"method" must be a string', 8),
    (b'{"jsonrpc": "2.0", "id": 9, "method": "x", "params": 3}', P.INVALID_PARAMS, "params must be an object", 9),
    (b'{"jsonrpc": "2.0", "id": 9, "method": "x", "params": "s"}', P.INVALID_PARAMS, "params", 9),
])
def test_bad_lines_get_a_clear_error(raw, code, needle, reply_id):
    err = refused(raw)
    assert err.code == code
    assert needle in err.message
    prefix = {P.PARSE_ERROR: "Parse error: ", P.INVALID_REQUEST: "Invalid Request: ",
              P.INVALID_PARAMS: "Invalid params: "}[code]
    assert err.message.startswith(prefix)
    if code != P.PARSE_ERROR:  # the rest is zcor's own sentence, in full
        assert err.message in EXACT, err.message
    assert err.id == reply_id
    assert err.to_dict()["code"] == code and needle in err.to_dict()["message"]


def test_deep_nesting_is_a_parse_error_not_a_crash():
    err = refused(b"[" * 100_000 + b"]" * 100_000)
    assert err.code == P.PARSE_ERROR and err.message == "Parse error: JSON nested too deeply"


def test_batch_message_says_what_to_send_instead():
    assert refused(b"[]").message == ("Invalid Request: batches (JSON arrays) are not supported; "
                                      "send one JSON-RPC message per line")


def test_error_objects_carry_their_parts():
    err = P.ProtocolError(P.INVALID_REQUEST, "bad", id=4, data={"field": "x"})
    assert (str(err), err.id) == ("bad", 4)
    assert err.to_dict() == {"code": -32600, "message": "bad", "data": {"field": "x"}}
    assert str(P.RpcError(1, "boom")) == "boom"


def test_utf8_error_names_the_byte():
    err = refused(b'{"jsonrpc": "2.0", "method": "\xc3"}')
    assert "at byte 30" in err.message


def test_non_finite_float_id_refused():
    with pytest.raises(P.ProtocolError):
        P.decode(b'{"jsonrpc": "2.0", "id": 1e999, "method": "ping"}')


# -- encode -----------------------------------------------------------------------------


def test_encode_is_one_compact_utf8_line():
    out = P.encode({"jsonrpc": "2.0", "method": "m", "params": {"t": "你好"}})
    assert out.endswith(b"\n") and out.count(b"\n") == 1
    assert b" " not in out
    assert "你好".encode() in out
    assert json.loads(out) == {"jsonrpc": "2.0", "method": "m", "params": {"t": "你好"}}


def test_lone_surrogate_is_escaped_not_a_crash():
    out = P.encode({"t": "a\ud800b", "n": [1, 2]})
    assert out.endswith(b"\n") and out.count(b"\n") == 1
    assert b" " not in out, "still compact"
    assert b"\\ud800" in out
    assert json.loads(out) == {"t": "a\ud800b", "n": [1, 2]}


@pytest.mark.parametrize("result", [{"a": 1, "t": "你好"}, {"t": "x\ud800"}, {}])
def test_raw_tool_result_equals_the_plain_one(result):
    plain = P.encode(P.response(4, P.tool_success(result)))
    raw = P.encode_response(4, P.tool_success_raw(result))
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    assert json.loads(raw) == json.loads(plain)
    assert json.loads(raw) == {"jsonrpc": "2.0", "id": 4, "result": {
        "content": [{"type": "text", "text": json.dumps(result, ensure_ascii=False)}],
        "structuredContent": result, "isError": False}}


def test_encode_response_of_a_plain_result():
    assert json.loads(P.encode_response("x", {"ok": True})) == {"jsonrpc": "2.0", "id": "x", "result": {"ok": True}}


def test_envelopes():
    assert P.notification("zcor/changed") == {"jsonrpc": "2.0", "method": "zcor/changed"}
    assert P.notification("n", {"a": 1}) == {"jsonrpc": "2.0", "method": "n", "params": {"a": 1}}
    assert P.request(1, "ping") == {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert P.request(2, "m", {}) == {"jsonrpc": "2.0", "id": 2, "method": "m", "params": {}}
    err = P.RpcError(P.INTERNAL_ERROR, "boom")
    assert P.error_response(3, err) == {"jsonrpc": "2.0", "id": 3,
                                        "error": {"code": -32603, "message": "boom"}}
    assert P.RpcError(1, "m", {"k": 0}).to_dict() == {"code": 1, "message": "m", "data": {"k": 0}}


def test_error_helpers():
    err = P.app_error(InvalidArgument("limit must be 1..100", field="limit"))
    assert err.code == P.ZCOR_ERROR == -32000
    assert err.message == "limit must be 1..100"
    assert err.data["field"] == "limit" and err.data["code"] == "invalid_argument"
    nf = P.method_not_found("x" * 500)
    assert nf.code == P.METHOD_NOT_FOUND == -32601
    assert nf.message == "Method not found: " + "x" * 200
    big = P.too_large(10)
    assert big.code == P.INVALID_REQUEST and "longer than 10 bytes" in big.message and big.id is None
    assert str(P.MAX_LINE) in P.too_large().message
    assert (P.PARSE_ERROR, P.INVALID_REQUEST, P.INVALID_PARAMS) == (-32700, -32600, -32602)


def test_tool_failure_shape():
    err = InvalidArgument("title must not be empty", field="title")
    out = P.tool_failure(err)
    assert out == {"content": [{"type": "text", "text": "title must not be empty"}],
                   "structuredContent": err.to_dict(), "isError": True}


# -- params ---------------------------------------------------------------------------------


def test_object_params():
    assert P.object_params(None) == {}
    assert P.object_params({"a": 1}) == {"a": 1}
    with pytest.raises(P.RpcError) as ei:
        P.object_params([1])
    assert ei.value.code == P.INVALID_PARAMS
    assert ei.value.message == "Invalid params: expected an object of named parameters"


def test_str_param():
    assert P.str_param({"s": "v"}, "s") == "v"
    assert P.str_param({}, "s", required=False) is None
    assert P.str_param({"s": None}, "s", required=False) is None
    with pytest.raises(P.RpcError) as ei:
        P.str_param({}, "session")
    assert ei.value.code == P.INVALID_PARAMS
    assert ei.value.message == "Invalid params: session is required" and ei.value.data == {"field": "session"}
    with pytest.raises(P.RpcError) as ei:
        P.str_param({"session": 5}, "session", required=False)
    assert ei.value.message == "Invalid params: session must be a string"


# -- MCP ------------------------------------------------------------------------------------


def test_version_negotiation():
    for v in P.SUPPORTED_VERSIONS:
        assert P.negotiate_version(v) == v
    assert P.negotiate_version("1999-01-01") == P.SUPPORTED_VERSIONS[0] == "2025-11-25"
    assert P.negotiate_version(None) == "2025-11-25"


@pytest.mark.parametrize("params, role", [
    ({"capabilities": {"experimental": {"zcor": {"role": "operator"}}}}, "operator"),
    ({"capabilities": {"experimental": {"zcor": {"role": "admin"}}}}, "bot"),
    ({"capabilities": {"experimental": {"zcor": "operator"}}}, "bot"),
    ({"capabilities": {"experimental": "operator"}}, "bot"),
    ({"capabilities": "operator"}, "bot"),
    ({}, "bot"),
])
def test_requested_role(params, role):
    assert P.client_role(params) == role


def test_initialize_result():
    r = P.initialize_result("2025-06-18", "1.2.3", "bot", instructions="use the tools")
    assert r == {"protocolVersion": "2025-06-18",
                 "capabilities": {"tools": {"listChanged": True}, "experimental": {"zcor": {"role": "bot"}}},
                 "serverInfo": {"name": "zcord", "version": "1.2.3"}, "instructions": "use the tools"}
    assert "instructions" not in P.initialize_result("x", "1", "operator")
    assert P.initialize_result("x", "1", "operator")["protocolVersion"] == "2025-11-25"
