"""Hostile or broken input gets JSON-RPC errors; the connection and the daemon live on."""

from __future__ import annotations

import json
import random
import socket

import pytest

from zcord.core import protocol as P


class Raw:
    """A bare socket speaking lines, for input no well-behaved client would send."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(20)
        self.sock.connect(str(path))
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def line(self) -> dict:
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            assert chunk, "daemon closed the connection"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def ask(self, data: bytes) -> dict:
        self.send(data)
        return self.line()

    def ping(self, msg_id="ping", skip: bool = False) -> None:
        """Ping and expect the answer next (or, with skip, after replies still in flight)."""
        reply = self.ask(json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "ping"}).encode() + b"\n")
        while skip and reply.get("id") != msg_id:
            reply = self.line()
        assert reply == {"jsonrpc": "2.0", "id": msg_id, "result": {}}

    def close(self) -> None:
        self.sock.close()


    def initialize(self) -> dict:
        return self.ask(b'{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":'
                        b'"2025-06-18","capabilities":{}}}\n')


@pytest.fixture
def raw(shared_daemon):
    """An initialized bare connection (as the bot)."""
    r = Raw(shared_daemon.sock)
    assert "result" in r.initialize()
    yield r
    r.close()


CASES = [
    (b"{not json", P.PARSE_ERROR, None),
    (b"\xff\xfe\x00garbage", P.PARSE_ERROR, None),
    (b'{"jsonrpc":"2.0","id":1,"method":"ping","x":NaN}', P.PARSE_ERROR, None),
    (b"[" * 100_000, P.PARSE_ERROR, None),
    (b"42", P.INVALID_REQUEST, None),
    (b'"ping"', P.INVALID_REQUEST, None),
    (b"null", P.INVALID_REQUEST, None),
    (b"[]", P.INVALID_REQUEST, None),
    (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', P.INVALID_REQUEST, None),
    (b'{"jsonrpc":"1.0","id":2,"method":"ping"}', P.INVALID_REQUEST, 2),
    (b'{"id":3,"method":"ping"}', P.INVALID_REQUEST, 3),
    (b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', P.INVALID_REQUEST, None),
    (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', P.INVALID_REQUEST, None),
    (b'{"jsonrpc":"2.0","id":4,"method":17}', P.INVALID_REQUEST, 4),
    (b'{"jsonrpc":"2.0","id":5}', P.INVALID_REQUEST, 5),
    (b'{"jsonrpc":"2.0","id":6,"method":"no/such/method"}', P.METHOD_NOT_FOUND, 6),
    (b'{"jsonrpc":"2.0","id":7,"method":"ping","params":"x"}', P.INVALID_PARAMS, 7),
    (b'{"jsonrpc":"2.0","id":8,"method":"tools/call","params":[1,2]}', P.INVALID_PARAMS, 8),
    (b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":5}}', P.INVALID_PARAMS, 9),
    (b'{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{}}', P.INVALID_PARAMS, 10),
    (b'{"jsonrpc":"2.0","id":11,"method":"initialize","params":{"protocolVersion":7}}', P.INVALID_PARAMS, 11),
    (b'{"jsonrpc":"2.0","id":12,"method":"zcor/recall","params":{"session":"s","events":"hi"}}',
     P.INVALID_PARAMS, 12),
    (b'{"jsonrpc":"2.0","id":13,"method":"zcor/context","params":{"session":["s"]}}', P.INVALID_PARAMS, 13),
    (b'{"jsonrpc":"2.0","id":"\\ud800","method":"\\udfff"}', P.METHOD_NOT_FOUND, "\ud800"),
]


@pytest.mark.parametrize("line,code,reply_id", CASES, ids=[repr(c[0][:30]) for c in CASES])
def test_bad_lines_get_jsonrpc_errors(raw, line, code, reply_id):
    reply = raw.ask(line + b"\n")
    assert reply["jsonrpc"] == "2.0"
    assert reply["error"]["code"] == code, reply
    assert reply["id"] == reply_id
    raw.ping()


def test_wrong_argument_types_are_tool_errors(raw):
    reply = raw.ask(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"zcor_memory_read",'
                    b'"arguments":{"id":17}}}\n')
    assert reply["result"]["isError"] is True
    assert reply["result"]["structuredContent"]["field"] == "id"
    reply = raw.ask(b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"zcor_memory_read",'
                    b'"arguments":[1]}}\n')
    assert reply["result"]["isError"] is True
    raw.ping()


def test_notifications_and_responses_get_no_answer(raw):
    raw.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
             b'{"jsonrpc":"2.0","method":"no/such/notification"}\n'
             b'{"jsonrpc":"2.0","id":99,"result":{}}\n'
             b"\n   \n")
    raw.ping("after")  # the first reply is the ping's


def test_oversized_line_is_refused_and_skipped(raw):
    big = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"x" * (2 << 20) + b'"}}\n'
    raw.send(big + b'{"jsonrpc":"2.0","id":"next","method":"ping"}\n')
    first = raw.line()
    assert first["error"]["code"] == P.INVALID_REQUEST and first["id"] is None
    assert "1048576" in first["error"]["message"]
    assert raw.line() == {"jsonrpc": "2.0", "id": "next", "result": {}}
    # just under the limit is fine
    pad = P.MAX_LINE - 200
    ok = raw.ask(b'{"jsonrpc":"2.0","id":"max","method":"ping","params":{"pad":"' + b"y" * pad + b'"}}\n')
    assert ok["id"] == "max" and ok["result"] == {}


def test_fuzzed_lines_never_kill_the_daemon(shared_daemon, raw):
    rng = random.Random(20260131)
    templates = [
        lambda: bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))).replace(b"\n", b" "),
        lambda: json.dumps({"jsonrpc": "2.0", "id": rng.randrange(1000), "method": rng.choice(
            ["tools/call", "tools/list", "initialize", "zcor/recall", "zcor/prefix", "ping", "x"]),
            "params": rng.choice([None, 1, "s", [], {}, {"name": "zcor_memory_write", "arguments": {
                "title": rng.choice(["", "t", 5, None, "a" * 300]), "content": rng.choice([1, "c", None])}},
                {"session": rng.choice(["", 3, "s"]), "events": rng.choice([[], [{}], [{"text": 1}], None])},
                {"protocolVersion": rng.choice([None, 1, "2024-11-05"]), "capabilities": rng.choice(
                    [None, 1, {"experimental": 3}, {"experimental": {"zcor": "operator"}}])}])}).encode(),
        lambda: b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"zcor_memory_query",'
                b'"arguments":{"keywords":' + b"[" * rng.randrange(1, 3000) + b"]}}}",
    ]
    for i in range(300):
        line = rng.choice(templates)()
        raw.send(line + b"\n")
        if i % 25 == 0:
            raw.ping(f"p{i}", skip=True)
    raw.ping("end", skip=True)
    with shared_daemon.client() as c:
        c.ping()
    assert shared_daemon.proc.poll() is None


def test_half_lines_then_disconnect(shared_daemon):
    for tail in [b'{"jsonrpc":"2.0","id":1,"meth', b"\xe4\xbd", b"x" * (3 << 20)]:
        r = Raw(shared_daemon.sock)
        r.send(tail)
        r.close()
    # a request whose reply cannot be delivered
    r = Raw(shared_daemon.sock)
    r.send(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"zcor_memory_backup"}}\n')
    r.close()
    r = Raw(shared_daemon.sock)
    r.ping()
    r.close()
    assert shared_daemon.proc.poll() is None


def test_nothing_but_ping_is_served_before_initialize(shared_daemon):
    raw = Raw(shared_daemon.sock)
    for n, method in enumerate(["zcor/status", "tools/list", "tools/call", "zcor/prefix", "zcor/recall"]):
        reply = raw.ask(json.dumps({"jsonrpc": "2.0", "id": n, "method": method,
                                    "params": {"name": "zcor_memory_backup"}}).encode() + b"\n")
        assert reply["error"]["code"] == P.INVALID_REQUEST, reply
        assert "before initialize" in reply["error"]["message"]
    raw.ping()
    assert "result" in raw.initialize()
    reply = raw.ask(b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n')
    assert len(reply["result"]["tools"]) >= 13
    # once per connection: a second initialize is refused and the role stays
    again = raw.ask(b'{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"capabilities":{"experimental":'
                    b'{"zcor":{"role":"operator"}}}}}\n')
    assert again["error"]["code"] == P.INVALID_REQUEST and "once per connection" in again["error"]["message"]
    reply = raw.ask(b'{"jsonrpc":"2.0","id":4,"method":"zcor/status"}\n')
    assert reply["error"]["data"]["code"] == "forbidden"
    raw.close()
