"""UNO calls, whole: the call, the catch, why a catch earns nothing, and the penalty.

Digest ``uno.*``. A player left with one card must call (:func:`check_call_with_play`,
:func:`check_call`); until then any other player may catch them while their window is open
(:func:`catch_reason`), and the caught player takes the penalty as their rule set takes cards. The
windows are ``evolve``'s bookkeeping (``State.exposed``). docs/DESIGN.md ("The rules engine").
"""

from __future__ import annotations

from service.rules.commands import CallUno, Catch, Play
from service.rules.engine import Act
from service.rules.events import UnoCalled, UnoCaught
from service.rules.legality import cards_left
from service.rules.state import State
from service.rules.variants import VARIANT_RULES
from service.rules.violations import Rule, Violation, require_seat

#: How many cards a caught player takes (``uno.penalty``): drawn, or pressed for in UNO Attack.
PENALTY = 2


def check_call_with_play(state: State, command: Play) -> Violation | None:
    """``uno.call``: a play may call UNO only when it leaves its player one card, counted after the
    play's own effects on the hand (a Discard All's extra discards, the hand a trade gives, the hand
    passed on by a rotation)."""
    traded = len(state.hands[command.target]) if command.target is not None else None
    passed = len(state.hands[state.next_seat(command.player, -1)])  # a 0 under house.seven-o
    left = cards_left(state.hands[command.player], command.card, state.options, traded, passed)
    if left != 1:
        name = state.players[command.player]
        return Violation(Rule.UNO_CALL, f"{name} calls UNO with {command.card} but will hold {left} cards")
    return None


def check_call(state: State, command: CallUno) -> Violation | None:
    """``uno.call``: a call on its own, by a player holding exactly one card."""
    held = len(state.hands[command.player])
    if held != 1:
        return Violation(Rule.UNO_CALL, f"{state.players[command.player]} holds {held} cards, not one")
    return None


def resolve_call(act: Act, command: CallUno) -> None:
    """The call closes the caller's window (a call with no window open changes nothing)."""
    act.emit(UnoCalled(command.player))


def catch_reason(state: State, command: Catch) -> str | None:
    """Why a catch earns no penalty (``uno.catch.invalid``), or ``None`` when it does (``uno.catch``).

    Raises :class:`~service.rules.violations.CommandError` for a target seat the game does not have.
    """
    require_seat(command.target, state.size, "target")
    target = state.players[command.target]
    if command.target == command.player:
        return f"{target} cannot catch themself"
    held = len(state.hands[command.target])
    if held != 1:
        return f"{target} holds {held} cards, not one"
    if command.target not in state.exposed:
        return f"{target} called UNO or the window has closed"
    return None


def check_catch(state: State, command: Catch) -> Violation | None:
    """``uno.catch.invalid``: a catch :func:`catch_reason` finds nothing to penalise is refused."""
    reason = catch_reason(state, command)
    return None if reason is None else Violation(Rule.UNO_CATCH_INVALID, reason)


def resolve_catch(act: Act, command: Catch) -> None:
    """``uno.penalty``: the caught player takes :data:`PENALTY` cards, as their rule set takes cards."""
    act.emit(UnoCaught(command.player, command.target))
    VARIANT_RULES[act.state.variant].taking.impose(act, command.target, PENALTY, Rule.UNO_PENALTY)
