"""The service's login is restricted by PostgreSQL itself: connected as ``uno_audit_service`` one can read
and append the log and write the read models, and nothing else — no changing or dropping events, no
creating in the schema, no role more powerful to ``SET ROLE`` to — and the whole service works so."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from projections.migrate import apply_migrations as migrate_all
from service.api.server import RunningServer
from service.store import EventStore, apply_migrations
from service.store.migrate import (
    SERVICE_LOGIN,
    LoginNotRestricted,
    SchemaNotCurrent,
    check_service_login,
)
from tests.api.conftest import address, channel, server, stub  # noqa: F401  (fixtures)
from tests.api.support import create_scripted, play_script
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import new_game

if TYPE_CHECKING:  # the root conftest is pytest's, not a module to import again
    from tests.conftest import ServiceLogin

pytestmark = pytest.mark.timeout(120)

STORE_TABLES = ("events", "commands", "games", "seats", "game_secrets")
CHANGES = ("UPDATE {table} SET game_id = game_id", "DELETE FROM {table}", "TRUNCATE {table}")


@pytest.fixture
async def service_url(database_url: str, service_login: ServiceLogin) -> str:
    """The service login's URL to this test's database, migrated (store and read models) by the owner."""
    await migrate_all(database_url)
    return await service_login.url(database_url)


@pytest.fixture
async def as_service(service_url: str) -> AsyncIterator[psycopg.AsyncConnection[tuple[object, ...]]]:
    async with await psycopg.AsyncConnection.connect(service_url, autocommit=True) as conn:
        yield conn


async def _owner(database_url: str) -> str:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        row = await (await conn.execute("SELECT current_user")).fetchone()
    assert row is not None
    return str(row[0])


async def test_it_logs_in_as_itself_and_no_reset_gives_more(
    as_service: psycopg.AsyncConnection[tuple[object, ...]],
) -> None:
    await as_service.execute("RESET ROLE")
    cursor = await as_service.execute(
        "SELECT session_user, current_user, rolsuper, rolcreaterole, rolcreatedb, rolbypassrls "
        "FROM pg_roles WHERE rolname = current_user"
    )
    assert await cursor.fetchone() == (SERVICE_LOGIN, SERVICE_LOGIN, False, False, False, False)
    await check_service_login(as_service)


async def test_it_cannot_change_drop_or_truncate_the_log(
    store: EventStore, service_url: str, database_url: str
) -> None:
    await new_game(store, "g1")
    async with await psycopg.AsyncConnection.connect(service_url, autocommit=True) as conn:
        for table in STORE_TABLES:
            for change in (*CHANGES, "DROP TABLE {table}", "ALTER TABLE {table} DISABLE TRIGGER USER"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    await conn.execute(change.format(table=table))
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        row = await (await conn.execute("SELECT count(*) FROM events WHERE game_id = 'g1'")).fetchone()
    assert row is not None and row[0] >= 1


async def test_it_cannot_create_in_the_schema_or_the_database(
    as_service: psycopg.AsyncConnection[tuple[object, ...]],
) -> None:
    for statement in (
        "CREATE TABLE stowaway (x int)",
        "CREATE FUNCTION stowaway() RETURNS int LANGUAGE sql AS 'SELECT 1'",
        "CREATE SCHEMA stowaway",
        "CREATE ROLE stowaway",
        "ALTER ROLE uno_audit_service SUPERUSER",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await as_service.execute(statement)
    await as_service.execute("GRANT UPDATE ON events TO uno_audit_service")  # only a warning, and void
    cursor = await as_service.execute("SELECT has_table_privilege('events', 'UPDATE')")
    assert await cursor.fetchone() == (False,)


async def test_it_cannot_set_role_to_anything_more_powerful(
    as_service: psycopg.AsyncConnection[tuple[object, ...]], database_url: str
) -> None:
    for role in {"postgres", await _owner(database_url), "pg_write_all_data", "pg_database_owner"}:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await as_service.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await as_service.execute(sql.SQL("SET SESSION AUTHORIZATION {}").format(sql.Identifier(role)))


async def test_it_writes_the_read_models_and_only_reads_and_appends_the_log(
    as_service: psycopg.AsyncConnection[tuple[object, ...]],
) -> None:
    async with as_service.transaction(force_rollback=True):
        await as_service.execute("INSERT INTO hands (game_id, seat, cards) VALUES ('g', 0, '{}')")
        await as_service.execute("UPDATE hands SET cards = '{R1}'")
        await as_service.execute("DELETE FROM hands")
    cursor = await as_service.execute(
        "SELECT t, has_table_privilege(t, 'SELECT'), has_table_privilege(t, 'INSERT'), "
        "has_table_privilege(t, 'UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER') "
        "FROM unnest(%s::text[]) AS t ORDER BY t",
        (list(STORE_TABLES),),
    )
    assert await cursor.fetchall() == sorted((table, True, True, False) for table in STORE_TABLES)


async def test_the_check_refuses_the_owner_and_a_login_that_may_set_role_to_it(
    database_url: str, service_url: str
) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        with pytest.raises(LoginNotRestricted, match=r"the login \S+ (is|may update)"):
            await check_service_login(conn)
        owner = await _owner(database_url)
        member = f"uno_test_member_{secrets.token_hex(4)}"
        await conn.execute(sql.SQL("CREATE ROLE {} LOGIN NOINHERIT").format(sql.Identifier(member)))
        try:  # not inheriting the owner's rights, but able to SET ROLE to it: refused all the same
            await conn.execute(
                sql.SQL("GRANT {} TO {}").format(sql.Identifier(owner), sql.Identifier(member))
            )
            async with await psycopg.AsyncConnection.connect(
                make_conninfo(database_url, user=member), autocommit=True
            ) as other:
                with pytest.raises(LoginNotRestricted, match=member):
                    await check_service_login(other)
        finally:
            await conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(member)))


async def test_it_checks_the_schema_but_may_not_migrate_it(
    postgres_url: str, database_url: str, service_login: ServiceLogin
) -> None:
    await apply_migrations(database_url)
    url = await service_login.url(database_url)
    assert await apply_migrations(url) == []  # current: only read, no lock, no DDL
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            "DELETE FROM schema_migrations WHERE name = (SELECT max(name) FROM schema_migrations)"
        )
    with pytest.raises(SchemaNotCurrent, match=f"the login {SERVICE_LOGIN} may not migrate it"):
        await apply_migrations(url)


async def test_the_service_runs_end_to_end_as_its_login(
    server: RunningServer,  # noqa: F811
    stub: pb_grpc.GameServiceStub,  # noqa: F811
) -> None:
    async with server.store.connection() as conn:
        row = await (await conn.execute("SELECT session_user")).fetchone()
    assert row == (SERVICE_LOGIN,)
    game = await create_scripted(stub)
    replies = await play_script(stub, game)
    assert replies[-1].view.awaiting == "game-over"
    for _ in range(100):  # the projector, logged in as the service too, writes the read models
        async with server.store.connection() as conn:
            cursor = await conn.execute("SELECT version FROM tables WHERE game_id = %s", (game.game_id,))
            written = await cursor.fetchone()
        if written is not None and written[0] == replies[-1].version:
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail(f"the projector did not catch up: {written}")
