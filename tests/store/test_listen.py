"""LISTEN/NOTIFY wake-ups: an append's game id arrives after its commit, on a connection of its own."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from service.store import EventStore, StoreError

from .support import new_game, played

WAIT = 5.0  # seconds; generous, so a slow machine does not fail, and the test cannot hang


async def test_listen_yields_the_game_id_after_an_append(store: EventStore) -> None:
    await new_game(store, "g1")
    async with store.listen() as wakeups:  # listening before the append: nothing can be missed
        await store.append("g1", 1, [played(1), played(2)], command_id="c", request_hash=b"r", metadata={})
        assert await asyncio.wait_for(anext(wakeups), WAIT) == "g1"
        await new_game(store, "g2")
        assert await asyncio.wait_for(anext(wakeups), WAIT) == "g2"


async def test_no_wakeup_for_a_duplicate_or_a_failed_append(store: EventStore) -> None:
    await new_game(store, "g1")
    await store.append("g1", 1, [played(1)], command_id="c", request_hash=b"r", metadata={})
    async with store.listen() as wakeups:
        await store.append("g1", 1, [played(1)], command_id="c", request_hash=b"r", metadata={})  # duplicate
        with pytest.raises(StoreError):
            await store.append("g1", 1, [played(1)], command_id="d", request_hash=b"r", metadata={})
        await new_game(store, "marker")
        assert await asyncio.wait_for(anext(wakeups), WAIT) == "marker"


async def test_a_timed_out_wait_leaves_the_listener_usable(store: EventStore) -> None:
    await new_game(store, "g1")
    async with store.listen() as wakeups:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(anext(wakeups), 0.05)
        await store.append("g1", 1, [played(1)], command_id="c", request_hash=b"r", metadata={})
        assert await asyncio.wait_for(anext(wakeups), WAIT) == "g1"


async def test_plain_async_for_and_the_connection_is_closed_afterwards(
    store: EventStore, database_url: str
) -> None:
    await new_game(store, "g1")
    listener = store.listen()

    async def first() -> str:
        async for game_id in listener:
            return game_id
        raise AssertionError("the listener ended")

    waiting = asyncio.create_task(first())
    await asyncio.sleep(0.2)  # let it connect and LISTEN
    await store.append("g1", 1, [played(1)], command_id="c", request_hash=b"r", metadata={})
    assert await asyncio.wait_for(waiting, WAIT) == "g1"

    assert listener._conn is not None
    pid = listener._conn.info.backend_pid
    await listener.aclose()
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        for _ in range(100):
            cursor = await conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,))
            if await cursor.fetchone() == (0,):
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("the listening connection is still open")
    with pytest.raises(StopAsyncIteration):
        await anext(listener)
