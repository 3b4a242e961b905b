"""The command handler over the in-memory store: the application core runs, and is tested, without a database.

The handler depends on the abstract :class:`service.store.Store` only, so :class:`service.store.MemoryStore`
(held to the same contract as PostgreSQL by ``tests/store/test_contract.py``) can stand in for the
database. None of these tests asks for one.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from service.app.handler import CommandHandler
from service.domain.auth import token_hash
from service.rules import CreateGame, StartRound, Variant, make_options
from service.rules.fair import new_seed
from service.store import MemoryStore, cursor_of
from tests.handler.support import legal_command
from tests.store.support import assert_valid_stream


def _ids(command_id: str | None = None) -> dict[str, Any]:
    command_id = command_id or str(uuid.uuid4())
    return {
        "command_id": command_id,
        "request_hash": hashlib.sha256(command_id.encode()).digest(),
        "expected_version": None,
        "metadata": {"command_id": command_id},
    }


async def _new_game(handler: CommandHandler, tournament_id: str = "") -> tuple[str, tuple[str, ...]]:
    options = make_options(Variant.CLASSIC, {"dealer_selection": "given"})
    created = await handler.create_game(
        CreateGame(Variant.CLASSIC, ("ann", "bob", "cy"), options, new_seed(), 0),
        command_id=str(uuid.uuid4()),
        request_hash=b"\0" * 32,
        tournament_id=tournament_id,
        metadata={},
    )
    await handler.handle(created.game_id, StartRound(), **_ids())
    return created.game_id, created.tokens


async def test_a_game_is_created_and_played_through_the_handler() -> None:
    store = MemoryStore()
    handler = CommandHandler(store)
    game_id, tokens = await _new_game(handler, tournament_id="cup")
    for _ in range(30):
        state = (await handler.load(game_id)).state
        await handler.handle(game_id, legal_command(state), **_ids())

    stream = await store.read_stream(game_id)
    assert_valid_stream(stream)
    assert stream[0].type == "GameCreated" and not stream[0].payload.get("seed")  # the seed stays secret
    # A second instance, with nothing cached, folds the stored log to the same state.
    fresh = await CommandHandler(store).load(game_id)
    cached = await handler.load(game_id)
    assert (fresh.version, fresh.last_hash, fresh.state) == (cached.version, cached.last_hash, cached.state)
    assert fresh.version == len(stream) == await store.stream_version(game_id)
    # The catalogue: the game, its tournament, its seats' token hashes and its secret seed.
    (row,) = await store.list_games(tournament_id="cup")
    assert (row.game_id, row.players, row.version) == (game_id, ["ann", "bob", "cy"], len(stream))
    assert [await store.seat_for_token(game_id, token_hash(t)) for t in tokens] == [0, 1, 2]
    assert await store.seed(game_id) is not None
    # The gap-free global order holds every event, once.
    everything = await store.read_all(limit=1000)
    assert [e.position for e in everything] == [e.position for e in stream]
    assert await store.read_all(cursor_of(everything[-1])) == []


async def test_a_retried_command_answers_its_first_result_and_appends_nothing() -> None:
    store = MemoryStore()
    handler = CommandHandler(store)
    game_id, _ = await _new_game(handler)
    command = legal_command((await handler.load(game_id)).state)
    ids = _ids("the-same-command")
    first = await handler.handle(game_id, command, **ids)
    version = await store.stream_version(game_id)
    # The game moves on; the retry, on another instance too, still answers the first result.
    await handler.handle(game_id, legal_command((await handler.load(game_id)).state), **_ids())
    moved_on = await store.stream_version(game_id)
    for instance in (handler, CommandHandler(store)):
        again = await instance.handle(game_id, command, **ids)
        assert again.duplicate and not first.duplicate
        assert [(e.version, e.hash) for e in again.events] == [(e.version, e.hash) for e in first.events]
        assert again.version == first.version == version
    assert await store.stream_version(game_id) == moved_on  # the retries appended nothing
    assert await store.command(game_id, "the-same-command") == (
        ids["request_hash"],
        first.events[0].version,
        first.version,
    )


async def test_a_stale_instance_catches_up_and_accepts_the_next_legal_command() -> None:
    store = MemoryStore()
    first, second = CommandHandler(store), CommandHandler(store)
    game_id, _ = await _new_game(first)
    await first.load(game_id)  # `first` caches the game now ...
    for _ in range(3):  # ... and `second` moves it on three times
        await second.handle(game_id, legal_command((await second.load(game_id)).state), **_ids())
    fresh = await second.load(game_id)
    assert first._cache[game_id].version < fresh.version
    outcome = await first.handle(game_id, legal_command(fresh.state), **_ids())
    assert outcome.version > fresh.version
    stored = await store.read_stream(game_id)
    assert [e.version for e in stored] == list(range(1, outcome.version + 1))
    assert_valid_stream(stored)
