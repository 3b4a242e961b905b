"""The one way every command on stored games opens its database: ``--database-url``, else the embedded
database that ``serve`` keeps in ``--data-dir``; and the auditor the arbiter's commands work through."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING

from service.cli.exits import EXIT_USAGE, Refused, one_line

if TYPE_CHECKING:  # the database's modules load only when a command runs
    from service.app.auditor import Auditor


@contextlib.contextmanager
def database_url(args: argparse.Namespace) -> Iterator[str]:
    """``args.database_url``, else the URL of the embedded database in ``args.data_dir`` for as long as the
    block runs (as its owner: the quick start's migrations, projector and rebuilds need no URL)."""
    if args.database_url is not None:
        yield args.database_url
        return
    if not args.data_dir.is_dir():
        raise Refused(
            f"no database: give --database-url (or $DATABASE_URL), or run "
            f"`uno-audit serve` first, which keeps an embedded one in {args.data_dir}"
        )
    from service.ops.embedded import embedded_database

    url, embedded = embedded_database(args.data_dir)  # shared with a `serve` running on the same folder
    try:
        yield url
    finally:
        embedded.cleanup()  # stops it only if no other process (a running serve) uses it


def on_auditor(args: argparse.Namespace, work: Callable[[Auditor], Awaitable[int]]) -> int:
    """Run ``work`` with an auditor over the command's database (:func:`database_url`), migrated first;
    its exit status. A refusal or a database that cannot be used is :class:`Refused`."""
    import psycopg
    import structlog
    from psycopg_pool import PoolTimeout

    from projections.check import check_game
    from service.app.auditor import Auditor
    from service.domain.errors import ServiceError, exit_code
    from service.store import EventStore, StoreError

    # Standard output is the command's report (one JSON object with --json): whatever the auditor logs
    # (a game ``verify --all`` could not verify and went on past) goes to standard error.
    structlog.configure(logger_factory=lambda *_: structlog.PrintLogger(sys.stderr))

    async def run(url: str) -> int:
        # Fail fast, with the server's own words, rather than after the pool's 30 s of retries; libpq
        # gives up after $PGCONNECT_TIMEOUT seconds (main() makes 10 the default), as for every command.
        try:
            probe = await psycopg.AsyncConnection.connect(url)
        except psycopg.Error as error:
            raise Refused(f"cannot connect to the database: {one_line(error)}") from None
        await probe.close()
        store = await EventStore.open(url, max_size=4)
        try:
            await store.migrate()
            return await work(Auditor(store, check_game))
        finally:
            await store.close()

    try:
        with database_url(args) as url:
            return asyncio.run(run(url))
    except ServiceError as refused:
        raise Refused(str(refused), exit_code(refused)) from None
    except (psycopg.Error, PoolTimeout, StoreError) as error:
        raise Refused(f"database: {one_line(error)}", EXIT_USAGE) from None
