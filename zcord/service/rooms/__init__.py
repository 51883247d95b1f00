"""The rooms: each tool's rules, one module per concern (memories, important,
relationships, history, backups, synonyms, search). A room's functions take the Service,
the parsed arguments and the call (Ctx); the tool table (zcord.service.tools) names them.
The dispatcher (zcord.service.dispatcher) owns validation, commit and logging."""
