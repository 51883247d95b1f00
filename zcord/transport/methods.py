"""The methods zcord serves, each declared once in TABLE (zcord.transport.optable): MCP
(`initialize`, `ping`, `tools/list`, `tools/call`, prompts and resources), the bot's
`zcor/prefix`, `zcor/recall` and `zcor/context`, and the operator's `zcor/...` methods.

A handler takes the Methods object (what it may use of the daemon) and the Call (the
connection, the raw params, the validated params model, and `run`, which runs its work
where the table says)."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from .. import __version__
from ..core import origin as O
from ..core import protocol as P
from ..core.errors import InvalidArgument, ZcorError
from ..core.layout import BOT_BACKUP_RE
from ..service import erasure, review, scope, undo
from ..service.rooms import synonyms as synonym_room
from ..service.tools import TOOLS, declared_tools
from . import mcp_extras, metrics, replies, transfers
from . import params as M
from .connections import Connection
from .metrics import Meters
from .optable import ClientCall as C
from .optable import Method, MethodTable, Runs
from .peers import operator_refusal

if TYPE_CHECKING:
    from pathlib import Path

    from ..service.service import Service

log = logging.getLogger("zcord")

TABLE = MethodTable()
method = TABLE.method


class Runner(Protocol):
    """Where work runs (the daemon's ConnectionServer)."""

    async def work(self, fn: Callable[..., Any], *args: Any, urgent: bool = False) -> Any: ...

    async def slow_work(self, fn: Callable[[], Any], long: bool = False) -> Any: ...


class Host(Protocol):
    """What the methods use of the daemon."""

    service: Service
    socket_path: Path | None
    started: float

    @property
    def conns(self) -> set[Connection]: ...

    @property
    def meters(self) -> Meters: ...

    async def reload(self) -> ZcorError | None: ...

    def check_tools_changed(self) -> None: ...


@dataclass(slots=True)
class Call:
    """One request being handled: its connection, params and where its work runs."""

    conn: Connection
    params: dict[str, Any]
    args: Any
    runs: Runs
    runner: Runner

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """fn(*args) where the method table says this method's work runs."""
        return await self.run_at(self.runs, fn, *args)

    async def run_at(self, runs: Runs, fn: Callable[..., Any], *args: Any) -> Any:
        if runs in ("slow", "long"):
            return await self.runner.slow_work(lambda: fn(*args), long=runs == "long")
        if runs == "worker":
            return await self.runner.work(fn, *args)
        raise RuntimeError(f"a handler that runs on the {runs!r} cannot run work")


class Methods:
    """Dispatches requests by TABLE; holds what the handlers need of the daemon (the host)
    and of the connection server (the runner), and the tool-list caches."""

    def __init__(self, host: Host, runner: Runner, table: MethodTable = TABLE):
        self.host = host
        self.runner = runner
        self.table = table
        self.service = host.service
        self._declared_names: dict[bool, frozenset[str]] = {}
        self._tool_lists: dict[tuple[bool, str], P.RawJSON] = {}

    def route(self, name: str) -> Method | None:
        return self.table.get(name)

    async def handle(self, entry: Method, conn: Connection, params: dict[str, Any]) -> Any:
        """Validate params against the method's model (invalid_argument naming the field when
        they do not fit; nothing runs) and run its handler."""
        args = M.validate(entry.params, params) if entry.params is not None else None
        return await entry.handler(self, Call(conn, params, args, entry.runs, self.runner))

    def bot_tool_names(self, relationship_memory: bool) -> frozenset[str]:
        names = self._declared_names.get(relationship_memory)
        if names is None:
            names = frozenset(t.name for t in declared_tools(relationship_memory, P.BOT))
            self._declared_names[relationship_memory] = names
        return names


def _service_call(name: str) -> Callable[[Methods, Call], Awaitable[Any]]:
    """The handler of a method that is one Service call without arguments."""

    async def handler(m: Methods, call: Call) -> Any:
        return await call.run(getattr(m.service, name))

    handler.__name__ = handler.__qualname__ = f"_{name}"
    return handler


def _room_call(fn: Callable[[Service, dict[str, Any]], Any]) -> Callable[[Methods, Call], Awaitable[Any]]:
    """The handler of a method whose params a function of the Service checks and uses
    (fn(service, params), e.g. undo.revert)."""

    async def handler(m: Methods, call: Call) -> Any:
        return await call.run(fn, m.service, call.params)

    handler.__name__ = handler.__qualname__ = f"_{fn.__name__}"
    return handler


# -- MCP ----------------------------------------------------------------------------------------


@method("initialize", role="bot", runs="worker")
async def _initialize(m: Methods, call: Call) -> dict[str, Any]:
    conn, params = call.conn, call.params
    version = params.get("protocolVersion")
    if version is not None and not isinstance(version, str):
        raise P.RpcError(P.INVALID_PARAMS, "Invalid params: protocolVersion must be a string")
    if conn.initialized:
        raise P.RpcError(P.INVALID_REQUEST, f"Invalid Request: this connection already initialized (as "
                                            f"{conn.role}); initialize happens once per connection and its "
                                            f"role is fixed: open a new connection for another role")
    role = P.client_role(params)
    if role == P.OPERATOR:
        refusal = operator_refusal(conn.peer, m.service.config.operator_group)
        if refusal is not None:
            log.info("connection %d: %s", conn.id, refusal)
            raise P.app_error(P.Forbidden(refusal))
    conn.role = role
    conn.initialized = True
    instructions = None
    if conn.role == P.BOT:
        try:
            instructions = await call.run(m.service.prefix)
        except Exception as e:  # the handshake must not fail because PERSONA.md is odd
            log.warning("system prefix unavailable for initialize: %r", e)
    log.debug("connection %d initialized as %s", conn.id, conn.role)
    result = P.initialize_result(version, __version__, conn.role, instructions)
    result["capabilities"].update(mcp_extras.CAPABILITIES)
    return result


@method("ping", role="bot", runs="loop",
        client=(C("ping", "*, timeout: float | None = None", returns="None", doc="Round trip; raises when zcord does not answer."),))
async def _ping(m: Methods, call: Call) -> dict[str, Any]:
    return {}


@method("tools/list", role="bot", runs="loop",
        client=(C("list_tools", returns="list[dict[str, Any]]", result="tools",
                  doc="The tools declared for this connection's role."),))
async def _tools_list(m: Methods, call: Call) -> P.RawJSON:
    key = (m.service.config.relationship_memory, call.conn.role)
    tools = m._tool_lists.get(key)
    if tools is None:
        listing = {"tools": [spec.describe() for spec in declared_tools(*key)]}
        tools = m._tool_lists[key] = P.RawJSON(json.dumps(listing, ensure_ascii=False).encode())
    return tools


@method("tools/call", role="bot", runs="tool")
async def _tools_call(m: Methods, call: Call) -> Any:
    """Client: call_tool (hand-written: it unwraps the MCP result)."""
    conn, params = call.conn, call.params
    name = P.str_param(params, "name")
    assert name is not None
    arguments = params.get("arguments")
    meta = params.get("_meta")
    view = isinstance(meta, dict) and meta.get(P.VIEW_META) is True
    claim = meta[O.ORIGIN_META] if isinstance(meta, dict) and O.ORIGIN_META in meta else O.NO_CLAIM
    batch, present = conn.last_batch, conn.batches
    service = m.service
    actor = conn.actor
    bot = conn.role == P.BOT

    def run() -> dict[str, Any]:
        if conn.writer.is_closing():  # disconnected (e.g. for not reading) while this waited
            return {}
        allowed = m.bot_tool_names(service.config.relationship_memory) if bot else None
        return service.call(name, arguments, actor=actor, allowed=allowed, view=view, claim=claim, batch=batch,
                            present=present)

    spec = TOOLS.get(name)
    runs = spec.runs if spec is not None else "worker"  # where the tool table says it runs
    try:
        result = await call.run_at({"network": "slow", "long": "long"}.get(runs, "worker"), run)  # type: ignore[arg-type]  # a Runs value by construction
    except ZcorError as e:
        return P.tool_failure(e)
    return replies.fit_tool_result(result, name)


@method("prompts/list", role="bot", runs="loop")
async def _prompts_list(m: Methods, call: Call) -> dict[str, Any]:
    return {"prompts": mcp_extras.PROMPTS}


method("prompts/get", role="bot")(
    _room_call(mcp_extras.get_prompt))


@method("resources/list", role="bot", runs="loop")
async def _resources_list(m: Methods, call: Call) -> dict[str, Any]:
    return mcp_extras.list_resources()


@method("resources/templates/list", role="bot", runs="loop")
async def _resource_templates_list(m: Methods, call: Call) -> dict[str, Any]:
    return mcp_extras.list_resource_templates()


method("resources/read", role="bot")(
    _room_call(mcp_extras.read_resource))


# -- zcor/ methods for the bot ------------------------------------------------------------------


@method("zcor/prefix", role="bot",
        client=(C("prefix", returns="str", result="text", doc="The system prefix, built now."),))
async def _prefix(m: Methods, call: Call) -> dict[str, Any]:
    return {"text": await call.run(m.service.prefix)}


@method("zcor/recall", role="bot",
        client=(C("recall", "session: str, events: list[dict[str, Any]] | str, private: bool = False",
                  "self._recall_params(session, events, private)",
                  returns="list[str]", result="ids",
                  doc="The session's new recall set (a str is one external event; `private`: a one-to-one chat)."),
                C("recall_batch", "session: str, events: list[dict[str, Any]] | str, private: bool = False",
                  "self._recall_params(session, events, private)",
                  doc="`zcor/recall`'s whole answer: `{ids, blocked?}` (blocked: the batch's blocked senderKeys)."),))
async def _recall(m: Methods, call: Call) -> dict[str, Any]:
    session = P.str_param(call.params, "session")
    events = call.params.get("events")
    if not isinstance(events, list):
        raise P.RpcError(P.INVALID_PARAMS, "Invalid params: events must be an array of "
                                           "{text, origin, ts?, source?, senderKey?}", {"field": "events"})
    private = call.params.get("private", False)
    if not isinstance(private, bool):
        raise P.RpcError(P.INVALID_PARAMS, "Invalid params: private must be true or false (true: a one-to-one "
                                           "conversation, whose memories stay in its session)", {"field": "private"})
    started = time.perf_counter()
    answer = await call.run(m.service.recall_batch, session, events, private)
    external = any(isinstance(e, dict) and e.get("origin") == "external" for e in events)
    m.host.meters.recalled(external, answer["ids"], time.perf_counter() - started)
    if external:
        assert session is not None
        senders = O.batch_senders(events, limit=None)  # all of them: zcord cuts by trust (origin.cut)
        # the origin of what the bot does next (private: what it creates stays in this session)
        call.conn.last_batch = (session, senders, True) if private else (session, senders)
        call.conn.remember_batch(session, senders)
    return answer


@method("zcor/context", role="bot",
        client=(C("context", "session: str", '{"session": session}',
                  doc="The session's context header rendered now: `{text, ids}`."),))
async def _context(m: Methods, call: Call) -> dict[str, Any]:
    session = P.str_param(call.params, "session")
    result = await call.run(m.service.context, session)
    m.host.meters.header(result.get("text") or "")
    return result


@method("zcor/usage/report", role="bot", params=M.UsageReportParams,
        client=(C("usage_report", "session: str, input_tokens: int, cached_tokens: int, output_tokens: int, *, "
                  "cache_write_tokens: int = 0, prefix_chars: int = 0, header_chars: int = 0, "
                  "front_end: str | None = None, protocol: str | None = None, model: str | None = None",
                  "self._usage_report_params(session, input_tokens, cached_tokens, output_tokens, cache_write_tokens, "
                  "prefix_chars, header_chars, front_end, protocol, model)",
                  doc="Report one provider call's token usage for a session (`zcor/usage/report`): input_tokens is\n"
                      "the whole prompt, cached and cache-written tokens included. Returns `{recorded: true}`."),))
async def _usage_report(m: Methods, call: Call) -> dict[str, Any]:
    """A front end's usage report (zcord.service.usage): counted per session and day, not an
    operation; the bot's share botUsageReportsPerMinute."""
    a = call.args
    if a.cached_tokens + a.cache_write_tokens > a.input_tokens:
        raise InvalidArgument(
            f"cachedTokens ({a.cached_tokens}) plus cacheWriteTokens ({a.cache_write_tokens}) exceed inputTokens "
            f"({a.input_tokens}); inputTokens is the whole prompt, cached and cache-written tokens included "
            f"(Anthropic: input_tokens + cache_read_input_tokens + cache_creation_input_tokens)", field="cachedTokens")
    report = a.model_dump(by_alias=True, exclude={"session"})
    return await call.run(m.service.usage_report, a.session, report, call.conn.actor)


@method("zcor/metrics", role="bot", params=M.NoParams,
        client=(C("metrics", returns="str", result="text",
                  doc="zcord's metrics in the Prometheus text exposition format (`zcor/metrics`)."),))
async def _metrics(m: Methods, call: Call) -> dict[str, Any]:
    """Read-only, for the bot too (`zcor serve-openai` serves it on /metrics)."""
    host = m.host
    sample = await call.run(metrics.sample, m.service, host.meters, host.conns, host.started, __version__)
    return {"text": metrics.render(sample)}


@method("zcor/llm", role="bot")
async def _llm(m: Methods, call: Call) -> dict[str, Any]:
    """The deployment's provider settings (never the key), for bots such as `zcor chat`."""
    cfg = (await call.run(lambda: m.service.config)).llm
    return cfg.model_dump(mode="json", by_alias=True)


# -- operator methods -----------------------------------------------------------------------------


@method("zcor/status", params=M.NoParams, client=(C("status", doc="The daemon's and the Memory's status."),))
async def _status(m: Methods, call: Call) -> dict[str, Any]:
    status = await call.run(m.service.status)
    conns = m.host.conns
    status.update({
        "socket": str(m.host.socket_path) if m.host.socket_path else None,
        "version": __version__,
        "pid": os.getpid(),
        "uptimeSeconds": round(time.monotonic() - m.host.started, 3),
        "connections": len(conns),
        "subscribers": sum(1 for c in conns if c.subscribed),
    })
    return status


@method("zcor/usage", params=M.UsageParams,
        client=(C("usage", "session: str | None = None, days: int = 30",
                  '{"days": days} if session is None else {"session": session, "days": days}',
                  doc="Token usage per session and per day over the last `days` days: `{sessions, days, totals,\n"
                      "charsPerToken}`."),))
async def _usage(m: Methods, call: Call) -> dict[str, Any]:
    return await call.run(m.service.usage.query, call.args.session, call.args.days)


method("zcor/config/get", params=M.NoParams, client=(C("config_get", doc="The config (never the API key)."),))(
    _service_call("public_config"))


@method("zcor/config/set", params=M.ConfigSetParams,
        client=(C("config_set", "patch: dict[str, Any]", '{"patch": patch}',
                  doc="Change config fields (camelCase keys); returns the new config."),))
async def _config_set(m: Methods, call: Call) -> dict[str, Any]:
    try:
        return await call.run(m.service.update_config, call.args.patch, call.conn.actor)
    finally:
        m.host.check_tools_changed()


@method("zcor/subscribe", params=M.NoParams, runs="loop")
async def _subscribe(m: Methods, call: Call) -> dict[str, Any]:
    """Client: subscribe (hand-written: the subscription is kept across reconnects)."""
    call.conn.subscribed = True
    return {"subscribed": True}


@method("zcor/unsubscribe", params=M.NoParams, runs="loop")
async def _unsubscribe(m: Methods, call: Call) -> dict[str, Any]:
    """Client: unsubscribe (hand-written, like subscribe)."""
    call.conn.subscribed = False
    return {"subscribed": False}


@method("zcor/backups/list", params=M.NoParams,
        client=(C("backups", returns="list[dict[str, Any]]", result="items",
                  doc="The backups: `[{backupFile, size, modifiedAt, bot}]`."),))
async def _backups_list(m: Methods, call: Call) -> dict[str, Any]:
    store = m.service.store

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

    return {"items": await call.run(listing)}


@method("zcor/backups/preview", params=M.BackupPreviewParams, runs="long",
        client=(C("backup_preview", "backup_file: str", '{"backupFile": backup_file}',
                  doc="What restoring the backup would change (counts); changes nothing."),))
async def _backups_preview(m: Methods, call: Call) -> dict[str, Any]:
    """The counts a restore of the backup would change (parsed off the worker, like a restore)."""
    return await call.run(m.service.backup_preview, call.args.backup_file)


@method("zcor/synonyms/list", params=M.NoParams,
        client=(C("synonym_groups", returns="list[list[str]]", result="groups", doc="The synonym groups."),
                C("synonym_listing", doc="`zcor/synonyms/list` whole: `{groups, botAdded, held}`.")))
async def _synonyms_list(m: Methods, call: Call) -> dict[str, Any]:
    service = m.service

    def listing() -> dict[str, Any]:
        with service.lock:
            groups = service.synonym_groups()
            syn = service.synonyms
            return {"groups": groups, "botAdded": syn.bot_indexes(), "held": [list(g) for g in syn.bot["held"]]}

    return await call.run(listing)


@method("zcor/synonyms/set",
        client=(C("synonyms_set", "index: int | None, terms: list[str] | None", '{"index": index, "terms": terms}',
                  doc="Add (index None), replace, or remove (terms None) a synonym group."),))
async def _synonyms_set(m: Methods, call: Call) -> dict[str, Any]:
    return await call.run(m.service.set_synonym_group, call.params.get("index"), call.params.get("terms"),
                          call.conn.actor)


@method("zcor/synonyms/held",
        client=(C("synonyms_held", "action: str, held: int | None = None, index: int | None = None",
                  "self._held_params(action, held, index)",
                  doc="`zcor/synonyms/held`: accept or discard held group `held`, or discard the bot's group\n"
                      "at `index`."),))
async def _synonyms_held(m: Methods, call: Call) -> dict[str, Any]:
    return await call.run(synonym_room.held_action, m.service, call.params, call.conn.actor)


@method("zcor/recall/explain", params=M.RecallExplainParams,
        client=(C("recall_explain", "text: str, sender_key: str | None = None",
                  '{"text": text} if sender_key is None else {"text": text, "senderKey": sender_key}',
                  doc="Segmentation, expansion, hits and the header a text would produce."),))
async def _recall_explain(m: Methods, call: Call) -> dict[str, Any]:
    return await call.run(m.service.recall_explain, call.args.text, call.args.sender_key)


@method("zcor/recall-log", params=M.RecallLogParams,
        client=(C("recall_log", "session: str, limit: int = 50, offset: int = 0, before: str | None = None",
                  '{"session": session, "limit": limit, "offset": offset, **({} if before is None else {"before": before})}',
                  doc="`zcor/recall-log`: a session's latest auto-recall batches, newest first (what the bot was\n"
                      "shown: ids, reasons, header size); `before` keeps those at or before an ISO time."),))
async def _recall_log(m: Methods, call: Call) -> dict[str, Any]:
    a = call.args
    return await call.run(m.service.recall_log.read, a.session, a.limit, a.offset, a.before)


@method("zcor/consolidate/list", params=M.ConsolidateListParams,
        client=(C("consolidate_list", "limit: int = 20, offset: int = 0, kind: str | None = None",
                  '{"limit": limit, "offset": offset, **({} if kind is None else {"kind": kind})}',
                  doc="`zcor/consolidate/list`: clusters of near-duplicate memories and superseded chains to\n"
                      "fold, not dismissed; `{items, total, nextOffset, scan}`."),))
async def _consolidate_list(m: Methods, call: Call) -> dict[str, Any]:
    a = call.args
    return await call.run(m.service.consolidate_list, a.limit, a.offset, a.kind)


@method("zcor/consolidate/dismiss", params=M.ConsolidateDismissParams,
        client=(C("consolidate_dismiss", "ids: list[str]", '{"ids": ids}',
                  doc="Remember a consolidation proposal (its ids) as dismissed: not proposed again."),))
async def _consolidate_dismiss(m: Methods, call: Call) -> dict[str, Any]:
    return await call.run(m.service.consolidate_dismiss, call.args.ids)


@method("zcor/reload", params=M.NoParams, runs="loop",
        client=(C("reload", doc="Re-read config.json and synonyms.json; returns the config."),))
async def _reload_method(m: Methods, call: Call) -> dict[str, Any]:
    err = await m.host.reload()
    if err is not None:
        raise err
    return await call.run_at("worker", m.service.public_config)


method("zcor/snapshot", params=M.NoParams)(
    _service_call("snapshot"))


method("zcor/persona/get", params=M.NoParams,
        client=(C("persona_get", doc="PERSONA.md: `{text, empty, path}` (empty: nothing but comments and blanks)."),))(
    _service_call("persona_get"))


@method("zcor/persona/set",
        client=(C("persona_set", "text: str", '{"text": text}',
                  doc="Replace PERSONA.md (atomically, recorded in the operation log)."),))
async def _persona_set(m: Methods, call: Call) -> dict[str, Any]:
    return await call.run(m.service.persona_set, call.params.get("text"), call.conn.actor)


@method("zcor/history/query",
        client=(C("history_query", "filters: dict[str, Any] | None = None", "filters or {}",
                  doc="`zcor/history/query`: `{keywords?, from?, to?, limit?, offset?, changesOnly?, actor?,\n"
                      "tool?, target?, origin?}` → `{items, total, nextOffset}` (not recorded)."),))
async def _history_query(m: Methods, call: Call) -> dict[str, Any]:
    return await call.run(m.service.history_query, call.params)


method("zcor/history/revert",
        client=(C("history_revert", "seq: int, force: bool = False, preview: bool = False",
                  "self._revert_params(seq, force, preview)",
                  doc="Undo every change of logged operation `seq` as a new operation (`zcor/history/revert`);\n"
                      "with `preview` nothing changes and the result lists the changes and conflicts."),))(
    _room_call(undo.revert))


method("zcor/history/reinstate",
        client=(C("history_reinstate", "id: str, change_id: int", '{"id": id, "changeId": change_id}',
                  doc="Make the version written by change `change_id` current again, as one new change."),))(
    _room_call(undo.reinstate))


@method("zcor/history/versions", params=M.HistoryVersionsParams,
        client=(C("history_versions", "id: str", '{"id": id}',
                  doc="Every version of a memory (or relationship, by personId), oldest first."),))
async def _history_versions(m: Methods, call: Call) -> dict[str, Any]:
    return await call.run(undo.versions, m.service, call.args.id)


@method("zcor/history/at", params=M.HistoryAtParams,
        client=(C("history_at", "time: str | datetime", "self._time_param(time)",
                  doc="The whole Memory as it was at an instant (ISO 8601 with its UTC offset, or an aware datetime)."),))
async def _history_at(m: Methods, call: Call) -> dict[str, Any]:
    text = call.args.time
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidArgument(f"time {text!r} is not an ISO 8601 time", field="time") from None
    if when.tzinfo is None:
        raise InvalidArgument("time must carry its UTC offset, e.g. 2026-12-01T20:00:00+08:00", field="time")
    return await call.run(undo.state_at, m.service, when)


method("zcor/history/revertOrigin",
        client=(C("history_revert_origin", "sender: str, start: str | datetime | None = None, "
                  "end: str | datetime | None = None, force: bool = False, preview: bool = False, "
                  "shared: bool = False",
                  "self._revert_origin_params(sender, start, end, force, preview, shared)",
                  doc="Undo every change caused by `sender` (between `start` and `end`), newest first, as\n"
                      "one operation (`zcor/history/revertOrigin`); with `preview` nothing changes. Only\n"
                      "the changes `sender` spoke for; with `shared` also those they were present at."),))(
    _room_call(undo.revert_origin))


# -- origin, per-sender trust and review (issue 22) ---------------------------------------------


method("zcor/trust/get", params=M.StrictNoParams,
        client=(C("trust_get", doc="`zcor/trust/get` → `{default, senders: [{sender, level}]}`."),))(
    _service_call("trust_get"))


@method("zcor/trust/set",
        client=(C("trust_set", "sender: str, level: str | None", '{"sender": sender, "level": level}',
                  doc="Give a sender a trust level (trusted, normal, untrusted, blocked; None: the default)."),))
async def _trust_set(m: Methods, call: Call) -> dict[str, Any]:
    return await call.run(m.service.trust_set, call.params, call.conn.actor)


method("zcor/review/list",
        client=(C("review_list", "offset: int = 0, limit: int | None = None",
                  '{"offset": offset, **({"limit": limit} if limit is not None else {})}',
                  doc="`zcor/review/list` → `{items: [{seq, at, tool, origin, by, changes}], total, nextOffset?}`,\n"
                      "newest first, a page at a time (`offset`, `limit`)."),))(
    _room_call(review.review_list))


method("zcor/review/approve",
        client=(C("review_approve", "ids: list[int]", "self._review_params(ids)",
                  doc="Approve held changes by their operation seqs (they are recalled from now on)."),))(
    _room_call(review.approve))


method("zcor/review/reject",
        client=(C("review_reject", "ids: list[int], force: bool = False, preview: bool = False",
                  "self._review_params(ids, force, preview)",
                  doc="Reject held changes by their operation seqs: each is reverted, as one operation."),))(
    _room_call(review.reject))


# -- privacy (issue 34) ---------------------------------------------------------------------------


@method("zcor/erase", params=M.EraseParams, runs="long",
        client=(C("erase", "sender: str | None = None, person_id: str | None = None, preview: bool = False",
                  "self._erase_params(sender, person_id, preview)",
                  doc="Forget a person (`zcor/erase`): their relationship, trust entry, linked memories and\n"
                      "those only they caused, redacted from every file under the Memory directory; with\n"
                      "`preview` nothing changes and the result lists exactly what goes. Irreversible."),))
async def _erase(m: Methods, call: Call) -> dict[str, Any]:
    return await call.run(erasure.erase, m.service, call.params)


@method("zcor/subject", params=M.SubjectParams, runs="long",
        client=(C("subject", "sender: str | None = None, person_id: str | None = None",
                  "self._erase_params(sender, person_id, False)",
                  doc="Everything the Memory holds about or from a person (`zcor/subject`): memories,\n"
                      "relationship, trust, held changes and history records."),))
async def _subject(m: Methods, call: Call) -> dict[str, Any]:
    return await call.run(erasure.subject, m.service, call.params)


method("zcor/scope/set",
        client=(C("scope_set", "id: str, scope: str | dict[str, str]", '{"id": id, "scope": scope}',
                  doc="Change a memory's scope (`zcor/scope/set`): \"everywhere\" or {\"session\": NAME}, as a\n"
                      "logged operation that zcor/history/revert undoes."),))(
    _room_call(scope.set_scope))


# -- import and export (issue 36) -----------------------------------------------------------------


@method("zcor/import", params=M.ImportParams, runs="long",
        client=(C("import_file", "params: dict[str, Any]", "params",
                  doc="`zcor/import {data | uploadId, encoding?, name?, format?, preview?, parentId?, persona?}`:\n"
                      "a lore file into memories, as one operation (zcord.transport.interop_client sends any size)."),))
async def _import(m: Methods, call: Call) -> dict[str, Any]:
    return await call.run(transfers.run_import, m.service, call.conn, call.args)


@method("zcor/import/upload", params=M.UploadParams, runs="loop",
        client=(C("import_upload", "data: str, upload_id: str | None = None",
                  '{"data": data} if upload_id is None else {"data": data, "uploadId": upload_id}',
                  doc="Add a piece of a file to import: `{uploadId, size}`."),))
async def _import_upload(m: Methods, call: Call) -> dict[str, Any]:
    return transfers.upload(call.conn, call.args.data, call.args.upload_id)


@method("zcor/export", params=M.ExportParams, runs="long",
        client=(C("export", "format: str = \"jsonl\"", '{"format": format}',
                  doc="`zcor/export {format}`: the Memory as files (inline, or an exportId to read in pieces)."),))
async def _export(m: Methods, call: Call) -> dict[str, Any]:
    return await call.run(transfers.start_export, m.service, call.conn, call.args.format)


@method("zcor/export/read", params=M.ExportReadParams, runs="loop",
        client=(C("export_read", "export_id: str, file: int = 0, offset: int = 0",
                  '{"exportId": export_id, "file": file, "offset": offset}',
                  doc="A piece of a kept export's file: `{text, nextOffset}`."),))
async def _export_read(m: Methods, call: Call) -> dict[str, Any]:
    return transfers.read_export(call.conn, call.args.export_id, call.args.file, call.args.offset)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).astimezone().isoformat(timespec="seconds")
