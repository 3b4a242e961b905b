"""Assemble and run the gRPC server: GameService, AuditService, CheckpointService, health and reflection.

:func:`serve` runs one server until SIGTERM or SIGINT (or ``workers`` processes of it on one port:
:mod:`service.api.workers`); :func:`start_server` starts one in this process. The health status of
``uno.audit.v1.Projections`` follows the read models. docs/OPERATIONS.md ("Serving") says how a server
starts, reports its health and stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio

from projections import queries
from projections.check import check_game
from projections.migrate import apply_migrations as migrate_projections
from projections.projector import DEFAULT_SET, run_projector
from projections.quarantine import read_health
from service.api.audit_servicer import AuditService
from service.api.callers import Callers
from service.api.checkpoint_servicer import CheckpointService
from service.api.config import GRACE_SECONDS, ServeConfig
from service.api.config import ListenError as ListenError  # the command line imports it from here
from service.api.errors import ErrorStatuses
from service.api.metrics import CallMetrics, Exporter, start_exporter
from service.api.notify import Notifier
from service.api.reflection import enable_reflection
from service.api.servicer import GameService
from service.api.workers import serve_workers
from service.app.auditor import Auditor
from service.app.handler import CommandHandler
from service.checkpoints import Signer
from service.checkpoints.keyring import Keyring
from service.domain import limits
from service.domain.auth import token_hash
from service.ops import metrics, stages
from service.ops.logging import configure_logging as configure_logging  # the command line imports it here
from service.ops.logging import logger
from service.rules.engine_kind import engine_kind
from service.store import EventStore
from uno_audit_client.gen.uno.audit.v1 import (
    audit_pb2,
    audit_pb2_grpc,
    checkpoint_pb2,
    checkpoint_pb2_grpc,
    game_pb2,
    game_pb2_grpc,
)

SERVICE_NAME = game_pb2.DESCRIPTOR.services_by_name["GameService"].full_name
AUDIT_SERVICE_NAME = audit_pb2.DESCRIPTOR.services_by_name["AuditService"].full_name
CHECKPOINT_SERVICE_NAME = checkpoint_pb2.DESCRIPTOR.services_by_name["CheckpointService"].full_name
#: The name of a key made for one server's lifetime (tests; ``serve`` always has a key of its own).
EPHEMERAL_NAME = "uno-audit.ephemeral"
PROJECTIONS_SERVICE = "uno.audit.v1.Projections"
#: ``serve --workers``: NOT_SERVING while a process of the server is in a crash loop (restarted again and
#: again, :mod:`service.api.workers`); the workers that answer still serve commands.
SUPERVISION_SERVICE = "uno.audit.v1.Supervision"
#: The read models report NOT_SERVING in the health service while they are further behind than this.
PROJECTION_LAG_LIMIT_SECONDS = 5.0


async def supervision_health(health: Any, *, crash_loop: bool) -> None:
    """Report the supervisor's crash-loop state in ``health``."""
    status = (
        health_pb2.HealthCheckResponse.NOT_SERVING if crash_loop else health_pb2.HealthCheckResponse.SERVING
    )
    await health.set(SUPERVISION_SERVICE, status)


@dataclass(slots=True)
class RunningServer:
    """A started server and what it owns; :meth:`stop` takes it down gracefully."""

    server: grpc.aio.Server
    store: EventStore
    #: The store of the reads that may lag (``config.read_database_url``); ``store`` itself without one.
    reads: EventStore
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
        if self.reads is not self.store:
            await self.reads.close()
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
    projections_log = logger("projections")
    reported: object = None
    while not stopping.is_set():
        try:
            async with queries.connection(store) as conn:
                found = await read_health(conn, DEFAULT_SET)
            metrics.projection_health(
                events_behind=found.lag.events_behind,
                seconds_behind=found.lag.seconds_behind,
                quarantined=found.quarantined_total,
                failing=found.failing is not None,
            )
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
                projections_log.warning(
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
            projections_log.warning("projection health unknown", error=str(error))
            reported = None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), 1.0)


def _grpc_server(reuse_port: bool) -> grpc.aio.Server:
    """An empty gRPC server with the service's interceptors and message limits."""
    return grpc.aio.server(
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


def _add_services(
    server: grpc.aio.Server,
    config: ServeConfig,
    stores: tuple[EventStore, EventStore],
    notifier: Notifier,
    keyring: Keyring,
) -> Any:
    """Register the game, checkpoint, audit, health and reflection services; return the health servicer.
    ``stores`` are the primary's and the one for reads that may lag (the same one without a read DSN)."""
    store, reads = stores
    callers = Callers(store, token_hash(config.admin_token) if config.admin_token else None, config.access)
    game_pb2_grpc.add_GameServiceServicer_to_server(  # type: ignore[no-untyped-call]
        GameService(
            store,
            CommandHandler(store),
            notifier,
            callers,
            keyring,
            reads=reads,
            stage_timing=config.stage_timing,
        ),
        server,
    )
    checkpoint_pb2_grpc.add_CheckpointServiceServicer_to_server(  # type: ignore[no-untyped-call]
        CheckpointService(store, keyring, callers), server
    )
    audit_pb2_grpc.add_AuditServiceServicer_to_server(  # type: ignore[no-untyped-call]
        AuditService(Auditor(store, check_game), callers, keyring, reader=Auditor(reads, check_game)), server
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
    return health


async def _bind(server: grpc.aio.Server, config: ServeConfig) -> tuple[int, Exporter | None]:
    """Start the metrics endpoint (if asked) and bind the gRPC port: the port and the endpoint, or
    :class:`ListenError` (with the endpoint stopped again)."""
    exporter: Exporter | None = None
    try:
        if config.metrics_listen is not None:
            exporter = start_exporter(config.metrics_listen)
        if config.tls is None:
            return server.add_insecure_port(config.listen), exporter
        return server.add_secure_port(config.listen, config.tls.credentials()), exporter
    except (RuntimeError, OSError) as error:  # gRPC's bind fails with RuntimeError, the exporter's OSError
        if exporter is not None:
            await asyncio.to_thread(exporter.stop)
        raise ListenError(
            config.listen if isinstance(error, RuntimeError) else config.metrics_listen
        ) from None


async def start_server(
    config: ServeConfig,
    *,
    keyring: Keyring | None = None,
    reuse_port: bool = False,
    bound: Callable[[], Awaitable[None]] | None = None,
) -> RunningServer:
    """Open the store (migrating it and the read models) and serve as ``config`` says, with the projector
    in the background if ``config.projector``. ``keyring`` signs the receipts and checkpoints; without one,
    a key made for this server alone signs them, which nobody can check after it stops. ``reuse_port``
    shares the port with the other workers of ``serve --workers N`` (SO_REUSEPORT), once ``serve`` has
    found it free. ``bound`` is awaited once the port is bound and before the server accepts."""
    keyring = keyring or Keyring(Signer.generate(EPHEMERAL_NAME))
    store = await EventStore.open(
        config.database_url,
        max_size=config.pool_size,
        timeout=config.database_timeout,
        require_sync_standby=config.require_sync_standby,
    )
    reads = store
    try:
        await store.migrate()
        await migrate_projections(config.database_url)
        if config.read_database_url is not None:
            reads = await EventStore.open(
                config.read_database_url, max_size=config.pool_size, timeout=config.database_timeout
            )
    except BaseException:
        await store.close()
        raise
    notifier = Notifier(store, max_streams=config.max_streams, quotas=config.access.quotas)
    notifier.start()
    server = _grpc_server(reuse_port)
    health = _add_services(server, config, (store, reads), notifier, keyring)
    try:
        port, exporter = await _bind(server, config)
    except ListenError:
        await notifier.stop()
        await store.close()
        if reads is not store:
            await reads.close()
        raise
    if bound is not None:
        await bound()
    await server.start()
    for name in ("", SERVICE_NAME, AUDIT_SERVICE_NAME, CHECKPOINT_SERVICE_NAME):
        await health.set(name, health_pb2.HealthCheckResponse.SERVING)
    stopping = asyncio.Event()
    background = [
        asyncio.create_task(_report_projection_lag(store, health, stopping), name="projection-lag"),
        asyncio.create_task(stages.tick(stopping), name="loop-lag"),
    ]
    if config.projector:
        background.append(
            asyncio.create_task(run_projector(config.database_url, stop=stopping), name="projector")
        )
    watched = metrics.Watched(lambda: notifier.open_streams, store.pool_stats)
    metrics.watch(watched)
    stages.watch_collector()
    stages.settle_heap()  # start-up's objects are never garbage: no later pass needs to walk them
    return RunningServer(
        server, store, reads, notifier, health, port, stopping, background, watched, exporter
    )


async def serve(
    config: ServeConfig,
    *,
    keyring: Keyring | None = None,
    reload_keyring: Callable[[], Keyring] | None = None,
) -> None:
    """Serve as ``config`` says until SIGTERM or SIGINT, then stop gracefully.

    With ``config.workers`` above 1, that many server processes serve on the one port instead
    (:func:`service.api.workers.serve_workers`); SIGHUP then replaces them one by one, signing with
    ``reload_keyring()`` (the key file read again)."""
    configure_logging()
    log = logger("server")  # after configuring: a logger is bound on its first use
    if config.workers > 1:
        await serve_workers(config, keyring or Keyring(Signer.generate(EPHEMERAL_NAME)), reload_keyring)
        return
    running = await start_server(config, keyring=keyring)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    host = config.listen.rsplit(":", 1)[0]
    log.info(
        "serving",
        address=f"{host}:{running.port}",
        admin=config.admin_token is not None,
        tls=config.tls_mode,
        metrics=config.metrics_listen,
        engine=engine_kind(),  # "compiled" or "pure": a build without a C compiler falls back silently
    )
    await stopping.wait()
    log.info("stopping: finishing in-flight commands", grace_seconds=GRACE_SECONDS)
    await running.stop()
    log.info("stopped")
