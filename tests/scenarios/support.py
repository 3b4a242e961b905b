"""Helpers for rule scenarios: build a *given* log compactly, state the *when* command, assert the *then*.

A scenario is a test decorated with :func:`scenario` naming the digest's rule ids (``docs/RULES.md``) it
pins down; ``test_coverage`` fails when a rule id has none.

Given logs are honest: :func:`given` creates the game through :func:`service.rules.create` and deals it
through :func:`service.rules.decide` from a deck stacked by :func:`stacked_deck`, so the setup rules (deal,
first card, first player) run for real; :func:`run` then plays commands through the engine, asserting
each is accepted. Expected *then* events are written out by hand from the digest.
"""

from __future__ import annotations

import hashlib
import hmac
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from service.rules import (
    NO_SUPPLY,
    Card,
    Command,
    CreateGame,
    Draw,
    Event,
    Pass,
    Play,
    Rule,
    StartRound,
    State,
    Supply,
    Variant,
    Violation,
    card,
    cards,
    create,
    decide,
    execute,
    fold,
    make_options,
)
from service.rules.events import Awaiting, GameCreated

HAND_SIZE = 7
NAMES = ("ann", "bob", "cy", "dee", "eve", "fay", "gus", "hal", "ida", "jo")

# --- the registry of covered rule ids ----------------------------------------------------------------

#: rule id → the scenarios (``module::function``) that pin it down.
COVERED: dict[str, list[str]] = defaultdict(list)

F = TypeVar("F", bound=Callable[..., Any])


def scenario(*rule_ids: str) -> Callable[[F], F]:
    """Register the decorated test as a scenario for ``rule_ids`` (each must be a :class:`Rule` value)."""
    if not rule_ids:
        raise ValueError("a scenario names at least one rule id")
    for rule_id in rule_ids:
        Rule(rule_id)  # an unknown id is a typo in the test: fail at import

    def register(test: F) -> F:
        for rule_id in rule_ids:
            COVERED[rule_id].append(f"{test.__module__}::{test.__name__}")
        return test

    return register


# --- building the given log --------------------------------------------------------------------------


def names(players: int) -> tuple[str, ...]:
    """Player names for ``players`` seats: ann, bob, cy, …"""
    return NAMES[:players]


def stacked_deck(
    deck: Sequence[Card],
    hands: Mapping[int, str],
    first: str,
    pile: str = "",
    *,
    players: int,
    dealer: int,
) -> tuple[Card, ...]:
    """A permutation of ``deck`` (top first) that deals ``hands`` and then flips ``first``.

    Dealing 7 cards each, one at a time starting left of ``dealer`` (``setup.deal``), gives every seat in
    ``hands`` exactly those 7 cards in that order; seats not given get cards from the rest (canonical
    order). Then come the ``first`` card(s) to flip (several for re-flips), then ``pile`` on top of the
    draw pile, then everything else in canonical order. Raises ``ValueError`` if the deck lacks a card.
    """
    left = Counter(deck)

    def take(token: Card) -> Card:
        if left[token] <= 0:
            raise ValueError(f"the deck has no more {token}")
        left[token] -= 1
        return token

    dealt: list[Card | None] = [None] * (HAND_SIZE * players)
    for seat, spec in hands.items():
        hand = cards(spec)
        if len(hand) != HAND_SIZE:
            raise ValueError(f"seat {seat} is given {len(hand)} cards, not {HAND_SIZE}")
        offset = (seat - dealer - 1) % players
        for k, c in enumerate(hand):
            dealt[k * players + offset] = take(c)
    tail = [take(c) for c in cards(first)] + [take(c) for c in cards(pile)]
    rest: list[Card] = []
    for c in deck:
        if left[c] > 0:
            left[c] -= 1
            rest.append(c)
    fill = iter(rest)
    stacked = [c if c is not None else next(fill) for c in dealt] + tail + list(fill)
    assert Counter(stacked) == Counter(deck)
    return tuple(stacked)


def created(
    variant: Variant,
    players: int = 2,
    *,
    dealer: int | None = 0,
    options: Mapping[str, Any] | None = None,
    seed: bytes | None = None,
) -> GameCreated:
    """The first event of a game, from :func:`service.rules.create` (asserted accepted)."""
    outcome = create(CreateGame(variant, names(players), make_options(variant, options), seed, dealer))
    assert isinstance(outcome, GameCreated), outcome
    return outcome


def given(
    variant: Variant,
    players: int,
    hands: Mapping[int, str],
    first: str,
    pile: str = "",
    *,
    dealer: int = 0,
    options: Mapping[str, Any] | None = None,
    seed: bytes | None = None,
    supply: Supply = NO_SUPPLY,
) -> list[Event]:
    """The log of a game dealt from a stacked deck: ``GameCreated``, ``RoundStarted``, first-card events.

    The round is dealt by the real engine (``StartRound(deck=...)``), which applies the first-card rules.
    """
    # The dealer is stated, so a seeded game must not draw for it (``setup.dealer``).
    start = created(
        variant, players, dealer=dealer, options={"dealer_selection": "given", **(options or {})}, seed=seed
    )
    state = fold([start])
    deck = stacked_deck(state.deck, hands, first, pile, players=players, dealer=dealer)
    dealt = decide(state, StartRound(deck=deck, supply=supply))
    assert not isinstance(dealt, Violation), dealt
    return [start, *dealt]


def run(events: Sequence[Event], *commands: Command) -> list[Event]:
    """``events`` followed by what each of ``commands`` produces, each asserted accepted by the engine."""
    log = list(events)
    state = fold(log)
    for command in commands:
        outcome = execute(state, command)
        assert not isinstance(outcome, Violation), f"{command} was rejected: {outcome}"
        produced, state = outcome
        log.extend(produced)
    return log


def drain(events: Sequence[Event], leave: int = 0) -> list[Event]:
    """Players on turn draw (and keep what they draw) until ``leave`` cards are left in the draw pile."""
    log = list(events)
    state = fold(log)
    while len(state.pile) > leave or state.awaiting is Awaiting.DRAWN:
        command: Command = Pass(state.turn) if state.awaiting is Awaiting.DRAWN else Draw(state.turn)
        outcome = execute(state, command)
        assert not isinstance(outcome, Violation), f"{command} was rejected: {outcome}"
        produced, state = outcome
        log.extend(produced)
    return log


def given_hands(
    variant: Variant,
    hands: Sequence[str],
    flips: str,
    *,
    dealer: int = 0,
    options: Mapping[str, Any] | None = None,
) -> list[Event]:
    """The log of a table game dealt with known ``hands`` (one per seat) and an unknown pile order.

    ``flips`` lists the cards the table turned over at setup (``Supply.flips``).
    """
    start = created(variant, len(hands), dealer=dealer, options=options)
    dealt = decide(
        fold([start]),
        StartRound(hands=tuple(cards(h) for h in hands), supply=Supply(flips=cards(flips))),
    )
    assert not isinstance(dealt, Violation), dealt
    return [start, *dealt]


#: Bob (seat 1) goes out in seven plays of his own: with two players every Skip gives him the turn again.
BOB_GOES_OUT = "RS RS YS YS GS GS G1"


def won_round(
    variant: Variant,
    loser: str,
    *,
    options: Mapping[str, Any] | None = None,
    seed: bytes | None = None,
) -> list[Event]:
    """A two-player round dealt by ann (seat 0) that bob wins, ann holding ``loser`` (7 cards) at the end."""
    log = given(variant, 2, {1: BOB_GOES_OUT, 0: loser}, "R5", options=options, seed=seed)
    plays = [Play(1, c) for c in cards(BOB_GOES_OUT)]
    plays[5] = Play(1, card("GS"), uno=True)
    return run(log, *plays)


# --- then ----------------------------------------------------------------------------------------------


def _state(given_: State | Sequence[Event]) -> State:
    return given_ if isinstance(given_, State) else fold(given_)


def when(given_: State | Sequence[Event], command: Command) -> tuple[Event, ...]:
    """The events ``command`` produces, asserting the engine accepts it."""
    outcome = decide(_state(given_), command)
    assert not isinstance(outcome, Violation), f"{command} was rejected: {outcome}"
    return outcome


def then_events(given_: State | Sequence[Event], command: Command, expected: Sequence[Event]) -> None:
    """Assert ``command`` is accepted and produces exactly ``expected``, in order."""
    assert when(given_, command) == tuple(expected)


def then_violation(
    given_: State | Sequence[Event], command: Command, rule: Rule, *mentions: str
) -> Violation:
    """Assert ``command`` is rejected for ``rule`` with a message naming every one of ``mentions``."""
    outcome = decide(_state(given_), command)
    assert isinstance(outcome, Violation), f"{command} was accepted: {outcome}"
    assert outcome.rule is rule, f"expected {rule.value}, got {outcome}"
    for mention in mentions:
        assert mention in outcome.message, f"{mention!r} not named in {outcome.message!r}"
    return outcome


def of_type(events: Sequence[Event], kind: type[Any]) -> list[Any]:
    """The events of ``events`` that are instances of ``kind``."""
    return [e for e in events if isinstance(e, kind)]


def hand(state: State, seat: int) -> list[str]:
    """The tokens of a seat's hand, in order."""
    return [c.token for c in state.hands[seat]]


def toks(text: str) -> tuple[Card, ...]:
    """Cards from a space-separated token string (shorthand for :func:`service.rules.cards`)."""
    return cards(text)


def one(token: str) -> Card:
    """One card (shorthand for :func:`service.rules.card`)."""
    return card(token)


# --- fair dealing, re-derived independently from the documented algorithm -------------------------------

T = TypeVar("T")


def _u64s(seed: bytes, label: str) -> Iterator[int]:
    counter = 0
    while True:
        block = hmac.new(seed, f"{label}:{counter}".encode(), hashlib.sha256).digest()
        for i in range(0, 32, 8):
            yield int.from_bytes(block[i : i + 8], "big")
        counter += 1


def _below(stream: Iterator[int], n: int) -> int:
    limit = 2**64 - (2**64 % n)
    for value in stream:
        if value < limit:
            return value % n
    raise AssertionError("the stream is endless")


def rederived_shuffle(seed: bytes, label: str, items: Sequence[T]) -> tuple[T, ...]:
    """Fisher–Yates under the HMAC-SHA256 stream ``label``, written from ``service/rules/fair.py``'s spec."""
    stream = _u64s(seed, label)
    order = list(items)
    for i in range(len(order) - 1, 0, -1):
        j = _below(stream, i + 1)
        order[i], order[j] = order[j], order[i]
    return tuple(order)


def rederived_press(seed: bytes, label: str, weights: Sequence[int]) -> int:
    """How many cards a launcher press fires, re-derived from the documented algorithm."""
    roll = _below(_u64s(seed, label), sum(weights))
    for count, weight in enumerate(weights):
        if roll < weight:
            return count
        roll -= weight
    raise AssertionError("the roll is below the sum of the weights")


def rederived_position(seed: bytes, label: str, size: int) -> int:
    """Where a returned card goes back into a pile of ``size`` cards (0 = on top), re-derived."""
    return _below(_u64s(seed, label), size + 1)
