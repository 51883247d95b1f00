"""Named hostile inputs over the socket of one real daemon: 20,000+1-character source
messages, NUL bytes, lone surrogates, RTL marks, a 10 MiB line, JSON nested 100,000 deep,
numbers that fit nothing, and restore names that try to leave backups/."""

from __future__ import annotations

import json
import os

import pytest

from tests.fault.wire import Wire
from tests.integration.conftest import make_daemon, shared_daemon  # noqa: F401  (fixtures)
from zcord.core import protocol as P
from zcord.service.inputs import MAX_SOURCE

pytestmark = pytest.mark.fuzz


@pytest.fixture
def wire(shared_daemon):
    w = Wire(shared_daemon.sock, "bot")
    yield w
    assert w.call("ping")["result"] == {}, "the connection must survive every case"
    w.close()
    assert shared_daemon.proc.poll() is None


def call(w: Wire, tool: str, args) -> dict:
    reply = w.call("tools/call", {"name": tool, "arguments": args})
    assert "result" in reply, reply
    return reply["result"]


def refused(w: Wire, tool: str, args, field: str, code: str = "invalid_argument") -> dict:
    res = call(w, tool, args)
    assert res["isError"], res
    err = res["structuredContent"]
    assert err["code"] == code and err["field"] == field, err
    return err


def raw(w: Wire, line: bytes, msg_id=None) -> dict:
    """Send a hand-made line; returns the next reply (the one for msg_id when given)."""
    w.sock.sendall(line + b"\n")
    if msg_id is not None:
        return w.reply(msg_id)
    pong = w.call("ping")
    assert pong["result"] == {}
    replies = w.others
    w.others = []
    assert len(replies) == 1, replies
    return replies[0]


def test_source_message_limit(wire):
    err = refused(wire, "zcor_memory_write", {"title": "长", "content": "x", "sourceMessage": "原" * (MAX_SOURCE + 1)},
                  "sourceMessage")
    assert "20,000" in err["message"]
    ok = call(wire, "zcor_memory_write", {"title": "长", "content": "x", "sourceMessage": "原" * MAX_SOURCE})
    node = call(wire, "zcor_memory_read", {"id": ok["structuredContent"]["id"]})["structuredContent"]
    assert node["sourceMessage"] == "原" * MAX_SOURCE


def test_nul_bytes_and_rtl_marks_are_kept_exactly(make_daemon):
    d = make_daemon().start()
    wire = Wire(d.sock, "bot")
    title = "空\x00字节 \u202eabc\u202c \u200f\u061c"
    content = "\x00" * 10 + "内容\u202e" + "\x00"
    res = call(wire, "zcor_memory_write", {"title": title, "content": content, "keywords": ["\x00键", "\u202e"]})
    node_id = res["structuredContent"]["id"]
    call(wire, "zcor_relationship_write", {"personId": "qq:\x00\u202e", "name": "\u202e名字", "relationship": "\x00",
                                           "affinity": 0, "reason": "\u200f"})
    found = call(wire, "zcor_memory_query", {"keywords": ["\x00字节", "\u202eabc"]})["structuredContent"]
    assert [i["id"] for i in found["items"]] == [node_id]
    # across a restart, byte for byte
    wire.close()
    assert d.stop() == 0
    d.start()
    w = Wire(d.sock, "bot")
    node = call(w, "zcor_memory_read", {"id": node_id})["structuredContent"]
    assert (node["title"], node["content"], node["keywords"]) == (title, content, ["\x00键", "\u202e"])
    rel = call(w, "zcor_relationship_read", {"personId": "qq:\x00\u202e"})["structuredContent"]
    assert rel["name"] == "\u202e名字"
    w.close()


def test_lone_surrogates_are_refused_naming_the_field(wire):
    # JSON escapes of lone surrogates decode to strings that are not Unicode text
    for args, field in [({"title": "\\ud800", "content": "x"}, "title"),
                        ({"title": "t", "content": "x\\udfffy"}, "content"),
                        ({"title": "t", "content": "x", "keywords": ["ok", "\\ud83d"]}, "keywords[1]"),
                        ({"title": "t", "content": "x", "sourceMessage": "\\udc00"}, "sourceMessage")]:
        line = ('{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"zcor_memory_write",'
                '"arguments":' + json.dumps(args).replace("\\\\u", "\\u") + "}}").encode()
        reply = raw(wire, line, "s")
        err = reply["result"]["structuredContent"]
        assert reply["result"]["isError"] and err["code"] == "invalid_argument" and err["field"] == field, reply
    reply = raw(wire, b'{"jsonrpc":"2.0","id":"r","method":"tools/call","params":{"name":"zcor_memory_restore",'
                      b'"arguments":{"backupFile":"\\ud800.json"}}}', "r")
    assert reply["result"]["structuredContent"]["field"] == "backupFile"
    reply = raw(wire, b'{"jsonrpc":"2.0","id":"n","method":"tools/call","params":{"name":"zcor_\\ud800",'
                      b'"arguments":{}}}', "n")
    assert reply["result"]["structuredContent"]["code"] == "unknown_tool"
    reply = raw(wire, b'{"jsonrpc":"2.0","id":"e","method":"zcor/recall","params":{"session":"\\ud800",'
                      b'"events":[{"text":"\\udfff","origin":"external"}]}}', "e")
    assert "result" in reply or reply["error"]["code"] in (P.INVALID_PARAMS, P.ZCOR_ERROR), reply
    # raw surrogate bytes (CESU-style) are not UTF-8 at all
    assert raw(wire, '{"jsonrpc":"2.0","id":1,"method":"\ud800"}'.encode("utf-8", "surrogatepass"))["error"][
        "code"] == P.PARSE_ERROR
    # refusals are recorded, with the surrogate shown as U+FFFD
    hist = call(wire, "zcor_memory_history", {"keywords": ["\ufffd"], "limit": 100})["structuredContent"]
    assert any(r["tool"] == "zcor_memory_write" and r["status"] == "error" for r in hist["items"])


def test_ten_mib_line_is_refused_and_the_connection_lives(wire):
    big = b'{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"zcor_memory_write","arguments":' \
          b'{"title":"t","content":"' + b"x" * (10 << 20) + b'"}}}'
    reply = raw(wire, big)
    assert reply["error"]["code"] == P.INVALID_REQUEST and str(P.MAX_LINE) in reply["error"]["message"]


def test_json_nested_100000_deep(wire):
    for line in [b"[" * 100_000 + b"]" * 100_000,
                 b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
                 b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"zcor_memory_query",'
                 b'"arguments":{"keywords":' + b"[" * 100_000 + b"]" * 100_000 + b"}}}"]:
        assert raw(wire, line)["error"]["code"] == P.PARSE_ERROR
    # nesting the parser can follow reaches the tool, which names the field
    for depth in (50, 500, 900):
        args = '{"keywords":' + "[" * depth + '"x"' + "]" * depth + "}"
        line = ('{"jsonrpc":"2.0","id":"d","method":"tools/call","params":{"name":"zcor_memory_query",'
                '"arguments":' + args + "}}").encode()
        reply = raw(wire, line, "d")
        assert reply["result"]["isError"] and reply["result"]["structuredContent"]["field"].startswith("keywords")
        line = ('{"jsonrpc":"2.0","id":"p","method":"zcor/recall","params":{"session":"s","events":'
                + "[" * depth + "]" * depth + "}}").encode()
        reply = raw(wire, line, "p")
        assert reply["error"]["code"] in (P.INVALID_PARAMS, P.ZCOR_ERROR), reply
        assert reply["error"].get("data", {}).get("field", "events").startswith("events"), reply


def test_numbers_that_fit_nothing(wire):
    for value, field in [(10**4000, "affinity"), (1e308 * 10, "affinity"), (-(2**64), "affinity"), (50.5, "affinity"),
                         (True, "affinity")]:
        text = json.dumps({"personId": "qq:n", "name": "数", "relationship": "r", "affinity": value, "reason": "r"})
        line = ('{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"zcor_relationship_write",'
                '"arguments":' + text.replace("Infinity", "1e999") + "}}").encode()
        reply = raw(wire, line, "x")
        assert reply["result"]["isError"] and reply["result"]["structuredContent"]["field"] == field, reply
    # more digits than Python parses: a parse error, not a crash
    assert raw(wire, b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":' + b"9" * 5000 + b"}}")["error"][
        "code"] == P.PARSE_ERROR


def test_restore_names_cannot_leave_backups(make_daemon):
    d = make_daemon().start()
    with d.client("operator") as op:
        op.call_tool("zcor_memory_write", {"title": "还原", "content": "x", "keywords": ["还原"]})
        good = op.call_tool("zcor_memory_backup")["backupFile"]
    b = d.memdir / "backups"
    outside = d.root / "outside.json"
    outside.write_bytes((d.memdir / "memory-state.json").read_bytes())
    os.symlink("../memory-state.json", b / "up.json")
    os.symlink(str(outside), b / "abs.json")
    os.symlink("/etc/passwd", b / "passwd.json")
    os.symlink("loop.json", b / "loop.json")
    os.symlink("..", b / "parent.json")
    (b / "dir.json").mkdir()
    os.symlink("../backups/../memory-state.json", b / "twisty.json")
    os.symlink(good, b / "alias.json")  # stays inside backups/: allowed
    state = (d.memdir / "memory-state.json").read_bytes()
    w = Wire(d.sock, "bot")
    names = ["..", ".", "../memory-state.json", "/etc/passwd", str(outside), str(b / good), f"backups/{good}",
             f"./{good}", f"..\\{good}", "up.json", "abs.json", "passwd.json", "loop.json", "parent.json",
             "dir.json", "twisty.json", "a\x00b.json", "", "x" * 300, "．．", "%2e%2e%2fmemory-state.json"]
    for name in names:
        res = call(w, "zcor_memory_restore", {"backupFile": name})
        assert res["isError"], name
        err = res["structuredContent"]
        assert err["field"] == "backupFile" and err["code"] in ("invalid_argument", "not_found"), (name, err)
        assert (d.memdir / "memory-state.json").read_bytes() == state, name
    assert not call(w, "zcor_memory_restore", {"backupFile": "alias.json"})["isError"]
    w.close()
