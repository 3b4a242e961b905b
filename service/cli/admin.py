"""The operator's commands on the database: ``migrate``, ``project`` (the projector alone) and
``rebuild`` (read models from zero)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from projections import VIEW_NAMES
from service.cli.console import progress_bar
from service.cli.database import database_url
from service.cli.exits import EXIT_INVALID, EXIT_OK, EXIT_USAGE, Refused, one_line, stopped_by_sigint
from service.cli.options import (
    SERVICE_PASSWORD_ENV,
    logging_options,
    service_password_option,
    stored_games_database,
)
from service.store.migrate import SERVICE_LOGIN


def register_migrate(commands: Any) -> None:
    """The ``migrate`` command."""
    migrate = commands.add_parser(
        "migrate", help="migrate the database as its owner and make the service's restricted login"
    )
    stored_games_database(migrate)
    service_password_option(migrate)
    migrate.set_defaults(run=migrate_command)


def register_read_models(commands: Any) -> None:
    """The ``project`` and ``rebuild`` commands."""
    project = commands.add_parser("project", help="keep the read models current (the projector)")
    stored_games_database(project)
    logging_options(project)
    project.set_defaults(run=project_command)
    rebuild = commands.add_parser("rebuild", help="rebuild read models from zero and swap them in")
    stored_games_database(rebuild)
    rebuild.add_argument("--view", choices=VIEW_NAMES, help="one read model (default: all)")
    rebuild.set_defaults(run=rebuild_command)


def read_secret(kind: str, path: Path | None, env: str) -> str | None:
    """The secret in the file at ``path`` if given, else in the environment variable ``env``; ``None``
    when neither is set. Surrounding whitespace (a file's last newline) is not part of it; an empty one is
    :class:`Refused`. Messages name where the secret was looked for, never the secret."""
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            reason = error.strerror if isinstance(error, OSError) and error.strerror else error
            raise Refused(f"cannot read the {kind} file {path}: {reason}") from None
        where = str(path)
    else:
        found = os.environ.get(env)
        if found is None:
            return None
        text, where = found, f"${env}"
    secret = text.strip()
    if not secret:
        raise Refused(f"the {kind} in {where} is empty")
    return secret


def migrate_command(args: argparse.Namespace) -> int:
    """Migrate as the owner; print what was applied and whether the service's password was set."""
    import psycopg

    from service.store import StoreError

    try:
        with database_url(args) as url:
            password = read_secret("service password", args.service_password_file, SERVICE_PASSWORD_ENV)
            applied = asyncio.run(migrate_database(url, password))
    except (psycopg.Error, StoreError) as error:
        print(f"uno-audit migrate: {one_line(error)}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps({"applied": applied, "login": SERVICE_LOGIN, "password_set": password is not None}))
    return EXIT_OK


async def migrate_database(owner_url: str, password: str | None) -> list[str]:
    """Apply the store's and the read models' migrations as the owner, and make the service's login;
    return the names of the migrations applied."""
    from projections.migrate import apply_migrations as migrate_projections
    from service.store.migrate import apply_migrations as migrate_store
    from service.store.migrate import ensure_service_login

    applied = await migrate_store(owner_url)
    applied += await migrate_projections(owner_url)
    await ensure_service_login(owner_url, password)
    return applied


def project_command(args: argparse.Namespace) -> int:
    """Run the projector until SIGTERM or SIGINT."""
    import signal

    import psycopg

    from projections.projector import run_projector
    from service.api.server import configure_logging
    from service.store import StoreError

    configure_logging(args.log_format, args.log_level)

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run_projector(url, stop=stop)

    try:  # once it runs, the projector rides out outages itself; a start that fails is one line
        with database_url(args) as url:
            stopped = stopped_by_sigint(run())
        if stopped:
            raise KeyboardInterrupt  # stopped cleanly all the same: main() says so, exit 130
    except (psycopg.Error, StoreError) as error:
        print(f"uno-audit project: database: {one_line(error)}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def rebuild_command(args: argparse.Namespace) -> int:
    """Rebuild the read models (one with ``--view``) and swap them in; print the report."""
    import psycopg

    from projections.rebuild import PHASES, RebuildBusy, rebuild
    from service.store import StoreError

    try:
        with database_url(args) as url, progress_bar(len(PHASES), "rebuild", "phase") as bar:

            def phase_done(name: str) -> None:
                bar.set_postfix_str(f"{name} done")
                bar.update(1)

            report = asyncio.run(rebuild(url, args.view, on_phase=phase_done))
    except RebuildBusy as busy:
        print(f"uno-audit rebuild: {busy}", file=sys.stderr)
        return EXIT_INVALID
    except psycopg.errors.InsufficientPrivilege as error:
        print(
            f"uno-audit rebuild: {one_line(error)}: a rebuild creates tables, give the owner's URL",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except (psycopg.Error, StoreError) as error:
        print(f"uno-audit rebuild: database: {one_line(error)}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps(report.to_json()))
    return EXIT_OK
