"""Bot players: a random-legal bot and a sensible one.

Both make every kind of decision the rules ask for — play, draw, pass, press, choose a colour or a
target, accept or challenge a Wild Draw Four — and the table talk around it: calling UNO (and forgetting
to, at a set rate), calling it late, and catching others. Where the game's house rules allow it they
stack on a pending draw penalty, jump in with an identical card, name a player to swap with on a 7, play
a drawn card they must, and never challenge a Wild Draw Four that may be played at any time. A bot only
proposes commands; the decider judges them like anyone else's. Bots draw their choices from their own
:class:`random.Random`, never from the game's seed, so they cannot learn hidden cards.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from service.rules.cards import Card, Colour, Face
from service.rules.commands import Accept, CallUno, Catch, Challenge, Choose, Command, Pass, Play
from service.rules.events import Awaiting
from service.rules.legality import (
    cards_left,
    names_target,
    playable_cards,
    stacks_on,
    wd4_matching,
)
from service.rules.rule_sets import RULE_SETS
from service.rules.state import State

COLOURS = tuple(Colour)


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


class RandomBot:
    """Chooses uniformly among the legal moves (playing any playable card, or drawing/pressing)."""

    def __init__(self, rng: random.Random, habits: Habits | None = None) -> None:
        self.rng = rng
        self.habits = habits or Habits()

    # --- decisions on the bot's own turn ----------------------------------------------------------------

    def act(self, state: State) -> Command:
        """The command for the decision the game waits for from this bot (``state.turn``)."""
        seat = state.turn
        awaiting = state.awaiting
        if awaiting is Awaiting.PLAY:
            return self.turn(state, seat)
        if awaiting is Awaiting.DRAWN:
            assert state.drawn is not None
            if state.options.force_play or self.rng.random() < self.habits.play_drawn:
                return self.play(state, seat, state.drawn)
            return Pass(seat)
        if awaiting is Awaiting.FOLLOW_UP:
            options = self.playable(state, seat)
            if options and self.rng.random() < self.habits.follow_up:
                return self.play(state, seat, self.pick_card(state, seat, options))
            return Pass(seat)
        if awaiting is Awaiting.WD4_RESPONSE or awaiting is Awaiting.STACK:
            stack = self.stack(state, seat)
            if stack is not None:
                return stack
            if awaiting is Awaiting.STACK or state.options.wd4_any_time:
                return Accept(seat)
            return Challenge(seat) if self.wants_challenge(state, seat) else Accept(seat)
        if awaiting is Awaiting.COLOUR:
            return Choose(seat, colour=self.pick_colour(state, seat))
        if awaiting is Awaiting.TARGET:
            return Choose(seat, target=self.pick_target(state, seat))
        raise ValueError(f"a bot cannot act while the game waits for {awaiting.value}")

    def turn(self, state: State, seat: int) -> Command:
        """A normal turn: one of the playable cards, or the draw (the launcher in UNO Attack)."""
        options = self.playable(state, seat)
        pick = int(self.rng.random() * (len(options) + 1))  # uniform over the cards and the draw
        if pick < len(options):
            return self.play(state, seat, options[pick])
        return RULE_SETS[state.variant].taking.action(seat)

    def stack(self, state: State, seat: int) -> Play | None:
        """A card to stack on the pending draw penalty (``house.stacking``), or ``None`` to answer it."""
        top, mode = state.discard[-1], state.options.stacking
        cards = [c for c in state.hands[seat] if stacks_on(c, top, mode)]
        if not cards or self.rng.random() >= self.habits.stack:
            return None
        return self.play(state, seat, self.pick_card(state, seat, cards))

    def jump_in(self, state: State, seat: int) -> Play | None:
        """A jump-in this bot makes now out of turn, if it holds a card identical to the top card and
        notices (``house.jump-in``; the decider judges whether the moment allows it)."""
        top = state.discard[-1]
        if seat == state.top_by or top.is_wild or top not in state.hands[seat]:
            return None
        if self.rng.random() >= self.habits.jump_in:
            return None
        play = self.play(state, seat, top)
        return Play(play.player, play.card, play.colour, play.uno, play.target, jump_in=True)

    def playable(self, state: State, seat: int) -> list[Card]:
        """The cards in hand that may be played now (``play.match``)."""
        return playable_cards(state.hands[seat], state.discard[-1], state.colour)

    def pick_card(self, state: State, seat: int, options: Sequence[Card]) -> Card:
        """Which playable card to play."""
        return self.rng.choice(options)

    def play(self, state: State, seat: int, card: Card) -> Play:
        """The full play command for ``card``: colour, target and UNO call as this bot would."""
        colour = (
            self.pick_colour(state, seat) if card.is_wild and card.face is not Face.WILD_ITEM_BOX else None
        )
        hand = state.hands[seat]
        if card.number is None:
            names = names_target(card.face, state.options.custom_action)
        else:  # a 7 swaps hands under house.seven-o, unless it goes out
            names = card.face is Face.SEVEN and state.options.seven_o and len(hand) > 1
        target = self.pick_target(state, seat) if names else None
        traded = len(state.hands[target]) if target is not None else None
        passed = len(state.hands[state.next_seat(seat, -1)])
        left = cards_left(hand, card, state.options, traded, passed)
        uno = left == 1 and self.rng.random() >= self.habits.forget_uno
        return Play(seat, card, colour, uno, target)

    def pick_colour(self, state: State, seat: int) -> Colour:
        """The colour to name for a wild."""
        return self.rng.choice(COLOURS)

    def pick_target(self, state: State, seat: int) -> int:
        """The opponent to name."""
        return self.rng.choice([s for s in range(state.size) if s != seat])

    def wants_challenge(self, state: State, seat: int) -> bool:
        """Whether to challenge the pending Wild Draw Four."""
        return self.rng.random() < self.habits.challenge

    # --- table talk, out of turn -------------------------------------------------------------------

    def talk(self, state: State, seat: int) -> Command | None:
        """An UNO call or a catch this bot makes now, if any (the open windows are ``state.exposed``)."""
        for exposed in state.exposed:
            if exposed == seat:
                if self.rng.random() < self.habits.late_call:
                    return CallUno(seat)
            elif self.rng.random() < self.habits.catch:
                return Catch(seat, exposed)
        return None


class SensibleBot(RandomBot):
    """Plays like a careful person: keeps wilds for later, attacks a player close to going out, names
    the colour it holds most of, plays Wild Draw Four only when it is legal, challenges when the
    offender probably had the colour, and always catches a missed UNO."""

    def __init__(self, rng: random.Random, habits: Habits | None = None) -> None:
        super().__init__(rng, habits or Habits(forget_uno=0.02, late_call=0.5, catch=1.0))

    def act(self, state: State) -> Command:
        seat = state.turn
        drawn = state.drawn
        drawn_wd4 = (
            state.awaiting is Awaiting.DRAWN and drawn is not None and drawn.face is Face.WILD_DRAW_FOUR
        )
        if drawn_wd4 and not self._wd4_legal(state, seat) and not state.options.force_play:
            return Pass(seat)  # no bluffing with a drawn Wild Draw Four either
        return super().act(state)

    def turn(self, state: State, seat: int) -> Command:
        options = self.playable(state, seat)
        if options:
            legal = [c for c in options if c.face is not Face.WILD_DRAW_FOUR or self._wd4_legal(state, seat)]
            if legal:
                return self.play(state, seat, self.pick_card(state, seat, legal))
        return RULE_SETS[state.variant].taking.action(seat)

    def _wd4_legal(self, state: State, seat: int) -> bool:
        if state.options.wd4_any_time:
            return True
        return not wd4_matching(state.hands[seat], state.colour, state.options.wd4_wilds_block)

    def pick_card(self, state: State, seat: int, options: Sequence[Card]) -> Card:
        next_seat = state.next_seat(seat)
        threatened = len(state.hands[next_seat]) <= 2

        def score(c: Card) -> tuple[int, int]:
            attacking = c.number is None and c.face not in (Face.WILD, Face.WILD_CUSTOMIZABLE)
            # Attack the next player when they are close to going out; otherwise shed points, saving wilds.
            urgency = 2 if threatened and attacking else 0
            return (urgency - (1 if c.is_wild else 0), c.points)

        return max(options, key=score)

    def pick_colour(self, state: State, seat: int) -> Colour:
        counts = Counter(c.colour for c in state.hands[seat] if c.colour is not None)
        return counts.most_common(1)[0][0] if counts else self.rng.choice(COLOURS)

    def pick_target(self, state: State, seat: int) -> int:
        others = [s for s in range(state.size) if s != seat]
        return min(others, key=lambda s: (len(state.hands[s]), s))

    def stack(self, state: State, seat: int) -> Play | None:
        # Always pass the penalty on when it can, but never bluff with a Wild Draw Four to do it.
        top, mode = state.discard[-1], state.options.stacking
        cards = [
            c
            for c in state.hands[seat]
            if stacks_on(c, top, mode) and (c.face is not Face.WILD_DRAW_FOUR or self._wd4_legal(state, seat))
        ]
        return self.play(state, seat, self.pick_card(state, seat, cards)) if cards else None

    def wants_challenge(self, state: State, seat: int) -> bool:
        # The more cards the offender held, the likelier one was of the active colour.
        assert state.wd4 is not None
        return len(state.wd4.hand) >= 6 and self.rng.random() < 0.6
