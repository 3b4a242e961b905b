"""The Wild Draw Four, whole: its effect, the victim's answer, and the challenge that judges the play.

Digest ``action.wild-draw-four`` and ``wd4.*``. A W+4 is never refused; only a challenge tests it
(:func:`~service.rules.legality.wd4_matching`, against the hand recorded when it went down). What the
answer costs is ``State.pending``: upheld, the offender takes it; failed, the challenger takes it plus 2.
docs/DESIGN.md ("The rules engine") has the whole rule, stacking included.
"""

from __future__ import annotations

from service.rules import house
from service.rules.commands import Accept, Challenge
from service.rules.engine import Act, Played
from service.rules.events import Awaiting, Wd4Accepted, Wd4Challenged
from service.rules.legality import wd4_matching
from service.rules.state import State
from service.rules.violations import Impossible, Rule, Violation

# --- the effect ------------------------------------------------------------------------------------


def effect(act: Act, played: Played) -> None:
    """``action.wild-draw-four``: the colour was chosen with the play; the victim must answer.

    Going out on it, the victim draws 4 — or a stacked total — with no challenge (``round.end``): the
    offender held nothing else.
    """
    s = act.state
    victim = s.next_seat(played.origin)
    if played.going_out:
        act.take(victim, _total(s), house.stack_cause(s, Rule.ACTION_WILD_DRAW_FOUR))
    else:
        act.prompt(victim, Awaiting.WD4_RESPONSE, new_turn=False)


def unanswered(state: State) -> Violation | None:
    """``action.wild-draw-four``: a turn action by anyone while the victim has still to answer."""
    if state.awaiting is Awaiting.WD4_RESPONSE:
        victim = state.players[state.turn]
        return Violation(
            Rule.ACTION_WILD_DRAW_FOUR, f"{victim} must first accept or challenge the Wild Draw Four"
        )
    return None


def _total(state: State) -> int:
    """What answering costs: the pending total (4 for a Wild Draw Four on its own)."""
    return state.pending or 4


# --- the victim's answer ---------------------------------------------------------------------------


def _check_answer(state: State, seat: int, rule: Rule) -> Violation | None:
    """Only the victim answers, and only while the Wild Draw Four waits for it."""
    if state.awaiting is not Awaiting.WD4_RESPONSE:
        return Violation(rule, "no Wild Draw Four is waiting for an answer")
    if seat != state.turn:
        victim = state.players[state.turn]
        return Violation(rule, f"only {victim}, the Wild Draw Four's victim, may answer it")
    return None


def check_accept(state: State, command: Accept) -> Violation | None:
    """``wd4.accept``: the victim's to make, in answer to a pending Wild Draw Four (or, under
    ``house.stacking``, to a stacked draw penalty)."""
    if state.awaiting is Awaiting.STACK:
        return house.check_stack_accept(state, command)
    return _check_answer(state, command.player, Rule.WD4_ACCEPT)


def check_challenge(state: State, command: Challenge) -> Violation | None:
    """``wd4.challenge``: the victim's to make, in answer to a pending Wild Draw Four — never under
    ``house.wd4-any-time``, nor by a player who stacked on it (``house.stacking``)."""
    return (
        house.check_wd4_any_time(state, command)
        or house.check_stacked_challenge(state, command)
        or _check_answer(state, command.player, Rule.WD4_CHALLENGE)
    )


def resolve_accept(act: Act, command: Accept) -> None:
    """``wd4.accept``: the victim draws 4 (or the stacked total) and loses the turn."""
    s = act.state
    if s.wd4 is None:
        raise Impossible(Rule.WD4_ACCEPT, "no Wild Draw Four to accept")
    victim = command.player
    total, cause = _total(s), house.stack_cause(s, Rule.WD4_ACCEPT)
    act.emit(Wd4Accepted(victim))
    act.take(victim, total, cause)
    act.prompt(act.state.next_seat(victim))


def resolve_challenge(act: Act, command: Challenge, upheld: bool | None) -> None:
    """``wd4.challenge``: upheld, the offender draws 4 and the victim plays; failed, the victim draws 6 —
    under ``house.stacking``, the whole pending total instead of 4, and that total plus 2 instead of 6.

    The offender's hand as played is shown to the challenger (in :class:`Wd4Challenged`). ``upheld``
    overrides the judgement: a table that applied the wrong outcome, replayed as it was. Under
    ``house.wd4-any-time`` a challenge changes nothing (it was refused; the victim still answers).
    """
    pending = act.state.wd4
    if pending is None:
        raise Impossible(Rule.WD4_CHALLENGE, "no Wild Draw Four to challenge")
    if act.state.options.wd4_any_time:
        return
    total = _total(act.state)
    victim = command.player
    # ``wd4.legal``: the cards that made it illegal, from the hand as played; none when it was legal.
    matching = wd4_matching(pending.hand, pending.colour, act.state.options.wd4_wilds_block)
    if upheld is None:
        upheld = bool(matching)
    act.emit(Wd4Challenged(victim, pending.offender, upheld, pending.hand, pending.colour, matching))
    if upheld:
        act.take(pending.offender, total, Rule.WD4_CHALLENGE_UPHELD)
        act.prompt(victim)
    else:
        act.take(victim, total + 2, Rule.WD4_CHALLENGE_FAILED)
        act.prompt(act.state.next_seat(victim))
