"""The bots' one policy: what a seat does, decided from what that seat can see.

A :class:`SeatView` is one seat's view of the table; :class:`Policy` turns it into the command the seat
proposes, drawing its choices from its own :class:`random.Random` (never the game's seed, so it cannot learn
hidden cards). The in-process bots (:mod:`service.play.bots`, over the engine's state) and the gRPC bots
(``service.client.bots``, over the server's views) both decide here: a house rule's effect on the bots is
written once, in the method of the decision it changes.
"""

from __future__ import annotations

import enum
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from service.rules.cards import Card, Colour, Face
from service.rules.commands import Accept, CallUno, Catch, Challenge, Choose, Command, Pass, Play
from service.rules.events import Awaiting
from service.rules.legality import (
    cards_left,
    identical,
    names_target,
    playable_cards,
    stacks_on,
    wd4_matching,
)
from service.rules.options import Options, Variant
from service.rules.variants import VARIANT_RULES

COLOURS = tuple(Colour)

# Module constants: Python 3.11 reads an enum member through a descriptor, and the bots decide every move.
_PLAY, _DRAWN, _FOLLOW_UP = Awaiting.PLAY, Awaiting.DRAWN, Awaiting.FOLLOW_UP
_WD4_RESPONSE, _STACK = Awaiting.WD4_RESPONSE, Awaiting.STACK
_COLOUR, _TARGET = Awaiting.COLOUR, Awaiting.TARGET
_SEVEN, _ITEM_BOX = Face.SEVEN, Face.WILD_ITEM_BOX


@dataclass(frozen=True, slots=True)
class Habits:
    """How a bot behaves at the table, as probabilities."""

    forget_uno: float = 0.1  # plays down to one card without calling UNO
    late_call: float = 0.3  # having forgotten, calls UNO before anyone catches it
    catch: float = 0.5  # catches an exposed player when it notices
    challenge: float = 0.3  # challenges a Wild Draw Four
    play_drawn: float = 0.8  # plays a playable drawn card
    follow_up: float = 0.7  # takes an UNO Attack follow-up chance
    stack: float = 0.8  # stacks on a pending draw penalty when it can (house.stacking)
    jump_in: float = 0.5  # jumps in with an identical card when it notices (house.jump-in)


class Style(enum.Enum):
    """How a bot picks among the moves it may make."""

    #: Uniformly among the legal moves, drawing (or pressing) included.
    RANDOM = "random"
    #: Like a careful person: keeps wilds for later, attacks a player close to going out, names the colour
    #: it holds most of and the smallest hand, never bluffs a Wild Draw Four, always passes a penalty on,
    #: challenges when the offender probably had the colour, and always catches a missed UNO.
    SENSIBLE = "sensible"
    #: At random, but it never draws by choice under draw-to-match, always passes a penalty on, and swaps a
    #: 7 with the smallest hand; its table (not each seat) decides who catches and who looks for a jump-in.
    EAGER = "eager"


#: The habits each style has unless it is given others.
DEFAULT_HABITS: dict[Style, Habits] = {
    Style.RANDOM: Habits(),
    Style.SENSIBLE: Habits(forget_uno=0.02, late_call=0.5, catch=1.0),
    Style.EAGER: Habits(follow_up=0.5),
}


class SeatView(NamedTuple):
    """What one seat knows when it decides: the table as everyone sees it and the rules in force, then the
    seat's own hand. (A tuple rather than a frozen dataclass: the bots make one for every decision, and it
    is cheaper; the public fields come first, in an order :func:`service.play.bots.seat_view` copies.)"""

    #: What the table waits for (from this seat when it is on turn; out of turn, from another).
    awaiting: Awaiting
    colour: Colour | None  # the colour in force
    direction: int
    variant: Variant
    options: Options  # the house rules among them
    drawn: Card | None  # the card this seat drew and may still play
    top_by: int | None  # who played the top card (None for a flipped one)
    jumpable: bool  # a jump-in on the top card may be made now (house.jump-in)
    pending: int  # the draw penalty waiting for its answer
    exposed: tuple[int, ...]  # the seats whose missed UNO may be caught now
    seat: int
    hand: tuple[Card, ...]
    top: Card
    hand_sizes: tuple[int, ...]  # every seat's card count, this seat's too
    #: How many cards the player of the pending Wild Draw Four held, when the seat may know it.
    wd4_hand: int | None = None

    def next_seat(self, steps: int = 1) -> int:
        """The seat ``steps`` places after this one in the direction of play."""
        return (self.seat + self.direction * steps) % len(self.hand_sizes)

    def others(self) -> list[int]:
        """Every other seat, in seat order."""
        return [s for s in range(len(self.hand_sizes)) if s != self.seat]


class Policy:
    """Decides every move of a seat: the turn, the answers the rules ask for, and the table talk.

    Pure but for its random generator: the same generator state and the same views give the same commands.
    It only proposes; the decider judges its commands like anyone else's.
    """

    def __init__(self, rng: random.Random, habits: Habits | None = None, style: Style = Style.RANDOM) -> None:
        self.rng = rng
        self.style = style
        self.habits = habits or DEFAULT_HABITS[style]
        # Booleans rather than enum comparisons: the style is asked on most decisions.
        self._random, self._eager = style is Style.RANDOM, style is Style.EAGER
        self._sensible = style is Style.SENSIBLE

    # --- decisions the game waits for ------------------------------------------------------------------

    def act(self, view: SeatView) -> Command:
        """The command for the decision the game waits for from this seat."""
        seat, awaiting = view.seat, view.awaiting
        if awaiting is _PLAY:
            return self.turn(view)
        if awaiting is _DRAWN:
            return self.after_draw(view)
        if awaiting is _FOLLOW_UP:
            options = self.playable(view)
            if options and self.rng.random() < self.habits.follow_up:
                return self.play(view, self.pick_card(view, options))
            return Pass(seat)
        if awaiting is _WD4_RESPONSE or awaiting is _STACK:
            return self.answer_penalty(view)
        if awaiting is _COLOUR:
            return Choose(seat, colour=self.pick_colour(view))
        if awaiting is _TARGET:
            return Choose(seat, target=self.pick_target(view))
        raise ValueError(f"a bot cannot act while the game waits for {awaiting.value}")

    def turn(self, view: SeatView) -> Command:
        """A normal turn: one of the playable cards, or taking cards (the launcher in UNO Attack)."""
        options = playable_cards(view.hand, view.top, view.colour)
        if self._random:  # the simulations' bot, first
            pick = int(self.rng.random() * (len(options) + 1))  # uniform over the cards and the draw
        elif self._eager:
            # Under draw_to_match one draw takes cards until a playable one: nobody does that by choice.
            by_choice = not (options and view.options.draw_to_match)
            pick = self.rng.randrange(len(options) + by_choice)
        else:
            legal = [c for c in options if c.face is not Face.WILD_DRAW_FOUR or self.wd4_legal(view)]
            return self.play(view, self.pick_card(view, legal)) if legal else self.take(view)
        return self.play(view, options[pick]) if pick < len(options) else self.take(view)

    def take(self, view: SeatView) -> Command:
        """Taking cards the rule set's way: a draw, or a press of UNO Attack's launcher."""
        return VARIANT_RULES[view.variant].taking.action(view.seat)

    def after_draw(self, view: SeatView) -> Command:
        """Play the playable card just drawn (always under ``force_play``), or pass."""
        drawn, forced = view.drawn, view.options.force_play
        if drawn is None:
            return Pass(view.seat)
        bluff = drawn.face is Face.WILD_DRAW_FOUR and not self.wd4_legal(view)
        if self._sensible and bluff and not forced:
            return Pass(view.seat)
        if forced or self.rng.random() < self.habits.play_drawn:
            return self.play(view, drawn)
        return Pass(view.seat)

    def answer_penalty(self, view: SeatView) -> Command:
        """A pending draw penalty or Wild Draw Four: stack on it, or accept it, or challenge the Wild Draw
        Four (never one that may be played at any time)."""
        stack = self.stack(view)
        if stack is not None:
            return stack
        if view.awaiting is _STACK or view.options.wd4_any_time:
            return Accept(view.seat)
        return Challenge(view.seat) if self.wants_challenge(view) else Accept(view.seat)

    def stack(self, view: SeatView) -> Play | None:
        """A card to stack on the pending draw penalty (``house.stacking``), or ``None`` to answer it."""
        cards = [c for c in view.hand if stacks_on(c, view.top, view.options.stacking)]
        if self._sensible:
            cards = [c for c in cards if c.face is not Face.WILD_DRAW_FOUR or self.wd4_legal(view)]
        elif self._random and cards and self.rng.random() >= self.habits.stack:
            return None
        return self.play(view, self.pick_card(view, cards)) if cards else None

    def wants_challenge(self, view: SeatView) -> bool:
        """Whether to challenge the pending Wild Draw Four."""
        if self._sensible:
            # The more cards the offender held, the likelier one was of the active colour.
            assert view.wd4_hand is not None
            return view.wd4_hand >= 6 and self.rng.random() < 0.6
        return self.rng.random() < self.habits.challenge

    # --- one play, in full -------------------------------------------------------------------------------

    def play(self, view: SeatView, card: Card, *, jump_in: bool = False) -> Play:
        """The full play of ``card``: the colour and target it names, and the UNO call as this bot makes it
        once the card's own effects on the hand (a trade, a seven-o swap, a rotation) are done."""
        colour = self.pick_colour(view) if card.is_wild and card.face is not _ITEM_BOX else None
        hand, options, face = view.hand, view.options, card.face
        if card.number is None:
            names = names_target(face, options.custom_action)
        else:  # a 7 swaps hands under house.seven-o, unless it goes out
            names = face is _SEVEN and options.seven_o and len(hand) > 1
        target = traded = None
        passed = 0
        if names:
            target = self.smallest_hand(view) if face is _SEVEN and self._eager else self.pick_target(view)
            traded = view.hand_sizes[target]
        if options.seven_o:  # the previous seat's count, for a rotation (a 0 under house.seven-o only)
            sizes = view.hand_sizes
            passed = sizes[(view.seat - view.direction) % len(sizes)]
        left = cards_left(hand, card, options, traded, passed)
        uno = left == 1 and self.rng.random() >= self.habits.forget_uno
        if jump_in:
            return Play(view.seat, card, colour, uno, target, jump_in=True)
        return Play(view.seat, card, colour, uno, target)

    def playable(self, view: SeatView) -> list[Card]:
        """The cards in hand that may be played now (``play.match``)."""
        return playable_cards(view.hand, view.top, view.colour)

    def wd4_legal(self, view: SeatView) -> bool:
        """Whether this seat may play a Wild Draw Four without bluffing (``wd4.legal``)."""
        options = view.options
        return options.wd4_any_time or not wd4_matching(view.hand, view.colour, options.wd4_wilds_block)

    def pick_card(self, view: SeatView, options: Sequence[Card]) -> Card:
        """Which of the playable ``options`` to play."""
        if not self._sensible:
            return self.rng.choice(options)
        threatened = view.hand_sizes[view.next_seat()] <= 2

        def score(c: Card) -> tuple[int, int]:
            attacking = c.number is None and c.face not in (Face.WILD, Face.WILD_CUSTOMIZABLE)
            # Attack the next player when they are close to going out; otherwise shed points, saving wilds.
            urgency = 2 if threatened and attacking else 0
            return (urgency - (1 if c.is_wild else 0), c.points)

        return max(options, key=score)

    def pick_colour(self, view: SeatView) -> Colour:
        """The colour to name for a wild."""
        if self._sensible:
            counts = Counter(c.colour for c in view.hand if c.colour is not None)
            if counts:
                return counts.most_common(1)[0][0]
        return self.rng.choice(COLOURS)

    def pick_target(self, view: SeatView) -> int:
        """The opponent to name."""
        if self._sensible:
            return self.smallest_hand(view)
        return self.rng.choice(view.others())

    def smallest_hand(self, view: SeatView) -> int:
        """The opponent holding the fewest cards (the lowest seat of those)."""
        return min(view.others(), key=lambda s: (view.hand_sizes[s], s))

    # --- out of turn ---------------------------------------------------------------------------------------

    def talk(self, view: SeatView) -> Command | None:
        """An UNO call or a catch this seat makes now, if any (the open windows are ``view.exposed``)."""
        for exposed in view.exposed:
            if exposed == view.seat:
                if self.rng.random() < self.habits.late_call:
                    return CallUno(view.seat)
            elif self.rng.random() < self.habits.catch:
                return Catch(view.seat, exposed)
        return None

    def jump_in(self, view: SeatView) -> Play | None:
        """A jump-in this seat makes now, holding a card identical to the top card and noticing it
        (``house.jump-in``; the decider judges whether the moment allows it). An eager table decided to
        look before anyone saw a hand (:meth:`looker`), so an eager seat that holds the twin plays it."""
        top = view.top
        if not view.jumpable or view.seat == view.top_by or not any(identical(c, top) for c in view.hand):
            return None
        if not self._eager and self.rng.random() >= self.habits.jump_in:
            return None
        return self.play(view, top, jump_in=True)

    def catches(self, exposed: Sequence[int], players: int) -> list[Catch]:
        """An eager table's catches: each exposed seat is caught now and then, by another seat at random."""
        made = []
        for seat in exposed:
            if self.rng.random() < self.habits.catch:
                made.append(Catch(self.rng.choice([s for s in range(players) if s != seat]), seat))
        return made

    def looker(self, players: int, turn: int, top_by: int | None) -> int | None:
        """For an eager table while a jump-in is open: the seat that looks at its hand for the top card's
        twin now (neither the one on turn nor the top card's player), or ``None`` when nobody looks."""
        if self.rng.random() >= self.habits.jump_in:
            return None
        seats = [s for s in range(players) if s not in (turn, top_by)]
        return self.rng.choice(seats) if seats else None
