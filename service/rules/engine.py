"""The table at work while one command is resolved: cards leave the pile, events are emitted.

:class:`Act` collects the events of one command and keeps the state they lead to. Every card that leaves
the draw pile or the launcher passes through here, which is where fair dealing (``fair.commit``) and
reshuffling (``draw.reshuffle``, :func:`check_reshuffle`) are enforced, from the seed, a known deck order,
or the :class:`~service.rules.commands.Supply` a table reported. :meth:`Act.prompt` and
:meth:`Act.end_round` are the rest. docs/DESIGN.md ("The rules engine").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Final

from service.rules import fair
from service.rules.cards import Card, Colour, hand_points
from service.rules.commands import Play, Reshuffle, Supply
from service.rules.events import (
    Awaiting,
    CardDrawn,
    CardFlipped,
    CardPlayed,
    CardsTaken,
    Event,
    FlipReturned,
    GameEnded,
    LauncherPressed,
    PileReshuffled,
    Prompted,
    RoundEnded,
)
from service.rules.state import HANDLERS, State, canonical, on_prompted
from service.rules.violations import Impossible, Rule, Violation


class Played:
    """A card being played, as the effect functions of the rule-set modules see it.

    A plain class, not a named tuple: one is made per play, and compiled (setup.py) it is a native
    class, made and read without going through Python; named tuples stay Python classes.
    """

    __slots__ = ("chained", "cmd", "going_out", "origin")

    def __init__(self, cmd: Play, origin: int, going_out: bool, chained: bool) -> None:
        self.cmd = cmd
        self.origin = origin  # the seat "next player" counts from (the player, or before a follow-up pointer)
        self.going_out = going_out  # the play emptied the player's hand (``round.end``)
        self.chained = chained  # an UNO Attack follow-up card, which earns no further follow-up


# The enum members a command's hot path tests, as module constants: Python 3.11 reads ``Awaiting.PLAY``
# through ``EnumType.__getattr__`` (some 70 ns a time; a command tests a dozen), a constant costs a name.
_PLAY: Final = Awaiting.PLAY

# The events made on nearly every command, shared, by their fields. Events are immutable, so equal ones
# can be one object, and finding one costs a fraction of making it (a frozen dataclass is built field by
# field, in Python even in the compiled engine: events stay interpreted, see setup.py). Each table is
# bounded by the seats, the cards and the choices: a few thousand entries per rule set at most.
_PROMPTS: Final[dict[tuple[int, Awaiting, int | None, bool], Prompted]] = {}
_PLAYS: Final[dict[tuple[int, Card, Colour | None, bool, int | None], CardPlayed]] = {}
_DRAWS: Final[dict[tuple[int, Card], CardDrawn]] = {}


def card_played(
    player: int, card: Card, colour: Colour | None, uno: bool, target: int | None, discarded: tuple[Card, ...]
) -> CardPlayed:
    """The :class:`CardPlayed` event of these fields (shared, but for a Discard All's extra discards)."""
    if discarded:
        return CardPlayed(player, card, colour, uno, target, discarded)
    key = (player, card, colour, uno, target)
    event = _PLAYS.get(key)
    if event is None:
        event = _PLAYS[key] = CardPlayed(player, card, colour, uno, target)
    return event


#: What a face does once its :class:`~service.rules.events.CardPlayed` is applied: it imposes the card's
#: effects and says whose turn comes next. An effect never validates — the play was judged already.
Effect = Callable[["Act", Played], None]


class Act:
    """One command being resolved: the running state, the events so far, the table's supply."""

    __slots__ = (
        "_draw_index",
        "_flip_index",
        "_press_index",
        "_reshuffle_index",
        "barred",
        "events",
        "state",
        "supply",
    )

    def __init__(self, state: State, supply: Supply) -> None:
        self.state = state
        self.events: list[Event] = []
        self.supply = supply
        self._draw_index: dict[int, int] | None = None  # made when a table-reported card is taken
        self._press_index = 0
        self._flip_index = 0
        self._reshuffle_index = 0
        #: A seat that may not be handed a new turn by this command: an UNO Attack follow-up's player
        #: (``attack.follow-up``: the same player never takes the turn again through a follow-up).
        self.barred: int | None = None

    def emit(self, event: Event) -> None:
        """Record ``event`` and apply it."""
        self.events.append(event)
        self.state = HANDLERS[type(event)](self.state, event)

    def name(self, seat: int) -> str:
        """The name of the player in ``seat``, for messages."""
        return self.state.players[seat]

    # --- whose turn ---------------------------------------------------------------------------------

    def prompt(
        self, seat: int, awaiting: Awaiting = Awaiting.PLAY, pointer: int | None = None, new_turn: bool = True
    ) -> None:
        """Wait for ``seat`` to act as ``awaiting`` says (the seat after it, if ``seat`` is barred)."""
        if seat == self.barred and awaiting is _PLAY:
            seat = self.state.next_seat(seat)
        key = (seat, awaiting, pointer, new_turn)
        event = _PROMPTS.get(key)
        if event is None:
            event = _PROMPTS[key] = Prompted(seat, awaiting, pointer, new_turn)
        self.events.append(event)  # emit(), inlined: every command ends with a prompt
        self.state = on_prompted(self.state, event)

    def others(self, played: Played) -> list[int]:
        """Every seat but the player's, in turn order starting with the next player in the current
        direction — the pointed player, for an UNO Attack follow-up — as every "all others" effect
        takes them (All Hit, Lightning, Victory Lap, a customizable)."""
        s = self.state
        first = s.next_seat(played.origin)
        return [seat for seat in (s.next_seat(first, k) for k in range(s.size)) if seat != played.cmd.player]

    # --- the draw pile ------------------------------------------------------------------------------

    def refill(self) -> bool:
        """Make sure the draw pile has a card (``draw.reshuffle``); false when nothing can be drawn."""
        s = self.state
        if s.pile:
            return True
        rest = s.discard[:-1]
        if not rest:
            return False
        if s.seed is not None:
            label = f"round:{s.round}:reshuffle:{s.reshuffles}"
            self.emit(PileReshuffled(fair.shuffled(s.seed, label, rest), True))
        elif self._reshuffle_index < len(self.supply.reshuffles):
            # The table said how it reshuffled (a record's ``reshuffle`` on the action's line).
            self.emit(PileReshuffled(self._reported_pile(rest, "the discard pile except its top card"), True))
        else:
            # A table game reshuffled without telling us the order: from here on the table reports
            # the cards it takes (Supply), and they are checked against what the pile holds.
            self.emit(PileReshuffled(canonical(s.deck, rest), False))
        return True

    def _reported_pile(self, cards: tuple[Card, ...], what: str) -> tuple[Card, ...]:
        """The next new pile the table reported (``Supply.reshuffles``); it must hold exactly ``cards``."""
        pile = self.supply.reshuffles[self._reshuffle_index]
        self._reshuffle_index += 1
        if Counter(pile) != Counter(cards):
            expected = " ".join(c.token for c in canonical(self.state.deck, cards))
            raise Impossible(Rule.DRAW_RESHUFFLE, f"the new pile must be {what}: {expected}")
        return pile

    def _reported(self, listed: tuple[Card, ...], what: str) -> tuple[Card, ...]:
        missing = Counter(listed) - Counter(self.state.pile)
        if missing:
            tokens = " ".join(c.token for c in missing.elements())
            raise Impossible(Rule.DECK_COMPOSITION, f"{tokens} cannot come from the draw pile ({what})")
        return listed

    def _next_cards(self, seat: int, count: int) -> tuple[Card, ...]:
        s = self.state
        if s.pile_ordered and not self.supply.draws:
            return s.pile[:count]
        if self._draw_index is None:
            self._draw_index = {}
        start = self._draw_index.get(seat, 0)
        if s.pile_ordered:
            # Listed cards taken from a known pile are checked against it afterwards; count them all the
            # same, so that draws after a reshuffle of unknown order read the right ones.
            self._draw_index[seat] = start + count
            return s.pile[:count]
        listed = self.supply.draws.get(seat, ())[start : start + count]
        if len(listed) < count:
            raise Impossible(
                Rule.FAIR_COMMIT,
                f"the draw pile's order is unknown and the cards {self.name(seat)} took are not listed",
            )
        self._draw_index[seat] = start + count
        return self._reported(listed, f"taken by {self.name(seat)}")

    def can_draw(self, seat: int) -> bool:
        """Whether ``seat`` can take one more card by choice in this command: the pile (or a reshuffle)
        holds one, and where the pile's order is unknown the table listed one more card it took."""
        s = self.state
        if s.pile:
            ordered = s.pile_ordered
        elif not s.discard[:-1]:
            return False
        else:  # the next draw reshuffles first (see refill): is the new pile's order known?
            ordered = s.seed is not None or self._reshuffle_index < len(self.supply.reshuffles)
        return ordered or self.listed_left(seat) > 0

    def listed_left(self, seat: int) -> int:
        """How many of the cards the table listed for ``seat`` this command has not taken yet."""
        start = self._draw_index.get(seat, 0) if self._draw_index is not None else 0
        return max(0, len(self.supply.draws.get(seat, ())) - start)

    def take(self, seat: int, count: int, cause: Rule) -> None:
        """``seat`` takes ``count`` cards from the pile because ``cause`` says so (as many as there are)."""
        while count > 0 and (self.state.pile or self.refill()):
            k = min(count, len(self.state.pile))
            self.emit(CardsTaken(seat, self._next_cards(seat, k), cause))
            count -= k

    def draw_one(self, seat: int) -> Card | None:
        """``seat`` draws one card by choice (``draw.one``); ``None`` when the pile and discards are out."""
        if not self.state.pile and not self.refill():
            return None
        drawn = self._next_cards(seat, 1)[0]
        key = (seat, drawn)
        event = _DRAWS.get(key)
        if event is None:
            event = _DRAWS[key] = CardDrawn(seat, drawn)
        self.emit(event)
        return drawn

    def flip(self) -> Card | None:
        """Turn the top card of the draw pile onto the discard pile; ``None`` if there is none."""
        if not self.refill():
            return None
        s = self.state
        if s.pile_ordered:
            card = s.pile[0]
        else:
            flips = self.supply.flips
            if self._flip_index >= len(flips):
                raise Impossible(
                    Rule.FAIR_COMMIT, "the draw pile's order is unknown and the flipped card is not listed"
                )
            card = self._reported((flips[self._flip_index],), "flipped")[0]
            self._flip_index += 1
        self.emit(CardFlipped(card))
        return card

    def return_flip(self, card: Card, anywhere: bool) -> None:
        """Put the flipped first card back: reshuffled into the pile, or (``anywhere``) at a random place.

        A table game has no seed to draw a place from: its card goes where the table says the pile then
        is (a ``Supply`` reshuffle), else to the bottom of the pile.
        """
        s = self.state
        if s.seed is not None:
            label = f"round:{s.round}:return:{s.returns}"
            if anywhere:
                at = fair.position(s.seed, label, len(s.pile))
                pile = (*s.pile[:at], card, *s.pile[at:])
            else:
                pile = fair.shuffled(s.seed, label, (*s.pile, card))
        elif s.pile_ordered and self._reshuffle_index < len(self.supply.reshuffles):
            pile = self._reported_pile((*s.pile, card), "the draw pile and the returned card")
        elif s.pile_ordered:
            pile = (*s.pile, card)
        else:
            pile = canonical(s.deck, (*s.pile, card))
        self.emit(FlipReturned(card, pile))

    # --- the UNO Attack launcher ----------------------------------------------------------------------

    def presses(self, seat: int, count: int, cause: Rule) -> None:
        """``seat`` presses the launcher ``count`` times because ``cause`` says so: UNO Attack's
        :meth:`take` (a rule that makes a player take cards makes them press instead)."""
        for _ in range(count):
            self.press(seat, cause)

    def press(self, seat: int, cause: Rule) -> tuple[Card, ...]:
        """``seat`` presses the launcher once (``attack.launcher``); returns the cards it fired."""
        s = self.state
        if s.seed is not None and s.pile_ordered:
            label = f"round:{s.round}:press:{s.presses}"
            count = fair.launcher_count(s.seed, label, s.options.launcher_weights)
            listed: tuple[Card, ...] | None = None
        else:
            presses = self.supply.presses
            if self._press_index >= len(presses):
                raise Impossible(Rule.FAIR_COMMIT, f"the launcher press by {self.name(seat)} has no outcome")
            outcome = presses[self._press_index]
            self._press_index += 1
            if isinstance(outcome, int):
                count, listed = outcome, None
            else:
                count, listed = len(outcome), outcome
        self.refill()  # a press that finds the launcher empty reshuffles first, whatever it fires
        s = self.state
        if listed is None:
            if not s.pile_ordered and count > 0:
                raise Impossible(
                    Rule.FAIR_COMMIT,
                    f"the launcher's order is unknown and the cards it fired are not listed"
                    f" (press by {self.name(seat)})",
                )
            fired = s.pile[:count]
        elif s.pile_ordered:
            if listed != s.pile[: len(listed)]:
                raise Impossible(
                    Rule.FAIR_COMMIT,
                    f"the launcher fired {' '.join(c.token for c in listed)} but holds "
                    f"{' '.join(c.token for c in s.pile[: len(listed)])} on top",
                )
            fired = listed
        else:
            fired = self._reported(listed, f"fired at {self.name(seat)}")
        self.emit(LauncherPressed(seat, fired, cause))
        return fired

    # --- the end of a round -------------------------------------------------------------------------

    def end_round(self, winner: int) -> None:
        """``winner`` went out: score the round (``score.round``) and maybe the game (``score.match``)."""
        s = self.state
        points = sum(hand_points(h) for seat, h in enumerate(s.hands) if seat != winner)
        self.emit(RoundEnded(s.round, winner, points, s.hands))
        s = self.state
        if s.options.single_round or s.scores[winner] >= s.options.target_score:
            self.emit(GameEnded(winner, s.scores, s.seed))


# --- a reshuffle the table reports ---------------------------------------------------------------------


def check_reshuffle(state: State, command: Reshuffle) -> Violation | None:
    """``draw.reshuffle`` as a table reports it (a game without a seed): only once the pile is empty,
    and the new pile must hold exactly the cards a reshuffle gathers."""
    if state.seed is not None:
        return Violation(Rule.DRAW_RESHUFFLE, "a seeded game reshuffles by itself")
    if state.pile:
        held = f"{len(state.pile)} card{'s' if len(state.pile) != 1 else ''}"
        return Violation(
            Rule.DRAW_RESHUFFLE, f"the draw pile still holds {held}: reshuffle only when it is empty"
        )
    return _reshuffle_problem(state, command.pile)


def resolve_reshuffle(act: Act, command: Reshuffle) -> None:
    """The reported pile becomes the draw pile, in the order given."""
    problem = _reshuffle_problem(act.state, command.pile)
    if problem is not None:
        raise Impossible(problem.rule, problem.message)
    act.emit(PileReshuffled(command.pile, True))


def _reshuffle_problem(state: State, pile: tuple[Card, ...]) -> Violation | None:
    """Why ``pile`` cannot be the new draw pile (it must be the draw pile's cards and the discard pile
    except its top card), or ``None``."""
    if Counter(pile) != Counter(state.pile + state.discard[:-1]):
        return Violation(
            Rule.DRAW_RESHUFFLE,
            "the new pile must be the draw pile's cards and the discard pile except its top card",
        )
    return None
