"""The projector against a real PostgreSQL: exact views, exactly once through crashes, live, in pairs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import psycopg
import pytest
import structlog
from projection_support import (
    GAME_SPECS,
    HOUSE_SPECS,
    Stored,
    dump,
    expected_views,
    simulate,
    store_game,
    store_games,
)

from projections import Projector, rebuild, run_projector
from projections.migrate import apply_migrations
from projections.source import READER, connect, copy_out
from service.rules.options import Variant
from service.store import Cursor, EventStore, cursor_of
from tests import tiers

pytestmark = pytest.mark.timeout(120)


class Crash(Exception):
    """Raised by a test hook to kill a projector at a chosen point."""


async def _projector(url: str, **options: object) -> Projector:
    await apply_migrations(url)
    return await Projector.open(url, **options)  # type: ignore[arg-type]


async def test_after_complete_games_the_views_equal_the_rules_engines_results(
    store: EventStore, database_url: str
) -> None:
    games = await store_games(store)
    async with await _projector(database_url, batch_size=300) as projector:
        applied = await projector.catch_up()
        assert applied == sum(len(s.game.events) for s in games)
        assert await projector.catch_up() == 0
        lag = await projector.lag()
    assert (lag.events_behind, lag.seconds_behind, lag.exact) == (0, 0.0, True)
    assert await dump(database_url) == expected_views(games)


async def test_the_projectors_reader_returns_exactly_what_read_all_returns(
    store: EventStore, database_url: str
) -> None:
    await store_games(store, GAME_SPECS[:3])
    expected = []
    after = Cursor()
    while page := await store.read_all(after, limit=250):
        expected += [(e.game_id, e.version, e.type, e.payload) for e in page]
        after = cursor_of(page[-1])
    seen = []
    async with await connect(database_url) as conn:
        after = Cursor()
        while rows := await READER.page(conn, after, 333):
            seen += [(r[2], r[3], r[4], r[5]) for r in rows]
            after = Cursor(int(rows[-1][0]), rows[-1][1])
    assert [(g, v, t) for g, v, t, _ in seen] == [(g, v, t) for g, v, t, _ in expected]
    assert [json.loads(p) for *_, p in seen] == [p for *_, p in expected]


def _crash_at(stage: str, batch: int) -> Callable[[str], Awaitable[None]]:
    """A hook that raises at ``stage`` of the ``batch``-th batch (counting from 1)."""
    count = 0

    async def hook(reached: str) -> None:
        nonlocal count
        if reached == "locked":
            count += 1
        if reached == stage and count == batch:
            raise Crash(f"killed at {stage} of batch {batch}")

    return hook


@pytest.mark.parametrize(
    "stage",
    [
        "locked",  # between batches: nothing of the batch read yet
        "wrote hands",  # inside a batch, some rows written
        "wrote standings",  # inside a batch, aggregates incremented
        "checkpointed",  # everything written, the commit not yet sent
    ],
)
async def test_a_killed_projector_resumes_without_loss_or_double_counting(
    store: EventStore, database_url: str, stage: str
) -> None:
    games = await store_games(store)
    crashing = await _projector(database_url, batch_size=200, hook=_crash_at(stage, 4))
    with pytest.raises(Crash):
        await crashing.catch_up()
    assert crashing.cursor == (await crashing.lag()).cursor  # the checkpoint is where the last commit left it
    assert crashing.applied == 600
    await crashing.close()
    # A new process: no views in memory, every game re-folded from its stream on first touch.
    async with await _projector(database_url, batch_size=200) as resumed:
        await resumed.catch_up()
    live = await dump(database_url)
    assert live == expected_views(games)
    await rebuild(database_url, workers=1)
    assert await dump(database_url) == live


async def test_a_projector_cancelled_inside_its_transaction_leaves_nothing_behind(
    store: EventStore, database_url: str
) -> None:
    games = await store_games(store)
    inside = asyncio.Event()
    batches = 0

    async def hang_in_third_batch(stage: str) -> None:
        nonlocal batches
        if stage == "locked":
            batches += 1
        if stage == "wrote match_scores" and batches == 3:
            inside.set()
            await asyncio.Event().wait()  # until cancelled

    projector = await _projector(database_url, batch_size=250, hook=hang_in_third_batch)
    task = asyncio.create_task(projector.catch_up())
    await asyncio.wait_for(inside.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await projector.lag()).cursor == projector.cursor
    assert projector.applied == 500
    # The same projector carries on (its connection is usable or replaced, its staged views dropped).
    projector.hook = None
    await projector.catch_up()
    await projector.close()
    assert await dump(database_url) == expected_views(games)


@pytest.mark.parametrize("house", [False, True], ids=["by-the-book", "every-house-rule"])
async def test_a_projector_restarted_mid_game_refolds_the_game_and_continues(
    store: EventStore, database_url: str, house: bool
) -> None:
    variant, players, seed, rules = HOUSE_SPECS[0]
    game = simulate(variant, players, seed, house_rules=rules) if house else simulate(Variant.CLASSIC, 3, 1)
    half = len(game.steps) // 2
    await store_game(store, "g", game, tournament_id="cup", steps=slice(0, half))
    async with await _projector(database_url) as first:
        await first.catch_up()
    await store_game(store, "g", game, tournament_id="cup", steps=slice(half, None))
    async with await _projector(database_url) as second:
        await second.catch_up()
    assert await dump(database_url) == expected_views([Stored("g", "cup", game)])


async def _writers(store: EventStore, count: int, prefix: str) -> list[Stored]:
    """``count`` games stored concurrently, yielding between appends (a busy service's log)."""
    specs = [GAME_SPECS[i % len(GAME_SPECS)] for i in range(count)]
    games = [simulate(variant, players, seed + 10 * i) for i, (variant, players, seed) in enumerate(specs)]
    return list(
        await asyncio.gather(
            *(
                store_game(store, f"{prefix}{i}", game, tournament_id=f"t{i % 3}", pause=0.001)
                for i, game in enumerate(games)
            )
        )
    )


async def _settle(url: str, games: list[Stored]) -> None:
    """Wait until the checkpoint has passed every event (the live projectors are still running)."""
    total = sum(len(s.game.events) for s in games)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for _ in range(1200):
            cursor = await conn.execute(
                "SELECT applied FROM projection_checkpoints WHERE projection_set = 'main'"
            )
            row = await cursor.fetchone()
            if row is not None and row[0] >= total:
                assert row[0] == total
                return
            await asyncio.sleep(0.05)
    raise AssertionError("the projector did not catch up")


async def test_concurrent_writers_while_projecting_live_miss_nothing(
    store: EventStore, database_url: str
) -> None:
    await apply_migrations(database_url)
    stop = asyncio.Event()
    projecting = asyncio.create_task(run_projector(database_url, stop=stop, batch_size=50, poll_interval=0.2))
    try:
        games = await _writers(store, 8, "w")
        await _settle(database_url, games)
    finally:
        stop.set()
        await asyncio.wait_for(projecting, 30)
    assert await dump(database_url) == expected_views(games)


async def test_two_projectors_at_once_stay_exact(store: EventStore, database_url: str) -> None:
    await apply_migrations(database_url)
    stop = asyncio.Event()
    batches: dict[str, int] = {"a": 0, "b": 0}

    def counting(name: str) -> Callable[[str], Awaitable[None]]:
        async def hook(stage: str) -> None:
            if stage == "checkpointed":
                batches[name] += 1

        return hook

    projectors = [await Projector.open(database_url, batch_size=40, hook=counting(name)) for name in "ab"]
    running = [asyncio.create_task(p.run(stop, poll_interval=0.1)) for p in projectors]
    try:
        games = await _writers(store, tiers.examples(8, fast=5), "x")
        await _settle(database_url, games)
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*running), 30)
        for projector in projectors:
            await projector.close()
    assert batches["a"] and batches["b"], batches  # both took turns
    assert await dump(database_url) == expected_views(games)


@pytest.mark.parametrize("interval", [0.0, 0.3])
async def test_following_live_gathers_what_arrives_within_an_interval_into_one_batch(
    store: EventStore, database_url: str, interval: float
) -> None:
    """One game's commands, one append every 5 ms: with an interval each batch takes what arrived in it
    (a few batches a second), without one a batch follows nearly every append; either way nothing is
    missed."""
    await apply_migrations(database_url)
    stop = asyncio.Event()
    staged: dict[str, int] = {"read": 0, "locked": 0}

    async def hook(stage: str) -> None:
        if stage in staged:
            staged[stage] += 1

    projector = await _projector(database_url, hook=hook)
    loop = asyncio.get_running_loop()
    running = asyncio.create_task(projector.run(stop, poll_interval=5.0, batch_interval=interval))
    try:
        started = loop.time()
        game = simulate(Variant.CLASSIC, 3, 7)
        stored = await store_game(store, "paced", game, pause=0.005)
        took = loop.time() - started
        await _settle(database_url, [stored])
    finally:
        stop.set()
        await asyncio.wait_for(running, 30)
        await projector.close()
    appends = len(game.steps) + 1
    if interval:  # "locked": every batch, the ones that found nothing new included
        assert staged["locked"] <= took / interval + 3, (staged, took)
    else:
        assert staged["read"] > appends / 4, (staged, appends)  # the interval is what gathers them
    assert await dump(database_url) == expected_views([stored])


async def test_lag_counts_the_events_behind_and_their_time(store: EventStore, database_url: str) -> None:
    games = await store_games(store, GAME_SPECS[:2])
    total = sum(len(s.game.events) for s in games)
    async with await _projector(database_url, batch_size=100) as projector:
        lag = await projector.lag()
        assert lag.events_behind == total and lag.exact
        assert lag.seconds_behind > 0
        assert lag.cursor == Cursor()
        await projector.step()
        assert (await projector.lag()).events_behind == total - 100
        await projector.catch_up()
        caught_up = await projector.lag()
    assert caught_up.events_behind == 0 and caught_up.seconds_behind == 0.0
    assert caught_up.as_dict()["cursor"]["position"] == caught_up.cursor.position


async def test_the_projector_stops_when_asked_and_recovers_from_a_lost_connection(
    store: EventStore, database_url: str
) -> None:
    games = await store_games(store, GAME_SPECS[:2])
    projector = await _projector(database_url, batch_size=100)
    stop = asyncio.Event()
    with structlog.testing.capture_logs() as logs:
        task = asyncio.create_task(projector.run(stop, poll_interval=0.1))
        await _settle(database_url, games)
        # Kill the projector's connection from the server side: the next batch fails, run() retries.
        assert projector._conn is not None
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as admin:
            await admin.execute("SELECT pg_terminate_backend(%s)", (projector._conn.info.backend_pid,))
        more = await store_games(store, GAME_SPECS[2:4], prefix="later")
        await _settle(database_url, games + more)
        stop.set()
        await asyncio.wait_for(task, 30)
    await projector.close()
    assert any(entry["event"] == "projector.failed" for entry in logs)
    assert await dump(database_url) == expected_views(games + more)


def test_copy_out_streams_rows_and_reports_server_errors(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = [
            bytes(r)
            for r in copy_out(conn, b"COPY (SELECT x, 'a\tb' FROM generate_series(1, 3) x) TO STDOUT")
        ]
        assert rows == [b"1\ta\\tb\n", b"2\ta\\tb\n", b"3\ta\\tb\n"]
        with pytest.raises(psycopg.OperationalError, match="division by zero"):
            list(copy_out(conn, b"COPY (SELECT 1 / (5 - x) FROM generate_series(1, 9) x) TO STDOUT"))
        with pytest.raises(psycopg.OperationalError, match="did not start"):
            list(copy_out(conn, b"COPY (SELECT * FROM no_such_table) TO STDOUT"))
        cursor = conn.execute("SELECT 42")
        assert cursor.fetchone() == (42,)  # the connection is usable again
