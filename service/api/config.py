"""The server's settings, and what the single-process server and the workers of ``serve --workers`` share.

:class:`ServeConfig` is built once (``uno-audit serve`` makes it from its flags and environment) and passed
whole: to :func:`~service.api.server.serve`, to each worker in its plan, and to
:func:`~service.api.server.start_server`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from service.api.access import Access
from service.api.notify import MAX_STREAMS
from service.api.tls import ServerTLS
from service.store.store import DEFAULT_TIMEOUT

#: How long in-flight calls may take to finish once a server is told to stop.
GRACE_SECONDS = 10.0


class ListenError(Exception):
    """The server cannot listen where it was told to (the address is taken, or not this machine's)."""

    def __init__(self, listen: str | None) -> None:
        super().__init__(f"cannot listen on {listen}: the address is in use or cannot be bound")


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """How to serve: where, on which database, with what limits; see ``uno-audit serve --help``."""

    #: ``host:port`` of the gRPC port (port 0 picks one).
    listen: str
    database_url: str
    #: Without one, admin actions are disabled.
    admin_token: str | None
    #: Keep the read models current beside the service.
    projector: bool = True
    #: Bounds each wait for the database (:meth:`~service.store.EventStore.open`).
    database_timeout: float = DEFAULT_TIMEOUT
    #: Database connections per server process.
    pool_size: int = 10
    #: The open ``WatchGame`` streams in all (:class:`~service.api.notify.Notifier`).
    max_streams: int = MAX_STREAMS
    #: Whether creating needs a client key, and each client's quotas.
    access: Access = field(default_factory=Access)
    #: ``host:port`` serving the Prometheus metrics over HTTP, if any.
    metrics_listen: str | None = None
    #: Makes the gRPC port TLS only (mutual TLS with a client CA).
    tls: ServerTLS | None = None
    #: Server processes on the one port (above 1: :mod:`service.api.workers`).
    workers: int = 1
    #: A database for the reads that may lag behind the log (a standby): seed-free VerifyGame, ExportGame,
    #: ReplayGame, and GetStandings. None: the primary serves them too.
    read_database_url: str | None = None
    #: Acknowledge a command only once a synchronous standby is proven to hold its commit (docs/HA.md).
    require_sync_standby: bool = False
    #: Answer each command's stages in its trailing metadata (:mod:`service.ops.stages`): a diagnostic
    #: for benchmarks, off by default since it tells clients how the server spends its time.
    stage_timing: bool = False
    log_format: str = "json"
    log_level: str = "info"

    @property
    def tls_mode(self) -> str:
        """``off``, ``on`` or ``mutual``, as the "serving" log line says it."""
        if self.tls is None:
            return "off"
        return "mutual" if self.tls.client_ca is not None else "on"
