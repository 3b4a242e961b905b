"""The synchronous standby's proof, on a server that has no standby: nothing is acknowledged.

With ``require_sync_standby`` a commit is answered only once a standby of the synchronous quorum is shown
to hold it. The tests' own server has no standby at all, the case of a primary running alone
(pg_auto_failover's ``wait_primary``): every write commits and is refused all the same, its retries too,
and never as a false success. The positive case, with a real standby, is tests/ha's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from psycopg.conninfo import make_conninfo

from service.store import EventStore, NotReplicated, StoreError

from .support import new_game, played, request_hash

pytestmark = pytest.mark.timeout(60)


async def _service_url(database_url: str, service_login: object, synchronous_commit: str = "on") -> str:
    login = await service_login.url(database_url)  # type: ignore[attr-defined]
    # The tests' server turns synchronous_commit off; a primary under the guard has it on.
    return make_conninfo(login, options=f"-c synchronous_commit={synchronous_commit}")


@pytest.fixture
async def guarded(
    database_url: str, service_login: object, may_read_stats: None
) -> AsyncIterator[EventStore]:
    store = await EventStore.open(
        await _service_url(database_url, service_login), max_size=4, require_sync_standby=True
    )
    try:
        yield store
    finally:
        await store.close()


async def test_without_a_standby_nothing_is_acknowledged(guarded: EventStore, database_url: str) -> None:
    store = guarded
    with pytest.raises(NotReplicated, match="no standby is in the synchronous quorum"):
        await new_game(store, "g1")
    # It committed here (it could not be told not to), and is not acknowledged: a retry is refused too.
    assert len(await store.read_stream("g1")) == 1
    with pytest.raises(NotReplicated):
        await new_game(store, "g1")
    for attempt in range(2):  # the first run and its retry with the same command id
        with pytest.raises(NotReplicated):
            await store.append(
                "g1", 1, [played(1)], command_id="c1", request_hash=request_hash("c1"), metadata={}
            )
        assert len(await store.read_stream("g1")) == 2, attempt
    # A retry found on the ledger (the command handler's path for a refusal on its cached state) too.
    with pytest.raises(NotReplicated):
        await store.command("g1", "c1")


async def test_a_group_without_a_standby_is_refused_to_each(guarded: EventStore) -> None:
    import asyncio

    store = guarded
    for game in ("g1", "g2", "g3"):
        with pytest.raises(NotReplicated):
            await new_game(store, game)
    outcomes = await asyncio.gather(
        *(
            store.append(game, 1, [played(1)], command_id="c", request_hash=request_hash("c"), metadata={})
            for game in ("g1", "g2", "g3")
        ),
        return_exceptions=True,
    )
    assert all(isinstance(outcome, NotReplicated) for outcome in outcomes), outcomes


async def test_a_login_that_cannot_see_the_standbys_is_refused(
    database_url: str, service_login: object
) -> None:
    with pytest.raises(StoreError, match="pg_read_all_stats"):
        await EventStore.open(await _service_url(database_url, service_login), require_sync_standby=True)


async def test_a_server_whose_commits_return_unflushed_is_refused(
    database_url: str, service_login: object, may_read_stats: None
) -> None:
    url = await _service_url(database_url, service_login, synchronous_commit="off")
    with pytest.raises(StoreError, match="synchronous_commit is off"):
        await EventStore.open(url, require_sync_standby=True)


async def test_a_lone_server_without_the_setting_acknowledges_as_before(store: EventStore) -> None:
    created = await new_game(store, "g1")
    appended = await store.append(
        "g1", created.last_version, [played(1)], command_id="c1", request_hash=request_hash("c1"), metadata={}
    )
    assert appended.last_version == 2 and not appended.duplicate
