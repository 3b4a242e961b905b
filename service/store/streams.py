"""The generic stream store on PostgreSQL: append with a version check, the command ledger, reads, wake-ups.

:meth:`PostgresStreams.append` writes a command's ledger row, events and wake-up in one prepared statement;
``(game_id, version)`` and a trigger keep versions without holes and the chain unforked
(:class:`VersionConflict`); a retried command id gets its first result (:class:`CommandReused` for another
request); triggers refuse UPDATE, DELETE and TRUNCATE. :func:`write_statement` is what
``EventStore.create_game`` composes with the games table's inserts. docs/DESIGN.md ("One statement per
command") says where each guarantee lives.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from service.store.canonical import json_text
from service.store.errors import CommandReused, GameNotFound, LedgerMismatch, StoreError, VersionConflict
from service.store.failover import NO_SYNC_STANDBY, SyncStandby
from service.store.global_order import Connection, GlobalReader
from service.store.group_commit import DEFAULT_MAX_BATCH, GroupCommit, Pending
from service.store.interface import StreamStore, Wakeups
from service.store.model import (
    GENESIS_HASH,
    HASH_VERSION,
    START,
    AppendResult,
    Batch,
    Carried,
    CommandRow,
    Cursor,
    LedgerRow,
    NewEvent,
    StoredEvent,
    agreed,
    check_append,
)

NOTIFY_CHANNEL = "uno_events"
"""The channel every append notifies, with the game id as payload."""

#: The columns of a :class:`StoredEvent`, in its field order, over ``events e``.
EVENT_COLUMNS = (
    "e.position, e.game_id, e.version, e.type, e.payload, e.metadata, e.recorded_at, e.xid::text::bigint, "
    "e.prev_hash, e.hash, e.hash_version"
)


def write_statement(game_source: str) -> str:
    """The CTEs that write one command: ledger row, events, notification, and the final SELECT.

    ``game_source`` is a FROM item named ``source`` with a ``game_id`` column (``(VALUES …)`` for an append,
    the CTE of a new game's row). The events are written only if the ledger row is new (they join with
    its RETURNING), so a recorded command id writes nothing and the statement returns no row; so does a
    command id that events carry while the ledger has no row for it (:class:`LedgerMismatch`). The events come
    as one jsonb array (one prepared statement for any number of events) and are inserted in version order, so
    the insert trigger sees each one's predecessor. The final SELECT joins ``notified`` so that the
    notification is sent exactly when events were written.
    """
    return f"""
command AS (
    INSERT INTO commands (game_id, command_id, request_sha256, first_version, last_version, recorded_at)
    SELECT source.game_id, %(command_id)s, %(request_hash)s, %(first_version)s, %(last_version)s,
           %(recorded_at)s
      FROM {game_source}
     WHERE NOT EXISTS (
         SELECT FROM events e WHERE e.game_id = source.game_id AND e.metadata->>'command_id' = %(command_id)s
     )
    ON CONFLICT (game_id, command_id) DO NOTHING
    RETURNING game_id
), appended AS (
    INSERT INTO events (game_id, version, type, payload, metadata, recorded_at, prev_hash, hash, hash_version)
    SELECT command.game_id, %(first_version)s::int + e.i::int - 1, e.item->>'type', e.item->'payload',
           %(metadata)s, %(recorded_at)s, decode(e.item->>'prev_hash', 'hex'), decode(e.item->>'hash', 'hex'),
           %(hash_version)s
      FROM command, jsonb_array_elements(%(events)s) WITH ORDINALITY AS e(item, i)
     ORDER BY e.i
    RETURNING version, position, xid
), notified AS (
    SELECT pg_notify('{NOTIFY_CHANNEL}', game_id) FROM command
)
SELECT a.position, a.xid::text::bigint FROM appended a, notified ORDER BY a.version
"""


_APPEND = "WITH " + write_statement("(VALUES (%(game_id)s)) AS source (game_id)")
#: A command id's ledger row (if any), the hash of its last version, and what the events that carry the id
#: say (:class:`~service.store.model.Carried`): one row, whether or not either knows the id.
_COMMAND = """
SELECT c.request_sha256, c.first_version, c.last_version, h.hash,
       x.count, x.first, x.last, x.requests
  FROM (SELECT count(*) AS count, min(e.version) AS first, max(e.version) AS last,
               coalesce(array_agg(DISTINCT coalesce(e.metadata->>'request_sha256', '')), '{}') AS requests
          FROM events e
         WHERE e.game_id = %(game)s AND e.metadata->>'command_id' = %(id)s) x
  LEFT JOIN commands c ON c.game_id = %(game)s AND c.command_id = %(id)s
  LEFT JOIN events h ON h.game_id = c.game_id AND h.version = c.last_version
"""
_LEDGER = (
    "SELECT command_id, request_sha256, first_version, last_version, recorded_at FROM commands "
    "WHERE game_id = %s ORDER BY first_version, command_id"
)
_STORED_HASH = "SELECT hash FROM events WHERE game_id = %s AND version = %s"
#: A transaction that writes WAL (an empty logical-decoding message, which needs no privilege and changes no
#: table), so that its commit waits for the synchronous standby; one that only took an id would not.
_CONFIRM_DURABLE = "SELECT pg_logical_emit_message(true, 'uno-audit.durable', '')"
_STREAM_VERSION = "SELECT coalesce(max(version), 0) FROM events WHERE game_id = %s"
_READ_STREAM = (
    f"SELECT {EVENT_COLUMNS} FROM events e WHERE e.game_id = %s AND e.version > %s "
    "ORDER BY e.version LIMIT %s"
)
# What a failed write can have run into, besides a recorded command id: a version taken meanwhile, a
# hole before it, a younger predecessor, or a game that does not exist (migrations/ name them all).
_SETTLED_CONSTRAINTS = frozenset(
    {"events_stream_version", "events_contiguous", "events_xid_order", "events_game"}
)

_READER = GlobalReader(EVENT_COLUMNS)


class PostgresStreams(StreamStore):
    """The stream store over a pool of connections to one database; see the module docstring.

    :class:`~service.store.EventStore` is one (it opens the pool and adds the games table).
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
        """``group_commit``: appends waiting at the same time go together in one statement
        (:mod:`service.store.group_commit`, at most ``max_batch`` at once); without it, each append is
        one statement of its own. ``sync``: whether each write, and each answer built from an earlier
        one, waits for its proof on a synchronous standby (:class:`~service.store.failover.SyncStandby`)."""
        self._dsn = dsn
        self._pool = pool
        self._sync = sync
        self._group = (
            GroupCommit(
                pool,
                channel=NOTIFY_CHANNEL,
                alone=self._append_alone,
                confirm=sync.confirm,
                max_batch=max_batch,
            )
            if group_commit
            else None
        )

    async def _append_alone(self, conn: Connection, batch: Batch) -> AppendResult:
        return await _append_alone(conn, batch, self._sync)

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

        With group commit that transaction may carry other games' commands that waited at the same time
        (:mod:`service.store.group_commit`); this command's outcome is its own all the same.

        ``prev_hash`` is the hash of version ``expected_version`` when the caller has it cached (the
        command handler does, with its cached state); ``None`` makes the store read it, one round trip
        more (``GENESIS_HASH`` before version 1). A wrong ``prev_hash`` is refused by the database, never
        stored.

        Outcomes (see :class:`~service.store.StreamStore`): the first result of a recorded command id
        (checked before any conflict, so a retry after a lost reply is recognised even though the stream
        has moved on), :class:`CommandReused`, :class:`VersionConflict` (rarely with ``actual`` equal to
        the expected version, when the previous event's writer had not committed yet or committed from an
        older transaction: reload and retry all the same), :class:`GameNotFound`.

        ``metadata`` is stored with every event, plus ``command_id`` and ``request_sha256`` (hex), and
        hashed with it and the batch's time (row hash version 2, :class:`~service.store.model.Batch`).
        """
        check_append(expected_version, events)
        if prev_hash is None:
            async with self._pool.connection() as conn:
                prev_hash = await _stored_hash(conn, game_id, expected_version)
                if prev_hash is None:
                    return await _settle_failed_append(
                        conn, command_id, game_id, expected_version, request_hash, self._sync
                    )
        batch = Batch(game_id, expected_version, prev_hash, events, metadata, command_id, request_hash)
        if self._group is not None:
            outcome = await self._group.submit(Pending(batch))
            if isinstance(outcome, AppendResult):
                return outcome
            if isinstance(outcome, BaseException):
                raise outcome
            # ALONE: the group could not settle this command; the single statement will.
        async with self._pool.connection() as conn:
            return await _append_alone(conn, batch, self._sync)

    def group_commit_stats(self) -> dict[str, int]:
        """Groups sent and the commands they carried since the store opened (both 0 without group
        commit): the mean group size is their ratio."""
        if self._group is None:
            return {"groups": 0, "commands": 0}
        return {"groups": self._group.groups, "commands": self._group.commands}

    async def _drain(self) -> None:
        """Let queued appends finish (before the pool closes)."""
        if self._group is not None:
            await self._group.drain()

    async def read_stream(
        self, game_id: str, after_version: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        """The game's events with versions above ``after_version``, in version order, at most ``limit``.

        Versions are contiguous from 1 (the database refuses holes), so a caller holding state at version
        *v* reads exactly what it is missing with ``after_version=v``.
        """
        async with self._pool.connection() as conn:
            cursor = await conn.execute(_READ_STREAM, (game_id, after_version, limit), prepare=True)
            return [stored_event(row) for row in await cursor.fetchall()]

    async def stream_version(self, game_id: str) -> int:
        """The game's last version: 0 for a game without events (or an unknown one)."""
        async with self._pool.connection() as conn:
            return await _stream_version(conn, game_id)

    async def read_all(self, after: Cursor = START, limit: int = 1000) -> list[StoredEvent]:
        """The next events of the global log after the cursor ``after``, in the gap-free order
        (:mod:`service.store.global_order` says why it never skips an event).

        Returns at most ``limit`` events; an empty list means "caught up for now" (wait for
        :meth:`listen`, then ask again). Continue from :func:`~service.store.cursor_of` of the last one.
        """
        async with self._pool.connection() as conn:
            return [stored_event(row) for row in await _READER.page(conn, after, limit)]

    async def command(self, game_id: str, command_id: str) -> CommandRow | None:
        """``(request_hash, first_version, last_version)`` of a command recorded for the game, or ``None``;
        :class:`LedgerMismatch` when the ledger and the events that carry the id disagree."""
        async with self._pool.connection() as conn:
            found = await _command(conn, game_id, command_id)
            if found is None:
                return None
            await confirm_durable(conn, self._sync)  # the caller answers a retry with it
            return found[0]

    async def ledger(self, game_id: str) -> list[LedgerRow]:
        """The game's whole command ledger, in version order (the verifier checks it against the events)."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(_LEDGER, (game_id,), prepare=True)
            return [
                LedgerRow(command_id, bytes(request), first, last, recorded_at)
                for command_id, request, first, last, recorded_at in await cursor.fetchall()
            ]

    def listen(self) -> Listener:
        """The ids of games as they are appended to, from ``LISTEN uno_events``.

        Uses a dedicated autocommit connection (a pooled one would be handed to other tasks). Prefer
        ``async with store.listen() as wakeups:``: entering starts listening *before* the caller catches
        up with :meth:`read_all`, so no append between the catch-up and the first wait goes unnoticed.
        Plain ``async for`` works too (listening starts at the first step). See :class:`Listener`.
        """
        return Listener(self._dsn)

    async def read_stream_text(self, game_id: str) -> list[tuple[Any, ...]]:
        """The game's whole stream as rows of :data:`EVENT_COLUMNS`, but with ``payload`` and ``metadata`` as
        their JSON text: for a reader that parses each payload once, its own way, for more than one use (the
        verifier: the value and the hash chain's bytes, :func:`service.store.canonical.load_canonical`). In
        binary format: the hashes and times arrive without text to parse."""
        columns = EVENT_COLUMNS.replace("e.payload, e.metadata", "e.payload::text, e.metadata::text")
        query = f"SELECT {columns} FROM events e WHERE e.game_id = %s ORDER BY e.version"
        async with self._pool.connection() as conn:
            cursor = await conn.execute(query, (game_id,), prepare=True, binary=True)
            return await cursor.fetchall()


class Listener(Wakeups):
    """An async iterator of game ids, one per committed append, from ``LISTEN uno_events``.

    Notifications are wake-up calls, not the data: PostgreSQL folds identical notifications of one
    transaction into one and drops them for a listener that was not connected, so a consumer reads
    the events themselves with ``read_all`` or ``read_stream``.

    The connection is closed by :meth:`aclose` or on leaving ``async with``. A wait cancelled by a
    timeout (``asyncio.wait_for``) leaves the listener usable. A lost connection raises psycopg's
    ``OperationalError`` from the iteration.
    """

    def __init__(self, dsn: str) -> None:
        """Use :meth:`PostgresStreams.listen`."""
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


# --- helpers, shared with the unit of work that creates a game ----------------------------------------


def write_params(batch: Batch) -> dict[str, Any]:
    """The parameters of :func:`write_statement` for ``batch``."""
    return {
        "command_id": batch.command_id,
        "game_id": batch.game_id,
        "request_hash": batch.request_hash,
        "first_version": batch.first_version,
        "last_version": batch.last_version,
        "metadata": Jsonb(batch.metadata, dumps=json_text),
        "recorded_at": batch.recorded_at,
        "hash_version": HASH_VERSION,
        # One jsonb parameter for all the events: adapting it costs a fraction of five arrays.
        "events": Jsonb(
            [
                {"type": event.type, "payload": event.payload, "prev_hash": prev.hex(), "hash": digest.hex()}
                for event, prev, digest in zip(batch.events, batch.prev_hashes, batch.hashes, strict=True)
            ],
            dumps=json_text,
        ),
    }


async def maybe_earlier_result(
    conn: Connection, command_id: str, game_id: str, request_hash: bytes, sync: SyncStandby
) -> AppendResult | None:
    """The first result of ``command_id`` if the game recorded it for the same request, else ``None``.

    Raises :class:`CommandReused` if the game recorded it for another request, and
    :class:`LedgerMismatch` if the ledger and the events disagree about it.
    """
    found = await _command(conn, game_id, command_id)
    if found is None:
        return None
    (stored_request, first_version, last_version), last_hash = found
    if stored_request != request_hash:
        raise CommandReused(command_id, "for another request")
    await confirm_durable(conn, sync)
    return AppendResult(first_version, last_version, last_hash, duplicate=True)


async def confirm_durable(conn: Connection, sync: SyncStandby) -> None:
    """Return once what this connection's server has committed so far is on the synchronous standby.

    Before a command is answered from what an earlier run wrote: that run may have committed here while its
    client was cut off waiting for the standby, visible on this node and maybe not on the standby. A commit
    of our own waits for the standby to have the WAL up to it, past the first run's commit (and ``sync``
    proves it, where PostgreSQL's own wait may have been skipped).
    """
    await conn.execute(_CONFIRM_DURABLE, prepare=True)
    await sync.confirm(conn)


async def earlier_result(
    conn: Connection, command_id: str, game_id: str, request_hash: bytes, sync: SyncStandby
) -> AppendResult:
    """:func:`maybe_earlier_result` of a command id that wrote nothing just now: recorded before, or (with
    neither a ledger row nor events) gone since, which only an edit of the ledger does."""
    result = await maybe_earlier_result(conn, command_id, game_id, request_hash, sync)
    if result is None:
        raise LedgerMismatch(game_id, command_id, "its ledger row was there a moment ago and is gone")
    return result


async def _command(conn: Connection, game_id: str, command_id: str) -> tuple[CommandRow, bytes] | None:
    """The command's ledger row, agreed with its events (:func:`~service.store.model.agreed`), and the hash
    of its last version; ``None`` for a command neither knows."""
    cursor = await conn.execute(_COMMAND, {"game": game_id, "id": command_id}, prepare=True)
    row = await cursor.fetchone()
    assert row is not None  # an aggregate: always one row
    request, first, last, last_hash, count, carried_first, carried_last, requests = row
    ledger = None if request is None else (bytes(request), first, last)
    carried = Carried(count, carried_first, carried_last, frozenset(requests))
    settled = agreed(game_id, command_id, ledger, carried)
    if settled is None:
        return None
    return settled, b"" if last_hash is None else bytes(last_hash)


def stored_event(row: tuple[Any, ...]) -> StoredEvent:
    """A row of :data:`EVENT_COLUMNS` as a :class:`StoredEvent`."""
    position, game_id, version, kind, payload, metadata, recorded_at, xid = row[:8]
    prev_hash, digest, hash_version = row[8:]
    return StoredEvent(
        position,
        game_id,
        version,
        kind,
        payload,
        metadata,
        recorded_at,
        xid,
        bytes(prev_hash),
        bytes(digest),
        hash_version,
    )


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


async def _append_alone(conn: Connection, batch: Batch, sync: SyncStandby) -> AppendResult:
    """Write one command with :data:`_APPEND`, its own transaction, and settle a refusal: the path of
    every append without group commit, and of a command its group could not settle. A written command is
    answered once ``sync`` has its proof."""
    game_id, command_id, request_hash = batch.game_id, batch.command_id, batch.request_hash
    expected_version = batch.first_version - 1
    try:
        # Autocommit: the single statement is its own transaction, one round trip in all.
        cursor = await conn.execute(_APPEND, write_params(batch), prepare=True)
        returned = await cursor.fetchall()
    except (
        pg_errors.UniqueViolation,
        pg_errors.ForeignKeyViolation,
        pg_errors.CheckViolation,
    ) as error:
        constraint = error.diag.constraint_name
        if constraint == "events_hash_chain":
            earlier = await maybe_earlier_result(conn, command_id, game_id, request_hash, sync)
            if earlier is not None:
                return earlier
            # At the expected version but another hash: the stream was rewound (a restore, a failover that
            # lost a suffix) and written again since the caller read it. A conflict: the caller reloads.
            actual = await _stream_version(conn, game_id)
            raise VersionConflict(game_id, expected_version, actual) from None
        if constraint in _SETTLED_CONSTRAINTS:
            return await _settle_failed_append(
                conn, command_id, game_id, expected_version, request_hash, sync
            )
        raise
    if not returned:  # the command id was recorded before: nothing was written now
        return await earlier_result(conn, command_id, game_id, request_hash, sync)
    await sync.confirm(conn)
    return batch.result(returned)


async def _settle_failed_append(
    conn: Connection,
    command_id: str,
    game_id: str,
    expected_version: int,
    request_hash: bytes,
    sync: SyncStandby,
) -> AppendResult:
    """Explain an append that could not be written: an earlier run of the command, or which error."""
    earlier = await maybe_earlier_result(conn, command_id, game_id, request_hash, sync)
    if earlier is not None:
        return earlier
    actual = await _stream_version(conn, game_id)
    if actual == 0:  # every stream starts with its game's first events: no events, no game
        raise GameNotFound(game_id)
    raise VersionConflict(game_id, expected_version, actual)
