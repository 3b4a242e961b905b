"""Two command handlers (two service instances) on one store: a stale cache never wins and never refuses."""

from __future__ import annotations

import hashlib
import uuid

import grpc
import pytest

from service.api import errors
from service.app.handler import CommandHandler
from service.domain.errors import Conflict, RuleViolation
from service.rules import CreateGame, Draw, Play, StartRound, Variant, make_options
from service.rules.fair import new_seed
from service.store import EventStore
from tests.handler.support import legal_command


def _ids() -> dict[str, object]:
    command_id = str(uuid.uuid4())
    return {
        "command_id": command_id,
        "request_hash": hashlib.sha256(command_id.encode()).digest(),
        "expected_version": None,
        "metadata": {"command_id": command_id},
    }


async def _new_game(handler: CommandHandler) -> str:
    options = make_options(Variant.CLASSIC, {"dealer_selection": "given"})
    created = await handler.create_game(
        CreateGame(Variant.CLASSIC, ("ann", "bob", "cy"), options, new_seed(), 0),
        command_id=str(uuid.uuid4()),
        request_hash=b"\0" * 32,
        tournament_id="",
        metadata={},
    )
    await handler.handle(created.game_id, StartRound(), **_ids())  # type: ignore[arg-type]
    return created.game_id


async def _turn_action(handler: CommandHandler, game_id: str) -> None:
    """One legal action for whoever is on turn, as the other instance's players would send it."""
    state = (await handler.load(game_id)).state
    await handler.handle(game_id, legal_command(state), **_ids())  # type: ignore[arg-type]


async def test_a_stale_instance_accepts_the_next_legal_command(store: EventStore) -> None:
    first, second = CommandHandler(store), CommandHandler(store)
    game_id = await _new_game(first)
    await first.load(game_id)  # `first` caches the game now ...
    for _ in range(3):  # ... and `second` moves it on three times
        await _turn_action(second, game_id)
    fresh = await second.load(game_id)
    stale = first._cache[game_id]
    assert stale.version < fresh.version
    # A command that is legal only on the fresh state: the seat on turn now (the stale cache thinks
    # another seat is on turn, or that a drawn card is pending).
    command = legal_command(fresh.state)
    outcome = await first.handle(game_id, command, **_ids())  # type: ignore[arg-type]
    assert outcome.version > fresh.version
    stored = await store.read_stream(game_id)
    assert [e.version for e in stored] == list(range(1, outcome.version + 1))


async def test_a_stale_instance_does_not_overwrite_with_a_client_version(store: EventStore) -> None:
    first, second = CommandHandler(store), CommandHandler(store)
    game_id = await _new_game(first)
    before = (await first.load(game_id)).version
    await _turn_action(second, game_id)
    state = (await first.load(game_id)).state
    ids = _ids() | {"expected_version": before}
    with pytest.raises(Conflict) as refused:
        await first.handle(game_id, Draw(state.turn), **ids)  # type: ignore[arg-type]
    assert errors.code_of(refused.value) is grpc.StatusCode.ABORTED
    stored = await store.read_stream(game_id)
    assert len(stored) > before
    assert refused.value.metadata["actual_version"] == str(len(stored))


async def test_a_rule_violation_is_confirmed_on_the_latest_state(store: EventStore) -> None:
    first, second = CommandHandler(store), CommandHandler(store)
    game_id = await _new_game(first)
    state = (await first.load(game_id)).state
    not_on_turn = (state.turn + 1) % 3
    card = state.hands[not_on_turn][0]
    with pytest.raises(RuleViolation) as refused:
        await second.handle(game_id, Play(not_on_turn, card, None), **_ids())  # type: ignore[arg-type]
    assert errors.code_of(refused.value) is grpc.StatusCode.FAILED_PRECONDITION
    assert refused.value.reason == "turn.order"
    assert len(await store.read_stream(game_id)) == (await first.load(game_id)).version
