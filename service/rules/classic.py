"""Classic UNO: the effects of its faces and its first-card rules. The other rule sets build on these.

An *effect* (:data:`~service.rules.engine.Effect`) runs after
:class:`~service.rules.events.CardPlayed` has been applied; it imposes what the card does and says whose
turn comes next. It never validates: :mod:`service.rules.turn` has judged the play already. The Wild
Draw Four, with its answer and challenge, is a family of its own (:mod:`service.rules.wild_draw_four`).
"""

from __future__ import annotations

from service.rules import house, wild_draw_four
from service.rules.cards import Face
from service.rules.engine import Act, Effect, Played
from service.rules.events import Awaiting, DirectionReversed
from service.rules.violations import Rule


def next_turn(act: Act, played: Played) -> None:
    """Number cards, Wild: the next player's turn (``turn.end``)."""
    if not played.going_out:
        s = act.state
        act.prompt((played.origin + s.direction) % len(s.players))  # next_seat(), inlined: hot


def skip(act: Act, played: Played) -> None:
    """Skip (``action.skip``): the next player loses their turn."""
    if not played.going_out:
        act.prompt(act.state.next_seat(played.origin, 2))


def reverse(act: Act, played: Played) -> None:
    """Reverse (``action.reverse``): direction flips; with two players it acts as Skip (option)."""
    act.emit(DirectionReversed())
    if played.going_out:
        return
    s = act.state
    if s.size == 2 and s.options.two_player_reverse_skips:
        act.prompt(played.origin)
    else:
        act.prompt(s.next_seat(played.origin))


def penalty(count: int, rule: Rule, impose: house.Impose = Act.take) -> Effect:
    """The effect of a draw card (``rule``): the next player takes ``count`` cards as ``impose`` has them
    taken (drawn, or launcher presses) and loses the turn — unless the penalty waits to be stacked on
    (``house.stacking``)."""

    def effect(act: Act, played: Played) -> None:
        s = act.state
        victim = s.next_seat(played.origin)
        if house.penalty_waits(act, played, victim, impose, rule):
            return
        impose(act, victim, count, rule)
        if not played.going_out:
            act.prompt(s.next_seat(played.origin, 2))

    return effect


EFFECTS: dict[Face, Effect] = {
    **{face: next_turn for face in Face if face.number is not None},
    Face.SKIP: skip,
    Face.REVERSE: reverse,
    Face.DRAW_TWO: penalty(2, Rule.ACTION_DRAW_TWO),  # Draw Two (``action.draw-two``)
    Face.WILD: next_turn,
    Face.WILD_DRAW_FOUR: wild_draw_four.effect,
}


def first_card(act: Act, dealer_chooses: Face | None = None) -> None:
    """``setup.first-card`` for classic, and for Mario Kart with ``dealer_chooses`` its item box.

    W+4 → returned, the deck reshuffled, flip again. W → the first player chooses the colour;
    ``dealer_chooses`` → the dealer chooses it (the card's own effect never happens). +2 → the first
    player draws 2 and loses the turn. S → the first player loses the turn. R → the dealer plays first
    and play goes right.
    """
    s = act.state
    assert s.dealer is not None
    dealer = s.dealer
    first = s.next_seat(dealer)
    card = act.flip()
    while card is not None and card.face is Face.WILD_DRAW_FOUR:
        act.return_flip(card, anywhere=False)
        card = act.flip()
    face = card.face if card is not None else Face.ZERO
    if face is Face.WILD:
        act.prompt(first, Awaiting.COLOUR, pointer=first, new_turn=False)
    elif face is dealer_chooses:
        act.prompt(dealer, Awaiting.COLOUR, pointer=first, new_turn=False)
    elif face is Face.DRAW_TWO:
        act.take(first, 2, Rule.ACTION_DRAW_TWO)
        act.prompt(act.state.next_seat(first))
    elif face is Face.SKIP:
        act.prompt(act.state.next_seat(first))
    elif face is Face.REVERSE:
        act.emit(DirectionReversed())
        act.prompt(dealer)
    else:
        act.prompt(first)
