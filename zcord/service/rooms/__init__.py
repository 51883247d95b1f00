"""The rooms: each tool's rules, one module per concern (memories, important,
relationships, history, backups, synonyms, search). A room's functions take the Service as
a Room (or FlowRoom, zcord.service.parts: what they use of it), the parsed arguments and the
call (Ctx); the tool table (zcord.service.tools) names them. The dispatcher
(zcord.service.dispatcher) owns validation, commit and logging; a tool that lets the lock go
declares its steps (calls.Steps) and the dispatcher runs them.

May import: zcord.core, zcord.retrieval, the service's calls and inputs, and other rooms.
The Protocols and the tool table only for annotations (under TYPE_CHECKING): the table
imports the rooms, so a room never imports it or the dispatcher.
"""
