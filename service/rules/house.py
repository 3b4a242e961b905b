"""The house rules (digest §9), whole: stacking, jump-in, seven-o, draw to match, force play, and the Wild
Draw Four any time.

Each is an option of the game (:class:`~service.rules.options.Options`), off by default, with its rule id
(``house.*``); the other families ask this module at a few named points (:func:`check_stack`,
:func:`penalty_waits`, :func:`check_jump_in`, :func:`seven_o`, :func:`draws_on`,
:func:`check_force_play`, :func:`check_wd4_any_time`…). The predicates the bots and the verifier share
are in :mod:`service.rules.legality`. docs/DESIGN.md ("The rules engine") says which point is which.
"""

from __future__ import annotations

from collections.abc import Callable

from service.rules.cards import Card, Face
from service.rules.commands import Accept, Challenge, Draw, Pass, Play
from service.rules.engine import Act, Played
from service.rules.events import Awaiting, HandsRotated, HandsTraded, JumpedIn, StackAccepted
from service.rules.legality import identical, playable, stackable, stacks_on
from service.rules.options import Variant
from service.rules.state import State
from service.rules.violations import Rule, Violation

#: How a rule set makes a player take cards: ``(act, seat, count, cause)`` (drawn, or launcher presses).
Impose = Callable[[Act, int, int, Rule], None]

# --- house.stacking --------------------------------------------------------------------------------------

#: The rule of each draw card whose penalty can wait, for a penalty of one card.
PENALTY_RULES = {
    Face.DRAW_TWO: Rule.ACTION_DRAW_TWO,
    Face.HIT_TWO: Rule.ATTACK_HIT_TWO,
    Face.WILD_HIT_FOUR: Rule.ATTACK_WILD_HIT_FOUR,
}


def _total(state: State) -> str:
    """The pending penalty in words: cards, or launcher presses in UNO Attack."""
    n = state.pending
    if state.variant is Variant.ATTACK:
        return f"{n} press{'es' if n != 1 else ''}"
    return f"{n} card{'s' if n != 1 else ''}"


def unanswered_stack(state: State) -> Violation | None:
    """``house.stacking``: a turn action (but the victim's stack or accept) while a stacked penalty waits."""
    if state.awaiting is Awaiting.STACK:
        victim = state.players[state.turn]
        return Violation(
            Rule.HOUSE_STACKING, f"{victim} must first stack on or accept the pending {_total(state)}"
        )
    return None


def check_stack(state: State, command: Play, unanswered: Violation | None) -> Violation | None:
    """A play while a draw penalty waits (``Awaiting.STACK`` or a Wild Draw Four's answer): only by its
    victim, and only a card that stacks on the top card under the game's ``stacking`` mode.

    ``unanswered`` is what a Wild Draw Four's answer refuses anything else with (``action.wild-draw-four``);
    without stacking on a W+4 that is the answer to any play.
    """
    mode = state.options.stacking
    top = state.discard[-1]
    if state.awaiting is Awaiting.WD4_RESPONSE and not stackable(top.face, mode):
        return unanswered
    if command.player != state.turn:
        return unanswered_stack(state) or unanswered
    if not stacks_on(command.card, top, mode):
        return Violation(
            Rule.HOUSE_STACKING,
            f"{command.card} does not stack on {top} (stacking {mode.value}): stack or accept the "
            f"pending {_total(state)}",
        )
    return None


def penalty_waits(act: Act, played: Played, victim: int, impose: Impose, rule: Rule) -> bool:
    """The effect of a draw card whose penalty waits (``house.stacking``): prompt ``victim`` to stack on
    it or accept it — or, when the player went out on it, have ``victim`` take the whole pending total at
    once (nobody stacks once the round is won). ``False`` when the penalty does not wait (stacking off,
    or nothing may stack on this card): the caller imposes it as without stacking."""
    s = act.state
    if not s.pending or not stackable(played.cmd.card.face, s.options.stacking):
        return False
    if played.going_out:
        impose(act, victim, s.pending, stack_cause(s, rule))
    else:
        act.prompt(victim, Awaiting.STACK, new_turn=False)
    return True


def stack_cause(state: State, own: Rule) -> Rule:
    """The rule a pending penalty is taken under: the card's own (``own``) when it is one card, or
    ``house.stacking`` for a stacked total."""
    return Rule.HOUSE_STACKING if len(state.stackers) > 1 else own


def check_stack_accept(state: State, command: Accept) -> Violation | None:
    """Taking a stacked penalty: its victim's to do, while it waits."""
    if command.player != state.turn:
        victim = state.players[state.turn]
        return Violation(Rule.HOUSE_STACKING, f"the pending {_total(state)} is {victim}'s to take")
    return None


def resolve_stack_accept(act: Act, command: Accept, impose: Impose) -> None:
    """``house.stacking``: the victim takes the whole pending total and loses the turn."""
    s = act.state
    victim, total = command.player, s.pending
    rule = PENALTY_RULES.get(s.discard[-1].face, Rule.ACTION_DRAW_TWO)
    cause = stack_cause(s, rule)
    act.emit(StackAccepted(victim, total))
    impose(act, victim, total, cause)
    act.prompt(act.state.next_seat(victim))


def check_stacked_challenge(state: State, command: Challenge) -> Violation | None:
    """``house.stacking``: a player who stacked on a Wild Draw Four can no longer challenge it."""
    seat = command.player
    if state.awaiting is Awaiting.WD4_RESPONSE and seat != state.turn and seat in state.stackers[1:]:
        return Violation(
            Rule.HOUSE_STACKING,
            f"{state.players[seat]} stacked on the Wild Draw Four and can no longer challenge it",
        )
    return None


# --- house.jump-in ---------------------------------------------------------------------------------------


def check_jump_in(state: State, command: Play) -> Violation | None:
    """``house.jump-in``: a card identical to the top card (not a wild), by a player other than the one
    who played it, before the next turn action, and not while a penalty or a choice waits. With the
    option off, a play out of turn is ``turn.order``."""
    player, card = command.player, command.card
    top = state.discard[-1]
    if not state.options.jump_in:
        return Violation(Rule.TURN_ORDER, "this game is played without jumping in (house rule jump_in off)")
    awaiting = state.awaiting
    if awaiting is Awaiting.STACK or awaiting is Awaiting.WD4_RESPONSE:
        victim = state.players[state.turn]
        return Violation(Rule.HOUSE_JUMP_IN, f"no jumping in while a draw penalty waits for {victim}")
    if awaiting is Awaiting.COLOUR or awaiting is Awaiting.TARGET:
        return Violation(Rule.HOUSE_JUMP_IN, f"no jumping in while {state.players[state.turn]} chooses")
    if not state.jumpable:
        return Violation(Rule.HOUSE_JUMP_IN, f"too late to jump in on {top}: a turn action came after it")
    if state.top_by == player:
        name = state.players[player]
        return Violation(Rule.HOUSE_JUMP_IN, f"{name} played {top}: jump in on another player's card")
    if not identical(card, top):
        return Violation(Rule.HOUSE_JUMP_IN, f"{card} is not identical to {top} (same colour and face)")
    return None


def jump_in(act: Act, command: Play) -> None:
    """The turn is the jumping player's: play continues from them as if it were their turn."""
    act.emit(JumpedIn(command.player))


# --- house.seven-o ---------------------------------------------------------------------------------------


def needs_swap_target(card: Card, state: State, held: int) -> bool:
    """Whether playing ``card`` from a hand of ``held`` cards must name the player to swap with: a 7
    under ``house.seven-o`` that does not go out (going out swaps nothing)."""
    return card.face is Face.SEVEN and state.options.seven_o and held > 1


def seven_o(act: Act, command: Play, going_out: bool) -> None:
    """``house.seven-o``, once the card has left the hand: a 7 swaps hands with the named player, a 0
    makes every hand pass to the next player in the current direction. Going out swaps nothing."""
    if going_out or not act.state.options.seven_o:
        return
    face = command.card.face
    if face is Face.SEVEN and command.target is not None:
        act.emit(HandsTraded(command.player, command.target))
    elif face is Face.ZERO:
        act.emit(HandsRotated(command.player))


# --- house.draw-to-match, house.force-play ----------------------------------------------------------------


def draws_on(act: Act, player: int, drawn: Card) -> bool:
    """``house.draw-to-match``: whether a draw that just took ``drawn`` goes on drawing — until a
    playable card, or, replaying a table that listed the cards it drew, until the listed cards are
    taken, as the table did (a list that stops early or goes past a playable card was reported already,
    by :func:`check_draw_to_match`)."""
    s = act.state
    if not s.options.draw_to_match:
        return False
    if act.supply.draws.get(player):  # the table said what it drew: followed, whatever the pile's order
        return act.listed_left(player) > 0
    return not playable(drawn, s.discard[-1], s.colour)


def check_draw_to_match(state: State, command: Draw) -> Violation | None:
    """``house.draw-to-match``, for the cards a table says one draw took: none but the last may be
    playable, and the last must be, unless the pile and a reshuffle ran out. (Whether they are the
    pile's cards, where its order is known, is ``fair.commit``'s to say, when they are taken.)"""
    listed = command.supply.draws.get(command.player, ())
    if not state.options.draw_to_match or not listed:
        return None
    top, colour = state.discard[-1], state.colour
    for card in listed[:-1]:
        if playable(card, top, colour):
            return Violation(Rule.HOUSE_DRAW_TO_MATCH, f"drawing stops at the playable {card}")
    available = len(state.pile) + len(state.discard) - 1
    if not playable(listed[-1], top, colour) and len(listed) < available:
        return Violation(
            Rule.HOUSE_DRAW_TO_MATCH, f"drawing stopped at {listed[-1]} before a playable card came"
        )
    return None


def check_force_play(state: State, command: Pass) -> Violation | None:
    """``house.force-play``: a playable drawn card must be played at once, not kept."""
    if state.options.force_play and state.awaiting is Awaiting.DRAWN:
        return Violation(Rule.HOUSE_FORCE_PLAY, f"the drawn {state.drawn} is playable and must be played")
    return None


# --- house.wd4-any-time ----------------------------------------------------------------------------------


def check_wd4_any_time(state: State, command: Challenge) -> Violation | None:
    """``house.wd4-any-time``: a Wild Draw Four is legal at any time, so no challenge is heard (the
    refused challenge changes nothing; the victim still answers)."""
    if state.options.wd4_any_time:
        return Violation(
            Rule.HOUSE_WD4_ANY_TIME, "a Wild Draw Four may be played at any time here: no challenge"
        )
    return None
