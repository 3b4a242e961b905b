"""The database itself keeps the log append-only and the chain linked, whoever is connected."""

from __future__ import annotations

import asyncio
import functools
from datetime import UTC, datetime, timedelta, timezone

import psycopg
import pytest
from psycopg.types.json import Jsonb

from service.store import APP_ROLE, GENESIS_HASH, EventStore, chain_hash
from service.store.migrate import SERVICE_LOGIN
from service.store.model import Batch
from tests.postgres import PostgresServer

from .support import INSERT_ROW, assert_valid_stream, count, forged_row, new_game, played, request_hash

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
        row = forged_row(game_id, version, prev_hash, event)
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await conn.execute(
                "INSERT INTO events (game_id, version, type, payload, metadata, recorded_at, prev_hash, "
                "hash, hash_version, xid) VALUES (%(game_id)s, %(version)s, %(type)s, %(payload)s, "
                "%(metadata)s, %(recorded_at)s, %(prev_hash)s, %(hash)s, %(hash_version)s, '1')",
                row,
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
    assert_valid_stream(await store.read_stream("g1"))


# --- row hash versions ----------------------------------------------------------------------------------


async def test_a_stream_never_goes_back_to_hash_version_1(store: EventStore, database_url: str) -> None:
    """A row of hash version 1 (metadata and time outside the hash) is still accepted where no version-2
    row precedes it, as old writers left them, and stamped with the time of its insert; a version-2 row
    may follow it; after a version-2 row, a version-1 row is refused even with a valid link
    (``events_hash_version_order``), so no writer can leave a later row's metadata outside the chain."""
    created = await new_game(store, "g1")
    event, past = played(1), datetime(2020, 1, 1, tzinfo=UTC)

    async def insert_v1(game_id: str, version: int, prev_hash: bytes) -> bytes:
        digest = chain_hash(prev_hash, game_id, version, event.type, event.payload)
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await conn.execute(
                "INSERT INTO events (game_id, version, type, payload, metadata, recorded_at, prev_hash, "
                "hash, hash_version) VALUES (%s, %s, %s, %s, '{}', %s, %s, %s, 1)",
                (game_id, version, event.type, Jsonb(event.payload), past, prev_hash, digest),
            )
        return digest

    rows = await count(database_url, "SELECT count(*) FROM events")
    with pytest.raises(psycopg.errors.CheckViolation, match="below its predecessor") as refused:
        await insert_v1("g1", 2, created.last_hash)
    assert refused.value.diag.constraint_name == "events_hash_version_order"
    assert await count(database_url, "SELECT count(*) FROM events") == rows

    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute("INSERT INTO games (game_id, variant, players) VALUES ('old', 'classic', '[]')")
        first = await insert_v1("old", 1, GENESIS_HASH)
        await conn.execute(INSERT_ROW, forged_row("old", 2, first, played(2), {"actor": "x"}, past))
    old = await store.read_stream("old")
    assert [(e.version, e.hash_version) for e in old] == [(1, 1), (2, 2)]
    assert old[0].recorded_at > past  # a version-1 row's time is the insert's, not the writer's
    assert old[1].recorded_at == past  # a version-2 row keeps the time it was hashed with
    assert_valid_stream(old)
    with pytest.raises(psycopg.errors.CheckViolation, match="below its predecessor"):
        await insert_v1("old", 3, old[1].hash)


@pytest.fixture(params=["group-commit", "alone"])
def either_store(request: pytest.FixtureRequest) -> tuple[EventStore, bool]:
    """The PostgreSQL store with group commit (the default), then without it; and which it is."""
    grouped = request.param == "group-commit"
    store: EventStore = request.getfixturevalue("store" if grouped else "alone_store")
    return store, grouped


async def test_a_version_2_row_keeps_the_time_and_metadata_it_was_hashed_with(
    either_store: tuple[EventStore, bool], database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer's time (UTC, to the microsecond) and its metadata are stored as hashed, by the single
    append and by a group of appends, and the ledger row has the same time."""
    store, grouped = either_store
    games = ("g1", "g2", "g3")
    created = {g: await new_game(store, g) for g in games}
    clock = datetime(2026, 12, 5, 8, 30, 1, 654321, tzinfo=timezone(timedelta(hours=1)))
    monkeypatch.setattr("service.store.streams.Batch", functools.partial(Batch, recorded_at=clock))
    before = store.group_commit_stats()
    results = await asyncio.gather(
        *(
            store.append(
                g, 1, [played(1), played(2)], command_id=f"c-{g}", request_hash=request_hash(g),
                metadata={"actor": "seat:1"}, prev_hash=created[g].last_hash,
            )
            for g in games
        )
    )  # fmt: skip
    after = store.group_commit_stats()
    sent = (after["groups"] - before["groups"], after["commands"] - before["commands"])
    assert sent == ((2, 3) if grouped else (0, 0))  # with group commit: the first alone, then a group
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        for game_id, result in zip(games, results, strict=True):
            cursor = await conn.execute(
                "SELECT to_char(e.recorded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US'), "
                "e.recorded_at, e.metadata, e.hash_version, c.recorded_at FROM events e JOIN commands c "
                "ON c.game_id = e.game_id AND c.command_id = e.metadata->>'command_id' "
                "WHERE e.game_id = %s AND e.version > 1 ORDER BY e.version",
                (game_id,),
            )
            rows = await cursor.fetchall()
            metadata = {
                "actor": "seat:1",
                "command_id": f"c-{game_id}",
                "request_sha256": request_hash(game_id).hex(),
            }
            assert rows == [("2026-12-05 07:30:01.654321", clock, metadata, 2, clock)] * 2
            assert [e.recorded_at for e in result.events] == [clock, clock]
            assert_valid_stream(await store.read_stream(game_id))
