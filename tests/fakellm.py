"""A scripted LLM provider on 127.0.0.1 speaking OpenAI Chat Completions and Anthropic
Messages wire formats. It records every request and answers from a script.

Script entries: a dict (sent as the JSON body with status 200), ("status", code, body),
("sleep", seconds, entry) to answer late, or ("raw", text) for a non-JSON body. Helpers
build real-format replies: openai_text, openai_tools, anthropic_text, anthropic_tools.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def openai_text(text: str) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "fake",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def openai_tools(*calls: tuple[str, dict[str, Any]], text: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-2", "object": "chat.completion", "created": 0, "model": "fake",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": text,
                "tool_calls": [{"id": f"call_{i}", "type": "function",
                                "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}
                               for i, (name, args) in enumerate(calls)]}}]}


def anthropic_text(text: str) -> dict[str, Any]:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "fake",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 1}}


def anthropic_tools(*calls: tuple[str, dict[str, Any]], text: str | None = None) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks += [{"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": args}
               for i, (name, args) in enumerate(calls)]
    return {"id": "msg_2", "type": "message", "role": "assistant", "model": "fake", "content": blocks,
            "stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 1}}


class FakeLLM:
    """Start with `with FakeLLM() as llm:`; llm.url is the base URL (…/v1)."""

    def __init__(self) -> None:
        self.script: list[Any] = []
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # keep test output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length)
                try:
                    parsed = json.loads(body)
                except ValueError:
                    parsed = None
                outer.requests.append({"path": self.path, "headers": dict(self.headers), "json": parsed})
                entry = outer.script.pop(0) if outer.script else ("status", 500, {"error": "script empty"})
                if isinstance(entry, tuple) and entry[0] == "sleep":
                    time.sleep(entry[1])
                    entry = entry[2]
                if isinstance(entry, tuple) and entry[0] == "raw":
                    self._send(200, entry[1].encode(), "text/plain")
                elif isinstance(entry, tuple) and entry[0] == "status":
                    self._send(entry[1], json.dumps(entry[2]).encode(), "application/json")
                else:
                    self._send(200, json.dumps(entry, ensure_ascii=False).encode(), "application/json")

            def _send(self, code: int, data: bytes, ctype: str) -> None:
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    def __enter__(self) -> "FakeLLM":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
