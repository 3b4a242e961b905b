"""What PostgreSQL shows of an append that the contract cannot: the rows as an arbiter reads them with SQL.

Appending and reading back through the store is part of the contract (``test_contract.py``).
"""

from __future__ import annotations

import json

import psycopg

from service.store import GENESIS_HASH, EventStore
from service.store.canonical import canonical
from service.store.model import HASH_VERSION, event_hash, row_facts

from .support import new_game, played, request_hash


async def test_chain_recomputed_from_plain_sql_rows(store: EventStore, database_url: str) -> None:
    """What an arbiter does with psql: read payloads and metadata as JSON text, the row's hash version and
    time, and recompute every hash by its row's version (metadata and time are under the chain)."""
    await new_game(store, "g1")
    for version in range(1, 6):
        await store.append(
            "g1",
            version,
            [played(version)],
            command_id=f"c{version}",
            request_hash=request_hash(f"c{version}"),
            metadata={"actor": f"seat:{version % 3}"},
        )
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cursor = await conn.execute(
            "SELECT version, type, payload::text, metadata::text, recorded_at, hash_version, prev_hash, hash "
            "FROM events WHERE game_id = 'g1' ORDER BY version"
        )
        rows = await cursor.fetchall()
    prev = GENESIS_HASH
    for version, kind, payload_text, metadata_text, recorded_at, hash_version, prev_hash, digest in rows:
        assert prev_hash == prev
        assert hash_version == HASH_VERSION
        metadata = json.loads(metadata_text)
        if version > 1:
            assert metadata == {
                "actor": f"seat:{(version - 1) % 3}",
                "command_id": f"c{version - 1}",
                "request_sha256": request_hash(f"c{version - 1}").hex(),
            }
        content = canonical(kind, json.loads(payload_text))
        facts = row_facts(hash_version, metadata, recorded_at)
        assert digest == event_hash(hash_version, prev, "g1", version, content, facts)
        # The metadata is under the hash: another actor would make another hash.
        forged = row_facts(hash_version, {**metadata, "actor": "someone else"}, recorded_at)
        assert digest != event_hash(hash_version, prev, "g1", version, content, forged)
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
