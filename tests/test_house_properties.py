"""Property tests (hypothesis) for the house rules: random rule sets, table sizes and house-rule
combinations, played to the end by the bots, keep every invariant of the rules.

* cards are conserved after every event (nothing created or lost by a stack, a swap, a rotation, a draw
  to a match or a reshuffle inside any of them);
* folding the log gives the decider's state, for the whole log and for every command's prefix;
* every game ends — or, only where ``force_play`` makes a cycle of forced moves possible, is stopped as
  stalled after a position came back :data:`~service.play.simulate.STALL_REPEATS` times;
* the house rules the game was created with are the ones its first event records, and the events only a
  house rule produces never appear in a game without it.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.play.simulate import play_game
from service.rules import Variant, conservation_error, evolve, execute, fold, make_options
from service.rules.events import (
    Awaiting,
    CardDrawn,
    GameCreated,
    HandsRotated,
    HandsTraded,
    JumpedIn,
    StackAccepted,
)
from service.rules.options import UNSUPPORTED
from tests.tiers import examples

GAME_SETTINGS = settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@st.composite
def house_games(draw: st.DrawFn) -> tuple[Variant, int, int, dict[str, Any]]:
    """A rule set, a table size, a seed and a random combination of the house rules it supports."""
    variant = draw(st.sampled_from(list(Variant)))
    options: dict[str, Any] = {"stacking": draw(st.sampled_from(["off", "draw-two", "draw-four", "any"]))}
    for name in ("jump_in", "seven_o", "draw_to_match", "force_play", "wd4_any_time"):
        if name not in UNSUPPORTED[variant] and draw(st.booleans()):
            options[name] = True
    return variant, draw(st.integers(2, 10)), draw(st.integers(0, 2**32)), options


@GAME_SETTINGS
@given(house_games())
def test_cards_are_conserved_and_the_log_folds_to_the_state(
    game: tuple[Variant, int, int, dict[str, Any]],
) -> None:
    variant, players, seed, options = game
    played = play_game(variant, players, seed, options=make_options(variant, options), checks=False)
    state = fold(played.events[:1])
    for command, events in played.steps:
        outcome = execute(state, command)
        assert not hasattr(outcome, "rule"), outcome
        assert outcome[0] == events  # deterministic: the same command on the same state
        for event in events:
            state = evolve(state, event)
            assert conservation_error(state) is None, (event, options)
        assert state == outcome[1]
    assert fold(played.events) == played.state == state


@GAME_SETTINGS
@given(house_games())
def test_every_game_ends_or_stalls_only_in_a_forced_cycle(
    game: tuple[Variant, int, int, dict[str, Any]],
) -> None:
    variant, players, seed, options = game
    played = play_game(variant, players, seed, options=make_options(variant, options))
    if played.stalled:
        assert options.get("force_play"), f"stalled without force_play: {options}"
    else:
        assert played.state.awaiting is Awaiting.GAME_OVER
        assert played.state.winner is not None


@GAME_SETTINGS
@given(house_games())
def test_house_rule_events_come_only_from_their_house_rule(
    game: tuple[Variant, int, int, dict[str, Any]],
) -> None:
    variant, players, seed, options = game
    played = play_game(variant, players, seed, options=make_options(variant, options), checks=False)
    first = played.events[0]
    assert isinstance(first, GameCreated)
    assert first.options.house_rules() == {k: v for k, v in options.items() if v not in (False, "off")}
    kinds = {type(event) for event in played.events}
    if not options.get("jump_in"):
        assert JumpedIn not in kinds
    if not options.get("seven_o"):
        assert HandsRotated not in kinds
        if variant is not Variant.ATTACK:
            assert HandsTraded not in kinds
    if options["stacking"] == "off":
        assert StackAccepted not in kinds
        assert all(state_pending <= 4 for state_pending in _pending_totals(played.events))
    if not options.get("draw_to_match"):
        for _, events in played.steps:
            assert sum(isinstance(e, CardDrawn) for e in events) <= 1


def _pending_totals(events: list[Any]) -> list[int]:
    state = fold(events[:1])
    totals = []
    for event in events[1:]:
        state = evolve(state, event)
        totals.append(state.pending)
    return totals
