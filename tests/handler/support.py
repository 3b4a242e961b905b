"""What the command handler's tests share."""

from __future__ import annotations

from service.rules.cards import Colour
from service.rules.commands import Accept, Choose, Command, Draw, Pass
from service.rules.events import Awaiting
from service.rules.state import State


def legal_command(state: State) -> Command:
    """A legal command of whoever the game waits for (the deal is random: the first card may be a wild
    whose colour the next player chooses, or a Wild Draw Four to answer)."""
    seat = state.turn
    if state.awaiting is Awaiting.DRAWN:
        return Pass(seat)
    if state.awaiting is Awaiting.COLOUR:
        return Choose(seat, colour=Colour.RED)
    if state.awaiting is Awaiting.WD4_RESPONSE:
        return Accept(seat)
    return Draw(seat)
