"""core: the Memory itself and the vocabulary every layer shares.

Owns the records (models), the live state and its transactions (state), the Memory
directory on disk (store: snapshots, backups, the lock; journal and nodecache for fast,
crash-safe starts; oplog, the operation log and its history index), text normalization
and keyword rules (text, lexicon), config.json (config), PERSONA.md (persona), the error
types (errors), crash-safe file writes (fsutil) and the JSON-RPC/MCP shapes both ends of
the socket speak (protocol: pure, no I/O).

May import: the standard library and third-party packages only. Nothing in zcord above it
(retrieval, service, transport, bot, cli) and never textual or zcor_tui.
"""
