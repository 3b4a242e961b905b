"""Migrations: applied once, in order, recorded; safe to run again and concurrently."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from service.store import EventStore, MigrationError, apply_migrations, migrations

from .support import count


async def test_migrate_twice_applies_nothing_the_second_time(database_url: str) -> None:
    names = [m.name for m in migrations()]
    assert names == sorted(names) and names[0] == "0001_events"
    async with await EventStore.open(database_url) as store:
        assert await store.migrate() == names
        assert await store.migrate() == []
    assert await count(database_url, "SELECT count(*) FROM schema_migrations") == len(names)


async def test_concurrent_migrations_do_not_fail(database_url: str) -> None:
    results = await asyncio.gather(*(apply_migrations(database_url) for _ in range(6)))
    names = [m.name for m in migrations()]
    # Each migration is applied by exactly one of the runners (each takes the lock per migration, in
    # order, so one may apply the first and another the next).
    assert sorted(name for result in results for name in result) == names
    assert all(result == sorted(result) for result in results)
    assert await count(database_url, "SELECT count(*) FROM schema_migrations") == len(names)


async def test_concurrent_migrations_of_several_databases_share_the_role(
    postgres_url: str, database_url: str
) -> None:
    """The role is cluster-wide, created by whichever database migrates first; all of them succeed."""
    base = conninfo_to_dict(database_url)["dbname"]
    extra = [f"{base}_{n}" for n in range(3)]
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        for name in extra:
            await conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        urls = [database_url] + [make_conninfo(postgres_url, dbname=name) for name in extra]
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
