"""Helpers for the audit tests: games written to a real event store as the command handler writes them."""

from __future__ import annotations

import uuid

from service.api.handler import stored_form
from service.rules.events import GameCreated
from service.rules.options import Variant
from service.rules.simulate import SimulatedGame, play_game
from service.store import EventStore


async def store_game(store: EventStore, game: SimulatedGame, *, tournament_id: str = "") -> str:
    """Write ``game`` to ``store``: the creation, then one append per accepted command, as the service
    does (the seed kept apart, every command with its own command id); the new game's id."""
    created = game.events[0]
    assert isinstance(created, GameCreated)
    game_id = str(uuid.uuid4())
    result = await store.create_game(
        game_id,
        variant=created.variant.value,
        players=created.players,
        tournament_id=tournament_id,
        seed=created.seed,
        seat_token_hashes=[bytes(32)] * len(created.players),
        command_id=str(uuid.uuid4()),
        request_hash=b"create",
        events=[stored_form(created)],
        metadata={"command": "CreateGame"},
    )
    version, last_hash = result.last_version, result.last_hash
    for command, events in game.steps:
        appended = await store.append(
            game_id,
            version,
            [stored_form(e) for e in events],
            command_id=str(uuid.uuid4()),
            request_hash=b"command",
            metadata={"command": type(command).__name__},
            prev_hash=last_hash,
        )
        version, last_hash = appended.last_version, appended.last_hash
    return game_id


async def store_simulated(store: EventStore, variant: Variant, seed: int, players: int = 3) -> str:
    """A bot game of ``variant`` played in-process and written to ``store``; its id."""
    return await store_game(store, play_game(variant, players, seed))
