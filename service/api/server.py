"""Assemble and run the gRPC server: GameService, health and reflection, on one event store.

``uno-audit serve`` calls :func:`serve` once its login and the schema are checked (the command line starts an
embedded PostgreSQL when given no database and runs the migrations as the owner; the server itself only checks
that none is pending). A port another server holds is refused, not shared. The projector keeps the read models
(``projections/``) current beside the service, and their state is the health status of
``uno.audit.v1.Projections`` (NOT_SERVING while behind, while a game is quarantined or while the projector is
failing). ``serve(workers=N)`` runs N such servers in processes of their own on the one port instead
(:mod:`service.api.workers`). SIGTERM or SIGINT stops it gracefully: the health service reports
NOT_SERVING, new calls are refused, in-flight commands finish (each is one transaction, so nothing is ever
half-written), then the store closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import orjson
import structlog
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio

from projections import queries
from projections.check import check_game
from projections.migrate import apply_migrations as migrate_projections
from projections.projector import DEFAULT_SET, run_projector
from projections.quarantine import read_health
from service.api.access import Access
from service.api.audit_servicer import AuditService
from service.api.callers import Callers
from service.api.checkpoint_servicer import CheckpointService
from service.api.errors import ErrorStatuses
from service.api.gen.uno.audit.v1 import (
    audit_pb2,
    audit_pb2_grpc,
    checkpoint_pb2,
    checkpoint_pb2_grpc,
    game_pb2,
    game_pb2_grpc,
)
from service.api.metrics import CallMetrics, Exporter, start_exporter
from service.api.notify import MAX_STREAMS, Notifier
from service.api.reflection import enable_reflection
from service.api.servicer import GameService
from service.api.tls import ServerTLS
from service.app.auditor import Auditor
from service.app.handler import CommandHandler
from service.checkpoints import Signer
from service.checkpoints.keyring import Keyring
from service.domain import limits
from service.domain.auth import token_hash
from service.ops import metrics
from service.store import EventStore
from service.store.store import DEFAULT_TIMEOUT

SERVICE_NAME = game_pb2.DESCRIPTOR.services_by_name["GameService"].full_name
AUDIT_SERVICE_NAME = audit_pb2.DESCRIPTOR.services_by_name["AuditService"].full_name
CHECKPOINT_SERVICE_NAME = checkpoint_pb2.DESCRIPTOR.services_by_name["CheckpointService"].full_name
#: The name of a key made for one server's lifetime (tests; ``serve`` always has a key of its own).
EPHEMERAL_NAME = "uno-audit.ephemeral"
GRACE_SECONDS = 10.0


def configure_logging(
    log_format: str | None = None, level: str | None = None, *, worker: int | None = None
) -> None:
    """structlog lines on standard output, the libraries' logs included: JSON objects (``log_format``
    ``"json"``, for a collector) or aligned, coloured text on a terminal (``"console"``, for a person),
    at ``level`` (``"debug"``, ``"info"``, ...) and above.

    psycopg, psycopg_pool and grpc log through the standard library's ``logging``; its root handler
    renders their records with the same processors, so an operator's log is one format line by line
    whoever wrote it (a pool's "connection lost" warning as much as the service's own lines).

    Called with neither argument it configures JSON at ``"info"`` — unless an earlier call chose a format
    or a level (the command line's ``--log-format``/``--log-level``), which it then keeps: :func:`serve`
    calls it bare, for servers started from code, after ``uno-audit serve`` has called it with the flags.
    """
    chosen = "uno-audit: chosen"  # the name of the root handler a call with arguments installs
    root = logging.getLogger()
    if log_format is None and level is None and any(h.get_name() == chosen for h in root.handlers):
        return
    console = log_format == "console"
    threshold = logging.getLevelNamesMapping()[(level or "info").upper()]
    shared: list[structlog.types.Processor] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if worker is not None:
        shared.append(_WorkerField(worker))
    if not console:  # the console renderer lays a traceback out itself
        shared.append(structlog.processors.format_exc_info)  # an internal error's traceback, as a string
    renderer: structlog.types.Processor = (
        structlog.dev.ConsoleRenderer(colors=sys.stdout.isatty())
        if console
        else structlog.processors.JSONRenderer(serializer=json_line)
    )
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        # One write per line (message and newline together): the workers of `serve --workers` share
        # standard output, and a line written in two parts can be cut by another worker's line.
        logger_factory=structlog.WriteLoggerFactory(sys.stdout),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stdout)
    handler.set_name(chosen if log_format is not None or level is not None else "uno-audit")
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root.handlers = [handler]
    root.setLevel(threshold)


def json_line(value: Any, **options: Any) -> str:
    """A log line's JSON, by orjson (a tenth of the CPU of a command went to ``json.dumps`` of its log
    line); what orjson refuses (an integer beyond 64 bits, a key that is not a string) by the standard
    library. Log lines are read, never hashed, so their bytes need not be canonical."""
    try:
        return orjson.dumps(value, default=options.get("default")).decode()
    except TypeError:
        return json.dumps(value, **options)


class _WorkerField:
    """A structlog processor: the worker process's index on every line."""

    def __init__(self, worker: int) -> None:
        self.worker = worker

    def __call__(
        self, logger: Any, method: str, event: structlog.types.EventDict
    ) -> structlog.types.EventDict:
        event.setdefault("worker", self.worker)
        return event


PROJECTIONS_SERVICE = "uno.audit.v1.Projections"
#: ``serve --workers``: NOT_SERVING while a process of the server is in a crash loop (restarted again and
#: again, :mod:`service.api.workers`); the workers that answer still serve commands.
SUPERVISION_SERVICE = "uno.audit.v1.Supervision"


async def supervision_health(health: Any, *, crash_loop: bool) -> None:
    """Report the supervisor's crash-loop state in ``health``."""
    status = (
        health_pb2.HealthCheckResponse.NOT_SERVING if crash_loop else health_pb2.HealthCheckResponse.SERVING
    )
    await health.set(SUPERVISION_SERVICE, status)


#: The read models report NOT_SERVING in the health service while they are further behind than this.
PROJECTION_LAG_LIMIT_SECONDS = 5.0


@dataclass(slots=True)
class RunningServer:
    """A started server and what it owns; :meth:`stop` takes it down gracefully."""

    server: grpc.aio.Server
    store: EventStore
    notifier: Notifier
    health: Any
    port: int
    stopping: asyncio.Event
    background: list[asyncio.Task[None]]
    watched: metrics.Watched
    #: The metrics endpoint, when the server was given one (its port: ``exporter.port``).
    exporter: Exporter | None

    async def stop(self, grace: float = GRACE_SECONDS) -> None:
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)
        self.stopping.set()  # the projector finishes its batch (one transaction) and stops
        await asyncio.gather(*self.background, return_exceptions=True)
        await self.notifier.stop()
        await self.store.close()
        metrics.unwatch(self.watched)
        if self.exporter is not None:  # last: a scrape can watch the server stop
            await asyncio.to_thread(self.exporter.stop)


async def _report_projection_lag(store: EventStore, health: Any, stopping: asyncio.Event) -> None:
    """Keep the health status of the read models current: SERVING while they keep up with the log, no
    game is quarantined and the projector is not failing (:func:`projections.read_health`).

    A quarantined game keeps the status NOT_SERVING until a rebuild lifts it: its views are incomplete,
    and a status that went back to SERVING on its own would hide that. Each change of what is wrong is
    logged once, not every second.
    """
    log = structlog.get_logger("uno_audit.projections")
    reported: object = None
    while not stopping.is_set():
        try:
            async with queries.connection(store) as conn:
                found = await read_health(conn, DEFAULT_SET)
            metrics.projection_health(found)
            serving = found.serving(PROJECTION_LAG_LIMIT_SECONDS)
            status = (
                health_pb2.HealthCheckResponse.SERVING
                if serving
                else health_pb2.HealthCheckResponse.NOT_SERVING
            )
            await health.set(PROJECTIONS_SERVICE, status)
            lagging = found.lag.seconds_behind > PROJECTION_LAG_LIMIT_SECONDS
            state = (serving, lagging, found.quarantined_total, found.failing is not None)
            if state != reported and not serving:
                log.warning(
                    "projections not serving",
                    lagging=lagging,
                    quarantined=found.quarantined_total,
                    games=[game.game_id for game in found.quarantined[:10]],
                    failing=found.failing is not None,
                    **found.lag.as_dict(),
                )
            reported = state
        except Exception as error:  # the database is away: say so, and look again
            await health.set(PROJECTIONS_SERVICE, health_pb2.HealthCheckResponse.NOT_SERVING)
            log.warning("projection health unknown", error=str(error))
            reported = None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), 1.0)


async def start_server(
    *,
    listen: str,
    database_url: str,
    admin_token: str | None,
    pool_size: int = 10,
    projector: bool = True,
    database_timeout: float = DEFAULT_TIMEOUT,
    max_streams: int = MAX_STREAMS,
    access: Access | None = None,
    metrics_listen: str | None = None,
    tls: ServerTLS | None = None,
    keyring: Keyring | None = None,
    reuse_port: bool = False,
    bound: Callable[[], Awaitable[None]] | None = None,
) -> RunningServer:
    """Open the store (migrating it and the read models), and start serving on ``listen`` (``host:port``;
    port 0 picks one). With ``projector``, the read models are kept up to date in the background.
    ``database_timeout`` bounds each wait for the database (:meth:`EventStore.open`). ``max_streams`` bounds
    the open ``WatchGame`` streams in all (:class:`Notifier`); ``access`` says whether creating needs a
    client key and what each client's quotas are (default: keyless, the default quotas).
    ``metrics_listen`` (``host:port``) serves the Prometheus metrics (:mod:`service.ops.metrics`) over HTTP;
    ``tls`` makes the gRPC port TLS only (mutual TLS with a client CA). ``keyring`` signs the receipts
    and checkpoints (:mod:`service.checkpoints`); without one, a key made for this server alone signs
    them, which nobody can check after it stops: ``serve`` always passes one. ``reuse_port`` shares the
    port with the other workers of ``serve --workers N`` (SO_REUSEPORT): only they may ask for it, after
    ``serve`` has made sure that no other server holds the port (:func:`service.api.workers.probe_listen`).
    ``bound`` is awaited once the port is bound (listening) and before the server accepts: the workers
    of ``serve`` all bind before any accepts, so that the kernel spreads connections over all of them."""
    keyring = keyring or Keyring(Signer.generate(EPHEMERAL_NAME))
    store = await EventStore.open(database_url, max_size=pool_size, timeout=database_timeout)
    try:
        await store.migrate()
        await migrate_projections(database_url)
    except BaseException:
        await store.close()
        raise
    handler = CommandHandler(store)
    access = access or Access()
    notifier = Notifier(store, max_streams=max_streams, quotas=access.quotas)
    notifier.start()
    server = grpc.aio.server(
        # CallMetrics outermost: it sees the status ErrorStatuses made of what a servicer raised.
        interceptors=[CallMetrics(), ErrorStatuses()],
        options=[
            ("grpc.max_receive_message_length", limits.MAX_REQUEST_BYTES),
            ("grpc.max_send_message_length", limits.MAX_REPLY_BYTES),
            # gRPC shares a port with any process that asks the same by default: a second server on a
            # taken port would start silently and answer every other call from its own database. Only
            # the workers of one `serve --workers N` share theirs, once the port was found free.
            ("grpc.so_reuseport", 1 if reuse_port else 0),
        ],
    )
    callers = Callers(store, token_hash(admin_token) if admin_token else None, access)
    game_pb2_grpc.add_GameServiceServicer_to_server(  # type: ignore[no-untyped-call]
        GameService(store, handler, notifier, callers, keyring), server
    )
    checkpoint_pb2_grpc.add_CheckpointServiceServicer_to_server(  # type: ignore[no-untyped-call]
        CheckpointService(store, keyring, callers), server
    )
    audit_pb2_grpc.add_AuditServiceServicer_to_server(  # type: ignore[no-untyped-call]
        AuditService(Auditor(store, check_game), callers, keyring), server
    )
    health = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    enable_reflection(
        (
            SERVICE_NAME,
            AUDIT_SERVICE_NAME,
            CHECKPOINT_SERVICE_NAME,
            health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
        ),
        server,
    )
    exporter: Exporter | None = None
    try:
        if metrics_listen is not None:
            exporter = start_exporter(metrics_listen)
        if tls is None:
            port = server.add_insecure_port(listen)
        else:
            port = server.add_secure_port(listen, tls.credentials())
    except (RuntimeError, OSError) as error:  # gRPC's bind fails with RuntimeError, the exporter's OSError
        if exporter is not None:
            await asyncio.to_thread(exporter.stop)
        await notifier.stop()
        await store.close()
        where = listen if isinstance(error, RuntimeError) else metrics_listen
        raise ListenError(f"cannot listen on {where}: the address is in use or cannot be bound") from None
    if bound is not None:
        await bound()
    await server.start()
    for name in ("", SERVICE_NAME, AUDIT_SERVICE_NAME, CHECKPOINT_SERVICE_NAME):
        await health.set(name, health_pb2.HealthCheckResponse.SERVING)
    stopping = asyncio.Event()
    background = [asyncio.create_task(_report_projection_lag(store, health, stopping), name="projection-lag")]
    if projector:
        background.append(asyncio.create_task(run_projector(database_url, stop=stopping), name="projector"))
    watched = metrics.Watched(lambda: notifier.open_streams, store.pool_stats)
    metrics.watch(watched)
    return RunningServer(server, store, notifier, health, port, stopping, background, watched, exporter)


class ListenError(Exception):
    """The server cannot listen where it was told to (the address is taken, or not this machine's)."""


async def serve(
    *,
    listen: str,
    database_url: str,
    admin_token: str | None,
    projector: bool = True,
    database_timeout: float = DEFAULT_TIMEOUT,
    metrics_listen: str | None = None,
    tls: ServerTLS | None = None,
    keyring: Keyring | None = None,
    workers: int = 1,
    log_format: str = "json",
    log_level: str = "info",
    access: Access | None = None,
    reload_keyring: Callable[[], Keyring] | None = None,
) -> None:
    """Run until SIGTERM or SIGINT, then stop gracefully (``access``: see :func:`start_server`).

    ``workers`` above 1 runs that many server processes on the one port instead of serving in this
    process (:func:`service.api.workers.serve_workers`), each logging as ``log_format`` at ``log_level``;
    the projector (with ``projector``) runs in a process of its own beside them; SIGHUP replaces them one
    by one, signing with ``reload_keyring()`` (the key file read again)."""
    configure_logging()
    if workers > 1:
        from service.api.workers import serve_workers

        await serve_workers(
            workers,
            listen=listen,
            database_url=database_url,
            admin_token=admin_token,
            projector=projector,
            database_timeout=database_timeout,
            tls=tls,
            keyring=keyring or Keyring(Signer.generate(EPHEMERAL_NAME)),
            log_format=log_format,
            log_level=log_level,
            metrics_listen=metrics_listen,
            reload_keyring=reload_keyring,
            access=access,
        )
        return
    log = structlog.get_logger("uno_audit.server")
    running = await start_server(
        listen=listen,
        database_url=database_url,
        admin_token=admin_token,
        projector=projector,
        database_timeout=database_timeout,
        metrics_listen=metrics_listen,
        tls=tls,
        keyring=keyring,
        access=access,
    )
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    host = listen.rsplit(":", 1)[0]
    log.info(
        "serving",
        address=f"{host}:{running.port}",
        admin=admin_token is not None,
        tls="off" if tls is None else "mutual" if tls.client_ca is not None else "on",
        metrics=metrics_listen,
    )
    await stopping.wait()
    log.info("stopping: finishing in-flight commands", grace_seconds=GRACE_SECONDS)
    await running.stop()
    log.info("stopped")
