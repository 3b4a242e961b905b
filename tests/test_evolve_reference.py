"""The code written by field position for speed against plain reference versions, over bot-played games
of every rule set: ``state.py``'s handlers (``tests/evolve_reference.py``) event by event, and the bots'
``seat_view`` at every state for every seat."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.play.bots import seat_view
from service.play.policy import SeatView
from service.play.simulate import play_game
from service.rules import Variant, make_options
from service.rules.events import Event, GameCreated
from service.rules.options import UNSUPPORTED
from service.rules.state import State, evolve, new_state
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


def _played(game: tuple[Variant, int, int, dict[str, Any]]) -> tuple[State, tuple[Event, ...]]:
    """The bots' game of ``game``: the state its creation starts, and the events after it."""
    variant, players, seed, options = game
    played = play_game(variant, players, seed, options=make_options(variant, options), checks=False)
    first = played.events[0]
    assert isinstance(first, GameCreated)
    return new_state(first), tuple(played.events[1:])


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(games())
def test_the_positional_handlers_agree_with_the_plain_ones_event_by_event(
    game: tuple[Variant, int, int, dict[str, Any]],
) -> None:
    state, events = _played(game)
    for position, event in enumerate(events, start=2):
        fast = evolve(state, event)
        assert fast == evolve_plainly(state, event), (position, event)
        state = fast


def _seat_view_plainly(state: State, seat: int) -> SeatView:
    """``seat_view`` by keyword: what its positional build must equal."""
    return SeatView(
        awaiting=state.awaiting,
        colour=state.colour,
        direction=state.direction,
        variant=state.variant,
        options=state.options,
        drawn=state.drawn,
        top_by=state.top_by,
        jumpable=state.jumpable,
        pending=state.pending,
        exposed=state.exposed,
        seat=seat,
        hand=state.hands[seat],
        top=state.discard[-1],
        hand_sizes=tuple(len(hand) for hand in state.hands),
        wd4_hand=None if state.wd4 is None else len(state.wd4.hand),
    )


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(games())
def test_the_positional_seat_view_agrees_with_the_plain_one_at_every_state(
    game: tuple[Variant, int, int, dict[str, Any]],
) -> None:
    state, events = _played(game)
    for position, event in enumerate(events, start=2):
        state = evolve(state, event)
        if state.discard:  # a round in play: the view has a top card
            for seat in range(state.size):
                assert seat_view(state, seat) == _seat_view_plainly(state, seat), (position, seat)


def test_bot_games_reach_every_handler_written_by_position() -> None:
    seen: set[type] = set()
    for variant in Variant:
        for event in play_game(variant, 3, 1, checks=False).events:
            seen.add(type(event))
    assert set(REFERENCE) <= seen
