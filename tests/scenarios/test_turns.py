"""Scenarios for a turn: whose turn, what may be played, drawing, passing, reshuffling (digest §3)."""

from __future__ import annotations

import pytest

from service.rules import (
    Choose,
    Colour,
    Draw,
    Event,
    Impossible,
    Pass,
    Play,
    Reshuffle,
    Rule,
    Supply,
    Variant,
    decide,
    fold,
)
from service.rules.events import (
    Awaiting,
    CardDrawn,
    CardPlayed,
    CardsTaken,
    Passed,
    PileReshuffled,
    Prompted,
)

from .support import (
    drain,
    given,
    given_hands,
    hand,
    one,
    rederived_shuffle,
    run,
    scenario,
    then_events,
    then_violation,
    toks,
)

ANN, BOB, CY = 0, 1, 2

# Three players, ann deals, bob starts on R5. The draw pile starts G6 R3.
BOB_HAND = "R9 G5 G2 W W+4 Y7 B8"
CY_HAND = "RS R1 G1 Y1 B1 G3 Y3"


def table(pile: str = "G6 R3") -> list[Event]:
    return given(Variant.CLASSIC, 3, {BOB: BOB_HAND, CY: CY_HAND}, "R5", pile, dealer=ANN)


# --- turn.order ----------------------------------------------------------------------------------------


@scenario("turn.order")
def test_only_the_player_on_turn_may_play() -> None:
    then_violation(table(), Play(CY, one("R1")), Rule.TURN_ORDER, "bob", "cy")


@scenario("turn.order")
def test_only_the_player_on_turn_may_draw_or_pass() -> None:
    then_violation(table(), Draw(ANN), Rule.TURN_ORDER, "bob", "ann")
    then_violation(table(), Pass(CY), Rule.TURN_ORDER, "bob", "cy")


@scenario("turn.order")
def test_a_choice_when_none_is_asked_for_is_rejected() -> None:
    then_violation(table(), Choose(BOB, colour=Colour.BLUE), Rule.TURN_ORDER)


@scenario("turn.order", "turn.end")
def test_the_turn_passes_clockwise_after_a_play() -> None:
    log = run(table(), Play(BOB, one("R9")))
    assert log[-1] == Prompted(CY, Awaiting.PLAY)
    then_violation(log, Play(BOB, one("G5")), Rule.TURN_ORDER, "cy", "bob")
    then_events(log, Play(CY, one("R1")), [CardPlayed(CY, one("R1")), Prompted(ANN, Awaiting.PLAY)])


# --- play.match ----------------------------------------------------------------------------------------


@scenario("play.match")
def test_a_card_of_the_active_colour_matches() -> None:
    then_events(table(), Play(BOB, one("R9")), [CardPlayed(BOB, one("R9")), Prompted(CY, Awaiting.PLAY)])


@scenario("play.match")
def test_a_card_of_the_top_cards_number_matches() -> None:
    then_events(table(), Play(BOB, one("G5")), [CardPlayed(BOB, one("G5")), Prompted(CY, Awaiting.PLAY)])
    state = fold(run(table(), Play(BOB, one("G5"))))
    assert state.colour is Colour.GREEN
    assert state.top is one("G5")


@scenario("play.match")
def test_a_card_of_the_top_cards_symbol_matches() -> None:
    # GS first: bob loses the turn, cy plays a Skip of another colour on it.
    log = given(Variant.CLASSIC, 3, {CY: CY_HAND}, "GS", dealer=ANN)
    assert log[-1] == Prompted(CY, Awaiting.PLAY)
    then_events(log, Play(CY, one("RS")), [CardPlayed(CY, one("RS")), Prompted(BOB, Awaiting.PLAY)])


@scenario("play.match")
def test_a_wild_matches_anything() -> None:
    then_events(
        table(),
        Play(BOB, one("W"), colour=Colour.BLUE),
        [CardPlayed(BOB, one("W"), Colour.BLUE), Prompted(CY, Awaiting.PLAY)],
    )


@scenario("play.match")
@pytest.mark.parametrize("token", ["G2", "Y7", "B8"])
def test_a_card_matching_neither_colour_nor_number_nor_symbol_is_rejected(token: str) -> None:
    then_violation(table(), Play(BOB, one(token)), Rule.PLAY_MATCH, token, "R5")


@scenario("play.match")
def test_on_a_wild_the_chosen_colour_is_the_active_colour() -> None:
    log = run(table(), Play(BOB, one("W"), colour=Colour.GREEN))
    then_violation(log, Play(CY, one("R1")), Rule.PLAY_MATCH, "R1", "W", "G")
    then_events(log, Play(CY, one("G1")), [CardPlayed(CY, one("G1")), Prompted(ANN, Awaiting.PLAY)])


# --- play.in-hand --------------------------------------------------------------------------------------


@scenario("play.in-hand")
@pytest.mark.parametrize("token", ["B9", "RS"])  # RS is in cy's hand, not bob's
def test_a_card_the_player_does_not_hold_is_rejected(token: str) -> None:
    then_violation(table(), Play(BOB, one(token)), Rule.PLAY_IN_HAND, "bob", token)


# --- play.wild-colour ----------------------------------------------------------------------------------


@scenario("play.wild-colour")
@pytest.mark.parametrize("token", ["W", "W+4"])
def test_a_wild_without_a_chosen_colour_is_rejected(token: str) -> None:
    then_violation(table(), Play(BOB, one(token)), Rule.PLAY_WILD_COLOUR, token)


@scenario("play.wild-colour")
def test_a_coloured_card_with_a_chosen_colour_is_rejected() -> None:
    then_violation(table(), Play(BOB, one("R9"), colour=Colour.BLUE), Rule.PLAY_WILD_COLOUR, "R9")


@scenario("play.wild-colour")
def test_a_wild_may_choose_the_current_colour() -> None:
    then_events(
        table(),
        Play(BOB, one("W"), colour=Colour.RED),
        [CardPlayed(BOB, one("W"), Colour.RED), Prompted(CY, Awaiting.PLAY)],
    )


# --- draw.one ------------------------------------------------------------------------------------------


@scenario("draw.one", "turn.end")
def test_drawing_an_unplayable_card_ends_the_turn_even_when_the_player_could_have_played() -> None:
    log = table("G6 R3")
    then_events(log, Draw(BOB), [CardDrawn(BOB, one("G6")), Prompted(CY, Awaiting.PLAY)])
    after = run(log, Draw(BOB))
    state = fold(after)
    assert hand(state, BOB) == [*BOB_HAND.split(), "G6"]
    assert state.top is one("R5")
    then_violation(after, Play(BOB, one("R9")), Rule.TURN_ORDER, "cy", "bob")


@scenario("draw.one")
def test_a_playable_drawn_card_may_be_played_at_once() -> None:
    log = table("R3 G6")
    then_events(log, Draw(BOB), [CardDrawn(BOB, one("R3")), Prompted(BOB, Awaiting.DRAWN, new_turn=False)])
    drawn = run(log, Draw(BOB))
    then_events(drawn, Play(BOB, one("R3")), [CardPlayed(BOB, one("R3")), Prompted(CY, Awaiting.PLAY)])


@scenario("draw.one")
def test_after_drawing_only_the_drawn_card_may_be_played() -> None:
    drawn = run(table("R3 G6"), Draw(BOB))
    then_violation(drawn, Play(BOB, one("R9")), Rule.DRAW_ONE, "R3", "R9")


@scenario("draw.one")
def test_a_drawn_wild_is_playable() -> None:
    log = table("W G6")
    then_events(log, Draw(BOB), [CardDrawn(BOB, one("W")), Prompted(BOB, Awaiting.DRAWN, new_turn=False)])


@scenario("draw.one", "fair.commit")
def test_in_a_table_game_with_unknown_pile_order_the_drawn_card_is_reported() -> None:
    log = given_hands(
        Variant.CLASSIC, ["R1 R2 R3 R4 R6 R7 R8", "G0 G2 G3 G4 G6 G7 G8", "B1 B2 B3 B4 B6 B7 B8"], "Y5"
    )
    assert log[-1] == Prompted(BOB, Awaiting.PLAY)
    then_events(
        log,
        Draw(BOB, Supply(draws={BOB: toks("R9")})),
        [CardDrawn(BOB, one("R9")), Prompted(CY, Awaiting.PLAY)],
    )
    with pytest.raises(Impossible) as unlisted:
        decide(fold(log), Draw(BOB))
    assert unlisted.value.rule is Rule.FAIR_COMMIT
    with pytest.raises(Impossible) as held:  # bob holds the only G0: it cannot come from the pile
        decide(fold(log), Draw(BOB, Supply(draws={BOB: toks("G0")})))
    assert held.value.rule is Rule.DECK_COMPOSITION
    assert "G0" in held.value.message


# --- draw.pass -----------------------------------------------------------------------------------------


@scenario("draw.pass")
def test_a_playable_drawn_card_may_be_kept() -> None:
    drawn = run(table("R3 G6"), Draw(BOB))
    then_events(drawn, Pass(BOB), [Passed(BOB), Prompted(CY, Awaiting.PLAY)])
    kept = fold(run(drawn, Pass(BOB)))
    assert hand(kept, BOB) == [*BOB_HAND.split(), "R3"]
    assert kept.top is one("R5")


@scenario("draw.pass")
def test_passing_without_drawing_first_is_rejected() -> None:
    then_violation(table(), Pass(BOB), Rule.DRAW_PASS)


@scenario("draw.pass", "turn.order")
def test_only_the_player_who_drew_may_pass() -> None:
    drawn = run(table("R3 G6"), Draw(BOB))
    then_violation(drawn, Pass(CY), Rule.TURN_ORDER)


# --- turn.end ------------------------------------------------------------------------------------------


@scenario("turn.end")
def test_a_second_draw_in_the_same_turn_is_rejected() -> None:
    drawn = run(table("R3 G6"), Draw(BOB))
    then_violation(drawn, Draw(BOB), Rule.TURN_END, "bob")


# --- draw.reshuffle ------------------------------------------------------------------------------------

# Two players, ann deals, bob starts on R5; four cards go on the discard pile before the draw pile runs
# out: R5 R7 R8 R9 beneath R2 on top.
RESHUFFLE_HANDS = {BOB: "R7 R9 G1 G2 G3 G4 G6", ANN: "R8 R2 Y1 Y2 Y3 Y4 Y6"}
FOUR_PLAYS = (Play(BOB, one("R7")), Play(ANN, one("R8")), Play(BOB, one("R9")), Play(ANN, one("R2")))


@scenario("draw.reshuffle")
def test_an_empty_draw_pile_is_refilled_from_the_discard_pile_except_its_top_card() -> None:
    seed = b"reshuffle"
    log = drain(run(given(Variant.CLASSIC, 2, RESHUFFLE_HANDS, "R5", seed=seed), *FOUR_PLAYS))
    state = fold(log)
    assert not state.pile
    assert state.discard == toks("R5 R7 R8 R9 R2")
    assert state.turn == ANN  # 93 cards drawn one at a time, bob first
    pile = rederived_shuffle(seed, "round:1:reshuffle:0", toks("R5 R7 R8 R9"))
    then_events(
        log,
        Draw(ANN),
        [PileReshuffled(pile, True), CardDrawn(ANN, pile[0]), Prompted(ANN, Awaiting.DRAWN, new_turn=False)],
    )
    after = fold(run(log, Draw(ANN)))
    assert after.discard == toks("R2")
    assert after.pile == pile[1:]


@scenario("draw.reshuffle")
def test_a_table_game_reshuffles_into_a_pile_of_unknown_order() -> None:
    log = drain(run(given(Variant.CLASSIC, 2, RESHUFFLE_HANDS, "R5"), *FOUR_PLAYS))
    then_events(
        log,
        Draw(ANN, Supply(draws={ANN: toks("R8")})),
        [
            PileReshuffled(toks("R5 R7 R8 R9"), False),
            CardDrawn(ANN, one("R8")),
            Prompted(ANN, Awaiting.DRAWN, new_turn=False),
        ],
    )


@scenario("draw.reshuffle", "action.draw-two")
def test_a_penalty_draw_reshuffles_in_the_middle_when_the_pile_runs_out() -> None:
    seed = b"reshuffle"
    hands = {BOB: "R7 R9 R+2 G2 G3 G4 G6", ANN: RESHUFFLE_HANDS[ANN]}
    log = drain(run(given(Variant.CLASSIC, 2, hands, "R5", seed=seed), *FOUR_PLAYS), leave=1)
    state = fold(log)
    assert state.turn == BOB
    (last,) = state.pile
    pile = rederived_shuffle(seed, "round:1:reshuffle:0", toks("R5 R7 R8 R9 R2"))
    then_events(
        log,
        Play(BOB, one("R+2")),
        [
            CardPlayed(BOB, one("R+2")),
            CardsTaken(ANN, (last,), Rule.ACTION_DRAW_TWO),
            PileReshuffled(pile, True),
            CardsTaken(ANN, pile[:1], Rule.ACTION_DRAW_TWO),
            Prompted(BOB, Awaiting.PLAY),
        ],
    )


@scenario("draw.reshuffle")
def test_with_nothing_to_reshuffle_the_draw_is_forfeited() -> None:
    log = drain(given(Variant.CLASSIC, 2, RESHUFFLE_HANDS, "R5"))
    state = fold(log)
    assert state.discard == toks("R5")
    assert state.turn == ANN
    then_events(log, Draw(ANN), [Passed(ANN), Prompted(BOB, Awaiting.PLAY)])


@scenario("draw.reshuffle")
def test_a_table_game_may_report_its_reshuffle_once_the_pile_is_empty() -> None:
    log = drain(run(given(Variant.CLASSIC, 2, RESHUFFLE_HANDS, "R5"), *FOUR_PLAYS))
    assert not fold(log).pile
    new_pile = toks("R9 R5 R8 R7")  # the discards but the top R2, in the table's order
    then_events(log, Reshuffle(new_pile), [PileReshuffled(new_pile, True)])
    then_violation(log, Reshuffle(new_pile[1:]), Rule.DRAW_RESHUFFLE, "discard pile")
    then_violation(log, Reshuffle((*new_pile, one("R2"))), Rule.DRAW_RESHUFFLE, "discard pile")


@scenario("draw.reshuffle")
@pytest.mark.parametrize("left", [1, 2, 7, 40])
def test_a_reshuffle_while_the_pile_still_holds_cards_breaks_draw_reshuffle(left: int) -> None:
    log = drain(run(given(Variant.CLASSIC, 2, RESHUFFLE_HANDS, "R5"), *FOUR_PLAYS), leave=left)
    state = fold(log)
    assert len(state.pile) == left
    # Even the right cards (the pile and the discards but the top) may not be reshuffled yet.
    then_violation(log, Reshuffle((*toks("R9 R5 R8 R7"), *state.pile)), Rule.DRAW_RESHUFFLE, f"holds {left}")


@scenario("draw.reshuffle", "fair.commit")
def test_a_seeded_game_does_not_take_a_reported_reshuffle() -> None:
    log = run(given(Variant.CLASSIC, 2, RESHUFFLE_HANDS, "R5", seed=b"s"), *FOUR_PLAYS)
    state = fold(log)
    then_violation(log, Reshuffle((*toks("R9 R5 R8 R7"), *state.pile)), Rule.DRAW_RESHUFFLE, "seed")
