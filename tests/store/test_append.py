"""What PostgreSQL shows of an append that the contract cannot: the rows as an arbiter reads them with SQL.

Appending and reading back through the store is part of the contract (``test_contract.py``).
"""

from __future__ import annotations

import json

import psycopg

from service.store import GENESIS_HASH, EventStore, chain_hash

from .support import new_game, played


async def test_chain_recomputed_from_plain_sql_rows(store: EventStore, database_url: str) -> None:
    """What an arbiter does with psql: read payloads as JSON text and recompute every hash."""
    await new_game(store, "g1")
    for version in range(1, 6):
        await store.append(
            "g1", version, [played(version)], command_id=f"c{version}", request_hash=b"r", metadata={}
        )
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cursor = await conn.execute(
            "SELECT version, type, payload::text, prev_hash, hash FROM events WHERE game_id = 'g1' "
            "ORDER BY version"
        )
        rows = await cursor.fetchall()
    prev = GENESIS_HASH
    for version, kind, payload_text, prev_hash, digest in rows:
        assert prev_hash == prev
        assert digest == chain_hash(prev, "g1", version, kind, json.loads(payload_text))
        prev = digest
    assert len(rows) == 6


async def test_a_command_is_one_ledger_row(store: EventStore, database_url: str) -> None:
    """The ledger row lives with its game (key game_id, command_id); a retry adds none."""
    await new_game(store, "g1")
    await store.append("g1", 1, [played(1), played(2)], command_id="c", request_hash=b"r", metadata={})
    await store.append("g1", 1, [played(1), played(2)], command_id="c", request_hash=b"r", metadata={})
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cursor = await conn.execute(
            "SELECT game_id, command_id, first_version, last_version FROM commands ORDER BY first_version"
        )
        assert await cursor.fetchall() == [("g1", "create:g1", 1, 1), ("g1", "c", 2, 3)]
