"""The official MCP Python SDK uses the memory through `zcor mcp` as a stdio server."""

from __future__ import annotations

import json
import socket
import sys

import mcp
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from zcord.client import RpcError

from .conftest import ZCOR_CMD

# what a bot is offered with the default config (relationship memory on): every tool of SPEC §2
# the 18 tools of SPEC §2, spelled out: the interface other programs depend on
EXPECTED_TOOLS = {
    "zcor_memory_write", "zcor_memory_read", "zcor_memory_delete", "zcor_memory_children",
    "zcor_memory_trace", "zcor_memory_important", "zcor_memory_query", "zcor_memory_merge",
    "zcor_memory_supersede", "zcor_relationship_read", "zcor_relationship_query",
    "zcor_relationship_write", "zcor_relationship_delete", "zcor_memory_history",
    "zcor_memory_backup", "zcor_memory_restore", "zcor_synonyms_add", "zcor_memory_search",
}


def bridge(daemon) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable,
                                 args=ZCOR_CMD[1:] + ["mcp", "--socket", str(daemon.sock)])


async def test_sdk_client_lists_and_calls_tools(daemon):
    # mcp.Client in its default mode probes server/discover first and falls back to initialize
    async with mcp.Client(bridge(daemon)) as client:
        assert client.protocol_version == "2025-11-25"
        assert client.server_info.name == "zcord"
        assert client.server_capabilities.tools.list_changed is True
        assert "external_event_frame" in (client.instructions or "")

        listed = await client.list_tools()
        names = {t.name for t in listed.tools}
        assert names == EXPECTED_TOOLS and len(names) == 18
        write = next(t for t in listed.tools if t.name == "zcor_memory_write")
        assert write.input_schema["type"] == "object"
        assert {"title", "content", "parentId", "sourceMessage"} <= set(write.input_schema["properties"])
        assert "title" in write.input_schema["required"]

        created = await client.call_tool("zcor_memory_write", {"title": "小红的生日", "content": "三月五日"})
        assert created.is_error is False
        node = created.structured_content
        assert node["title"] == "小红的生日" and node["id"].startswith("m")
        assert created.content[0].type == "text"

        read = await client.call_tool("zcor_memory_read", {"id": node["id"]})
        assert read.is_error is False
        assert read.structured_content["content"] == "三月五日"

        missing = await client.call_tool("zcor_memory_read", {"id": "m999999"})
        assert missing.is_error is True
        assert missing.structured_content["code"] == "not_found"
        assert "m999999" in missing.content[0].text

        bad = await client.call_tool("zcor_memory_write", {"content": "no title"})
        assert bad.is_error is True
        assert bad.structured_content["field"] == "title"

    # the bridge is the bot: its calls are recorded with actor model
    with daemon.client("operator") as op:
        history = op.call_tool("zcor_memory_history", {"keywords": ["小红的生日"]})
    writes = [r for r in history["items"] if r["tool"] == "zcor_memory_write"]
    assert writes and all(r["actor"] == "model" for r in writes)


async def test_sdk_session_negotiates_older_protocol(daemon):
    async with stdio_client(bridge(daemon)) as (read, write):
        async with ClientSession(read, write) as session:
            result = await session.initialize()
            assert result.protocol_version == "2025-11-25"
            await session.send_ping()
            tools = await session.list_tools()
            assert {t.name for t in tools.tools} == EXPECTED_TOOLS

    # initialize happens once per connection: one fresh connection per version
    for requested, answered in [("2024-11-05", "2024-11-05"), ("2025-03-26", "2025-03-26"),
                                ("2025-06-18", "2025-06-18"), ("1999-01-01", "2025-11-25")]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(30)
            s.connect(str(daemon.sock))
            s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": requested, "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}}).encode() + b"\n")
            buf = b""
            while b"\n" not in buf:
                buf += s.recv(65536)
            assert json.loads(buf)["result"]["protocolVersion"] == answered


async def test_sdk_cannot_call_external_event_frame(daemon):
    async with mcp.Client(bridge(daemon)) as client:
        await client.list_tools()
        refused = await client.call_tool("external_event_frame", {"text": "hi"})
        assert refused.is_error is True
        assert refused.structured_content["code"] == "unknown_tool"


async def test_sdk_host_gets_recall_through_prompts_and_the_prefix_as_resources(daemon):
    with daemon.client("operator") as op:
        op.persona_set("你是小雪，一个温柔的猫娘。")
        shoes = op.call_tool("zcor_memory_write", {"title": "小王的登山鞋", "content": "防水的，很喜欢。",
                                                   "keywords": ["登山鞋"]})["id"]
        op.call_tool("zcor_memory_write", {"title": "周五的会议", "content": "和工作有关。"})
        op.call_tool("zcor_memory_important", {"id": shoes, "important": True})
    async with mcp.Client(bridge(daemon)) as client:
        caps = client.server_capabilities
        assert caps.prompts is not None and caps.resources is not None

        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        assert set(prompts) == {"zcor_context", "zcor_persona"}
        assert [(a.name, a.required) for a in prompts["zcor_context"].arguments] == [
            ("message", True), ("session", False), ("sender", False)]

        got = await client.get_prompt("zcor_context", {"message": "周末穿登山鞋去爬山", "session": "ide:alice",
                                                       "sender": "qq:42"})
        (msg,) = got.messages
        assert msg.role == "user" and msg.content.type == "text"
        text = msg.content.text
        assert f"[{shoes}] 小王的登山鞋" in text and "周五的会议" not in text
        assert text.endswith("\n\n周末穿登山鞋去爬山")  # the header first, then the message itself

        # an unrecalled message is passed on alone
        plain = await client.get_prompt("zcor_context", {"message": "你好"})
        assert plain.messages[0].content.text == "你好"

        persona = await client.get_prompt("zcor_persona", {})
        assert persona.messages[0].content.text.startswith("你是小雪，一个温柔的猫娘。\n")

        with pytest.raises(mcp.MCPError) as e:
            await client.get_prompt("zcor_context", {})
        assert "arguments.message" in str(e.value)
        with pytest.raises(mcp.MCPError) as e:
            await client.get_prompt("nope", {})
        assert "unknown prompt" in str(e.value)

        resources = (await client.list_resources()).resources
        assert [str(r.uri) for r in resources] == ["zcor://prefix"]
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["zcor://context/{session}"]

        prefix = (await client.read_resource("zcor://prefix")).contents[0]
        assert prefix.text.startswith("你是小雪") and "防水的，很喜欢。" in prefix.text  # important memory
        context = (await client.read_resource("zcor://context/ide:alice")).contents[0]
        assert f"[{shoes}]" in context.text
        empty = (await client.read_resource("zcor://context/never-used")).contents[0]
        assert empty.text == ""
        with pytest.raises(mcp.MCPError) as e:
            await client.read_resource("zcor://elsewhere")
        assert "Resource not found" in str(e.value)

    # the prompt ran auto-recall in its session: the same set any bot session would get
    with daemon.client("operator") as op:
        assert op.context("ide:alice")["ids"] == [shoes]


def test_bad_prompt_and_resource_requests_name_what_is_wrong_and_change_nothing(daemon):
    with daemon.client("operator") as op:
        hi = op.call_tool("zcor_memory_write", {"title": "hiking trip", "content": "Mount Hood",
                                                "keywords": ["hiking"]})["id"]
    with daemon.client() as bot:
        for params, field in (({"name": "zcor_context", "arguments": {"message": 5}}, "arguments"),
                              ({"name": "zcor_context", "arguments": ["x"]}, "arguments"),
                              ({"name": "zcor_context", "arguments": {"message": "  "}}, "arguments.message"),
                              ({"arguments": {"message": "hi"}}, "name")):
            with pytest.raises(RpcError) as e:
                bot.request("prompts/get", params)
            assert e.value.code == -32602 and e.value.data["field"] == field, params
        with pytest.raises(RpcError) as e:
            bot.request("resources/read", {"uri": 7})
        assert e.value.code == -32602 and e.value.data["field"] == "uri"
        with pytest.raises(RpcError) as e:
            bot.request("resources/read", {"uri": "zcor://context/"})
        assert e.value.code == -32002 and e.value.data["uri"] == "zcor://context/"
        assert bot.context("mcp") == {"text": "", "ids": []}  # the refused prompts recalled nothing
        bot.request("prompts/get", {"name": "zcor_context", "arguments": {"message": "the hiking trip"}})
        assert bot.context("mcp")["ids"] == [hi]  # while a good one does
