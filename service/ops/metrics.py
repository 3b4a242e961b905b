"""The service's Prometheus metrics: every metric object lives here, and the code records through the small
functions below, given plain numbers and strings, so no other module names a Prometheus type.

The metrics are on ``prometheus_client``'s default registry and process-wide; what only a running server
knows (its open streams, its connection pool) is read at scrape time from every server :func:`watch` was
told of. docs/OPERATIONS.md ("Serving") says why; docs/grpc.md ("Metrics") lists each metric and its labels.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

T = TypeVar("T")

# Without the ``*_created`` series (a timestamp beside every labelled counter and histogram): they double
# what each scrape carries, and Prometheus stores none of them unless told to.
disable_created_metrics()  # type: ignore[no-untyped-call]

# --- gRPC calls, under the names and labels of the gRPC ecosystem (go-grpc-prometheus) ---------------------

_CALL = ("grpc_type", "grpc_service", "grpc_method")
GRPC_STARTED = Counter("grpc_server_started_total", "RPCs started on the server.", _CALL)
GRPC_HANDLED = Counter(
    "grpc_server_handled_total", "RPCs completed on the server, whatever their status.", (*_CALL, "grpc_code")
)
GRPC_HANDLING = Histogram(
    "grpc_server_handling_seconds",
    "Seconds from the start of an RPC to its status (a stream: until it ends).",
    _CALL,
)
GRPC_SENT = Counter(
    "grpc_server_msg_sent_total", "Messages the server sent: replies and stream items.", _CALL
)

# --- commands and the write loop ----------------------------------------------------------------------------

COMMANDS = Counter(
    "uno_audit_commands_total",
    "Commands of GameService by command, outcome (accepted, duplicate, rejected) and rule: a rejection's "
    "reason (the rule id of a rule violation, VERSION_CONFLICT, GAME_EXISTS…), empty otherwise.",
    ("command", "outcome", "rule"),
)
APPENDS = Histogram(
    "uno_audit_append_seconds",
    "Seconds one write to the event store took (one transaction), whatever its result: operation "
    "append (a command's events) or create (a new game's rows and first events).",
    ("operation",),
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
STAGE_SECONDS = Histogram(
    "uno_audit_command_stage_seconds",
    "Seconds a command of GameService spent in each stage on the server: admit (checks, "
    "authentication), decide (load, decide, hash), group_wait (queued behind a write in flight), "
    "database (its statement), reply (views, receipt, log line).",
    ("stage",),
    buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
)
LOOP_LAG = Histogram(
    "uno_audit_event_loop_lag_seconds",
    "How much later than asked the event loop woke a ticker sleeping 5 ms: time the loop was held.",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
)
GC_PAUSES = Histogram(
    "uno_audit_gc_pause_seconds",
    "Seconds each pass of Python's garbage collector held the process, by generation.",
    ("generation",),
    buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1),
)
CONFLICTS = Counter(
    "uno_audit_append_conflicts_total",
    "Appends refused because another writer moved the stream on first; then: retried (the command is "
    "decided again on the fresh state) or refused (the client named its expected version: ABORTED).",
    ("then",),
)

# --- read models and verification ---------------------------------------------------------------------------

# Each worker of ``serve --workers`` reads the same figures from the database: in multiprocess mode the
# endpoint shows the largest a live worker last read (``livemax``); one process ignores the mode.
PROJECTION_LAG_EVENTS = Gauge(
    "uno_audit_projection_lag_events",
    "Events in the log the read models do not reflect yet.",
    multiprocess_mode="livemax",
)
PROJECTION_LAG_SECONDS = Gauge(
    "uno_audit_projection_lag_seconds",
    "How long the oldest event the read models miss has been stored.",
    multiprocess_mode="livemax",
)
QUARANTINED = Gauge(
    "uno_audit_projection_quarantined_games",
    "Games the read models set aside until a rebuild.",
    multiprocess_mode="livemax",
)
PROJECTOR_FAILING = Gauge(
    "uno_audit_projector_failing",
    "1 while the projector fails to make progress, else 0.",
    multiprocess_mode="livemax",
)
VERIFICATIONS = Counter(
    "uno_audit_verifications_total",
    "VerifyGame reports by verdict: valid, or the first thing wrong (chain_broken, unreadable, "
    "diverged, rules_broken, outcome_differs, other), or lost (receipts of a game the store lacks).",
    ("verdict",),
)


_children: dict[tuple[object, tuple[str, ...]], Any] = {}


def _child(metric: Counter | Histogram, *labels: str) -> Any:
    """``metric.labels(*labels)``, kept: a labelled child never changes once made (nothing here removes
    one), and making the label tuple and taking the metric's lock five times a command cost more than
    the counting itself."""
    key = (metric, labels)
    child = _children.get(key)
    if child is None:
        child = _children[key] = metric.labels(*labels)
    return child


class GrpcCall:
    """One RPC on the server, counted as started when made: :meth:`sent` as each message goes out,
    :meth:`ended` once with its status (``OK``, ``NotFound``…)."""

    __slots__ = ("_labels", "_started")

    def __init__(self, kind: str, service: str, method: str) -> None:
        self._labels = (kind, service, method)
        self._started = time.perf_counter()
        _child(GRPC_STARTED, *self._labels).inc()

    def sent(self) -> None:
        _child(GRPC_SENT, *self._labels).inc()

    def ended(self, code: str) -> None:
        _child(GRPC_HANDLING, *self._labels).observe(time.perf_counter() - self._started)
        _child(GRPC_HANDLED, *self._labels, code).inc()


def command(name: str, outcome: str, rule: str = "") -> None:
    """One command of GameService ended with ``outcome`` (a rejection with its ``rule``)."""
    _child(COMMANDS, name, outcome, rule).inc()


async def timed_write(write: Awaitable[T], operation: str = "append") -> T:
    """``await write``, timed as one write to the event store."""
    started = time.perf_counter()
    try:
        return await write
    finally:
        _child(APPENDS, operation).observe(time.perf_counter() - started)


def command_stages(names: tuple[str, ...], seconds: tuple[float, ...]) -> None:
    """One command's seconds in each of its stages (:data:`service.ops.stages.STAGES`)."""
    for name, value in zip(names, seconds, strict=True):
        _child(STAGE_SECONDS, name).observe(value)


def loop_lag(seconds: float) -> None:
    """The event loop woke the ticker ``seconds`` late."""
    LOOP_LAG.observe(seconds)


def gc_pause(generation: int, seconds: float) -> None:
    """A pass of the garbage collector over ``generation`` held the process for ``seconds``."""
    _child(GC_PAUSES, str(generation)).observe(seconds)


def conflict(*, retried: bool) -> None:
    """An append lost the race for its version; the command is decided again (``retried``) or refused."""
    CONFLICTS.labels("retried" if retried else "refused").inc()


def projection_health(*, events_behind: int, seconds_behind: float, quarantined: int, failing: bool) -> None:
    """The read models' health as last read: how far behind the log, how many games set aside, and
    whether the projector is failing."""
    PROJECTION_LAG_EVENTS.set(events_behind)
    PROJECTION_LAG_SECONDS.set(seconds_behind)
    QUARANTINED.set(quarantined)
    PROJECTOR_FAILING.set(1 if failing else 0)


def verification(verdict: str) -> None:
    """A VerifyGame report, by its verdict (``valid``, ``chain_broken``...: see :data:`VERIFICATIONS`)."""
    VERIFICATIONS.labels(verdict).inc()


# --- what a running server knows, read at scrape time ---------------------------------------------------


@dataclass(frozen=True, eq=False, slots=True)
class Watched:
    """A running server's live figures: its open ``WatchGame`` streams and its connection pool's stats
    (``psycopg_pool``'s ``get_stats()``)."""

    open_streams: Callable[[], int]
    pool_stats: Callable[[], Mapping[str, int]]


#: (metric name, pool statistic, help): the pool's figures that are gauges; then those that count, each
#: with the divisor that makes it the metric's unit.
_POOL_GAUGES = (
    ("uno_audit_db_pool_connections", "pool_size", "Database connections the pool holds open."),
    ("uno_audit_db_pool_connections_idle", "pool_available", "Open connections no call is using."),
    ("uno_audit_db_pool_connections_max", "pool_max", "The most connections the pool may open."),
    ("uno_audit_db_pool_requests_waiting", "requests_waiting", "Calls waiting for a connection now."),
)
_POOL_COUNTERS = (
    ("uno_audit_db_pool_requests", "requests_num", "Connections asked of the pool.", 1),
    ("uno_audit_db_pool_requests_queued", "requests_queued", "Requests that had to wait.", 1),
    ("uno_audit_db_pool_wait_seconds", "requests_wait_ms", "Seconds requests spent waiting.", 1000),
    ("uno_audit_db_pool_timeouts", "requests_errors", "Requests that got no connection in time.", 1),
    ("uno_audit_db_pool_connections_lost", "connections_lost", "Connections found broken.", 1),
)


class _LiveFigures(Collector):
    """Reads the watched servers' figures when scraped (from the exporter's thread: a stream count and a
    pool's counters are plain numbers, read without a lock), summed over the servers of the process."""

    def __init__(self) -> None:
        self._servers: list[Watched] = []

    def add(self, server: Watched) -> None:
        self._servers = [*self._servers, server]

    def remove(self, server: Watched) -> None:
        self._servers = [s for s in self._servers if s is not server]

    def collect(self) -> Iterator[Metric]:
        servers = self._servers  # replaced, never changed in place: a scrape sees one list throughout
        yield GaugeMetricFamily(
            "uno_audit_watch_streams_open",
            "WatchGame streams open now.",
            value=sum(s.open_streams() for s in servers),
        )
        stats = [s.pool_stats() for s in servers]
        for name, key, text in _POOL_GAUGES:
            yield GaugeMetricFamily(name, text, value=sum(found.get(key, 0) for found in stats))
        for name, key, text, divisor in _POOL_COUNTERS:
            total = sum(found.get(key, 0) for found in stats) / divisor
            yield CounterMetricFamily(name, text, value=total)


_LIVE = _LiveFigures()
REGISTRY.register(_LIVE)


def watch(server: Watched) -> None:
    """Export ``server``'s live figures from now on."""
    _LIVE.add(server)


def unwatch(server: Watched) -> None:
    """Stop exporting ``server``'s live figures (it stopped)."""
    _LIVE.remove(server)


# --- ``serve --workers N``: the supervisor's own figures, and every worker's through its files ------------

#: Not on the default registry: only the supervising parent of ``serve --workers`` counts restarts.
RESTARTS = Counter(
    "uno_audit_process_restarts_total",
    "Processes of serve --workers that exited on their own and were started again, by kind (worker, "
    "projector).",
    ("kind",),
    registry=None,
)
CRASH_LOOP = Gauge(
    "uno_audit_crash_loop",
    "1 while processes of this kind restart in a loop (service.api.workers.CRASH_LOOP_RESTARTS within "
    "CRASH_LOOP_SECONDS), else 0.",
    ("kind",),
    registry=None,
)
for _kind in ("worker", "projector"):  # both series from the start: a rate needs the zero before
    RESTARTS.labels(_kind)
    CRASH_LOOP.labels(_kind).set(0)


def restarted(kind: str) -> None:
    """The supervisor restarted a process of ``kind``."""
    RESTARTS.labels(kind).inc()


def crash_loop(kind: str, looping: bool) -> None:
    CRASH_LOOP.labels(kind).set(1 if looping else 0)


def supervisor_registry(folder: str) -> CollectorRegistry:
    """What the parent of ``serve --workers`` serves: every worker's metrics from their files in
    ``folder`` (counters summed over live and dead workers, so they never go back), and its own."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=folder)  # type: ignore[no-untyped-call]
    registry.register(RESTARTS)
    registry.register(CRASH_LOOP)
    return registry


class _Mirror:
    """A worker's live figures as multiprocess metrics (the files are all the parent reads): gauges
    summed over live workers, counters moved by what the pool counted since the last copy."""

    def __init__(self) -> None:
        self.streams = Gauge(
            "uno_audit_watch_streams_open",
            "WatchGame streams open now.",
            registry=None,
            multiprocess_mode="livesum",
        )
        self.gauges = {
            key: Gauge(name, text, registry=None, multiprocess_mode="livesum")
            for name, key, text in _POOL_GAUGES
        }
        self.counters = {
            key: (Counter(name, text, registry=None), divisor) for name, key, text, divisor in _POOL_COUNTERS
        }
        self.seen: dict[str, float] = {}

    def copy(self) -> None:
        servers = _LIVE._servers
        self.streams.set(sum(s.open_streams() for s in servers))
        stats = [s.pool_stats() for s in servers]
        for key, gauge in self.gauges.items():
            gauge.set(sum(found.get(key, 0) for found in stats))
        for key, (counter, divisor) in self.counters.items():
            total = sum(found.get(key, 0) for found in stats) / divisor
            moved = total - self.seen.get(key, 0.0)
            if moved > 0:
                counter.inc(moved)
                self.seen[key] = total


_mirror: _Mirror | None = None


def mirror_live() -> None:
    """Copy the watched servers' live figures to this process's metric files (multiprocess mode)."""
    global _mirror
    if _mirror is None:
        _mirror = _Mirror()
    _mirror.copy()
