"""Group commit: appends that wait at the same time go to PostgreSQL together, in one statement.

:class:`GroupCommit`: a command that arrives when nothing is in flight is written at once, alone; one that
arrives while a write is in flight is queued, and one flusher per store sends what is queued (at most
``max_batch`` commands, one per game) as :data:`BATCH_APPEND`. Each command keeps its own version check,
ledger and outcome; a group the database refuses is sent again one command at a time. docs/DESIGN.md
("Group commit") gives the reasoning and each command's semantics inside a group.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from service.store.canonical import json_text
from service.store.errors import GameNotFound, StoreError, VersionConflict
from service.store.failover import spoils_connection
from service.store.global_order import Connection
from service.store.model import HASH_VERSION, AppendResult, Batch, utc_text

#: The most commands in one group: enough to carry 64 games' commands at once, small enough that one
#: statement stays short (a group is one transaction, and the gap-free reader waits for it).
DEFAULT_MAX_BATCH = 64

#: One statement for a group of commands, each of another game, notifying ``{channel}``. Each lookup is a
#: LATERAL probe with LIMIT 1, never an EXISTS: the planner takes ``jsonb_to_recordset`` for 100 rows, and
#: for 100 EXISTS it chose hashing all of ``commands`` and ``events`` (a scan of both tables per group,
#: appends slowing as the log grew: 964 → 254 per second over the first 40,000 events). ``%(batch)s`` is a
#: jsonb array with one object per command (see :func:`batch_item`). One row comes back per command, in the
#: order given: what it wrote (``positions``, ``xids``, none if nothing) and, for one that
#: wrote nothing, why — its id recorded before (``seen``: in the ledger or on events) or its game's head
#: (version, and whether its hash is the given one).
BATCH_APPEND: Final = """
WITH batch AS MATERIALIZED (
    SELECT b.i, b.game_id, b.command_id, decode(b.request, 'hex') AS request, b.expected,
           decode(b.prev, 'hex') AS prev, b.metadata, b.recorded_at, b.events
      FROM jsonb_to_recordset(%(batch)s) AS b(
               i int, game_id text, command_id text, request text, expected int, prev text,
               metadata jsonb, recorded_at timestamptz, events jsonb)
), checked AS MATERIALIZED (
    SELECT b.*, ledger.found IS NOT NULL OR carried.found IS NOT NULL AS seen,
           head.version AS head_version, head.hash = b.prev AS linked
      FROM batch b
      LEFT JOIN LATERAL (
          SELECT 1 AS found FROM commands c
           WHERE c.game_id = b.game_id AND c.command_id = b.command_id LIMIT 1
      ) ledger ON true
      LEFT JOIN LATERAL (
          SELECT 1 AS found FROM events e
           WHERE e.game_id = b.game_id AND e.metadata->>'command_id' = b.command_id LIMIT 1
      ) carried ON true
      LEFT JOIN LATERAL (
          SELECT e.version, e.hash FROM events e WHERE e.game_id = b.game_id ORDER BY e.version DESC LIMIT 1
      ) head ON true
), command AS (
    INSERT INTO commands (game_id, command_id, request_sha256, first_version, last_version, recorded_at)
    SELECT k.game_id, k.command_id, k.request, k.expected + 1, k.expected + jsonb_array_length(k.events),
           k.recorded_at
      FROM checked k
     WHERE NOT k.seen AND k.head_version = k.expected AND k.linked
     ORDER BY k.i
    ON CONFLICT (game_id, command_id) DO NOTHING
    RETURNING game_id, command_id
), appended AS (
    INSERT INTO events (game_id, version, type, payload, metadata, recorded_at, prev_hash, hash, hash_version)
    SELECT k.game_id, k.expected + e.i::int, e.item->>'type', e.item->'payload', k.metadata, k.recorded_at,
           decode(e.item->>'prev_hash', 'hex'), decode(e.item->>'hash', 'hex'), %(hash_version)s
      FROM command
      JOIN checked k ON k.game_id = command.game_id AND k.command_id = command.command_id,
           jsonb_array_elements(k.events) WITH ORDINALITY AS e(item, i)
     ORDER BY k.i, e.i
    RETURNING game_id, version, position, xid
), notified AS MATERIALIZED (
    SELECT pg_notify('{channel}', game_id) FROM command
), written AS (
    SELECT a.game_id, array_agg(a.position ORDER BY a.version) AS positions,
           array_agg(a.xid::text::bigint ORDER BY a.version) AS xids
      FROM appended a
     GROUP BY a.game_id
)
SELECT k.i, w.positions, w.xids, k.seen, k.head_version, k.linked
  FROM checked k
  LEFT JOIN written w ON w.game_id = k.game_id
 CROSS JOIN (SELECT count(*) FROM notified) n
 ORDER BY k.i
"""


#: How long this task's last append waited in the queue for the write ahead of it (0 when it went at once).
_waited: ContextVar[float] = ContextVar("uno_audit_group_wait", default=0.0)


def last_group_wait() -> float:
    """The seconds the calling task's last append waited for its group to be sent (0.0 for one written
    at once, alone, and for a store without group commit): the wait a command's latency owes the group."""
    return _waited.get()


class Alone:
    """The outcome "send this command again by itself": its group was refused as a whole, or it wrote
    nothing for a reason the group's snapshot did not show (a race with another transaction)."""


ALONE: Final = Alone()

Settlement = AppendResult | BaseException | Alone


def _new_future() -> asyncio.Future[Settlement]:
    return asyncio.get_running_loop().create_future()


@dataclass(slots=True)
class Pending:
    """A command waiting in the queue: its events, chained and hashed, and where its outcome goes."""

    batch: Batch
    future: asyncio.Future[Settlement] = field(default_factory=_new_future)
    queued: float = field(default_factory=time.perf_counter)
    #: When its group went to the database (a ``perf_counter`` reading; ``queued`` until then).
    sent: float = 0.0

    def settle(self, outcome: Settlement) -> None:
        """Hand ``outcome`` to the waiting caller (unless it stopped waiting: cancelled)."""
        if not self.future.done():
            self.future.set_result(outcome)


def batch_item(index: int, pending: Pending) -> dict[str, Any]:
    """One command of :data:`BATCH_APPEND`'s jsonb array."""
    batch = pending.batch
    return {
        "i": index,
        "game_id": batch.game_id,
        "command_id": batch.command_id,
        "request": batch.request_hash.hex(),
        "expected": batch.first_version - 1,
        "prev": batch.prev_hashes[0].hex(),
        "metadata": batch.metadata,
        "recorded_at": utc_text(batch.recorded_at),
        "events": [
            {"type": event.type, "payload": event.payload, "prev_hash": prev.hex(), "hash": digest.hex()}
            for event, prev, digest in zip(batch.events, batch.prev_hashes, batch.hashes, strict=True)
        ],
    }


def outcome_of(pending: Pending, row: Sequence[Any]) -> Settlement:
    """What one command's row of :data:`BATCH_APPEND` means, in the order a single append decides it:
    written; else an earlier run of the command id (settled alone); else the game's head says why not."""
    batch = pending.batch
    _, positions, xids, seen, head_version, linked = row
    if positions is not None:
        written: list[tuple[int, int]] = list(zip(positions, xids, strict=True))
        return batch.result(written)
    if seen:  # a retry (rare): the single statement checks its ledger row against its events
        return ALONE
    expected = batch.first_version - 1
    if head_version is None:  # every stream starts with its game's first events: no events, no game
        return GameNotFound(batch.game_id)
    if head_version != expected or not linked:  # not linked: rewound and written again since (see streams)
        return VersionConflict(batch.game_id, expected, head_version)
    return ALONE  # it passed every check but its ledger row was taken meanwhile: settle it alone


class GroupCommit:
    """The queue of one store's appends and the flusher that sends them in groups; see the module."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Connection],
        *,
        channel: str,
        alone: Callable[[Connection, Batch], Awaitable[AppendResult]],
        confirm: Callable[[Connection], Awaitable[None]],
        max_batch: int = DEFAULT_MAX_BATCH,
    ) -> None:
        """Groups go through ``pool`` and notify ``channel``; a group of one is written by ``alone`` (the
        single-command append). Both come from :mod:`service.store.streams`, which imports this module.
        ``confirm(conn)`` runs after a group's commit, on its connection, before anyone is answered: it
        raises when the commit must not be acknowledged yet (:class:`~service.store.failover.SyncStandby`)."""
        if max_batch < 1:
            raise ValueError(f"max_batch must be positive, not {max_batch}")
        self._pool = pool
        self._alone = alone
        self._confirm = confirm
        self._statement = BATCH_APPEND.format(channel=channel)
        self._max_batch = max_batch
        self._queue: deque[Pending] = deque()
        self._flusher: asyncio.Task[None] | None = None
        #: A command or a group is in flight: a new command queues.
        self._busy = False
        #: Groups sent and commands they carried (a group refused as a whole counts too): the mean
        #: group size is ``commands / groups``.
        self.groups = 0
        self.commands = 0

    async def submit(self, pending: Pending) -> Settlement:
        """Write ``pending`` now if nothing is in flight, else queue it for the next group; its outcome.

        The first case is the lone command's: the caller writes it itself, at once, with the
        single-command statement (no task, no queue), and commands that arrive meanwhile queue behind
        it; when it is done, a flusher task takes them.
        """
        if self._busy:
            self._queue.append(pending)
            try:
                return await pending.future
            finally:
                _waited.set(max(0.0, pending.sent - pending.queued))
        _waited.set(0.0)
        self._busy = True
        try:
            self.groups += 1
            self.commands += 1
            async with self._pool.connection() as conn:
                return await self._alone(conn, pending.batch)
        finally:
            if self._queue:
                self._flusher = asyncio.create_task(self._flush(), name="uno-audit-group-commit")
            else:
                self._busy = False

    async def drain(self) -> None:
        """Wait until the queue is empty and no group is in flight (before the pool closes)."""
        while self._flusher is not None and not self._flusher.done():
            await asyncio.wait({self._flusher})  # its commands' callers get its outcomes, not this

    def _take(self) -> list[Pending]:
        """The next group: queued commands in order, at most one per game and ``max_batch`` in all;
        the rest stay queued in their order. Commands whose caller stopped waiting are dropped."""
        group: list[Pending] = []
        games: set[str] = set()
        later: deque[Pending] = deque()
        while self._queue and len(group) < self._max_batch:
            pending = self._queue.popleft()
            if pending.future.done():
                continue
            if pending.batch.game_id in games:
                later.append(pending)
            else:
                games.add(pending.batch.game_id)
                group.append(pending)
        later.extend(self._queue)
        self._queue = later
        return group

    async def _flush(self) -> None:
        """Send groups until nothing is queued (commands queue while one is in flight)."""
        try:
            while self._queue:
                group = self._take()
                if len(group) == 1:
                    await self._send_alone(group[0])
                elif group:
                    await self._send(group)
        finally:
            self._busy = False

    async def _send_alone(self, pending: Pending) -> None:
        """A queued command that found nothing else waiting: the single-command statement, which costs
        less than a group's (it checks nothing itself: the database's refusal can only concern this
        command), and its outcome settled as without group commit."""
        self.groups += 1
        self.commands += 1
        pending.sent = time.perf_counter()
        try:
            async with self._pool.connection() as conn:
                result = await self._alone(conn, pending.batch)
        except Exception as error:
            pending.settle(error)
            return
        except BaseException:
            pending.settle(StoreError("append interrupted"))
            raise
        pending.settle(result)

    async def _send(self, group: list[Pending]) -> None:
        """Send one group and hand each command its outcome; never raises (but when cancelled)."""
        self.groups += 1
        self.commands += len(group)
        sent = time.perf_counter()
        for pending in group:
            pending.sent = sent
        params = {
            "batch": Jsonb([batch_item(i, pending) for i, pending in enumerate(group)], dumps=json_text),
            "hash_version": HASH_VERSION,
        }
        used: Connection | None = None
        committed = False
        try:
            async with self._pool.connection() as conn:
                used = conn
                # Autocommit: the one statement is the group's transaction.
                cursor = await conn.execute(self._statement, params, prepare=True)
                rows = await cursor.fetchall()
                committed = True
                await self._confirm(conn)
        except Exception as error:
            if committed or (
                isinstance(error, psycopg.Error) and (used is None or used.broken or spoils_connection(error))
            ):
                # Committed but not proven on the standby, or no connection came, or it was lost, or its
                # server takes no writes now: the statement committed entirely or not at all, and the
                # callers cannot be told which. Each gets the error (a retry with the same command id finds
                # out, as after any lost reply); sending it again alone would meet the same server.
                for pending in group:
                    pending.settle(error)
                return
            # The database refused the group and rolled it back (a race the checks could not see, a
            # deadlock with another instance's group, a value it cannot store), or one command's values
            # could not be sent: nothing of the group was written; each command is sent again alone,
            # where it is settled as without group commit.
            for pending in group:
                pending.settle(ALONE)
            return
        except BaseException:
            for pending in group:
                pending.settle(StoreError("append interrupted"))
            raise
        if len(rows) != len(group):  # cannot happen: one row per command
            mismatch = StoreError(f"a group of {len(group)} commands returned {len(rows)} rows")
            for pending in group:
                pending.settle(mismatch)
            return
        for pending, row in zip(group, rows, strict=True):
            try:
                pending.settle(outcome_of(pending, row))
            except Exception as error:  # a row that cannot be read fails its own command only
                pending.settle(error)
