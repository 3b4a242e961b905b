"""Migrations: applied once, in order, recorded; safe to run again and concurrently."""

from __future__ import annotations

import asyncio
import dataclasses

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.types.json import Jsonb

from service.audit.chain import check_chain
from service.store import (
    GENESIS_HASH,
    CommandReused,
    EventStore,
    MigrationError,
    NewEvent,
    apply_migrations,
    chain_hash,
    migrations,
)

from .support import assert_valid_stream, count, played


async def test_migrate_twice_applies_nothing_the_second_time(empty_database_url: str) -> None:
    names = [m.name for m in migrations()]
    assert names == sorted(names) and names[0] == "0001_events"
    async with await EventStore.open(empty_database_url) as store:
        assert await store.migrate() == names
        assert await store.migrate() == []
    assert await count(empty_database_url, "SELECT count(*) FROM schema_migrations") == len(names)


async def test_concurrent_migrations_do_not_fail(empty_database_url: str) -> None:
    results = await asyncio.gather(*(apply_migrations(empty_database_url) for _ in range(6)))
    names = [m.name for m in migrations()]
    # Each migration is applied by exactly one of the runners (each takes the lock per migration, in
    # order, so one may apply the first and another the next).
    assert sorted(name for result in results for name in result) == names
    assert all(result == sorted(result) for result in results)
    assert await count(empty_database_url, "SELECT count(*) FROM schema_migrations") == len(names)


async def test_concurrent_migrations_of_several_databases_share_the_role(
    postgres_url: str, empty_database_url: str
) -> None:
    """The role is cluster-wide, created by whichever database migrates first; all of them succeed."""
    base = conninfo_to_dict(empty_database_url)["dbname"]
    extra = [f"{base}_{n}" for n in range(3)]
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        for name in extra:
            await conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        urls = [empty_database_url] + [make_conninfo(postgres_url, dbname=name) for name in extra]
        results = await asyncio.gather(*(apply_migrations(url) for url in urls))
        assert all(result == [m.name for m in migrations()] for result in results)
    finally:
        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
            for name in extra:
                await conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )


async def test_an_applied_migration_that_changed_is_an_error(store: EventStore, database_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute("UPDATE schema_migrations SET sha256 = '\\x00' WHERE name = '0001_events'")
    with pytest.raises(MigrationError, match="0001_events"):
        await store.migrate()


async def migrate_before(url: str, name: str) -> None:
    """Apply the migrations whose names sort before ``name``, as the runner of that time did."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(
            "CREATE TABLE schema_migrations (name text PRIMARY KEY, sha256 bytea NOT NULL, "
            "applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for migration in migrations():
            if migration.name < name:
                await conn.execute(migration.sql.encode())
                await conn.execute(
                    "INSERT INTO schema_migrations (name, sha256) VALUES (%s, %s)",
                    (migration.name, migration.sha256),
                )


async def test_a_database_from_before_0003_keeps_its_commands_and_streams(empty_database_url: str) -> None:
    """Migration 0003 re-keys the ledger and the events of a database that already has games."""
    await migrate_before(empty_database_url, "0003")
    async with await EventStore.open(empty_database_url) as store:
        await store_old_game(empty_database_url)
        assert await store.migrate() == [m.name for m in migrations() if m.name >= "0003"]
        again = await store.append("old", 1, [played(1)], command_id="c1", request_hash=b"r", metadata={})
        assert again.duplicate and (again.first_version, again.last_version) == (2, 2)
        with pytest.raises(CommandReused, match="another request"):
            await store.append("old", 2, [played(1)], command_id="c1", request_hash=b"x", metadata={})
        assert await store.command("old", "create:old") == (b"c", 1, 1)
        await store.append("old", 2, [played(2)], command_id="c2", request_hash=b"r", metadata={})
        assert_valid_stream(await store.read_stream("old"))
    assert await count(empty_database_url, "SELECT count(*) FROM commands WHERE game_id = 'old'") == 3
    assert await count(empty_database_url, "SELECT to_regclass('command_ids') IS NULL") == 1


async def test_0006_keeps_the_rows_stored_before_it_at_hash_version_1(empty_database_url: str) -> None:
    """Rows written before migration 0006 keep hash version 1 and verify as they did; the game goes on
    with rows of version 2 chained on them, and the mixed stream verifies as a whole."""
    await migrate_before(empty_database_url, "0006")
    await store_old_game(empty_database_url)
    before = await count(empty_database_url, "SELECT count(*) FROM events WHERE game_id = 'old'")
    async with await EventStore.open(empty_database_url) as store:
        assert (await store.migrate())[0] == "0006_row_hash_v2"
        old = await store.read_stream("old")
        assert len(old) == before == 2
        assert [e.hash_version for e in old] == [1, 1]
        assert [e.metadata["command_id"] for e in old] == ["create:old", "c1"]
        assert check_chain("old", old, ledger_last_version=2) == []
        assert_valid_stream(old)
        # The old commands are still recognised (their rows carry no request hash to compare).
        again = await store.append("old", 1, [played(1)], command_id="c1", request_hash=b"r", metadata={})
        assert again.duplicate and again.last_hash == old[1].hash
        with pytest.raises(CommandReused, match="another request"):
            await store.append("old", 2, [played(1)], command_id="c1", request_hash=b"x", metadata={})

        new = await store.append(
            "old", 2, [played(2), played(3)], command_id="c2", request_hash=b"r", metadata={"actor": "seat:1"}
        )
        stream = await store.read_stream("old")
        assert stream[:2] == old  # nothing stored before was rewritten
        assert [e.hash_version for e in stream] == [1, 1, 2, 2]
        assert stream[2].prev_hash == old[1].hash and new.events == tuple(stream[2:])
        assert stream[2].metadata == {"actor": "seat:1", "command_id": "c2", "request_sha256": b"r".hex()}
        ledger = await store.ledger("old")
        assert [(r.command_id, r.first_version, r.last_version) for r in ledger] == [
            ("create:old", 1, 1),
            ("c1", 2, 2),
            ("c2", 3, 4),
        ]
        assert check_chain("old", stream, ledger_last_version=ledger[-1].last_version) == []
        assert_valid_stream(stream)
        # The chain of the mixed stream is a real check: the new rows' metadata is under it, the old
        # rows' is not (version 1 never hashed it).
        forged = [*stream[:3], dataclasses.replace(stream[3], metadata={**stream[3].metadata, "actor": "x"})]
        assert [f.position for f in check_chain("old", forged)] == [4]
        untouched = [dataclasses.replace(stream[0], metadata={}), *stream[1:]]
        assert check_chain("old", untouched) == []


async def store_old_game(url: str) -> None:
    """A game with two commands written with plain SQL as the code of migrations 0001-0005 did: events of
    hash version 1 (no such column yet), their metadata the caller's plus ``command_id``, their time and
    the ledger's stamped by the database."""
    created, played_1 = NewEvent("GameCreated", {"variant": "classic"}), played(1)
    first = chain_hash(GENESIS_HASH, "old", 1, created.type, created.payload)
    second = chain_hash(first, "old", 2, played_1.type, played_1.payload)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn, conn.transaction():
        await conn.execute("INSERT INTO games (game_id, variant, players) VALUES ('old', 'classic', '[]')")
        for command_id, request, version in (("create:old", b"c", 1), ("c1", b"r", 2)):
            await conn.execute(
                "INSERT INTO commands (command_id, game_id, request_sha256, first_version, last_version) "
                "VALUES (%s, 'old', %s, %s, %s)",
                (command_id, request, version, version),
            )
        rows = (
            (1, created, {"actor": "admin", "command_id": "create:old"}, GENESIS_HASH, first),
            (2, played_1, {"command_id": "c1"}, first, second),
        )
        for version, event, metadata, prev, digest in rows:
            await conn.execute(
                "INSERT INTO events (game_id, version, type, payload, metadata, prev_hash, hash) "
                "VALUES ('old', %s, %s, %s, %s, %s, %s)",
                (version, event.type, Jsonb(event.payload), Jsonb(metadata), prev, digest),
            )
