"""Scenarios for the end of a round, scoring and the end of the match (digest §7)."""

from __future__ import annotations

from typing import Any

import pytest

from service.rules import (
    DECKS,
    Catch,
    Challenge,
    Colour,
    Draw,
    Event,
    Play,
    Rule,
    StartRound,
    Supply,
    Variant,
    fold,
)
from service.rules.events import (
    Awaiting,
    CardFlipped,
    CardPlayed,
    CardsTaken,
    DirectionReversed,
    GameEnded,
    LauncherPressed,
    Prompted,
    RoundEnded,
    RoundStarted,
)

from .support import (
    BOB_GOES_OUT,
    given,
    one,
    run,
    scenario,
    stacked_deck,
    then_events,
    then_violation,
    toks,
    when,
    won_round,
)

ANN, BOB = 0, 1

LOSER = "R1 R2 R3 R4 R6 R7 R8"  # 31 points


def six_down(bob: str, variant: Variant = Variant.CLASSIC, pile: str = "Y1 Y2 Y3 Y4") -> list[Event]:
    """Two players, ann deals; bob plays his first six cards (Skips: his turn again) and holds the last."""
    log = given(variant, 2, {BOB: bob, ANN: LOSER}, "R5", pile, dealer=ANN)
    plays = [Play(BOB, c) for c in toks(bob)[:6]]
    plays[5] = Play(BOB, toks(bob)[5], uno=True)
    return run(log, *plays)


# --- round.end -----------------------------------------------------------------------------------------


@scenario("round.end", "score.round")
def test_playing_the_last_card_wins_the_round() -> None:
    log = six_down(BOB_GOES_OUT)
    then_events(
        log,
        Play(BOB, one("G1")),
        [CardPlayed(BOB, one("G1")), RoundEnded(1, BOB, 31, (toks(LOSER), ()))],
    )
    state = fold(run(log, Play(BOB, one("G1"))))
    assert state.awaiting is Awaiting.ROUND_START
    assert state.scores == (0, 31)


@scenario("round.end")
def test_no_turn_is_played_between_rounds() -> None:
    log = won_round(Variant.CLASSIC, LOSER)
    then_violation(log, Play(ANN, one("R1")), Rule.ROUND_END, "over")
    then_violation(log, Draw(ANN), Rule.ROUND_END)
    then_violation(log, Catch(ANN, BOB), Rule.ROUND_END)


@scenario("round.end")
def test_a_round_cannot_be_dealt_while_one_is_being_played() -> None:
    log = six_down(BOB_GOES_OUT)
    state = fold(log)
    then_violation(state, StartRound(deck=state.deck), Rule.ROUND_END, "still")


@scenario("round.end", "action.draw-two")
def test_going_out_on_a_draw_two_the_next_player_still_draws() -> None:
    then_events(
        six_down("RS RS YS YS GS GS G+2"),
        Play(BOB, one("G+2")),
        [
            CardPlayed(BOB, one("G+2")),
            CardsTaken(ANN, toks("Y1 Y2"), Rule.ACTION_DRAW_TWO),
            RoundEnded(1, BOB, 31 + 1 + 2, ((*toks(LOSER), *toks("Y1 Y2")), ())),
        ],
    )


@scenario("round.end", "action.skip")
def test_going_out_on_a_skip_earns_no_extra_turn() -> None:
    then_events(
        six_down("RS RS YS YS GS GS BS"),
        Play(BOB, one("BS")),
        [CardPlayed(BOB, one("BS")), RoundEnded(1, BOB, 31, (toks(LOSER), ()))],
    )


@scenario("round.end", "action.wild-draw-four")
def test_going_out_on_a_wild_draw_four_the_victim_draws_four_with_no_challenge() -> None:
    log = six_down("RS RS YS YS GS GS W+4")
    then_events(
        log,
        Play(BOB, one("W+4"), colour=Colour.RED),
        [
            CardPlayed(BOB, one("W+4"), Colour.RED),
            CardsTaken(ANN, toks("Y1 Y2 Y3 Y4"), Rule.ACTION_WILD_DRAW_FOUR),
            RoundEnded(1, BOB, 31 + 1 + 2 + 3 + 4, ((*toks(LOSER), *toks("Y1 Y2 Y3 Y4")), ())),
        ],
    )
    out = run(log, Play(BOB, one("W+4"), colour=Colour.RED))
    then_violation(out, Challenge(ANN), Rule.ROUND_END)


@scenario("round.end", "mk.item.banana")
def test_going_out_on_an_item_box_its_item_still_hits_others() -> None:
    then_events(
        six_down("RS RS YS YS GS GS WIB", Variant.MARIO_KART, pile="Y3 B7 B8"),
        Play(BOB, one("WIB")),
        [
            CardPlayed(BOB, one("WIB")),
            CardFlipped(one("Y3")),
            CardsTaken(ANN, toks("B7 B8"), Rule.MK_ITEM_BANANA),
            RoundEnded(1, BOB, 31 + 7 + 8, ((*toks(LOSER), *toks("B7 B8")), ())),
        ],
    )


@scenario("round.end", "mk.item.mushroom")
def test_going_out_on_an_item_box_a_mushroom_earns_no_extra_turn() -> None:
    then_events(
        six_down("RS RS YS YS GS GS WIB", Variant.MARIO_KART, pile="R7 B8"),
        Play(BOB, one("WIB")),
        [CardPlayed(BOB, one("WIB")), CardFlipped(one("R7")), RoundEnded(1, BOB, 31, (toks(LOSER), ()))],
    )


@scenario("round.end", "attack.hit-two")
def test_going_out_on_hit_two_the_presses_still_happen() -> None:
    then_events(
        six_down("RS RS YS YS GS GS GH2", Variant.ATTACK),
        Play(BOB, one("GH2"), supply=Supply(presses=(1, 0))),
        [
            CardPlayed(BOB, one("GH2")),
            LauncherPressed(ANN, toks("Y1"), Rule.ATTACK_HIT_TWO),
            LauncherPressed(ANN, (), Rule.ATTACK_HIT_TWO),
            RoundEnded(1, BOB, 31 + 1, ((*toks(LOSER), one("Y1")), ())),
        ],
    )


@scenario("round.end", "sonic.victory-lap", "score.match")
def test_going_out_on_a_victory_lap_the_others_still_draw() -> None:
    then_events(
        six_down("RS RS YS YS GS GS WVL", Variant.SONIC),
        Play(BOB, one("WVL"), colour=Colour.BLUE),
        [
            CardPlayed(BOB, one("WVL"), Colour.BLUE),
            CardsTaken(ANN, toks("Y1"), Rule.SONIC_VICTORY_LAP),
            RoundEnded(1, BOB, 31 + 1, ((*toks(LOSER), one("Y1")), ())),
            GameEnded(BOB, (0, 32), None),  # Sonic plays a single round
        ],
    )


# --- score.round ---------------------------------------------------------------------------------------

# The digest's example: 7+2+9+2 = 20, three 20s = 60, three 50s = 150, total 230. Ann holds ten cards at
# the end: seven dealt, two from bob's R+2 and one she drew.
ANN_230 = "R7 Y2 G9 Y2 GS YR W"
BOB_230 = "R+2 RS YS GS BS B1 B2"


def before_230(options: dict[str, Any] | None = None) -> list[Event]:
    log = given(
        Variant.CLASSIC, 2, {BOB: BOB_230, ANN: ANN_230}, "R5", "W+4 W G+2", dealer=ANN, options=options
    )
    log = run(log, *(Play(BOB, one(t)) for t in ("R+2", "RS", "YS", "GS", "BS")))
    log = run(log, Play(BOB, one("B1"), uno=True), Draw(ANN))  # ann draws G+2, which does not match B1
    assert log[-1] == Prompted(BOB, Awaiting.PLAY)
    return log


@scenario("score.round", "round.end")
def test_the_digests_scoring_example_totals_230() -> None:
    log = before_230()
    ann = toks("R7 Y2 G9 Y2 GS YR W W+4 W G+2")
    then_events(log, Play(BOB, one("B2")), [CardPlayed(BOB, one("B2")), RoundEnded(1, BOB, 230, (ann, ()))])
    assert fold(run(log, Play(BOB, one("B2")))).scores == (0, 230)


@scenario("score.round")
@pytest.mark.parametrize(
    ("variant", "options", "loser", "points"),
    [
        (Variant.ATTACK, {}, "RH2 RDA WH4 WAA WC W R9", 20 + 30 + 40 + 50 + 50 + 50 + 9),
        (
            Variant.ATTACK,
            {"attack_edition": "2010"},
            "RTH WAH WHF YH2 B9 BDA R1",
            30 + 50 + 50 + 20 + 9 + 30 + 1,
        ),
        (Variant.SONIC, {}, "WVL WVL W+4 W R0 B+2 YR", 50 * 4 + 0 + 20 + 20),
        (Variant.MARIO_KART, {}, "WIB WIB W+4 G0 G9 BS Y+2", 50 * 3 + 0 + 9 + 20 + 20),
    ],
)
def test_every_card_scores_its_digest_value(
    variant: Variant, options: dict[str, str], loser: str, points: int
) -> None:
    log = won_round(variant, loser, options=options)
    ended = [e for e in log if isinstance(e, RoundEnded)]
    assert ended == [RoundEnded(1, BOB, points, (toks(loser), ()))]


# --- score.match ---------------------------------------------------------------------------------------


@scenario("score.match")
def test_reaching_the_target_score_wins_the_game() -> None:
    log = before_230({"target_score": 200})
    ann = toks("R7 Y2 G9 Y2 GS YR W W+4 W G+2")
    then_events(
        log,
        Play(BOB, one("B2")),
        [CardPlayed(BOB, one("B2")), RoundEnded(1, BOB, 230, (ann, ())), GameEnded(BOB, (0, 230), None)],
    )


@scenario("score.match")
def test_exactly_the_target_score_is_enough() -> None:
    log = won_round(Variant.CLASSIC, LOSER, options={"target_score": 31})
    assert log[-1] == GameEnded(BOB, (0, 31), None)


@scenario("score.match")
def test_below_the_target_the_match_goes_on() -> None:
    log = won_round(Variant.CLASSIC, LOSER, options={"target_score": 32})
    assert isinstance(log[-1], RoundEnded)
    assert fold(log).awaiting is Awaiting.ROUND_START


@scenario("score.match", "setup.dealer")
def test_scores_add_up_over_rounds_until_one_reaches_the_target() -> None:
    log = won_round(Variant.CLASSIC, LOSER, options={"target_score": 200})
    assert fold(log).scores == (0, 31)
    # Round 2: bob deals; the first card is a Reverse, so the dealer plays first.
    ann = "W W W+4 W+4 R1 R2 R3"  # 206 points
    deck = stacked_deck(DECKS["classic"], {BOB: BOB_GOES_OUT, ANN: ann}, "YR", players=2, dealer=BOB)
    dealt = when(log, StartRound(deck=deck))
    assert dealt == (
        RoundStarted(2, BOB, deck, None),
        CardFlipped(one("YR")),
        DirectionReversed(),
        Prompted(BOB, Awaiting.PLAY),
    )
    log = [*log, *dealt]
    plays = [Play(BOB, one(t)) for t in ("YS", "YS", "RS", "RS", "GS")] + [Play(BOB, one("GS"), uno=True)]
    log = run(log, *plays)
    then_events(
        log,
        Play(BOB, one("G1")),
        [
            CardPlayed(BOB, one("G1")),
            RoundEnded(2, BOB, 206, (toks(ann), ())),
            GameEnded(BOB, (0, 237), None),
        ],
    )


@scenario("score.match")
def test_nothing_is_played_after_the_game_ended() -> None:
    log = won_round(Variant.CLASSIC, LOSER, options={"target_score": 31})
    state = fold(log)
    assert state.awaiting is Awaiting.GAME_OVER
    assert state.winner == BOB
    then_violation(state, StartRound(deck=state.deck), Rule.SCORE_MATCH, "over")
    then_violation(state, Play(ANN, one("R1")), Rule.SCORE_MATCH, "over")


@scenario("score.match")
def test_sonic_plays_a_single_round_by_default() -> None:
    log = won_round(Variant.SONIC, LOSER)
    assert log[-2:] == [RoundEnded(1, BOB, 31, (toks(LOSER), ())), GameEnded(BOB, (0, 31), None)]
    more = won_round(Variant.SONIC, LOSER, options={"single_round": False})
    assert isinstance(more[-1], RoundEnded)
    assert fold(more).awaiting is Awaiting.ROUND_START
