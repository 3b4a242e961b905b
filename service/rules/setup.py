"""Setting a game up: its creation and every round's deal, up to the first card (digest §2, ``setup.*``).

A game is created once (players, dealer, the seed's commitment: ``fair.commit``); each round then deals
from the seed's shuffle, from a deck order a table reported or the admin fixed (the round records who),
or from the hands a table dealt (``deck.composition`` checks them), and flips the first card by the rule
set's own rule (``VariantRules.first_card``: :mod:`service.rules.classic`, :mod:`~service.rules.sonic`,
:mod:`~service.rules.mario_kart`, :mod:`~service.rules.attack`).
"""

from __future__ import annotations

from collections import Counter

from service.rules import fair
from service.rules.cards import Card
from service.rules.commands import CreateGame, StartRound
from service.rules.engine import Act
from service.rules.events import Awaiting, DealerDrawn, GameCreated, RoundStarted
from service.rules.options import DealerSelection
from service.rules.state import HAND_SIZE, State
from service.rules.variants import VARIANT_RULES
from service.rules.violations import Impossible, Rule, Violation, require_seat

MIN_PLAYERS, MAX_PLAYERS = 2, 10
#: The longest player name (``setup.players``): names are shown, stored and keyed on, so they are bounded.
MAX_NAME = 64


def valid_name(name: str) -> bool:
    """A player name: 1 to :data:`MAX_NAME` printable characters, not only spaces (no control or
    formatting characters, no line breaks)."""
    return 0 < len(name) <= MAX_NAME and name.isprintable() and bool(name.strip())


def create(command: CreateGame) -> GameCreated | Violation:
    """Judge a new game: 2–10 distinct player names of 1 to :data:`MAX_NAME` printable characters
    (``setup.players``) and a valid dealer."""
    players = command.players
    if not MIN_PLAYERS <= len(players) <= MAX_PLAYERS:
        return Violation(Rule.SETUP_PLAYERS, f"{len(players)} players; UNO takes 2 to 10")
    if not all(valid_name(name) for name in players):
        return Violation(
            Rule.SETUP_PLAYERS, f"player names are 1 to {MAX_NAME} printable characters, not only spaces"
        )
    if len(set(players)) != len(players):
        return Violation(Rule.SETUP_PLAYERS, "player names must be distinct")
    dealer = command.dealer
    if dealer is not None and not 0 <= dealer < len(players):
        return Violation(Rule.SETUP_DEALER, f"there is no seat {dealer} to deal from")
    if dealer is None and command.options.dealer_selection is DealerSelection.GIVEN:
        dealer = 0
    if command.seed is not None and not command.seed:
        return Violation(Rule.FAIR_COMMIT, "the game seed is empty")
    commitment = fair.commitment(command.seed) if command.seed is not None else None
    return GameCreated(command.variant, players, command.options, command.seed, commitment, dealer)


def check_start(state: State, command: StartRound) -> Violation | None:
    """A round may start only between rounds, dealt by the right dealer from this rule set's deck."""
    require_seat(command.dealer, state.size, "dealer")
    if state.awaiting is Awaiting.GAME_OVER:
        return Violation(Rule.SCORE_MATCH, "the game is over")
    if state.in_round():
        return Violation(Rule.ROUND_END, f"round {state.round} is still being played")
    if command.dealer is not None:
        expected = _expected_dealer(state)
        if expected is not None and command.dealer != expected:
            return Violation(
                Rule.SETUP_DEALER,
                f"{state.players[expected]} deals round {state.round + 1}, "
                f"not {state.players[command.dealer]}",
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
                    Rule.SETUP_DEAL, f"{state.players[seat]} was dealt {len(hand)} cards, not {HAND_SIZE}"
                )
        dealt = [c for hand in command.hands for c in hand]
        if Counter(dealt) - Counter(state.deck):
            return Violation(Rule.DECK_COMPOSITION, _composition_difference(state, dealt))
    if command.deck is None and command.hands is None and state.seed is None:
        return Violation(Rule.SETUP_DEAL, "a game without a seed needs the round's deck or dealt hands")
    if command.fixed_by is not None and command.deck is None:
        # A fixed deal is the one exemption from the seed's shuffle (fair.commit): it names its deck.
        return Violation(Rule.FAIR_COMMIT, "a round dealt from a fixed deck needs that deck")
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


def resolve_start(act: Act, command: StartRound) -> None:
    """Draw the first dealer if it must be, deal the round (``setup.deal``), flip the first card."""
    s = act.state
    number = s.round + 1
    if number == 1 and s.options.dealer_selection is DealerSelection.DRAW and s.seed is not None:
        draws, dealer = _drawn_dealer(s)
        act.emit(DealerDrawn(number, draws, dealer))
    if command.dealer is not None:
        dealer = command.dealer  # as stated (checked against the rules by `check_start`)
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
    # Only a deck given by the command can be fixed; one the seed shuffled here never is.
    fixed_by = command.fixed_by if command.deck is not None else None
    act.emit(RoundStarted(number, dealer, deck, command.hands, fixed_by))
    VARIANT_RULES[s.variant].first_card(act)
