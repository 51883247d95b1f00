"""Prometheus metrics (issue 35): zcord's live counters (`Meters`, kept by the connection
server and the bot methods) and `render`, which turns them and the Service's state into the
Prometheus text exposition format with prometheus_client, through a private registry and one
custom collector (nothing global: two daemons in one process would not mix).

The metric names are listed in docs/reference.md ("Metrics"). Label values are bounded:
methods are the method table's names, tools the tool table's (anything else is `unknown`),
statuses `ok` or an error code, sessions at most the usage book's MAX_SESSIONS.
"""

from __future__ import annotations

import bisect
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core import protocol as P
from ..core.layout import STATE_FILE
from ..service.usage import FIELDS

if TYPE_CHECKING:
    from ..service.service import Service
    from .connections import Connection

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Upper bounds (seconds) of the call and recall latency histograms."""
HEADER_BUCKETS = (0, 250, 500, 1000, 2000, 4000, 6000, 10000, 20000)
"""Upper bounds (characters) of the context header size histogram."""

RPC_STATUS = {P.PARSE_ERROR: "parse_error", P.INVALID_REQUEST: "invalid_request",
              P.METHOD_NOT_FOUND: "method_not_found", P.INVALID_PARAMS: "invalid_params",
              P.INTERNAL_ERROR: "internal_error"}

USAGE_METRICS = {
    "requests": ("zcord_usage_requests", "Provider calls the front ends reported, by session"),
    "inputTokens": ("zcord_usage_input_tokens", "Prompt tokens the provider billed (cached included), by session"),
    "cachedTokens": ("zcord_usage_cached_tokens", "Prompt tokens read from the provider's cache, by session"),
    "cacheWriteTokens": ("zcord_usage_cache_write_tokens", "Prompt tokens written to the provider's cache, by session"),
    "outputTokens": ("zcord_usage_output_tokens", "Tokens the model wrote, by session"),
    "prefixChars": ("zcord_usage_prefix_characters", "Characters of zcor's system prefix sent, by session"),
    "headerChars": ("zcord_usage_header_characters", "Characters of zcor's recall header sent, by session"),
}
assert set(USAGE_METRICS) == set(FIELDS)


@dataclass
class Histogram:
    """Counts per bucket (not cumulative), their sum and count."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value
        self.n += 1

    def cumulative(self) -> list[tuple[str, int]]:
        out, running = [], 0
        for bound, count in zip((*map(_le, self.bounds), "+Inf"), self.counts):
            running += count
            out.append((bound, running))
        return out


def _le(bound: float) -> str:
    return repr(float(bound))


class Meters:
    """zcord's counters since it started. Updated on the event loop; read by `render` in the
    worker (copies are taken first, so a count moving meanwhile costs nothing but that count)."""

    def __init__(self, tools: Iterable[str] = (), methods: Iterable[str] = ()) -> None:
        self.tools = frozenset(tools)
        self.methods = frozenset(methods)
        self.calls: dict[tuple[str, str, str], int] = {}
        self.latency: dict[tuple[str, str], Histogram] = {}
        self.recall_batches: dict[str, int] = {"hit": 0, "empty": 0, "unchanged": 0}
        self.recall_hits = 0
        self.recall_latency = Histogram(LATENCY_BUCKETS)
        self.headers = Histogram(HEADER_BUCKETS)

    def call(self, method: str, params: Any, status: str, seconds: float) -> None:
        """One request answered: its method (and tool, for tools/call), its status, its time."""
        name = method if method in self.methods else "unknown"
        tool = ""
        if method == "tools/call":
            wanted = params.get("name") if isinstance(params, dict) else None
            tool = wanted if isinstance(wanted, str) and wanted in self.tools else "unknown"
        key = (name, tool, status)
        self.calls[key] = self.calls.get(key, 0) + 1
        hist = self.latency.get((name, tool))
        if hist is None:
            hist = self.latency[(name, tool)] = Histogram(LATENCY_BUCKETS)
        hist.observe(seconds)

    def recalled(self, external: bool, ids: list[str], seconds: float) -> None:
        self.recall_batches["unchanged" if not external else "hit" if ids else "empty"] += 1
        if external:
            self.recall_hits += len(ids)
        self.recall_latency.observe(seconds)

    def header(self, text: str) -> None:
        self.headers.observe(len(text))


def status_of_result(result: Any) -> str:
    """`ok`, or the error code of a tool failure (an MCP result with isError)."""
    if isinstance(result, dict) and result.get("isError"):
        data = result.get("structuredContent")
        code = data.get("code") if isinstance(data, dict) else None
        return code if isinstance(code, str) else "error"
    return "ok"


def status_of_error(err: P.RpcError) -> str:
    data = err.data
    code = data.get("code") if isinstance(data, dict) else None
    if isinstance(code, str):
        return code
    return RPC_STATUS.get(err.code, "error")


@dataclass
class Sample:
    """What render reads of the daemon, taken at one instant."""

    version: str
    uptime: float
    calls: dict[tuple[str, str, str], int]
    latency: dict[tuple[str, str], Histogram]
    recall_batches: dict[str, int]
    recall_hits: int
    recall_latency: Histogram
    headers: Histogram
    connections: dict[str, int]
    subscribers: int
    review_pending: int
    journal_changes: int
    journal_age: float
    snapshot_age: float | None
    memories: int
    relationships: int
    operations: int
    usage: list[tuple[str, list[int], str | None]]


def sample(service: Service, meters: Meters, conns: Iterable[Connection], started: float,
           version: str) -> Sample:
    """Read everything render needs (in the worker thread, where the Service is read)."""
    roles = {"bot": 0, "operator": 0}
    subscribers = 0
    for c in list(conns):
        roles["operator" if c.role == P.OPERATOR else "bot"] += 1
        subscribers += c.subscribed
    mono = time.monotonic()
    snaps = service.snapshots
    try:
        snapshot_age: float | None = max(0.0, time.time() - os.stat(service.dir / STATE_FILE).st_mtime)
    except OSError:
        snapshot_age = None
    with service.lock:
        memories, relationships = len(service.state.nodes), len(service.state.relationships)
        review = len(service.review.items)
        changes = snaps.changes
        since = snaps.since
    return Sample(
        version=version, uptime=mono - started,
        calls=dict(meters.calls), latency={k: _copy(h) for k, h in list(meters.latency.items())},
        recall_batches=dict(meters.recall_batches), recall_hits=meters.recall_hits,
        recall_latency=_copy(meters.recall_latency), headers=_copy(meters.headers),
        connections=roles, subscribers=subscribers, review_pending=review, journal_changes=changes,
        journal_age=(mono - since) if changes and since is not None else 0.0, snapshot_age=snapshot_age,
        memories=memories, relationships=relationships, operations=service.seq,
        usage=service.usage.lifetime())


def _copy(h: Histogram) -> Histogram:
    out = Histogram(h.bounds)
    out.counts, out.total, out.n = list(h.counts), h.total, h.n
    return out


class _Collector:
    """prometheus_client's custom collector over one Sample."""

    def __init__(self, s: Sample):
        self.s = s

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        s = self.s
        info = GaugeMetricFamily("zcord_build_info", "zcord's version (always 1)", labels=["version"])
        info.add_metric([s.version], 1)
        yield info
        yield GaugeMetricFamily("zcord_uptime_seconds", "Seconds since zcord started", value=round(s.uptime, 3))

        calls = CounterMetricFamily("zcord_calls", "Requests answered, by method, tool (tools/call) and status "
                                    "(ok or the error code)", labels=["method", "tool", "status"])
        for (method, tool, status), n in sorted(s.calls.items()):
            calls.add_metric([method, tool, status], n)
        yield calls
        latency = HistogramMetricFamily("zcord_call_duration_seconds", "Time from a request's arrival to its "
                                        "answer, by method and tool", labels=["method", "tool"])
        for (method, tool), h in sorted(s.latency.items()):
            latency.add_metric([method, tool], h.cumulative(), h.total)
        yield latency

        batches = CounterMetricFamily("zcord_recall_batches", "zcor/recall batches: hit (memories recalled), "
                                      "empty (none matched), unchanged (no external event)", labels=["result"])
        for result, n in sorted(s.recall_batches.items()):
            batches.add_metric([result], n)
        yield batches
        yield CounterMetricFamily("zcord_recall_hits", "Memories recalled by zcor/recall, over all batches",
                                  value=s.recall_hits)
        recall = HistogramMetricFamily("zcord_recall_duration_seconds", "Time to answer zcor/recall")
        recall.add_metric([], s.recall_latency.cumulative(), s.recall_latency.total)
        yield recall
        headers = HistogramMetricFamily("zcord_context_header_characters", "Characters of each context "
                                        "header rendered by zcor/context (the sum: all characters sent)")
        headers.add_metric([], s.headers.cumulative(), s.headers.total)
        yield headers

        yield GaugeMetricFamily("zcord_review_pending", "Changes held for review", value=s.review_pending)
        conns = GaugeMetricFamily("zcord_connections", "Open client connections, by role", labels=["role"])
        for role, n in sorted(s.connections.items()):
            conns.add_metric([role], n)
        yield conns
        yield GaugeMetricFamily("zcord_subscribers", "Connections subscribed to change notifications",
                                value=s.subscribers)
        yield GaugeMetricFamily("zcord_journal_changes", "Changes in the operation log not yet in a snapshot",
                                value=s.journal_changes)
        yield GaugeMetricFamily("zcord_journal_age_seconds", "Age of the oldest change not yet in a snapshot "
                                "(0 when there is none)", value=round(s.journal_age, 3))
        if s.snapshot_age is not None:
            yield GaugeMetricFamily("zcord_snapshot_age_seconds", "Seconds since memory-state.json was written",
                                    value=round(s.snapshot_age, 3))
        yield GaugeMetricFamily("zcord_memories", "Memories (nodes), superseded ones included", value=s.memories)
        yield GaugeMetricFamily("zcord_relationships", "Relationship records", value=s.relationships)
        yield CounterMetricFamily("zcord_operations", "Operations recorded in the operation log",
                                  value=s.operations)

        families = {name: CounterMetricFamily(metric, doc + " (since the session was first reported)",
                                              labels=["session"])
                    for name, (metric, doc) in USAGE_METRICS.items()}
        for session, totals, _front_end in s.usage:
            for name, value in zip(FIELDS, totals):
                families[name].add_metric([session], value)
        yield from families.values()


def render(s: Sample) -> str:
    """The Prometheus text exposition (version 0.0.4) of a Sample."""
    from prometheus_client import (  # only when metrics are asked for
        CollectorRegistry,
        generate_latest,
    )

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(s))
    return generate_latest(registry).decode("utf-8")
