"""Refusals in the words an operator or a model understands, not a developer's: bad
arguments, bad JSON on the command line, a client never connected, a provider that refuses
at once, a Memory directory whose snapshot is missing. Codes and `field` stay as they are."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket

import pytest

from zcord.client import AsyncClient, ConnectionLost, ToolError
from zcord.core.config import LlmConfig
from zcord.core.errors import ProviderError
from zcord.retrieval.llm import Message, Provider

DEVELOPER_WORDS = ("Input should", "unable to parse", "call connect()", "Errno", "Value error")


def plain(text: str) -> bool:
    return not any(w in text for w in DEVELOPER_WORDS)


@pytest.mark.parametrize("tool, arguments, field, said", [
    ("zcor_relationship_write", {"personId": "qq:1", "name": "Mike", "relationship": "friend", "affinity": 150,
                                 "reason": "nice"}, "affinity", "affinity must be between -100 and 100; got 150"),
    ("zcor_relationship_write", {"personId": "qq:1", "name": "Mike", "relationship": "friend", "affinity": "lots",
                                 "reason": "nice"}, "affinity", 'affinity must be a whole number; got "lots"'),
    ("zcor_memory_query", {"limit": "abc"}, "limit", 'limit must be a whole number; got "abc"'),
    ("zcor_memory_query", {"limit": 0}, "limit", "limit must be between 1 and 100; got 0"),
    ("zcor_memory_write", {"title": "t", "content": 5}, "content", "content must be text (a JSON string); got 5"),
    ("zcor_memory_important", {"id": "m1", "important": "yes"}, "important",
     'important must be true or false; got "yes"'),
    ("zcor_memory_write", {"title": "t", "content": "c", "keywords": "k"}, "keywords",
     'keywords must be a list (a JSON array); got "k"'),
])
def test_bad_arguments_are_said_plainly(shared_daemon, tool, arguments, field, said):
    out = shared_daemon.zcor("call", tool, json.dumps(arguments))
    assert out.returncode == 1 and said in out.stderr and plain(out.stderr), out.stderr
    with shared_daemon.client() as bot:  # the model reads the same words; code and field unchanged
        with pytest.raises(ToolError) as e:
            bot.call_tool(tool, arguments)
    assert e.value.code == "invalid_argument" and e.value.field == field and said in e.value.message


def test_config_and_cli_json_are_said_plainly(shared_daemon):
    out = shared_daemon.zcor("config", '{"recallBudget": "much"}')
    assert out.returncode == 1 and 'recallBudget must be a whole number; got "much"' in out.stderr
    out = shared_daemon.zcor("config", '{"llm": {"protocol": "grpc"}}')
    assert "llm.protocol must be 'openai' or 'anthropic'; got \"grpc\"" in out.stderr and plain(out.stderr)

    out = shared_daemon.zcor("call", "zcor_memory_read", "{oops")
    assert out.returncode == 2
    assert "the arguments are not valid JSON (at column 2: expecting property name" in out.stderr
    out = shared_daemon.zcor("config", "[1,")
    assert out.returncode == 2 and "the config patch is not valid JSON (at column" in out.stderr


def test_a_client_that_never_connected_says_so(tmp_path):
    async def ask() -> str:
        client = AsyncClient(tmp_path / "zcord.sock", role="operator", timeout=2)
        with pytest.raises(ConnectionLost) as e:
            await client.status()
        return str(e.value)

    said = asyncio.run(ask())
    assert said.startswith(f"not connected to zcord at {tmp_path / 'zcord.sock'}: nothing has answered there yet")
    assert plain(said)


@pytest.mark.parametrize("streaming", [True, False])
def test_a_provider_that_refuses_at_once_could_not_be_reached(streaming):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    provider = Provider(LlmConfig(protocol="openai", base_url=f"http://127.0.0.1:{port}/v1", model="m",
                                  timeout_seconds=5), None)
    with pytest.raises(ProviderError) as e:
        provider.chat("", [Message(role="user", content="hi")], on_text=(lambda piece: None) if streaming else None)
    said = e.value.message
    assert f"The LLM provider at http://127.0.0.1:{port}/v1 could not be reached: connection refused" in said
    assert "mid-answer" not in said and plain(said)


def test_a_missing_snapshot_points_to_backups(make_daemon):
    d = make_daemon().start()
    d.zcor("call", "zcor_memory_write", '{"title": "甲", "content": "1"}')
    first = d.zcor("backup").stdout.strip()
    d.zcor("call", "zcor_memory_write", '{"title": "乙", "content": "2"}')
    assert d.zcor("call", "zcor_memory_restore", json.dumps({"backupFile": first})).returncode == 0
    d.zcor("call", "zcor_memory_write", '{"title": "丙", "content": "3"}')
    after = d.zcor("backup").stdout.strip()
    d.zcor("call", "zcor_memory_write", '{"title": "丁", "content": "4"}')
    assert d.stop() == 0
    (d.memdir / "memory-state.json").unlink()

    d.start(wait=False)
    assert d.proc.wait(30) != 0
    err = d.stderr()
    assert f"memory-state.json is missing from {d.memdir}" in err
    assert "change 3 (a restore from a backup, at " in err and str(d.memdir / "backups") in err
    assert "state.restore None" not in err and "cannot be replayed" not in err

    shutil.copy(d.memdir / "backups" / after, d.memdir / "memory-state.json")  # as the message says
    d.start()
    with d.client("operator") as op:
        titles = {n["title"] for n in op.call_tool("zcor_memory_query", {})["items"]}
    assert titles == {"甲", "丙", "丁"}
