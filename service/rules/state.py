"""The state of one game and :func:`evolve`, which applies an event to it.

:class:`State` is an immutable named tuple, always the fold of the game's events (:func:`fold`).
``evolve`` is mechanical: it trusts the event and never validates; what it keeps for the rule families
is bookkeeping (``exposed``, ``wd4``, ``pending``, ``stackers``, ``top_by``, ``jumpable``).
docs/DESIGN.md ("The rules engine") says which family judges each.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, NamedTuple

from service.rules.cards import DECKS, Card, Colour, Face
from service.rules.events import (
    Awaiting,
    CardDrawn,
    CardFlipped,
    CardPlayed,
    CardsTaken,
    ColourChosen,
    DealerDrawn,
    DirectionReversed,
    Event,
    FlipReturned,
    GameCreated,
    GameEnded,
    HandsRotated,
    HandsTraded,
    JumpedIn,
    LauncherPressed,
    Passed,
    PileReshuffled,
    Prompted,
    RoundEnded,
    RoundStarted,
    StackAccepted,
    UnoCalled,
    UnoCaught,
    Wd4Accepted,
    Wd4Challenged,
)
from service.rules.legality import PENALTIES, rotates_hands, stackable, trades_hands
from service.rules.options import Options, Variant, deck_name
from service.rules.violations import Rule

HAND_SIZE = 7


class Wd4Play(NamedTuple):
    """A Wild Draw Four awaiting its victim's answer: what a challenge will look at (``wd4.legal``)."""

    offender: int
    hand: tuple[Card, ...]  # the offender's hand as it was when playing, the Wild Draw Four included
    colour: Colour | None  # the active colour then
    top: Card  # the top card then


class RoundResult(NamedTuple):
    """The outcome of one finished round (``round.end``, ``score.round``)."""

    round: int
    winner: int
    points: int
    hands: tuple[tuple[Card, ...], ...]


class State(NamedTuple):
    """Everything the rules need to judge the next command of one game.

    Seats are 0-based, clockwise. ``direction`` is +1 (clockwise) or -1. The draw pile is listed top
    first; when ``pile_ordered`` is false its order is unknown (a table game without a deck) and it is
    kept in canonical deck order. The discard pile is listed bottom first, so ``discard[-1]`` is the top.
    """

    variant: Variant
    players: tuple[str, ...]
    options: Options
    seed: bytes | None
    seed_sha256: str | None
    deck: tuple[Card, ...]  # the rule set's full deck, canonical order
    round: int  # 0 before the first round
    dealer: int | None
    awaiting: Awaiting
    turn: int  # the player the game waits for
    pointer: int | None  # whose turn follows a pending choice or follow-up chance
    hands: tuple[tuple[Card, ...], ...]
    pile: tuple[Card, ...]
    pile_ordered: bool
    discard: tuple[Card, ...]
    colour: Colour | None  # the active colour (None only while a colour choice is pending)
    direction: int
    exposed: tuple[int, ...]  # the players whose UNO window is open (down to one card, no call), in order
    drawn: Card | None  # the card drawn this turn, while it may still be played
    wd4: Wd4Play | None
    pending: int  # the draw penalty waiting for its answer: a W+4's 4, or a stacked total (house.stacking)
    stackers: tuple[int, ...]  # who played the cards of the pending penalty, in order
    top_by: int | None  # who played the top card (None for a flipped one)
    jumpable: bool  # no turn action since the top card went down: it may be jumped on (house.jump-in)
    turn_owner: int | None  # who took the current turn
    previous: int | None  # who took the turn before (``mk.item.banana``)
    reshuffles: int  # per-round counters naming the seeded streams (see service.rules.fair)
    presses: int
    returns: int
    scores: tuple[int, ...]
    results: tuple[RoundResult, ...]
    winner: int | None

    @property
    def top(self) -> Card:
        """The top card of the discard pile."""
        return self.discard[-1]

    @property
    def size(self) -> int:
        """The number of players."""
        return len(self.players)

    def next_seat(self, seat: int, steps: int = 1) -> int:
        """The seat ``steps`` places after ``seat`` in the current direction of play."""
        return (seat + self.direction * steps) % len(self.players)

    def in_round(self) -> bool:
        """Whether a round is being played (dealt and not yet won)."""
        return self.awaiting is not Awaiting.ROUND_START and self.awaiting is not Awaiting.GAME_OVER


_INDEX: Final = {name: i for i, name in enumerate(State._fields)}


def _with(state: State, **changes: Any) -> State:
    """``state`` with some fields changed: ``State._replace``, twice as fast (evolve runs per event)."""
    values = list(state)
    for name, value in changes.items():
        values[_INDEX[name]] = value
    return tuple.__new__(State, values)


# The positions of the fields the hot handlers write. Only the three handlers that run on most events
# (``on_prompted``, ``_card_played``, ``_card_drawn``) write by position: written plainly (``_with``),
# each makes folding simulated games 16–31 % slower; elsewhere the plain form costs nothing measurable.
# ``tests/test_evolve_reference.py`` holds them to plain versions, event by event. ``Final`` (here and
# for the module's tables): compiled (setup.py), a ``Final`` name is a C variable, not a look-up in the
# module's dict at each use.
_TURN: Final = _INDEX["turn"]
_AWAITING: Final = _INDEX["awaiting"]
_POINTER: Final = _INDEX["pointer"]
_DRAWN: Final = _INDEX["drawn"]
_OWNER: Final = _INDEX["turn_owner"]
_PREVIOUS: Final = _INDEX["previous"]
_HANDS: Final = _INDEX["hands"]
_DISCARD: Final = _INDEX["discard"]
_COLOUR: Final = _INDEX["colour"]
_EXPOSED: Final = _INDEX["exposed"]
_WD4: Final = _INDEX["wd4"]
_PILE: Final = _INDEX["pile"]
_PENDING: Final = _INDEX["pending"]
_STACKERS: Final = _INDEX["stackers"]
_TOP_BY: Final = _INDEX["top_by"]
_JUMPABLE: Final = _INDEX["jumpable"]
_W4: Final = Face.WILD_DRAW_FOUR
_DRAWN_CARD: Final = Awaiting.DRAWN  # a constant: Python 3.11 reads an enum member via EnumType.__getattr__


#: The fields every round starts afresh, with their values at its start (and at a new game's).
_ROUND_RESET: Final[Mapping[str, Any]] = MappingProxyType(
    {
        "pointer": None,
        "discard": (),
        "colour": None,
        "direction": 1,
        "exposed": (),
        "drawn": None,
        "wd4": None,
        "pending": 0,
        "stackers": (),
        "top_by": None,
        "jumpable": False,
        "turn_owner": None,
        "previous": None,
        "reshuffles": 0,
        "presses": 0,
        "returns": 0,
    }
)


def new_state(event: GameCreated) -> State:
    """The state right after ``event``, the first event of every game."""
    n = len(event.players)
    return State(
        variant=event.variant,
        players=event.players,
        options=event.options,
        seed=event.seed,
        seed_sha256=event.seed_sha256,
        deck=DECKS[deck_name(event.variant, event.options)],
        round=0,
        dealer=event.dealer,
        awaiting=Awaiting.ROUND_START,
        turn=0,
        hands=((),) * n,
        pile=(),
        pile_ordered=True,
        scores=(0,) * n,
        results=(),
        winner=None,
        **_ROUND_RESET,
    )


def dealt_positions(players: int, dealer: int) -> tuple[tuple[int, ...], ...]:
    """The places in a deck (0 the top) each seat is dealt: 7 cards each, one at a time starting left of
    ``dealer`` (``setup.deal``). Also what a seat's view of a dealt deck shows it, whatever the cards are
    written as (:mod:`service.domain.visibility`)."""
    seats: list[list[int]] = [[] for _ in range(players)]
    for i in range(HAND_SIZE * players):
        seats[(dealer + 1 + i) % players].append(i)
    return tuple(tuple(seat) for seat in seats)


def deal(
    deck: Sequence[Card], players: int, dealer: int
) -> tuple[tuple[tuple[Card, ...], ...], tuple[Card, ...]]:
    """Deal ``deck`` (:func:`dealt_positions`): the hands by seat and the rest of the deck."""
    hands = tuple(tuple(deck[i] for i in seat) for seat in dealt_positions(players, dealer))
    return hands, tuple(deck[HAND_SIZE * players :])


def without(cards: tuple[Card, ...], remove: Iterable[Card]) -> tuple[Card, ...]:
    """``cards`` less one copy of each card of ``remove`` (each must be present)."""
    out = list(cards)
    for c in remove:
        out.remove(c)
    return tuple(out)


def canonical(deck: tuple[Card, ...], multiset: Iterable[Card]) -> tuple[Card, ...]:
    """``multiset`` listed in the canonical order of ``deck`` (for piles in no known order)."""
    counts = Counter(multiset)
    out: list[Card] = []
    for c in deck:
        if counts[c] > 0:
            counts[c] -= 1
            out.append(c)
    return tuple(out)


def _replace_hand(
    hands: tuple[tuple[Card, ...], ...], seat: int, hand: tuple[Card, ...]
) -> tuple[tuple[Card, ...], ...]:
    return (*hands[:seat], hand, *hands[seat + 1 :])


def _closed(exposed: tuple[int, ...], seat: int) -> tuple[int, ...]:
    """The open UNO windows less ``seat``'s (it called, was caught, or holds more than one card)."""
    return tuple(s for s in exposed if s != seat)


def _kept(exposed: tuple[int, ...], seat: int) -> tuple[int, ...]:
    """The open UNO windows after a turn action of ``seat`` (``uno.catch``): it closes every window but
    ``seat``'s own, which only another player's turn action closes."""
    return (seat,) if seat in exposed else ()


def _take_from_pile(state: State, taken: tuple[Card, ...]) -> tuple[Card, ...]:
    if state.pile_ordered:
        return state.pile[len(taken) :]
    return without(state.pile, taken)


def _to_hand(state: State, seat: int, taken: tuple[Card, ...], **changes: Any) -> State:
    """``state`` once ``seat`` took ``taken`` from the pile, with ``changes`` besides."""
    if taken and seat in state.exposed and "exposed" not in changes:
        changes["exposed"] = _closed(state.exposed, seat)  # more than one card again: nothing to catch
    hands = _replace_hand(state.hands, seat, state.hands[seat] + taken)
    return _with(state, hands=hands, pile=_take_from_pile(state, taken), **changes)


def _dealer_drawn(state: State, event: DealerDrawn) -> State:
    return _with(state, dealer=event.dealer)


def _round_started(state: State, event: RoundStarted) -> State:
    n = len(state.players)
    if event.deck is not None:
        hands, pile = deal(event.deck, n, event.dealer)
        ordered = True
    else:
        assert event.hands is not None
        hands = event.hands
        pile = canonical(state.deck, without(state.deck, [c for h in hands for c in h]))
        ordered = False
    return _with(
        state,
        round=event.round,
        dealer=event.dealer,
        hands=hands,
        pile=pile,
        pile_ordered=ordered,
        **_ROUND_RESET,
    )


def _card_flipped(state: State, event: CardFlipped) -> State:
    return _with(
        state,
        pile=_take_from_pile(state, (event.card,)),
        discard=(*state.discard, event.card),
        colour=event.card.colour,
        top_by=None,
        jumpable=True,
    )


def _flip_returned(state: State, event: FlipReturned) -> State:
    return _with(state, pile=event.pile, discard=state.discard[:-1], returns=state.returns + 1)


def _pile_reshuffled(state: State, event: PileReshuffled) -> State:
    return _with(
        state,
        pile=event.pile,
        pile_ordered=event.ordered,
        discard=state.discard[-1:],
        reshuffles=state.reshuffles + 1,
    )


def _card_played(state: State, event: CardPlayed) -> State:
    # Hot (one per play): written against the field positions directly.
    seat = event.player
    card = event.card
    hand = state.hands[seat]
    if event.discarded:
        new_hand = without(hand, (card, *event.discarded))
    else:
        i = hand.index(card)
        new_hand = hand[:i] + hand[i + 1 :]
    values = list(state)
    values[_HANDS] = _replace_hand(state.hands, seat, new_hand)
    values[_DISCARD] = state.discard + event.discarded + (card,)
    values[_COLOUR] = event.colour if card.is_wild else card.colour
    # A turn action: it closes every other window (``uno.catch``). The player's own opens when the play
    # leaves one card once its own effects are done (``uno.call``): for a trade, the hand traded for; for
    # a rotation, the hand passed on to the player.
    options = state.options
    left = len(new_hand)
    if left and event.target is not None and trades_hands(card, options):
        left = len(state.hands[event.target])
    elif left and rotates_hands(card, options):
        left = len(state.hands[(seat - state.direction) % len(state.hands)])
    values[_EXPOSED] = (seat,) if left == 1 and not event.uno else ()
    values[_DRAWN] = None
    values[_WD4] = Wd4Play(seat, hand, state.colour, state.discard[-1]) if card.face is _W4 else None
    # A W+4 always waits for its answer; another draw card waits only where something may stack on it.
    penalty = PENALTIES.get(card.face, 0)
    if penalty and (card.face is _W4 or stackable(card.face, options.stacking)):
        values[_PENDING] = state.pending + penalty
        values[_STACKERS] = (*state.stackers, seat) if state.pending else (seat,)
    elif state.pending:
        values[_PENDING], values[_STACKERS] = 0, ()  # a table that played on, ignoring the penalty
    values[_TOP_BY] = seat
    values[_JUMPABLE] = True
    if seat != state.turn_owner:  # a play out of the turn's order (a stack, a jump-in) takes the turn
        values[_PREVIOUS] = state.turn_owner
        values[_OWNER] = seat
    return tuple.__new__(State, values)


def _card_drawn(state: State, event: CardDrawn) -> State:
    # Hot (most turns without a play are a draw): the fields by position, as in _card_played.
    seat, drawn = event.player, event.card
    values = list(state)
    values[_HANDS] = _replace_hand(state.hands, seat, state.hands[seat] + (drawn,))
    values[_PILE] = state.pile[1:] if state.pile_ordered else without(state.pile, (drawn,))
    values[_DRAWN] = drawn
    # A turn action of the drawer, who holds more than one card after it: no window stays open.
    values[_EXPOSED] = ()
    values[_JUMPABLE] = False
    # A draw while a penalty waits breaks house.stacking; a record replayed as the table did drops it.
    values[_PENDING], values[_STACKERS] = 0, ()
    return tuple.__new__(State, values)


def _cards_taken(state: State, event: CardsTaken) -> State:
    return _to_hand(state, event.player, event.cards)


def _launcher_pressed(state: State, event: LauncherPressed) -> State:
    if event.cause is Rule.ATTACK_LAUNCHER:  # a turn action; an empty press leaves the presser's window
        kept = () if event.cards else _kept(state.exposed, event.player)
        return _to_hand(
            state,
            event.player,
            event.cards,
            presses=state.presses + 1,
            exposed=kept,
            jumpable=False,
            pending=0,
            stackers=(),
        )
    return _to_hand(state, event.player, event.cards, presses=state.presses + 1)


def _direction_reversed(state: State, event: DirectionReversed) -> State:
    return _with(state, direction=-state.direction)


def _colour_chosen(state: State, event: ColourChosen) -> State:
    return _with(state, colour=event.colour)


def _hands_traded(state: State, event: HandsTraded) -> State:
    a, b = event.player, event.other
    hands = list(state.hands)
    hands[a], hands[b] = hands[b], hands[a]
    # The player's window was settled by the play (it counted the hand traded for); the other player,
    # left with one card by someone else's play, must call too, from this play on (``uno.call``).
    exposed = _closed(state.exposed, b) + ((b,) if len(hands[b]) == 1 else ())
    return _with(state, hands=tuple(hands), exposed=exposed)


def _hands_rotated(state: State, event: HandsRotated) -> State:
    n = len(state.hands)
    hands = tuple(state.hands[(seat - state.direction) % n] for seat in range(n))
    # The player's window was settled by the play (it counted the hand passed on to them); everyone else
    # left with one card by the rotation must call, from this play on (``uno.call``).
    player = event.player
    kept = (player,) if player in state.exposed else ()
    exposed = kept + tuple(
        seat for seat in (state.next_seat(player, k) for k in range(1, n)) if len(hands[seat]) == 1
    )
    return _with(state, hands=hands, exposed=exposed)


def _jumped_in(state: State, event: JumpedIn) -> State:
    return _with(state, turn=event.player, awaiting=Awaiting.PLAY, pointer=None, drawn=None)


def _uno_called(state: State, event: UnoCalled) -> State:
    if event.player not in state.exposed:
        return state
    return _with(state, exposed=_closed(state.exposed, event.player))


def _uno_caught(state: State, event: UnoCaught) -> State:
    return _with(state, exposed=_closed(state.exposed, event.target))


def _turn_action_closing(state: State, event: Passed | Wd4Accepted | Wd4Challenged | StackAccepted) -> State:
    return _with(
        state,
        exposed=_kept(state.exposed, event.player),
        drawn=None,
        wd4=None,
        pending=0,
        stackers=(),
        jumpable=False,
    )


def on_prompted(state: State, event: Prompted) -> State:
    """Apply a :class:`Prompted` event (the handler :func:`evolve` uses for it)."""
    # The hottest handler (one per command): written against the field positions directly.
    values = list(state)
    values[_TURN] = event.player
    values[_AWAITING] = event.awaiting
    values[_POINTER] = event.pointer
    if event.new_turn and event.player != state.turn_owner:
        values[_PREVIOUS] = state.turn_owner
        values[_OWNER] = event.player
    if event.awaiting is not _DRAWN_CARD:
        values[_DRAWN] = None
    return tuple.__new__(State, values)


def _round_ended(state: State, event: RoundEnded) -> State:
    scores = list(state.scores)
    scores[event.winner] += event.points
    result = RoundResult(event.round, event.winner, event.points, event.hands)
    return _with(
        state,
        scores=tuple(scores),
        results=(*state.results, result),
        awaiting=Awaiting.ROUND_START,
        exposed=(),
        wd4=None,
        pending=0,
        stackers=(),
        jumpable=False,
        drawn=None,
        pointer=None,
    )


def _game_ended(state: State, event: GameEnded) -> State:
    return _with(state, awaiting=Awaiting.GAME_OVER, winner=event.winner)


def _game_created(state: State, event: GameCreated) -> State:
    return new_state(event)


#: The handler of each event type (``evolve`` dispatches through it).
HANDLERS: Final[dict[type, Callable[[State, Any], State]]] = {
    GameCreated: _game_created,
    DealerDrawn: _dealer_drawn,
    RoundStarted: _round_started,
    CardFlipped: _card_flipped,
    FlipReturned: _flip_returned,
    PileReshuffled: _pile_reshuffled,
    CardPlayed: _card_played,
    CardDrawn: _card_drawn,
    Passed: _turn_action_closing,
    CardsTaken: _cards_taken,
    LauncherPressed: _launcher_pressed,
    DirectionReversed: _direction_reversed,
    ColourChosen: _colour_chosen,
    HandsTraded: _hands_traded,
    HandsRotated: _hands_rotated,
    JumpedIn: _jumped_in,
    StackAccepted: _turn_action_closing,
    UnoCalled: _uno_called,
    UnoCaught: _uno_caught,
    Wd4Accepted: _turn_action_closing,
    Wd4Challenged: _turn_action_closing,
    Prompted: on_prompted,
    RoundEnded: _round_ended,
    GameEnded: _game_ended,
}


def evolve(state: State, event: Event) -> State:
    """The state after ``event``. Mechanical: the event is trusted, nothing is validated."""
    return HANDLERS[type(event)](state, event)


def fold(events: Iterable[Event]) -> State:
    """The state of a game from its whole log; the first event must be :class:`GameCreated`."""
    it = iter(events)
    first = next(it, None)
    if not isinstance(first, GameCreated):
        raise ValueError("a game's log starts with GameCreated")
    state = new_state(first)
    for event in it:
        state = HANDLERS[type(event)](state, event)
    return state


def conservation_error(state: State) -> str | None:
    """Why the cards in play are not exactly the rule set's deck, or ``None`` when they are."""
    held = Counter(state.pile)
    held.update(state.discard)
    for hand in state.hands:
        held.update(hand)
    if state.round == 0:
        return None
    if held == Counter(state.deck):
        return None
    expected = Counter(state.deck)
    extra = held - expected
    missing = expected - held
    return (
        f"cards not conserved: extra {sorted(c.token for c in extra.elements())}, "
        f"missing {sorted(c.token for c in missing.elements())}"
    )
