"""Scenarios for the Wild Draw Four answer: accept, challenge, and what makes it legal (digest §4)."""

from __future__ import annotations

from typing import Any

import pytest

from service.rules import Accept, Challenge, Colour, Event, Play, Rule, Variant, fold
from service.rules.events import (
    Awaiting,
    CardPlayed,
    CardsTaken,
    Prompted,
    Wd4Accepted,
    Wd4Challenged,
)

from .support import given, hand, one, run, scenario, then_events, then_violation, toks

ANN, BOB, CY = 0, 1, 2

# Three players, ann deals, bob (the offender) starts on R5, cy is the victim, ann comes after cy.
LEGAL = "W+4 G5 B5 G1 B2 Y3 GS"  # no red card: G5 and B5 match the top card's number, which does not count
ILLEGAL = "W+4 R9 G5 G1 B2 Y3 GS"  # R9 is of the active colour
CY_HAND = "G2 G3 B3 B4 Y4 Y6 B6"
PILE = "Y1 Y2 Y7 Y8 Y9 B7 B8 B9"


def played(
    bob: str, variant: Variant = Variant.CLASSIC, options: dict[str, Any] | None = None
) -> list[Event]:
    """Bob has played the Wild Draw Four, choosing green; cy must answer."""
    log = given(variant, 3, {BOB: bob, CY: CY_HAND}, "R5", PILE, dealer=ANN, options=options)
    return run(log, Play(BOB, one("W+4"), colour=Colour.GREEN))


# --- wd4.accept ----------------------------------------------------------------------------------------


@scenario("wd4.accept")
def test_accepting_the_victim_draws_four_and_loses_the_turn() -> None:
    log = played(LEGAL)
    then_events(
        log,
        Accept(CY),
        [Wd4Accepted(CY), CardsTaken(CY, toks("Y1 Y2 Y7 Y8"), Rule.WD4_ACCEPT), Prompted(ANN, Awaiting.PLAY)],
    )
    state = fold(run(log, Accept(CY)))
    assert hand(state, CY) == [*CY_HAND.split(), "Y1", "Y2", "Y7", "Y8"]
    assert state.colour is Colour.GREEN


@scenario("wd4.accept")
def test_an_illegal_wild_draw_four_accepted_stands() -> None:
    then_events(
        played(ILLEGAL),
        Accept(CY),
        [Wd4Accepted(CY), CardsTaken(CY, toks("Y1 Y2 Y7 Y8"), Rule.WD4_ACCEPT), Prompted(ANN, Awaiting.PLAY)],
    )


@scenario("wd4.accept")
@pytest.mark.parametrize("seat", [ANN, BOB])
def test_only_the_victim_may_accept(seat: int) -> None:
    then_violation(played(LEGAL), Accept(seat), Rule.WD4_ACCEPT, "cy")


@scenario("wd4.accept")
def test_accepting_with_no_wild_draw_four_waiting_is_rejected() -> None:
    log = run(played(LEGAL), Accept(CY))
    then_violation(log, Accept(ANN), Rule.WD4_ACCEPT)


# --- wd4.challenge -------------------------------------------------------------------------------------


@scenario("wd4.challenge")
@pytest.mark.parametrize("seat", [ANN, BOB])
def test_only_the_victim_may_challenge(seat: int) -> None:
    then_violation(played(ILLEGAL), Challenge(seat), Rule.WD4_CHALLENGE, "cy")


@scenario("wd4.challenge")
def test_a_challenge_after_accepting_is_rejected() -> None:
    log = run(played(ILLEGAL), Accept(CY))
    then_violation(log, Challenge(CY), Rule.WD4_CHALLENGE)


@scenario("wd4.challenge")
def test_a_challenge_with_no_wild_draw_four_is_rejected() -> None:
    log = given(Variant.CLASSIC, 3, {BOB: LEGAL}, "R5", dealer=ANN)
    then_violation(log, Challenge(BOB), Rule.WD4_CHALLENGE)


@scenario("wd4.challenge")
def test_a_challenge_shows_the_offenders_hand_as_it_was_when_playing() -> None:
    (verdict, *_) = run(played(ILLEGAL), Challenge(CY))[-3:]
    assert isinstance(verdict, Wd4Challenged)
    assert verdict.hand == toks(ILLEGAL)  # the Wild Draw Four included
    assert verdict.colour is Colour.RED  # the active colour when it was played
    assert verdict.offender == BOB
    assert verdict.player == CY


# --- wd4.challenge.upheld / failed ---------------------------------------------------------------------


@scenario("wd4.challenge.upheld", "wd4.legal")
def test_upheld_the_offender_draws_four_and_the_victim_takes_a_normal_turn() -> None:
    log = played(ILLEGAL)
    then_events(
        log,
        Challenge(CY),
        [
            Wd4Challenged(CY, BOB, True, toks(ILLEGAL), Colour.RED, toks("R9")),
            CardsTaken(BOB, toks("Y1 Y2 Y7 Y8"), Rule.WD4_CHALLENGE_UPHELD),
            Prompted(CY, Awaiting.PLAY),
        ],
    )
    after = run(log, Challenge(CY))
    state = fold(after)
    assert hand(state, CY) == CY_HAND.split()  # the victim draws nothing
    assert state.colour is Colour.GREEN  # the chosen colour stands
    then_events(after, Play(CY, one("G2")), [CardPlayed(CY, one("G2")), Prompted(ANN, Awaiting.PLAY)])


@scenario("wd4.challenge.failed", "wd4.legal")
def test_failed_the_victim_draws_six_and_loses_the_turn() -> None:
    log = played(LEGAL)
    then_events(
        log,
        Challenge(CY),
        [
            Wd4Challenged(CY, BOB, False, toks(LEGAL), Colour.RED, ()),
            CardsTaken(CY, toks("Y1 Y2 Y7 Y8 Y9 B7"), Rule.WD4_CHALLENGE_FAILED),
            Prompted(ANN, Awaiting.PLAY),
        ],
    )
    state = fold(run(log, Challenge(CY)))
    assert len(state.hands[BOB]) == 6
    assert len(state.hands[CY]) == 13
    assert state.colour is Colour.GREEN


# --- wd4.legal -----------------------------------------------------------------------------------------


@scenario("wd4.legal")
def test_an_illegal_wild_draw_four_is_still_accepted_onto_the_table() -> None:
    log = given(Variant.CLASSIC, 3, {BOB: ILLEGAL, CY: CY_HAND}, "R5", PILE, dealer=ANN)
    then_events(
        log,
        Play(BOB, one("W+4"), colour=Colour.BLUE),
        [CardPlayed(BOB, one("W+4"), Colour.BLUE), Prompted(CY, Awaiting.WD4_RESPONSE, new_turn=False)],
    )


@scenario("wd4.legal", "wd4.challenge.failed")
def test_a_card_matching_the_top_cards_symbol_does_not_make_it_illegal() -> None:
    # R+2 first: bob draws 2 and loses the turn; cy plays W+4 holding G+2 and B+2 but no red card.
    cy = "W+4 G+2 B+2 G1 B3 G3 B4"
    log = given(Variant.CLASSIC, 3, {CY: cy}, "R+2", PILE, dealer=ANN)
    log = run(log, Play(CY, one("W+4"), colour=Colour.YELLOW))
    then_events(
        log,
        Challenge(ANN),
        [
            Wd4Challenged(ANN, CY, False, toks(cy), Colour.RED, ()),
            CardsTaken(ANN, toks("Y7 Y8 Y9 B7 B8 B9"), Rule.WD4_CHALLENGE_FAILED),
            Prompted(BOB, Awaiting.PLAY),
        ],
    )


@scenario("wd4.legal", "wd4.challenge.upheld")
def test_the_active_colour_chosen_for_a_wild_is_what_counts() -> None:
    # bob plays W choosing blue; cy holds B3 when playing W+4, so the play was illegal.
    log = given(Variant.CLASSIC, 3, {BOB: "W R1 R2 R3 R4 R6 R7", CY: "W+4 B3 G1 G3 Y4 Y6 G6"}, "R5", PILE)
    log = run(log, Play(BOB, one("W"), colour=Colour.BLUE), Play(CY, one("W+4"), colour=Colour.RED))
    then_events(
        log,
        Challenge(ANN),
        [
            Wd4Challenged(ANN, CY, True, toks("W+4 B3 G1 G3 Y4 Y6 G6"), Colour.BLUE, toks("B3")),
            CardsTaken(CY, toks("Y1 Y2 Y7 Y8"), Rule.WD4_CHALLENGE_UPHELD),
            Prompted(ANN, Awaiting.PLAY),
        ],
    )


@scenario("wd4.legal", "wd4.challenge.failed")
def test_classic_other_wilds_in_hand_do_not_make_it_illegal() -> None:
    bob = "W+4 W W+4 G1 B2 Y3 GS"
    then_events(
        played(bob),
        Challenge(CY),
        [
            Wd4Challenged(CY, BOB, False, toks(bob), Colour.RED, ()),
            CardsTaken(CY, toks("Y1 Y2 Y7 Y8 Y9 B7"), Rule.WD4_CHALLENGE_FAILED),
            Prompted(ANN, Awaiting.PLAY),
        ],
    )


@scenario("wd4.legal", "wd4.challenge.upheld")
@pytest.mark.parametrize(
    ("bob", "matching"), [("W+4 W G1 B2 Y3 GS B5", "W"), ("W+4 WVL W+4 G1 B2 Y3 GS", "WVL W+4")]
)
def test_sonic_other_wilds_in_hand_make_it_illegal(bob: str, matching: str) -> None:
    then_events(
        played(bob, Variant.SONIC),
        Challenge(CY),
        [
            Wd4Challenged(CY, BOB, True, toks(bob), Colour.RED, toks(matching)),
            CardsTaken(BOB, toks("Y1 Y2 Y7 Y8"), Rule.WD4_CHALLENGE_UPHELD),
            Prompted(CY, Awaiting.PLAY),
        ],
    )


@scenario("wd4.legal", "wd4.challenge.failed")
def test_sonic_wilds_do_not_block_with_the_option_off() -> None:
    bob = "W+4 W G1 B2 Y3 GS B5"
    then_events(
        played(bob, Variant.SONIC, {"wd4_wilds_block": False}),
        Challenge(CY),
        [
            Wd4Challenged(CY, BOB, False, toks(bob), Colour.RED, ()),
            CardsTaken(CY, toks("Y1 Y2 Y7 Y8 Y9 B7"), Rule.WD4_CHALLENGE_FAILED),
            Prompted(ANN, Awaiting.PLAY),
        ],
    )
