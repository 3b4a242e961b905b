"""Helpers for the audit tests: bot games written to a real event store as the service writes them."""

from __future__ import annotations

import uuid

from service.play.simulate import play_game
from service.rules.options import Variant
from service.store import EventStore
from tests.projections.projection_support import store_game


async def store_simulated(store: EventStore, variant: Variant, seed: int, players: int = 3) -> str:
    """A bot game of ``variant`` played in-process and written to ``store`` command by command; its id."""
    game_id = str(uuid.uuid4())
    await store_game(store, game_id, play_game(variant, players, seed))
    return game_id
