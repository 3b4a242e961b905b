"""Scenarios for UNO Sonic the Hedgehog: the Wild Victory Lap (digest §4)."""

from __future__ import annotations

from service.rules import Colour, Play, Rule, Variant, fold
from service.rules.events import Awaiting, CardPlayed, CardsTaken, Prompted

from .support import given, one, run, scenario, then_events, then_violation, toks

ANN, BOB, CY, DEE = 0, 1, 2, 3

BOB_HAND = "WVL RR G1 G2 G3 G4 G6"
ANN_HAND = "WVL R1 B2 B3 B4 B6 B7"


@scenario("sonic.victory-lap")
def test_victory_lap_every_other_player_draws_one_and_the_colour_is_chosen() -> None:
    log = given(Variant.SONIC, 3, {BOB: BOB_HAND}, "R5", "Y1 Y2 Y3", dealer=ANN)
    then_events(
        log,
        Play(BOB, one("WVL"), colour=Colour.BLUE),
        [
            CardPlayed(BOB, one("WVL"), Colour.BLUE),
            CardsTaken(CY, toks("Y1"), Rule.SONIC_VICTORY_LAP),
            CardsTaken(ANN, toks("Y2"), Rule.SONIC_VICTORY_LAP),
            Prompted(CY, Awaiting.PLAY),
        ],
    )
    state = fold(run(log, Play(BOB, one("WVL"), colour=Colour.BLUE)))
    assert state.colour is Colour.BLUE
    assert [len(h) for h in state.hands] == [8, 6, 8]


@scenario("sonic.victory-lap")
def test_victory_lap_with_four_players_after_a_reverse() -> None:
    log = given(Variant.SONIC, 4, {BOB: BOB_HAND, ANN: ANN_HAND}, "R5", "Y1 Y2 Y3 Y4", dealer=ANN)
    log = run(log, Play(BOB, one("RR")))  # play goes right: ann, then dee
    events = run(log, Play(ANN, one("WVL"), colour=Colour.GREEN))[len(log) :]
    assert events[0] == CardPlayed(ANN, one("WVL"), Colour.GREEN)
    taken = events[1:-1]
    assert all(isinstance(e, CardsTaken) and e.cause is Rule.SONIC_VICTORY_LAP for e in taken)
    assert sorted(e.player for e in taken if isinstance(e, CardsTaken)) == [BOB, CY, DEE]
    assert all(len(e.cards) == 1 for e in taken if isinstance(e, CardsTaken))
    assert events[-1] == Prompted(DEE, Awaiting.PLAY)


@scenario("sonic.victory-lap", "play.wild-colour")
def test_victory_lap_needs_a_chosen_colour() -> None:
    log = given(Variant.SONIC, 3, {BOB: BOB_HAND}, "R5", dealer=ANN)
    then_violation(log, Play(BOB, one("WVL")), Rule.PLAY_WILD_COLOUR, "WVL")
