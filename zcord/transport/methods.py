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
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Protocol, TypeVar

from .. import __version__
from ..core import origin as O
from ..core import protocol as P
from ..core.errors import InvalidArgument, ZcorError
from ..core.layout import BOT_BACKUP_RE
from ..service import erasure, review, scope, undo
from ..service.rooms import synonyms as synonym_room
from ..service.tools import TOOLS, declared_tools
from . import conform, mcp_extras, metrics, replies, transfers
from . import params as M
from . import results as R
from .connections import Connection
from .metrics import Meters
from .optable import ClientCall as C
from .optable import Method, MethodTable, Role, Runs
from .peers import operator_refusal

if TYPE_CHECKING:
    from pathlib import Path

    from ..service.service import Service

log = logging.getLogger(__name__)

TABLE = MethodTable()


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


Ps = ParamSpec("Ps")
T = TypeVar("T")
A = TypeVar("A", bound=M.Args)
A_co = TypeVar("A_co", bound=M.Args, covariant=True)


@dataclass(frozen=True, slots=True)
class Call(Generic[A_co]):
    """One request being handled: its connection, its raw params (as the operation log
    records them), its params validated by the method's model (`args`) and where its work runs."""

    conn: Connection
    params: dict[str, Any]
    args: A_co
    runs: Runs
    runner: Runner

    async def run(self, fn: Callable[Ps, T], *args: Ps.args, **kwargs: Ps.kwargs) -> T:
        """fn(*args) where the method table says this method's work runs."""
        return await self.run_at(self.runs, fn, *args, **kwargs)

    async def run_at(self, runs: Runs, fn: Callable[Ps, T], *args: Ps.args, **kwargs: Ps.kwargs) -> T:
        result: T
        if runs in ("slow", "long"):
            result = await self.runner.slow_work(lambda: fn(*args, **kwargs), long=runs == "long")
        elif runs == "worker":
            result = await self.runner.work(lambda: fn(*args, **kwargs))
        else:
            raise RuntimeError(f"a handler that runs on the {runs!r} cannot run work")
        return result


CHECK_TARGET = conform.target()


def _check_result(entry: Method, params: dict[str, Any], result: Any) -> None:
    """(ZCOR_CHECK_RESULTS) The answer against its result model (a tool's structured
    result against the tool's): a difference fails the request as an internal error naming
    it (CHECK_TARGET "1"), or is listed in the file CHECK_TARGET names."""
    found: list[str] = []
    if isinstance(result, P.RawJSON):  # encoded already (a tool's answer, a cached list)
        result = json.loads(result.data)
    if entry.result is not None:
        found = conform.problems(entry.result, result, entry.name)
    if entry.name == "tools/call" and isinstance(result, dict) and not result.get("isError") \
            and "structuredContent" in result:
        name = params.get("name")
        model = R.TOOL_RESULTS.get(name) if isinstance(name, str) else None
        if model is not None:
            found += conform.problems(model, result["structuredContent"], str(name))
    if not found:
        return
    if CHECK_TARGET != "1":
        with open(CHECK_TARGET, "a", encoding="utf-8") as f:
            f.write(json.dumps({"method": entry.name, "tool": params.get("name"), "problems": found}) + "\n")
        return
    raise RuntimeError("the result differs from its model: " + "; ".join(found[:5]))


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
        args = M.validate(entry.params, params) if entry.validate else M.NoParams()
        result = await entry.handler(self, Call(conn, params, args, entry.runs, self.runner))
        if CHECK_TARGET:
            _check_result(entry, params, result)
        return result

    def bot_tool_names(self, relationship_memory: bool) -> frozenset[str]:
        names = self._declared_names.get(relationship_memory)
        if names is None:
            names = frozenset(t.name for t in declared_tools(relationship_memory, P.BOT))
            self._declared_names[relationship_memory] = names
        return names


Res = TypeVar("Res")
Handler = Callable[[Methods, Call[A]], Awaitable[Res]]


def method(name: str, *, params: type[A], result: type[Res], role: Role = "operator", runs: Runs = "worker",
           client: tuple[C, ...] = (), validate: bool = True,
           table: MethodTable = TABLE) -> Callable[[Handler[A, Res]], Handler[A, Res]]:
    """Declare a method in the table: the type checker holds its handler to the params model
    (`call.args`) and the result model (what it returns)."""

    def register(handler: Handler[A, Res]) -> Handler[A, Res]:
        table.add(Method(name, role, handler, params, result, runs, client, validate))
        return handler

    return register


def _service_call(name: str, result: type[Res]) -> Handler[M.Args, Res]:
    """The handler of a method that is one Service call without arguments."""

    async def handler(m: Methods, call: Call[M.Args]) -> Res:
        return R.shaped(result, await call.run(getattr(m.service, name)))

    handler.__name__ = handler.__qualname__ = f"_{name}"
    return handler


# -- MCP ----------------------------------------------------------------------------------------


@method("initialize", params=M.InitializeParams, result=R.InitializeResult, role="bot", runs="worker")
async def _initialize(m: Methods, call: Call[M.InitializeParams]) -> R.InitializeResult:
    conn, params = call.conn, call.params
    version = call.args.protocol_version
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
    return R.shaped(R.InitializeResult, result)


@method("ping", params=M.NoParams, result=R.Empty, role="bot", runs="loop",
        client=(C("ping", "*, timeout: float | None = None", returns="None", doc="Round trip; raises when zcord does not answer."),))
async def _ping(m: Methods, call: Call[M.NoParams]) -> R.Empty:
    return {}


@method("tools/list", params=M.NoParams, result=R.ToolsListResult, role="bot", runs="loop",
        client=(C("list_tools", result="tools", doc="The tools declared for this connection's role."),))
async def _tools_list(m: Methods, call: Call[M.NoParams]) -> R.ToolsListResult:
    key = (m.service.config.relationship_memory, call.conn.role)
    tools = m._tool_lists.get(key)
    if tools is None:
        listing = {"tools": [spec.describe() for spec in declared_tools(*key)]}
        tools = m._tool_lists[key] = P.RawJSON(json.dumps(listing, ensure_ascii=False).encode())
    return R.shaped(R.ToolsListResult, tools)  # sent as the bytes it was encoded to once


@method("tools/call", params=M.ToolCallParams, result=R.ToolCallResult, role="bot", runs="tool")
async def _tools_call(m: Methods, call: Call[M.ToolCallParams]) -> R.ToolCallResult:
    """Client: call_tool and the typed tool calls (generated from the tool table: they unwrap
    the MCP result)."""
    conn = call.conn
    name = call.args.name
    arguments = call.args.arguments
    meta = call.args.meta
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
        return R.shaped(R.ToolCallResult, P.tool_failure(e))
    return R.shaped(R.ToolCallResult, replies.fit_tool_result(result, name))


@method("prompts/list", params=M.NoParams, result=R.PromptsListResult, role="bot", runs="loop")
async def _prompts_list(m: Methods, call: Call[M.NoParams]) -> R.PromptsListResult:
    return {"prompts": mcp_extras.PROMPTS}


@method("prompts/get", params=M.PromptGetParams, result=R.PromptGetResult, role="bot")
async def _prompts_get(m: Methods, call: Call[M.PromptGetParams]) -> R.PromptGetResult:
    return R.shaped(R.PromptGetResult, await call.run(mcp_extras.get_prompt, m.service, call.args.name,
                                                      call.args.arguments))


@method("resources/list", params=M.NoParams, result=R.ResourcesListResult, role="bot", runs="loop")
async def _resources_list(m: Methods, call: Call[M.NoParams]) -> R.ResourcesListResult:
    return R.shaped(R.ResourcesListResult, mcp_extras.list_resources())


@method("resources/templates/list", params=M.NoParams, result=R.ResourceTemplatesResult, role="bot", runs="loop")
async def _resource_templates_list(m: Methods, call: Call[M.NoParams]) -> R.ResourceTemplatesResult:
    return R.shaped(R.ResourceTemplatesResult, mcp_extras.list_resource_templates())


@method("resources/read", params=M.ResourceReadParams, result=R.ResourceReadResult, role="bot")
async def _resources_read(m: Methods, call: Call[M.ResourceReadParams]) -> R.ResourceReadResult:
    return R.shaped(R.ResourceReadResult, await call.run(mcp_extras.read_resource, m.service, call.args.uri))


# -- zcor/ methods for the bot ------------------------------------------------------------------


@method("zcor/prefix", params=M.NoParams, result=R.TextResult, role="bot",
        client=(C("prefix", result="text", doc="The system prefix, built now."),))
async def _prefix(m: Methods, call: Call[M.NoParams]) -> R.TextResult:
    return {"text": await call.run(m.service.prefix)}


@method("zcor/recall", params=M.RecallParams, result=R.RecallResult, role="bot",
        client=(C("recall", "session: str, events: list[dict[str, Any]] | str, private: bool = False",
                  "self._recall_params(session, events, private)",
                  result="ids",
                  doc="The session's new recall set (a str is one external event; `private`: a one-to-one chat)."),
                C("recall_batch", "session: str, events: list[dict[str, Any]] | str, private: bool = False",
                  "self._recall_params(session, events, private)",
                  doc="`zcor/recall`'s whole answer: `{ids, blocked?}` (blocked: the batch's blocked senderKeys)."),))
async def _recall(m: Methods, call: Call[M.RecallParams]) -> R.RecallResult:
    session, events, private = call.args.session, call.args.events, call.args.private
    started = time.perf_counter()
    answer = R.shaped(R.RecallResult, await call.run(m.service.recall_batch, session, events, private))
    external = any(isinstance(e, dict) and e.get("origin") == "external" for e in events)
    m.host.meters.recalled(external, answer["ids"], time.perf_counter() - started)
    if external:
        senders = O.batch_senders(events, limit=None)  # all of them: zcord cuts by trust (origin.cut)
        # the origin of what the bot does next (private: what it creates stays in this session)
        call.conn.last_batch = (session, senders, True) if private else (session, senders)
        call.conn.remember_batch(session, senders)
    return answer


@method("zcor/context", params=M.ContextParams, result=R.ContextResult, role="bot",
        client=(C("context", "session: str", '{"session": session}',
                  doc="The session's context header rendered now: `{text, ids}`."),))
async def _context(m: Methods, call: Call[M.ContextParams]) -> R.ContextResult:
    result = R.shaped(R.ContextResult, await call.run(m.service.context, call.args.session))
    m.host.meters.header(result.get("text") or "")
    return result


@method("zcor/usage/report", role="bot", params=M.UsageReportParams, result=R.RecordedResult,
        client=(C("usage_report", "session: str, input_tokens: int, cached_tokens: int, output_tokens: int, *, "
                  "cache_write_tokens: int = 0, prefix_chars: int = 0, header_chars: int = 0, "
                  "front_end: str | None = None, protocol: str | None = None, model: str | None = None",
                  "self._usage_report_params(session, input_tokens, cached_tokens, output_tokens, cache_write_tokens, "
                  "prefix_chars, header_chars, front_end, protocol, model)",
                  doc="Report one provider call's token usage for a session (`zcor/usage/report`): input_tokens is\n"
                      "the whole prompt, cached and cache-written tokens included. Returns `{recorded: true}`."),))
async def _usage_report(m: Methods, call: Call[M.UsageReportParams]) -> R.RecordedResult:
    """A front end's usage report (zcord.service.usage): counted per session and day, not an
    operation; the bot's share botUsageReportsPerMinute."""
    a = call.args
    if a.cached_tokens + a.cache_write_tokens > a.input_tokens:
        raise InvalidArgument(
            f"cachedTokens ({a.cached_tokens}) plus cacheWriteTokens ({a.cache_write_tokens}) exceed inputTokens "
            f"({a.input_tokens}); inputTokens is the whole prompt, cached and cache-written tokens included "
            f"(Anthropic: input_tokens + cache_read_input_tokens + cache_creation_input_tokens)", field="cachedTokens")
    report = a.model_dump(by_alias=True, exclude={"session"})
    return R.shaped(R.RecordedResult, await call.run(m.service.usage_report, a.session, report, call.conn.actor))


@method("zcor/metrics", role="bot", params=M.NoParams, result=R.TextResult,
        client=(C("metrics", result="text",
                  doc="zcord's metrics in the Prometheus text exposition format (`zcor/metrics`)."),))
async def _metrics(m: Methods, call: Call[M.NoParams]) -> R.TextResult:
    """Read-only, for the bot too (`zcor serve-openai` serves it on /metrics)."""
    host = m.host
    sample = await call.run(metrics.sample, m.service, host.meters, host.conns, host.started, __version__)
    return {"text": metrics.render(sample)}


@method("zcor/llm", params=M.NoParams, result=R.LlmResult, role="bot",
        client=(C("llm", doc="The deployment's provider settings (`zcor/llm`; never the key)."),))
async def _llm(m: Methods, call: Call[M.NoParams]) -> R.LlmResult:
    """The deployment's provider settings (never the key), for bots such as `zcor chat`."""
    cfg = (await call.run(lambda: m.service.config)).llm
    return R.shaped(R.LlmResult, cfg.model_dump(mode="json", by_alias=True))


# -- operator methods -----------------------------------------------------------------------------


@method("zcor/status", params=M.NoParams, result=R.StatusResult,
        client=(C("status", doc="The daemon's and the Memory's status."),))
async def _status(m: Methods, call: Call[M.NoParams]) -> R.StatusResult:
    status = R.shaped(R.StatusResult, await call.run(m.service.status))
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


@method("zcor/usage", params=M.UsageParams, result=R.UsageResult,
        client=(C("usage", "session: str | None = None, days: int = 30",
                  '{"days": days} if session is None else {"session": session, "days": days}',
                  doc="Token usage per session and per day over the last `days` days: `{sessions, days, totals,\n"
                      "charsPerToken}`."),))
async def _usage(m: Methods, call: Call[M.UsageParams]) -> R.UsageResult:
    return R.shaped(R.UsageResult, await call.run(m.service.usage.query, call.args.session, call.args.days))


method("zcor/config/get", params=M.NoParams, result=R.Config,
       client=(C("config_get", doc="The config (never the API key)."),))(
    _service_call("public_config", R.Config))


@method("zcor/config/set", params=M.ConfigSetParams, result=R.Config,
        client=(C("config_set", "patch: dict[str, Any]", '{"patch": patch}',
                  doc="Change config fields (camelCase keys); returns the new config."),))
async def _config_set(m: Methods, call: Call[M.ConfigSetParams]) -> R.Config:
    try:
        return R.shaped(R.Config, await call.run(m.service.update_config, call.args.patch, call.conn.actor))
    finally:
        m.host.check_tools_changed()


@method("zcor/subscribe", params=M.NoParams, result=R.SubscribedResult, runs="loop")
async def _subscribe(m: Methods, call: Call[M.NoParams]) -> R.SubscribedResult:
    """Client: subscribe (hand-written: the subscription is kept across reconnects)."""
    call.conn.subscribed = True
    return {"subscribed": True}


@method("zcor/unsubscribe", params=M.NoParams, result=R.SubscribedResult, runs="loop")
async def _unsubscribe(m: Methods, call: Call[M.NoParams]) -> R.SubscribedResult:
    """Client: unsubscribe (hand-written, like subscribe)."""
    call.conn.subscribed = False
    return {"subscribed": False}


@method("zcor/backups/list", params=M.NoParams, result=R.BackupsResult,
        client=(C("backups", result="items", doc="The backups: `[{backupFile, size, modifiedAt, bot}]`."),))
async def _backups_list(m: Methods, call: Call[M.NoParams]) -> R.BackupsResult:
    store = m.service.store

    def listing() -> list[R.BackupItem]:
        items: list[R.BackupItem] = []
        for name in store.list_backups():
            try:
                st = (store.backups / name).stat()
            except OSError:
                continue
            items.append({"backupFile": name, "size": st.st_size,
                          "modifiedAt": _iso(st.st_mtime), "bot": bool(BOT_BACKUP_RE.match(name))})
        return items

    return {"items": await call.run(listing)}


@method("zcor/backups/preview", params=M.BackupPreviewParams, result=R.BackupPreviewResult, runs="long",
        client=(C("backup_preview", "backup_file: str", '{"backupFile": backup_file}',
                  doc="What restoring the backup would change (counts); changes nothing."),))
async def _backups_preview(m: Methods, call: Call[M.BackupPreviewParams]) -> R.BackupPreviewResult:
    """The counts a restore of the backup would change (parsed off the worker, like a restore)."""
    return R.shaped(R.BackupPreviewResult, await call.run(m.service.backup_preview, call.args.backup_file))


@method("zcor/synonyms/list", params=M.NoParams, result=R.SynonymListing,
        client=(C("synonym_groups", result="groups", doc="The synonym groups."),
                C("synonym_listing", doc="`zcor/synonyms/list` whole: `{groups, botAdded, held}`.")))
async def _synonyms_list(m: Methods, call: Call[M.NoParams]) -> R.SynonymListing:
    service = m.service

    def listing() -> R.SynonymListing:
        with service.lock:
            groups = service.synonym_groups()
            syn = service.synonyms
            return {"groups": groups, "botAdded": syn.bot_indexes(), "held": [list(g) for g in syn.bot["held"]]}

    return await call.run(listing)


@method("zcor/synonyms/set", params=M.SynonymsSetParams, result=R.SynonymGroupsResult,
        client=(C("synonyms_set", "index: int | None, terms: list[str] | None", '{"index": index, "terms": terms}',
                  doc="Add (index None), replace, or remove (terms None) a synonym group."),))
async def _synonyms_set(m: Methods, call: Call[M.SynonymsSetParams]) -> R.SynonymGroupsResult:
    return R.shaped(R.SynonymGroupsResult, await call.run(m.service.set_synonym_group, call.args.index,
                                                          call.args.terms, call.conn.actor))


@method("zcor/synonyms/held", params=M.SynonymsHeldParams, result=R.SynonymsHeldResult, validate=False,
        client=(C("synonyms_held", "action: str, held: int | None = None, index: int | None = None",
                  "self._held_params(action, held, index)",
                  doc="`zcor/synonyms/held`: accept or discard held group `held`, or discard the bot's group\n"
                      "at `index`."),))
async def _synonyms_held(m: Methods, call: Call[M.Args]) -> R.SynonymsHeldResult:
    """Its params model checks the params inside the recorded call (a refusal is logged too)."""
    return R.shaped(R.SynonymsHeldResult, await call.run(synonym_room.held_action, m.service, call.params,
                                                         call.conn.actor))


@method("zcor/recall/explain", params=M.RecallExplainParams, result=R.RecallExplainResult,
        client=(C("recall_explain", "text: str, sender_key: str | None = None",
                  '{"text": text} if sender_key is None else {"text": text, "senderKey": sender_key}',
                  doc="Segmentation, expansion, hits and the header a text would produce."),))
async def _recall_explain(m: Methods, call: Call[M.RecallExplainParams]) -> R.RecallExplainResult:
    return R.shaped(R.RecallExplainResult, await call.run(m.service.recall_explain, call.args.text,
                                                          call.args.sender_key))


@method("zcor/recall-log", params=M.RecallLogParams, result=R.RecallLogResult,
        client=(C("recall_log", "session: str, limit: int = 50, offset: int = 0, before: str | None = None",
                  '{"session": session, "limit": limit, "offset": offset, **({} if before is None else {"before": before})}',
                  doc="`zcor/recall-log`: a session's latest auto-recall batches, newest first (what the bot was\n"
                      "shown: ids, reasons, header size); `before` keeps those at or before an ISO time."),))
async def _recall_log(m: Methods, call: Call[M.RecallLogParams]) -> R.RecallLogResult:
    a = call.args
    return R.shaped(R.RecallLogResult, await call.run(m.service.recall_log.read, a.session, a.limit, a.offset,
                                                      a.before))


@method("zcor/consolidate/list", params=M.ConsolidateListParams, result=R.ConsolidateListResult,
        client=(C("consolidate_list", "limit: int = 20, offset: int = 0, kind: str | None = None",
                  '{"limit": limit, "offset": offset, **({} if kind is None else {"kind": kind})}',
                  doc="`zcor/consolidate/list`: clusters of near-duplicate memories and superseded chains to\n"
                      "fold, not dismissed; `{items, total, nextOffset, scan}`."),))
async def _consolidate_list(m: Methods, call: Call[M.ConsolidateListParams]) -> R.ConsolidateListResult:
    a = call.args
    return R.shaped(R.ConsolidateListResult, await call.run(m.service.consolidate_list, a.limit, a.offset, a.kind))


@method("zcor/consolidate/dismiss", params=M.ConsolidateDismissParams, result=R.ConsolidateDismissResult,
        client=(C("consolidate_dismiss", "ids: list[str]", '{"ids": ids}',
                  doc="Remember a consolidation proposal (its ids) as dismissed: not proposed again."),))
async def _consolidate_dismiss(m: Methods, call: Call[M.ConsolidateDismissParams]) -> R.ConsolidateDismissResult:
    return R.shaped(R.ConsolidateDismissResult, await call.run(m.service.consolidate_dismiss, call.args.ids))


@method("zcor/reload", params=M.NoParams, result=R.Config, runs="loop",
        client=(C("reload", doc="Re-read config.json and synonyms.json; returns the config."),))
async def _reload_method(m: Methods, call: Call[M.NoParams]) -> R.Config:
    err = await m.host.reload()
    if err is not None:
        raise err
    return R.shaped(R.Config, await call.run_at("worker", m.service.public_config))


method("zcor/snapshot", params=M.NoParams, result=R.SnapshotResult)(
    _service_call("snapshot", R.SnapshotResult))


method("zcor/persona/get", params=M.NoParams, result=R.PersonaResult,
       client=(C("persona_get", doc="PERSONA.md: `{text, empty, path}` (empty: nothing but comments and blanks)."),))(
    _service_call("persona_get", R.PersonaResult))


@method("zcor/persona/set", params=M.PersonaSetParams, result=R.PersonaResult,
        client=(C("persona_set", "text: str", '{"text": text}',
                  doc="Replace PERSONA.md (atomically, recorded in the operation log)."),))
async def _persona_set(m: Methods, call: Call[M.PersonaSetParams]) -> R.PersonaResult:
    return R.shaped(R.PersonaResult, await call.run(m.service.persona_set, call.args.text, call.conn.actor))


@method("zcor/history/query", params=M.HistoryQueryParams, result=R.Page,
        client=(C("history_query", "filters: dict[str, Any] | None = None", "filters or {}",
                  doc="`zcor/history/query`: `{keywords?, from?, to?, limit?, offset?, changesOnly?, actor?,\n"
                      "tool?, target?, origin?}` → `{items, total, nextOffset}` (not recorded)."),))
async def _history_query(m: Methods, call: Call[M.HistoryQueryParams]) -> R.Page:
    return R.shaped(R.Page, await call.run(m.service.history_query, call.params, call.args))


@method("zcor/history/revert", params=M.HistoryRevertParams, result=R.RevertResult,
        client=(C("history_revert", "seq: int, force: bool = False, preview: bool = False",
                  "self._revert_params(seq, force, preview)",
                  doc="Undo every change of logged operation `seq` as a new operation (`zcor/history/revert`);\n"
                      "with `preview` nothing changes and the result lists the changes and conflicts."),))
async def _history_revert(m: Methods, call: Call[M.HistoryRevertParams]) -> R.RevertResult:
    a = call.args
    return R.shaped(R.RevertResult, await call.run(undo.revert, m.service, a.seq, a.force, a.preview, call.params))


@method("zcor/history/reinstate", params=M.HistoryReinstateParams, result=R.ReinstateResult,
        client=(C("history_reinstate", "id: str, change_id: int", '{"id": id, "changeId": change_id}',
                  doc="Make the version written by change `change_id` current again, as one new change."),))
async def _history_reinstate(m: Methods, call: Call[M.HistoryReinstateParams]) -> R.ReinstateResult:
    a = call.args
    return R.shaped(R.ReinstateResult, await call.run(undo.reinstate, m.service, a.id, a.change_id, call.params))


@method("zcor/history/versions", params=M.HistoryVersionsParams, result=R.VersionsResult,
        client=(C("history_versions", "id: str", '{"id": id}',
                  doc="Every version of a memory (or relationship, by personId), oldest first."),))
async def _history_versions(m: Methods, call: Call[M.HistoryVersionsParams]) -> R.VersionsResult:
    return R.shaped(R.VersionsResult, await call.run(undo.versions, m.service, call.args.id))


@method("zcor/history/at", params=M.HistoryAtParams, result=R.StateAtResult,
        client=(C("history_at", "time: str | datetime", "self._time_param(time)",
                  doc="The whole Memory as it was at an instant (ISO 8601 with its UTC offset, or an aware datetime)."),))
async def _history_at(m: Methods, call: Call[M.HistoryAtParams]) -> R.StateAtResult:
    text = call.args.time
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidArgument(f"time {text!r} is not an ISO 8601 time", field="time") from None
    if when.tzinfo is None:
        raise InvalidArgument("time must carry its UTC offset, e.g. 2026-12-01T20:00:00+08:00", field="time")
    return R.shaped(R.StateAtResult, await call.run(undo.state_at, m.service, when))


@method("zcor/history/revertOrigin", params=M.HistoryRevertOriginParams, result=R.RevertOriginResult,
        client=(C("history_revert_origin", "sender: str, start: str | datetime | None = None, "
                  "end: str | datetime | None = None, force: bool = False, preview: bool = False, "
                  "shared: bool = False",
                  "self._revert_origin_params(sender, start, end, force, preview, shared)",
                  doc="Undo every change caused by `sender` (between `start` and `end`), newest first, as\n"
                      "one operation (`zcor/history/revertOrigin`); with `preview` nothing changes. Only\n"
                      "the changes `sender` spoke for; with `shared` also those they were present at."),))
async def _history_revert_origin(m: Methods, call: Call[M.HistoryRevertOriginParams]) -> R.RevertOriginResult:
    a = call.args
    return R.shaped(R.RevertOriginResult, await call.run(undo.revert_origin, m.service, a.sender, a.start, a.end,
                                                         a.shared, a.force, a.preview, call.params))


# -- origin, per-sender trust and review (issue 22) ---------------------------------------------


method("zcor/trust/get", params=M.StrictNoParams, result=R.TrustListing,
       client=(C("trust_get", doc="`zcor/trust/get` → `{default, senders: [{sender, level}]}`."),))(
    _service_call("trust_get", R.TrustListing))


@method("zcor/trust/set", params=M.TrustSetParams, result=R.TrustSetResult,
        client=(C("trust_set", "sender: str, level: str | None", '{"sender": sender, "level": level}',
                  doc="Give a sender a trust level (trusted, normal, untrusted, blocked; None: the default)."),))
async def _trust_set(m: Methods, call: Call[M.TrustSetParams]) -> R.TrustSetResult:
    return R.shaped(R.TrustSetResult, await call.run(m.service.trust_set, call.params, call.conn.actor))


@method("zcor/review/list", params=M.ReviewListParams, result=R.ReviewListResult,
        client=(C("review_list", "offset: int = 0, limit: int | None = None",
                  '{"offset": offset, **({"limit": limit} if limit is not None else {})}',
                  doc="`zcor/review/list` → `{items: [{seq, at, tool, origin, by, changes}], total, nextOffset?}`,\n"
                      "newest first, a page at a time (`offset`, `limit`)."),))
async def _review_list(m: Methods, call: Call[M.ReviewListParams]) -> R.ReviewListResult:
    a = call.args
    return R.shaped(R.ReviewListResult, await call.run(review.review_list, m.service, a.offset, a.limit))


@method("zcor/review/approve", params=M.ReviewApproveParams, result=R.ReviewApproveResult,
        client=(C("review_approve", "ids: list[int]", "self._review_params(ids)",
                  doc="Approve held changes by their operation seqs (they are recalled from now on)."),))
async def _review_approve(m: Methods, call: Call[M.ReviewApproveParams]) -> R.ReviewApproveResult:
    return R.shaped(R.ReviewApproveResult, await call.run(review.approve, m.service, call.args.ids, call.params))


@method("zcor/review/reject", params=M.ReviewRejectParams, result=R.ReviewRejectResult,
        client=(C("review_reject", "ids: list[int], force: bool = False, preview: bool = False",
                  "self._review_params(ids, force, preview)",
                  doc="Reject held changes by their operation seqs: each is reverted, as one operation."),))
async def _review_reject(m: Methods, call: Call[M.ReviewRejectParams]) -> R.ReviewRejectResult:
    a = call.args
    return R.shaped(R.ReviewRejectResult, await call.run(review.reject, m.service, a.ids, a.force, a.preview,
                                                         call.params))


# -- privacy (issue 34) ---------------------------------------------------------------------------


@method("zcor/erase", params=M.EraseParams, result=R.ErasureResult, runs="long",
        client=(C("erase", "sender: str | None = None, person_id: str | None = None, preview: bool = False",
                  "self._erase_params(sender, person_id, preview)",
                  doc="Forget a person (`zcor/erase`): their relationship, trust entry, linked memories and\n"
                      "those only they caused, redacted from every file under the Memory directory; with\n"
                      "`preview` nothing changes and the result lists exactly what goes. Irreversible."),))
async def _erase(m: Methods, call: Call[M.EraseParams]) -> R.ErasureResult:
    a = call.args
    return R.shaped(R.ErasureResult, await call.run(erasure.erase, m.service, a.person, a.field, a.preview))


@method("zcor/subject", params=M.SubjectParams, result=R.SubjectResult, runs="long",
        client=(C("subject", "sender: str | None = None, person_id: str | None = None",
                  "self._erase_params(sender, person_id, False)",
                  doc="Everything the Memory holds about or from a person (`zcor/subject`): memories,\n"
                      "relationship, trust, held changes and history records."),))
async def _subject(m: Methods, call: Call[M.SubjectParams]) -> R.SubjectResult:
    return R.shaped(R.SubjectResult, await call.run(erasure.subject, m.service, call.args.person))


@method("zcor/scope/set", params=M.ScopeSetParams, result=R.ScopeSetResult,
        client=(C("scope_set", "id: str, scope: str | dict[str, str]", '{"id": id, "scope": scope}',
                  doc="Change a memory's scope (`zcor/scope/set`): \"everywhere\" or {\"session\": NAME}, as a\n"
                      "logged operation that zcor/history/revert undoes."),))
async def _scope_set(m: Methods, call: Call[M.ScopeSetParams]) -> R.ScopeSetResult:
    return R.shaped(R.ScopeSetResult, await call.run(scope.set_scope, m.service, call.params))


# -- import and export (issue 36) -----------------------------------------------------------------


@method("zcor/import", params=M.ImportParams, result=R.ImportResult, runs="long",
        client=(C("import_file", "params: dict[str, Any]", "params",
                  doc="`zcor/import {data | uploadId, encoding?, name?, format?, preview?, parentId?, persona?}`:\n"
                      "a lore file into memories, as one operation (zcord.transport.interop_client sends any size)."),))
async def _import(m: Methods, call: Call[M.ImportParams]) -> R.ImportResult:
    return R.shaped(R.ImportResult, await call.run(transfers.run_import, m.service, call.conn, call.args))


@method("zcor/import/upload", params=M.UploadParams, result=R.UploadResult, runs="loop",
        client=(C("import_upload", "data: str, upload_id: str | None = None",
                  '{"data": data} if upload_id is None else {"data": data, "uploadId": upload_id}',
                  doc="Add a piece of a file to import: `{uploadId, size}`."),))
async def _import_upload(m: Methods, call: Call[M.UploadParams]) -> R.UploadResult:
    return R.shaped(R.UploadResult, transfers.upload(call.conn, call.args.data, call.args.upload_id))


@method("zcor/export", params=M.ExportParams, result=R.ExportResult, runs="long",
        client=(C("export", "format: str = \"jsonl\"", '{"format": format}',
                  doc="`zcor/export {format}`: the Memory as files (inline, or an exportId to read in pieces)."),))
async def _export(m: Methods, call: Call[M.ExportParams]) -> R.ExportResult:
    return R.shaped(R.ExportResult, await call.run(transfers.start_export, m.service, call.conn, call.args.format))


@method("zcor/export/read", params=M.ExportReadParams, result=R.ExportReadResult, runs="loop",
        client=(C("export_read", "export_id: str, file: int = 0, offset: int = 0",
                  '{"exportId": export_id, "file": file, "offset": offset}',
                  doc="A piece of a kept export's file: `{text, nextOffset}`."),))
async def _export_read(m: Methods, call: Call[M.ExportReadParams]) -> R.ExportReadResult:
    return R.shaped(R.ExportReadResult, transfers.read_export(call.conn, call.args.export_id, call.args.file,
                                                              call.args.offset))


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).astimezone().isoformat(timespec="seconds")
