"""The decider: :func:`decide` judges a command against the state and answers with events or a violation.

Legality lives here and only here (:func:`check`); what an accepted command does is :func:`resolve`,
which the rule-set modules (:mod:`.classic`, :mod:`.sonic`, :mod:`.mario_kart`, :mod:`.attack`) extend
with the effects of their cards. Both are pure and deterministic: the same state and command always give
the same events, and randomness comes only from the game's seed.

The replay verifier calls :func:`resolve` directly to apply a rule-breaking action "as the table did"
after reporting it; :class:`~service.rules.violations.Impossible` then says the table's action cannot
be followed at all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

from . import attack, classic, fair, mario_kart, sonic
from .cards import Card, Face
from .classic import Effect
from .commands import (
    NO_SUPPLY,
    Accept,
    CallUno,
    Catch,
    Challenge,
    Choose,
    Command,
    CreateGame,
    Draw,
    Pass,
    Play,
    Press,
    Reshuffle,
    StartRound,
)
from .engine import Act, Played
from .events import (
    Awaiting,
    CardPlayed,
    ColourChosen,
    DealerDrawn,
    Event,
    GameCreated,
    Passed,
    PileReshuffled,
    RoundStarted,
    UnoCalled,
    UnoCaught,
)
from .legality import cards_left, discard_all_extras, names_target, playable
from .options import DealerSelection, Variant
from .state import HAND_SIZE, State
from .violations import Impossible, Rule, Violation

MIN_PLAYERS, MAX_PLAYERS = 2, 10

_EFFECTS: dict[Variant, dict[Face, Effect]] = {
    Variant.CLASSIC: classic.EFFECTS,
    Variant.SONIC: sonic.EFFECTS,
    Variant.MARIO_KART: mario_kart.EFFECTS,
    Variant.ATTACK: attack.EFFECTS,
}
_FIRST_CARD: dict[Variant, Callable[[Act], None]] = {
    Variant.CLASSIC: classic.first_card,
    Variant.SONIC: sonic.first_card,
    Variant.MARIO_KART: mario_kart.first_card,
    Variant.ATTACK: attack.first_card,
}
#: The rule a missing or wrong target breaks, by the face that may name one.
_TARGET_RULE = MappingProxyType(
    {
        Face.WILD_ATTACK_ATTACK: Rule.ATTACK_ATTACK_ATTACK,
        Face.TRADE_HANDS: Rule.ATTACK_TRADE_HANDS,
        Face.WILD_CUSTOMIZABLE: Rule.ATTACK_CUSTOMIZABLE,
        Face.WILD_ITEM_BOX: Rule.MK_ITEM_GREEN_SHELL,  # a target named in advance, for a Green Shell
    }
)


class CommandError(ValueError):
    """A malformed command (a seat that does not exist): bad input, not a rule violation.

    ``field`` names the command's field that is wrong (``player``, ``target``, ``dealer``).
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


# --- creating a game ---------------------------------------------------------------------------------


def create(command: CreateGame) -> GameCreated | Violation:
    """Judge a new game: 2–10 distinct, non-empty player names (``setup.players``) and a valid dealer."""
    players = command.players
    if not MIN_PLAYERS <= len(players) <= MAX_PLAYERS:
        return Violation(Rule.SETUP_PLAYERS, f"{len(players)} players; UNO takes 2 to 10")
    if any(not name or not name.strip() for name in players) or len(set(players)) != len(players):
        return Violation(Rule.SETUP_PLAYERS, "player names must be distinct and not empty")
    dealer = command.dealer
    if dealer is not None and not 0 <= dealer < len(players):
        return Violation(Rule.SETUP_DEALER, f"there is no seat {dealer} to deal from")
    if dealer is None and command.options.dealer_selection is DealerSelection.GIVEN:
        dealer = 0
    if command.seed is not None and not command.seed:
        return Violation(Rule.FAIR_COMMIT, "the game seed is empty")
    commitment = fair.commitment(command.seed) if command.seed is not None else None
    return GameCreated(command.variant, players, command.options, command.seed, commitment, dealer)


# --- the public decider ------------------------------------------------------------------------------


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


def resolve(state: State, command: Command, *, upheld: bool | None = None) -> tuple[tuple[Event, ...], State]:
    """Carry ``command`` out without judging it; raises :class:`Impossible` if it cannot happen.

    ``upheld`` forces the outcome of a Wild Draw Four challenge (a table that ruled otherwise).
    """
    act = Act(state, getattr(command, "supply", NO_SUPPLY))
    _RESOLVERS[type(command)](act, command, upheld)
    return tuple(act.events), act.state


# --- legality ------------------------------------------------------------------------------------------


def check(state: State, command: Command) -> Violation | None:
    """The rule ``command`` breaks in ``state``, or ``None`` when it is allowed.

    Raises :class:`CommandError` for a command naming a seat the game does not have.
    """
    kind = type(command)
    if kind is StartRound:
        return _check_start(state, command)  # type: ignore[arg-type]
    if kind is not Reshuffle and not 0 <= command.player < len(state.players):  # type: ignore[union-attr]
        _seat(state, command.player, "player")  # type: ignore[union-attr]
    awaiting = state.awaiting
    if awaiting is Awaiting.GAME_OVER:
        return Violation(Rule.SCORE_MATCH, "the game is over")
    if awaiting is Awaiting.ROUND_START:
        return Violation(Rule.ROUND_END, f"round {state.round} is over; the next round has not been dealt")
    return _CHECKS[kind](state, command)


def _seat(state: State, seat: int | None, field: str) -> None:
    if seat is not None and not 0 <= seat < len(state.players):
        raise CommandError(field, f"there is no seat {seat} (the game has {len(state.players)} players)")


def _name(state: State, seat: int) -> str:
    return state.players[seat]


def _not_your_turn(state: State, seat: int) -> Violation | None:
    """``turn.order``: the game waits for someone else, or for something other than a turn."""
    waiting = _name(state, state.turn)
    if state.awaiting is Awaiting.WD4_RESPONSE:
        return Violation(
            Rule.ACTION_WILD_DRAW_FOUR, f"{waiting} must first accept or challenge the Wild Draw Four"
        )
    if state.awaiting is Awaiting.COLOUR:
        return Violation(Rule.TURN_ORDER, f"waiting for {waiting} to choose a colour")
    if state.awaiting is Awaiting.TARGET:
        return Violation(Rule.TURN_ORDER, f"waiting for {waiting} to name the Green Shell's target")
    if seat != state.turn:
        return Violation(Rule.TURN_ORDER, f"it is {waiting}'s turn, not {_name(state, seat)}'s")
    return None


def _check_start(state: State, command: StartRound) -> Violation | None:
    _seat(state, command.dealer, "dealer")
    if state.awaiting is Awaiting.GAME_OVER:
        return Violation(Rule.SCORE_MATCH, "the game is over")
    if state.in_round():
        return Violation(Rule.ROUND_END, f"round {state.round} is still being played")
    if command.dealer is not None:
        expected = _expected_dealer(state)
        if expected is not None and command.dealer != expected:
            return Violation(
                Rule.SETUP_DEALER,
                f"{_name(state, expected)} deals round {state.round + 1}, not {_name(state, command.dealer)}",
            )
    elif state.round == 0 and state.dealer is None and state.seed is None:
        return Violation(Rule.SETUP_DEALER, "the dealer must be drawn (needs a seed) or stated")
    if command.deck is not None and command.hands is not None:
        return Violation(Rule.SETUP_DEAL, "give either the deck or the dealt hands, not both")
    if command.deck is not None and Counter(command.deck) != Counter(state.deck):
        return Violation(Rule.DECK_COMPOSITION, _composition_difference(state, command.deck))
    if command.hands is not None:
        if len(command.hands) != state.size:
            return Violation(Rule.SETUP_DEAL, f"{len(command.hands)} hands for {state.size} players")
        for seat, hand in enumerate(command.hands):
            if len(hand) != HAND_SIZE:
                return Violation(
                    Rule.SETUP_DEAL, f"{_name(state, seat)} was dealt {len(hand)} cards, not {HAND_SIZE}"
                )
        dealt = [c for hand in command.hands for c in hand]
        if Counter(dealt) - Counter(state.deck):
            return Violation(Rule.DECK_COMPOSITION, _composition_difference(state, dealt))
    if command.deck is None and command.hands is None and state.seed is None:
        return Violation(Rule.SETUP_DEAL, "a game without a seed needs the round's deck or dealt hands")
    return None


def _composition_difference(state: State, given: list[Card] | tuple[Card, ...]) -> str:
    extra = Counter(given) - Counter(state.deck)
    missing = Counter(state.deck) - Counter(given)
    parts = []
    if extra:
        parts.append("not in the deck: " + " ".join(sorted(c.token for c in extra.elements())))
    if missing:
        parts.append(f"{sum(missing.values())} cards missing")
    return f"the deck must be the {len(state.deck)} cards of this rule set; " + "; ".join(parts)


def _expected_dealer(state: State) -> int | None:
    """Who must deal the next round, or ``None`` while the first dealer is still to be drawn."""
    if state.round == 0:
        if state.options.dealer_selection is DealerSelection.DRAW:
            return _drawn_dealer(state)[1] if state.seed is not None else None
        return state.dealer
    assert state.dealer is not None
    return (state.dealer + 1) % state.size


def _check_play(state: State, command: Play) -> Violation | None:
    player, card = command.player, command.card
    if command.target is not None:
        _seat(state, command.target, "target")
    awaiting = state.awaiting
    if player != state.turn or (awaiting is not Awaiting.PLAY and awaiting is not Awaiting.FOLLOW_UP):
        violation = _not_your_turn(state, player)
        if violation is not None:
            return violation
    hand = state.hands[player]
    if state.awaiting is Awaiting.DRAWN and card is not state.drawn:
        assert state.drawn is not None
        return Violation(
            Rule.DRAW_ONE, f"after drawing, only the drawn {state.drawn} may be played, not {card}"
        )
    if card not in hand:
        return Violation(Rule.PLAY_IN_HAND, f"{_name(state, player)} does not hold {card}")
    top = state.discard[-1]
    if not playable(card, top, state.colour):
        colour = state.colour.value if state.colour else "none"
        return Violation(Rule.PLAY_MATCH, f"{card} does not match {top} (active colour {colour})")
    takes_colour = card.is_wild and card.face is not Face.WILD_ITEM_BOX
    if takes_colour and command.colour is None:
        return Violation(Rule.PLAY_WILD_COLOUR, f"{card} needs a chosen colour (R, Y, G or B)")
    if not takes_colour and command.colour is not None:
        return Violation(Rule.PLAY_WILD_COLOUR, f"{card} takes no chosen colour")
    if command.target == player:
        return Violation(_TARGET_RULE.get(card.face, Rule.TURN_ORDER), f"{card} must name another player")
    if command.target is None and _needs_target(card, state):
        return Violation(_TARGET_RULE[card.face], f"{card} must name the player it targets")
    if command.uno:
        traded = len(state.hands[command.target]) if command.target is not None else None
        left = cards_left(hand, card, state.options, traded)
        if left != 1:
            return Violation(
                Rule.UNO_CALL, f"{_name(state, player)} calls UNO with {card} but will hold {left} cards"
            )
    return None


def _needs_target(card: Card, state: State) -> bool:
    """Whether playing ``card`` must name another player (Attack-Attack, Trade Hands, a customizable)."""
    return (
        card.number is None
        and card.face in _TARGET_RULE
        and names_target(card.face, state.options.custom_action)
    )


def _check_draw(state: State, command: Draw) -> Violation | None:
    if state.awaiting is Awaiting.FOLLOW_UP and command.player == state.turn:
        return Violation(Rule.ATTACK_FOLLOW_UP, "after S or R: play one more matching card or pass")
    if state.variant is Variant.ATTACK:
        return Violation(Rule.ATTACK_LAUNCHER, "UNO Attack has no draw pile: press the launcher")
    if state.awaiting is Awaiting.PLAY and command.player == state.turn:
        return None
    if state.awaiting is Awaiting.DRAWN and command.player == state.turn:
        return Violation(Rule.TURN_END, f"{_name(state, command.player)} already drew this turn")
    return _not_your_turn(state, command.player)


def _check_pass(state: State, command: Pass) -> Violation | None:
    if state.awaiting in (Awaiting.DRAWN, Awaiting.FOLLOW_UP) and command.player == state.turn:
        return None
    violation = _not_your_turn(state, command.player)
    if violation is not None:
        return violation
    if state.variant is Variant.ATTACK:
        return Violation(Rule.ATTACK_LAUNCHER, "nothing to pass on: play a card or press the launcher")
    return Violation(Rule.DRAW_PASS, "nothing to pass on: play a card or draw one first")


def _check_press(state: State, command: Press) -> Violation | None:
    if state.variant is not Variant.ATTACK:
        return Violation(Rule.ATTACK_LAUNCHER, f"{state.variant.value} has no launcher: draw a card")
    if state.awaiting is Awaiting.FOLLOW_UP and command.player == state.turn:
        return Violation(Rule.ATTACK_FOLLOW_UP, "after S or R: play one more matching card or pass")
    return _not_your_turn(state, command.player)


def _check_call(state: State, command: CallUno) -> Violation | None:
    held = len(state.hands[command.player])
    if held != 1:
        return Violation(Rule.UNO_CALL, f"{_name(state, command.player)} holds {held} cards, not one")
    return None


def catch_reason(state: State, command: Catch) -> str | None:
    """Why a catch earns no penalty (``uno.catch.invalid``), or ``None`` when it does (``uno.catch``)."""
    _seat(state, command.target, "target")
    target = _name(state, command.target)
    if command.target == command.player:
        return f"{target} cannot catch themself"
    held = len(state.hands[command.target])
    if held != 1:
        return f"{target} holds {held} cards, not one"
    if command.target not in state.exposed:
        return f"{target} called UNO or the window has closed"
    return None


def _check_catch(state: State, command: Catch) -> Violation | None:
    reason = catch_reason(state, command)
    return None if reason is None else Violation(Rule.UNO_CATCH_INVALID, reason)


def _check_wd4_answer(state: State, seat: int, rule: Rule) -> Violation | None:
    if state.awaiting is not Awaiting.WD4_RESPONSE:
        return Violation(rule, "no Wild Draw Four is waiting for an answer")
    if seat != state.turn:
        return Violation(rule, f"only {_name(state, state.turn)}, the Wild Draw Four's victim, may answer it")
    return None


def _check_challenge(state: State, command: Challenge) -> Violation | None:
    return _check_wd4_answer(state, command.player, Rule.WD4_CHALLENGE)


def _check_accept(state: State, command: Accept) -> Violation | None:
    return _check_wd4_answer(state, command.player, Rule.WD4_ACCEPT)


def _check_choose(state: State, command: Choose) -> Violation | None:
    _seat(state, command.target, "target")
    if state.awaiting is Awaiting.COLOUR:
        if command.player != state.turn:
            return Violation(Rule.TURN_ORDER, f"{_name(state, state.turn)} chooses the colour")
        if command.colour is None or command.target is not None:
            return Violation(Rule.ACTION_WILD, "choose a colour (R, Y, G or B)")
        return None
    if state.awaiting is Awaiting.TARGET:
        if command.player != state.turn:
            return Violation(Rule.TURN_ORDER, f"{_name(state, state.turn)} names the Green Shell's target")
        if command.target is None or command.target == command.player or command.colour is not None:
            return Violation(Rule.MK_ITEM_GREEN_SHELL, "name an opponent for the Green Shell")
        return None
    return Violation(Rule.TURN_ORDER, "the game is not waiting for a choice")


def _check_reshuffle(state: State, command: Reshuffle) -> Violation | None:
    if state.seed is not None:
        return Violation(Rule.DRAW_RESHUFFLE, "a seeded game reshuffles by itself")
    if state.pile:
        held = f"{len(state.pile)} card{'s' if len(state.pile) != 1 else ''}"
        return Violation(
            Rule.DRAW_RESHUFFLE, f"the draw pile still holds {held}: reshuffle only when it is empty"
        )
    return _reshuffle_problem(state, command.pile)


def _reshuffle_problem(state: State, pile: tuple[Card, ...]) -> Violation | None:
    """``draw.reshuffle``: why ``pile`` cannot be the new draw pile (it must be the draw pile's cards
    and the discard pile except its top card), or ``None``."""
    if Counter(pile) != Counter(state.pile + state.discard[:-1]):
        return Violation(
            Rule.DRAW_RESHUFFLE,
            "the new pile must be the draw pile's cards and the discard pile except its top card",
        )
    return None


_CHECKS: dict[type, Callable[[State, Any], Violation | None]] = {
    Play: _check_play,
    Draw: _check_draw,
    Pass: _check_pass,
    Press: _check_press,
    CallUno: _check_call,
    Catch: _check_catch,
    Challenge: _check_challenge,
    Accept: _check_accept,
    Choose: _check_choose,
    Reshuffle: _check_reshuffle,
}


# --- resolution ----------------------------------------------------------------------------------------


def _drawn_dealer(state: State) -> tuple[tuple[tuple[int, Card], ...], int]:
    """``setup.dealer`` by draw: everyone draws one card from a seeded shuffle, highest number deals
    (non-number cards count 0), tied highest players draw again from the same deck."""
    assert state.seed is not None
    deck = fair.shuffled(state.seed, "round:1:dealer-draw", state.deck)
    draws: list[tuple[int, Card]] = []
    contenders = list(range(state.size))
    position = 0
    while len(contenders) > 1 and position + len(contenders) <= len(deck):
        values = {}
        for seat in contenders:
            draws.append((seat, deck[position]))
            values[seat] = deck[position].number or 0
            position += 1
        best = max(values.values())
        contenders = [seat for seat in contenders if values[seat] == best]
    return tuple(draws), contenders[0]


def _resolve_start(act: Act, command: StartRound, _: bool | None) -> None:
    s = act.state
    number = s.round + 1
    if number == 1 and s.options.dealer_selection is DealerSelection.DRAW and s.seed is not None:
        draws, dealer = _drawn_dealer(s)
        act.emit(DealerDrawn(number, draws, dealer))
    if command.dealer is not None:
        dealer = command.dealer  # as stated (checked against the rules by `check`)
    elif number == 1:
        dealer = act.state.dealer if act.state.dealer is not None else 0
    else:
        assert s.dealer is not None
        dealer = (s.dealer + 1) % s.size
    deck = command.deck
    if deck is not None and len(deck) <= HAND_SIZE * s.size:
        raise Impossible(
            Rule.SETUP_DEAL, f"a deck of {len(deck)} cards cannot deal {s.size} hands and a first card"
        )
    if command.hands is not None:
        extra = Counter(c for hand in command.hands for c in hand) - Counter(s.deck)
        if extra or len(command.hands) != s.size:
            raise Impossible(Rule.DECK_COMPOSITION, "the dealt hands are not cards of this deck")
    if deck is None and command.hands is None:
        if s.seed is None:
            raise Impossible(Rule.SETUP_DEAL, "no deck, no dealt hands and no seed to shuffle with")
        deck = fair.shuffled(s.seed, f"round:{number}:deal", s.deck)
    act.emit(RoundStarted(number, dealer, deck, command.hands))
    _FIRST_CARD[s.variant](act)


def _resolve_play(act: Act, command: Play, _: bool | None) -> None:
    s = act.state
    player, card = command.player, command.card
    hand = s.hands[player]
    if card not in hand:
        raise Impossible(Rule.PLAY_IN_HAND, f"{act.name(player)} does not hold {card}")
    if command.target is None and card.number is None and _needs_target(card, s):
        raise Impossible(_TARGET_RULE[card.face], f"{card} names no player")
    origin, chained = player, False
    if s.awaiting is Awaiting.FOLLOW_UP and s.turn == player and s.pointer is not None:
        origin, chained = s.next_seat(s.pointer, -1), True  # the follow-up counts from the turn pointer
    colour = command.colour if card.is_wild and card.face is not Face.WILD_ITEM_BOX else None
    extras = discard_all_extras(hand, card) if card.face is Face.DISCARD_ALL else ()
    if chained:
        act.barred = player
    act.emit(CardPlayed(player, card, colour, command.uno, command.target, extras))
    going_out = not act.state.hands[player]
    effect = _EFFECTS[s.variant].get(card.face, classic.next_turn)
    effect(act, Played(command, origin, going_out, chained))
    if going_out and act.state.awaiting is not Awaiting.TARGET:
        act.end_round(player)


def _resolve_draw(act: Act, command: Draw, _: bool | None) -> None:
    player = command.player
    drawn = act.draw_one(player)
    s = act.state
    if drawn is None:  # nothing left to draw anywhere: the draw is forfeited (``draw.reshuffle``)
        act.emit(Passed(player))
        act.prompt(_turn_after(s, player))
    elif playable(drawn, s.discard[-1], s.colour) and s.awaiting is not Awaiting.FOLLOW_UP:
        act.prompt(player, Awaiting.DRAWN, new_turn=False)
    else:
        act.prompt(_turn_after(s, player))


def _turn_after(state: State, player: int) -> int:
    """Who plays after ``player`` ends the turn without a play: the next seat, or — when the turn ends
    instead of an UNO Attack follow-up (a pass, or a press or draw the table allowed) — the player the
    S or R already pointed to (``attack.follow-up``)."""
    if state.awaiting is Awaiting.FOLLOW_UP and state.pointer is not None:
        return state.pointer
    return state.next_seat(player)


def _resolve_pass(act: Act, command: Pass, _: bool | None) -> None:
    s = act.state
    act.emit(Passed(command.player))
    act.prompt(_turn_after(s, command.player))


def _resolve_press(act: Act, command: Press, _: bool | None) -> None:
    s = act.state
    act.press(command.player, Rule.ATTACK_LAUNCHER)
    act.prompt(_turn_after(s, command.player))


def _resolve_call(act: Act, command: CallUno, _: bool | None) -> None:
    act.emit(UnoCalled(command.player))


def _resolve_catch(act: Act, command: Catch, _: bool | None) -> None:
    act.emit(UnoCaught(command.player, command.target))
    if act.state.variant is Variant.ATTACK:
        attack.presses(act, command.target, 2, Rule.UNO_PENALTY)
    else:
        act.take(command.target, 2, Rule.UNO_PENALTY)


def _resolve_challenge(act: Act, command: Challenge, upheld: bool | None) -> None:
    if act.state.wd4 is None:
        raise Impossible(Rule.WD4_CHALLENGE, "no Wild Draw Four to challenge")
    classic.challenge(act, command.player, upheld)


def _resolve_accept(act: Act, command: Accept, _: bool | None) -> None:
    if act.state.wd4 is None:
        raise Impossible(Rule.WD4_ACCEPT, "no Wild Draw Four to accept")
    classic.accept(act, command.player)


def _resolve_choose(act: Act, command: Choose, _: bool | None) -> None:
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


def _resolve_reshuffle(act: Act, command: Reshuffle, _: bool | None) -> None:
    problem = _reshuffle_problem(act.state, command.pile)
    if problem is not None:
        raise Impossible(problem.rule, problem.message)
    act.emit(PileReshuffled(command.pile, True))


_RESOLVERS: dict[type, Callable[[Act, Any, bool | None], None]] = {
    StartRound: _resolve_start,
    Play: _resolve_play,
    Draw: _resolve_draw,
    Pass: _resolve_pass,
    Press: _resolve_press,
    CallUno: _resolve_call,
    Catch: _resolve_catch,
    Challenge: _resolve_challenge,
    Accept: _resolve_accept,
    Choose: _resolve_choose,
    Reshuffle: _resolve_reshuffle,
}
