"""Optimistic concurrency and idempotency: exactly one winner per version, retries append nothing."""

from __future__ import annotations

import asyncio

import pytest

from service.store import AppendResult, CommandReused, EventStore, VersionConflict

from .support import assert_valid_stream, count, new_game, played, request_hash


async def test_two_appends_expecting_the_same_version_one_wins(store: EventStore) -> None:
    await new_game(store, "g1")
    await store.append("g1", 1, [played(1)], command_id="base", request_hash=b"r", metadata={})

    async def attempt(name: str, size: int) -> AppendResult | VersionConflict:
        try:
            return await store.append(
                "g1", 2, [played(n) for n in range(size)], command_id=name, request_hash=b"r", metadata={}
            )
        except VersionConflict as conflict:
            return conflict

    outcomes = await asyncio.gather(attempt("a", 3), attempt("b", 2))
    wins = [o for o in outcomes if isinstance(o, AppendResult)]
    conflicts = [o for o in outcomes if isinstance(o, VersionConflict)]
    assert len(wins) == 1 and len(conflicts) == 1
    assert (conflicts[0].game_id, conflicts[0].expected) == ("g1", 2)
    assert conflicts[0].actual == wins[0].last_version == await store.stream_version("g1")
    assert wins[0].first_version == 3
    assert_valid_stream(await store.read_stream("g1"))


@pytest.mark.timeout(60)
async def test_many_racing_appenders_leave_contiguous_versions(store: EventStore) -> None:
    await new_game(store, "g1")
    writers, appends_each = 16, 5
    conflicts = 0

    async def writer(w: int) -> None:
        nonlocal conflicts
        for i in range(appends_each):
            command_id = f"w{w}-{i}"
            while True:
                version = await store.stream_version("g1")  # reload, as the command handler does
                try:
                    await store.append(
                        "g1",
                        version,
                        [played(i, writer=w), played(i, writer=w, second=True)],
                        command_id=command_id,
                        request_hash=request_hash(command_id),
                        metadata={"writer": w},
                    )
                    break
                except VersionConflict as conflict:
                    assert conflict.actual > version
                    conflicts += 1

    await asyncio.gather(*(writer(w) for w in range(writers)))

    stream = await store.read_stream("g1")
    total = 1 + 2 * writers * appends_each
    assert [e.version for e in stream] == list(range(1, total + 1))  # no gaps, no duplicates
    assert_valid_stream(stream)
    # Each command's two events are adjacent and appear once.
    by_command: dict[str, list[int]] = {}
    for event in stream[1:]:
        by_command.setdefault(event.metadata["command_id"], []).append(event.version)
    assert len(by_command) == writers * appends_each
    assert all(b == a + 1 for a, b in by_command.values())
    assert conflicts > 0, "the writers never raced; the test proves nothing"


async def test_a_retried_command_returns_the_first_result_and_appends_nothing(
    store: EventStore, database_url: str
) -> None:
    await new_game(store, "g1")
    first = await store.append(
        "g1", 1, [played(1), played(2)], command_id="cmd", request_hash=request_hash("x"), metadata={}
    )
    rows = await count(database_url, "SELECT count(*) FROM events")

    again = await store.append(
        "g1", 1, [played(1), played(2)], command_id="cmd", request_hash=request_hash("x"), metadata={}
    )
    assert again.duplicate and not first.duplicate
    assert (again.first_version, again.last_version, again.last_hash) == (2, 3, first.last_hash)
    assert again.events == ()

    # The stream moved on meanwhile: the retry (with its old expected version, or a fresh one, or a
    # cached prev_hash) is still recognised, before any conflict.
    await store.append("g1", 3, [played(3)], command_id="other", request_hash=b"o", metadata={})
    stale = await store.append(
        "g1", 1, [played(1), played(2)], command_id="cmd", request_hash=request_hash("x"), metadata={}
    )
    fresh = await store.append(
        "g1", 4, [played(1), played(2)], command_id="cmd", request_hash=request_hash("x"), metadata={}
    )
    cached = await store.append(
        "g1",
        4,
        [played(1)],
        command_id="cmd",
        request_hash=request_hash("x"),
        metadata={},
        prev_hash=(await store.read_stream("g1"))[-1].hash,
    )
    for retry in (stale, fresh, cached):
        assert retry == again
    assert await count(database_url, "SELECT count(*) FROM events") == rows + 1
    assert await count(database_url, "SELECT count(*) FROM commands") == 3


async def test_concurrent_retries_of_one_command_append_once(store: EventStore, database_url: str) -> None:
    await new_game(store, "g1")
    results = await asyncio.gather(
        *(
            store.append("g1", 1, [played(1)], command_id="cmd", request_hash=b"same", metadata={})
            for _ in range(8)
        )
    )
    assert sorted(r.duplicate for r in results) == [False] + [True] * 7
    assert len({(r.first_version, r.last_version, r.last_hash) for r in results}) == 1
    assert await count(database_url, "SELECT count(*) FROM events") == 2


async def test_a_command_id_reused_for_another_request_or_game_is_refused(
    store: EventStore, database_url: str
) -> None:
    await new_game(store, "g1")
    await new_game(store, "g2")
    await store.append("g1", 1, [played(1)], command_id="cmd", request_hash=b"one", metadata={})
    events_before = await count(database_url, "SELECT count(*) FROM events")

    with pytest.raises(CommandReused, match="another request"):
        await store.append("g1", 2, [played(2)], command_id="cmd", request_hash=b"two", metadata={})
    with pytest.raises(CommandReused, match="for game 'g1'"):
        await store.append("g2", 1, [played(2)], command_id="cmd", request_hash=b"one", metadata={})
    # create_game with a used command id: the new game's rows are rolled back with everything else.
    with pytest.raises(CommandReused):
        await store.create_game(
            "g3",
            variant="classic",
            players=["a"],
            tournament_id="",
            seed=b"s",
            seat_token_hashes=[b"t"],
            command_id="cmd",
            request_hash=b"one",
            events=[played(1)],
            metadata={},
        )
    assert await store.game("g3") is None
    assert await count(database_url, "SELECT count(*) FROM seats WHERE game_id = 'g3'") == 0
    assert await count(database_url, "SELECT count(*) FROM events") == events_before


async def test_a_retried_create_game_is_a_duplicate(store: EventStore, database_url: str) -> None:
    first = await new_game(store, "g1")
    again = await new_game(store, "g1")
    assert again.duplicate and not first.duplicate
    assert (again.first_version, again.last_version, again.last_hash) == (1, 1, first.last_hash)
    assert await count(database_url, "SELECT count(*) FROM games") == 1
    assert await count(database_url, "SELECT count(*) FROM events") == 1
