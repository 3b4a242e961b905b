"""A turn (digest §3): whose it is, and its actions — play, draw, pass, press — and the choices a play
leaves pending (a colour, a Green Shell's target).

Digest ``turn.order``, ``play.*``, ``draw.one``, ``draw.pass``, ``turn.end`` and ``attack.launcher``. The
other families answer for their part of a turn: the card's effect and ``taking``
(:mod:`service.rules.variants`), UNO calls (:mod:`service.rules.uno`), the follow-up
(:mod:`service.rules.attack`), the W+4's answer (:mod:`service.rules.wild_draw_four`), the house rules
(:mod:`service.rules.house`). docs/DESIGN.md ("The rules engine").
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from service.rules import attack, classic, house, uno, wild_draw_four
from service.rules.cards import Card, Face
from service.rules.commands import Choose, Draw, Pass, Play, Press
from service.rules.engine import Act, Played, card_played
from service.rules.events import Awaiting, ColourChosen, Passed
from service.rules.legality import discard_all_extras, names_target, playable
from service.rules.state import State
from service.rules.variants import VARIANT_RULES
from service.rules.violations import Impossible, Rule, Violation, require_seat

# The enum members a command's hot path tests, as module constants: Python 3.11 reads ``Awaiting.PLAY``
# through ``EnumType.__getattr__`` (some 70 ns a time; a command tests a dozen), a constant costs a name.
_PLAY: Final = Awaiting.PLAY
_DRAWN: Final = Awaiting.DRAWN
_FOLLOW_UP: Final = Awaiting.FOLLOW_UP
_STACK: Final = Awaiting.STACK
_WD4_RESPONSE: Final = Awaiting.WD4_RESPONSE
_TARGET: Final = Awaiting.TARGET
_ITEM_BOX: Final = Face.WILD_ITEM_BOX
_DISCARD_ALL: Final = Face.DISCARD_ALL

#: The rule a missing or wrong target breaks, by the face that may name one.
_TARGET_RULE: Final = MappingProxyType(
    {
        Face.WILD_ATTACK_ATTACK: Rule.ATTACK_ATTACK_ATTACK,
        Face.TRADE_HANDS: Rule.ATTACK_TRADE_HANDS,
        Face.WILD_CUSTOMIZABLE: Rule.ATTACK_CUSTOMIZABLE,
        Face.WILD_ITEM_BOX: Rule.MK_ITEM_GREEN_SHELL,  # a target named in advance, for a Green Shell
        Face.SEVEN: Rule.HOUSE_SEVEN_O,  # the player to swap hands with
    }
)


def not_your_turn(state: State, seat: int) -> Violation | None:
    """``turn.order``: the game waits for someone else, or for something other than a turn."""
    unanswered = wild_draw_four.unanswered(state) or house.unanswered_stack(state)
    if unanswered is not None:
        return unanswered
    waiting = state.players[state.turn]
    if state.awaiting is Awaiting.COLOUR:
        return Violation(Rule.TURN_ORDER, f"waiting for {waiting} to choose a colour")
    if state.awaiting is Awaiting.TARGET:
        return Violation(Rule.TURN_ORDER, f"waiting for {waiting} to name the Green Shell's target")
    if seat != state.turn:
        return Violation(Rule.TURN_ORDER, f"it is {waiting}'s turn, not {state.players[seat]}'s")
    return None


# --- playing a card ----------------------------------------------------------------------------------


def check_play(state: State, command: Play) -> Violation | None:
    """A play: in turn (or as the follow-up, a stack, a jump-in), a held card that matches, with its
    colour and target."""
    player, card = command.player, command.card
    if command.target is not None:
        require_seat(command.target, state.size, "target")
    awaiting = state.awaiting
    if command.jump_in:
        violation = house.check_jump_in(state, command)
    elif awaiting is _STACK or awaiting is _WD4_RESPONSE:
        violation = house.check_stack(state, command, wild_draw_four.unanswered(state))
    elif player != state.turn or (awaiting is not _PLAY and awaiting is not _FOLLOW_UP):
        violation = not_your_turn(state, player)
    else:
        violation = None
    if violation is not None:
        return violation
    if awaiting is _DRAWN and not command.jump_in and card is not state.drawn:
        assert state.drawn is not None
        return Violation(
            Rule.DRAW_ONE, f"after drawing, only the drawn {state.drawn} may be played, not {card}"
        )
    if card not in state.hands[player]:
        return Violation(Rule.PLAY_IN_HAND, f"{state.players[player]} does not hold {card}")
    top = state.discard[-1]
    if not playable(card, top, state.colour):
        colour = state.colour.value if state.colour else "none"
        return Violation(Rule.PLAY_MATCH, f"{card} does not match {top} (active colour {colour})")
    takes_colour = card.is_wild and card.face is not _ITEM_BOX
    if takes_colour and command.colour is None:
        return Violation(Rule.PLAY_WILD_COLOUR, f"{card} needs a chosen colour (R, Y, G or B)")
    if not takes_colour and command.colour is not None:
        return Violation(Rule.PLAY_WILD_COLOUR, f"{card} takes no chosen colour")
    held = len(state.hands[player])
    if command.target == player:
        rule = _TARGET_RULE.get(card.face, Rule.TURN_ORDER)
        if rule is Rule.HOUSE_SEVEN_O and not state.options.seven_o:
            rule = Rule.TURN_ORDER
        return Violation(rule, f"{card} must name another player")
    if command.target is None and _needs_target(card, state, held):
        return Violation(_TARGET_RULE[card.face], f"{card} must name the player it targets")
    return uno.check_call_with_play(state, command) if command.uno else None


def _needs_target(card: Card, state: State, held: int) -> bool:
    """Whether playing ``card`` from a hand of ``held`` cards must name another player (Attack-Attack,
    Trade Hands, a customizable; a 7 that swaps hands under ``house.seven-o``)."""
    if card.number is not None:
        return house.needs_swap_target(card, state, held)
    return card.face in _TARGET_RULE and names_target(card.face, state.options.custom_action)


def resolve_play(act: Act, command: Play) -> None:
    """The card goes down (with a Discard All's extra discards), then its rule set's effect runs; a
    player who went out wins the round once a pending target is named (``round.end``)."""
    player, card = command.player, command.card
    if card not in act.state.hands[player]:
        raise Impossible(Rule.PLAY_IN_HAND, f"{act.name(player)} does not hold {card}")
    if command.target is None and card.number is None and _needs_target(card, act.state, 0):
        raise Impossible(_TARGET_RULE[card.face], f"{card} names no player")
    if command.jump_in:
        house.jump_in(act, command)
    s = act.state
    hand = s.hands[player]
    # A play at an UNO Attack follow-up chance counts from where the S or R pointed (most plays are not).
    follow_up = attack.follow_up_origin(s, player) if s.awaiting is _FOLLOW_UP else None
    if follow_up is not None:
        act.barred = player  # a follow-up never hands the turn back to its own player
    colour = command.colour if card.is_wild and card.face is not _ITEM_BOX else None
    extras = discard_all_extras(hand, card) if card.face is _DISCARD_ALL else ()
    act.emit(card_played(player, card, colour, command.uno, command.target, extras))
    going_out = not act.state.hands[player]
    house.seven_o(act, command, going_out)
    effect = VARIANT_RULES[s.variant].effects.get(card.face, classic.next_turn)
    origin = player if follow_up is None else follow_up
    effect(act, Played(command, origin, going_out, follow_up is not None))
    if going_out and act.state.awaiting is not _TARGET:
        act.end_round(player)


# --- drawing, passing, pressing ------------------------------------------------------------------------


def check_draw(state: State, command: Draw) -> Violation | None:
    """``draw.one``: instead of a play, once per turn, where the rule set has a draw pile."""
    player = command.player
    refused = attack.instead_of_follow_up(state, player)
    if refused is not None:
        return refused
    taking = VARIANT_RULES[state.variant].taking
    if taking.action is not Draw:
        return taking.other_action
    if state.awaiting is _PLAY and player == state.turn:
        return house.check_draw_to_match(state, command)
    if state.awaiting is _DRAWN and player == state.turn:
        return Violation(Rule.TURN_END, f"{state.players[player]} already drew this turn")
    return not_your_turn(state, player)


def resolve_draw(act: Act, command: Draw) -> None:
    """``draw.one``: a playable drawn card may be played at once; otherwise the turn ends. With nothing
    left to draw anywhere the draw is forfeited (``draw.reshuffle``) and the turn ends. Under
    ``house.draw-to-match`` the one draw goes on until a playable card comes (or nothing is left)."""
    player = command.player
    drawn = act.draw_one(player)
    while drawn is not None and house.draws_on(act, player, drawn) and act.can_draw(player):
        drawn = act.draw_one(player)
    s = act.state
    if drawn is None:
        act.emit(Passed(player))
        act.prompt(attack.turn_after(s, player))
    elif playable(drawn, s.discard[-1], s.colour) and s.awaiting is not _FOLLOW_UP:
        act.prompt(player, _DRAWN, new_turn=False)
    else:
        act.prompt(attack.turn_after(s, player))


def check_pass(state: State, command: Pass) -> Violation | None:
    """``draw.pass``: only a drawn card (or an UNO Attack follow-up chance) can be passed on."""
    if state.awaiting in (Awaiting.DRAWN, Awaiting.FOLLOW_UP) and command.player == state.turn:
        return house.check_force_play(state, command)
    violation = not_your_turn(state, command.player)
    if violation is not None:
        return violation
    return VARIANT_RULES[state.variant].taking.nothing_to_pass


def resolve_pass(act: Act, command: Pass) -> None:
    """The turn ends without a play (``turn.end``)."""
    s = act.state
    act.emit(Passed(command.player))
    act.prompt(attack.turn_after(s, command.player))


def check_press(state: State, command: Press) -> Violation | None:
    """``attack.launcher``: a press instead of a play, where the rule set has a launcher."""
    taking = VARIANT_RULES[state.variant].taking
    if taking.action is not Press:
        return taking.other_action
    refused = attack.instead_of_follow_up(state, command.player)
    if refused is not None:
        return refused
    return not_your_turn(state, command.player)


def resolve_press(act: Act, command: Press) -> None:
    """``attack.launcher``: one press, whatever it fires, ends the turn."""
    s = act.state
    act.press(command.player, Rule.ATTACK_LAUNCHER)
    act.prompt(attack.turn_after(s, command.player))


# --- the choices a play leaves pending ----------------------------------------------------------------


def check_choose(state: State, command: Choose) -> Violation | None:
    """A colour (``action.wild``: a wild first card, an empty item box, a Bob-omb) or a Green Shell's
    target (``mk.item.green-shell``), by the player the game waits for."""
    require_seat(command.target, state.size, "target")
    if state.awaiting is Awaiting.COLOUR:
        if command.player != state.turn:
            return Violation(Rule.TURN_ORDER, f"{state.players[state.turn]} chooses the colour")
        if command.colour is None or command.target is not None:
            return Violation(Rule.ACTION_WILD, "choose a colour (R, Y, G or B)")
        return None
    if state.awaiting is Awaiting.TARGET:
        if command.player != state.turn:
            return Violation(Rule.TURN_ORDER, f"{state.players[state.turn]} names the Green Shell's target")
        if command.target is None or command.target == command.player or command.colour is not None:
            return Violation(Rule.MK_ITEM_GREEN_SHELL, "name an opponent for the Green Shell")
        return None
    return Violation(Rule.TURN_ORDER, "the game is not waiting for a choice")


def resolve_choose(act: Act, command: Choose) -> None:
    """The colour takes effect, or the target draws 1; then the turn goes where the play pointed (or the
    chooser, out of cards, wins the round)."""
    s = act.state
    pending = s.awaiting in (Awaiting.COLOUR, Awaiting.TARGET)
    if command.colour is not None:
        act.emit(ColourChosen(command.player, command.colour))
    elif command.target is not None:
        act.take(command.target, 1, Rule.MK_ITEM_GREEN_SHELL)
    else:
        raise Impossible(Rule.TURN_ORDER, "a choice names neither a colour nor a target")
    if not pending:
        return
    if not act.state.hands[command.player]:
        act.end_round(command.player)
    else:
        act.prompt(s.pointer if s.pointer is not None else s.next_seat(command.player))
