"""The rooms: each tool's rules, one module per concern (memories, important,
relationships, history, backups, synonyms, search). A room's functions take the Service,
the parsed arguments and the call (Ctx); the tool table (zcord.service.tools) names them.
The dispatcher (zcord.service.dispatcher) owns validation, commit and logging.

May import: zcord.core, zcord.retrieval, the service's calls and inputs, and other rooms.
The Service and the tool table only for annotations (under TYPE_CHECKING): the table
imports the rooms, so a room never imports it or the dispatcher.
"""
