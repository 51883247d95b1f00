"""service: the rules of every tool, in-process, no sockets.

`Service` (service.py) is one Memory directory's tools and views. The tool table (tools.py)
declares each tool once: its description, its input model (inputs.py) and its rule, a
function in the room of its concern (rooms/). The dispatcher (dispatcher.py) runs every
call: validation, the room's rule under the lock, commit, the operation-log record.
Snapshots (snapshots.py), the restore gate (gate.py) and undo (undo.py: the operator's
reverts; revert_plan.py plans them, rebuild.py rebuilds what was there) sit beside it; the
Service holds its warm-up (warmup.py), the operator's settings (settings.py) and the bot's
views (views.py), each seeing it through a Protocol of what it uses (parts.py and theirs).

May import: zcord.core and zcord.retrieval. Never zcord.transport, zcord.bot, textual or
zcor_tui.
"""

from .service import Ctx, InternalError, RestoreInProgress, Service

__all__ = ["Ctx", "InternalError", "RestoreInProgress", "Service"]
