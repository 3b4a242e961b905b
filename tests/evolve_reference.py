"""A plain reference for the handlers of :mod:`service.rules.state` written against field positions.

Each handler here says with ``State._replace`` and field names what its counterpart in ``state.py`` does
with list positions for speed; ``tests/test_evolve_reference.py`` compares the two event by event.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from service.rules.cards import Card, Face
from service.rules.events import (
    Awaiting,
    CardDrawn,
    CardPlayed,
    Event,
    Prompted,
)
from service.rules.legality import PENALTIES, rotates_hands, stackable, trades_hands
from service.rules.state import HANDLERS, State, Wd4Play, without


def _hands_with(state: State, seat: int, hand: tuple[Card, ...]) -> tuple[tuple[Card, ...], ...]:
    hands = list(state.hands)
    hands[seat] = hand
    return tuple(hands)


def _taken(state: State, seat: int, taken: tuple[Card, ...], **changes: Any) -> State:
    """``seat`` took ``taken`` from the pile: its window closes if it held one card and took any."""
    pile = state.pile[len(taken) :] if state.pile_ordered else without(state.pile, taken)
    exposed = tuple(s for s in state.exposed if s != seat) if taken else state.exposed
    fields: dict[str, Any] = {
        "hands": _hands_with(state, seat, state.hands[seat] + taken),
        "pile": pile,
        "exposed": exposed,
    }
    fields.update(changes)
    return state._replace(**fields)


def card_played(state: State, event: CardPlayed) -> State:
    seat, card = event.player, event.card
    hand = state.hands[seat]
    new_hand = without(hand, (card, *event.discarded))
    left = len(new_hand)
    if left and event.target is not None and trades_hands(card, state.options):
        left = len(state.hands[event.target])
    elif left and rotates_hands(card, state.options):
        left = len(state.hands[(seat - state.direction) % len(state.hands)])
    penalty = PENALTIES.get(card.face, 0)
    pending, stackers = state.pending, state.stackers
    if penalty and (card.face is Face.WILD_DRAW_FOUR or stackable(card.face, state.options.stacking)):
        pending, stackers = state.pending + penalty, (*state.stackers, seat) if state.pending else (seat,)
    elif state.pending:
        pending, stackers = 0, ()
    owner_changes = seat != state.turn_owner
    return state._replace(
        hands=_hands_with(state, seat, new_hand),
        discard=state.discard + event.discarded + (card,),
        colour=event.colour if card.is_wild else card.colour,
        exposed=(seat,) if left == 1 and not event.uno else (),
        drawn=None,
        wd4=Wd4Play(seat, hand, state.colour, state.discard[-1])
        if card.face is Face.WILD_DRAW_FOUR
        else None,
        pending=pending,
        stackers=stackers,
        top_by=seat,
        jumpable=True,
        previous=state.turn_owner if owner_changes else state.previous,
        turn_owner=seat,
    )


def card_drawn(state: State, event: CardDrawn) -> State:
    return _taken(
        state,
        event.player,
        (event.card,),
        drawn=event.card,
        exposed=(),
        jumpable=False,
        pending=0,
        stackers=(),
    )


def prompted(state: State, event: Prompted) -> State:
    new_owner = event.new_turn and event.player != state.turn_owner
    return state._replace(
        turn=event.player,
        awaiting=event.awaiting,
        pointer=event.pointer,
        previous=state.turn_owner if new_owner else state.previous,
        turn_owner=event.player if new_owner else state.turn_owner,
        drawn=state.drawn if event.awaiting is Awaiting.DRAWN else None,
    )


#: The reference handler of each event type written against positions in ``state.py``.
REFERENCE: dict[type, Callable[[State, Any], State]] = {
    CardPlayed: card_played,
    CardDrawn: card_drawn,
    Prompted: prompted,
}


def evolve_plainly(state: State, event: Event) -> State:
    """:func:`service.rules.state.evolve` with the plain handlers where ``state.py`` writes by position."""
    return REFERENCE.get(type(event), HANDLERS[type(event)])(state, event)
