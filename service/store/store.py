"""The PostgreSQL store: the stream store and the games table over one pool, joined in one unit of work.

:class:`EventStore` is the facade the service uses: it opens the pool, runs the migrations, and is both
halves of :class:`~service.store.Store` (:class:`~service.store.streams.PostgresStreams` and
:class:`~service.store.games.PostgresGames` share its pool), plus :meth:`EventStore.create_game`: a game's
game rows and first events in one statement. Payloads are ``jsonb``, readable with plain SQL.
docs/DESIGN.md ("The abstract store") has more.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Self

from psycopg import errors as pg_errors
from psycopg_pool import AsyncConnectionPool

from service.store.clients import PostgresClients
from service.store.errors import GameExists
from service.store.failover import NO_SYNC_STANDBY, StorePool, SyncStandby
from service.store.games import GAME_KEY, NEW_GAME_ROWS, PostgresGames, new_game_params
from service.store.global_order import Connection
from service.store.group_commit import DEFAULT_MAX_BATCH
from service.store.interface import Store
from service.store.migrate import APP_ROLE as APP_ROLE
from service.store.migrate import apply_migrations
from service.store.model import GENESIS_HASH, AppendResult, Batch, NewEvent, check_create
from service.store.streams import PostgresStreams, maybe_earlier_result, write_params, write_statement

#: Seconds to wait for the database (see :meth:`EventStore.open`).
DEFAULT_TIMEOUT = 5.0

_CREATE_GAME = "WITH " + NEW_GAME_ROWS + "," + write_statement("game AS source")


class EventStore(PostgresStreams, PostgresGames, PostgresClients, Store):
    """The store over a pool of connections to one PostgreSQL database.

    Open it with :meth:`open`, run :meth:`migrate` once at start-up, :meth:`close` it at the end (or use
    ``async with``). All methods are safe to call concurrently from many tasks.
    """

    def __init__(
        self,
        dsn: str,
        pool: AsyncConnectionPool[Connection],
        *,
        group_commit: bool = True,
        max_batch: int = DEFAULT_MAX_BATCH,
        sync: SyncStandby = NO_SYNC_STANDBY,
    ) -> None:
        """Use :meth:`open`; this only wires an already opened pool."""
        PostgresStreams.__init__(self, dsn, pool, group_commit=group_commit, max_batch=max_batch, sync=sync)
        PostgresGames.__init__(self, pool)
        PostgresClients.__init__(self, pool)

    @classmethod
    async def open(
        cls,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = DEFAULT_TIMEOUT,
        group_commit: bool = True,
        max_batch: int = DEFAULT_MAX_BATCH,
        require_sync_standby: bool = False,
    ) -> EventStore:
        """Open a pool of ``min_size``..``max_size`` connections to ``dsn``; waits for the first ones.

        Waiting makes a wrong URL or an unreachable server fail here, at start-up, rather than at the
        first command. ``timeout`` (seconds) bounds that wait, each connection attempt, and how long a
        call waits for a connection while the database is away: then it fails with psycopg's
        ``PoolTimeout`` (an ``OperationalError``, which the API answers UNAVAILABLE) instead of holding
        its caller, and the pool keeps reconnecting in the background.

        Pooled connections are in autocommit mode (reads need no transaction; writes open their own) and
        act with the login's own privileges: the store takes no role with ``SET ROLE``, which that login
        could undo with ``RESET ROLE``; restricting the service is its login's business (``uno-audit
        serve`` refuses one that could change the events).

        ``group_commit`` (default on): appends that wait at the same time — commands of different games
        arriving while another append is in flight — are sent together, at most ``max_batch`` at once,
        as one statement, so one round trip and one commit serve them all, while each keeps its own
        version check, idempotency, hash chain and outcome (:mod:`service.store.group_commit`). A lone
        append is sent at once, as without it. ``group_commit=False`` sends each append as a statement
        of its own, each on its own pooled connection.

        ``require_sync_standby`` (the HA setting, ``serve --require-sync-standby``): a write, or an answer
        built from an earlier one, is given only once a standby of the synchronous quorum is proven to hold
        it; else the call fails with :class:`~service.store.errors.NotReplicated`
        (:class:`~service.store.failover.SyncStandby`). Opening refuses a login that cannot see the
        standbys. A connection that met a failover's error is closed, not reused (:class:`StorePool`).
        """
        sync = SyncStandby(required=require_sync_standby)
        pool: AsyncConnectionPool[Connection] = StorePool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            kwargs={"autocommit": True, "connect_timeout": max(1, math.ceil(timeout))},
            timeout=timeout,
            open=False,
            name="uno-audit-store",
        )
        try:
            await pool.open(wait=True, timeout=timeout)
            async with pool.connection() as conn:
                await sync.check_ready(conn)
            return cls(dsn, pool, group_commit=group_commit, max_batch=max_batch, sync=sync)
        except BaseException:
            await pool.close()
            raise

    async def close(self) -> None:
        """Close the pool (waits for queued appends to be sent, and connections in use to come back)."""
        await self._drain()
        await self._pool.close()

    def connection(self) -> AbstractAsyncContextManager[Connection]:
        """A connection of the store's pool (as its login), for readers of other tables of the same
        database, such as the read models; ``async with store.connection() as conn: ...``."""
        return self._pool.connection()

    def pool_stats(self) -> dict[str, int]:
        """The pool's figures now (``psycopg_pool``'s ``get_stats()``: connections open and idle, calls
        waiting, and counters since it opened), for the metrics."""
        return self._pool.get_stats()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()

    async def migrate(self) -> list[str]:
        """Apply the pending migrations (see :mod:`service.store.migrate`); return their names.

        Runs on a connection of its own as the login user: the owner applies what is pending; the
        service's restricted login only finds that nothing is, or raises
        :class:`~service.store.migrate.SchemaNotCurrent`.
        """
        return await apply_migrations(self._dsn)

    async def create_game(
        self,
        game_id: str,
        *,
        variant: str,
        players: Sequence[str],
        tournament_id: str,
        seed: bytes | None,
        seat_token_hashes: Sequence[bytes],
        command_id: str,
        request_hash: bytes,
        events: Sequence[NewEvent],
        metadata: Mapping[str, Any],
        client: str = "",
    ) -> AppendResult:
        """Create a game and append its first events (versions 1..n), all in one transaction.

        Writes the games row, the secret seed, one row per seat (seat *i* has the SHA-256 of seat
        *i*'s token), the command's ledger row and the events chained from
        :data:`~service.store.GENESIS_HASH`. A retry (the game recorded ``command_id`` with the same
        ``request_hash``) returns the first result with ``duplicate=True``; the game's ``command_id``
        with another request raises :class:`~service.store.CommandReused`; a ``game_id`` taken by another
        command raises :class:`GameExists`.
        """
        check_create(game_id, players, seat_token_hashes, events)
        batch = Batch(game_id, 0, GENESIS_HASH, events, metadata, command_id, request_hash)
        params = write_params(batch)
        params.update(
            new_game_params(
                variant=variant,
                players=players,
                tournament_id=tournament_id,
                seed=seed,
                seat_token_hashes=seat_token_hashes,
                client=client,
            )
        )
        async with self._pool.connection() as conn:
            try:
                # Autocommit: the one statement (game rows, ledger row, events) is its own transaction.
                cursor = await conn.execute(_CREATE_GAME, params, prepare=True)
                returned = await cursor.fetchall()
            except pg_errors.UniqueViolation as error:
                # The game id is taken: by this very command before (a retry), or by another one.
                earlier = await maybe_earlier_result(conn, command_id, game_id, request_hash, self._sync)
                if earlier is not None:
                    return earlier
                if error.diag.constraint_name == GAME_KEY:
                    raise GameExists(game_id) from None
                raise
            await self._sync.confirm(conn)
        return batch.result(returned)
