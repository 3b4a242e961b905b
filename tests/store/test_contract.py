"""The store's contract, run against every implementation: PostgreSQL (``EventStore``) and ``MemoryStore``.

Each test takes ``contract_store`` and observes the store only through the :class:`service.store.Store`
protocol, so a test that passes for both proves they behave alike: versions and conflicts, the command ledger
(retries, an id reused for another request, an id in two games), the hash chain, the gap-free global order and
wake-ups. What only PostgreSQL can show (commits out of position order, triggers, privileges, plain SQL) is
tested against it alone, in the other modules of this folder.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from service.store import (
    GENESIS_HASH,
    AppendResult,
    CommandReused,
    Cursor,
    GameExists,
    GameNotFound,
    LedgerRow,
    MemoryStore,
    NewEvent,
    Store,
    StoreError,
    VersionConflict,
    chain_hash,
    cursor_of,
)
from service.store.canonical import canonical
from service.store.model import HASH_VERSION, stored_hash

from .support import PLAYERS, assert_valid_stream, new_game, played, read_until, request_hash, token_hash

WAIT = 5.0  # seconds for a wake-up; generous, so a slow machine does not fail, and no test can hang


@pytest.fixture(
    params=[
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("postgres-alone", marks=pytest.mark.postgres),
        "memory",
    ]
)
def contract_store(request: pytest.FixtureRequest) -> Store:
    """Each implementation in turn: a fresh migrated PostgreSQL database with group commit (the default),
    the same without it (``alone_store``: each append a statement of its own), or a new in-memory store."""
    if request.param == "memory":
        return MemoryStore()
    store: Store = request.getfixturevalue("alone_store" if request.param == "postgres-alone" else "store")
    return store


async def events_in(store: Store, *games: str) -> int:
    """How many events the games' streams hold."""
    return sum([await store.stream_version(game_id) for game_id in games])


# --- appending and reading back -----------------------------------------------------------------------


async def test_append_and_read_back(contract_store: Store) -> None:
    store = contract_store
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
    # Every event of a command carries its metadata, with the command id and the request's hash.
    assert all(
        e.metadata
        == {
            "actor": "seat:2",
            "causation": "request-9",
            "command_id": "c-1",
            "request_sha256": request_hash("c-1").hex(),
        }
        for e in stream[1:]
    )
    assert stream[0].metadata == {
        "actor": "admin",
        "command_id": "create:g1",
        "request_sha256": request_hash("create:g1").hex(),
    }
    assert all(e.game_id == "g1" for e in stream)
    # New rows are of the current hash version, and a command's events share its time.
    assert {e.hash_version for e in stream} == {HASH_VERSION}
    assert len({e.recorded_at for e in stream[1:]}) == 1
    # The result carries the events exactly as stored (time, metadata and hash version included).
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


async def test_the_stored_payload_is_a_copy(contract_store: Store) -> None:
    """What the caller does with its dicts afterwards does not change the log (nor its chain)."""
    payload = {"cards": ["R1"]}
    await new_game(contract_store, "g1")
    await contract_store.append(
        "g1", 1, [NewEvent("CardsTaken", payload)], command_id="c", request_hash=b"r", metadata={}
    )
    payload["cards"].append("R2")
    stream = await contract_store.read_stream("g1")
    assert stream[1].payload == {"cards": ["R1"]}
    assert_valid_stream(stream)


def utc_microseconds(moment: datetime) -> str:
    """A time as the version-2 hash writes it: UTC, ISO 8601 with six digits of microseconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


async def test_chain_hash_is_the_documented_formula(contract_store: Store) -> None:
    r"""Both row hash versions, recomputed here with hashlib from their documented framing. Version 1
    (``chain_hash``, rows stored before 0006): ``sha256(prev ‖ game_id ‖ "\n" ‖ version ‖ "\n" ‖
    canonical(type, payload))``. Version 2 (every row stored now) appends ``"\n" ‖`` the canonical JSON of
    ``{"hash_version": 2, "metadata": …, "recorded_at": …}``."""
    store = contract_store
    await new_game(store, "g1")
    await store.append(
        "g1", 1, [played(1)], command_id="c", request_hash=b"r", metadata={"actor": "Zoë “seat” 1"}
    )
    prev = GENESIS_HASH
    for event in await store.read_stream("g1"):
        assert event.hash_version == 2
        version_1 = prev + f"g1\n{event.version}\n".encode() + canonical(event.type, event.payload)
        facts = {
            "hash_version": 2,
            "metadata": event.metadata,
            "recorded_at": utc_microseconds(event.recorded_at),
        }
        framed = json.dumps(facts, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        assert event.hash == hashlib.sha256(version_1 + b"\n" + framed).digest()
        assert event.hash == stored_hash(event, prev)
        # The same row stored before 0006 (hash version 1) hashes without its metadata and time.
        old = hashlib.sha256(version_1).digest()
        assert old == chain_hash(prev, "g1", event.version, event.type, event.payload)
        assert old == stored_hash(dataclasses.replace(event, hash_version=1), prev) != event.hash
        prev = event.hash
    assert "Zoë “seat” 1".encode() in framed  # UTF-8 as it is, not \u-escaped


async def test_cached_prev_hash_skips_the_lookup_and_a_wrong_one_is_refused(contract_store: Store) -> None:
    store = contract_store
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
    assert await store.command("g1", "c2") is None
    assert_valid_stream(await store.read_stream("g1"))


async def test_read_stream_after_version_and_limit(contract_store: Store) -> None:
    store = contract_store
    await new_game(store, "g1", events=[played(n) for n in range(1, 11)])
    assert [e.version for e in await store.read_stream("g1", after_version=7)] == [8, 9, 10]
    assert [e.version for e in await store.read_stream("g1", after_version=2, limit=3)] == [3, 4, 5]
    assert await store.read_stream("g1", after_version=10) == []
    assert await store.read_stream("nothing") == []


async def test_unknown_game_and_stale_versions(contract_store: Store) -> None:
    store = contract_store
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
    with pytest.raises(VersionConflict) as behind:  # streams start only with their game
        await store.append("g1", 0, [played(1)], command_id="d", request_hash=b"r", metadata={})
    assert behind.value.actual == 1
    assert await store.stream_version("g1") == 1
    assert await store.command("nope", "a") is None


async def test_payloads_that_jsonb_would_change_are_refused(contract_store: Store) -> None:
    store = contract_store
    await new_game(store, "g1")
    bad_payloads: list[dict[Any, Any]] = [{"x": 1.5}, {"x": [float("nan")]}, {1: "key"}, {"x": b"bytes"}]
    for bad in bad_payloads:
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
    with pytest.raises(ValueError):
        await store.append("g1", -1, [played(1)], command_id="c", request_hash=b"r", metadata={})
    assert await store.stream_version("g1") == 1


# --- the games table ----------------------------------------------------------------------------------


async def test_create_game_rows_and_catalogue(contract_store: Store) -> None:
    store = contract_store
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
    assert await store.seat_for_token("nope", token_hash("g1", 2)) is None
    assert await store.command("g1", "c") == (b"r", 2, 3)
    assert await store.command("g1", "create:g1") == (request_hash("create:g1"), 1, 1)
    assert await store.command("g2", "c") is None
    assert await store.command("g1", "nope") is None

    assert [g.game_id for g in await store.list_games()] == ["g1", "g2", "g3"]
    assert [g.game_id for g in await store.list_games(limit=2)] == ["g1", "g2"]
    assert [g.game_id for g in await store.list_games(after="g2")] == ["g3"]
    assert [g.game_id for g in await store.list_games(tournament_id="cup")] == ["g1", "g2"]
    assert [g.game_id for g in await store.list_games(tournament_id="cup", after="g1")] == ["g2"]
    assert [g.version for g in await store.list_games()] == [3, 1, 1]
    with pytest.raises(ValueError):
        await store.list_games(limit=0)

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
    assert await store.command("g1", "another-create") is None


async def test_the_ledger_and_the_disputes_of_a_game(contract_store: Store) -> None:
    store = contract_store
    await new_game(store, "g1")
    await new_game(store, "g2")
    assert [(r.command_id, r.first_version, r.last_version) for r in await store.ledger("g1")] == [
        ("create:g1", 1, 1)
    ]
    assert await store.ledger("nope") == []
    dispute = NewEvent("DisputeFiled", {"dispute_id": "d1"})
    ruling = NewEvent("DisputeRuled", {"dispute_id": "d1"})
    await store.append("g2", 1, [played(1), dispute], command_id="a", request_hash=b"r", metadata={})
    await store.append("g1", 1, [dispute], command_id="b", request_hash=b"r", metadata={})
    await store.append("g2", 3, [ruling, played(2)], command_id="c", request_hash=b"r", metadata={})
    assert [(r.command_id, r.first_version, r.last_version) for r in await store.ledger("g2")] == [
        ("create:g2", 1, 1),
        ("a", 2, 3),
        ("c", 4, 5),
    ]
    assert [(e.game_id, e.version, e.type) for e in await store.dispute_events()] == [
        ("g1", 2, "DisputeFiled"),
        ("g2", 3, "DisputeFiled"),
        ("g2", 4, "DisputeRuled"),
    ]
    assert [e.version for e in await store.dispute_events("g2")] == [3, 4]
    assert await store.dispute_events("nope") == []


# --- versions and the command ledger -------------------------------------------------------------------


async def test_the_ledger_lists_each_command_once_in_version_order(contract_store: Store) -> None:
    """``ledger`` is the game's command ledger as the verifier reads it: one row per command of that game
    (a retry adds none), in version order whatever the ids, with the request's hash and the time the
    command's events were hashed with."""
    store = contract_store
    created = await new_game(store, "g1")
    await new_game(store, "g2")
    results = [created]
    for version, command_id, size in ((1, "z", 2), (3, "a", 1), (4, "m", 2)):
        results.append(
            await store.append(
                "g1",
                version,
                [played(version + n) for n in range(size)],
                command_id=command_id,
                request_hash=request_hash(command_id),
                metadata={"actor": "seat:1"},
            )
        )
    retry = await store.append(
        "g1", 3, [played(3)], command_id="a", request_hash=request_hash("a"), metadata={"actor": "seat:1"}
    )
    assert retry.duplicate
    await store.append("g2", 1, [played(1)], command_id="a", request_hash=b"g2", metadata={})

    ledger = await store.ledger("g1")
    assert all(isinstance(row, LedgerRow) for row in ledger)
    assert [(r.command_id, r.request_sha256, r.first_version, r.last_version) for r in ledger] == [
        ("create:g1", request_hash("create:g1"), 1, 1),
        ("z", request_hash("z"), 2, 3),
        ("a", request_hash("a"), 4, 4),
        ("m", request_hash("m"), 5, 6),
    ]
    stream = await store.read_stream("g1")
    for row, result in zip(ledger, results, strict=True):
        events = stream[row.first_version - 1 : row.last_version]
        assert {e.recorded_at for e in events} == {row.recorded_at}
        assert {e.recorded_at for e in result.events} == {row.recorded_at}
        assert {e.metadata["command_id"] for e in events} == {row.command_id}
    assert [(r.command_id, r.request_sha256, r.first_version) for r in await store.ledger("g2")] == [
        ("create:g2", request_hash("create:g2"), 1),
        ("a", b"g2", 2),
    ]
    assert await store.ledger("nope") == []


async def test_two_appends_expecting_the_same_version_one_wins(contract_store: Store) -> None:
    store = contract_store
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
async def test_many_racing_appenders_leave_contiguous_versions(contract_store: Store) -> None:
    store = contract_store
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


async def test_a_retried_command_returns_the_first_result_and_appends_nothing(contract_store: Store) -> None:
    store = contract_store
    await new_game(store, "g1")
    first = await store.append(
        "g1", 1, [played(1), played(2)], command_id="cmd", request_hash=request_hash("x"), metadata={}
    )
    again = await store.append(
        "g1", 1, [played(1), played(2)], command_id="cmd", request_hash=request_hash("x"), metadata={}
    )
    assert again.duplicate and not first.duplicate
    assert (again.first_version, again.last_version, again.last_hash) == (2, 3, first.last_hash)
    assert again.events == ()
    assert await store.stream_version("g1") == 3

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
    assert await store.stream_version("g1") == 4
    assert await store.command("g1", "cmd") == (request_hash("x"), 2, 3)
    # The retries added no ledger row.
    assert [(r.command_id, r.first_version, r.last_version) for r in await store.ledger("g1")] == [
        ("create:g1", 1, 1),
        ("cmd", 2, 3),
        ("other", 4, 4),
    ]


async def test_concurrent_retries_of_one_command_append_once(contract_store: Store) -> None:
    store = contract_store
    await new_game(store, "g1")
    results = await asyncio.gather(
        *(
            store.append("g1", 1, [played(1)], command_id="cmd", request_hash=b"same", metadata={})
            for _ in range(8)
        )
    )
    assert sorted(r.duplicate for r in results) == [False] + [True] * 7
    assert len({(r.first_version, r.last_version, r.last_hash) for r in results}) == 1
    assert await store.stream_version("g1") == 2


async def test_a_command_id_reused_for_another_request_is_refused(contract_store: Store) -> None:
    store = contract_store
    await new_game(store, "g1")
    await new_game(store, "g2")
    await store.append("g1", 1, [played(1)], command_id="cmd", request_hash=b"one", metadata={})
    events_before = await events_in(store, "g1", "g2")

    with pytest.raises(CommandReused, match="another request"):
        await store.append("g1", 2, [played(2)], command_id="cmd", request_hash=b"two", metadata={})
    with pytest.raises(CommandReused, match="another request"):
        await store.append("g1", 1, [played(1)], command_id="cmd", request_hash=b"two", metadata={})
    assert await events_in(store, "g1", "g2") == events_before
    assert await store.command("g1", "cmd") == (b"one", 2, 2)


async def test_a_command_id_names_one_command_of_each_game(contract_store: Store) -> None:
    """The ledger is per game (its key carries game_id, like every key of the store): the same id in
    another game is another command, appended there and recorded there."""
    store = contract_store
    await new_game(store, "g1")
    await new_game(store, "g2")
    first = await store.append("g1", 1, [played(1)], command_id="cmd", request_hash=b"one", metadata={})
    other = await store.append("g2", 1, [played(2)], command_id="cmd", request_hash=b"two", metadata={})
    assert not first.duplicate and not other.duplicate
    assert await store.command("g1", "cmd") == (b"one", 2, 2)
    assert await store.command("g2", "cmd") == (b"two", 2, 2)
    assert [e.payload["n"] for e in await store.read_stream("g2", after_version=1)] == [2]


async def test_a_retried_create_game_is_a_duplicate(contract_store: Store) -> None:
    store = contract_store
    first = await new_game(store, "g1")
    again = await new_game(store, "g1")
    assert again.duplicate and not first.duplicate
    assert (again.first_version, again.last_version, again.last_hash) == (1, 1, first.last_hash)
    assert [g.game_id for g in await store.list_games()] == ["g1"]
    assert await store.stream_version("g1") == 1


async def test_a_creation_with_a_used_game_id_writes_nothing(contract_store: Store) -> None:
    """A taken game id: the same command with another request is :class:`CommandReused`, another
    command is :class:`GameExists`; either way no games row, seed, seat or event is written."""
    store = contract_store
    await new_game(store, "g1")
    events_before = await events_in(store, "g1")
    for command_id, refused in (("create:g1", CommandReused), ("create:other", GameExists)):
        with pytest.raises(refused):
            await store.create_game(
                "g1",
                variant="attack",
                players=["x", "y"],
                tournament_id="elsewhere",
                seed=b"another seed",
                seat_token_hashes=[b"t0", b"t1"],
                command_id=command_id,
                request_hash=request_hash("another request"),
                events=[played(1)],
                metadata={},
            )
    game = await store.game("g1")
    assert game is not None and (game.variant, game.tournament_id) == ("classic", "")
    assert await store.seed("g1") == b"seed:g1"
    assert await store.seat_for_token("g1", b"t0") is None
    assert await events_in(store, "g1") == events_before
    assert await store.command("g1", "create:other") is None


# --- the global order and wake-ups ---------------------------------------------------------------------


async def test_read_all_pages_through_everything_in_order(contract_store: Store) -> None:
    store = contract_store
    for n in range(5):
        await new_game(store, f"g{n}", events=[played(v) for v in range(n + 1)])
    await store.append("g0", 1, [played(9)], command_id="late", request_hash=b"r", metadata={})
    everything = await read_until(store, Cursor(), expected=16)
    assert [(e.xid, e.position) for e in everything] == sorted((e.xid, e.position) for e in everything)
    assert len({e.position for e in everything}) == 16
    assert [e.version for e in everything if e.game_id == "g0"] == [1, 2]
    assert await store.read_all(cursor_of(everything[-1])) == []
    assert cursor_of(everything[3]) < cursor_of(everything[4])
    # Each command's events share its transaction: a page may end inside one, and the next goes on.
    g4 = [e for e in everything if e.game_id == "g4"]
    assert len({e.xid for e in g4}) == 1
    middle = await store.read_all(cursor_of(g4[1]), limit=2)
    assert [(e.game_id, e.version) for e in middle] == [("g4", 3), ("g4", 4)]
    with pytest.raises(ValueError):
        await store.read_all(limit=0)


async def test_listen_yields_the_game_id_after_an_append(contract_store: Store) -> None:
    store = contract_store
    await new_game(store, "g1")
    async with store.listen() as wakeups:  # listening before the append: nothing can be missed
        await store.append("g1", 1, [played(1), played(2)], command_id="c", request_hash=b"r", metadata={})
        assert await asyncio.wait_for(anext(wakeups), WAIT) == "g1"
        await new_game(store, "g2")
        assert await asyncio.wait_for(anext(wakeups), WAIT) == "g2"


async def test_no_wakeup_for_a_duplicate_or_a_failed_append(contract_store: Store) -> None:
    store = contract_store
    await new_game(store, "g1")
    await store.append("g1", 1, [played(1)], command_id="c", request_hash=b"r", metadata={})
    async with store.listen() as wakeups:
        await store.append("g1", 1, [played(1)], command_id="c", request_hash=b"r", metadata={})  # duplicate
        with pytest.raises(StoreError):
            await store.append("g1", 1, [played(1)], command_id="d", request_hash=b"r", metadata={})
        await new_game(store, "marker")
        assert await asyncio.wait_for(anext(wakeups), WAIT) == "marker"


async def test_a_timed_out_wait_leaves_the_listener_usable(contract_store: Store) -> None:
    store = contract_store
    await new_game(store, "g1")
    async with store.listen() as wakeups:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(anext(wakeups), 0.05)
        await store.append("g1", 1, [played(1)], command_id="c", request_hash=b"r", metadata={})
        assert await asyncio.wait_for(anext(wakeups), WAIT) == "g1"


async def test_plain_async_for_and_a_closed_listener_ends(contract_store: Store) -> None:
    store = contract_store
    await new_game(store, "g1")
    listener = store.listen()

    async def first() -> str:
        async for game_id in listener:
            return game_id
        raise AssertionError("the listener ended")

    waiting = asyncio.create_task(first())
    await asyncio.sleep(0.2)  # let it start listening
    await store.append("g1", 1, [played(1)], command_id="c", request_hash=b"r", metadata={})
    assert await asyncio.wait_for(waiting, WAIT) == "g1"
    await listener.aclose()
    await listener.aclose()
    with pytest.raises(StopAsyncIteration):
        await anext(listener)
    with pytest.raises(StoreError):
        await listener.start()
