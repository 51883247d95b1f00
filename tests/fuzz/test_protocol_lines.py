"""Raw protocol lines against one real daemon: random bytes, JSON of every wrong shape,
requests with generated params for every method, deep nesting, huge numbers.

After every line the daemon must still answer a ping on the same connection, and every
reply before that ping must be a well-formed JSON-RPC response that is not an internal
error (a failed tool call is `isError` with a code other than internal_error). The daemon
must not log a crash (the shared daemon fixture checks its stderr at the end).
"""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fault.wire import Wire
from tests.fuzz.strategies import deep, json_values, tool_arguments
from tests.integration.conftest import shared_daemon  # noqa: F401  (fixture)
from zcord.core import protocol as P
from zcord.service.tools import TOOLS
from zcord.transport.mcp_extras import RESOURCE_NOT_FOUND

pytestmark = pytest.mark.fuzz

EXAMPLES = int(os.environ.get("ZCOR_FUZZ_LINES", "1000"))
COUNTS: Counter = Counter()
METHODS = ["initialize", "ping", "tools/list", "tools/call", "zcor/prefix", "zcor/recall", "zcor/context",
           "zcor/status", "zcor/config/get", "zcor/config/set", "zcor/subscribe", "zcor/unsubscribe",
           "zcor/backups/list", "zcor/backups/preview", "zcor/synonyms/list", "zcor/synonyms/set", "zcor/llm",
           "zcor/recall/explain", "zcor/reload", "zcor/persona/get", "zcor/persona/set", "zcor/snapshot",
           "zcor/history/revert", "zcor/history/reinstate", "zcor/history/versions", "zcor/history/at",
           "zcor/history/query", "prompts/list",
           "prompts/get", "resources/list",
           "resources/templates/list", "resources/read", "notifications/initialized", "nope", "", "zcor/", "tools/call/x"]
KNOWN_CODES = {P.PARSE_ERROR, P.INVALID_REQUEST, P.METHOD_NOT_FOUND, P.INVALID_PARAMS, P.ZCOR_ERROR,
               RESOURCE_NOT_FOUND}

ids = st.one_of(st.integers(-(2**70), 2**70), st.text(max_size=10), st.none(), st.booleans(),
                st.floats(allow_nan=False), st.just([1]), st.just({"a": 1}))


@st.composite
def messages(draw) -> bytes:
    """One line: mostly a JSON-RPC-shaped object with something off; sometimes anything."""
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.binary(max_size=300)).replace(b"\n", b" ")
    if kind == 1:
        return json.dumps(draw(json_values)).encode()
    if kind == 2:
        n = draw(st.integers(1, 3000))
        opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}"), ('{"jsonrpc":"2.0","id":1,"method":'
                                                                             '"ping","params":{"x":', "}}")]))
        return (opener * n + "1" + closer * n).encode()[:1 << 19]
    if kind == 3:  # numbers that do not fit anything
        return draw(st.sampled_from([b'{"jsonrpc":"2.0","id":1e999,"method":"ping"}',
                                     b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}',
                                     b'{"jsonrpc":"2.0","id":-0,"method":"ping"}',
                                     b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":'
                                     b'"zcor_memory_query","arguments":{"limit":1e999,"offset":' + b"7" * 4000 + b"}}}",
                                     b'{"jsonrpc":"2.0","id":"\\ud800","method":"tools/call","params":{"name":'
                                     b'"zcor_memory_write","arguments":{"title":"\\udfff","content":"\\ud800x"}}}']))
    msg: dict = {}
    if draw(st.integers(0, 9)):
        msg["jsonrpc"] = "2.0" if draw(st.integers(0, 9)) else draw(json_values)
    if draw(st.integers(0, 9)):
        msg["id"] = draw(ids)
    method = draw(st.one_of(st.sampled_from(METHODS), st.text(max_size=12), json_values))
    if draw(st.integers(0, 19)):
        msg["method"] = method
    if method == "tools/call":
        name = draw(st.one_of(st.sampled_from(sorted(TOOLS)), st.sampled_from(["external_event_frame", ""]),
                              json_values))
        params = {"name": name}
        if isinstance(name, str) and name in TOOLS:
            params["arguments"] = draw(tool_arguments(name, []))
        elif draw(st.booleans()):
            params["arguments"] = draw(json_values)
        msg["params"] = params
    elif draw(st.integers(0, 3)):
        msg["params"] = draw(st.one_of(json_values, deep, st.dictionaries(st.sampled_from(
            ["session", "events", "text", "patch", "index", "terms", "protocolVersion", "capabilities",
             "name", "arguments", "uri"]),
            st.one_of(json_values, deep), max_size=4)))
    if draw(st.integers(0, 9)) == 0:
        msg[draw(st.text(max_size=5))] = draw(json_values)
    return json.dumps(msg, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")  # raw surrogates: not UTF-8


def check_reply(msg: dict, line: bytes) -> None:
    assert msg.get("jsonrpc") == "2.0", (msg, line[:200])
    if "method" in msg:  # a notification (tools/list_changed, zcor/changed)
        return
    assert ("result" in msg) != ("error" in msg), msg
    if "error" in msg:
        assert msg["error"]["code"] in KNOWN_CODES, (msg, line[:200])
        if msg["error"]["code"] == P.ZCOR_ERROR:
            assert msg["error"]["data"]["code"] != "internal_error", (msg, line[:200])
    elif isinstance(msg["result"], dict) and msg["result"].get("isError"):
        assert msg["result"]["structuredContent"]["code"] != "internal_error", (msg, line[:200])


def test_random_lines_never_hurt_the_daemon(shared_daemon):
    d = shared_daemon
    wire = Wire(d.sock, "bot")
    n = 0

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(line=messages())
    def run(line):
        nonlocal n
        n += 1
        COUNTS["lines"] += 1
        wire.sock.sendall(line + b"\n")
        reply = wire.call("ping", None, timeout=30)
        assert reply is not None, f"the daemon closed the connection after {line[:200]!r}"
        assert reply.get("result") == {}, reply
        for msg in wire.others:
            check_reply(msg, line)
        wire.others.clear()

    run()
    assert d.proc.poll() is None
    with d.client() as c:  # a fresh connection works too
        c.ping()
    wire.close()
    print(f"\n{n} fuzzed protocol lines, the daemon answered a ping after each")
