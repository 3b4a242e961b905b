"""Re-verification after a rules fix: a game stored by an engine that decided differently from today's
(here: one that scored a round 10 points too high, written with an intact hash chain) is found, at the
position where today's engine first disagrees, with its stored and replayed outcomes."""

from __future__ import annotations

import dataclasses
import uuid

from service.app.auditor import Auditor
from service.play.simulate import SimulatedGame, play_game
from service.rules.events import Event, GameEnded, RoundEnded
from service.rules.options import Variant
from service.store import EventStore
from tests.projections.projection_support import store_game

from .support import store_simulated


def scored_ten_too_many(game: SimulatedGame) -> SimulatedGame:
    """``game`` as an engine that added 10 points to the first round's score would have logged it."""
    bumped: list[tuple[object, tuple[Event, ...]]] = []
    done = False
    for command, events in game.steps:
        changed: list[Event] = []
        for event in events:
            if isinstance(event, RoundEnded) and not done:
                event, done = dataclasses.replace(event, points=event.points + 10), True
                winner = event.winner
            elif isinstance(event, GameEnded):
                scores = list(event.scores)
                scores[winner] += 10
                event = dataclasses.replace(event, scores=tuple(scores))
            changed.append(event)
        bumped.append((command, tuple(changed)))
    assert done
    return dataclasses.replace(game, steps=bumped)  # type: ignore[arg-type]


async def test_a_game_scored_by_an_older_engine_is_listed_with_where_it_differs(store: EventStore) -> None:
    game = play_game(Variant.CLASSIC, 3, seed=8)
    stored_id = str(uuid.uuid4())
    await store_game(store, stored_id, scored_ten_too_many(game))
    fine_id = await store_simulated(store, Variant.SONIC, seed=3)
    auditor = Auditor(store)

    report = await auditor.verify(stored_id, check_projections=False)
    rows = await store.read_stream(stored_id)
    first_round_end = next(r.version for r in rows if r.type == "RoundEnded")
    assert report.chain.valid, "the older engine wrote an intact chain"
    replay = report.replay
    assert replay is not None and replay.diverged_at is not None
    diverged = replay.diverged_at
    assert diverged.position == first_round_end
    assert diverged.stored is not None and diverged.replayed is not None
    assert diverged.stored.payload["points"] == diverged.replayed.payload["points"] + 10
    assert replay.outcome_differs and not report.valid
    true_scores = dict(zip(game.state.players, game.state.scores, strict=True))
    assert replay.replayed.scores == true_scores
    assert replay.stored is not None
    assert sum(replay.stored.scores.values()) == sum(true_scores.values()) + 10

    listed = {r.game_id: r.summary() async for r in auditor.verify_all(check_projections=False)}
    assert set(listed) == {stored_id, fine_id}
    assert listed[stored_id].outcome_differs is True
    assert listed[fine_id].outcome_differs is False and listed[fine_id].valid
