"""Rebuilding views from zero into fresh tables, swapped in atomically while the live projector runs.

``rebuild(url, view)`` (``view=None``: all six) works in four phases:

1. **prepare** — ``<view>__rebuild`` tables are (re)created empty, ``LIKE <view> INCLUDING ALL`` (same
   columns, keys and indexes), readable by the service's role.
2. **bulk** — the log up to a fixed bound (the last event below the horizon, or the live checkpoint;
   see below) is streamed with one ``COPY (SELECT ... ORDER BY xid, position) TO STDOUT`` (no per-batch
   queries, no parsing of ``jsonb`` into dicts: each line is split and its payload looked up in the
   :class:`~projections.source.Decoder`), folded in memory by the same
   :class:`~projections.fold.Folder` and :func:`~projections.views.evolve` as the live projector, and
   written to the fresh tables every ``flush_every`` events (only the games touched since the last
   flush; finished games leave memory once written). With ``workers`` > 1 each of that many processes
   streams and folds the games of one partition (``hashtext(game_id)`` modulo ``workers``): games are
   independent and the aggregates are sums, so the partitions' writes add up to what one process
   writes, and the fold — the rebuild's bottleneck, Python at a few microseconds per event — runs on
   every core. The read takes no xid, so it holds back nobody's gap-free horizon however long it runs.
3. **catch-up** — batches after the bulk's end, still without any lock, until less than a batch is
   left.
4. **swap** — one transaction: take the projection set's advisory lock (the live projector finishes
   its current batch and then waits), read the live checkpoint, fold the last few events up to exactly
   it into the fresh tables, then ``DROP`` each live table and ``RENAME`` its fresh one (indexes too) in
   its place, and commit. Readers blocked on the old table during the swap continue on the new one.

**Games it cannot fold** are quarantined as the live projector quarantines them
(:mod:`projections.quarantine`): left out from the event that failed (or, for rows the database
refuses, from the first event since the last flush), while every other game is rebuilt; each bulk
worker reports its own, and the report lists them all. A rebuild of *all* views starts with an empty
quarantine — every game is folded again from its first event, which is how a quarantine is lifted — and
its swap replaces the set's quarantine with the games it met, in the same transaction as the tables and
the checkpoint. A rebuild of *some* views leaves out what the live quarantine leaves out (its tables
must match the other views') and adds the games it met itself.

**Coordination with the live projector.** A projection set has one checkpoint for all its views, so
the fresh tables must reach the swap at exactly the live checkpoint. A rebuild of *some* views
therefore never reads past the live checkpoint (its bulk read is bounded by the checkpoint at its
start, its catch-up by the current one) and leaves the checkpoint alone. A rebuild of *all* views
replaces everything the checkpoint describes, so it may go further: it folds up to the horizon, and if
the live checkpoint is behind at the swap, the swap moves the checkpoint to the rebuild's cursor in the
same transaction (otherwise it folds the difference first). The projector holds nothing that depends
on the tables' content: its cached game views are used only at the version just before the next event
(:mod:`projections.fold`), so after a swap that moved the checkpoint it simply re-folds the games it
touches. The lock is held only for the swap (milliseconds plus the last batch); two rebuilds of the same
set at once are refused (:class:`RebuildBusy`, a session-level advisory lock held for the whole
rebuild, released when its connection closes).
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
from service.store import Cursor
from service.store.cursors import applied_count, ensure_checkpoint, move_checkpoint, read_checkpoint
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
    """The games the rebuilt views leave out, by game id (see the module docstring)."""

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
    if workers is None:
        workers = max(1, min(MAX_WORKERS, os.cpu_count() or 1))
    if workers < 1:
        raise ValueError(f"workers must be positive, not {workers}")
    views = VIEW_NAMES if view is None else (view,)
    if not set(views) <= set(VIEW_NAMES):
        raise ValueError(f"no such view: {view!r} (views: {', '.join(VIEW_NAMES)})")
    full = set(views) == set(VIEW_NAMES)
    report = RebuildReport(views)
    clock = time.perf_counter()

    def phase(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        report.phases[name] = report.phases.get(name, 0.0) + now - clock
        clock = now
        if on_phase is not None:
            on_phase(name)

    await apply_migrations(database_url)
    async with (
        await connect(database_url) as control,
        await connect(database_url) as writer,
    ):
        cursor = await control.execute(
            "SELECT pg_try_advisory_lock(%s, hashtext(%s))", (REBUILD_LOCK_CLASS, projection_set)
        )
        row = await cursor.fetchone()
        if row is None or not row[0]:
            raise RebuildBusy(f"a rebuild of {projection_set!r} is already running")
        await ensure_checkpoint(control, projection_set)
        await _prepare(control, views)
        phase("prepare")

        folder = Folder(views, cache_size=1_000_000)
        decoder = Decoder()
        progress = _Progress({} if full else await read_quarantine(control, projection_set))
        # The bulk phase reads a fixed set: everything up to the last event below the horizon (a full
        # rebuild) or up to the live checkpoint (some views), so that every worker reads the same log.
        bound = await last_readable(control) if full else await read_checkpoint(control, projection_set)
        if bound is not None and bound.position:
            held = progress.versions()
            if workers == 1:
                events, written, found = await asyncio.to_thread(
                    _bulk, database_url, views, bound, flush_every, held
                )
            else:
                events, written, found = await _bulk_in_processes(
                    database_url, views, bound, flush_every, workers, held
                )
            progress.cursor, progress.events, progress.rows = bound, events, written
            progress.hold(found)
        if hook is not None:
            await hook("bulk done")
        phase("bulk")

        while True:  # catch up without the lock while a full batch keeps coming
            upto = None if full else await read_checkpoint(control, projection_set)
            if upto is not None and upto <= progress.cursor:
                break
            async with writer.transaction():
                rows = await READER.page(writer, progress.cursor, batch_size, upto)
                if rows:
                    await _apply(writer, folder, decoder, views, rows, progress)
            if rows:
                folder.commit()
            if len(rows) < batch_size:
                break
        phase("catch-up")

        async with writer.transaction():
            await lock_set(writer, projection_set)
            if hook is not None:
                await hook("swap locked")
            live = await read_checkpoint(writer, projection_set)
            while progress.cursor < live:
                rows = await READER.page(writer, progress.cursor, batch_size, live)
                if not rows:
                    raise ProjectionError(f"the events up to the checkpoint {live} are not readable")
                await _apply(writer, folder, decoder, views, rows, progress)
            if full and live < progress.cursor:
                await move_checkpoint(
                    writer, projection_set, live, progress.cursor, progress.events, from_zero=True
                )
                report.moved_checkpoint = True
            if full:
                await replace_quarantine(writer, projection_set, progress.found.values())
            else:
                await quarantine(writer, projection_set, progress.found.values())
            await _swap(writer, views)
        phase("swap")
        report.events = progress.events if full else await applied_count(control, projection_set)
        report.rows = progress.rows
        report.cursor = progress.cursor if full else live
        report.quarantined = sorted(progress.held.values(), key=lambda game: game.game_id)
        await control.execute(
            "SELECT pg_advisory_unlock(%s, hashtext(%s))", (REBUILD_LOCK_CLASS, projection_set)
        )
    return report


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


async def _apply(
    conn: Connection,
    folder: Folder,
    decoder: Decoder,
    views: Sequence[str],
    rows: Sequence[EventRow],
    progress: _Progress,
) -> None:
    """Fold ``rows`` and write the changes to the fresh tables (in the caller's transaction)."""
    written, found = await project_batch(
        conn, folder, decoder, rows, views, progress.versions(), suffix=SUFFIX
    )
    progress.rows += written
    progress.hold(found)
    progress.advance(rows)


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
    psycopg's asyncio COPY iteration, a fifth of the whole per-event budget. The hot loop keeps out
    anything per event it can: the quarantine costs it one truth test while nothing is held.
    """
    mine = None
    if partition is not None:
        mine = sql.SQL("(hashtext(e.game_id) & 2147483647) % {} = {}").format(partition[1], partition[0])
    statement = READER.copy_upto(bound, mine)
    folder = Folder(views, cache_size=1_000_000)
    decoder = Decoder()
    apply = folder.apply
    cache = decoder.cache
    count = pending = rows = 0
    names: dict[bytes, str] = {}
    held = dict(held)
    found: dict[str, Quarantined] = {}

    def hold(game_id: str, version: int, cause: Cause, reason: str) -> None:
        if version < held.get(game_id, version + 1):
            held[game_id] = version
            found[game_id] = Quarantined(game_id, version, cause, reason)

    with connect_sync(dsn) as reader, connect_sync(dsn) as writer:

        def flush() -> None:
            nonlocal pending, rows
            written, refused = write_batch_sync(writer, folder, views, suffix=SUFFIX)
            rows += written
            for game_id, error in refused.items():
                hold(game_id, folder.pending_from(game_id), Cause.WRITE, describe(error))
                folder.drop(game_id)
            folder.commit()
            pending = 0

        def refold(game_id: str, version: int) -> bool:
            """Seed the folder with ``game_id`` below ``version`` from its stream; ``False`` if held."""
            below = {game_id: version}
            with writer.cursor() as prefixes:
                prefixes.execute(READ_PREFIXES, ([game_id], [version]))
                failed = seed_prefixes(folder, decoder, below, prefixes.fetchall())
            for cause, reason in failed.values():
                hold(game_id, version, cause, reason)
            return not failed

        try:
            for data in copy_out(reader, statement.as_bytes(reader)):
                # Fields in COPY's text format: backslash escapes (rare here; the payload is unescaped
                # by the decoder on a miss), "\\N" for NULL, and the line's newline after the last one.
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
                    applied = apply(game_id, version, event, tournament)
                    # Only a game touched again after it ended (and left memory) is not applied here.
                    if not applied and refold(game_id, version):
                        applied = apply(game_id, version, event, tournament)
                        if not applied:
                            hold(
                                game_id,
                                version,
                                Cause.STREAM,
                                f"version {version} does not follow its stream",
                            )
                except psycopg.Error:
                    raise  # the re-fold's read: the database's trouble, not the game's
                except ProjectionError as error:
                    hold(game_id, version, Cause.DECODE, f"version {version}: {error}")
                except Exception as error:  # a pure fold: the game's events are the cause (fold_batch)
                    hold(game_id, version, Cause.FOLD, f"version {version}: {describe(error)}")
                pending += 1
                if pending >= flush_every:
                    flush()
        except BaseException:
            reader.close()  # mid-COPY: nothing to roll back; closing ends the server's side too
            raise
        if pending:
            flush()
    return count, rows, list(found.values())


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
