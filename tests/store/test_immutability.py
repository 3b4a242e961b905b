"""The database itself keeps the log append-only and the chain linked, whoever is connected."""

from __future__ import annotations

import psycopg
import pytest
from psycopg.types.json import Jsonb

from service.store import APP_ROLE, GENESIS_HASH, EventStore, chain_hash
from service.store.migrate import SERVICE_LOGIN
from tests.postgres import PostgresServer

from .support import count, new_game, played

CHANGES = ("UPDATE {table} SET game_id = game_id", "DELETE FROM {table}", "TRUNCATE {table}")


async def test_update_delete_truncate_are_rejected_by_the_trigger_even_for_the_superuser(
    store: EventStore, database_url: str, postgres_server: PostgresServer
) -> None:
    await new_game(store, "g1")
    await store.append("g1", 1, [played(1)], command_id="c", request_hash=b"r", metadata={})
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cursor = await conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        row = await cursor.fetchone()
        assert row is not None
        if postgres_server.private:
            assert row[0], "the owner of a server the tests started is a superuser"
        for table in ("events", "commands"):
            rows = await count(database_url, f"SELECT count(*) FROM {table}")
            for change in CHANGES:
                with pytest.raises(psycopg.errors.RestrictViolation, match=f"{table} is append-only"):
                    await conn.execute(change.format(table=table))
            assert await count(database_url, f"SELECT count(*) FROM {table}") == rows


async def test_the_service_role_lacks_the_privilege(store: EventStore, database_url: str) -> None:
    await new_game(store, "g1")
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(f"SET ROLE {APP_ROLE}")
        for table in ("events", "commands", "games", "seats", "game_secrets"):
            for change in CHANGES:
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    await conn.execute(change.format(table=table))
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                await conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
    assert await count(database_url, "SELECT count(*) FROM events") == 1


async def test_the_pool_runs_as_the_service_login(store: EventStore) -> None:
    await new_game(store, "g1")
    async with store.connection() as conn:  # the store's own connections, as the handler uses them
        cursor = await conn.execute("SELECT current_user, session_user")
        assert await cursor.fetchone() == (SERVICE_LOGIN, SERVICE_LOGIN)  # logged in as such, no SET ROLE
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await conn.execute("DELETE FROM events")


async def test_a_forged_insert_cannot_break_the_chain(store: EventStore, database_url: str) -> None:
    created = await new_game(store, "g1")
    event = played(1)

    async def insert_into(game_id: str, version: int, prev_hash: bytes) -> None:
        digest = chain_hash(prev_hash, game_id, version, event.type, event.payload)
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await conn.execute(
                "INSERT INTO events (game_id, version, type, payload, metadata, prev_hash, hash, xid) "
                "VALUES (%s, %s, %s, %s, '{}', %s, %s, '1')",
                (game_id, version, event.type, Jsonb(event.payload), prev_hash, digest),
            )

    async def insert(version: int, prev_hash: bytes) -> None:
        await insert_into("g1", version, prev_hash)

    with pytest.raises(psycopg.errors.CheckViolation, match="prev_hash"):
        await insert(2, GENESIS_HASH)  # does not link to version 1
    with pytest.raises(psycopg.errors.CheckViolation, match="does not follow"):
        await insert(3, created.last_hash)  # a hole at version 2
    with pytest.raises(psycopg.errors.ForeignKeyViolation, match="no such game"):
        await insert_into("g2", 1, GENESIS_HASH)  # a stream of a game the catalogue does not have
    await insert(2, created.last_hash)  # a valid link is accepted, and its xid is the real one
    (_, second) = await store.read_stream("g1")
    assert second.xid > 1
