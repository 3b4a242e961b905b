"""What a failover does to the store's connections, and what each of its errors becomes.

Real errors from the tests' own server: a pooled connection terminated (as a server shutting down ends
it), and a session that takes no writes (as pg_auto_failover's drained primary, or a standby). The pool
must drop such a connection, not hand it out again; and every error of the classes a failover raises is
UNAVAILABLE, a sweep over psycopg's whole error table says so, and none of them reaches a client as
INTERNAL or UNKNOWN.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import AsyncIterator, Callable, Iterator

import psycopg
import pytest
from psycopg import errors as pg_errors

from service.api.errors import code_of, database_refusal
from service.store import EventStore, NotReplicated, database_away
from service.store.failover import spoils_connection

from .support import new_game, played, request_hash

pytestmark = pytest.mark.timeout(60)

#: SQLSTATE classes of a server that is going away, restarting, out of resources or not the primary.
_FAILOVER_CLASSES = ("08", "53", "57", "58")


@pytest.fixture
async def one_connection(database_url: str, service_login: object) -> AsyncIterator[EventStore]:
    """A store of a single pooled connection as the service, so the test knows which one it is given."""
    store = await EventStore.open(
        await service_login.url(database_url),  # type: ignore[attr-defined]
        min_size=1,
        max_size=1,
        group_commit=False,
    )
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
def read_only(postgres_url: str) -> Iterator[Callable[[bool], None]]:
    """Turn the server's ``default_transaction_read_only`` on or off for every session, open ones too (at
    their next statement), as pg_auto_failover does to a primary it drains; reset afterwards."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:

        def turn(on: bool) -> None:
            setting = (
                "SET default_transaction_read_only = on" if on else "RESET default_transaction_read_only"
            )
            conn.execute(f"ALTER SYSTEM {setting}")
            conn.execute("SELECT pg_reload_conf()")
            time.sleep(0.3)  # every backend has the signal before its next statement

        try:
            turn(False)
        except pg_errors.InsufficientPrivilege:
            pytest.skip("the tests' server does not let its login change the server's settings")
        try:
            yield turn
        finally:
            turn(False)


async def _backend(store: EventStore) -> int:
    async with store.connection() as conn:
        return conn.info.backend_pid


async def _append(store: EventStore, after: int, command: str) -> object:
    return await store.append(
        "g1", after, [played(after)], command_id=command, request_hash=request_hash(command), metadata={}
    )


async def test_a_connection_on_a_server_that_takes_no_writes_is_dropped(
    one_connection: EventStore, database_url: str, read_only: Callable[[bool], None]
) -> None:
    store = one_connection
    created = await new_game(store, "g1")
    # The server ends the pooled session (a shutdown, a restart, a demotion): the pool replaces it.
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as owner:
        await owner.execute("SELECT pg_terminate_backend(%s)", (await _backend(store),))
    with pytest.raises(psycopg.OperationalError) as ended:
        await _append(store, created.last_version, "c1")
    assert database_away(ended.value) and spoils_connection(ended.value)
    # The server takes no writes any more (a drained primary): refused, not written, and the session that
    # met it is closed. Kept, every later write given to it would fail until the server restarts.
    drained = await _backend(store)
    read_only(True)
    with pytest.raises(pg_errors.ReadOnlySqlTransaction) as refused:
        await _append(store, created.last_version, "c1")
    assert database_away(refused.value) and spoils_connection(refused.value)
    read_only(False)
    assert await _backend(store) != drained
    assert len(await store.read_stream("g1")) == 1
    again = await _append(store, created.last_version, "c1")
    assert len(await store.read_stream("g1")) == 2 and not again.duplicate  # type: ignore[attr-defined]


async def test_a_statement_timeout_keeps_its_connection(one_connection: EventStore) -> None:
    """Not every OperationalError means the server went away: a cancelled statement leaves the session
    as it was, and it is kept (a new one costs a connection)."""
    store = one_connection
    first = await _backend(store)
    with pytest.raises(pg_errors.QueryCanceled) as cancelled:
        async with store.connection() as conn:
            await conn.execute("SET statement_timeout = 50")
            try:
                await conn.execute("SELECT pg_sleep(1)")
            finally:
                await conn.execute("RESET statement_timeout")
    assert database_away(cancelled.value) and not spoils_connection(cancelled.value)
    assert await _backend(store) == first


def _psycopg_errors() -> list[type[psycopg.Error]]:
    return [
        kind
        for _, kind in inspect.getmembers(pg_errors, inspect.isclass)
        if issubclass(kind, psycopg.Error) and kind.__module__ == pg_errors.__name__
    ]


def test_every_failover_error_class_is_unavailable_and_drops_its_connection() -> None:
    """The sweep: each error psycopg knows whose SQLSTATE is of a failover's classes (or that a drained
    primary gives) is UNAVAILABLE with reason DATABASE_UNAVAILABLE, and its connection is not reused."""
    swept = [
        kind
        for kind in _psycopg_errors()
        if (kind.sqlstate or "").startswith(_FAILOVER_CLASSES) or kind is pg_errors.ReadOnlySqlTransaction
    ]
    assert pg_errors.AdminShutdown in swept and pg_errors.CannotConnectNow in swept and len(swept) > 20
    unmapped = []
    for kind in swept:
        error = kind("as a failover gives it")
        refusal = database_refusal(error)
        if (
            refusal is None
            or refusal.reason != "DATABASE_UNAVAILABLE"
            or code_of(refusal).name != "UNAVAILABLE"
        ):
            unmapped.append(kind.__name__)
        elif kind is not pg_errors.QueryCanceled and not spoils_connection(error):
            unmapped.append(f"{kind.__name__} (kept)")
    assert unmapped == []


def test_every_database_error_has_a_documented_answer() -> None:
    """No database error is left without an answer: each is UNAVAILABLE (retry) or not, and then the
    interceptor answers INTERNAL with an error id. Client-side errors without a SQLSTATE too."""
    for kind in [*_psycopg_errors(), psycopg.OperationalError, psycopg.InterfaceError, psycopg.DataError]:
        refusal = database_refusal(kind("some error"))
        if issubclass(kind, psycopg.OperationalError | psycopg.InterfaceError):
            assert refusal is not None, kind.__name__
        if refusal is not None:
            assert code_of(refusal).name == "UNAVAILABLE" and refusal.reason == "DATABASE_UNAVAILABLE"
    not_replicated = database_refusal(NotReplicated("0/1", "no standby is in the synchronous quorum"))
    assert not_replicated is not None and not_replicated.reason == "NOT_REPLICATED"
    assert code_of(not_replicated).name == "UNAVAILABLE"
