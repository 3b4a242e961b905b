"""The checkpointed projector: the log's gap-free order in, view rows and checkpoint out, exactly once.

One batch is one transaction: take the projection set's advisory lock, read the checkpoint, read events
after it (:data:`projections.source.READER`), fold them, write the rows, quarantine what cannot be folded,
move the checkpoint (guarded), commit. Several processes may project one set; :meth:`Projector.run`
follows live, and :meth:`Projector.lag` says how far behind it is. docs/DESIGN.md ("The projector's
batch") gives the steps and why a transaction-level advisory lock.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Any, Self

import psycopg
import structlog
from psycopg import pq

from projections.fold import Folder
from projections.migrate import apply_migrations
from projections.quarantine import Cause, Quarantined, describe, held_games, quarantine, record_failure
from projections.source import (
    READER,
    Connection,
    Decoder,
    EventRow,
    PrefixRow,
    ProjectionError,
    connect,
    last_cursor,
    read_prefixes,
)
from projections.views import VIEW_NAMES, GameFold, evolve, initial
from projections.writer import Hook, write_batch
from service.store import Cursor, Listener
from service.store.cursors import (
    CursorMoved,
    ensure_cursor,
    follower_lag,
    move_cursor,
    read_cursor,
)
from service.store.cursors import Lag as Lag

_log = structlog.get_logger(__name__)

DEFAULT_SET = "main"
"""The projection set of all six views, with one checkpoint."""

LOCK_CLASS = 0x756E6F50
"""First key of the projection sets' advisory locks ("unoP"); the second is ``hashtext(set name)``."""

_LOCK = "SELECT pg_advisory_xact_lock(%s, hashtext(%s))"

BATCH_INTERVAL = 0.05
"""Seconds from the start of one live catch-up to the next, at least. Without it a table's commands,
arriving one by one, cost a batch each (a transaction of six statements, and an empty one to find the
end): measured in ``serve``, 40 % of the CPU of a server following one game. With it, what arrives in
one interval goes as one batch, and the read models lag the log by at most this much more."""


async def read_lag(conn: Connection, projection_set: str = DEFAULT_SET) -> Lag:
    """The lag of ``projection_set`` (see :class:`~service.store.cursors.Lag`), for the health
    service: a few index lookups, safe to poll."""
    return await follower_lag(conn, projection_set)


async def lock_set(conn: Connection, projection_set: str) -> None:
    """Take the projection set's lock for the current transaction (waits for a running batch)."""
    await conn.execute(_LOCK, (LOCK_CLASS, projection_set))


async def fold_batch(
    conn: Connection, folder: Folder, decoder: Decoder, rows: Sequence[EventRow], held: dict[str, int]
) -> list[Quarantined]:
    """Stage ``rows`` in ``folder``, first re-folding (from the log, on ``conn``) every game whose view
    in memory is missing or not at the version just before its first event in the batch.

    ``held`` maps quarantined games to the version from which their events are skipped. A game whose
    events cannot be folded is quarantined: it stays staged up to the event before the one that failed,
    its later events are skipped, and it is added to ``held`` and returned. Catching any exception of
    the fold is deliberate: the fold is pure, so whatever it raises comes from that game's events.
    """
    found: list[Quarantined] = []

    def hold(game_id: str, version: int, cause: Cause, reason: str) -> None:
        held[game_id] = version
        found.append(Quarantined(game_id, version, cause, reason))

    first: dict[str, int] = {}
    for row in rows:
        game_id, version = row[2], row[3]
        if game_id not in first and version < held.get(game_id, version + 1):
            first[game_id] = version
    stale: dict[str, int] = {}
    for game_id, version in first.items():
        view = folder.view(game_id)
        if view is None and version == 1:
            continue
        if view is None or view.version != version - 1:
            stale[game_id] = version
    if stale:
        failed = seed_prefixes(folder, decoder, stale, await read_prefixes(conn, stale))
        for game_id, (cause, reason) in failed.items():
            hold(game_id, stale[game_id], cause, reason)
    apply = folder.apply
    for row in rows:
        game_id, version = row[2], row[3]
        stop = held.get(game_id)
        if stop is not None and version >= stop:
            continue
        try:
            event = decoder(row[4], row[5])
        except ProjectionError as error:
            hold(game_id, version, Cause.DECODE, f"version {version}: {error}")
            continue
        try:
            applied = apply(game_id, version, event, row[6])
        except Exception as error:
            hold(game_id, version, Cause.FOLD, f"version {version} ({row[4]}): {describe(error)}")
            continue
        if not applied:
            view = folder.view(game_id)
            missing = view.version + 1 if view is not None else 1
            hold(game_id, missing, Cause.STREAM, f"version {version} came where version {missing} was due")
    return found


async def project_batch(
    conn: Connection,
    folder: Folder,
    decoder: Decoder,
    rows: Sequence[EventRow],
    views: Sequence[str],
    held: dict[str, int],
    *,
    suffix: str = "",
    hook: Hook | None = None,
) -> tuple[int, list[Quarantined]]:
    """Fold ``rows`` (:func:`fold_batch`) and write the changes to the tables ``view + suffix`` in the
    caller's transaction; a game whose rows the database refuses is quarantined too, from its first
    version in the batch (none of its rows of the batch is written). Returns the rows written and the
    games quarantined (also added to ``held``)."""
    found = await fold_batch(conn, folder, decoder, rows, held)
    written, refused = await write_batch(conn, folder, views, suffix=suffix, hook=hook)
    for game_id, error in refused.items():
        version = folder.pending_from(game_id)
        held[game_id] = version
        found.append(Quarantined(game_id, version, Cause.WRITE, describe(error)))
        folder.drop(game_id)
    return written, found


def seed_prefixes(
    folder: Folder, decoder: Decoder, below: dict[str, int], rows: Iterable[PrefixRow]
) -> dict[str, tuple[Cause, str]]:
    """Seed ``folder`` with each game of ``below`` folded from ``rows`` (:func:`read_prefixes`); return
    the games that could not be folded so (not seeded), with why."""
    views: dict[str, GameFold] = {game_id: initial(game_id) for game_id in below}
    failed: dict[str, tuple[Cause, str]] = {}
    engine = folder.engine
    for game_id, version, kind, payload, tournament in rows:
        if game_id in failed:
            continue
        view = views[game_id]
        if view.version != version - 1:
            failed[game_id] = (Cause.STREAM, f"re-folding: version {version} came after {view.version}")
            continue
        try:
            event = decoder(kind, payload)
        except ProjectionError as error:
            failed[game_id] = (Cause.DECODE, f"re-folding version {version}: {error}")
            continue
        try:
            views[game_id] = evolve(view, event, version, tournament_id=tournament or "", engine=engine)
        except Exception as error:  # a pure fold: the game's events are the cause (see fold_batch)
            failed[game_id] = (Cause.FOLD, f"re-folding version {version} ({kind}): {describe(error)}")
    for game_id, view in views.items():
        if game_id in failed:
            continue
        if view.version != below[game_id] - 1:
            failed[game_id] = (
                Cause.STREAM,
                f"re-folding: found versions up to {view.version}, expected {below[game_id] - 1}",
            )
            continue
        folder.seed(view)
    return failed


class Projector:
    """Projects the log into the views of one projection set; see the module docstring.

    Open with :meth:`open` (or ``async with await Projector.open(url)``). :meth:`catch_up` applies
    batches until nothing is left below the horizon; :meth:`run` follows live until ``stop`` is set.
    ``hook`` is a test seam, awaited inside each batch's transaction with the stage reached (``locked``,
    ``read``, ``wrote <view>``, ``checkpointed``): raising or being cancelled there simulates a crash.
    """

    def __init__(
        self,
        dsn: str,
        *,
        projection_set: str = DEFAULT_SET,
        batch_size: int = 2000,
        cache_size: int = 20_000,
        hook: Hook | None = None,
    ) -> None:
        """Use :meth:`open`, which also connects and registers the set's checkpoint."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, not {batch_size}")
        self.dsn = dsn
        self.projection_set = projection_set
        self.batch_size = batch_size
        self.hook = hook
        self.views: tuple[str, ...] = VIEW_NAMES
        self.folder = Folder(self.views, cache_size=cache_size)
        self.decoder = Decoder()
        self.cursor = Cursor()
        self.applied = 0
        self._conn: Connection | None = None
        self._lag_conn: Connection | None = None
        self._lag_lock = asyncio.Lock()

    @classmethod
    async def open(cls, dsn: str, **options: Any) -> Projector:
        """A connected projector (the set's checkpoint row is created if missing)."""
        projector = cls(dsn, **options)
        conn = await projector._connection()
        await ensure_cursor(conn, projector.projection_set)
        projector.cursor = await read_cursor(conn, projector.projection_set)
        return projector

    async def close(self) -> None:
        """Close the connections. Idempotent."""
        for conn in (self._conn, self._lag_conn):
            if conn is not None:
                await conn.close()
        self._conn = self._lag_conn = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()

    async def _connection(self) -> Connection:
        """The projector's connection, replaced if a failure left it closed or inside a transaction."""
        conn = self._conn
        if conn is not None and (conn.closed or conn.info.transaction_status != pq.TransactionStatus.IDLE):
            with contextlib.suppress(Exception):
                await conn.close()
            conn = None
        if conn is None:
            conn = await connect(self.dsn)
            self._conn = conn
        return conn

    async def _stage(self, name: str) -> None:
        if self.hook is not None:
            await self.hook(name)

    async def step(self) -> int:
        """Apply one batch; return how many events it applied (0: nothing below the horizon)."""
        conn = await self._connection()
        folder = self.folder
        try:
            async with conn.transaction():
                await lock_set(conn, self.projection_set)
                after = await read_cursor(conn, self.projection_set)
                await self._stage("locked")
                rows = await READER.page(conn, after, self.batch_size)
                held = await held_games(conn, self.projection_set, {row[2] for row in rows})
                if not rows:
                    self.cursor = after
                    return 0
                await self._stage("read")
                _, found = await project_batch(
                    conn, folder, self.decoder, rows, self.views, held, hook=self.hook
                )
                await quarantine(conn, self.projection_set, found)
                new = last_cursor(rows)
                await move_cursor(conn, self.projection_set, after, new, len(rows))
                await self._stage("checkpointed")
        except BaseException:
            folder.abort()
            raise
        folder.commit()
        for game in found:
            _log.warning(
                "projector.quarantined",
                projection_set=self.projection_set,
                game_id=game.game_id,
                version=game.version,
                cause=game.cause.value,
            )
        self.cursor = new
        self.applied += len(rows)
        return len(rows)

    async def catch_up(self) -> int:
        """Apply batches until nothing is left below the horizon; return the events applied.

        A batch shorter than ``batch_size`` read everything below the horizon, so it is the last: a
        further, empty batch would cost a transaction per wake-up and find nothing the next wake-up
        would not."""
        total = 0
        while True:
            applied = await self.step()
            total += applied
            if applied < self.batch_size:
                return total

    async def lag(self) -> Lag:
        """The set's lag (see :class:`Lag`), on a connection of its own: safe to call from any task."""
        async with self._lag_lock:
            conn = self._lag_conn
            if conn is None or conn.closed:
                conn = self._lag_conn = await connect(self.dsn)
            return await read_lag(conn, self.projection_set)

    async def run(
        self,
        stop: asyncio.Event | None = None,
        *,
        poll_interval: float = 0.5,
        batch_interval: float = BATCH_INTERVAL,
    ) -> None:
        """Catch up, then follow the log live until ``stop`` is set.

        Wakes on ``NOTIFY uno_events`` or every ``poll_interval`` seconds, and starts at most one catch-up
        every ``batch_interval`` seconds (see :data:`BATCH_INTERVAL`). A failure (games are
        quarantined, so what is left is tied to no game: the database away, a bug) is logged, recorded
        in the checkpoint row (:func:`~projections.quarantine.record_failure`, for the health service;
        the next batch that commits clears it) and retried with a growing pause (up to 30 s); the
        in-memory views are dropped then, since the failed batch's outcome may be unknown.
        """
        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        pause = 0.5
        while not stop.is_set():
            try:
                async with Listener(self.dsn) as wakeups:
                    while not stop.is_set():
                        started = loop.time()
                        await self.catch_up()
                        pause = 0.5
                        await _wait_for_wakeup(wakeups, stop, poll_interval)
                        rest = started + batch_interval - loop.time()
                        if rest > 0:  # let the commands of the next moment gather into one batch
                            with contextlib.suppress(TimeoutError):
                                await asyncio.wait_for(stop.wait(), rest)
            except Exception as error:
                _log.error(
                    "projector.failed",
                    projection_set=self.projection_set,
                    error=str(error),
                    exc_info=not isinstance(error, psycopg.Error | OSError | CursorMoved),
                )
                self.folder.clear()
                with contextlib.suppress(psycopg.Error, OSError):
                    await record_failure(await self._connection(), self.projection_set, error)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), pause)
                pause = min(pause * 2, 30.0)


async def _wait_for_wakeup(wakeups: Listener, stop: asyncio.Event, timeout: float) -> None:
    """Return on a notification, on ``stop`` or after ``timeout`` seconds; a lost listener raises."""
    notified = asyncio.ensure_future(anext(wakeups))
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({notified, stopped}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (notified, stopped):
            task.cancel()
        results = await asyncio.gather(notified, stopped, return_exceptions=True)
    error = results[0]
    if isinstance(error, BaseException) and not isinstance(error, asyncio.CancelledError):
        raise error


async def run_projector(
    database_url: str,
    *,
    stop: asyncio.Event | None = None,
    batch_size: int = 2000,
    projection_set: str = DEFAULT_SET,
    poll_interval: float = 0.5,
    batch_interval: float = BATCH_INTERVAL,
) -> None:
    """Migrate (store and projections), then project ``database_url``'s log live until ``stop`` is set.

    What ``uno-audit project`` runs, and what ``serve`` can run beside the gRPC server.
    """
    await apply_migrations(database_url)
    projector = await Projector.open(database_url, projection_set=projection_set, batch_size=batch_size)
    try:
        _log.info("projector.started", projection_set=projection_set, cursor=str(projector.cursor))
        await projector.run(stop, poll_interval=poll_interval, batch_interval=batch_interval)
    finally:
        await projector.close()
