"""transport: the Unix socket between zcord and its clients.

Owns the daemon's server (server: framing, roles from kernel credentials, limits, the
worker; mcp_extras: MCP prompts and resources; systemd: readiness and the watchdog),
socket locations and safety checks (paths), and the client library every bot, the CLI
and the TUI use (client, with operator wording of errors in wording).

May import: zcord.core, zcord.retrieval and zcord.service (the server runs the service).
The client and its helpers import only zcord.core.protocol, paths and wording, so a bot
or the TUI loads none of the daemon. Never textual or zcor_tui.
"""
