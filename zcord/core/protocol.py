"""JSON-RPC 2.0 envelopes, error codes and the MCP shapes zcord speaks. No I/O, no asyncio.

Framing is one JSON message per line (UTF-8). Batches (JSON arrays) are answered with
one -32600 error: MCP dropped batching in 2025-06-18 and no zcor client sends them.
Responses sent by a client (replies to server requests) are ignored: zcord never sends
requests.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Literal, overload

from .errors import ZcorError

JSONRPC = "2.0"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
ZCOR_ERROR = -32000
"""An application error from a `zcor/…` method; `data` is `ZcorError.to_dict()`."""

MAX_LINE = 1 << 20
"""Longest accepted message in bytes, newline excluded."""

SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
"""MCP protocol revisions zcord answers, newest first."""

SERVER_NAME = "zcord"
OPERATOR = "operator"
BOT = "bot"


VIEW_META = "zcor/view"
"""`tools/call` `_meta` key: an operator's read-only call made only to display something,
answered but not recorded in the operation log (refused, and recorded, for the bot)."""
VIEW_TOOLS = frozenset({"zcor_memory_read", "zcor_memory_children", "zcor_memory_trace", "zcor_memory_query",
                        "zcor_relationship_read", "zcor_relationship_query", "zcor_memory_history"})
"""The read-only tools an operator may call that way."""


class Forbidden(ZcorError):
    """The method is for operators and the caller is the bot."""

    code = "forbidden"


class RpcError(Exception):
    """A JSON-RPC error object: code, message, optional data."""

    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            out["data"] = self.data
        return out


class ProtocolError(RpcError):
    """A message that cannot be dispatched; `id` is the request id when it could be read."""

    def __init__(self, code: int, message: str, id: Any = None, data: Any = None):
        super().__init__(code, message, data)
        self.id = id


_NO_ID = object()


@dataclass(frozen=True, slots=True)
class Message:
    """One incoming request (has an id) or notification (no id)."""

    method: str
    params: Any = None
    id: Any = _NO_ID

    @property
    def is_request(self) -> bool:
        return self.id is not _NO_ID


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _valid_id(value: Any) -> bool:
    return (isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
            or (isinstance(value, float) and math.isfinite(value)) or value is None)


def decode(line: bytes) -> Message | None:
    """Parse one line into a Message.

    Returns:
        None for input that needs no answer: a blank line or a response from the client.

    Raises:
        ProtocolError: the line is not a valid JSON-RPC request or notification.
    """
    line = line.strip()
    if not line:
        return None
    try:
        text = line.decode("utf-8")
        obj = json.loads(text, parse_constant=_reject_constant)
    except UnicodeDecodeError as e:
        raise ProtocolError(PARSE_ERROR, f"Parse error: the line is not valid UTF-8 ({e.reason} at byte "
                                         f"{e.start})") from None
    except (ValueError, RecursionError) as e:
        raise ProtocolError(PARSE_ERROR, f"Parse error: {e}" if isinstance(e, ValueError)
                            else "Parse error: JSON nested too deeply") from None
    if isinstance(obj, list):
        raise ProtocolError(INVALID_REQUEST, "Invalid Request: batches (JSON arrays) are not supported; "
                                             "send one JSON-RPC message per line")
    if not isinstance(obj, dict):
        raise ProtocolError(INVALID_REQUEST, "Invalid Request: a message must be a JSON object")
    has_id = "id" in obj
    msg_id = obj.get("id")
    if has_id and not _valid_id(msg_id):
        raise ProtocolError(INVALID_REQUEST, "Invalid Request: id must be a string or a number")
    reply_id = msg_id if has_id else None
    if obj.get("jsonrpc") != JSONRPC:
        raise ProtocolError(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', reply_id)
    if "method" not in obj:
        if has_id and ("result" in obj or "error" in obj):
            return None  # a response; zcord sends no requests, so there is nothing to match
        raise ProtocolError(INVALID_REQUEST, 'Invalid Request: "method" is missing', reply_id)
    method = obj["method"]
    if not isinstance(method, str):
        raise ProtocolError(INVALID_REQUEST, 'Invalid Request: "method" must be a string', reply_id)
    params = obj.get("params")
    if params is not None and not isinstance(params, (dict, list)):
        raise ProtocolError(INVALID_PARAMS, "Invalid params: params must be an object", reply_id)
    if has_id:
        return Message(method, params, msg_id)
    return Message(method, params)


def encode(message: dict[str, Any]) -> bytes:
    """One message as a UTF-8 line; lone surrogates (never valid UTF-8) are sent escaped."""
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode() + b"\n"


class RawJSON:
    """A result already encoded as JSON (UTF-8), spliced into the response unchanged."""

    __slots__ = ("data",)

    def __init__(self, data: bytes):
        self.data = data


def encode_response(msg_id: Any, result: Any) -> bytes:
    """A success response line; a RawJSON result is not encoded again."""
    if isinstance(result, RawJSON):
        return b"".join([b'{"jsonrpc":"2.0","id":', json.dumps(msg_id).encode(), b',"result":', result.data,
                         b"}\n"])
    return encode(response(msg_id, result))


def response(msg_id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": JSONRPC, "id": msg_id, "result": result}


def error_response(msg_id: Any, err: RpcError) -> dict[str, Any]:
    return {"jsonrpc": JSONRPC, "id": msg_id, "error": err.to_dict()}


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": JSONRPC, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def request(msg_id: Any, method: str, params: Any = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": JSONRPC, "id": msg_id, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def app_error(err: ZcorError) -> RpcError:
    """A ZcorError from a `zcor/…` method as a JSON-RPC error."""
    return RpcError(ZCOR_ERROR, err.message, err.to_dict())


def method_not_found(method: str) -> RpcError:
    return RpcError(METHOD_NOT_FOUND, f"Method not found: {method[:200]}")


def too_large(limit: int = MAX_LINE) -> ProtocolError:
    return ProtocolError(INVALID_REQUEST, f"Invalid Request: message longer than {limit} bytes; the rest of "
                                          f"that line was discarded")


# -- params ---------------------------------------------------------------------------


def object_params(params: Any) -> dict[str, Any]:
    """The params of a method that takes named parameters ({} when absent)."""
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, "Invalid params: expected an object of named parameters")
    return params


@overload
def str_param(params: dict[str, Any], name: str, required: Literal[True] = True) -> str: ...


@overload
def str_param(params: dict[str, Any], name: str, required: bool) -> str | None: ...


def str_param(params: dict[str, Any], name: str, required: bool = True) -> str | None:
    value = params.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        what = "is required" if value is None else "must be a string"
        raise RpcError(INVALID_PARAMS, f"Invalid params: {name} {what}", {"field": name})
    return value


# -- MCP ------------------------------------------------------------------------------


def negotiate_version(requested: Any) -> str:
    """The client's version when zcord speaks it, else the newest zcord knows."""
    return requested if requested in SUPPORTED_VERSIONS else SUPPORTED_VERSIONS[0]


def client_role(params: dict[str, Any]) -> str:
    """`operator` when initialize says capabilities.experimental.zcor.role = "operator"."""
    caps = params.get("capabilities")
    exp = caps.get("experimental") if isinstance(caps, dict) else None
    zcor = exp.get("zcor") if isinstance(exp, dict) else None
    role = zcor.get("role") if isinstance(zcor, dict) else None
    return OPERATOR if role == OPERATOR else BOT


def initialize_result(requested_version: Any, server_version: str, role: str,
                      instructions: str | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {
        "protocolVersion": negotiate_version(requested_version),
        "capabilities": {"tools": {"listChanged": True},
                         "experimental": {"zcor": {"role": role}}},
        "serverInfo": {"name": SERVER_NAME, "version": server_version},
    }
    if instructions:
        result["instructions"] = instructions
    return result


def tool_success(result: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": json.dumps(result, ensure_ascii=False)}],
            "structuredContent": result, "isError": False}


def tool_success_raw(result: dict[str, Any]) -> RawJSON:
    """tool_success(result), encoded with one serialization of result instead of three."""
    text = json.dumps(result, ensure_ascii=False)
    try:
        return RawJSON(b"".join([b'{"content":[{"type":"text","text":', json.dumps(text, ensure_ascii=False).encode(),
                                 b'}],"structuredContent":', text.encode(), b',"isError":false}']))
    except UnicodeEncodeError:  # a lone surrogate: let encode() escape it
        return RawJSON(encode(tool_success(result))[:-1])


def tool_failure(err: ZcorError) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": err.message}],
            "structuredContent": err.to_dict(), "isError": True}
