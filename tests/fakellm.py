"""A scripted LLM provider on 127.0.0.1 speaking OpenAI Chat Completions and Anthropic
Messages wire formats. It records every request and answers from a script.

Script entries: a dict (sent as the JSON body with status 200, or as server-sent events
in the provider's streaming format when the request asked for "stream": true), ("status", code, body),
("sleep", seconds, entry) to answer late, ("wait", threading.Event, entry) to answer once
the event is set, ("drip", seconds) to send headers and then one byte every so often for
ever, or ("raw", text) for a non-JSON body (("raw", text, content_type) to say what it is:
"text/event-stream" for a hand-written stream). Helpers
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


def _halves(text: str) -> list[str]:
    mid = len(text) // 2
    return [p for p in (text[:mid], text[mid:]) if p]


def sse_events(reply: dict[str, Any], include_usage: bool = False) -> list[tuple[str | None, dict[str, Any] | str]]:
    """A whole reply as the stream a real provider would send: (event name, data) pairs; an
    OpenAI stream ends with a usage chunk (no choice) when the request asked for one
    (stream_options.include_usage) and the reply has a usage."""
    if "choices" in reply:  # OpenAI Chat Completions chunks
        msg = reply["choices"][0]["message"]
        base = {"id": reply.get("id", "chatcmpl-s"), "object": "chat.completion.chunk", "model": "fake"}
        out: list[tuple[str | None, Any]] = [(None, {**base, "choices": [
            {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})]
        for piece in _halves(msg.get("content") or ""):
            out.append((None, {**base, "choices": [{"index": 0, "delta": {"content": piece},
                                                    "finish_reason": None}]}))
        for i, call in enumerate(msg.get("tool_calls") or []):
            args = call["function"]["arguments"]
            first = {"index": i, "id": call["id"], "type": "function",
                     "function": {"name": call["function"]["name"], "arguments": ""}}
            out.append((None, {**base, "choices": [{"index": 0, "delta": {"tool_calls": [first]},
                                                    "finish_reason": None}]}))
            for piece in _halves(args):
                out.append((None, {**base, "choices": [{"index": 0, "delta": {"tool_calls": [
                    {"index": i, "function": {"arguments": piece}}]}, "finish_reason": None}]}))
        out.append((None, {**base, "choices": [{"index": 0, "delta": {},
                                                "finish_reason": reply["choices"][0]["finish_reason"]}]}))
        if include_usage and reply.get("usage"):
            out.append((None, {**base, "choices": [], "usage": reply["usage"]}))
        out.append((None, "[DONE]"))
        return out
    out = [("message_start", {"type": "message_start", "message": {**reply, "content": [], "stop_reason": None}})]
    for i, block in enumerate(reply["content"]):
        if block["type"] == "text":
            out.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                "content_block": {"type": "text", "text": ""}}))
            for piece in _halves(block["text"]):
                out.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                    "delta": {"type": "text_delta", "text": piece}}))
        else:
            out.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}))
            for piece in _halves(json.dumps(block["input"], ensure_ascii=False)):
                out.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                    "delta": {"type": "input_json_delta", "partial_json": piece}}))
        out.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": reply["stop_reason"]},
                                  "usage": {"output_tokens": (reply.get("usage") or {}).get("output_tokens", 1)}}))
    out.append(("message_stop", {"type": "message_stop"}))
    return out


class FakeLLM:
    """Start with `with FakeLLM() as llm:`; llm.url is the base URL (…/v1)."""

    def __init__(self, keep_alive: bool = False) -> None:
        """keep_alive: answer in HTTP/1.1 and keep the connection for the next request (as real
        providers do); by default each answer closes it (HTTP/1.0)."""
        self.script: list[Any] = []
        self.requests: list[dict[str, Any]] = []
        self.default: Any = None
        """The entry answered when the script is empty (None: a 500 "script empty")."""
        self.closing = threading.Event()
        self.arrived = threading.Event()
        """Set when a request has come in."""
        self.trickled = 0
        self.trickle_done = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"
            # headers and body are separate writes: on a kept connection Nagle's algorithm
            # would hold the body until the client's delayed ACK (40 ms)
            disable_nagle_algorithm = keep_alive

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
                outer.arrived.set()
                entry = outer.script.pop(0) if outer.script else \
                    outer.default if outer.default is not None else ("status", 500, {"error": "script empty"})
                if isinstance(entry, tuple) and entry[0] == "sleep":
                    time.sleep(entry[1])
                    entry = entry[2]
                if isinstance(entry, tuple) and entry[0] == "wait":
                    entry[1].wait(60)
                    entry = entry[2]
                if isinstance(entry, tuple) and entry[0] == "drip":
                    try:
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(1 << 30))
                        self.end_headers()
                        self.wfile.flush()
                        while not outer.closing.is_set():
                            self.wfile.write(b" ")
                            self.wfile.flush()
                            outer.closing.wait(entry[1])
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                    return
                if isinstance(entry, tuple) and entry[0] == "trickle":
                    # ("trickle", seconds, "head" | "body"): one byte every `seconds`, without
                    # end, inside the headers or after them; outer.trickled counts the bytes
                    # written until the client went away (trickle_done is set then)
                    outer.trickled = 0
                    outer.trickle_done.clear()
                    try:
                        if entry[2] == "head":
                            self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Pad: ")
                        else:
                            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                             b"Content-Length: 1073741824\r\n\r\n")
                        self.wfile.flush()
                        while not outer.closing.is_set():
                            outer.closing.wait(entry[1])
                            self.wfile.write(b"a" if entry[2] == "head" else b" ")
                            self.wfile.flush()
                            outer.trickled += 1
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                    finally:
                        outer.trickle_done.set()
                    return
                if isinstance(entry, tuple) and entry[0] == "raw":
                    self._send(200, entry[1].encode(), entry[2] if len(entry) > 2 else "text/plain")
                elif isinstance(entry, tuple) and entry[0] == "status":
                    self._send(entry[1], json.dumps(entry[2]).encode(), "application/json")
                elif isinstance(parsed, dict) and parsed.get("stream"):
                    # a streaming request gets the same reply as server-sent events
                    lines = []
                    asked = parsed.get("stream_options") or {}
                    for name, data in sse_events(entry, isinstance(asked, dict) and asked.get("include_usage") is True):
                        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
                        lines.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
                    self._send(200, "".join(lines).encode(), "text/event-stream")
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

    def __enter__(self) -> FakeLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()
