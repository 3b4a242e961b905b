"""LISTEN/NOTIFY wake-ups come on a connection of their own, which leaving ``async with`` closes.

What every store's wake-ups do (after the commit, none for a duplicate, a timeout leaves them usable, a
closed listener ends) is part of the contract (``test_contract.py``).
"""

from __future__ import annotations

import asyncio

import psycopg

from service.store import EventStore

from .support import new_game, played

WAIT = 5.0  # seconds; generous, so a slow machine does not fail, and the test cannot hang


async def test_the_listening_connection_is_closed_with_the_listener(
    store: EventStore, database_url: str
) -> None:
    await new_game(store, "g1")
    async with store.listen() as listener:
        await store.append("g1", 1, [played(1)], command_id="c", request_hash=b"r", metadata={})
        assert await asyncio.wait_for(anext(listener), WAIT) == "g1"
        assert listener._conn is not None
        pid = listener._conn.info.backend_pid
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        for _ in range(100):
            cursor = await conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,))
            if await cursor.fetchone() == (0,):
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("the listening connection is still open")
