"""Rebuilding from zero: fresh tables equal to the live ones, swapped in while the projector runs."""

from __future__ import annotations

import asyncio
import json

import psycopg
import pytest
from projection_support import (
    GAME_SPECS,
    dump,
    expected_views,
    simulate,
    store_game,
    store_games,
    store_house_games,
)

from projections import Projector, RebuildBusy, queries, rebuild, run_projector
from projections.migrate import apply_migrations
from projections.rebuild import REBUILD_LOCK_CLASS
from projections.views import VIEW_NAMES
from service.cli.main import main
from service.store import Cursor, EventStore

pytestmark = pytest.mark.timeout(180)


async def _checkpoint(url: str) -> tuple[Cursor, int]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT xid::text::bigint, position, applied FROM projection_checkpoints "
            "WHERE projection_set = 'main'"
        )
        row = await cursor.fetchone()
    assert row is not None
    return Cursor(row[0], row[1]), row[2]


async def _indexes(url: str) -> set[str]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = ANY(%s)",
            (list(VIEW_NAMES),),
        )
        return {name for (name,) in await cursor.fetchall()}


@pytest.mark.parametrize("workers", [1, 2])
async def test_a_rebuild_equals_the_live_tables_row_by_row(
    store: EventStore, database_url: str, workers: int
) -> None:
    games = await store_games(store)
    await apply_migrations(database_url)
    async with await Projector.open(database_url, batch_size=150) as projector:
        await projector.catch_up()
    live = await dump(database_url)
    assert live == expected_views(games)
    before = await _checkpoint(database_url)
    indexes = await _indexes(database_url)

    report = await rebuild(database_url, workers=workers, flush_every=500)

    assert report.events == sum(len(s.game.events) for s in games)
    assert report.views == VIEW_NAMES and not report.moved_checkpoint
    assert await dump(database_url) == live
    assert await _checkpoint(database_url) == before
    assert await _indexes(database_url) == indexes  # hands_pkey again, not hands__rebuild_pkey
    # Again (the fresh tables' names are free again), one view at a time.
    for view in VIEW_NAMES:
        await rebuild(database_url, view, workers=1)
    assert await dump(database_url) == live


@pytest.mark.parametrize("workers", [1, 2])
async def test_a_rebuild_of_house_rule_games_equals_the_live_tables(
    store: EventStore, database_url: str, workers: int
) -> None:
    """Games played under the house rules (jump-ins, seven-o swaps and rotations, stacked penalties,
    draws to a match) beside games by the book: the live projection is what the engine's final states
    say, and a rebuild from zero gives it again row by row, whole and one view at a time."""
    games = await store_house_games(store) + await store_games(store, GAME_SPECS[:2])
    await apply_migrations(database_url)
    async with await Projector.open(database_url, batch_size=97) as projector:
        await projector.catch_up()
    live = await dump(database_url)
    assert live == expected_views(games)
    report = await rebuild(database_url, workers=workers, flush_every=300)
    assert report.events == sum(len(s.game.events) for s in games)
    assert await dump(database_url) == live
    for view in VIEW_NAMES:
        await rebuild(database_url, view, workers=workers)
    assert await dump(database_url) == live


async def test_a_full_rebuild_of_a_log_never_projected_moves_the_checkpoint(
    store: EventStore, database_url: str
) -> None:
    games = await store_games(store, GAME_SPECS[:3])
    report = await rebuild(database_url, workers=1)
    assert report.moved_checkpoint and report.events == sum(len(s.game.events) for s in games)
    assert await dump(database_url) == expected_views(games)
    cursor, applied = await _checkpoint(database_url)
    assert (cursor, applied) == (report.cursor, report.events)
    more = await store_games(store, GAME_SPECS[3:], prefix="later")
    async with await Projector.open(database_url) as projector:
        assert await projector.catch_up() == sum(len(s.game.events) for s in more)
    assert await dump(database_url) == expected_views(games + more)


async def test_a_rebuild_of_one_view_stops_at_the_live_checkpoint(
    store: EventStore, database_url: str
) -> None:
    await store_games(store)
    await apply_migrations(database_url)
    async with await Projector.open(database_url, batch_size=500) as projector:
        await projector.step()
        await projector.step()
    live = await dump(database_url)
    checkpoint = await _checkpoint(database_url)
    for view in ("standings", "hands", "round_scores"):
        report = await rebuild(database_url, view, workers=2)
        assert report.cursor == checkpoint[0] and report.events == 1000 and not report.moved_checkpoint
    assert await dump(database_url) == live
    assert await _checkpoint(database_url) == checkpoint


async def test_a_rebuild_while_the_projector_and_writers_run_ends_exact(
    store: EventStore, database_url: str
) -> None:
    await apply_migrations(database_url)
    stop = asyncio.Event()
    projecting = asyncio.create_task(run_projector(database_url, stop=stop, batch_size=60, poll_interval=0.1))
    specs = [GAME_SPECS[i % len(GAME_SPECS)] for i in range(6)]
    games = [simulate(v, p, s + 100 * i) for i, (v, p, s) in enumerate(specs)]
    writing = [
        asyncio.create_task(store_game(store, f"r{i}", game, tournament_id=f"t{i % 2}", pause=0.005))
        for i, game in enumerate(games)
    ]
    reads = 0

    async def read_while_swapping() -> None:
        nonlocal reads
        while not stop.is_set():
            await queries.standings(store, "t0")
            await queries.scores(store, "r0")
            reads += 1
            await asyncio.sleep(0.005)

    reading = asyncio.create_task(read_while_swapping())
    try:
        await asyncio.sleep(0.5)
        await rebuild(database_url, "hands", workers=1)
        await rebuild(database_url, "standings", workers=2)
        await rebuild(database_url, workers=1)
        assert not all(task.done() for task in writing)  # the rebuilds overlapped the writes
        stored = await asyncio.gather(*writing)
        total = sum(len(s.game.events) for s in stored)
        for _ in range(1200):
            if (await _checkpoint(database_url))[1] >= total:
                break
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(projecting, reading), 30)
    assert reads > 10
    live = await dump(database_url)
    assert live == expected_views(stored)
    await rebuild(database_url, workers=1)
    assert await dump(database_url) == live


async def test_the_swap_holds_the_projectors_lock_and_the_projector_waits(
    store: EventStore, database_url: str
) -> None:
    games = await store_games(store, GAME_SPECS[:2])
    await apply_migrations(database_url)
    projector = await Projector.open(database_url, batch_size=100)
    await projector.step()
    blocked: list[bool] = []

    async def during_swap(stage: str) -> None:
        if stage == "swap locked":
            step = asyncio.create_task(projector.step())
            await asyncio.sleep(0.5)
            blocked.append(not step.done())
            swap_waiters.append(step)

    swap_waiters: list[asyncio.Task[int]] = []
    report = await rebuild(database_url, workers=1, hook=during_swap)
    assert blocked == [True]
    # The waiting batch ran after the swap, from the checkpoint the swap left (the rebuild's cursor).
    assert await swap_waiters[0] == 0
    assert report.moved_checkpoint
    await projector.catch_up()
    await projector.close()
    assert await dump(database_url) == expected_views(games)


async def test_a_second_rebuild_of_the_same_set_is_refused(store: EventStore, database_url: str) -> None:
    await apply_migrations(database_url)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as other:
        await other.execute("SELECT pg_advisory_lock(%s, hashtext('main'))", (REBUILD_LOCK_CLASS,))
        with pytest.raises(RebuildBusy):
            await rebuild(database_url, workers=1)
    with pytest.raises(ValueError, match="no such view"):
        await rebuild(database_url, "scoreboard")


async def test_swapped_in_tables_keep_the_live_tables_grants(store: EventStore, database_url: str) -> None:
    """The service reads the read models and its projector writes them: a rebuild called from Python (not
    only the CLI) swaps in tables those roles may use as they used the old ones."""
    await store_games(store, GAME_SPECS[:2])
    await apply_migrations(database_url)
    query = (
        "SELECT c.relname, r.role, r.privilege FROM pg_class c, "
        "(VALUES ('uno_audit_app', 'SELECT'), ('uno_audit_projector', 'SELECT'), "
        "('uno_audit_projector', 'INSERT'), ('uno_audit_projector', 'UPDATE'), "
        "('uno_audit_projector', 'DELETE')) AS r(role, privilege) "
        "WHERE c.relname = ANY(%s) AND c.relnamespace = current_schema()::regnamespace "
        "AND has_table_privilege(r.role, c.oid, r.privilege) ORDER BY 1, 2, 3"
    )

    async def granted() -> list[tuple[str, str, str]]:
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            return list(await (await conn.execute(query, (list(VIEW_NAMES),))).fetchall())

    before = await granted()
    assert len(before) == 5 * len(VIEW_NAMES)
    await rebuild(database_url)
    assert await granted() == before


async def test_the_rebuild_command_prints_its_report(
    store: EventStore, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``uno-audit rebuild`` prints the report as JSON, the quarantined games included."""
    games = await store_games(store, GAME_SPECS[:2])
    await apply_migrations(database_url)
    assert await asyncio.to_thread(main, ["rebuild", "--database-url", database_url]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert set(printed) == {"views", "events", "rows", "cursor", "moved_checkpoint", "quarantined", "seconds"}
    assert printed["events"] == sum(len(s.game.events) for s in games)
    assert printed["views"] == list(VIEW_NAMES) and printed["quarantined"] == []
