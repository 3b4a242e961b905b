"""The PostgreSQL event store: one append-only, hash-chained stream of events per game.

What it guarantees, and where each guarantee lives:

* **One transaction per command.** :meth:`EventStore.append` writes the command's ledger row, all its
  events and the wake-up notification with one prepared statement (data-modifying CTEs, the events as
  one jsonb array), which is atomic by itself: one round trip whatever the number of events.
  :meth:`EventStore.create_game` sends BEGIN, its statement and COMMIT in pipeline mode.
* **Optimistic concurrency.** ``UNIQUE (game_id, version)``: of two appends expecting the same version
  exactly one commits; the other gets :class:`VersionConflict` with the version it lost to. A trigger
  also insists that version *n* follows a stored version *n − 1* whose hash is the new row's
  ``prev_hash``, so streams have no holes and the chain cannot fork even if a caller's cached hash is
  wrong.
* **Idempotency.** Every command carries a client-chosen id. Its row in ``commands`` commits with the
  events, so a retried command finds it and gets the first result back (``duplicate=True``) while
  nothing is appended; the same id with another game or request is :class:`CommandReused`.
* **Tamper evidence.** ``hash = sha256(prev_hash ‖ game_id ‖ "\\n" ‖ version ‖ "\\n" ‖ canonical)``, see
  :func:`chain_hash`; the verifier recomputes it from the rows.
* **Immutability.** Triggers reject UPDATE, DELETE and TRUNCATE of ``events`` and ``commands`` for
  everyone, and the pool's connections run as the role ``uno_audit_app``, which may only SELECT and
  INSERT (see ``migrations/0001_events.sql``).
* **Gap-free global order.** :meth:`EventStore.read_all` reads in ``(xid, position)`` order below the
  snapshot's xmin, so a follower never skips an event that committed out of position order.
* **Wake-ups.** Appends ``NOTIFY uno_events`` with the game id; :meth:`EventStore.listen` delivers them.

Payloads and metadata are stored as ``jsonb``, readable with plain SQL
(``SELECT version, type, payload FROM events WHERE game_id = '…' ORDER BY version``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypeAlias

import psycopg
import structlog
from psycopg import errors as pg_errors
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from service.codec import canonical

from .errors import CommandReused, GameExists, GameNotFound, StoreError, VersionConflict
from .migrate import apply_migrations

APP_ROLE = "uno_audit_app"
"""The role the service's pooled connections take: SELECT and INSERT only."""

NOTIFY_CHANNEL = "uno_events"
"""The channel every append notifies, with the game id as payload."""

GENESIS_HASH = bytes(32)
"""The ``prev_hash`` of every game's version 1."""

_log = structlog.get_logger(__name__)

Connection: TypeAlias = psycopg.AsyncConnection[tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to append: its type name and its JSON payload (see :func:`service.catalogue.encode`)."""

    type: str
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event as stored: where it is in its stream and in the global log, and its link in the chain."""

    position: int
    game_id: str
    version: int
    type: str
    payload: dict[str, Any]
    metadata: dict[str, Any]
    recorded_at: datetime
    xid: int
    prev_hash: bytes
    hash: bytes


@dataclass(frozen=True, slots=True)
class AppendResult:
    """The versions a command wrote and the hash of its last event.

    ``duplicate`` is true when an earlier command with the same id (and request) already wrote them:
    the result is that command's, and nothing was appended now. ``events`` are the events this call
    stored, as stored (position, time, xid, hashes); empty for a duplicate, whose events
    :meth:`EventStore.read_stream` returns (versions ``first_version``..``last_version``).
    """

    first_version: int
    last_version: int
    last_hash: bytes
    duplicate: bool
    events: tuple[StoredEvent, ...] = ()


@dataclass(frozen=True, slots=True, order=True)
class Cursor:
    """A place in the gap-free global order: just after the event written at ``position`` by ``xid``."""

    xid: int = 0
    position: int = 0


@dataclass(frozen=True, slots=True)
class GameRow:
    """A game of the catalogue and its current stream version (0 before its first event)."""

    game_id: str
    variant: str
    players: list[str]
    tournament_id: str
    created_at: datetime
    version: int


def chain_hash(prev_hash: bytes, game_id: str, version: int, type: str, payload: Mapping[str, Any]) -> bytes:
    """The hash of one event: ``sha256(prev_hash ‖ game_id ‖ "\\n" ‖ version ‖ "\\n" ‖ canonical)``.

    ``game_id`` is UTF-8, ``version`` decimal ASCII digits, and ``canonical`` is
    :func:`service.codec.canonical` of ``(type, payload)``: sorted keys, no spaces, UTF-8. Linking each
    event to its predecessor's hash means that changing, removing or reordering any stored event changes
    every later hash, which the verifier detects by recomputing the chain from ``GENESIS_HASH``. The game
    id and version are hashed too so an event cannot be moved to another game or place unnoticed. The
    framing is unambiguous: canonical JSON contains no raw newline and starts with ``{``, so the last two
    newlines always delimit the version. Metadata (command id, actor) is deliberately not covered: it
    describes the request, not the game.
    """
    digest = hashlib.sha256(prev_hash)
    digest.update(game_id.encode())
    digest.update(b"\n")
    digest.update(str(version).encode("ascii"))
    digest.update(b"\n")
    digest.update(canonical(type, payload))
    return digest.digest()


def cursor_of(event: StoredEvent) -> Cursor:
    """The cursor just after ``event``: pass it to :meth:`EventStore.read_all` to continue from there."""
    return Cursor(event.xid, event.position)


# --- SQL ------------------------------------------------------------------------------------------------

_EVENT_COLUMNS = (
    "position, game_id, version, type, payload, metadata, recorded_at, xid::text::bigint, prev_hash, hash"
)
_GAME_COLUMNS = (
    "g.game_id, g.variant, g.players, g.tournament_id, g.created_at, "
    "coalesce((SELECT max(e.version) FROM events e WHERE e.game_id = g.game_id), 0)"
)

# Writing is one statement per command. Its data-modifying CTEs insert the ledger row (ON CONFLICT DO
# NOTHING), then the events only if that row was new (the join with `command` yields no row otherwise),
# then notify; the statement is atomic on its own, so a failure anywhere leaves nothing behind. The events
# come as one jsonb array (one prepared statement for any number of events) and are inserted in version
# order, so the insert trigger sees each event's predecessor. The main SELECT joins `notified` so that
# the notification is sent exactly when events were written.
_WRITE_EVENTS = f"""
command AS (
    INSERT INTO commands (command_id, game_id, request_sha256, first_version, last_version)
    {{source}}
    ON CONFLICT (command_id) DO NOTHING
    RETURNING game_id
), appended AS (
    INSERT INTO events (game_id, version, type, payload, metadata, prev_hash, hash)
    SELECT command.game_id, %(first_version)s::int + e.i::int - 1, e.item->>'type', e.item->'payload',
           %(metadata)s, decode(e.item->>'prev_hash', 'hex'), decode(e.item->>'hash', 'hex')
      FROM command, jsonb_array_elements(%(events)s) WITH ORDINALITY AS e(item, i)
     ORDER BY e.i
    RETURNING version, position, recorded_at, xid
), notified AS (
    SELECT pg_notify('{NOTIFY_CHANNEL}', game_id) FROM command
)
SELECT a.position, a.recorded_at, a.xid::text::bigint FROM appended a, notified ORDER BY a.version
"""
_APPEND = "WITH " + _WRITE_EVENTS.format(
    source="VALUES (%(command_id)s, %(game_id)s, %(request_hash)s, %(first_version)s, %(last_version)s)"
)
_CREATE_GAME = """
WITH game AS (
    INSERT INTO games (game_id, variant, players, tournament_id)
    VALUES (%(game_id)s, %(variant)s, %(players)s, %(tournament_id)s)
    RETURNING game_id
), secret AS (
    INSERT INTO game_secrets (game_id, seed) SELECT game_id, %(seed)s::bytea FROM game
), seat AS (
    INSERT INTO seats (game_id, seat, token_sha256)
    SELECT game.game_id, s.ordinality - 1, s.token
      FROM game, unnest(%(seat_hashes)s::bytea[]) WITH ORDINALITY AS s(token, ordinality)
),""" + _WRITE_EVENTS.format(
    source="SELECT %(command_id)s, game_id, %(request_hash)s, %(first_version)s, %(last_version)s FROM game"
)
_COMMAND_RESULT = (
    "SELECT c.game_id, c.request_sha256, c.first_version, c.last_version, e.hash FROM commands c "
    "JOIN events e ON e.game_id = c.game_id AND e.version = c.last_version WHERE c.command_id = %s"
)
_STORED_HASH = "SELECT hash FROM events WHERE game_id = %s AND version = %s"
_STREAM_VERSION = "SELECT coalesce(max(version), 0) FROM events WHERE game_id = %s"
_GAME_EXISTS = "SELECT EXISTS (SELECT FROM games WHERE game_id = %s)"
_READ_STREAM = (
    f"SELECT {_EVENT_COLUMNS} FROM events WHERE game_id = %s AND version > %s ORDER BY version LIMIT %s"
)
_READ_ALL = (
    f"SELECT {_EVENT_COLUMNS} FROM events "
    "WHERE (xid, position) > (%s::xid8, %s) AND xid < pg_snapshot_xmin(pg_current_snapshot()) "
    "ORDER BY xid, position LIMIT %s"
)
_GAME = f"SELECT {_GAME_COLUMNS} FROM games g WHERE g.game_id = %s"
_LIST_GAMES = {
    (False, False): f"SELECT {_GAME_COLUMNS} FROM games g ORDER BY g.game_id LIMIT %s",
    (False, True): f"SELECT {_GAME_COLUMNS} FROM games g WHERE g.game_id > %s ORDER BY g.game_id LIMIT %s",
    (True, False): (
        f"SELECT {_GAME_COLUMNS} FROM games g WHERE g.tournament_id = %s ORDER BY g.game_id LIMIT %s"
    ),
    (True, True): (
        f"SELECT {_GAME_COLUMNS} FROM games g WHERE g.tournament_id = %s AND g.game_id > %s "
        "ORDER BY g.game_id LIMIT %s"
    ),
}
_SEED = "SELECT seed FROM game_secrets WHERE game_id = %s"
_SEAT_FOR_TOKEN = "SELECT seat FROM seats WHERE game_id = %s AND token_sha256 = %s"
_COMMAND = "SELECT game_id, request_sha256, first_version, last_version FROM commands WHERE command_id = %s"
_LEDGER_LAST_VERSION = "SELECT max(last_version) FROM commands WHERE game_id = %s"
# The audit trail's disputes (partial index events_disputes, migration 0002).
_DISPUTE_TYPES = "type IN ('DisputeFiled', 'DisputeRuled')"
_DISPUTES = {
    False: f"SELECT {_EVENT_COLUMNS} FROM events WHERE {_DISPUTE_TYPES} ORDER BY game_id, version",
    True: f"SELECT {_EVENT_COLUMNS} FROM events WHERE {_DISPUTE_TYPES} AND game_id = %s ORDER BY version",
}


class _CommandSeen(Exception):
    """Raised inside create_game's transaction to roll it back: the command id was already recorded."""


# --- the store ------------------------------------------------------------------------------------------


class EventStore:
    """The event store over a pool of connections to one PostgreSQL database.

    Open it with :meth:`open`, run :meth:`migrate` once at start-up, :meth:`close` it at the end (or use
    ``async with``). All methods are safe to call concurrently from many tasks.
    """

    def __init__(self, dsn: str, pool: AsyncConnectionPool[Connection]) -> None:
        """Use :meth:`open`; this only wires an already opened pool."""
        self._dsn = dsn
        self._pool = pool

    @classmethod
    async def open(cls, dsn: str, *, min_size: int = 1, max_size: int = 10) -> EventStore:
        """Open a pool of ``min_size``..``max_size`` connections to ``dsn``; waits for the first ones.

        Waiting makes a wrong URL or an unreachable server fail here, at start-up, rather than at the
        first command. Pooled connections are in autocommit mode (reads need no transaction; writes open
        their own) and take the role ``uno_audit_app`` when the login user may.
        """
        pool: AsyncConnectionPool[Connection] = AsyncConnectionPool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            kwargs={"autocommit": True},
            configure=_configure,
            open=False,
            name="uno-audit-store",
        )
        try:
            await pool.open(wait=True)
        except BaseException:
            await pool.close()
            raise
        return cls(dsn, pool)

    async def close(self) -> None:
        """Close the pool (waits for connections in use to come back)."""
        await self._pool.close()

    def connection(self) -> AbstractAsyncContextManager[Connection]:
        """A connection of the store's pool (as ``uno_audit_app``), for readers of other tables of the
        same database, such as the read models; ``async with store.connection() as conn: ...``."""
        return self._pool.connection()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()

    async def migrate(self) -> list[str]:
        """Apply the pending migrations (see :mod:`service.store.migrate`); return their names.

        Runs on a connection of its own as the login user. Afterwards the pool is drained: connections
        opened before the first migration created the role ``uno_audit_app`` could not take it, and their
        replacements will.
        """
        applied = await apply_migrations(self._dsn)
        await self._pool.drain()
        return applied

    # --- writing ---------------------------------------------------------------------------------------

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
    ) -> AppendResult:
        """Create a game and append its first events (versions 1..n), all in one transaction.

        Writes the catalogue row, the secret seed, one row per seat (seat *i* has the SHA-256 of seat
        *i*'s token), the events chained from :data:`GENESIS_HASH` and the command row. A retried
        ``command_id`` with the same ``request_hash`` returns the first result with ``duplicate=True``;
        with another game or request it raises :class:`CommandReused`. A taken ``game_id`` raises
        :class:`GameExists`.
        """
        if not game_id:
            raise ValueError("a game id must not be empty")
        if not events:
            raise ValueError("a game is created with at least one event")
        if len(seat_token_hashes) != len(players):
            raise ValueError(f"{len(players)} players but {len(seat_token_hashes)} seat token hashes")
        batch = _Batch(game_id, 0, GENESIS_HASH, events, metadata, command_id)
        params = batch.params(command_id, request_hash)
        params.update(
            variant=variant,
            players=Jsonb(list(players)),
            tournament_id=tournament_id,
            seed=seed,
            seat_hashes=list(seat_token_hashes),
        )
        async with self._pool.connection() as conn:
            try:
                # An explicit transaction, because the game's rows are written even when the command id
                # turns out to be taken and must then be rolled back; pipelined, so BEGIN and the
                # statement travel together.
                async with conn.pipeline(), conn.transaction():
                    cursor = await conn.execute(_CREATE_GAME, params, prepare=True)
                    returned = await cursor.fetchall()
                    if not returned:
                        raise _CommandSeen
            except _CommandSeen:
                return await _earlier_result(conn, command_id, game_id, request_hash)
            except pg_errors.UniqueViolation as error:
                earlier = await _maybe_earlier_result(conn, command_id, game_id, request_hash)
                if earlier is not None:
                    return earlier
                if error.diag.constraint_name == "games_pkey":
                    raise GameExists(game_id) from None
                raise
        return batch.result(returned)

    async def append(
        self,
        game_id: str,
        expected_version: int,
        events: Sequence[NewEvent],
        *,
        command_id: str,
        request_hash: bytes,
        metadata: Mapping[str, Any],
        prev_hash: bytes | None = None,
    ) -> AppendResult:
        """Append ``events`` as versions ``expected_version + 1``.. of the game, in one transaction.

        ``prev_hash`` is the hash of version ``expected_version`` when the caller has it cached (the
        command handler does, with its cached state); ``None`` makes the store read it, one round trip
        more (``GENESIS_HASH`` before version 1). A wrong ``prev_hash`` is refused by the database, never
        stored.

        The command row, the events and ``pg_notify`` are one prepared statement (see ``_WRITE_EVENTS``),
        a transaction by itself. Outcomes:

        * the command id was recorded before for the same game and ``request_hash``: that first result,
          ``duplicate=True``, nothing appended (checked before any conflict, so a retry after a lost
          reply is recognised even though the stream has moved on);
        * recorded before for another game or request: :class:`CommandReused`;
        * the game is not at ``expected_version``: :class:`VersionConflict` with its current version
          (rarely equal to the expected one, when the previous event's writer had not committed yet or
          committed from an older transaction: reload and retry all the same);
        * the game does not exist: :class:`GameNotFound`.

        ``metadata`` is stored with every event, plus ``command_id``.
        """
        if expected_version < 0:
            raise ValueError(f"expected_version must not be negative, not {expected_version}")
        if not events:
            raise ValueError("append needs at least one event")
        async with self._pool.connection() as conn:
            if prev_hash is None:
                prev_hash = await _stored_hash(conn, game_id, expected_version)
                if prev_hash is None:
                    return await _settle_failed_append(
                        conn, command_id, game_id, expected_version, request_hash
                    )
            batch = _Batch(game_id, expected_version, prev_hash, events, metadata, command_id)
            try:
                # Autocommit: the single statement is its own transaction, one round trip in all.
                cursor = await conn.execute(_APPEND, batch.params(command_id, request_hash), prepare=True)
                returned = await cursor.fetchall()
            except (
                pg_errors.UniqueViolation,
                pg_errors.ForeignKeyViolation,
                pg_errors.CheckViolation,
            ) as error:
                constraint = error.diag.constraint_name
                if constraint == "events_hash_chain":
                    earlier = await _maybe_earlier_result(conn, command_id, game_id, request_hash)
                    if earlier is not None:
                        return earlier
                    actual = await _stream_version(conn, game_id)
                    if actual == expected_version:
                        raise StoreError(
                            f"game {game_id!r}: the given prev_hash is not the stored hash of version "
                            f"{expected_version} (a stale or corrupt cache?)"
                        ) from None
                    raise VersionConflict(game_id, expected_version, actual) from None
                if constraint in (
                    "events_stream_version",
                    "events_contiguous",
                    "events_xid_order",
                    "commands_game_id_fkey",
                    "events_game_id_fkey",
                ):
                    return await _settle_failed_append(
                        conn, command_id, game_id, expected_version, request_hash
                    )
                raise
            if not returned:  # the command id was recorded before: nothing was written now
                return await _earlier_result(conn, command_id, game_id, request_hash)
        return batch.result(returned)

    # --- reading ---------------------------------------------------------------------------------------

    async def read_stream(
        self, game_id: str, after_version: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        """The game's events with versions above ``after_version``, in version order, at most ``limit``.

        Versions are contiguous from 1 (the database refuses holes), so a caller holding state at version
        *v* reads exactly what it is missing with ``after_version=v``.
        """
        async with self._pool.connection() as conn:
            cursor = await conn.execute(_READ_STREAM, (game_id, after_version, limit), prepare=True)
            return [_event(row) for row in await cursor.fetchall()]

    async def stream_version(self, game_id: str) -> int:
        """The game's last version: 0 for a game without events (or an unknown one)."""
        async with self._pool.connection() as conn:
            return await _stream_version(conn, game_id)

    async def read_all(self, after: Cursor = Cursor(), limit: int = 1000) -> list[StoredEvent]:
        """The next events of the global log after the cursor ``after``, in the gap-free order.

        Why not simply ``WHERE position > last ORDER BY position``: ``position`` comes from a sequence
        when the row is inserted, but rows become visible when their transaction *commits*, and
        transactions commit in any order. If transaction A takes position 10 and B takes 11, and B
        commits first, a reader can see 11 while 10 is still invisible; it moves its cursor to 11, and
        when A commits, 10 is below the cursor and is never read. Under concurrent writers that skip is
        routine, and a projector or auditor following the log silently loses events.

        The order used here is ``(xid, position)``, where ``xid`` is the id of the writing transaction,
        and only rows with ``xid < pg_snapshot_xmin(pg_current_snapshot())`` are returned. Every
        transaction with an id below that horizon has finished (committed or rolled back), so the set of
        rows below it is final, and every transaction that commits later has an id at or above the
        horizon, so its rows sort after any cursor this method handed out. Hence no event is ever
        skipped, none is returned twice, and each game's events come in version order (the insert
        trigger ensures a later version is written by a younger transaction). The price is latency: an
        event waits until every older transaction (in the whole cluster) has finished, so keep
        transactions short (``idle_in_transaction_session_timeout`` helps against stragglers).

        Returns at most ``limit`` events; an empty list means "caught up for now" (wait for
        :meth:`listen`, then ask again). Continue from :func:`cursor_of` of the last event returned.
        """
        if limit < 1:
            raise ValueError(f"limit must be positive, not {limit}")
        async with self._pool.connection() as conn:
            cursor = await conn.execute(_READ_ALL, (str(after.xid), after.position, limit), prepare=True)
            return [_event(row) for row in await cursor.fetchall()]

    cursor_of = staticmethod(cursor_of)

    async def game(self, game_id: str) -> GameRow | None:
        """The game's catalogue row and current version, or ``None`` if there is no such game."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(_GAME, (game_id,), prepare=True)
            row = await cursor.fetchone()
            return None if row is None else _game(row)

    async def list_games(
        self, *, tournament_id: str | None = None, after: str | None = None, limit: int = 50
    ) -> list[GameRow]:
        """Games ordered by id, optionally of one tournament: the page after the game id ``after``.

        Keyset pagination: pass the last game id of a page as ``after`` to get the next one, which stays
        correct while games are being created and costs the same on every page.
        """
        if limit < 1:
            raise ValueError(f"limit must be positive, not {limit}")
        params: list[Any] = []
        if tournament_id is not None:
            params.append(tournament_id)
        if after is not None:
            params.append(after)
        params.append(limit)
        query = _LIST_GAMES[tournament_id is not None, after is not None]
        async with self._pool.connection() as conn:
            cursor = await conn.execute(query, params)
            return [_game(row) for row in await cursor.fetchall()]

    async def seed(self, game_id: str) -> bytes | None:
        """The game's secret dealing seed (``None`` if unknown or never set). Reveal it with care."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(_SEED, (game_id,))
            row = await cursor.fetchone()
            return None if row is None or row[0] is None else bytes(row[0])

    async def seat_for_token(self, game_id: str, token_hash: bytes) -> int | None:
        """The seat whose token has the SHA-256 ``token_hash`` in this game, or ``None``."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(_SEAT_FOR_TOKEN, (game_id, token_hash), prepare=True)
            row = await cursor.fetchone()
            return None if row is None else int(row[0])

    async def command(self, command_id: str) -> tuple[str, bytes, int, int] | None:
        """``(game_id, request_hash, first_version, last_version)`` of a recorded command, or ``None``."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(_COMMAND, (command_id,), prepare=True)
            row = await cursor.fetchone()
            return None if row is None else (row[0], bytes(row[1]), row[2], row[3])

    async def ledger_last_version(self, game_id: str) -> int | None:
        """The highest version the command ledger says was written for the game (``None``: no command).

        The verifier compares it with the stream's end: events removed from the end leave no hole.
        """
        async with self._pool.connection() as conn:
            cursor = await conn.execute(_LEDGER_LAST_VERSION, (game_id,), prepare=True)
            row = await cursor.fetchone()
            return None if row is None or row[0] is None else int(row[0])

    async def dispute_events(self, game_id: str | None = None) -> list[StoredEvent]:
        """The ``DisputeFiled`` and ``DisputeRuled`` events of one game, or of all (by game, then version)."""
        async with self._pool.connection() as conn:
            if game_id is None:
                cursor = await conn.execute(_DISPUTES[False])
            else:
                cursor = await conn.execute(_DISPUTES[True], (game_id,), prepare=True)
            return [_event(row) for row in await cursor.fetchall()]

    def listen(self) -> Listener:
        """The ids of games as they are appended to, from ``LISTEN uno_events``.

        Uses a dedicated autocommit connection (a pooled one would be handed to other tasks). Prefer
        ``async with store.listen() as wakeups:``: entering starts listening *before* the caller catches
        up with :meth:`read_all`, so no append between the catch-up and the first wait goes unnoticed.
        Plain ``async for`` works too (listening starts at the first step). See :class:`Listener`.
        """
        return Listener(self._dsn)


class Listener(AsyncIterator[str]):
    """An async iterator of game ids, one per committed append, from ``LISTEN uno_events``.

    Notifications are wake-up calls, not the data: PostgreSQL folds identical notifications of one
    transaction into one and drops them for a listener that was not connected, so a consumer reads
    the events themselves with :meth:`EventStore.read_all` or :meth:`EventStore.read_stream`.

    The connection is closed by :meth:`aclose` or on leaving ``async with``. A wait cancelled by a
    timeout (``asyncio.wait_for``) leaves the listener usable. A lost connection raises psycopg's
    ``OperationalError`` from the iteration.
    """

    def __init__(self, dsn: str) -> None:
        """Use :meth:`EventStore.listen`."""
        self._dsn = dsn
        self._conn: Connection | None = None
        self._notifies: AsyncIterator[psycopg.Notify] | None = None
        self._closed = False

    async def start(self) -> None:
        """Connect and ``LISTEN`` (once); from now on no notification is missed."""
        if self._closed:
            raise StoreError("this listener is closed")
        if self._conn is None:
            conn = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
            try:
                await conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
            except BaseException:
                await conn.close()
                raise
            self._conn = conn

    async def aclose(self) -> None:
        """Stop listening and close the connection. Idempotent."""
        self._closed = True
        conn, self._conn, self._notifies = self._conn, None, None
        if conn is not None:
            await conn.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> str:
        if self._closed:
            raise StopAsyncIteration
        await self.start()
        assert self._conn is not None
        if self._notifies is None:
            self._notifies = self._conn.notifies()
        try:
            notice = await anext(self._notifies)
        except BaseException:
            # A cancelled or failed generator cannot be resumed: the next call starts a fresh one (the
            # connection keeps listening meanwhile, so nothing is lost).
            self._notifies = None
            raise
        return notice.payload


# --- helpers --------------------------------------------------------------------------------------------


async def _configure(conn: Connection) -> None:
    """Make a new pooled connection act as ``uno_audit_app`` when the login user may take that role.

    Then even a bug in the service cannot UPDATE or DELETE events: the role lacks the privilege, before
    the triggers are even asked. Before the first migration the role does not exist yet; such
    connections stay as they are until :meth:`EventStore.migrate` drains the pool.
    """
    option = "SET" if conn.info.server_version >= 160000 else "MEMBER"  # PostgreSQL 16 split SET off
    cursor = await conn.execute(
        "SELECT to_regrole(%s) IS NOT NULL, coalesce(pg_has_role(current_user, to_regrole(%s), %s), false)",
        (APP_ROLE, APP_ROLE, option),
    )
    row = await cursor.fetchone()
    exists, allowed = (False, False) if row is None else (bool(row[0]), bool(row[1]))
    if allowed:
        await conn.execute(f"SET ROLE {APP_ROLE}")
    elif exists:
        _log.warning(
            "store.role_not_taken",
            role=APP_ROLE,
            user=conn.info.user,
            hint=f"GRANT {APP_ROLE} TO the login user to keep the service from changing events",
        )


class _Batch:
    """The events of one command, numbered and chained, as the parameters of the write statement."""

    def __init__(
        self,
        game_id: str,
        after_version: int,
        prev_hash: bytes,
        events: Sequence[NewEvent],
        metadata: Mapping[str, Any],
        command_id: str,
    ) -> None:
        _check_json(metadata, "metadata")
        self.game_id = game_id
        self.metadata = {**metadata, "command_id": command_id}
        self.first_version = after_version + 1
        self.last_version = after_version + len(events)
        self.events = list(events)
        self.prev_hashes: list[bytes] = []
        self.hashes: list[bytes] = []
        for version, event in enumerate(self.events, start=self.first_version):
            _check_json(event.payload, event.type)
            self.prev_hashes.append(prev_hash)
            prev_hash = chain_hash(prev_hash, game_id, version, event.type, event.payload)
            self.hashes.append(prev_hash)

    def params(self, command_id: str, request_hash: bytes) -> dict[str, Any]:
        return {
            "command_id": command_id,
            "game_id": self.game_id,
            "request_hash": request_hash,
            "first_version": self.first_version,
            "last_version": self.last_version,
            "metadata": Jsonb(self.metadata),
            # One jsonb parameter for all the events: adapting it costs a fraction of five arrays.
            "events": Jsonb(
                [
                    {
                        "type": event.type,
                        "payload": event.payload,
                        "prev_hash": prev.hex(),
                        "hash": digest.hex(),
                    }
                    for event, prev, digest in zip(self.events, self.prev_hashes, self.hashes, strict=True)
                ]
            ),
        }

    def result(self, returned: list[tuple[Any, ...]]) -> AppendResult:
        """The result of a write whose statement returned ``(position, recorded_at, xid)`` per event."""
        if len(returned) != len(self.events):
            raise StoreError(f"wrote {len(returned)} of {len(self.events)} events")  # cannot happen
        stored = tuple(
            StoredEvent(
                position,
                self.game_id,
                version,
                event.type,
                event.payload,
                self.metadata,
                recorded_at,
                xid,
                prev_hash,
                digest,
            )
            for version, event, prev_hash, digest, (position, recorded_at, xid) in zip(
                range(self.first_version, self.last_version + 1),
                self.events,
                self.prev_hashes,
                self.hashes,
                returned,
                strict=True,
            )
        )
        return AppendResult(self.first_version, self.last_version, self.hashes[-1], False, stored)


def _check_json(value: Any, where: str) -> None:
    """Refuse values whose stored form would not hash like the original.

    ``jsonb`` keeps strings, integers, booleans, null, lists and objects exactly, but stores numbers as
    ``numeric``: a float would come back as another text (``1e16`` as ``10000000000000000``), and the
    verifier's recomputed hash would no longer match. Object keys must be strings for the same reason,
    and no string may hold U+0000, which ``jsonb`` cannot store at all.
    """
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError(f"{where}: jsonb cannot store the character U+0000")
        return
    if value is None or isinstance(value, bool | int):
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where}: object keys must be strings, not {key!r}")
            _check_json(key, where)
            _check_json(item, where)
        return
    if isinstance(value, list | tuple):
        for item in value:
            _check_json(item, where)
        return
    if isinstance(value, float):
        hint = "" if math.isfinite(value) else " (not even JSON)"
        raise TypeError(f"{where}: floats{hint} do not survive jsonb unchanged; use integers or strings")
    raise TypeError(f"{where}: {type(value).__name__} is not a JSON value")


async def _stored_hash(conn: Connection, game_id: str, version: int) -> bytes | None:
    if version == 0:
        return GENESIS_HASH
    cursor = await conn.execute(_STORED_HASH, (game_id, version), prepare=True)
    row = await cursor.fetchone()
    return None if row is None else bytes(row[0])


async def _stream_version(conn: Connection, game_id: str) -> int:
    cursor = await conn.execute(_STREAM_VERSION, (game_id,), prepare=True)
    row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def _maybe_earlier_result(
    conn: Connection, command_id: str, game_id: str, request_hash: bytes
) -> AppendResult | None:
    """The first result of ``command_id`` if it was recorded (same game and request), else ``None``.

    Raises :class:`CommandReused` if it was recorded for another game or request.
    """
    cursor = await conn.execute(_COMMAND_RESULT, (command_id,), prepare=True)
    row = await cursor.fetchone()
    if row is None:
        return None
    stored_game, stored_request, first_version, last_version, last_hash = row
    if stored_game != game_id:
        raise CommandReused(command_id, f"for game {stored_game!r}")
    if bytes(stored_request) != request_hash:
        raise CommandReused(command_id, "for another request")
    return AppendResult(first_version, last_version, bytes(last_hash), duplicate=True)


async def _earlier_result(
    conn: Connection, command_id: str, game_id: str, request_hash: bytes
) -> AppendResult:
    result = await _maybe_earlier_result(conn, command_id, game_id, request_hash)
    if result is None:  # the row was seen a moment ago and rows are never deleted
        raise StoreError(f"command {command_id!r} was recorded and is now gone")
    return result


async def _settle_failed_append(
    conn: Connection, command_id: str, game_id: str, expected_version: int, request_hash: bytes
) -> AppendResult:
    """Explain an append that could not be written: an earlier run of the command, or which error."""
    earlier = await _maybe_earlier_result(conn, command_id, game_id, request_hash)
    if earlier is not None:
        return earlier
    cursor = await conn.execute(_GAME_EXISTS, (game_id,), prepare=True)
    row = await cursor.fetchone()
    if row is None or not row[0]:
        raise GameNotFound(game_id)
    raise VersionConflict(game_id, expected_version, await _stream_version(conn, game_id))


def _event(row: tuple[Any, ...]) -> StoredEvent:
    position, game_id, version, kind, payload, metadata, recorded_at, xid, prev_hash, digest = row
    return StoredEvent(
        position, game_id, version, kind, payload, metadata, recorded_at, xid, bytes(prev_hash), bytes(digest)
    )


def _game(row: tuple[Any, ...]) -> GameRow:
    game_id, variant, players, tournament_id, created_at, version = row
    return GameRow(game_id, variant, list(players), tournament_id, created_at, int(version))
