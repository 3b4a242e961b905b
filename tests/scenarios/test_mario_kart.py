"""Scenarios for UNO Mario Kart: the Wild Item Box and its five items (digest §4)."""

from __future__ import annotations

import pytest

from service.rules import Choose, Colour, Event, Play, Rule, Variant, fold
from service.rules.events import (
    Awaiting,
    CardFlipped,
    CardPlayed,
    CardsTaken,
    ColourChosen,
    Prompted,
)

from .support import given, hand, one, run, scenario, then_events, then_violation, toks

ANN, BOB, CY = 0, 1, 2

# Three players, ann deals, bob starts on G5.
BOB_HAND = "WIB RS R1 R2 R3 Y4 Y6"  # nothing green, no 5: only the item box matches
CY_HAND = "G1 G2 G3 G4 G6 G7 G8"
ANN_HAND = "WIB WIB B1 B2 B3 B4 B6"


def table(pile: str) -> list[Event]:
    """The draw pile starts with ``pile``: its first card is what bob's item box flips."""
    return given(Variant.MARIO_KART, 3, {BOB: BOB_HAND, CY: CY_HAND, ANN: ANN_HAND}, "G5", pile, dealer=ANN)


# --- mk.item-box ---------------------------------------------------------------------------------------


@scenario("mk.item-box", "play.match")
def test_the_item_box_is_playable_any_time() -> None:
    log = table("R7")
    then_violation(log, Play(BOB, one("R1")), Rule.PLAY_MATCH, "R1", "G5")
    events = run(log, Play(BOB, one("WIB")))[len(log) :]
    assert events[:2] == [CardPlayed(BOB, one("WIB")), CardFlipped(one("R7"))]


@scenario("mk.item-box", "play.wild-colour")
def test_the_item_box_takes_no_chosen_colour() -> None:
    then_violation(table("R7"), Play(BOB, one("WIB"), colour=Colour.RED), Rule.PLAY_WILD_COLOUR, "WIB")


@scenario("mk.item-box")
@pytest.mark.parametrize(
    ("flipped", "colour"),
    [("R+2", Colour.RED), ("RS", Colour.RED), ("BR", Colour.BLUE), ("Y+2", Colour.YELLOW)],
)
def test_only_the_flipped_cards_item_happens_never_its_own_action(flipped: str, colour: Colour) -> None:
    log = table(f"{flipped} B7 B8 B9")
    after = run(log, Play(BOB, one("WIB")))
    events = after[len(log) :]
    state = fold(after)
    assert state.top is one(flipped)
    assert state.colour is colour
    assert state.direction == 1  # a flipped Reverse reverses nothing
    # Only items take cards: the Banana's two (ann), Lightning's one each; never a flipped +2's.
    taken = {e.player: len(e.cards) for e in events if isinstance(e, CardsTaken)}
    expected = {"R": {}, "Y": {ANN: 2}, "B": {CY: 1, ANN: 1}}[flipped[0]]
    assert taken == expected


# --- the five items ------------------------------------------------------------------------------------


@scenario("mk.item.mushroom", "mk.item-box")
def test_mushroom_the_player_takes_another_turn_at_once() -> None:
    log = table("R7 B7")
    then_events(
        log,
        Play(BOB, one("WIB")),
        [CardPlayed(BOB, one("WIB")), CardFlipped(one("R7")), Prompted(BOB, Awaiting.PLAY)],
    )
    after = run(log, Play(BOB, one("WIB")))
    assert fold(after).colour is Colour.RED
    then_events(after, Play(BOB, one("R1")), [CardPlayed(BOB, one("R1")), Prompted(CY, Awaiting.PLAY)])


@scenario("mk.item.banana")
def test_banana_at_the_start_of_a_round_the_previous_seat_draws_two() -> None:
    then_events(
        table("Y3 B7 B8"),
        Play(BOB, one("WIB")),
        [
            CardPlayed(BOB, one("WIB")),
            CardFlipped(one("Y3")),
            CardsTaken(ANN, toks("B7 B8"), Rule.MK_ITEM_BANANA),
            Prompted(CY, Awaiting.PLAY),
        ],
    )


@scenario("mk.item.banana")
def test_banana_the_player_who_took_the_turn_just_before_draws_two() -> None:
    # Mid-round, on a red first card: bob plays R1, cy G1, then ann's item box flips the Banana.
    log = given(
        Variant.MARIO_KART, 3, {BOB: BOB_HAND, CY: CY_HAND, ANN: ANN_HAND}, "R5", "Y3 B7 B8", dealer=ANN
    )
    log = run(log, Play(BOB, one("R1")), Play(CY, one("G1")))
    then_events(
        log,
        Play(ANN, one("WIB")),
        [
            CardPlayed(ANN, one("WIB")),
            CardFlipped(one("Y3")),
            CardsTaken(CY, toks("B7 B8"), Rule.MK_ITEM_BANANA),
            Prompted(BOB, Awaiting.PLAY),
        ],
    )


@scenario("mk.item.banana", "action.skip")
def test_banana_a_skipped_player_did_not_take_the_turn_before() -> None:
    log = given(Variant.MARIO_KART, 3, {BOB: BOB_HAND, ANN: ANN_HAND}, "R5", "Y3 B7 B8", dealer=ANN)
    log = run(log, Play(BOB, one("RS")))  # cy loses the turn
    then_events(
        log,
        Play(ANN, one("WIB")),
        [
            CardPlayed(ANN, one("WIB")),
            CardFlipped(one("Y3")),
            CardsTaken(BOB, toks("B7 B8"), Rule.MK_ITEM_BANANA),
            Prompted(BOB, Awaiting.PLAY),
        ],
    )


@scenario("mk.item.banana", "mk.item.mushroom")
def test_banana_after_a_mushroom_hits_whoever_played_before_the_item_box_player() -> None:
    log = given(
        Variant.MARIO_KART, 3, {BOB: BOB_HAND, CY: CY_HAND, ANN: ANN_HAND}, "R5", "R7 Y3 B7 B8", dealer=ANN
    )
    log = run(log, Play(BOB, one("R1")), Play(CY, one("G1")), Play(ANN, one("WIB")))
    assert log[-1] == Prompted(ANN, Awaiting.PLAY)  # Mushroom: ann again
    then_events(
        log,
        Play(ANN, one("WIB")),
        [
            CardPlayed(ANN, one("WIB")),
            CardFlipped(one("Y3")),
            CardsTaken(CY, toks("B7 B8"), Rule.MK_ITEM_BANANA),
            Prompted(BOB, Awaiting.PLAY),
        ],
    )


@scenario("mk.item.green-shell")
def test_green_shell_the_named_opponent_draws_one() -> None:
    then_events(
        table("G4 B7"),
        Play(BOB, one("WIB"), target=ANN),
        [
            CardPlayed(BOB, one("WIB"), target=ANN),
            CardFlipped(one("G4")),
            CardsTaken(ANN, toks("B7"), Rule.MK_ITEM_GREEN_SHELL),
            Prompted(CY, Awaiting.PLAY),
        ],
    )


@scenario("mk.item.green-shell", "turn.order")
def test_green_shell_without_a_named_target_the_player_is_asked_for_one() -> None:
    log = table("G4 B7")
    then_events(
        log,
        Play(BOB, one("WIB")),
        [
            CardPlayed(BOB, one("WIB")),
            CardFlipped(one("G4")),
            Prompted(BOB, Awaiting.TARGET, pointer=CY, new_turn=False),
        ],
    )
    asked = run(log, Play(BOB, one("WIB")))
    then_violation(asked, Choose(BOB, target=BOB), Rule.MK_ITEM_GREEN_SHELL)
    then_violation(asked, Choose(BOB, colour=Colour.GREEN), Rule.MK_ITEM_GREEN_SHELL)
    then_violation(asked, Choose(CY, target=ANN), Rule.TURN_ORDER, "bob")
    then_violation(asked, Play(CY, one("G1")), Rule.TURN_ORDER, "bob")
    then_events(
        asked,
        Choose(BOB, target=CY),
        [CardsTaken(CY, toks("B7"), Rule.MK_ITEM_GREEN_SHELL), Prompted(CY, Awaiting.PLAY)],
    )


@scenario("mk.item.green-shell")
def test_green_shell_naming_oneself_with_the_play_is_rejected() -> None:
    then_violation(table("G4 B7"), Play(BOB, one("WIB"), target=BOB), Rule.MK_ITEM_GREEN_SHELL)


@scenario("mk.item.lightning")
def test_lightning_every_other_player_draws_one_and_the_player_goes_again() -> None:
    then_events(
        table("B2 Y7 Y8"),
        Play(BOB, one("WIB")),
        [
            CardPlayed(BOB, one("WIB")),
            CardFlipped(one("B2")),
            CardsTaken(CY, toks("Y7"), Rule.MK_ITEM_LIGHTNING),
            CardsTaken(ANN, toks("Y8"), Rule.MK_ITEM_LIGHTNING),
            Prompted(BOB, Awaiting.PLAY),
        ],
    )


@scenario("mk.item.bob-omb", "action.wild")
@pytest.mark.parametrize("wild", ["W+4", "WIB"])
def test_bob_omb_the_player_draws_two_and_chooses_the_colour(wild: str) -> None:
    log = table(f"{wild} Y7 Y8")
    then_events(
        log,
        Play(BOB, one("WIB")),
        [
            CardPlayed(BOB, one("WIB")),
            CardFlipped(one(wild)),
            CardsTaken(BOB, toks("Y7 Y8"), Rule.MK_ITEM_BOB_OMB),
            Prompted(BOB, Awaiting.COLOUR, pointer=CY, new_turn=False),
        ],
    )
    asked = run(log, Play(BOB, one("WIB")))
    assert hand(fold(asked), BOB) == ["RS", "R1", "R2", "R3", "Y4", "Y6", "Y7", "Y8"]
    then_violation(asked, Choose(BOB), Rule.ACTION_WILD)
    then_events(
        asked,
        Choose(BOB, colour=Colour.YELLOW),
        [ColourChosen(BOB, Colour.YELLOW), Prompted(CY, Awaiting.PLAY)],
    )
