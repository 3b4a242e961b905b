"""The decider: :func:`decide` judges a command against the state and answers with events or a violation.

This module only dispatches: :func:`check` (legality) and :func:`resolve` (what an accepted command does)
hand each command to the family that owns its rules — :mod:`.setup`, :mod:`.turn`, :mod:`.uno`,
:mod:`.wild_draw_four`, :mod:`.house`, :mod:`.engine` — which read the game's :class:`~.variants.VariantRules`
where the rule sets part ways. Everything is pure and deterministic. The replay verifier calls
:func:`resolve` directly to apply a broken rule "as the table did". docs/DESIGN.md ("The rules engine")
lists which family owns which rule ids.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from service.rules import engine, house, setup, turn, uno, wild_draw_four
from service.rules.commands import (
    NO_SUPPLY,
    Accept,
    CallUno,
    Catch,
    Challenge,
    Choose,
    Command,
    Draw,
    Pass,
    Play,
    Press,
    Reshuffle,
    StartRound,
)
from service.rules.engine import Act
from service.rules.events import Awaiting, Event
from service.rules.setup import create
from service.rules.state import State
from service.rules.variants import VARIANT_RULES
from service.rules.violations import CommandError, Rule, Violation, require_seat

__all__ = ["CommandError", "check", "create", "decide", "execute", "resolve"]

# The enum members a command's hot path tests, as module constants: Python 3.11 reads ``Awaiting.PLAY``
# through ``EnumType.__getattr__`` (some 70 ns a time; a command tests a dozen), a constant costs a name.
_GAME_OVER: Final = Awaiting.GAME_OVER
_ROUND_START: Final = Awaiting.ROUND_START


def decide(state: State, command: Command) -> tuple[Event, ...] | Violation:
    """The events ``command`` produces, or the :class:`Violation` that rejects it (nothing happens)."""
    outcome = execute(state, command)
    return outcome if isinstance(outcome, Violation) else outcome[0]


def execute(state: State, command: Command) -> tuple[tuple[Event, ...], State] | Violation:
    """:func:`decide`, also returning the state the events lead to (saves folding them again)."""
    violation = check(state, command)
    if violation is not None:
        return violation
    return resolve(state, command)


def check(state: State, command: Command) -> Violation | None:
    """The rule ``command`` breaks in ``state``, or ``None`` when it is allowed.

    Raises :class:`CommandError` for a command naming a seat the game does not have.
    """
    kind = type(command)
    if kind is StartRound:
        return setup.check_start(state, command)  # type: ignore[arg-type]
    if kind is not Reshuffle and not 0 <= command.player < len(state.players):  # type: ignore[union-attr]
        require_seat(command.player, state.size, "player")  # type: ignore[union-attr]
    awaiting = state.awaiting
    if awaiting is _GAME_OVER:
        return Violation(Rule.SCORE_MATCH, "the game is over")
    if awaiting is _ROUND_START:
        return Violation(Rule.ROUND_END, f"round {state.round} is over; the next round has not been dealt")
    return _CHECKS[kind](state, command)


def resolve(state: State, command: Command, *, upheld: bool | None = None) -> tuple[tuple[Event, ...], State]:
    """Carry ``command`` out without judging it; raises :class:`Impossible` if it cannot happen.

    ``upheld`` forces the outcome of a Wild Draw Four challenge (a table that ruled otherwise).
    """
    act = Act(state, getattr(command, "supply", NO_SUPPLY))
    kind = type(command)  # dispatched on the exact type, as in check(): this runs for every command
    if kind is Challenge:
        wild_draw_four.resolve_challenge(act, command, upheld)  # type: ignore[arg-type]
    else:
        _RESOLVERS[kind](act, command)
    return tuple(act.events), act.state


_CHECKS: Final[dict[type, Callable[[State, Any], Violation | None]]] = {
    Play: turn.check_play,
    Draw: turn.check_draw,
    Pass: turn.check_pass,
    Press: turn.check_press,
    Choose: turn.check_choose,
    CallUno: uno.check_call,
    Catch: uno.check_catch,
    Challenge: wild_draw_four.check_challenge,
    Accept: wild_draw_four.check_accept,
    Reshuffle: engine.check_reshuffle,
}


def _resolve_accept(act: Act, command: Accept) -> None:
    """An accept takes a stacked penalty (``house.stacking``) or answers a Wild Draw Four."""
    if act.state.awaiting is Awaiting.STACK:
        house.resolve_stack_accept(act, command, VARIANT_RULES[act.state.variant].taking.impose)
    else:
        wild_draw_four.resolve_accept(act, command)


_RESOLVERS: Final[dict[type, Callable[[Act, Any], None]]] = {
    StartRound: setup.resolve_start,
    Play: turn.resolve_play,
    Draw: turn.resolve_draw,
    Pass: turn.resolve_pass,
    Press: turn.resolve_press,
    Choose: turn.resolve_choose,
    CallUno: uno.resolve_call,
    Catch: uno.resolve_catch,
    Accept: _resolve_accept,
    Reshuffle: engine.resolve_reshuffle,
}
