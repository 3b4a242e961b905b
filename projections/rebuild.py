"""Rebuilding views from zero into fresh tables, swapped in atomically while the live projector runs.

``rebuild(url, view)`` (``view=None``: all six) runs four phases: **prepare** (empty ``<view>__rebuild``
tables like the live ones), **bulk** (the log up to a fixed bound, streamed with one ``COPY`` and folded
in memory, by ``workers`` processes each taking a partition of the games), **catch-up** (batches without
any lock until less than a batch is left) and **swap** (under the set's advisory lock: fold up to the live
checkpoint, then drop each live table and rename its fresh one in its place). Games it cannot fold are
quarantined as the live projector does. Why it is built so: ``docs/DESIGN.md``, "Rebuilding views".
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import os
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from projections.fold import Folder
from projections.migrate import READ_MODEL_GRANTS, apply_migrations
from projections.projector import DEFAULT_SET, lock_set, project_batch, seed_prefixes
from projections.quarantine import (
    Cause,
    Quarantined,
    describe,
    quarantine,
    read_quarantine,
    replace_quarantine,
)
from projections.source import (
    MISSING,
    READ_PREFIXES,
    READER,
    Connection,
    Decoder,
    EventRow,
    ProjectionError,
    connect,
    copy_out,
    copy_unescape,
    last_cursor,
)
from projections.views import VIEW_NAMES
from projections.writer import Hook, write_batch_sync
from service.rules.events import Event
from service.store import Cursor
from service.store.cursors import applied_count, ensure_cursor, move_cursor, read_cursor
from service.store.global_order import last_readable

SUFFIX = "__rebuild"
"""The fresh tables' names: ``hands__rebuild`` and so on."""

REBUILD_LOCK_CLASS = 0x756E6F52
"""First key of the session-level advisory lock one rebuild of a set holds ("unoR")."""

MAX_WORKERS = 8
"""The most processes a rebuild's bulk phase uses by default."""

PHASES = ("prepare", "bulk", "catch-up", "swap")
"""A rebuild's phases in order (the module docstring), each named once to ``rebuild``'s ``on_phase``."""


class RebuildBusy(Exception):
    """Another rebuild of the same projection set is running."""


@dataclass(slots=True)
class RebuildReport:
    """What a rebuild did: the views, the events folded, where it ended and how long each phase took."""

    views: tuple[str, ...]
    events: int = 0
    rows: int = 0
    cursor: Cursor = field(default_factory=Cursor)
    moved_checkpoint: bool = False
    phases: dict[str, float] = field(default_factory=dict)
    quarantined: list[Quarantined] = field(default_factory=list)
    """The games the rebuilt views leave out, by game id (``docs/DESIGN.md``, "Rebuilding views")."""

    def to_json(self) -> dict[str, Any]:
        """What ``uno-audit rebuild`` prints."""
        return {
            "views": list(self.views),
            "events": self.events,
            "rows": self.rows,
            "cursor": {"xid": self.cursor.xid, "position": self.cursor.position},
            "moved_checkpoint": self.moved_checkpoint,
            "quarantined": [game.as_dict() for game in self.quarantined],
            "seconds": {phase: round(took, 3) for phase, took in self.phases.items()},
        }


class _Progress:
    """Where the fold of the fresh tables stands: cursor, events folded, rows written, games held."""

    def __init__(self, held: dict[str, Quarantined]) -> None:
        self.cursor = Cursor()
        self.events = 0
        self.rows = 0
        self.found: dict[str, Quarantined] = {}
        self.held: dict[str, Quarantined] = dict(held)

    def advance(self, rows: Sequence[EventRow]) -> None:
        self.cursor = last_cursor(rows)
        self.events += len(rows)

    def hold(self, games: Iterable[Quarantined]) -> None:
        """Leave ``games`` out from their versions on (a game held twice: from the earlier one)."""
        for game in games:
            known = self.held.get(game.game_id)
            if known is None or game.version < known.version:
                self.held[game.game_id] = self.found[game.game_id] = game

    def versions(self) -> dict[str, int]:
        """Each held game with the version from which its events are left out."""
        return {game_id: game.version for game_id, game in self.held.items()}


async def rebuild(
    database_url: str,
    view: str | None = None,
    *,
    projection_set: str = DEFAULT_SET,
    batch_size: int = 5000,
    flush_every: int = 200_000,
    workers: int | None = None,
    hook: Hook | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> RebuildReport:
    """Rebuild ``view`` (or every view) of ``projection_set`` from zero and swap it in; see the module.

    ``workers`` processes share the bulk phase, each folding the games of one partition (by a hash of
    the game id): games are independent, the aggregates are sums, so the partitions' writes add up to
    exactly what one process writes, on as many cores as there are. ``None`` means one per core, up
    to :data:`MAX_WORKERS`; ``1`` folds in this process. ``hook`` is a test seam awaited at
    ``bulk done`` and ``swap locked`` (inside the swap transaction). ``on_phase`` is called with the
    name of each of the :data:`PHASES` as it ends (``uno-audit rebuild`` draws its progress bar with it).
    """
    views, workers = _arguments(view, workers)
    report = RebuildReport(views)
    clock = _PhaseClock(report, on_phase)
    await apply_migrations(database_url)
    async with (
        await connect(database_url) as control,
        await connect(database_url) as writer,
    ):
        await _lock_rebuild(control, projection_set)
        await ensure_cursor(control, projection_set)
        await _prepare(control, views)
        clock.done("prepare")
        run = _Run(control, writer, projection_set, views, batch_size, hook)
        await run.bulk(database_url, flush_every, workers)
        clock.done("bulk")
        await run.catch_up()
        clock.done("catch-up")
        live = await run.swap(report)
        clock.done("swap")
        await run.report(report, live)
        await control.execute(
            "SELECT pg_advisory_unlock(%s, hashtext(%s))", (REBUILD_LOCK_CLASS, projection_set)
        )
    return report


def _arguments(view: str | None, workers: int | None) -> tuple[tuple[str, ...], int]:
    """The views ``view`` names (``None``: all) and the bulk phase's processes, checked."""
    if workers is None:
        workers = max(1, min(MAX_WORKERS, os.cpu_count() or 1))
    if workers < 1:
        raise ValueError(f"workers must be positive, not {workers}")
    views = VIEW_NAMES if view is None else (view,)
    if not set(views) <= set(VIEW_NAMES):
        raise ValueError(f"no such view: {view!r} (views: {', '.join(VIEW_NAMES)})")
    return views, workers


async def _lock_rebuild(control: Connection, projection_set: str) -> None:
    """Take the session-level lock one rebuild of ``projection_set`` holds; :class:`RebuildBusy` if taken."""
    cursor = await control.execute(
        "SELECT pg_try_advisory_lock(%s, hashtext(%s))", (REBUILD_LOCK_CLASS, projection_set)
    )
    row = await cursor.fetchone()
    if row is None or not row[0]:
        raise RebuildBusy(f"a rebuild of {projection_set!r} is already running")


class _PhaseClock:
    """Times the phases into ``report.phases`` and tells ``on_phase`` as each one ends."""

    def __init__(self, report: RebuildReport, on_phase: Callable[[str], None] | None) -> None:
        self.report = report
        self.on_phase = on_phase
        self.clock = time.perf_counter()

    def done(self, name: str) -> None:
        now = time.perf_counter()
        self.report.phases[name] = self.report.phases.get(name, 0.0) + now - self.clock
        self.clock = now
        if self.on_phase is not None:
            self.on_phase(name)


class _Run:
    """One rebuild under way, from the bulk phase on: its connections, its fold and where it stands."""

    def __init__(
        self,
        control: Connection,
        writer: Connection,
        projection_set: str,
        views: tuple[str, ...],
        batch_size: int,
        hook: Hook | None,
    ) -> None:
        self.control = control
        self.writer = writer
        self.projection_set = projection_set
        self.views = views
        self.full = set(views) == set(VIEW_NAMES)
        self.batch_size = batch_size
        self.hook = hook
        self.folder = Folder(views, cache_size=1_000_000)
        self.decoder = Decoder()
        self.progress = _Progress({})

    async def bulk(self, database_url: str, flush_every: int, workers: int) -> None:
        """The bulk phase: the log up to a fixed bound, folded and written by ``workers`` processes."""
        if not self.full:
            self.progress = _Progress(await read_quarantine(self.control, self.projection_set))
        # A fixed set, so that every worker reads the same log: everything up to the last event below the
        # horizon (a full rebuild) or up to the live checkpoint (some views).
        if self.full:
            bound = await last_readable(self.control)
        else:
            bound = await read_cursor(self.control, self.projection_set)
        if bound is not None and bound.position:
            held = self.progress.versions()
            if workers == 1:
                events, written, found = await asyncio.to_thread(
                    _bulk, database_url, self.views, bound, flush_every, held
                )
            else:
                events, written, found = await _bulk_in_processes(
                    database_url, self.views, bound, flush_every, workers, held
                )
            self.progress.cursor, self.progress.events, self.progress.rows = bound, events, written
            self.progress.hold(found)
        if self.hook is not None:
            await self.hook("bulk done")

    async def catch_up(self) -> None:
        """The catch-up phase: batches without the lock while a full batch keeps coming."""
        while True:
            upto = None if self.full else await read_cursor(self.control, self.projection_set)
            if upto is not None and upto <= self.progress.cursor:
                return
            async with self.writer.transaction():
                rows = await READER.page(self.writer, self.progress.cursor, self.batch_size, upto)
                if rows:
                    await self._apply(rows)
            if rows:
                self.folder.commit()
            if len(rows) < self.batch_size:
                return

    async def swap(self, report: RebuildReport) -> Cursor:
        """The swap phase, in one transaction under the set's lock; returns the live checkpoint it met."""
        progress = self.progress
        async with self.writer.transaction():
            await lock_set(self.writer, self.projection_set)
            if self.hook is not None:
                await self.hook("swap locked")
            live = await read_cursor(self.writer, self.projection_set)
            while progress.cursor < live:
                rows = await READER.page(self.writer, progress.cursor, self.batch_size, live)
                if not rows:
                    raise ProjectionError(f"the events up to the checkpoint {live} are not readable")
                await self._apply(rows)
            if self.full and live < progress.cursor:
                await move_cursor(
                    self.writer, self.projection_set, live, progress.cursor, progress.events, from_zero=True
                )
                report.moved_checkpoint = True
            if self.full:
                await replace_quarantine(self.writer, self.projection_set, progress.found.values())
            else:
                await quarantine(self.writer, self.projection_set, progress.found.values())
            await _swap(self.writer, self.views)
        return live

    async def report(self, report: RebuildReport, live: Cursor) -> None:
        """What the rebuild did, into ``report``: a full one from its own count, others from the set's."""
        progress = self.progress
        if self.full:
            report.events, report.cursor = progress.events, progress.cursor
        else:
            report.events, report.cursor = await applied_count(self.control, self.projection_set), live
        report.rows = progress.rows
        report.quarantined = sorted(progress.held.values(), key=lambda game: game.game_id)

    async def _apply(self, rows: Sequence[EventRow]) -> None:
        """Fold ``rows`` and write the changes to the fresh tables (in the caller's transaction)."""
        written, found = await project_batch(
            self.writer, self.folder, self.decoder, rows, self.views, self.progress.versions(), suffix=SUFFIX
        )
        self.progress.rows += written
        self.progress.hold(found)
        self.progress.advance(rows)


async def _prepare(conn: Connection, views: Sequence[str]) -> None:
    """Create empty fresh tables like the live ones, with the live ones' grants (the service reads them,
    its projector writes them), so that swapping them in changes no one's privileges."""
    cursor = await conn.execute(
        "SELECT array_agg(rolname::text) FROM pg_roles WHERE rolname = ANY(%s)",
        (list({role for role, _ in READ_MODEL_GRANTS}),),
    )
    row = await cursor.fetchone()
    roles = set(row[0] or ()) if row is not None else set()
    async with conn.transaction():
        for view in views:
            fresh = sql.Identifier(view + SUFFIX)
            await conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(fresh))
            await conn.execute(
                sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING ALL)").format(fresh, sql.Identifier(view))
            )
            for role, privilege in READ_MODEL_GRANTS:
                if role in roles:
                    grant = sql.SQL("GRANT {} ON {} TO {}")
                    await conn.execute(grant.format(sql.SQL(privilege), fresh, sql.Identifier(role)))


def _bulk(
    dsn: str,
    views: Sequence[str],
    bound: Cursor,
    flush_every: int,
    held: dict[str, int],
    partition: tuple[int, int] | None = None,
) -> tuple[int, int, list[Quarantined]]:
    """Stream the log up to ``bound`` (only the games of ``partition`` = (k, n), if given) with COPY,
    fold it and write the fresh tables every ``flush_every`` events; return (events, rows written,
    games quarantined). The events of ``held`` games from their given versions on are left out.

    Synchronous, on connections of its own: it runs in a worker thread or process, and reading the
    COPY through :func:`~projections.source.copy_out` costs about a microsecond less per row than
    psycopg's asyncio COPY iteration, a fifth of the whole per-event budget.
    """
    mine = None
    if partition is not None:
        mine = sql.SQL("(hashtext(e.game_id) & 2147483647) % {} = {}").format(partition[1], partition[0])
    statement = READER.copy_upto(bound, mine)
    with connect_sync(dsn) as reader, connect_sync(dsn) as writer:
        fold = _BulkFold(views, held, writer)
        try:
            count = _fold_copy(copy_out(reader, statement.as_bytes(reader)), fold, flush_every)
        except BaseException:
            reader.close()  # mid-COPY: nothing to roll back; closing ends the server's side too
            raise
        if fold.pending:
            fold.flush()
    return count, fold.rows, list(fold.found.values())


class _BulkFold:
    """One bulk read's fold: the folder, the games held out, and what was written to the fresh tables."""

    def __init__(
        self, views: Sequence[str], held: dict[str, int], writer: psycopg.Connection[tuple[Any, ...]]
    ) -> None:
        self.views = views
        self.writer = writer
        self.folder = Folder(views, cache_size=1_000_000)
        self.decoder = Decoder()
        self.held = dict(held)
        self.found: dict[str, Quarantined] = {}
        self.pending = 0
        self.rows = 0

    def hold(self, game_id: str, version: int, cause: Cause, reason: str) -> None:
        """Leave ``game_id`` out from ``version`` on (a game held twice: from the earlier version)."""
        if version < self.held.get(game_id, version + 1):
            self.held[game_id] = version
            self.found[game_id] = Quarantined(game_id, version, cause, reason)

    def flush(self) -> None:
        """Write the games folded since the last flush; a game whose rows the database refuses is held."""
        folder = self.folder
        written, refused = write_batch_sync(self.writer, folder, self.views, suffix=SUFFIX)
        self.rows += written
        for game_id, error in refused.items():
            self.hold(game_id, folder.pending_from(game_id), Cause.WRITE, describe(error))
            folder.drop(game_id)
        folder.commit()
        self.pending = 0

    def apply_again(self, game_id: str, version: int, event: Event | None, tournament: str | None) -> None:
        """Apply an event the folder refused: it follows a game that ended and left memory, so the game
        is seeded again from its stream below ``version`` first; held if it still does not follow."""
        below = {game_id: version}
        with self.writer.cursor() as prefixes:
            prefixes.execute(READ_PREFIXES, ([game_id], [version]))
            failed = seed_prefixes(self.folder, self.decoder, below, prefixes.fetchall())
        for cause, reason in failed.values():
            self.hold(game_id, version, cause, reason)
        if not failed and not self.folder.apply(game_id, version, event, tournament):
            self.hold(game_id, version, Cause.STREAM, f"version {version} does not follow its stream")


def _fold_copy(lines: Iterable[memoryview], fold: _BulkFold, flush_every: int) -> int:
    """Fold the COPY ``lines`` into ``fold``, flushing every ``flush_every`` events; return how many.

    The hot loop of a rebuild: it keeps out anything per event it can (the quarantine costs it one truth
    test while nothing is held, the rare paths are method calls).
    """
    apply = fold.folder.apply
    decoder = fold.decoder
    cache = decoder.cache
    held = fold.held
    names: dict[bytes, str] = {}
    count = 0
    for data in lines:
        # Fields in COPY's text format: backslash escapes (rare here; the payload is unescaped by the
        # decoder on a miss), "\\N" for NULL, and the line's newline after the last one.
        parts = bytes(data).split(b"\t")
        count += 1
        game_id = names.get(parts[2])
        if game_id is None:  # one str per game: hashed once, dictionary lookups compare identity
            game_id = names[parts[2]] = copy_unescape(parts[2]).decode()
        version = int(parts[3])
        if held and version >= held.get(game_id, version + 1):
            continue
        last_field = parts[6]
        tournament = None if last_field == b"\\N\n" else copy_unescape(last_field[:-1]).decode()
        try:
            event = cache.get((parts[4], parts[5]), MISSING)
            if event is MISSING:
                event = decoder(parts[4], parts[5])
            # Only a game touched again after it ended (and left memory) is not applied here.
            if not apply(game_id, version, event, tournament):
                fold.apply_again(game_id, version, event, tournament)
        except psycopg.Error:
            raise  # the re-fold's read: the database's trouble, not the game's
        except ProjectionError as error:
            fold.hold(game_id, version, Cause.DECODE, f"version {version}: {error}")
        except Exception as error:  # a pure fold: the game's events are the cause (fold_batch)
            fold.hold(game_id, version, Cause.FOLD, f"version {version}: {describe(error)}")
        fold.pending += 1
        if fold.pending >= flush_every:
            fold.flush()
    return count


def _bulk_process(
    dsn: str,
    views: Sequence[str],
    bound: Cursor,
    flush_every: int,
    held: dict[str, int],
    partition: tuple[int, int],
) -> tuple[int, int, list[Quarantined]]:
    """:func:`_bulk` as a worker process runs it: with the cyclic garbage collector off.

    The fold allocates a few tuples per event and frees them by reference counting (states, views
    and events hold no cycles), so the collector's frequent passes over the young objects find nothing
    and cost a tenth of the time. The process is the worker's own and ends with the bulk phase.
    """
    gc.disable()
    return _bulk(dsn, views, bound, flush_every, held, partition)


def connect_sync(dsn: str) -> psycopg.Connection[tuple[Any, ...]]:
    """A synchronous connection set up like :func:`projections.source.connect` (autocommit, JIT off)."""
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute("SET jit = off")
    return conn


async def _bulk_in_processes(
    dsn: str, views: Sequence[str], bound: Cursor, flush_every: int, workers: int, held: dict[str, int]
) -> tuple[int, int, list[Quarantined]]:
    """The bulk phase in ``workers`` processes (spawned: no state of this one is inherited)."""
    loop = asyncio.get_running_loop()
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        results = await asyncio.gather(
            *(
                loop.run_in_executor(
                    pool, _bulk_process, dsn, tuple(views), bound, flush_every, held, (k, workers)
                )
                for k in range(workers)
            )
        )
    return (
        sum(events for events, _, _ in results),
        sum(rows for _, rows, _ in results),
        [game for _, _, found in results for game in found],
    )


async def _swap(conn: Connection, views: Sequence[str]) -> None:
    """Replace each live table by its fresh one, index names included (in the caller's transaction)."""
    for view in views:
        fresh = view + SUFFIX
        await conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(view)))
        await conn.execute(
            sql.SQL("ALTER TABLE {} RENAME TO {}").format(sql.Identifier(fresh), sql.Identifier(view))
        )
        cursor = await conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = %s", (view,)
        )
        for (index,) in await cursor.fetchall():
            if index.startswith(fresh):
                await conn.execute(
                    sql.SQL("ALTER INDEX {} RENAME TO {}").format(
                        sql.Identifier(index), sql.Identifier(view + index[len(fresh) :])
                    )
                )
