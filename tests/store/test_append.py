"""Appending and reading back: payloads, versions, metadata, the hash chain, and the catalogue."""

from __future__ import annotations

import hashlib
import json

import psycopg
import pytest

from service.codec import canonical
from service.store import (
    GENESIS_HASH,
    EventStore,
    GameExists,
    GameNotFound,
    NewEvent,
    StoreError,
    VersionConflict,
    chain_hash,
)

from .support import PLAYERS, assert_valid_stream, new_game, played, request_hash, token_hash


async def test_append_and_read_back(store: EventStore) -> None:
    created = await new_game(store, "g1")
    assert (created.first_version, created.last_version, created.duplicate) == (1, 1, False)

    payload = {
        "player": 2,
        "cards": ["R7", "W+4"],
        "nested": {"zeta": [1, [2, 3]], "alpha": None, "flag": True},
        "text": 'Ünïcødé “quotes” \\ " \n tab\t',
        "big": 2**62,
    }
    first = await store.append(
        "g1",
        1,
        [NewEvent("CardsTaken", payload), played(2), played(3)],
        command_id="c-1",
        request_hash=request_hash("c-1"),
        metadata={"actor": "seat:2", "causation": "request-9"},
    )
    assert (first.first_version, first.last_version, first.duplicate) == (2, 4, False)

    stream = await store.read_stream("g1")
    assert [e.version for e in stream] == [1, 2, 3, 4]
    assert [e.type for e in stream] == ["GameCreated", "CardsTaken", "CardPlayed", "CardPlayed"]
    assert stream[1].payload == payload
    assert stream[1].metadata == {"actor": "seat:2", "causation": "request-9", "command_id": "c-1"}
    assert stream[0].metadata == {"actor": "admin", "command_id": "create:g1"}
    assert all(e.game_id == "g1" for e in stream)
    # The result carries the events exactly as stored.
    assert first.events == tuple(stream[1:])
    assert created.events == (stream[0],)
    assert first.last_hash == stream[-1].hash

    # A second append continues the chain.
    second = await store.append(
        "g1", 4, [played(5)], command_id="c-2", request_hash=request_hash("c-2"), metadata={}
    )
    assert (second.first_version, second.last_version) == (5, 5)
    stream = await store.read_stream("g1")
    assert stream[4].prev_hash == first.last_hash
    assert_valid_stream(stream)
    assert await store.stream_version("g1") == 5
    assert await store.stream_version("no-such-game") == 0


async def test_chain_hash_is_the_documented_formula(store: EventStore) -> None:
    await new_game(store, "g1")
    (event,) = await store.read_stream("g1")
    expected = hashlib.sha256(GENESIS_HASH + b"g1\n1\n" + canonical(event.type, event.payload)).digest()
    assert event.hash == expected == chain_hash(GENESIS_HASH, "g1", 1, event.type, event.payload)


async def test_chain_recomputed_from_plain_sql_rows(store: EventStore, database_url: str) -> None:
    """What an arbiter does with psql: read payloads as JSON text and recompute every hash."""
    await new_game(store, "g1")
    for version in range(1, 6):
        await store.append(
            "g1", version, [played(version)], command_id=f"c{version}", request_hash=b"r", metadata={}
        )
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cursor = await conn.execute(
            "SELECT version, type, payload::text, prev_hash, hash FROM events WHERE game_id = 'g1' "
            "ORDER BY version"
        )
        rows = await cursor.fetchall()
    prev = GENESIS_HASH
    for version, kind, payload_text, prev_hash, digest in rows:
        assert prev_hash == prev
        assert digest == chain_hash(prev, "g1", version, kind, json.loads(payload_text))
        prev = digest
    assert len(rows) == 6


async def test_cached_prev_hash_skips_the_lookup_and_a_wrong_one_is_refused(store: EventStore) -> None:
    created = await new_game(store, "g1")
    result = await store.append(
        "g1", 1, [played(1)], command_id="c1", request_hash=b"r", metadata={}, prev_hash=created.last_hash
    )
    assert result.last_version == 2
    with pytest.raises(StoreError, match="prev_hash"):
        await store.append(
            "g1", 2, [played(2)], command_id="c2", request_hash=b"r", metadata={}, prev_hash=bytes(32)
        )
    assert await store.stream_version("g1") == 2
    assert await store.command("c2") is None
    assert_valid_stream(await store.read_stream("g1"))


async def test_read_stream_after_version_and_limit(store: EventStore) -> None:
    await new_game(store, "g1", events=[played(n) for n in range(1, 11)])
    assert [e.version for e in await store.read_stream("g1", after_version=7)] == [8, 9, 10]
    assert [e.version for e in await store.read_stream("g1", after_version=2, limit=3)] == [3, 4, 5]
    assert await store.read_stream("g1", after_version=10) == []
    assert await store.read_stream("nothing") == []


async def test_unknown_game_and_stale_versions(store: EventStore) -> None:
    await new_game(store, "g1")
    with pytest.raises(GameNotFound):
        await store.append("nope", 0, [played(1)], command_id="a", request_hash=b"r", metadata={})
    with pytest.raises(GameNotFound):
        await store.append("nope", 4, [played(1)], command_id="b", request_hash=b"r", metadata={})
    with pytest.raises(VersionConflict) as ahead:
        await store.append("g1", 5, [played(1)], command_id="c", request_hash=b"r", metadata={})
    assert (ahead.value.game_id, ahead.value.expected, ahead.value.actual) == ("g1", 5, 1)
    with pytest.raises(VersionConflict) as ahead_cached:
        await store.append(
            "g1", 5, [played(1)], command_id="c", request_hash=b"r", metadata={}, prev_hash=bytes(32)
        )
    assert ahead_cached.value.actual == 1
    assert await store.stream_version("g1") == 1


async def test_payloads_that_jsonb_would_change_are_refused(store: EventStore) -> None:
    await new_game(store, "g1")
    for bad in ({"x": 1.5}, {"x": [float("nan")]}, {1: "non-string key"}, {"x": b"bytes"}):
        with pytest.raises(TypeError):
            await store.append(
                "g1", 1, [NewEvent("Bad", bad)], command_id="c", request_hash=b"r", metadata={}
            )
    with pytest.raises(TypeError):
        await store.append("g1", 1, [played(1)], command_id="c", request_hash=b"r", metadata={"t": 0.5})
    with pytest.raises(ValueError, match="U\\+0000"):
        await store.append(
            "g1", 1, [NewEvent("Bad", {"x": "a\x00b"})], command_id="c", request_hash=b"r", metadata={}
        )
    with pytest.raises(ValueError):
        await store.append("g1", 1, [], command_id="c", request_hash=b"r", metadata={})
    assert await store.stream_version("g1") == 1


async def test_create_game_rows_and_catalogue(store: EventStore) -> None:
    await new_game(store, "g2", tournament_id="cup")
    await new_game(store, "g1", tournament_id="cup")
    await new_game(store, "g3")
    await store.append("g1", 1, [played(1), played(2)], command_id="c", request_hash=b"r", metadata={})

    game = await store.game("g1")
    assert game is not None
    assert (game.game_id, game.variant, game.players, game.tournament_id, game.version) == (
        "g1",
        "classic",
        list(PLAYERS),
        "cup",
        3,
    )
    assert await store.game("nope") is None
    assert await store.seed("g1") == b"seed:g1"
    assert await store.seed("nope") is None
    assert await store.seat_for_token("g1", token_hash("g1", 2)) == 2
    assert await store.seat_for_token("g1", token_hash("g2", 2)) is None
    assert await store.command("c") == ("g1", b"r", 2, 3)
    assert await store.command("create:g1") == ("g1", request_hash("create:g1"), 1, 1)
    assert await store.command("nope") is None

    assert [g.game_id for g in await store.list_games()] == ["g1", "g2", "g3"]
    assert [g.game_id for g in await store.list_games(limit=2)] == ["g1", "g2"]
    assert [g.game_id for g in await store.list_games(after="g2")] == ["g3"]
    assert [g.game_id for g in await store.list_games(tournament_id="cup")] == ["g1", "g2"]
    assert [g.game_id for g in await store.list_games(tournament_id="cup", after="g1")] == ["g2"]
    assert [g.version for g in await store.list_games()] == [3, 1, 1]

    with pytest.raises(GameExists):
        await store.create_game(
            "g1",
            variant="classic",
            players=PLAYERS,
            tournament_id="",
            seed=None,
            seat_token_hashes=[b"x"] * 3,
            command_id="another-create",
            request_hash=b"r",
            events=[played(1)],
            metadata={},
        )
    assert await store.stream_version("g1") == 3
