"""UNO Sonic the Hedgehog: classic plus Wild Victory Lap, and its own first-card rule."""

from __future__ import annotations

from service.rules import classic
from service.rules.cards import Face
from service.rules.engine import Act, Effect, Played
from service.rules.violations import Rule


def victory_lap(act: Act, played: Played) -> None:
    """``sonic.victory-lap``: every other player draws 1, in turn order; the colour was chosen."""
    for seat in act.others(played):
        act.take(seat, 1, Rule.SONIC_VICTORY_LAP)
    if not played.going_out:
        act.prompt(act.state.next_seat(played.origin))


EFFECTS: dict[Face, Effect] = {**classic.EFFECTS, Face.WILD_VICTORY_LAP: victory_lap}


def first_card(act: Act) -> None:
    """``setup.first-card`` for Sonic: a non-number card stays, its effect ignored, and the next card is
    flipped onto it until a number shows. The player left of the dealer starts."""
    card = act.flip()
    while card is not None and card.number is None:
        card = act.flip()
    s = act.state
    assert s.dealer is not None
    act.prompt(s.next_seat(s.dealer))
