"""A table that plays the house rules (digest §9), for the record tests: every legal move, chosen at random.

The service's bots (``service.play.bots``) are learning the house rules at the same time as the record
path does; this table does not wait for them. At each step it lists every command a player could give —
the player on turn's plays (a colour for a wild, a target for a card that names one, UNO called when the
play leaves one card), draw, press, pass, accept, challenge, choose; anyone's jump-in on the top card; UNO
calls and catches while a window is open — asks the decider which of them are legal (``check``), and
takes one at random. So it plays every house rule the options turn on, including the moves the bots may
never make (stacking a Wild Draw Four on a Draw Two, jumping in on a Skip, a 0 that rotates a one-card
hand onto someone), and never an illegal one. The result has the shape of a bot game
(:class:`~service.play.simulate.SimulatedGame`), so the export takes it as it takes theirs.
"""

from __future__ import annotations

import random

from service.play.simulate import SimulatedGame, seat_names
from service.rules.cards import Card, Colour, Face
from service.rules.commands import (
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
    StartRound,
)
from service.rules.decide import check, create, execute
from service.rules.events import Awaiting
from service.rules.legality import cards_left, names_target
from service.rules.options import Options, Variant
from service.rules.state import State, new_state
from service.rules.violations import Violation

#: A game still running after this many commands is abandoned (reported, never silently cut short).
#: Every house rule on, each at its widest (the rules a rule set supports are for it to filter).
EVERY_HOUSE_RULE: dict[str, object] = {
    "stacking": "any",
    "jump_in": True,
    "seven_o": True,
    "draw_to_match": True,
    "force_play": True,
    "wd4_any_time": True,
}

MAX_STEPS = 20_000


def _play(state: State, seat: int, card: Card, rng: random.Random, *, jump_in: bool = False) -> Play:
    """``card`` played by ``seat`` as a table would: a colour for a wild, a target if it names one (a 7
    under seven-o that does not go out), UNO called when it leaves one card (forgotten now and then)."""
    hand = state.hands[seat]
    colour = rng.choice(tuple(Colour)) if card.is_wild and card.face is not Face.WILD_ITEM_BOX else None
    if card.number is None:
        names = names_target(card.face, state.options.custom_action)
    else:
        names = card.face is Face.SEVEN and state.options.seven_o and len(hand) > 1
    others = [s for s in range(state.size) if s != seat]
    target = None
    if names:  # usually the smallest hand, as a player out to win would; now and then anyone
        smallest = min(others, key=lambda s: len(state.hands[s]))
        target = smallest if rng.random() < 0.7 else rng.choice(others)
    traded = len(state.hands[target]) if target is not None else None
    passed = len(state.hands[state.next_seat(seat, -1)])
    left = cards_left(hand, card, state.options, traded, passed)
    uno = left == 1 and rng.random() < 0.8
    return Play(seat, card, colour, uno, target, jump_in=jump_in)


def _candidates(state: State, rng: random.Random) -> list[tuple[float, Command]]:
    """Every command worth asking the decider about now, each with how often a table would choose it."""
    if state.awaiting is Awaiting.ROUND_START:
        return [(1.0, StartRound())]
    out: list[tuple[float, Command]] = []
    for seat in state.exposed:  # table talk: the exposed player calls, or someone catches them
        out.append((2.0, CallUno(seat)))
        out.extend((1.0, Catch(other, seat)) for other in range(state.size) if other != seat)
    top = state.discard[-1] if state.discard else None
    if state.options.jump_in and top is not None and state.jumpable:
        for seat in range(state.size):
            if top in state.hands[seat]:
                out.append((4.0, _play(state, seat, top, rng, jump_in=True)))
    seat = state.turn
    # A card is played far more often than the pile is drawn from, so that games end.
    for card in dict.fromkeys(state.hands[seat]):  # each card once, in hand order (a set's order varies)
        out.append((10.0, _play(state, seat, card, rng)))
    out += [(0.5, Draw(seat)), (0.5, Press(seat)), (1.0, Pass(seat)), (1.0, Accept(seat))]
    out.append((1.0, Challenge(seat)))
    out.append((1.0, Choose(seat, colour=rng.choice(tuple(Colour)))))
    out.extend((1.0, Choose(seat, target=other)) for other in range(state.size) if other != seat)
    return out


def next_command(state: State, rng: random.Random) -> Command:
    """A legal command chosen at random, weighted by :func:`_candidates`."""
    legal = [
        (weight, command) for weight, command in _candidates(state, rng) if check(state, command) is None
    ]
    if not legal:
        raise AssertionError(f"no legal command while the game waits for {state.awaiting}")
    weights, commands = zip(*legal, strict=True)
    return rng.choices(commands, weights)[0]


def play_house_game(variant: Variant, players: int, seed: int, options: Options) -> SimulatedGame:
    """One complete game under ``options``, dealt from a seed derived from ``seed``."""
    rng = random.Random(seed)
    created = create(CreateGame(variant, seat_names(players), options, rng.randbytes(32)))
    if isinstance(created, Violation):
        raise ValueError(str(created))
    state = new_state(created)
    game = SimulatedGame([created], state)
    while state.awaiting is not Awaiting.GAME_OVER:
        if len(game.steps) >= MAX_STEPS:
            raise AssertionError(f"the game of seed {seed} did not end in {MAX_STEPS} commands")
        command = next_command(state, rng)
        outcome = execute(state, command)
        assert not isinstance(outcome, Violation), (command, outcome)
        events, state = outcome
        game.events.extend(events)
        game.steps.append((command, events))
    game.state = state
    return game
