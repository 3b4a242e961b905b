"""In-process bot players over the rules engine's :class:`State`: a random-legal bot and a sensible one.

Each bot shows its seat the state as a :class:`~service.play.policy.SeatView` and proposes the command its
:class:`~service.play.policy.Policy` decides; the decider judges it like anyone else's.
"""

from __future__ import annotations

import random
from typing import ClassVar

from service.play.policy import Habits, Policy, SeatView, Style
from service.rules.commands import Command, Play
from service.rules.state import State

__all__ = ["Habits", "RandomBot", "SensibleBot", "seat_view"]


def seat_view(state: State, seat: int) -> SeatView:
    """What ``seat`` sees of ``state``: its own hand and everything public (a Wild Draw Four's offender's
    hand size included, which the table saw)."""
    hands, wd4 = state.hands, state.wd4
    # tuple.__new__ over the fields in order: the bots build a view per decision, and SeatView's own
    # constructor (keywords, defaults) costs twice as much.
    return tuple.__new__(
        SeatView,
        (
            state.awaiting,
            state.colour,
            state.direction,
            state.variant,
            state.options,
            state.drawn,
            state.top_by,
            state.jumpable,
            state.pending,
            state.exposed,
            seat,
            hands[seat],
            state.discard[-1],
            tuple(map(len, hands)),
            None if wd4 is None else len(wd4.hand),
        ),
    )


class RandomBot:
    """Chooses uniformly among the legal moves (:attr:`Style.RANDOM`), from its own random generator."""

    style: ClassVar[Style] = Style.RANDOM

    def __init__(self, rng: random.Random, habits: Habits | None = None) -> None:
        self.policy = Policy(rng, habits, self.style)
        self._act = self.policy.act  # bound once: asked every move

    def act(self, state: State) -> Command:
        """The command for the decision the game waits for from this bot (``state.turn``)."""
        return self._act(seat_view(state, state.turn))

    def talk(self, state: State, seat: int) -> Command | None:
        """An UNO call or a catch this bot makes now, if any (the open windows are ``state.exposed``)."""
        return self.policy.talk(seat_view(state, seat)) if state.exposed else None

    def jump_in(self, state: State, seat: int) -> Play | None:
        """A jump-in this bot makes now out of turn, if it holds the top card's twin and notices."""
        return self.policy.jump_in(seat_view(state, seat))


class SensibleBot(RandomBot):
    """Plays like a careful person (:attr:`Style.SENSIBLE`)."""

    style = Style.SENSIBLE
