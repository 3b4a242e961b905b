"""Scenarios for the classic action cards: Skip, Reverse, Draw Two, Wild, Wild Draw Four (digest §4)."""

from __future__ import annotations

import pytest

from service.rules import Accept, Choose, Colour, Draw, Event, Play, Rule, Variant, fold
from service.rules.events import (
    Awaiting,
    CardPlayed,
    CardsTaken,
    DirectionReversed,
    Prompted,
    Wd4Accepted,
)

from .support import given, one, run, scenario, then_events, then_violation, toks

ANN, BOB, CY, DEE = 0, 1, 2, 3

BOB_HAND = "RS RR R+2 W W+4 G7 Y7"
CY_HAND = "B+2 B2 B3 B4 B6 B7 B8"
ANN_HAND = "R1 R2 R3 R4 R6 R7 R8"
PILE = "Y1 Y2 Y3 Y4 Y6"


def three(options: dict[str, bool] | None = None) -> list[Event]:
    """Three players, ann deals, bob starts on R5."""
    hands = {BOB: BOB_HAND, CY: CY_HAND, ANN: ANN_HAND}
    return given(Variant.CLASSIC, 3, hands, "R5", PILE, dealer=ANN, options=options)


def two(options: dict[str, bool] | None = None) -> list[Event]:
    """Two players, ann deals, bob starts on R5."""
    return given(Variant.CLASSIC, 2, {BOB: BOB_HAND, ANN: ANN_HAND}, "R5", PILE, dealer=ANN, options=options)


# --- action.skip ---------------------------------------------------------------------------------------


@scenario("action.skip")
def test_skip_the_next_player_loses_the_turn() -> None:
    then_events(three(), Play(BOB, one("RS")), [CardPlayed(BOB, one("RS")), Prompted(ANN, Awaiting.PLAY)])


@scenario("action.skip")
def test_skip_with_two_players_gives_the_player_another_turn() -> None:
    then_events(two(), Play(BOB, one("RS")), [CardPlayed(BOB, one("RS")), Prompted(BOB, Awaiting.PLAY)])


# --- action.reverse ------------------------------------------------------------------------------------


@scenario("action.reverse")
def test_reverse_flips_the_direction_of_play() -> None:
    log = three()
    then_events(
        log,
        Play(BOB, one("RR")),
        [CardPlayed(BOB, one("RR")), DirectionReversed(), Prompted(ANN, Awaiting.PLAY)],
    )
    reversed_ = run(log, Play(BOB, one("RR")))
    assert fold(reversed_).direction == -1
    # Still going right: after ann comes cy.
    then_events(reversed_, Play(ANN, one("R1")), [CardPlayed(ANN, one("R1")), Prompted(CY, Awaiting.PLAY)])


@scenario("action.reverse")
def test_reverse_with_four_players_turns_play_back_past_the_player() -> None:
    log = given(Variant.CLASSIC, 4, {BOB: BOB_HAND, ANN: ANN_HAND}, "R5", PILE, dealer=ANN)
    log = run(log, Play(BOB, one("RR")))
    assert log[-1] == Prompted(ANN, Awaiting.PLAY)
    then_events(log, Play(ANN, one("R1")), [CardPlayed(ANN, one("R1")), Prompted(DEE, Awaiting.PLAY)])


@scenario("action.reverse")
def test_reverse_with_two_players_acts_as_skip() -> None:
    then_events(
        two(),
        Play(BOB, one("RR")),
        [CardPlayed(BOB, one("RR")), DirectionReversed(), Prompted(BOB, Awaiting.PLAY)],
    )


@scenario("action.reverse")
def test_reverse_with_two_players_passes_the_turn_when_the_option_is_off() -> None:
    then_events(
        two({"two_player_reverse_skips": False}),
        Play(BOB, one("RR")),
        [CardPlayed(BOB, one("RR")), DirectionReversed(), Prompted(ANN, Awaiting.PLAY)],
    )


# --- action.draw-two -----------------------------------------------------------------------------------


@scenario("action.draw-two")
def test_draw_two_the_next_player_draws_two_and_loses_the_turn() -> None:
    then_events(
        three(),
        Play(BOB, one("R+2")),
        [
            CardPlayed(BOB, one("R+2")),
            CardsTaken(CY, toks("Y1 Y2"), Rule.ACTION_DRAW_TWO),
            Prompted(ANN, Awaiting.PLAY),
        ],
    )
    state = fold(run(three(), Play(BOB, one("R+2"))))
    assert len(state.hands[CY]) == 9


@scenario("action.draw-two", "turn.order")
def test_draw_two_cannot_be_stacked_by_its_victim() -> None:
    log = run(three(), Play(BOB, one("R+2")))
    then_violation(log, Play(CY, one("B+2")), Rule.TURN_ORDER, "ann", "cy")


@scenario("action.draw-two")
def test_draw_two_with_two_players_gives_the_player_another_turn() -> None:
    then_events(
        two(),
        Play(BOB, one("R+2")),
        [
            CardPlayed(BOB, one("R+2")),
            CardsTaken(ANN, toks("Y1 Y2"), Rule.ACTION_DRAW_TWO),
            Prompted(BOB, Awaiting.PLAY),
        ],
    )


# --- action.wild ---------------------------------------------------------------------------------------


@scenario("action.wild")
@pytest.mark.parametrize("colour", list(Colour))
def test_wild_the_player_chooses_the_active_colour(colour: Colour) -> None:
    log = three()
    then_events(
        log,
        Play(BOB, one("W"), colour=colour),
        [CardPlayed(BOB, one("W"), colour), Prompted(CY, Awaiting.PLAY)],
    )
    state = fold(run(log, Play(BOB, one("W"), colour=colour)))
    assert state.colour is colour
    assert state.top is one("W")


@scenario("action.wild")
def test_a_colour_choice_must_name_a_colour_and_nothing_else() -> None:
    log = given(Variant.CLASSIC, 3, {}, "W", dealer=ANN)
    assert log[-1] == Prompted(BOB, Awaiting.COLOUR, pointer=BOB, new_turn=False)
    then_violation(log, Choose(BOB), Rule.ACTION_WILD)
    then_violation(log, Choose(BOB, colour=Colour.RED, target=CY), Rule.ACTION_WILD)


# --- action.wild-draw-four -----------------------------------------------------------------------------


@scenario("action.wild-draw-four")
def test_wild_draw_four_the_colour_is_chosen_and_the_victim_must_answer() -> None:
    log = three()
    then_events(
        log,
        Play(BOB, one("W+4"), colour=Colour.GREEN),
        [
            CardPlayed(BOB, one("W+4"), Colour.GREEN),
            Prompted(CY, Awaiting.WD4_RESPONSE, new_turn=False),
        ],
    )
    assert fold(run(log, Play(BOB, one("W+4"), colour=Colour.GREEN))).colour is Colour.GREEN


@scenario("action.wild-draw-four")
def test_nothing_but_an_answer_may_follow_a_wild_draw_four() -> None:
    log = run(three(), Play(BOB, one("W+4"), colour=Colour.BLUE))
    then_violation(log, Play(CY, one("B2")), Rule.ACTION_WILD_DRAW_FOUR, "cy")
    then_violation(log, Draw(CY), Rule.ACTION_WILD_DRAW_FOUR, "cy")
    then_violation(log, Play(ANN, one("R1")), Rule.ACTION_WILD_DRAW_FOUR, "cy")
    then_events(
        log,
        Accept(CY),
        [
            Wd4Accepted(CY),
            CardsTaken(CY, toks("Y1 Y2 Y3 Y4"), Rule.WD4_ACCEPT),
            Prompted(ANN, Awaiting.PLAY),
        ],
    )
