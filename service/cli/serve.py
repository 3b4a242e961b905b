"""``uno-audit serve``: the gRPC game service, its settings read from the command line or the environment.

The reasoning behind its credentials and its variables is in docs/DESIGN.md, "The command line"."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from service.checkpoints import KEY_ENV
from service.cli.admin import migrate_database, read_secret
from service.cli.exits import EXIT_INVALID, EXIT_OK, Refused, one_line, stopped_by_sigint
from service.cli.options import (
    SERVICE_PASSWORD_ENV,
    bounded,
    from_environment,
    host_port,
    logging_options,
    service_password_option,
)
from service.store.migrate import SERVICE_LOGIN

if TYPE_CHECKING:  # the command line imports gRPC only in the commands that use it
    from service.api.access import Access
    from service.checkpoints.keyring import Keyring

ADMIN_TOKEN_ENV = "UNO_AUDIT_ADMIN_TOKEN"
MIN_ADMIN_TOKEN = 16  # characters: `openssl rand -hex 16` gives 32
#: The ``serve`` options whose variable is not ``UNO_AUDIT_<OPTION>``, by destination.
SERVE_ENVIRONMENT = {"database_url": "DATABASE_URL"}


def register(commands: Any) -> None:
    """The ``serve`` command; every option of it also takes its default from a variable."""
    serve = commands.add_parser("serve", help="run the gRPC game service")
    serve.add_argument(
        "--listen", type=host_port, default="127.0.0.1:50051", metavar="HOST:PORT", help="where to listen"
    )
    serve.add_argument(
        "--database-url",
        metavar="DSN",
        help="the service's own login; none: an embedded PostgreSQL runs in --data-dir",
    )
    serve.add_argument("--migrate-url", metavar="OWNER_DSN", help="migrate with this owner's login first")
    serve.add_argument(
        "--read-database-url",
        metavar="DSN",
        help="a standby for the reads that may lag (VerifyGame, ExportGame and ReplayGame without a seed "
        "reveal, GetStandings); none: the primary serves them",
    )
    serve.add_argument(
        "--require-sync-standby",
        action="store_true",
        help="a highly available database: acknowledge a command only once a standby of the synchronous "
        "quorum holds its commit, else UNAVAILABLE (NOT_REPLICATED); the login needs pg_read_all_stats "
        "(docs/HA.md)",
    )
    serve.add_argument(
        "--data-dir",
        type=Path,
        default=Path("uno-audit-data"),
        metavar="DIR",
        help="the embedded database's folder (without --database-url)",
    )
    serve.add_argument(
        "--admin-token-file",
        type=Path,
        metavar="PATH",
        help=f"a file holding the adjudicator's token; none: ${ADMIN_TOKEN_ENV} holds it, or no admin",
    )
    # Refused with a message of its own: argparse would otherwise take it for an abbreviation of
    # --admin-token-file, or echo the token in its "unrecognized arguments" error.
    serve.add_argument("--admin-token", help=argparse.SUPPRESS)
    serve.add_argument(
        "--database-timeout",
        type=bounded(1, 600),
        default=5,
        metavar="S",
        help="seconds to wait for the database: at start-up (then exit 2), and per call while it is away "
        "(then UNAVAILABLE)",
    )
    service_password_option(serve)
    serve.add_argument(
        "--no-projector",
        action="store_true",
        help="do not run the projector (run `uno-audit project` instead)",
    )
    serve.add_argument(
        "--metrics-listen",
        type=host_port,
        metavar="HOST:PORT",
        help="serve Prometheus metrics over HTTP here (GET /metrics); none: no metrics endpoint",
    )
    serve.add_argument(
        "--stage-timing",
        action="store_true",
        help="answer each table command's server stages (admit, decide, group wait, database, reply) in "
        "its trailing metadata uno-audit-timing: a diagnostic for benchmarks (bench/service.py), off by "
        "default since it tells every client how the server spends its time",
    )
    _access_options(serve)
    _tls_and_key_options(serve)
    logging_options(serve)
    serve.set_defaults(run=run)
    from_environment(serve, SERVE_ENVIRONMENT)  # last: the options added above, whoever adds them


def _access_options(serve: argparse.ArgumentParser) -> None:
    """Who may create games, how much each client may use, and how many processes serve them."""
    serve.add_argument(
        "--allow-anonymous",
        action="store_true",
        help="let callers without a client key create games on a non-loopback address (on 127.0.0.1 "
        "and ::1 they may anyway); see `uno-audit clients`",
    )
    for quota, default, text in (
        ("creations-per-minute", 60, "games a client may create per minute; keyless callers are one client"),
        ("live-games", 200, "games of a client's in progress at once; keyless callers are one client"),
        ("streams", 200, "WatchGame streams of a keyed client: its games' seats, spectators with its key"),
        ("spectators-per-game", 50, "WatchGame streams of tokenless spectators one game has open at once"),
    ):
        serve.add_argument(
            f"--quota-{quota}",
            type=bounded(1, 1_000_000),
            default=default,
            metavar="N",
            help=text,
        )
    serve.add_argument(
        "--workers",
        type=bounded(1, 256),
        metavar="N",
        help="server processes sharing the port (SO_REUSEPORT), each with its own database pool and cache; "
        "none: the number of cores, or 1 with --metrics-listen",
    )


def _tls_and_key_options(serve: argparse.ArgumentParser) -> None:
    """The gRPC port's TLS and the keys that sign receipts."""
    serve.add_argument(
        "--tls-cert",
        type=Path,
        metavar="PATH",
        help="the server's certificate chain (PEM): with --tls-key, the gRPC port speaks TLS only",
    )
    serve.add_argument("--tls-key", type=Path, metavar="PATH", help="the server certificate's key (PEM)")
    serve.add_argument(
        "--tls-client-ca",
        type=Path,
        metavar="PATH",
        help="mutual TLS: every client must present a certificate this CA (PEM) issued",
    )
    serve.add_argument(
        "--checkpoint-key-file",
        type=Path,
        metavar="PATH",
        help=f"the key signing receipts (uno-audit keygen; ${KEY_ENV} holds one instead), the same for "
        "every replica; default: with --database-url none (serve refuses to start), else "
        "DATA_DIR/checkpoint.key, made on first start",
    )
    serve.add_argument(
        "--checkpoint-old-keys",
        type=Path,
        metavar="PATH",
        help="the verifier keys the service signed with before a rotation, one per line, still published",
    )


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or SIGINT; a start that fails is one line on standard error and exit 2 (1 for
    an operating system's error, a worker's own status for workers that kept failing)."""
    import psycopg

    # gRPC's core writes its own lines to standard error (a failed bind, twice); the service says what
    # went wrong in one line. GRPC_VERBOSITY set by the operator still wins.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    from service.api.server import ListenError
    from service.api.tls import TLSError
    from service.api.workers import WorkerError
    from service.store import StoreError

    try:
        with contextlib.ExitStack() as cleanup:
            if _serve(args, cleanup):
                raise KeyboardInterrupt  # stopped gracefully all the same: main() says so, exit 130
    except (StoreError, ListenError, TLSError) as refused:
        raise Refused(str(refused)) from None
    except WorkerError as failed:
        raise Refused(str(failed), failed.exit_code) from None
    except psycopg.Error as error:
        raise Refused(f"database: {one_line(error)}") from None
    except OSError as error:
        raise Refused(str(error), EXIT_INVALID) from None
    return EXIT_OK


def _serve(args: argparse.Namespace, cleanup: contextlib.ExitStack) -> bool:
    """Build the server's settings from ``args`` and serve; whether a SIGINT stopped it. ``cleanup``
    stops the embedded database, if one was started."""
    import structlog

    from service.api.config import ServeConfig
    from service.api.server import configure_logging, serve
    from service.api.tls import server_tls

    token = _admin_token(args)
    password = read_secret("service password", args.service_password_file, SERVICE_PASSWORD_ENV)
    if args.migrate_url is not None and args.database_url is None:
        raise Refused("--migrate-url goes with --database-url, the service's own login")
    if args.read_database_url is not None and args.database_url is None:
        raise Refused("--read-database-url goes with --database-url: an embedded database has no standby")
    if args.require_sync_standby and args.database_url is None:
        raise Refused("--require-sync-standby goes with --database-url: an embedded database has no standby")
    workers = _workers(args)
    tls = server_tls(args.tls_cert, args.tls_key, args.tls_client_ca)
    configure_logging(args.log_format, args.log_level)
    log = structlog.get_logger("uno_audit.server")
    if token is None:
        log.warning(
            "admin actions are disabled: no admin token",
            hint=f"set ${ADMIN_TOKEN_ENV} or --admin-token-file to enable the adjudicator",
        )
    service_url, migrate_url = _database_urls(args, log, cleanup)
    # After the embedded database: the default key file is in its folder, which initdb wants empty.
    keyring = _keyring(args)
    log.info("signing receipts", key=keyring.signer.verifier.encode(), published=len(keyring.published))
    asyncio.run(_ready_database(service_url, migrate_url, password, args.database_timeout))
    return stopped_by_sigint(
        serve(
            ServeConfig(
                listen=args.listen,
                database_url=service_url,
                read_database_url=args.read_database_url,
                require_sync_standby=args.require_sync_standby,
                admin_token=token,
                projector=not args.no_projector,
                database_timeout=args.database_timeout,
                metrics_listen=args.metrics_listen,
                stage_timing=args.stage_timing,
                tls=tls,
                workers=workers,
                log_format=args.log_format,
                log_level=args.log_level,
                access=_access(args),
            ),
            keyring=keyring,
            reload_keyring=lambda: _keyring(args),  # SIGHUP, with --workers: the key file read again
        )
    )


def _database_urls(
    args: argparse.Namespace, log: Any, cleanup: contextlib.ExitStack
) -> tuple[str, str | None]:
    """The service's URL and the owner's to migrate with (if any): the flags', else the embedded
    database's in ``--data-dir``, started (and created on the first start) here."""
    if args.database_url is not None:
        return args.database_url, args.migrate_url
    from psycopg.conninfo import make_conninfo

    from service.ops.embedded import embedded_database

    # The quick start: the embedded server's superuser migrates, the service logs in as its own role
    # over the same socket (the embedded server trusts local connections).
    owner_url, embedded = embedded_database(
        args.data_dir, lambda folder: log.info("first start: creating the database", data_dir=str(folder))
    )
    cleanup.callback(embedded.cleanup)
    log.info("embedded database started", data_dir=str(args.data_dir))
    return make_conninfo(owner_url, user=SERVICE_LOGIN), owner_url


async def _ready_database(
    service_url: str, migrate_url: str | None, password: str | None, timeout: float
) -> None:
    """Migrate with ``migrate_url`` if given; refuse a login that is not restricted, or a schema that is
    not current."""
    import psycopg

    from projections.migrate import PROJECTIONS
    from service.store.migrate import STORE, SchemaNotCurrent, check_service_login, pending_migrations

    if migrate_url is not None:
        await migrate_database(migrate_url, password)
    async with await psycopg.AsyncConnection.connect(
        service_url, autocommit=True, connect_timeout=max(1, math.ceil(timeout))
    ) as conn:
        await check_service_login(conn)
        pending = [name for ledger in (STORE, PROJECTIONS) for name in await pending_migrations(conn, ledger)]
    if pending:
        raise SchemaNotCurrent(
            f"the database's schema is not current ({', '.join(pending)} pending): run `uno-audit migrate "
            "--database-url OWNER_URL`, or give serve the owner's URL as --migrate-url"
        )


def _access(args: argparse.Namespace) -> Access:
    """Who may create games (a client key, beyond loopback, unless ``--allow-anonymous``) and the quotas."""
    from service.api.access import Access, Quotas, is_loopback

    quotas = Quotas(
        creations_per_minute=args.quota_creations_per_minute,
        live_games=args.quota_live_games,
        streams=args.quota_streams,
        spectators_per_game=args.quota_spectators_per_game,
    )
    return Access(require_key=not (args.allow_anonymous or is_loopback(args.listen)), quotas=quotas)


def _workers(args: argparse.Namespace) -> int:
    """``--workers``, else one per core this process may run on; with ``--metrics-listen``, 1 unless
    asked (its deployments size a pod by one process: a node's cores are not the pod's)."""
    if args.metrics_listen is not None and args.workers is None:
        return 1
    if args.workers is not None:
        return int(args.workers)
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
    return max(1, len(cores))


def _keyring(args: argparse.Namespace) -> Keyring:
    """The receipts' keyring: ``$UNO_AUDIT_CHECKPOINT_KEY``, else ``--checkpoint-key-file``, else (the
    embedded database only) a key named ``uno-audit`` made once in the data folder and kept there.

    A server database has replicas, and restarts in containers whose folders are not kept: a key made
    there would be each replica's own and lost on restart, and the players' receipts would stop
    verifying. So it must be given, the same to every replica."""
    from service.checkpoints import KeyFormatError
    from service.checkpoints.keyring import load_keyring

    if (
        args.database_url is not None
        and args.checkpoint_key_file is None
        and not os.environ.get(KEY_ENV, "").strip()
    ):
        raise Refused(
            f"a server database needs the signing key every replica shares: set ${KEY_ENV} or "
            "--checkpoint-key-file (make one with `uno-audit keygen --name uno-audit --out FILE`)"
        )
    path = args.checkpoint_key_file or args.data_dir / "checkpoint.key"
    create_as = None if args.checkpoint_key_file else "uno-audit"
    try:
        older = args.checkpoint_old_keys.read_text().split() if args.checkpoint_old_keys else []
        return load_keyring(path, older, create_as=create_as)
    except (OSError, KeyFormatError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise Refused(f"the checkpoint key ({path}): {reason}") from None


def _admin_token(args: argparse.Namespace) -> str | None:
    """The adjudicator's token, or ``None`` for none; :class:`Refused` if given but unfit."""
    if args.admin_token is not None:
        raise Refused(
            f"--admin-token is not accepted (every user of the machine sees it in `ps`): put the token in "
            f"${ADMIN_TOKEN_ENV} or in a file named by --admin-token-file"
        )
    token = read_secret("admin token", args.admin_token_file, ADMIN_TOKEN_ENV)
    if token is None:
        return None
    where = args.admin_token_file or f"${ADMIN_TOKEN_ENV}"
    if len(token) < MIN_ADMIN_TOKEN:
        raise Refused(
            f"the admin token in {where} is shorter than {MIN_ADMIN_TOKEN} characters "
            "(make one with `openssl rand -hex 32`)"
        )
    if not (token.isascii() and token.isprintable()):
        raise Refused(f"the admin token in {where} must be printable ASCII (it travels in a gRPC header)")
    return token
