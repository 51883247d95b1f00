"""MCP prompts and resources, so that MCP hosts (which only speak MCP, not `zcor/…`) get
auto-recall and the system prefix too. No sockets here: server.py wires these to the methods
`prompts/list`, `prompts/get`, `resources/list`, `resources/templates/list` and
`resources/read`.

- prompt `zcor_context(message, session?, sender?)`: runs auto-recall for the message in the
  session (default `mcp`) and returns one user message: the context header, then the message.
  A host that lets its user pick prompts (a slash command, a prompt menu) thus sends the
  message with the memories recalled for it.
- prompt `zcor_persona()`: the system prefix as a user message, for hosts that ignore the
  server's `instructions`.
- resource `zcor://prefix`: the system prefix (Markdown); resource template
  `zcor://context/{session}`: a session's context header as it is now.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from ..core import protocol as P
from ..service.service import Service

RESOURCE_NOT_FOUND = -32002  # MCP's code for resources/read of an unknown URI
DEFAULT_SESSION = "mcp"
PREFIX_URI = "zcor://prefix"
CONTEXT_PREFIX = "zcor://context/"

CAPABILITIES = {"prompts": {"listChanged": False}, "resources": {"subscribe": False, "listChanged": False}}

PROMPTS: list[dict[str, Any]] = [
    {"name": "zcor_context",
     "title": "Message with recalled memories",
     "description": "Your message, preceded by the memories zcor recalls for it (auto-recall: matched by "
                    "words in titles and keywords, not by meaning).",
     "arguments": [
         {"name": "message", "description": "The latest message (what you are about to ask or say).",
          "required": True},
         {"name": "session", "description": f"Conversation key for auto-recall (default {DEFAULT_SESSION!r}).",
          "required": False},
         {"name": "sender", "description": "senderKey of the message's author, e.g. the personId of a "
                                           "relationship.", "required": False},
     ]},
    {"name": "zcor_persona",
     "title": "Persona and memory rules",
     "description": "zcor's system prefix: PERSONA.md, the memory rules and the important memories "
                    "(for hosts that do not use the server's instructions).",
     "arguments": []},
]


def get_prompt(service: Service, name: str, args: dict[str, str]) -> dict[str, Any]:
    """prompts/get (runs in the daemon's worker thread; its params model checked name and arguments)."""
    if name == "zcor_persona":
        text = service.prefix()
        return {"description": PROMPTS[1]["description"],
                "messages": [{"role": "user", "content": {"type": "text", "text": text}}]}
    if name != "zcor_context":
        known = ", ".join(p["name"] for p in PROMPTS)
        raise P.RpcError(P.INVALID_PARAMS, f"Invalid params: unknown prompt {name!r} (prompts: {known})",
                         {"field": "name"})
    message = args.get("message")
    if not message or not message.strip():
        raise P.RpcError(P.INVALID_PARAMS, "Invalid params: the zcor_context prompt needs arguments.message, "
                                           "the latest message", {"field": "arguments.message"})
    session = args.get("session") or DEFAULT_SESSION
    event: dict[str, Any] = {"text": message, "origin": "external", "source": session}
    if args.get("sender"):
        event["senderKey"] = args["sender"]
    service.recall(session, [event])
    header = service.context(session)["text"].strip()
    text = f"{header}\n\n{message}" if header else message
    return {"description": f"{message[:60]} — with the memories recalled in session {session!r}",
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}]}


def list_resources() -> dict[str, Any]:
    return {"resources": [{"uri": PREFIX_URI, "name": "prefix", "title": "System prefix",
                           "description": "PERSONA.md, the memory rules and the important memories, as the "
                                          "bot gets them.", "mimeType": "text/markdown"}]}


def list_resource_templates() -> dict[str, Any]:
    return {"resourceTemplates": [{"uriTemplate": CONTEXT_PREFIX + "{session}", "name": "context",
                                   "title": "Context header of a session",
                                   "description": "The memories auto-recall picked for the session's latest "
                                                  "messages, rendered now (empty when none).",
                                   "mimeType": "text/markdown"}]}


def read_resource(service: Service, uri: str) -> dict[str, Any]:
    """resources/read (runs in the daemon's worker thread; its params model checked uri)."""
    if uri == PREFIX_URI:
        text = service.prefix()
    elif uri.startswith(CONTEXT_PREFIX) and len(uri) > len(CONTEXT_PREFIX):
        text = service.context(unquote(uri[len(CONTEXT_PREFIX):]))["text"]
    else:
        raise P.RpcError(RESOURCE_NOT_FOUND, f"Resource not found: {uri!r} (resources: {PREFIX_URI}, "
                                             f"{CONTEXT_PREFIX}{{session}})", {"uri": uri})
    return {"contents": [{"uri": uri, "mimeType": "text/markdown", "text": text}]}
