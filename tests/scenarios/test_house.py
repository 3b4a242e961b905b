"""Scenarios for the house rules (digest §9) and the option check that guards them (``setup.options``).

Three players unless said otherwise: ann (seat 0) deals, bob (seat 1) starts, then cy (seat 2). Every
expected event is written out by hand from the digest.
"""

from __future__ import annotations

from typing import Any

import pytest

from service.rules import (
    Accept,
    CallUno,
    Catch,
    Challenge,
    Colour,
    Draw,
    Event,
    OptionError,
    Pass,
    Play,
    Press,
    Rule,
    Supply,
    Variant,
    decide,
    execute,
    fold,
    make_options,
)
from service.rules.events import (
    Awaiting,
    CardDrawn,
    CardPlayed,
    CardsTaken,
    HandsRotated,
    HandsTraded,
    JumpedIn,
    LauncherPressed,
    PileReshuffled,
    Prompted,
    RoundEnded,
    StackAccepted,
    UnoCaught,
    Wd4Accepted,
    Wd4Challenged,
)

from .support import given, given_hands, hand, one, run, scenario, then_events, then_violation, toks

ANN, BOB, CY = 0, 1, 2
PILE = "Y1 Y2 Y7 Y8 Y9 G8 G9 G4 B8 B9"
FILLER = "G2 G3 B3 B4 Y4 Y6 B6"  # a hand with no red card, no wild, no draw card


def table(
    bob: str,
    cy: str = FILLER,
    ann: str | None = None,
    *,
    first: str = "R5",
    options: dict[str, Any] | None = None,
    variant: Variant = Variant.CLASSIC,
) -> list[Event]:
    """A dealt round: bob to play on ``first``."""
    hands = {BOB: bob, CY: cy} | ({ANN: ann} if ann is not None else {})
    return given(variant, 3, hands, first, PILE, dealer=ANN, options=options)


# --- setup.options -------------------------------------------------------------------------------------


@scenario("setup.options")
@pytest.mark.parametrize(
    ("variant", "given", "named"),
    [
        (Variant.CLASSIC, {"stack_sevens": True}, "stack_sevens"),
        (Variant.CLASSIC, {"stacking": True}, "stacking"),
        (Variant.CLASSIC, {"stacking": "all"}, "stacking"),
        (Variant.SONIC, {"jump_in": "yes"}, "jump_in"),
        (Variant.MARIO_KART, {"seven_o": 1}, "seven_o"),
        (Variant.ATTACK, {"draw_to_match": True}, "draw_to_match"),
        (Variant.ATTACK, {"force_play": False}, "force_play"),  # not attack's, even when off
        (Variant.ATTACK, {"wd4_any_time": True}, "wd4_any_time"),
    ],
)
def test_an_unknown_bad_or_unsupported_option_is_refused_naming_it(
    variant: Variant, given: dict[str, Any], named: str
) -> None:
    with pytest.raises(OptionError) as refused:
        make_options(variant, given)
    assert refused.value.option == named
    assert named in str(refused.value)


@scenario("setup.options")
def test_every_supported_house_rule_is_recorded_and_the_off_ones_left_out() -> None:
    on = {"stacking": "any", "jump_in": True, "seven_o": True}
    options = make_options(Variant.ATTACK, {**on, "attack_follow_up": False})
    assert options.house_rules() == on
    assert "draw_to_match" not in options.to_json()
    assert make_options(Variant.CLASSIC).house_rules() == {}


# --- house.stacking --------------------------------------------------------------------------------------

TWO = {"stacking": "draw-two"}


@scenario("house.stacking")
def test_a_draw_two_waits_to_be_stacked_on_and_the_first_player_who_does_not_stack_takes_it_all() -> None:
    log = table("R+2 G5 G6 G7 B1 B2 B5", "G+2 G3 B3 B4 Y4 Y6 B6", options=TWO)
    then_events(
        log,
        Play(BOB, one("R+2")),
        [CardPlayed(BOB, one("R+2")), Prompted(CY, Awaiting.STACK, new_turn=False)],
    )
    log = run(log, Play(BOB, one("R+2")))
    assert fold(log).pending == 2
    then_events(
        log, Play(CY, one("G+2")), [CardPlayed(CY, one("G+2")), Prompted(ANN, Awaiting.STACK, new_turn=False)]
    )
    log = run(log, Play(CY, one("G+2")))
    then_events(
        log,
        Accept(ANN),
        [
            StackAccepted(ANN, 4),
            CardsTaken(ANN, toks("Y1 Y2 Y7 Y8"), Rule.HOUSE_STACKING),
            Prompted(BOB, Awaiting.PLAY),
        ],
    )
    after = fold(run(log, Accept(ANN)))
    assert (after.pending, after.stackers, len(after.hands[ANN])) == (0, (), 11)


@scenario("house.stacking")
def test_a_single_draw_two_accepted_is_taken_under_its_own_rule() -> None:
    log = run(table("R+2 G5 G6 G7 B1 B2 B5", options=TWO), Play(BOB, one("R+2")))
    then_events(
        log,
        Accept(CY),
        [
            StackAccepted(CY, 2),
            CardsTaken(CY, toks("Y1 Y2"), Rule.ACTION_DRAW_TWO),
            Prompted(ANN, Awaiting.PLAY),
        ],
    )


@scenario("house.stacking")
@pytest.mark.parametrize("mode", ["off", "draw-four"])
def test_a_draw_two_nothing_may_stack_on_is_taken_at_once(mode: str) -> None:
    log = table("R+2 G5 G6 G7 B1 B2 B5", "G+2 G3 B3 B4 Y4 Y6 B6", options={"stacking": mode})
    then_events(
        log,
        Play(BOB, one("R+2")),
        [
            CardPlayed(BOB, one("R+2")),
            CardsTaken(CY, toks("Y1 Y2"), Rule.ACTION_DRAW_TWO),
            Prompted(ANN, Awaiting.PLAY),
        ],
    )


@scenario("house.stacking")
def test_while_a_penalty_waits_anything_but_a_stack_or_an_accept_by_its_victim_breaks_stacking() -> None:
    log = run(table("R+2 G5 G6 G7 B1 B2 B5", "G+2 R3 B3 B4 Y4 Y6 B6", options=TWO), Play(BOB, one("R+2")))
    then_violation(log, Play(CY, one("R3")), Rule.HOUSE_STACKING, "R3", "R+2")  # matches, but does not stack
    then_violation(log, Draw(CY), Rule.HOUSE_STACKING, "cy", "2 cards")
    then_violation(log, Pass(CY), Rule.HOUSE_STACKING)
    then_violation(log, Accept(ANN), Rule.HOUSE_STACKING, "cy")
    then_violation(log, Play(ANN, one("G2")), Rule.HOUSE_STACKING)
    then_violation(log, Challenge(CY), Rule.WD4_CHALLENGE)  # a Draw Two is never challenged


@scenario("house.stacking", "wd4.challenge.failed")
def test_any_stacks_a_wild_draw_four_on_a_draw_two_and_a_failed_challenge_costs_the_total_plus_two() -> None:
    # cy holds no red card when stacking the W+4 on the red Draw Two: the W+4 is legal.
    log = table("R+2 G5 G6 G7 B1 B2 B5", "W+4 G3 B3 B4 Y4 Y6 B6", options={"stacking": "any"})
    log = run(log, Play(BOB, one("R+2")), Play(CY, one("W+4"), colour=Colour.BLUE))
    state = fold(log)
    assert (state.awaiting, state.turn, state.pending, state.stackers) == (
        Awaiting.WD4_RESPONSE,
        ANN,
        6,
        (BOB, CY),
    )
    then_events(
        log,
        Challenge(ANN),
        [
            Wd4Challenged(ANN, CY, False, toks("W+4 G3 B3 B4 Y4 Y6 B6"), Colour.RED, ()),
            CardsTaken(ANN, toks("Y1 Y2 Y7 Y8 Y9 G8 G9 G4"), Rule.WD4_CHALLENGE_FAILED),
            Prompted(BOB, Awaiting.PLAY),
        ],
    )


@scenario("house.stacking", "wd4.challenge.upheld")
def test_an_upheld_challenge_of_a_stacked_wild_draw_four_gives_the_offender_the_whole_total() -> None:
    log = table("R+2 G5 G6 G7 B1 B2 B5", "W+4 R3 B3 B4 Y4 Y6 B6", options={"stacking": "any"})
    log = run(log, Play(BOB, one("R+2")), Play(CY, one("W+4"), colour=Colour.BLUE))
    then_events(
        log,
        Challenge(ANN),
        [
            Wd4Challenged(ANN, CY, True, toks("W+4 R3 B3 B4 Y4 Y6 B6"), Colour.RED, toks("R3")),
            CardsTaken(CY, toks("Y1 Y2 Y7 Y8 Y9 G8"), Rule.WD4_CHALLENGE_UPHELD),
            Prompted(ANN, Awaiting.PLAY),
        ],
    )


@scenario("house.stacking", "wd4.accept")
def test_a_wild_draw_four_stacked_on_a_wild_draw_four_passes_eight_on() -> None:
    log = table("W+4 G5 G6 G7 B1 B2 B5", "W+4 G3 B3 B4 Y4 Y6 B6", options={"stacking": "draw-four"})
    log = run(log, Play(BOB, one("W+4"), colour=Colour.GREEN), Play(CY, one("W+4"), colour=Colour.BLUE))
    then_events(
        log,
        Accept(ANN),
        [
            Wd4Accepted(ANN),
            CardsTaken(ANN, toks("Y1 Y2 Y7 Y8 Y9 G8 G9 G4"), Rule.HOUSE_STACKING),
            Prompted(BOB, Awaiting.PLAY),
        ],
    )


@scenario("house.stacking")
def test_a_player_who_stacked_on_a_wild_draw_four_can_no_longer_challenge_it() -> None:
    log = table("W+4 G5 G6 G7 B1 B2 B5", "W+4 G3 B3 B4 Y4 Y6 B6", options={"stacking": "draw-four"})
    log = run(log, Play(BOB, one("W+4"), colour=Colour.GREEN), Play(CY, one("W+4"), colour=Colour.BLUE))
    then_violation(log, Challenge(CY), Rule.HOUSE_STACKING, "cy")
    then_violation(log, Challenge(BOB), Rule.WD4_CHALLENGE)  # bob started the stack: never the victim


@scenario("house.stacking")
@pytest.mark.parametrize("mode", ["any", "draw-four"])
def test_a_draw_two_never_stacks_on_a_wild_draw_four(mode: str) -> None:
    log = run(
        table("W+4 G5 G6 G7 B1 B2 B5", "G+2 G3 B3 B4 Y4 Y6 B6", options={"stacking": mode}),
        Play(BOB, one("W+4"), colour=Colour.GREEN),
    )
    then_violation(log, Play(CY, one("G+2")), Rule.HOUSE_STACKING, "G+2")


@scenario("house.stacking")
def test_a_wild_draw_four_under_draw_two_stacking_is_answered_as_without_stacking() -> None:
    log = run(
        table("W+4 G5 G6 G7 B1 B2 B5", "W+4 G3 B3 B4 Y4 Y6 B6", options=TWO),
        Play(BOB, one("W+4"), colour=Colour.GREEN),
    )
    then_violation(log, Play(CY, one("W+4"), colour=Colour.RED), Rule.ACTION_WILD_DRAW_FOUR)


@scenario("house.stacking", "round.end")
def test_going_out_on_a_stacked_draw_two_ends_the_round_and_the_next_player_takes_the_total() -> None:
    log = run(table("R+2 G5 G6 G7 B1 B2 B5", "G+2 G3 B3 B4 Y4 Y6 B6", options=TWO), Play(BOB, one("R+2")))
    state = fold(log)
    # What if cy held only the G+2: the table as it would be, built from the folded one.
    down_to_one = state._replace(hands=(state.hands[ANN], state.hands[BOB], toks("G+2")))
    outcome = decide(down_to_one, Play(CY, one("G+2")))
    assert not hasattr(outcome, "rule"), outcome
    assert outcome[:2] == (
        CardPlayed(CY, one("G+2")),
        CardsTaken(ANN, toks("Y1 Y2 Y7 Y8"), Rule.HOUSE_STACKING),
    )
    assert isinstance(outcome[2], RoundEnded) and outcome[2].winner == CY


@scenario("house.stacking", "attack.hit-two")
def test_uno_attack_stacks_hit_twos_and_the_total_is_pressed() -> None:
    log = given(
        Variant.ATTACK,
        3,
        {BOB: "RH2 G5 G6 G7 B1 B2 B5", CY: "GH2 G3 B3 B4 Y4 Y6 B6"},
        "R5",
        PILE,
        dealer=ANN,
        options=TWO,
    )
    log = run(log, Play(BOB, one("RH2")), Play(CY, one("GH2")))
    then_events(
        log,
        Accept(ANN, supply=Supply(presses=(1, 0, 2, 0))),
        [
            StackAccepted(ANN, 4),
            LauncherPressed(ANN, toks("Y1"), Rule.HOUSE_STACKING),
            LauncherPressed(ANN, (), Rule.HOUSE_STACKING),
            LauncherPressed(ANN, toks("Y2 Y7"), Rule.HOUSE_STACKING),
            LauncherPressed(ANN, (), Rule.HOUSE_STACKING),
            Prompted(BOB, Awaiting.PLAY),
        ],
    )
    then_violation(log, Press(ANN), Rule.HOUSE_STACKING)


# --- house.jump-in ---------------------------------------------------------------------------------------

JUMP = {"jump_in": True}


@scenario("house.jump-in")
def test_a_player_with_the_identical_card_jumps_in_and_play_goes_on_from_them() -> None:
    # bob plays B7 on B5; ann holds the other B7 and jumps in before cy acts: the turn goes on from ann.
    log = run(
        table("B7 G5 G6 G7 B1 B2 R1", ann="B7 Y3 Y4 Y5 Y6 G1 G3", first="B5", options=JUMP),
        Play(BOB, one("B7")),
    )
    then_events(
        log,
        Play(ANN, one("B7"), jump_in=True),
        [JumpedIn(ANN), CardPlayed(ANN, one("B7")), Prompted(BOB, Awaiting.PLAY)],
    )
    after = fold(run(log, Play(ANN, one("B7"), jump_in=True)))
    assert (after.turn_owner, after.previous) == (BOB, ANN)  # ann's turn came before bob's, not cy's


@scenario("house.jump-in", "action.skip")
def test_a_jumped_in_card_takes_effect_from_the_jumping_player() -> None:
    log = run(
        table("BS G5 G6 G7 B1 B2 R1", ann="BS Y3 Y4 Y5 Y6 G1 G3", first="B5", options=JUMP),
        Play(BOB, one("BS")),
    )
    assert fold(log).turn == ANN  # bob's Skip skipped cy
    # ann's Skip skips bob: cy plays next.
    then_events(
        log,
        Play(ANN, one("BS"), jump_in=True),
        [JumpedIn(ANN), CardPlayed(ANN, one("BS")), Prompted(CY, Awaiting.PLAY)],
    )


@scenario("house.jump-in", "turn.order")
def test_out_of_turn_without_the_option_is_turn_order() -> None:
    log = run(table("B7 G5 G6 G7 B1 B2 R1", ann="B7 Y3 Y4 Y5 Y6 G1 G3", first="B5"), Play(BOB, one("B7")))
    then_violation(log, Play(ANN, one("B7"), jump_in=True), Rule.TURN_ORDER, "jump")
    then_violation(log, Play(ANN, one("B7")), Rule.TURN_ORDER)


@scenario("house.jump-in")
def test_a_jump_in_needs_an_identical_card_by_another_player_before_the_next_turn_action() -> None:
    log = run(
        table(
            "B7 B3 G6 G7 B1 B2 R1",
            "G2 G3 B3 B4 Y4 Y6 B6",
            ann="B7 R7 Y4 Y5 Y6 G1 W",
            first="B5",
            options=JUMP,
        ),
        Play(BOB, one("B7")),
    )
    then_violation(log, Play(ANN, one("R7"), jump_in=True), Rule.HOUSE_JUMP_IN, "R7", "B7")  # same face only
    then_violation(log, Play(ANN, one("W"), colour=Colour.RED, jump_in=True), Rule.HOUSE_JUMP_IN)
    then_violation(log, Play(CY, one("B3"), jump_in=True), Rule.HOUSE_JUMP_IN)  # same colour only
    then_violation(log, Play(BOB, one("B3"), jump_in=True), Rule.HOUSE_JUMP_IN, "bob")  # his own top card
    then_violation(log, Play(ANN, one("G1"), jump_in=True), Rule.HOUSE_JUMP_IN, "G1")
    late = run(log, Draw(CY))  # cy's draw is the next turn action: too late now
    then_violation(late, Play(ANN, one("B7"), jump_in=True), Rule.HOUSE_JUMP_IN, "too late")


@scenario("house.jump-in", "house.stacking")
def test_no_jump_in_while_a_draw_penalty_waits_but_one_already_taken_does_not_block() -> None:
    stacking = run(
        table("R+2 G5 G6 G7 B1 B2 R1", ann="R+2 Y3 Y4 Y5 Y6 G1 G3", options={**JUMP, **TWO}),
        Play(BOB, one("R+2")),
    )
    then_violation(stacking, Play(ANN, one("R+2"), jump_in=True), Rule.HOUSE_JUMP_IN, "penalty")
    taken = run(
        table("R+2 G5 G6 G7 B1 B2 R1", ann="R+2 Y3 Y4 Y5 Y6 G1 G3", options=JUMP), Play(BOB, one("R+2"))
    )
    assert fold(taken).turn == ANN  # cy drew 2 and lost the turn; ann could play it in turn anyway
    then_events(
        taken,
        Play(ANN, one("R+2"), jump_in=True),
        [
            JumpedIn(ANN),
            CardPlayed(ANN, one("R+2")),
            CardsTaken(BOB, toks("Y7 Y8"), Rule.ACTION_DRAW_TWO),
            Prompted(CY, Awaiting.PLAY),
        ],
    )


@scenario("house.jump-in", "uno.catch.invalid")
def test_a_jump_in_closes_an_open_uno_window_like_any_turn_action_of_another_player() -> None:
    state = fold(table("B7 B1 B2 B3 B4 B6 G5", ann="B7 Y3 Y4 Y5 Y6 G1 G3", first="B5", options=JUMP))
    short = state._replace(hands=(state.hands[ANN], toks("B7 G5"), state.hands[CY]))  # bob down to two
    outcome = execute(short, Play(BOB, one("B7")))  # bob down to one card, no call: his window opens
    assert not hasattr(outcome, "rule"), outcome
    exposed = outcome[1]
    assert exposed.exposed == (BOB,)
    jumped = execute(exposed, Play(ANN, one("B7"), jump_in=True))
    assert not hasattr(jumped, "rule"), jumped
    then_violation(jumped[1], Catch(CY, BOB), Rule.UNO_CATCH_INVALID, "bob")


# --- house.seven-o ---------------------------------------------------------------------------------------

SEVEN_O = {"seven_o": True}


@scenario("house.seven-o")
def test_a_seven_swaps_hands_with_the_named_player_after_it_left_the_hand() -> None:
    log = table("R7 G5 G6 G7 B1 B2 B5", options=SEVEN_O)
    then_events(
        log,
        Play(BOB, one("R7"), target=CY),
        [CardPlayed(BOB, one("R7"), target=CY), HandsTraded(BOB, CY), Prompted(CY, Awaiting.PLAY)],
    )
    after = fold(run(log, Play(BOB, one("R7"), target=CY)))
    assert hand(after, BOB) == FILLER.split()
    assert hand(after, CY) == ["G5", "G6", "G7", "B1", "B2", "B5"]


@scenario("house.seven-o")
def test_a_seven_without_a_target_breaks_seven_o_unless_it_goes_out() -> None:
    log = table("R7 G5 G6 G7 B1 B2 B5", options=SEVEN_O)
    then_violation(log, Play(BOB, one("R7")), Rule.HOUSE_SEVEN_O, "R7")
    then_violation(log, Play(BOB, one("R7"), target=BOB), Rule.HOUSE_SEVEN_O, "another")
    plain = table("R7 G5 G6 G7 B1 B2 B5")  # without the option a 7 is a number card
    then_events(plain, Play(BOB, one("R7")), [CardPlayed(BOB, one("R7")), Prompted(CY, Awaiting.PLAY)])


@scenario("house.seven-o")
def test_a_zero_passes_every_hand_on_in_the_direction_of_play() -> None:
    log = table("R0 G5 G6 G7 B1 B2 B5", ann="Y1 Y3 Y4 Y5 Y6 G1 G3", options=SEVEN_O)
    then_events(
        log,
        Play(BOB, one("R0")),
        [CardPlayed(BOB, one("R0")), HandsRotated(BOB), Prompted(CY, Awaiting.PLAY)],
    )
    after = fold(run(log, Play(BOB, one("R0"))))
    assert hand(after, CY) == ["G5", "G6", "G7", "B1", "B2", "B5"]  # bob's passed on to cy
    assert hand(after, ANN) == FILLER.split()  # cy's to ann
    assert hand(after, BOB) == ["Y1", "Y3", "Y4", "Y5", "Y6", "G1", "G3"]  # ann's to bob


@scenario("house.seven-o", "uno.call", "uno.catch")
def test_whoever_a_swap_leaves_with_one_card_must_call_and_can_be_caught() -> None:
    state = fold(table("R7 G5 G6 G7 B1 B2 B5", options=SEVEN_O))
    # bob holds R7 G5 and names cy, who holds one card: bob will hold one (and may call with the play),
    # cy gets G5 and must call too.
    short = state._replace(hands=(state.hands[ANN], toks("R7 G5"), toks("B6")))
    outcome = execute(short, Play(BOB, one("R7"), uno=True, target=CY))
    assert not hasattr(outcome, "rule"), outcome
    after = outcome[1]
    assert hand(after, BOB) == ["B6"] and hand(after, CY) == ["G5"]
    assert after.exposed == (CY,)
    caught = execute(after, Catch(ANN, CY))
    assert not hasattr(caught, "rule"), caught
    assert caught[0][0] == UnoCaught(ANN, CY)
    then_violation(short, Play(BOB, one("R7"), uno=True), Rule.HOUSE_SEVEN_O)  # no target
    # A zero counts the hand passed on: ann holds one card, so bob will too after the rotation.
    zero = state._replace(hands=(toks("Y1"), toks("R0 G5"), state.hands[CY]))
    rotated = execute(zero, Play(BOB, one("R0"), uno=True))
    assert not hasattr(rotated, "rule"), rotated
    # bob called with the play; cy, passed bob's last G5, must call on their own.
    assert hand(rotated[1], BOB) == ["Y1"] and rotated[1].exposed == (CY,)
    uncalled = execute(zero, Play(BOB, one("R0")))  # no call: both bob and cy must call now
    assert not hasattr(uncalled, "rule") and uncalled[1].exposed == (BOB, CY)
    called = execute(rotated[1], CallUno(CY))
    assert not hasattr(called, "rule") and called[1].exposed == ()


@scenario("house.seven-o", "round.end")
def test_going_out_on_a_seven_swaps_nothing() -> None:
    state = fold(table("R7 G5 G6 G7 B1 B2 B5", options=SEVEN_O))
    last = state._replace(hands=(state.hands[ANN], toks("R7"), state.hands[CY]))
    outcome = decide(last, Play(BOB, one("R7")))
    assert not hasattr(outcome, "rule"), outcome
    assert not any(isinstance(e, HandsTraded | HandsRotated) for e in outcome)
    assert any(isinstance(e, RoundEnded) and e.winner == BOB for e in outcome)


# --- house.draw-to-match, house.force-play ----------------------------------------------------------------

MATCH = {"draw_to_match": True}


@scenario("house.draw-to-match")
def test_one_draw_takes_cards_until_a_playable_one() -> None:
    # Top R5: Y1, Y2, Y7, Y8 and Y9 do not match; B7 does not; nothing red until... put R9 on top of B7.
    log = given(Variant.CLASSIC, 3, {BOB: FILLER}, "R5", "Y1 Y2 R9 B7", dealer=ANN, options=MATCH)
    then_events(
        log,
        Draw(BOB),
        [
            CardDrawn(BOB, one("Y1")),
            CardDrawn(BOB, one("Y2")),
            CardDrawn(BOB, one("R9")),
            Prompted(BOB, Awaiting.DRAWN, new_turn=False),
        ],
    )


@scenario("house.draw-to-match", "draw.reshuffle")
def test_drawing_to_a_match_reshuffles_and_stops_when_everything_is_drawn() -> None:
    log = given(
        Variant.CLASSIC, 2, {0: FILLER, 1: "G1 G4 G5 G6 G7 B1 B2"}, "R5", dealer=0, options=MATCH, seed=b"s"
    )
    # A seeded table down to two cards in the pile and one under the top, none of them red or a 5.
    state = fold(log)
    dry = state._replace(pile=toks("Y1 B8"), discard=toks("Y2 R5"))
    outcome = execute(dry, Draw(1))
    assert not hasattr(outcome, "rule"), outcome
    events, after = outcome
    assert [type(e) for e in events] == [CardDrawn, CardDrawn, PileReshuffled, CardDrawn, Prompted]
    assert [e.card for e in events if isinstance(e, CardDrawn)] == list(toks("Y1 B8 Y2"))
    assert after.turn == 0 and after.awaiting is Awaiting.PLAY  # nothing playable came: the turn ends


@scenario("house.draw-to-match")
def test_a_table_that_stopped_drawing_early_or_drew_past_a_match_breaks_draw_to_match() -> None:
    log = given_hands(
        Variant.CLASSIC,
        ["Y3 Y4 Y5 Y6 G1 G3 G4", FILLER, "G5 G6 G7 B1 B2 B5 B8"],
        "R5",
        dealer=ANN,
        options=MATCH,
    )
    early = Draw(BOB, supply=Supply(draws={BOB: toks("Y1 Y2")}))
    then_violation(log, early, Rule.HOUSE_DRAW_TO_MATCH, "Y2")
    past = Draw(BOB, supply=Supply(draws={BOB: toks("Y1 R9 Y2")}))
    then_violation(log, past, Rule.HOUSE_DRAW_TO_MATCH, "R9")
    exact = Draw(BOB, supply=Supply(draws={BOB: toks("Y1 Y2 R9")}))
    then_events(
        log,
        exact,
        [
            CardDrawn(BOB, one("Y1")),
            CardDrawn(BOB, one("Y2")),
            CardDrawn(BOB, one("R9")),
            Prompted(BOB, Awaiting.DRAWN, new_turn=False),
        ],
    )


@scenario("house.force-play")
@pytest.mark.parametrize("options", [{"force_play": True}, {"force_play": True, "draw_to_match": True}])
def test_a_playable_drawn_card_must_be_played(options: dict[str, Any]) -> None:
    log = run(given(Variant.CLASSIC, 3, {BOB: FILLER}, "R5", "R9 Y1", dealer=ANN, options=options), Draw(BOB))
    then_violation(log, Pass(BOB), Rule.HOUSE_FORCE_PLAY, "R9")
    then_events(log, Play(BOB, one("R9")), [CardPlayed(BOB, one("R9")), Prompted(CY, Awaiting.PLAY)])


@scenario("house.force-play")
def test_an_unplayable_drawn_card_ends_the_turn_under_force_play() -> None:
    log = given(Variant.CLASSIC, 3, {BOB: FILLER}, "R5", "Y1 R9", dealer=ANN, options={"force_play": True})
    then_events(log, Draw(BOB), [CardDrawn(BOB, one("Y1")), Prompted(CY, Awaiting.PLAY)])


# --- house.wd4-any-time ----------------------------------------------------------------------------------


@scenario("house.wd4-any-time")
def test_a_wild_draw_four_cannot_be_challenged_and_the_victim_still_answers() -> None:
    # bob holds R9, of the active colour: the W+4 would be illegal, but any time is allowed here.
    log = run(
        table("W+4 R9 G6 G7 B1 B2 B5", options={"wd4_any_time": True}),
        Play(BOB, one("W+4"), colour=Colour.GREEN),
    )
    then_violation(log, Challenge(CY), Rule.HOUSE_WD4_ANY_TIME)
    then_events(
        log,
        Accept(CY),
        [Wd4Accepted(CY), CardsTaken(CY, toks("Y1 Y2 Y7 Y8"), Rule.WD4_ACCEPT), Prompted(ANN, Awaiting.PLAY)],
    )
