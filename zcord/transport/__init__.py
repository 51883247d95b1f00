"""transport: the Unix socket between zcord and its clients.

Owns the daemon's server (server: the Daemon, which holds a ConnectionServer from
connections — framing, limits, the worker — and the Methods of methods, every method
declared once in its table (optable; params models in params); peers: roles from kernel
credentials; mcp_extras: MCP prompts and resources; systemd: readiness and the watchdog),
the `zcor mcp` bridge between an MCP host's stdio and the socket (mcp_bridge),
socket locations and safety checks (paths), and the client library every bot, the CLI
and the TUI use (client, its typed calls generated from the table into client_calls by
gen_client, with operator wording of errors in wording).

May import: zcord.core, zcord.retrieval and zcord.service (the server runs the service).
The client and its helpers (client_base, client_calls) import only zcord.core.protocol,
core.errors, core.origin, paths and wording, so a bot or the TUI loads none of the daemon
(and no pydantic). Never textual or zcor_tui.
"""
