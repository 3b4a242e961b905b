"""The corners where tables argue, as the digest settles them (``docs/RULES.md``).

Each test pins one settled point with a game dealt by the real engine from a stacked deck; the classes
they stand for are swept by the properties in ``tests/test_corner_properties.py`` and, for reshuffles in
records, ``tests/test_record_modes.py``.
"""

from __future__ import annotations

from service.rules import (
    Catch,
    Challenge,
    Colour,
    Draw,
    Pass,
    Play,
    Press,
    Rule,
    Supply,
    Variant,
    fold,
    resolve,
)
from service.rules.commands import CallUno, Command
from service.rules.events import (
    Awaiting,
    CardPlayed,
    CardsTaken,
    DirectionReversed,
    Event,
    LauncherPressed,
    PileReshuffled,
    Prompted,
    UnoCaught,
    Wd4Challenged,
)

from .support import given, hand, one, run, scenario, then_events, then_violation, toks, when

ANN, BOB, CY, DEE = 0, 1, 2, 3


def presses(*outcomes: int) -> Supply:
    return Supply(presses=outcomes)


def pressed(seat: int, cards: str, cause: Rule) -> LauncherPressed:
    return LauncherPressed(seat, toks(cards), cause)


# --- attack.follow-up ---------------------------------------------------------------------------------

FOLLOW = "RS RR RH2 R7 YS G2 G3"


def follow_table(players: int = 3) -> list[Event]:
    """UNO Attack, ann deals, bob starts on R5 holding ``FOLLOW``; the launcher is stacked with yellows."""
    hands = {BOB: FOLLOW, ANN: "B1 B2 B3 B4 B6 B7 B8", CY: "GDA G1 G3 Y4 Y6 B7 B8"}
    return given(Variant.ATTACK, players, hands, "R5", "Y1 Y2 Y3 Y4 Y5 Y6", dealer=ANN)


@scenario("attack.follow-up", "action.reverse")
def test_a_follow_up_reverse_after_a_skip_never_gives_the_player_another_turn() -> None:
    chance = run(follow_table(), Play(BOB, one("RS")))  # cy skipped: the turn pointer is on ann
    # The Reverse flips the direction; the turn goes to the player after bob in the new direction: ann.
    then_events(
        chance,
        Play(BOB, one("RR")),
        [CardPlayed(BOB, one("RR")), DirectionReversed(), Prompted(ANN, Awaiting.PLAY)],
    )


@scenario("attack.follow-up", "action.skip")
def test_a_follow_up_skip_after_a_reverse_skips_the_pointed_player() -> None:
    log = follow_table(players=4)  # ann, bob, cy, dee: bob's Reverse points the turn back at ann
    chance = run(log, Play(BOB, one("RR")))
    assert fold(chance).pointer == ANN
    # The follow-up's "next player" is the pointed one: the Skip skips ann, and dee plays.
    then_events(chance, Play(BOB, one("RS")), [CardPlayed(BOB, one("RS")), Prompted(DEE, Awaiting.PLAY)])


@scenario("attack.follow-up", "attack.launcher")
def test_a_press_instead_of_the_follow_up_is_a_violation_and_leaves_the_skip_standing() -> None:
    chance = run(follow_table(), Play(BOB, one("RS")))
    state = fold(chance)
    then_violation(state, Press(BOB, presses(0)), Rule.ATTACK_FOLLOW_UP)
    # Applied as a table did it anyway (the verifier's way), the press ends bob's turn and the turn goes
    # where the Skip pointed (ann), not back to cy, whom the Skip skipped.
    events, after = resolve(state, Press(BOB, presses(1)))
    assert events == (pressed(BOB, "Y1", Rule.ATTACK_LAUNCHER), Prompted(ANN, Awaiting.PLAY))
    assert after.turn == ANN


@scenario("attack.follow-up")
def test_drawing_instead_of_the_follow_up_is_a_follow_up_violation() -> None:
    chance = run(follow_table(), Play(BOB, one("RS")))
    then_violation(chance, Draw(BOB), Rule.ATTACK_FOLLOW_UP)


# --- the "all others" order ---------------------------------------------------------------------------


@scenario("attack.all-hit", "action.reverse")
def test_all_hit_presses_in_turn_order_from_the_next_player_in_the_current_direction() -> None:
    # 2010 edition, four players, ann deals and flips a Reverse: ann plays first and play goes right
    # (counter-clockwise), so after ann come dee, cy, bob.
    hands = {ANN: "WAH R1 R2 R3 R4 R6 R7"}
    log = given(Variant.ATTACK, 4, hands, "RR", dealer=ANN, options={"attack_edition": "2010"})
    state = fold(log)
    assert (state.turn, state.direction) == (ANN, -1)
    events = when(log, Play(ANN, one("WAH"), colour=Colour.RED, supply=presses(0, 0, 0)))
    assert [e.player for e in events if isinstance(e, LauncherPressed)] == [DEE, CY, BOB]


# --- the launcher refills before any press ------------------------------------------------------------


@scenario("attack.launcher", "draw.reshuffle")
def test_a_press_that_finds_the_launcher_empty_reshuffles_first_even_when_it_fires_nothing() -> None:
    log = follow_table()
    # bob's press fires the whole launcher; with only the top card discarded, cy's press and ann's find
    # nothing to reshuffle and fire nothing.
    log = run(log, Press(BOB, presses(len(fold(log).pile))), Press(CY, presses(0)), Press(ANN, presses(0)))
    log = run(log, Play(BOB, one("R7")))
    state = fold(log)
    assert not state.pile and state.discard == toks("R5 R7")
    # cy's press fires nothing, but finds the launcher empty: the discards but the top go in first.
    then_events(
        log,
        Press(CY, presses(0)),
        [
            PileReshuffled(toks("R5"), False),
            pressed(CY, "", Rule.ATTACK_LAUNCHER),
            Prompted(ANN, Awaiting.PLAY),
        ],
    )


# --- uno.call and uno.catch with Trade Hands ----------------------------------------------------------


def trade_table() -> list[Event]:
    """UNO Attack 2010, two players: bob starts (ann deals) and sheds six cards with Skips, Reverses
    (Skips with two players) and a Hit 2, calling UNO with the last; ann holds a Trade Hands."""
    hands = {BOB: "RS RS RR RR RH2 R1 R2", ANN: "RTH G7 G8 Y1 Y2 Y3 Y4"}
    log = given(Variant.ATTACK, 2, hands, "R9", dealer=ANN, options={"attack_edition": "2010"})
    plays = [Play(BOB, one(token)) for token in ("RS", "RS", "RR", "RR")]
    return run(log, *plays, Play(BOB, one("RH2"), supply=presses(0, 0)), Play(BOB, one("R1"), uno=True))


@scenario("uno.call", "attack.trade-hands")
def test_a_player_who_trades_down_to_one_card_calls_with_the_trade() -> None:
    log = trade_table()
    assert hand(fold(log), BOB) == ["R2"]
    # ann trades her six remaining cards for bob's one: she may (and must) call with the play.
    after = run(log, Play(ANN, one("RTH"), uno=True, target=BOB))
    state = fold(after)
    assert hand(state, ANN) == ["R2"] and len(state.hands[BOB]) == 6
    assert state.exposed == ()
    then_violation(after, Catch(BOB, ANN, presses(0, 0)), Rule.UNO_CATCH_INVALID)


@scenario("uno.catch", "attack.trade-hands")
def test_a_player_who_trades_down_to_one_card_without_calling_can_be_caught() -> None:
    after = run(trade_table(), Play(ANN, one("RTH"), target=BOB))
    assert fold(after).exposed == (ANN,)
    then_events(
        after,
        Catch(BOB, ANN, presses(1, 0)),
        [
            UnoCaught(BOB, ANN),
            pressed(ANN, fold(after).pile[0].token, Rule.UNO_PENALTY),
            pressed(ANN, "", Rule.UNO_PENALTY),
        ],
    )


@scenario("uno.call", "attack.trade-hands")
def test_calling_uno_with_a_trade_counts_the_hand_traded_for() -> None:
    hands = {BOB: "RS RS RR RR RH2 R1 R2", ANN: "RTH G7 G8 Y1 Y2 Y3 Y4"}
    early = given(Variant.ATTACK, 2, hands, "R9", dealer=ANN, options={"attack_edition": "2010"})
    early = run(early, Play(BOB, one("R1")))
    # ann's trade would leave her bob's six cards: calling UNO with it is wrong, whatever she keeps.
    then_violation(early, Play(ANN, one("RTH"), uno=True, target=BOB), Rule.UNO_CALL, "6 cards")


# --- uno.catch: the window closes only at another player's turn action ---------------------------------


def down_to_skip_and_one() -> list[Event]:
    """UNO Attack, three players (bob, cy, ann in turn order): bob plays five cards while cy and ann
    press empty launchers, and holds RS and G2."""
    log = given(
        Variant.ATTACK, 3, {BOB: "R1 R2 R3 R4 R6 RS G2", ANN: "B1 B2 B3 B4 B6 B7 B8"}, "R5", dealer=ANN
    )
    commands: list[Command] = []
    for token in ("R1", "R2", "R3", "R4", "R6"):
        commands += [Play(BOB, one(token)), Press(CY, presses(0)), Press(ANN, presses(0))]
    return run(log, *commands)


@scenario("uno.catch", "attack.follow-up")
def test_the_pass_that_ends_a_follow_up_chance_does_not_close_the_players_own_window() -> None:
    log = run(down_to_skip_and_one(), Play(BOB, one("RS")), Pass(BOB))  # bob holds G2, did not call
    assert fold(log).exposed == (BOB,)
    assert fold(log).turn == ANN  # the Skip skipped cy
    penalty = pressed(BOB, "", Rule.UNO_PENALTY)
    then_events(log, Catch(CY, BOB, presses(0, 0)), [UnoCaught(CY, BOB), penalty, penalty])
    # ann's turn action closes it.
    closed = run(log, Press(ANN, presses(0)))
    then_violation(closed, Catch(CY, BOB, presses(0, 0)), Rule.UNO_CATCH_INVALID, "window has closed")


@scenario("uno.call")
def test_a_late_call_before_the_next_turn_is_safe() -> None:
    log = run(down_to_skip_and_one(), Play(BOB, one("RS")), Pass(BOB), CallUno(BOB))
    then_violation(log, Catch(ANN, BOB, presses(0, 0)), Rule.UNO_CATCH_INVALID, "called")


# --- wd4.challenge: calls and catches may come first ---------------------------------------------------


def wd4_down_to_one(last: str) -> list[Event]:
    """Classic, two players: ann sheds five cards with Skips, Reverses (Skips for two) and a +2, then
    plays a Wild Draw Four (choosing green) down to ``last`` without calling UNO. bob is the victim."""
    hands = {ANN: f"RS RS RR RR R+2 W+4 {last}"}
    log = given(Variant.CLASSIC, 2, hands, "R9", dealer=BOB)
    plays = [Play(ANN, one(token)) for token in ("RS", "RS", "RR", "RR", "R+2")]
    return run(log, *plays, Play(ANN, one("W+4"), colour=Colour.GREEN))


@scenario("wd4.challenge", "uno.catch")
def test_the_victim_may_catch_the_offender_before_challenging() -> None:
    log = wd4_down_to_one("R7")  # a red card in hand with red active: the Wild Draw Four was illegal
    state = fold(log)
    assert (state.awaiting, state.turn, state.exposed) == (Awaiting.WD4_RESPONSE, BOB, (ANN,))
    caught = run(log, Catch(BOB, ANN))
    assert fold(caught).awaiting is Awaiting.WD4_RESPONSE
    assert len(fold(caught).hands[ANN]) == 3
    events = when(caught, Challenge(BOB))
    judged = next(e for e in events if isinstance(e, Wd4Challenged))
    # Judged on ann's hand when she played it, not on the hand the penalty gave her.
    assert (judged.upheld, judged.matching, judged.hand) == (True, toks("R7"), toks("W+4 R7"))
    assert [len(e.cards) for e in events if isinstance(e, CardsTaken)] == [4]


@scenario("wd4.challenge", "uno.call")
def test_the_offender_may_call_before_the_victim_answers_and_the_victim_still_answers() -> None:
    log = run(wd4_down_to_one("G7"), CallUno(ANN))
    state = fold(log)
    assert (state.awaiting, state.exposed) == (Awaiting.WD4_RESPONSE, ())
    events = when(log, Challenge(BOB))
    judged = next(e for e in events if isinstance(e, Wd4Challenged))
    assert not judged.upheld  # G7 was not red: legal
    assert [len(e.cards) for e in events if isinstance(e, CardsTaken)] == [6]


@scenario("wd4.challenge")
def test_a_play_instead_of_the_answer_is_refused() -> None:
    log = wd4_down_to_one("G7")
    then_violation(log, Pass(BOB), Rule.ACTION_WILD_DRAW_FOUR)
    then_violation(log, Challenge(ANN), Rule.WD4_CHALLENGE, "bob")


def both_down_to_one() -> list[Event]:
    """UNO Attack 2010, two players: bob sheds to R2 calling UNO; ann sheds five reds while bob presses
    empty launchers, keeps RTH and G7, and trades with bob without calling: each holds one card."""
    hands = {BOB: "RS RS RR RR RH2 R1 R2", ANN: "R3 R4 R5 R6 R7 RTH G7"}
    log = given(Variant.ATTACK, 2, hands, "R9", dealer=ANN, options={"attack_edition": "2010"})
    bob = [Play(BOB, one(token)) for token in ("RS", "RS", "RR", "RR")]
    log = run(log, *bob, Play(BOB, one("RH2"), supply=presses(0, 0)), Play(BOB, one("R1"), uno=True))
    for token in ("R3", "R4", "R5", "R6", "R7"):
        log = run(log, Play(ANN, one(token)), Press(BOB, presses(0)))
    return run(log, Play(ANN, one("RTH"), target=BOB))


@scenario("uno.call", "uno.catch", "attack.trade-hands")
def test_a_trade_can_leave_both_players_with_one_card_and_both_must_call() -> None:
    log = both_down_to_one()
    state = fold(log)
    assert (hand(state, ANN), hand(state, BOB)) == (["R2"], ["G7"])
    assert state.exposed == (ANN, BOB)
    # Either may be caught by the other; a call by one leaves the other's window open.
    assert fold(run(log, Catch(ANN, BOB, presses(0, 0)))).exposed == (ANN,)
    assert fold(run(log, Catch(BOB, ANN, presses(0, 0)))).exposed == (BOB,)
    assert fold(run(log, CallUno(BOB))).exposed == (ANN,)
    # bob's own turn action (a press that fires nothing) closes ann's window but not his own.
    assert fold(run(log, Press(BOB, presses(0)))).exposed == (BOB,)
