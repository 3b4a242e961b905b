"""The rules' predicates, each written once: the decider, the state, the bots and the verifier call them.

These are the questions the rules ask of a card or a hand — does it match, is this Wild Draw Four legal,
does this play trade hands, how many cards does it leave — answered from cards and options alone, so that
every layer (``decide``, ``evolve``, the bots, the verifier) gives the same answer. Nothing here knows the
state of a game.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from service.rules.cards import Card, Colour, Face
from service.rules.options import CustomAction, Options, Stacking


def playable(card: Card, top: Card, colour: Colour | None) -> bool:
    """``play.match``: ``card`` matches the active colour, or the top card's number or symbol, or is wild."""
    return card.is_wild or (card.colour is not None and card.colour is colour) or card.face is top.face


def playable_cards(hand: Sequence[Card], top: Card, colour: Colour | None) -> list[Card]:
    """The cards of ``hand`` that :func:`playable` allows, in hand order."""
    face = top.face
    # playable(), inlined: the bots ask this on every turn.
    return [c for c in hand if c.is_wild or (c.colour is not None and c.colour is colour) or c.face is face]


WILD_DRAW_FOUR = Card.parse("W+4")


def wd4_matching(hand: Sequence[Card], colour: Colour | None, wilds_block: bool) -> tuple[Card, ...]:
    """``wd4.legal``: the cards that make playing a Wild Draw Four from ``hand`` (the W+4 included)
    illegal under active colour ``colour``; empty when it is legal.

    Only the active colour counts (numbers and symbols matching the top card do not); with
    ``wilds_block`` (``wd4_wilds_block``, Sonic's default) other wild cards count as matching too.
    """
    others = list(hand)
    others.remove(WILD_DRAW_FOUR)
    return tuple(
        c for c in others if (c.colour is not None and c.colour is colour) or (wilds_block and c.is_wild)
    )


def names_target(face: Face, custom: CustomAction) -> bool:
    """Whether a card of ``face`` must name another player when played (Attack-Attack, Trade Hands, a
    customizable set to a targeted press or to trading hands; a Green Shell's target may be named too,
    but need not be)."""
    if face is Face.WILD_CUSTOMIZABLE:
        return custom in (CustomAction.TARGET_PRESS, CustomAction.TRADE_HANDS)
    return face in (Face.WILD_ATTACK_ATTACK, Face.TRADE_HANDS)


def trades_hands(card: Card, options: Options) -> bool:
    """Whether playing ``card`` swaps the player's hand with the named player's (``attack.trade-hands``,
    a customizable set to trade hands, or a 7 under ``house.seven-o``)."""
    face = card.face
    return (
        face is Face.TRADE_HANDS
        or (face is Face.WILD_CUSTOMIZABLE and options.custom_action is CustomAction.TRADE_HANDS)
        or (face is Face.SEVEN and options.seven_o)
    )


def rotates_hands(card: Card, options: Options) -> bool:
    """Whether playing ``card`` makes every player pass their hand on (a 0 under ``house.seven-o``)."""
    return card.face is Face.ZERO and options.seven_o


# --- house.stacking ------------------------------------------------------------------------------------

#: The draw cards and what each adds to a pending penalty: Draw Two and Hit 2 count as "+2", Wild Draw
#: Four and Wild Hit 4 as "W+4" (``house.stacking``: UNO Attack's cards take their places).
PENALTIES: Final = {Face.DRAW_TWO: 2, Face.HIT_TWO: 2, Face.WILD_DRAW_FOUR: 4, Face.WILD_HIT_FOUR: 4}
_ON_TWO = frozenset({Stacking.DRAW_TWO, Stacking.ANY})
_ON_FOUR = frozenset({Stacking.DRAW_FOUR, Stacking.ANY})


def stackable(face: Face, mode: Stacking) -> bool:
    """Whether a draw penalty of ``face`` waits to be stacked on under ``mode``; when nothing may stack
    on it (a +2 under ``draw-four``) it is taken at once, as without stacking."""
    penalty = PENALTIES.get(face)
    if penalty is None:
        return False
    return mode in (_ON_TWO if penalty == 2 else _ON_FOUR)


def stacks_on(card: Card, top: Card, mode: Stacking) -> bool:
    """``house.stacking``: whether ``card`` may be stacked on the pending draw card ``top``: a +2 on a +2
    (``draw-two``, ``any``), a W+4 on a W+4 (``draw-four``, ``any``), a W+4 on a +2 (``any``); never a
    +2 on a W+4."""
    mine, theirs = PENALTIES.get(card.face), PENALTIES.get(top.face)
    if mine is None or theirs is None:
        return False
    if mine == 2:
        return theirs == 2 and mode in _ON_TWO
    return mode is Stacking.ANY if theirs == 2 else mode in _ON_FOUR


# --- house.jump-in ---------------------------------------------------------------------------------------


def identical(card: Card, top: Card) -> bool:
    """``house.jump-in``: ``card`` is the same colour and face as ``top``, and not a wild."""
    return not card.is_wild and card == top


def discard_all_extras(hand: Sequence[Card], card: Card) -> tuple[Card, ...]:
    """``attack.discard-all``: the other cards of the Discard All's colour that go down with it."""
    if card.face is not Face.DISCARD_ALL:
        return ()
    rest = list(hand)
    rest.remove(card)
    return tuple(c for c in rest if c.colour is card.colour)


def cards_left(
    hand: Sequence[Card], card: Card, options: Options, target_held: int | None, passed_held: int = 0
) -> int:
    """How many cards the player holds once ``card`` is played from ``hand`` and its own effects on that
    hand are done (``uno.call``): the Discard All's extra discards go too, a trade leaves the hand traded
    for (``target_held``: how many cards the named player holds before the play), and a rotation under
    ``house.seven-o`` the hand passed on to the player (``passed_held``: how many cards the previous
    player in the direction of play holds). Going out leaves nothing to trade or pass on."""
    left = len(hand) - 1 - len(discard_all_extras(hand, card))
    if left > 0 and target_held is not None and trades_hands(card, options):
        return target_held
    if left > 0 and rotates_hands(card, options):
        return passed_held
    return left
