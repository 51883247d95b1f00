"""zcor_memory_search over the socket, against a fake LLM that answers only when told to:
reads and writes are served while the search waits on the provider."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class FakeLLM:
    """An OpenAI-compatible endpoint that holds each request until `release` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.arrived = threading.Event()
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                outer.arrived.set()
                outer.release.wait(30)
                payload = json.loads(body["messages"][-1]["content"])
                ids = [c["id"] for c in payload["candidates"]][:1]
                data = json.dumps({"choices": [{"message": {"role": "assistant", "content": json.dumps(ids)},
                                                "finish_reason": "stop"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def llm():
    fake = FakeLLM()
    yield fake
    fake.close()


async def test_reads_and_writes_do_not_wait_behind_a_slow_search(make_daemon, llm):
    d = make_daemon().start(env={"ZCOR_LLM_BASE_URL": llm.base_url, "ZCOR_LLM_MODEL": "fake",
                                 "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"})
    bot = await d.aclient(timeout=60)
    try:
        coffee = await bot.call_tool("zcor_memory_write", {"title": "小李爱喝咖啡", "content": "每天两杯"})
        search = asyncio.create_task(bot.call_tool("zcor_memory_search", {"keywords": ["咖啡"]}))
        await asyncio.get_running_loop().run_in_executor(None, llm.arrived.wait, 30)
        assert not search.done()

        # the provider is still thinking: the worker serves everyone else meanwhile
        assert (await bot.call_tool("zcor_memory_read", {"id": coffee["id"]}))["title"] == "小李爱喝咖啡"
        other = await bot.call_tool("zcor_memory_write", {"title": "搜索时写入", "content": "ok"})
        assert other["id"] != coffee["id"]
        assert not search.done() and not llm.release.is_set()

        llm.release.set()
        result = await asyncio.wait_for(search, 30)
        assert [item["id"] for item in result["items"]] == [coffee["id"]]
        assert llm.requests and llm.requests[0]["model"] == "fake"
    finally:
        await bot.close()
