"""The handlers ``state.py`` writes by field position for speed against their plain reference versions
(``tests/evolve_reference.py``), event by event, over bot-played games of every rule set."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.play.simulate import play_game
from service.rules import Variant, make_options
from service.rules.events import GameCreated
from service.rules.options import UNSUPPORTED
from service.rules.state import evolve, new_state
from tests.evolve_reference import REFERENCE, evolve_plainly
from tests.tiers import examples


@st.composite
def games(draw: st.DrawFn) -> tuple[Variant, int, int, dict[str, Any]]:
    """A rule set, a table size, a seed and a random combination of the house rules it supports (the
    house rules reach the branches of the positional handlers: stacking, seven-o, jump-in)."""
    variant = draw(st.sampled_from(list(Variant)))
    options: dict[str, Any] = {"stacking": draw(st.sampled_from(["off", "draw-two", "draw-four", "any"]))}
    for name in ("jump_in", "seven_o", "draw_to_match", "force_play", "wd4_any_time"):
        if name not in UNSUPPORTED[variant] and draw(st.booleans()):
            options[name] = True
    return variant, draw(st.integers(2, 10)), draw(st.integers(0, 2**32)), options


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(games())
def test_the_positional_handlers_agree_with_the_plain_ones_event_by_event(
    game: tuple[Variant, int, int, dict[str, Any]],
) -> None:
    variant, players, seed, options = game
    played = play_game(variant, players, seed, options=make_options(variant, options), checks=False)
    first = played.events[0]
    assert isinstance(first, GameCreated)
    state = new_state(first)
    for position, event in enumerate(played.events[1:], start=2):
        fast = evolve(state, event)
        assert fast == evolve_plainly(state, event), (position, event)
        state = fast


def test_bot_games_reach_every_handler_written_by_position() -> None:
    seen: set[type] = set()
    for variant in Variant:
        for event in play_game(variant, 3, 1, checks=False).events:
            seen.add(type(event))
    assert set(REFERENCE) <= seen
