"""Scenarios for UNO Attack: the launcher and the Attack cards (digest §4, §6).

These games have no seed, so every launcher press fires what the table reported (``Supply.presses``: how
many cards, taken from the top of the launcher, whose order the stacked deck fixes).
"""

from __future__ import annotations

from typing import Any

import pytest

from service.rules import (
    Accept,
    Colour,
    Draw,
    Event,
    Impossible,
    Pass,
    Play,
    Press,
    Rule,
    Supply,
    Variant,
    decide,
    fold,
)
from service.rules.events import (
    Awaiting,
    CardPlayed,
    DirectionReversed,
    HandsTraded,
    LauncherPressed,
    Passed,
    PileReshuffled,
    Prompted,
)

from .support import given, hand, one, run, scenario, then_events, then_violation, toks, when

ANN, BOB, CY, DEE = 0, 1, 2, 3

PILE = "Y1 Y2 Y3 Y4 Y5 Y6"
ANN_HAND = "B1 B2 B3 B4 B6 B7 B8"
CY_HAND = "GDA G1 G3 Y4 Y6 B7 B8"


def table(
    bob: str, players: int = 3, options: dict[str, Any] | None = None, edition: str = "original"
) -> list[Event]:
    """ann deals, bob starts on R5; the launcher's top cards are ``PILE``."""
    hands = {BOB: bob, ANN: ANN_HAND} if players == 2 else {BOB: bob, CY: CY_HAND, ANN: ANN_HAND}
    opts = {"attack_edition": edition, **(options or {})}
    return given(Variant.ATTACK, players, hands, "R5", PILE, dealer=ANN, options=opts)


def presses(*outcomes: int) -> Supply:
    return Supply(presses=outcomes)


def pressed(seat: int, cards: str, cause: Rule) -> LauncherPressed:
    return LauncherPressed(seat, toks(cards), cause)


# --- attack.launcher -----------------------------------------------------------------------------------


@scenario("attack.launcher")
def test_a_press_fires_cards_from_the_launcher_and_ends_the_turn() -> None:
    log = table("R7 R8 G2 G3 G4 G6 G7")  # bob could play, but may press instead
    then_events(
        log,
        Press(BOB, presses(2)),
        [pressed(BOB, "Y1 Y2", Rule.ATTACK_LAUNCHER), Prompted(CY, Awaiting.PLAY)],
    )
    after = run(log, Press(BOB, presses(2)))
    assert hand(fold(after), BOB) == ["R7", "R8", "G2", "G3", "G4", "G6", "G7", "Y1", "Y2"]
    then_violation(after, Play(BOB, one("R7")), Rule.TURN_ORDER, "cy", "bob")


@scenario("attack.launcher")
def test_a_press_often_fires_nothing() -> None:
    then_events(
        table("R7 R8 G2 G3 G4 G6 G7"),
        Press(BOB, presses(0)),
        [pressed(BOB, "", Rule.ATTACK_LAUNCHER), Prompted(CY, Awaiting.PLAY)],
    )


@scenario("attack.launcher")
def test_attack_has_no_draw_pile_and_no_pass() -> None:
    log = table("R7 R8 G2 G3 G4 G6 G7")
    then_violation(log, Draw(BOB), Rule.ATTACK_LAUNCHER)
    then_violation(log, Pass(BOB), Rule.ATTACK_LAUNCHER)


@scenario("attack.launcher")
def test_the_other_rule_sets_have_no_launcher() -> None:
    log = given(Variant.CLASSIC, 3, {}, "R5", dealer=ANN)
    then_violation(log, Press(BOB), Rule.ATTACK_LAUNCHER, "classic")


@scenario("attack.launcher", "fair.commit")
def test_a_press_without_a_reported_outcome_or_with_the_wrong_cards_cannot_be_followed() -> None:
    state = fold(table("R7 R8 G2 G3 G4 G6 G7"))
    with pytest.raises(Impossible) as unreported:
        decide(state, Press(BOB))
    assert unreported.value.rule is Rule.FAIR_COMMIT
    with pytest.raises(Impossible) as wrong:
        decide(state, Press(BOB, Supply(presses=(toks("G9"),))))
    assert wrong.value.rule is Rule.FAIR_COMMIT
    assert "G9" in wrong.value.message
    listed = when(state, Press(BOB, Supply(presses=(toks("Y1"),))))
    assert listed == (pressed(BOB, "Y1", Rule.ATTACK_LAUNCHER), Prompted(CY, Awaiting.PLAY))


@scenario("attack.launcher", "draw.reshuffle")
def test_an_empty_launcher_is_refilled_from_the_discard_pile_except_its_top_card() -> None:
    log = run(table("R7 R8 G2 G3 G4 G6 G7"), Play(BOB, one("R7")))
    launcher = len(fold(log).pile)
    assert launcher == 112 - 21 - 1
    log = run(log, Press(CY, presses(launcher)))
    assert not fold(log).pile
    then_events(
        log,
        Press(ANN, Supply(presses=(toks("R5"),))),
        [
            PileReshuffled(toks("R5"), False),
            pressed(ANN, "R5", Rule.ATTACK_LAUNCHER),
            Prompted(BOB, Awaiting.PLAY),
        ],
    )


# --- attack.hit-two / attack.wild-hit-four -------------------------------------------------------------


@scenario("attack.hit-two")
def test_hit_two_the_next_player_presses_twice_and_loses_the_turn() -> None:
    then_events(
        table("RH2 R8 G2 G3 G4 G6 G7"),
        Play(BOB, one("RH2"), supply=presses(1, 2)),
        [
            CardPlayed(BOB, one("RH2")),
            pressed(CY, "Y1", Rule.ATTACK_HIT_TWO),
            pressed(CY, "Y2 Y3", Rule.ATTACK_HIT_TWO),
            Prompted(ANN, Awaiting.PLAY),
        ],
    )


@scenario("attack.wild-hit-four")
def test_wild_hit_four_the_next_player_presses_four_times_and_loses_the_turn() -> None:
    log = table("WH4 R8 G2 G3 G4 G6 G7")
    then_events(
        log,
        Play(BOB, one("WH4"), colour=Colour.GREEN, supply=presses(0, 1, 0, 2)),
        [
            CardPlayed(BOB, one("WH4"), Colour.GREEN),
            pressed(CY, "", Rule.ATTACK_WILD_HIT_FOUR),
            pressed(CY, "Y1", Rule.ATTACK_WILD_HIT_FOUR),
            pressed(CY, "", Rule.ATTACK_WILD_HIT_FOUR),
            pressed(CY, "Y2 Y3", Rule.ATTACK_WILD_HIT_FOUR),
            Prompted(ANN, Awaiting.PLAY),
        ],
    )
    then_violation(log, Play(BOB, one("WH4"), supply=presses(0, 0, 0, 0)), Rule.PLAY_WILD_COLOUR, "WH4")


# --- attack.attack-attack ------------------------------------------------------------------------------


@scenario("attack.attack-attack")
@pytest.mark.parametrize(("target", "fired"), [(ANN, ("Y1", "Y2 Y3")), (CY, ("", "Y1"))])
def test_attack_attack_the_named_player_presses_twice_and_play_passes_on_normally(
    target: int, fired: tuple[str, str]
) -> None:
    counts = tuple(len(f.split()) for f in fired)
    then_events(
        table("WAA R8 G2 G3 G4 G6 G7"),
        Play(BOB, one("WAA"), colour=Colour.BLUE, target=target, supply=presses(*counts)),
        [
            CardPlayed(BOB, one("WAA"), Colour.BLUE, target=target),
            pressed(target, fired[0], Rule.ATTACK_ATTACK_ATTACK),
            pressed(target, fired[1], Rule.ATTACK_ATTACK_ATTACK),
            Prompted(CY, Awaiting.PLAY),
        ],
    )


@scenario("attack.attack-attack")
def test_attack_attack_must_name_another_player() -> None:
    log = table("WAA R8 G2 G3 G4 G6 G7")
    then_violation(log, Play(BOB, one("WAA"), colour=Colour.BLUE), Rule.ATTACK_ATTACK_ATTACK, "WAA")
    then_violation(
        log, Play(BOB, one("WAA"), colour=Colour.BLUE, target=BOB), Rule.ATTACK_ATTACK_ATTACK, "WAA"
    )


# --- attack.discard-all --------------------------------------------------------------------------------


@scenario("attack.discard-all")
def test_discard_all_discards_every_other_card_of_its_colour_and_ends_on_top() -> None:
    log = table("RDA R3 G2 R7 RH2 Y9 W")
    then_events(
        log,
        Play(BOB, one("RDA")),
        [CardPlayed(BOB, one("RDA"), discarded=toks("R3 R7 RH2")), Prompted(CY, Awaiting.PLAY)],
    )
    state = fold(run(log, Play(BOB, one("RDA"))))
    assert hand(state, BOB) == ["G2", "Y9", "W"]
    assert state.discard == toks("R5 R3 R7 RH2 RDA")
    assert state.colour is Colour.RED


@scenario("attack.discard-all", "play.match")
def test_discard_all_matches_by_colour_or_on_another_discard_all() -> None:
    log = table("GDA G2 G3 R7 Y8 Y9 B9")
    then_violation(log, Play(BOB, one("GDA")), Rule.PLAY_MATCH, "GDA", "R5")
    log = given(Variant.ATTACK, 3, {BOB: "RDA R3 R4 Y8 Y9 B9 B8", CY: CY_HAND}, "R5", dealer=ANN)
    log = run(log, Play(BOB, one("RDA")))
    then_events(
        log,
        Play(CY, one("GDA")),
        [CardPlayed(CY, one("GDA"), discarded=toks("G1 G3")), Prompted(ANN, Awaiting.PLAY)],
    )


@scenario("attack.discard-all", "uno.call")
def test_calling_uno_with_a_discard_all_counts_the_cards_that_go_down_with_it() -> None:
    log = table("RDA R3 R7 RH2 R9 R1 G2")
    then_events(
        log,
        Play(BOB, one("RDA"), uno=True),
        [
            CardPlayed(BOB, one("RDA"), uno=True, discarded=toks("R3 R7 RH2 R9 R1")),
            Prompted(CY, Awaiting.PLAY),
        ],
    )
    log = table("RDA R3 R7 RH2 R9 G1 G2")
    then_violation(log, Play(BOB, one("RDA"), uno=True), Rule.UNO_CALL, "2 cards")


# --- attack.follow-up ----------------------------------------------------------------------------------

FOLLOW = "RS RR RH2 R7 YS G2 G3"


@scenario("attack.follow-up", "action.skip")
def test_after_a_skip_the_player_may_play_one_more_matching_card() -> None:
    log = table(FOLLOW)
    then_events(
        log,
        Play(BOB, one("RS")),
        [CardPlayed(BOB, one("RS")), Prompted(BOB, Awaiting.FOLLOW_UP, pointer=ANN, new_turn=False)],
    )
    chance = run(log, Play(BOB, one("RS")))
    # cy was skipped; a number card as the follow-up passes the turn to ann, where the Skip put it.
    then_events(chance, Play(BOB, one("R7")), [CardPlayed(BOB, one("R7")), Prompted(ANN, Awaiting.PLAY)])


@scenario("attack.follow-up")
def test_the_follow_up_may_be_declined() -> None:
    chance = run(table(FOLLOW), Play(BOB, one("RS")))
    then_events(chance, Pass(BOB), [Passed(BOB), Prompted(ANN, Awaiting.PLAY)])


@scenario("attack.follow-up")
def test_the_follow_up_is_a_matching_card_or_a_pass_nothing_else() -> None:
    chance = run(table(FOLLOW), Play(BOB, one("RS")))
    then_violation(chance, Press(BOB, presses(0)), Rule.ATTACK_FOLLOW_UP)
    then_violation(chance, Play(BOB, one("G2")), Rule.PLAY_MATCH, "G2")
    then_violation(chance, Play(ANN, one("B1")), Rule.TURN_ORDER, "bob")


@scenario("attack.follow-up", "attack.hit-two")
def test_the_follow_ups_effect_applies_from_where_the_skip_moved_the_turn() -> None:
    chance = run(table(FOLLOW), Play(BOB, one("RS")))
    then_events(
        chance,
        Play(BOB, one("RH2"), supply=presses(1, 0)),
        [
            CardPlayed(BOB, one("RH2")),
            pressed(ANN, "Y1", Rule.ATTACK_HIT_TWO),
            pressed(ANN, "", Rule.ATTACK_HIT_TWO),
            # After ann the turn would come back to bob: the same player never takes the turn again
            # through a follow-up, so it goes on to cy.
            Prompted(CY, Awaiting.PLAY),
        ],
    )


@scenario("attack.follow-up")
def test_a_skip_played_as_the_follow_up_earns_no_further_follow_up() -> None:
    chance = run(table(FOLLOW), Play(BOB, one("RS")))
    # From ann, where the first Skip put the turn, the second Skip skips ann; the turn would come back to
    # bob, who never takes it again through a follow-up: cy plays a normal turn.
    then_events(chance, Play(BOB, one("YS")), [CardPlayed(BOB, one("YS")), Prompted(CY, Awaiting.PLAY)])


@scenario("attack.follow-up", "action.reverse")
def test_after_a_reverse_the_player_may_play_one_more_matching_card() -> None:
    log = table(FOLLOW)
    then_events(
        log,
        Play(BOB, one("RR")),
        [
            CardPlayed(BOB, one("RR")),
            DirectionReversed(),
            Prompted(BOB, Awaiting.FOLLOW_UP, pointer=ANN, new_turn=False),
        ],
    )
    chance = run(log, Play(BOB, one("RR")))
    then_events(chance, Play(BOB, one("R7")), [CardPlayed(BOB, one("R7")), Prompted(ANN, Awaiting.PLAY)])


@scenario("attack.follow-up")
def test_no_follow_up_with_two_players() -> None:
    then_events(
        table(FOLLOW, players=2),
        Play(BOB, one("RS")),
        [CardPlayed(BOB, one("RS")), Prompted(BOB, Awaiting.PLAY)],
    )


@scenario("attack.follow-up")
def test_no_follow_up_when_the_option_is_off() -> None:
    then_events(
        table(FOLLOW, options={"attack_follow_up": False}),
        Play(BOB, one("RS")),
        [CardPlayed(BOB, one("RS")), Prompted(ANN, Awaiting.PLAY)],
    )


@scenario("attack.follow-up", "house.stacking")
@pytest.mark.parametrize("stacking", ["draw-two", "any"])
def test_a_stack_on_a_follow_up_hit_two_passes_on_and_whoever_takes_it_loses_the_turn(stacking: str) -> None:
    """The digest's settled detail of stacking: a follow-up Hit 2's stack passes on from the pointed
    player as any stack does, and whoever accepts loses the turn to the next player after them, even
    when that is the follow-up's own player."""
    hands = {BOB: FOLLOW, CY: CY_HAND, ANN: "YH2 B1 B2 B3 B4 B6 B7"}
    opts = {"attack_edition": "original", "stacking": stacking}
    chance = run(given(Variant.ATTACK, 3, hands, "R5", PILE, dealer=ANN, options=opts), Play(BOB, one("RS")))
    hit = run(chance, Play(BOB, one("RH2")))
    assert (fold(hit).turn, fold(hit).awaiting, fold(hit).pending) == (ANN, Awaiting.STACK, 2)

    # ann takes the 2 herself: the turn goes to bob, the follow-up's own player.
    taken = run(hit, Accept(ANN, supply=presses(1, 0)))
    assert (fold(taken).turn, fold(taken).awaiting) == (BOB, Awaiting.PLAY)
    assert len(fold(taken).hands[ANN]) == 7 + 1

    # ann stacks her Hit 2 instead: the 4 pass on to bob, who takes them and loses the turn to cy.
    stacked = run(hit, Play(ANN, one("YH2")))
    assert (fold(stacked).turn, fold(stacked).awaiting, fold(stacked).pending) == (BOB, Awaiting.STACK, 4)
    taken = run(stacked, Accept(BOB, supply=presses(1, 0, 1, 0)))
    assert (fold(taken).turn, fold(taken).awaiting) == (CY, Awaiting.PLAY)
    assert len(fold(taken).hands[BOB]) == len(FOLLOW.split()) - 2 + 2


# --- attack.trade-hands / all-hit / hit-fire (2010 edition) --------------------------------------------


@scenario("attack.trade-hands")
def test_trade_hands_swaps_hands_with_the_named_opponent() -> None:
    log = table("RTH R8 G2 G3 G4 G6 G7", edition="2010")
    then_events(
        log,
        Play(BOB, one("RTH"), target=ANN),
        [CardPlayed(BOB, one("RTH"), target=ANN), HandsTraded(BOB, ANN), Prompted(CY, Awaiting.PLAY)],
    )
    state = fold(run(log, Play(BOB, one("RTH"), target=ANN)))
    assert hand(state, BOB) == ANN_HAND.split()
    assert hand(state, ANN) == ["R8", "G2", "G3", "G4", "G6", "G7"]


@scenario("attack.trade-hands")
def test_trade_hands_must_name_another_player() -> None:
    log = table("RTH R8 G2 G3 G4 G6 G7", edition="2010")
    then_violation(log, Play(BOB, one("RTH")), Rule.ATTACK_TRADE_HANDS, "RTH")
    then_violation(log, Play(BOB, one("RTH"), target=BOB), Rule.ATTACK_TRADE_HANDS, "RTH")


@scenario("attack.all-hit")
def test_all_hit_every_other_player_presses_once_starting_left() -> None:
    log = given(
        Variant.ATTACK,
        4,
        {BOB: "WAH R8 G2 G3 G4 G6 G7"},
        "R5",
        PILE,
        dealer=ANN,
        options={"attack_edition": "2010"},
    )
    then_events(
        log,
        Play(BOB, one("WAH"), colour=Colour.YELLOW, supply=presses(1, 0, 2)),
        [
            CardPlayed(BOB, one("WAH"), Colour.YELLOW),
            pressed(CY, "Y1", Rule.ATTACK_ALL_HIT),
            pressed(DEE, "", Rule.ATTACK_ALL_HIT),
            pressed(ANN, "Y2 Y3", Rule.ATTACK_ALL_HIT),
            Prompted(CY, Awaiting.PLAY),
        ],
    )


@scenario("attack.hit-fire")
def test_hit_fire_the_next_player_presses_until_a_card_fires_then_loses_the_turn() -> None:
    then_events(
        table("WHF R8 G2 G3 G4 G6 G7", edition="2010"),
        Play(BOB, one("WHF"), colour=Colour.GREEN, supply=presses(0, 0, 3)),
        [
            CardPlayed(BOB, one("WHF"), Colour.GREEN),
            pressed(CY, "", Rule.ATTACK_HIT_FIRE),
            pressed(CY, "", Rule.ATTACK_HIT_FIRE),
            pressed(CY, "Y1 Y2 Y3", Rule.ATTACK_HIT_FIRE),
            Prompted(ANN, Awaiting.PLAY),
        ],
    )


@scenario("attack.hit-fire")
def test_hit_fire_stops_at_the_first_press_that_fires() -> None:
    then_events(
        table("WHF R8 G2 G3 G4 G6 G7", edition="2010"),
        Play(BOB, one("WHF"), colour=Colour.GREEN, supply=presses(1, 5, 5)),
        [
            CardPlayed(BOB, one("WHF"), Colour.GREEN),
            pressed(CY, "Y1", Rule.ATTACK_HIT_FIRE),
            Prompted(ANN, Awaiting.PLAY),
        ],
    )


# --- attack.customizable -------------------------------------------------------------------------------

CUSTOM = "WC R8 G2 G3 G4 G6 G7"


@scenario("attack.customizable")
def test_customizable_unset_is_a_plain_wild() -> None:
    then_events(
        table(CUSTOM),
        Play(BOB, one("WC"), colour=Colour.RED),
        [CardPlayed(BOB, one("WC"), Colour.RED), Prompted(CY, Awaiting.PLAY)],
    )


@scenario("attack.customizable")
def test_customizable_a_named_player_presses_n_times() -> None:
    log = table(CUSTOM, options={"custom_action": "target-press", "custom_count": 3})
    then_events(
        log,
        Play(BOB, one("WC"), colour=Colour.RED, target=ANN, supply=presses(1, 0, 1)),
        [
            CardPlayed(BOB, one("WC"), Colour.RED, target=ANN),
            pressed(ANN, "Y1", Rule.ATTACK_CUSTOMIZABLE),
            pressed(ANN, "", Rule.ATTACK_CUSTOMIZABLE),
            pressed(ANN, "Y2", Rule.ATTACK_CUSTOMIZABLE),
            Prompted(CY, Awaiting.PLAY),
        ],
    )
    then_violation(log, Play(BOB, one("WC"), colour=Colour.RED), Rule.ATTACK_CUSTOMIZABLE, "WC")


@scenario("attack.customizable")
def test_customizable_all_others_press_n_times() -> None:
    then_events(
        table(CUSTOM, options={"custom_action": "all-press", "custom_count": 1}),
        Play(BOB, one("WC"), colour=Colour.BLUE, supply=presses(2, 1)),
        [
            CardPlayed(BOB, one("WC"), Colour.BLUE),
            pressed(CY, "Y1 Y2", Rule.ATTACK_CUSTOMIZABLE),
            pressed(ANN, "Y3", Rule.ATTACK_CUSTOMIZABLE),
            Prompted(CY, Awaiting.PLAY),
        ],
    )


@scenario("attack.customizable")
def test_customizable_skip() -> None:
    then_events(
        table(CUSTOM, options={"custom_action": "skip"}),
        Play(BOB, one("WC"), colour=Colour.BLUE),
        [CardPlayed(BOB, one("WC"), Colour.BLUE), Prompted(ANN, Awaiting.PLAY)],
    )


@scenario("attack.customizable")
def test_customizable_reverse() -> None:
    then_events(
        table(CUSTOM, options={"custom_action": "reverse"}),
        Play(BOB, one("WC"), colour=Colour.BLUE),
        [CardPlayed(BOB, one("WC"), Colour.BLUE), DirectionReversed(), Prompted(ANN, Awaiting.PLAY)],
    )


@scenario("attack.customizable", "attack.trade-hands")
def test_customizable_trade_hands() -> None:
    log = table(CUSTOM, options={"custom_action": "trade-hands"})
    then_events(
        log,
        Play(BOB, one("WC"), colour=Colour.BLUE, target=CY),
        [
            CardPlayed(BOB, one("WC"), Colour.BLUE, target=CY),
            HandsTraded(BOB, CY),
            Prompted(CY, Awaiting.PLAY),
        ],
    )
    then_violation(log, Play(BOB, one("WC"), colour=Colour.BLUE), Rule.ATTACK_CUSTOMIZABLE, "WC")
