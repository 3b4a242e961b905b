"""A retry is answered only once the first run's commit is on the synchronous standby.

Under synchronous replication a commit whose client is cut off while it waits for the standby stays
visible on the primary, and may not be on the standby. A retry that found it and answered at once would
acknowledge a command a failover can still lose. The test names a standby that never comes
(``synchronous_standby_names``) and checks that the answer to a retry, of an append and of a creation,
waits for it, while a plain read does not; the server is this test process's own (:mod:`tests.postgres`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from service.store import AppendResult, EventStore

from .support import new_game, played, request_hash

#: Long enough for an answer that does not wait to have come.
_WAIT = 1.0


@pytest.fixture
def standby_names(postgres_url: str) -> Iterator[psycopg.Connection]:
    """The server's owner, able to name synchronous standbys (``ALTER SYSTEM``), reset afterwards."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        try:
            conn.execute("ALTER SYSTEM RESET synchronous_standby_names")
        except psycopg.errors.InsufficientPrivilege:
            pytest.skip("the tests' server does not let its login change the server's settings")
        try:
            yield conn
        finally:
            conn.execute("ALTER SYSTEM RESET synchronous_standby_names")
            conn.execute("SELECT pg_reload_conf()")


@pytest.fixture
async def synchronous_store(database_url: str, service_login: object) -> AsyncIterator[EventStore]:
    """A store whose commits wait for the synchronous standby (the tests' server turns that off)."""
    login = await service_login.url(database_url)  # type: ignore[attr-defined]
    url = make_conninfo(login, options="-c synchronous_commit=on")
    store = await EventStore.open(url, max_size=4)
    try:
        yield store
    finally:
        await store.close()


async def _play(store: EventStore, after: int) -> AppendResult:
    return await store.append(
        "g1", after, [played(1)], command_id="c1", request_hash=request_hash("c1"), metadata={}
    )


def _name_standby(conn: psycopg.Connection, names: str) -> None:
    conn.execute(f"ALTER SYSTEM SET synchronous_standby_names = '{names}'")
    conn.execute("SELECT pg_reload_conf()")


async def test_a_retry_waits_for_the_standby(
    synchronous_store: EventStore, standby_names: psycopg.Connection
) -> None:
    store = synchronous_store
    created = await new_game(store, "g1")
    first = await _play(store, created.last_version)
    _name_standby(standby_names, "never_comes")
    await asyncio.sleep(0.2)  # the reload reaches every backend

    retry = asyncio.create_task(_play(store, created.last_version))
    created_again = asyncio.create_task(new_game(store, "g1"))
    read = await asyncio.wait_for(store.read_stream("g1"), _WAIT)  # a read does not wait
    assert len(read) == 2
    await asyncio.sleep(_WAIT)
    assert not retry.done() and not created_again.done(), "a retry was answered before the standby had it"

    _name_standby(standby_names, "")
    again = await asyncio.wait_for(retry, 10)
    assert again.duplicate
    assert (again.first_version, again.last_version) == (first.first_version, first.last_version)
    assert (await asyncio.wait_for(created_again, 10)).duplicate
    assert len(await store.read_stream("g1")) == 2  # nothing written twice
