"""The global log read in the gap-free order: nothing skipped, nothing twice, streams in version order.

The trap: positions come from a sequence at insert time, but rows appear at commit time. A reader that
moves its cursor to the highest position it has seen skips every event whose transaction took a lower
position and committed later. ``read_all`` orders by (writing transaction id, position) and stops at the
oldest transaction still running, so it waits for such an event instead of jumping over it.
"""

from __future__ import annotations

import asyncio
import random

import psycopg
import pytest

from service.store import (
    Cursor,
    EventStore,
    NewEvent,
    StoredEvent,
    VersionConflict,
    cursor_of,
)

from .support import INSERT_ROW, assert_valid_stream, forged_row, new_game, played, read_until, request_hash


async def naive_read(url: str, after_position: int) -> list[int]:
    """What a reader trusting the sequence does: ``position > last ORDER BY position``."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT position FROM events WHERE position > %s ORDER BY position", (after_position,)
        )
        return [row[0] for row in await cursor.fetchall()]


async def insert_in_open_transaction(
    conn: psycopg.AsyncConnection, game_id: str, version: int, prev_hash: bytes, event: NewEvent
) -> int:
    """Insert one event of the current hash version (a stream never goes back to version 1) in ``conn``'s
    transaction, which stays open; its position."""
    cursor = await conn.execute(INSERT_ROW, forged_row(game_id, version, prev_hash, event))
    row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def test_an_event_committed_out_of_position_order_is_neither_skipped_nor_overtaken(
    store: EventStore, database_url: str
) -> None:
    a = await new_game(store, "ga")
    await new_game(store, "gb")
    start = await read_until(store, Cursor(), expected=2)
    cursor = cursor_of(start[-1])
    naive_cursor = max(e.position for e in start)

    slow = await psycopg.AsyncConnection.connect(database_url)  # not autocommit: transaction A stays open
    try:
        position_a = await insert_in_open_transaction(slow, "ga", 2, a.last_hash, played(1))
        b = await store.append("gb", 1, [played(2)], command_id="b", request_hash=b"r", metadata={})
        position_b = b.events[0].position
        assert position_a < position_b  # A took its position first, B committed first

        # The naive reader sees B, not A, and moves past A's position ...
        assert await naive_read(database_url, naive_cursor) == [position_b]
        naive_cursor = position_b
        # ... while read_all returns nothing yet: B's transaction is younger than the open A.
        assert await store.read_all(cursor) == []
        await slow.commit()
    finally:
        await slow.close()

    assert await naive_read(database_url, naive_cursor) == [], "the naive reader has skipped A for good"
    later = await read_until(store, cursor, expected=2)
    assert [(e.game_id, e.version, e.position) for e in later] == [
        ("ga", 2, position_a),
        ("gb", 2, position_b),
    ]
    assert await store.read_all(cursor_of(later[-1])) == []


@pytest.mark.timeout(90)
async def test_a_follower_sees_every_event_once_while_50_writers_race(
    store: EventStore, database_url: str
) -> None:
    rng = random.Random(20240611)
    games = [f"g{n:02d}" for n in range(20)]
    for game_id in games:
        await new_game(store, game_id)
    cursor = cursor_of((await read_until(store, Cursor(), expected=len(games)))[-1])
    naive_cursor = await max_position(database_url)

    writers, appends_each, slow_writers = 50, 4, 12
    done = asyncio.Event()
    written: list[int] = []  # positions, as each commit is acknowledged

    async def fast_writer(w: int) -> None:
        for i in range(appends_each):
            game_id, command_id = rng.choice(games), f"w{w}-{i}"
            while True:
                version = await store.stream_version(game_id)
                try:
                    result = await store.append(
                        game_id,
                        version,
                        [played(i, writer=w)] * rng.randint(1, 3),
                        command_id=command_id,
                        request_hash=request_hash(command_id),
                        metadata={},
                    )
                    written.extend(e.position for e in result.events)
                    break
                except VersionConflict:
                    await asyncio.sleep(rng.random() / 200)

    async def slow_writer(w: int) -> None:
        """Takes a position, then holds its transaction open while others commit after it."""
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            for i in range(appends_each):
                game_id = rng.choice(games)
                while True:
                    try:
                        async with conn.transaction():
                            last = (await store.read_stream(game_id, after_version=0))[-1]
                            position = await insert_in_open_transaction(
                                conn, game_id, last.version + 1, last.hash, played(i, slow=w)
                            )
                            await conn.execute("SELECT pg_sleep(%s)", (0.02 + rng.random() / 10,))
                        written.append(position)
                        break
                    except (psycopg.errors.UniqueViolation, psycopg.errors.CheckViolation):
                        await asyncio.sleep(rng.random() / 200)

    follower: list[StoredEvent] = []
    naive: list[int] = []

    async def follow() -> None:
        nonlocal cursor, naive_cursor
        while True:
            finished = done.is_set()
            page = await store.read_all(cursor, limit=rng.randint(1, 20))
            follower.extend(page)
            if page:
                cursor = cursor_of(page[-1])
            positions = await naive_read(database_url, naive_cursor)
            naive.extend(positions)
            if positions:
                naive_cursor = positions[-1]
            if finished and not page and len(follower) >= len(written):
                return
            await asyncio.sleep(0.002)

    reader = asyncio.create_task(follow())
    await asyncio.gather(*(slow_writer(w) if w < slow_writers else fast_writer(w) for w in range(writers)))
    done.set()
    await asyncio.wait_for(reader, timeout=30)

    # Every event exactly once, and nothing that was not written.
    positions = [e.position for e in follower]
    assert len(positions) == len(set(positions)) == len(written)
    assert set(positions) == set(written)
    # In the (xid, position) order, and each game's events in version order, from 2 up without gaps.
    keys = [(e.xid, e.position) for e in follower]
    assert keys == sorted(keys)
    for game_id in games:
        versions = [e.version for e in follower if e.game_id == game_id]
        assert versions == list(range(2, len(versions) + 2))
        assert_valid_stream(await store.read_stream(game_id))
    # The race really happened: the naive reader, polling alongside, lost events for good.
    missed = set(written) - set(naive)
    assert missed, "no commit landed out of position order; the test proved nothing"


async def max_position(url: str) -> int:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute("SELECT coalesce(max(position), 0) FROM events")
        row = await cursor.fetchone()
        assert row is not None
        return int(row[0])
