"""UNO Attack (both editions): the Attack action cards, the follow-up, and the first-card rule.

Pressing the launcher is the engine's (:meth:`~service.rules.engine.Act.press`); taking every card by
pressing is the rule set's ``taking``. The follow-up (``attack.follow-up``) is here whole: an S or R
offers it (:func:`skip`, :func:`reverse`), and the turn's other modules ask :func:`instead_of_follow_up`,
:func:`follow_up_origin` and :func:`turn_after`. docs/DESIGN.md ("The rules engine").
"""

from __future__ import annotations

from typing import Final

from service.rules.cards import Face
from service.rules.classic import next_turn, penalty
from service.rules.engine import Act, Effect, Played
from service.rules.events import Awaiting, DirectionReversed, HandsTraded
from service.rules.options import CustomAction
from service.rules.state import State
from service.rules.violations import Rule, Violation

#: A Wild Hit-Fire victim presses until a card fires; this many empty presses in a row end it anyway
#: (a launcher distribution that almost never fires must not hang the game).
HIT_FIRE_LIMIT = 100

# Read on every draw and pass, as a constant: Python 3.11 reads an enum member through EnumType.__getattr__.
_FOLLOW_UP: Final = Awaiting.FOLLOW_UP

# --- S, R and the follow-up ------------------------------------------------------------------------


def _then(act: Act, played: Played, pointer: int) -> None:
    """End an S or R play: offer the follow-up chance (``attack.follow-up``) or pass the turn on."""
    if played.going_out:
        return
    s = act.state
    if not played.chained and s.size >= 3 and s.options.attack_follow_up:
        act.prompt(played.cmd.player, Awaiting.FOLLOW_UP, pointer=pointer, new_turn=False)
    else:
        act.prompt(pointer)


def skip(act: Act, played: Played) -> None:
    """Skip (``action.skip``), with the follow-up chance."""
    _then(act, played, act.state.next_seat(played.origin, 2))


def reverse(act: Act, played: Played) -> None:
    """Reverse (``action.reverse``), with the follow-up chance; with two players it acts as Skip."""
    act.emit(DirectionReversed())
    _then(act, played, _after_reverse(act, played))


def _after_reverse(act: Act, played: Played) -> int:
    """Who plays after a Reverse (or a customizable set to reverse), the direction already flipped.

    A follow-up Reverse hands the turn to the player after the follow-up's player in the new direction
    (``attack.follow-up``), not to the one before the pointed player.
    """
    s = act.state
    if played.chained:
        return s.next_seat(played.cmd.player)
    if s.size == 2 and s.options.two_player_reverse_skips:
        return played.origin
    return s.next_seat(played.origin)


def instead_of_follow_up(state: State, seat: int) -> Violation | None:
    """``attack.follow-up``: a draw or a press by ``seat`` while its follow-up chance is open breaks it."""
    if state.awaiting is _FOLLOW_UP and seat == state.turn:
        return Violation(Rule.ATTACK_FOLLOW_UP, "after S or R: play one more matching card or pass")
    return None


def follow_up_origin(state: State, seat: int) -> int | None:
    """The seat a follow-up card by ``seat`` counts "next player" from — the one before the player the
    S or R pointed to — or ``None`` when the card is not a follow-up."""
    if state.awaiting is _FOLLOW_UP and state.turn == seat and state.pointer is not None:
        return state.next_seat(state.pointer, -1)
    return None


def turn_after(state: State, seat: int) -> int:
    """Who plays after ``seat`` ends the turn without a play: the next seat, or — when the turn ends
    instead of a follow-up (a pass, or a press or draw the table allowed) — the player the S or R
    already pointed to."""
    if state.awaiting is _FOLLOW_UP and state.pointer is not None:
        return state.pointer
    return state.next_seat(seat)


# --- the Attack cards ------------------------------------------------------------------------------


def attack_attack(act: Act, played: Played) -> None:
    """``attack.attack-attack``: the named player presses twice; play then passes on normally."""
    assert played.cmd.target is not None
    act.presses(played.cmd.target, 2, Rule.ATTACK_ATTACK_ATTACK)
    next_turn(act, played)


def trade_hands(act: Act, played: Played) -> None:
    """``attack.trade-hands``: swap hands with the named opponent. A player going out on it has won;
    there is no hand left to trade (digest ``round.end`` keeps only effects on others)."""
    assert played.cmd.target is not None
    if not played.going_out:
        act.emit(HandsTraded(played.cmd.player, played.cmd.target))
    next_turn(act, played)


def all_hit(act: Act, played: Played) -> None:
    """``attack.all-hit``: every other player presses once, in turn order from the next player."""
    for seat in act.others(played):
        act.press(seat, Rule.ATTACK_ALL_HIT)
    next_turn(act, played)


def hit_fire(act: Act, played: Played) -> None:
    """``attack.hit-fire``: the next player presses until at least one card fires, then loses the turn."""
    s = act.state
    victim = s.next_seat(played.origin)
    for _ in range(HIT_FIRE_LIMIT):
        if act.press(victim, Rule.ATTACK_HIT_FIRE) or not (act.state.pile or act.state.discard[:-1]):
            break
    if not played.going_out:
        act.prompt(s.next_seat(played.origin, 2))


def customizable(act: Act, played: Played) -> None:
    """``attack.customizable``: the action fixed at game creation (a plain wild when unset)."""
    s = act.state
    action, count = s.options.custom_action, s.options.custom_count
    if action is CustomAction.TARGET_PRESS:
        assert played.cmd.target is not None
        act.presses(played.cmd.target, count, Rule.ATTACK_CUSTOMIZABLE)
        next_turn(act, played)
    elif action is CustomAction.ALL_PRESS:
        for seat in act.others(played):
            act.presses(seat, count, Rule.ATTACK_CUSTOMIZABLE)
        next_turn(act, played)
    elif action is CustomAction.SKIP:
        if not played.going_out:
            act.prompt(s.next_seat(played.origin, 2))
    elif action is CustomAction.REVERSE:
        act.emit(DirectionReversed())
        if not played.going_out:
            act.prompt(_after_reverse(act, played))
    elif action is CustomAction.TRADE_HANDS:
        trade_hands(act, played)
    else:
        next_turn(act, played)


EFFECTS: dict[Face, Effect] = {
    **{face: next_turn for face in Face if face.number is not None},
    Face.SKIP: skip,
    Face.REVERSE: reverse,
    Face.WILD: next_turn,
    Face.DISCARD_ALL: next_turn,  # its extra discards go down with the play itself
    Face.HIT_TWO: penalty(2, Rule.ATTACK_HIT_TWO, Act.presses),
    Face.WILD_HIT_FOUR: penalty(4, Rule.ATTACK_WILD_HIT_FOUR, Act.presses),
    Face.WILD_ATTACK_ATTACK: attack_attack,
    Face.TRADE_HANDS: trade_hands,
    Face.WILD_ALL_HIT: all_hit,
    Face.WILD_HIT_FIRE: hit_fire,
    Face.WILD_CUSTOMIZABLE: customizable,
}


def first_card(act: Act) -> None:
    """``setup.first-card`` for UNO Attack: H2 → the first player presses twice and loses the turn;
    S, R as classic; W → the first player chooses the colour; DA → no effect; any other wild or TH →
    returned to a random place in the launcher and flip again (digest **[decision]**)."""
    s = act.state
    assert s.dealer is not None
    dealer = s.dealer
    first = s.next_seat(dealer)
    card = act.flip()
    while card is not None and (
        card.face is Face.TRADE_HANDS or (card.is_wild and card.face is not Face.WILD)
    ):
        act.return_flip(card, anywhere=True)
        card = act.flip()
    face = card.face if card is not None else Face.ONE
    if face is Face.HIT_TWO:
        act.presses(first, 2, Rule.ATTACK_HIT_TWO)
        act.prompt(act.state.next_seat(first))
    elif face is Face.SKIP:
        act.prompt(act.state.next_seat(first))
    elif face is Face.REVERSE:
        act.emit(DirectionReversed())
        act.prompt(dealer)
    elif face is Face.WILD:
        act.prompt(first, Awaiting.COLOUR, pointer=first, new_turn=False)
    else:
        act.prompt(first)
