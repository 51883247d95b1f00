"""The methods zcord serves: MCP (`initialize`, `ping`, `tools/list`, `tools/call`, prompts
and resources), the bot's `zcor/prefix`, `zcor/recall` and `zcor/context`, and the
operator's `zcor/...` methods. Each handler takes the connection and the request's params
and runs its Service call through the daemon's worker."""

from __future__ import annotations

import json
import logging
import os
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..core import origin as O
from ..core import protocol as P
from ..core.errors import InvalidArgument, ZcorError
from ..core.layout import BOT_BACKUP_RE
from ..service import review, undo
from ..service.rooms import synonyms as synonym_room
from ..service.tools import TOOLS, declared_tools
from . import mcp_extras, replies
from .connections import Connection
from .peers import operator_refusal

if TYPE_CHECKING:
    import asyncio
    from pathlib import Path

    from ..service.service import Service

log = logging.getLogger("zcord")



class MethodHandlers:
    """The handlers of Daemon.methods (the daemon supplies the service, the worker and the
    connection bookkeeping)."""

    service: Service
    socket_path: Path | None
    started: float
    conns: set[Connection]
    _long_slots: asyncio.Semaphore | None
    _declared_names: dict[bool, frozenset[str]]
    _tool_lists: dict[tuple[bool, str], P.RawJSON]

    async def _initialize(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        version = params.get("protocolVersion")
        if version is not None and not isinstance(version, str):
            raise P.RpcError(P.INVALID_PARAMS, "Invalid params: protocolVersion must be a string")
        if conn.initialized:
            raise P.RpcError(P.INVALID_REQUEST, f"Invalid Request: this connection already initialized (as "
                                                f"{conn.role}); initialize happens once per connection and its "
                                                f"role is fixed: open a new connection for another role")
        role = P.client_role(params)
        if role == P.OPERATOR:
            refusal = operator_refusal(conn.peer, self.service.config.operator_group)
            if refusal is not None:
                log.info("connection %d: %s", conn.id, refusal)
                raise P.app_error(P.Forbidden(refusal))
        conn.role = role
        conn.initialized = True
        instructions = None
        if conn.role == P.BOT:
            try:
                instructions = await self._work(self.service.prefix)
            except Exception as e:  # the handshake must not fail because PERSONA.md is odd
                log.warning("system prefix unavailable for initialize: %r", e)
        log.debug("connection %d initialized as %s", conn.id, conn.role)
        result = P.initialize_result(version, __version__, conn.role, instructions)
        result["capabilities"].update(mcp_extras.CAPABILITIES)
        return result

    async def _ping(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    def _bot_tool_names(self, relationship_memory: bool) -> frozenset[str]:
        names = self._declared_names.get(relationship_memory)
        if names is None:
            names = frozenset(t.name for t in declared_tools(relationship_memory, P.BOT))
            self._declared_names[relationship_memory] = names
        return names

    async def _tools_list(self, conn: Connection, params: dict[str, Any]) -> P.RawJSON:
        key = (self.service.config.relationship_memory, conn.role)
        tools = self._tool_lists.get(key)
        if tools is None:
            listing = {"tools": [spec.describe() for spec in declared_tools(*key)]}
            tools = self._tool_lists[key] = P.RawJSON(json.dumps(listing, ensure_ascii=False).encode())
        return tools

    async def _tools_call(self, conn: Connection, params: dict[str, Any]) -> Any:
        name = P.str_param(params, "name")
        arguments = params.get("arguments")
        meta = params.get("_meta")
        view = isinstance(meta, dict) and meta.get(P.VIEW_META) is True
        claim = meta[O.ORIGIN_META] if isinstance(meta, dict) and O.ORIGIN_META in meta else O.NO_CLAIM
        batch = conn.last_batch
        service = self.service
        actor = conn.actor
        bot = conn.role == P.BOT

        def run() -> dict[str, Any]:
            if conn.writer.is_closing():  # disconnected (e.g. for not reading) while this waited
                return {}
            allowed = self._bot_tool_names(service.config.relationship_memory) if bot else None
            return service.call(name, arguments, actor=actor, allowed=allowed, view=view, claim=claim, batch=batch)

        spec = TOOLS.get(name)
        runs = spec.runs if spec is not None else "worker"  # where the tool table says it runs
        try:
            if runs == "network":
                result = await self._slow_work(run)
            elif runs == "long":
                result = await self._slow_work(run, self._long_slots)
            else:
                result = await self._work(run)
        except ZcorError as e:
            return P.tool_failure(e)
        return replies.fit_tool_result(result, name)

    # -- zcor/ methods for the bot -------------------------------------------------------------

    async def _prefix(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return {"text": await self._work(self.service.prefix)}

    async def _recall(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        session = P.str_param(params, "session")
        events = params.get("events")
        if not isinstance(events, list):
            raise P.RpcError(P.INVALID_PARAMS, "Invalid params: events must be an array of "
                                               "{text, origin, ts?, source?, senderKey?}", {"field": "events"})
        ids = await self._work(self.service.recall, session, events)
        if any(isinstance(e, dict) and e.get("origin") == "external" for e in events):
            conn.last_batch = (session, O.batch_senders(events))  # the origin of what the bot does next
        return {"ids": list(ids)}

    async def _context(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        session = P.str_param(params, "session")
        return await self._work(self.service.context, session)

    # -- operator methods ------------------------------------------------------------------------

    async def _status(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        status = await self._work(self.service.status)
        status.update({
            "socket": str(self.socket_path) if self.socket_path else None,
            "version": __version__,
            "pid": os.getpid(),
            "uptimeSeconds": round(time.monotonic() - self.started, 3),
            "connections": len(self.conns),
            "subscribers": sum(1 for c in self.conns if c.subscribed),
        })
        return status

    async def _config_get(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(self.service.public_config)

    async def _config_set(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        patch = params.get("patch")
        if not isinstance(patch, dict):
            raise P.RpcError(P.INVALID_PARAMS, "Invalid params: patch must be an object of config changes, "
                                               'e.g. {"relationshipMemory": false}', {"field": "patch"})
        try:
            return await self._work(self.service.update_config, patch, conn.actor)
        finally:
            self._check_tools_changed()

    async def _subscribe(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        conn.subscribed = True
        return {"subscribed": True}

    async def _unsubscribe(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        conn.subscribed = False
        return {"subscribed": False}

    async def _backups_list(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        store = self.service.store

        def listing() -> list[dict[str, Any]]:
            items = []
            for name in store.list_backups():
                try:
                    st = (store.backups / name).stat()
                except OSError:
                    continue
                items.append({"backupFile": name, "size": st.st_size,
                              "modifiedAt": _iso(st.st_mtime), "bot": bool(BOT_BACKUP_RE.match(name))})
            return items

        return {"items": await self._work(listing)}

    async def _backups_preview(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        """The counts a restore of the backup would change (parsed off the worker, like a restore)."""
        name = P.str_param(params, "backupFile")
        return await self._slow_work(lambda: self.service.backup_preview(name), self._long_slots)

    async def _synonyms_list(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        def listing() -> dict[str, Any]:
            with self.service.lock:
                groups = self.service.synonym_groups()
                syn = self.service.synonyms
                return {"groups": groups, "botAdded": syn.bot_indexes(), "held": [list(g) for g in syn.bot["held"]]}

        return await self._work(listing)

    async def _synonyms_set(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(self.service.set_synonym_group, params.get("index"), params.get("terms"),
                                conn.actor)

    async def _synonyms_held(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(synonym_room.held_action, self.service, params, conn.actor)

    async def _llm(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        """The deployment's provider settings (never the key), for bots such as `zcor chat`."""
        cfg = (await self._work(lambda: self.service.config)).llm
        return cfg.model_dump(mode="json", by_alias=True)

    async def _recall_explain(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        text = P.str_param(params, "text")
        return await self._work(self.service.recall_explain, text, params.get("senderKey"))

    async def _persona_get(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(self.service.persona_get)

    async def _persona_set(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(self.service.persona_set, params.get("text"), conn.actor)

    async def _history_query(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(self.service.history_query, params)

    # -- MCP prompts and resources (zcord/transport/mcp_extras.py) ------------------------------------------

    async def _prompts_list(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return {"prompts": mcp_extras.PROMPTS}

    async def _prompts_get(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(mcp_extras.get_prompt, self.service, params)

    async def _resources_list(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return mcp_extras.list_resources()

    async def _resource_templates_list(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return mcp_extras.list_resource_templates()

    async def _resources_read(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(mcp_extras.read_resource, self.service, params)

    async def _history_revert(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(undo.revert, self.service, params)

    async def _history_reinstate(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(undo.reinstate, self.service, params)

    async def _history_versions(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        if set(params) - {"id"}:
            raise InvalidArgument("params must be {id}")
        return await self._work(undo.versions, self.service, params.get("id"))

    async def _history_at(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        if set(params) - {"time"} or not isinstance(params.get("time"), str):
            raise InvalidArgument("params must be {time}: an ISO 8601 time with its UTC offset", field="time")
        try:
            when = datetime.fromisoformat(params["time"])
        except ValueError:
            raise InvalidArgument(f"time {params['time']!r} is not an ISO 8601 time", field="time") from None
        if when.tzinfo is None:
            raise InvalidArgument("time must carry its UTC offset, e.g. 2026-12-01T20:00:00+08:00", field="time")
        return await self._work(undo.state_at, self.service, when)

    # -- origin, per-sender trust and review (issue 22) ------------------------------------------

    async def _trust_get(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        if params:
            raise InvalidArgument("zcor/trust/get takes no parameters")
        return await self._work(self.service.trust_get)

    async def _trust_set(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(self.service.trust_set, params, conn.actor)

    async def _review_list(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(review.review_list, self.service, params)

    async def _review_approve(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(review.approve, self.service, params)

    async def _review_reject(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(review.reject, self.service, params)

    async def _history_revert_origin(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(undo.revert_origin, self.service, params)

    async def _snapshot_method(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._work(self.service.snapshot)

    async def _reload_method(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        err = await self._reload()
        if err is not None:
            raise err
        return await self._work(self.service.public_config)


def _iso(ts: float) -> str:
    from datetime import datetime

    return datetime.fromtimestamp(ts, UTC).astimezone().isoformat(timespec="seconds")
