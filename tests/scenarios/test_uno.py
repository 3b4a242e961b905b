"""Scenarios for UNO calls and catches (digest §5).

Most start from a two-player round in which bob comes down to two cards on his own: with two players
every Skip and Reverse gives him the turn again.
"""

from __future__ import annotations

from service.rules import (
    Accept,
    CallUno,
    Catch,
    Colour,
    Draw,
    Event,
    Play,
    Rule,
    Supply,
    Variant,
    fold,
)
from service.rules.events import (
    Awaiting,
    CardDrawn,
    CardPlayed,
    CardsTaken,
    LauncherPressed,
    Prompted,
    UnoCalled,
    UnoCaught,
)

from .support import given, hand, one, run, scenario, then_events, then_violation, toks

ANN, BOB, CY = 0, 1, 2

ANN_HAND = "B5 G8 Y8 R8 B9 G9 Y9"
PILE = "G1 G2 G6 G7"
DOWN_TO_TWO = [Play(BOB, one(t)) for t in ("RS", "YS", "GS", "BS", "BR")]


def two_left(last_two: str = "B3 B4", variant: Variant = Variant.CLASSIC) -> list[Event]:
    """bob, on turn, holds ``last_two``; ann holds seven cards; the pile starts G1 G2 G6 G7."""
    log = given(variant, 2, {BOB: f"RS YS GS BS BR {last_two}", ANN: ANN_HAND}, "R5", PILE, dealer=ANN)
    log = run(log, *DOWN_TO_TWO)
    assert hand(fold(log), BOB) == last_two.split()
    assert log[-1] == Prompted(BOB, Awaiting.PLAY)
    return log


def one_left_uncalled() -> list[Event]:
    """bob played B3 without calling UNO; it is ann's turn."""
    return run(two_left(), Play(BOB, one("B3")))


# --- uno.call ------------------------------------------------------------------------------------------


@scenario("uno.call")
def test_calling_uno_with_the_play_that_leaves_one_card() -> None:
    log = two_left()
    then_events(
        log,
        Play(BOB, one("B3"), uno=True),
        [CardPlayed(BOB, one("B3"), uno=True), Prompted(ANN, Awaiting.PLAY)],
    )
    called = run(log, Play(BOB, one("B3"), uno=True))
    then_violation(called, Catch(ANN, BOB), Rule.UNO_CATCH_INVALID, "bob")


@scenario("uno.call")
def test_calling_uno_with_a_play_that_does_not_leave_one_card_is_rejected() -> None:
    log = given(Variant.CLASSIC, 2, {BOB: "RS YS GS BS BR B3 B4", ANN: ANN_HAND}, "R5", PILE, dealer=ANN)
    log = run(log, *DOWN_TO_TWO[:4])
    then_violation(log, Play(BOB, one("BR"), uno=True), Rule.UNO_CALL, "bob", "BR", "2 cards")


@scenario("uno.call")
def test_a_separate_call_while_holding_one_card_even_out_of_turn() -> None:
    log = one_left_uncalled()
    assert log[-1] == Prompted(ANN, Awaiting.PLAY)
    then_events(log, CallUno(BOB), [UnoCalled(BOB)])
    called = run(log, CallUno(BOB))
    then_violation(called, Catch(ANN, BOB), Rule.UNO_CATCH_INVALID, "bob")


@scenario("uno.call")
def test_a_call_by_a_player_not_holding_exactly_one_card_is_rejected() -> None:
    then_violation(two_left(), CallUno(BOB), Rule.UNO_CALL, "bob", "2 cards")
    then_violation(one_left_uncalled(), CallUno(ANN), Rule.UNO_CALL, "ann", "7 cards")


@scenario("uno.call", "action.wild-draw-four")
def test_uno_may_be_called_while_a_wild_draw_four_waits_for_its_answer() -> None:
    log = run(two_left("W+4 B4"), Play(BOB, one("W+4"), colour=Colour.BLUE))
    assert log[-1] == Prompted(ANN, Awaiting.WD4_RESPONSE, new_turn=False)
    then_events(log, CallUno(BOB), [UnoCalled(BOB)])


# --- uno.catch -----------------------------------------------------------------------------------------


@scenario("uno.catch", "uno.penalty")
def test_catching_a_player_who_did_not_call() -> None:
    log = one_left_uncalled()
    then_events(log, Catch(ANN, BOB), [UnoCaught(ANN, BOB), CardsTaken(BOB, toks("G1 G2"), Rule.UNO_PENALTY)])
    state = fold(run(log, Catch(ANN, BOB)))
    assert hand(state, BOB) == ["B4", "G1", "G2"]
    assert state.turn == ANN  # a catch is not a turn: ann is still to play


@scenario("uno.catch")
def test_any_other_player_may_catch_out_of_turn() -> None:
    # Three players all playing reds on R5 until bob comes down to B1; cy is on turn, ann catches.
    hands = {
        BOB: "R1 R2 R3 R4 R6 R7 B1",
        CY: "R1 R2 R3 R4 R6 G3 G4",
        ANN: "R8 R8 R9 R9 R0 G1 G2",
    }
    log = given(Variant.CLASSIC, 3, hands, "R5", "Y1 Y2", dealer=ANN)
    rounds = [
        ("R1", "R1", "R8"),
        ("R2", "R2", "R8"),
        ("R3", "R3", "R9"),
        ("R4", "R4", "R9"),
        ("R6", "R6", "R0"),
    ]
    for bob, cy, ann in rounds:
        log = run(log, Play(BOB, one(bob)), Play(CY, one(cy)), Play(ANN, one(ann)))
    log = run(log, Play(BOB, one("R7")))
    assert log[-1] == Prompted(CY, Awaiting.PLAY)
    then_events(log, Catch(ANN, BOB), [UnoCaught(ANN, BOB), CardsTaken(BOB, toks("Y1 Y2"), Rule.UNO_PENALTY)])


@scenario("uno.catch", "action.draw-two")
def test_the_plays_own_draw_two_does_not_close_the_window() -> None:
    log = two_left("B+2 B4")
    log = run(log, Play(BOB, one("B+2")))
    assert log[-2:] == [CardsTaken(ANN, toks("G1 G2"), Rule.ACTION_DRAW_TWO), Prompted(BOB, Awaiting.PLAY)]
    then_events(log, Catch(ANN, BOB), [UnoCaught(ANN, BOB), CardsTaken(BOB, toks("G6 G7"), Rule.UNO_PENALTY)])


@scenario("uno.catch", "action.wild-draw-four")
def test_a_catch_may_come_before_the_wild_draw_four_answer() -> None:
    log = run(two_left("W+4 B4"), Play(BOB, one("W+4"), colour=Colour.BLUE))
    then_events(log, Catch(ANN, BOB), [UnoCaught(ANN, BOB), CardsTaken(BOB, toks("G1 G2"), Rule.UNO_PENALTY)])
    caught = run(log, Catch(ANN, BOB))
    assert fold(caught).awaiting is Awaiting.WD4_RESPONSE  # ann still has to answer


# --- uno.penalty ---------------------------------------------------------------------------------------


@scenario("uno.penalty", "attack.launcher")
def test_in_uno_attack_the_penalty_is_two_launcher_presses() -> None:
    log = run(two_left(variant=Variant.ATTACK), Play(BOB, one("B3")))
    then_events(
        log,
        Catch(ANN, BOB, Supply(presses=(1, 2))),
        [
            UnoCaught(ANN, BOB),
            LauncherPressed(BOB, toks("G1"), Rule.UNO_PENALTY),
            LauncherPressed(BOB, toks("G2 G6"), Rule.UNO_PENALTY),
        ],
    )


@scenario("uno.penalty", "uno.catch.invalid")
def test_a_penalty_that_fires_nothing_still_ends_the_window() -> None:
    log = run(two_left(variant=Variant.ATTACK), Play(BOB, one("B3")))
    caught = run(log, Catch(ANN, BOB, Supply(presses=(0, 0))))
    assert caught[-3:] == [
        UnoCaught(ANN, BOB),
        LauncherPressed(BOB, (), Rule.UNO_PENALTY),
        LauncherPressed(BOB, (), Rule.UNO_PENALTY),
    ]
    assert hand(fold(caught), BOB) == ["B4"]
    then_violation(caught, Catch(ANN, BOB, Supply(presses=(0, 0))), Rule.UNO_CATCH_INVALID, "bob")


# --- uno.catch.invalid ---------------------------------------------------------------------------------


@scenario("uno.catch.invalid")
def test_a_player_cannot_catch_themself() -> None:
    then_violation(one_left_uncalled(), Catch(BOB, BOB), Rule.UNO_CATCH_INVALID, "bob", "themself")


@scenario("uno.catch.invalid")
def test_a_player_holding_other_than_one_card_cannot_be_caught() -> None:
    then_violation(two_left(), Catch(ANN, BOB), Rule.UNO_CATCH_INVALID, "bob", "2 cards")
    then_violation(one_left_uncalled(), Catch(BOB, ANN), Rule.UNO_CATCH_INVALID, "ann", "7 cards")


@scenario("uno.catch.invalid")
def test_the_window_closes_when_the_next_turn_begins() -> None:
    drew = run(one_left_uncalled(), Draw(ANN))
    # G1 does not match B3: ann's turn is over, bob's has begun.
    assert drew[-2:] == [CardDrawn(ANN, one("G1")), Prompted(BOB, Awaiting.PLAY)]
    then_violation(drew, Catch(ANN, BOB), Rule.UNO_CATCH_INVALID, "bob")
    played = run(one_left_uncalled(), Play(ANN, one("B5")))
    then_violation(played, Catch(ANN, BOB), Rule.UNO_CATCH_INVALID, "bob")


@scenario("uno.catch.invalid", "wd4.accept")
def test_the_wild_draw_four_answer_closes_the_window() -> None:
    log = run(two_left("W+4 B4"), Play(BOB, one("W+4"), colour=Colour.BLUE), Accept(ANN))
    then_violation(log, Catch(ANN, BOB), Rule.UNO_CATCH_INVALID, "bob")
