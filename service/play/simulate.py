"""Bots play complete games in-process, with the rules' invariants checked as they go.

:func:`play_game` runs one game to the end of its match and returns its log, its final state and the
commands that were accepted; with ``checks`` it verifies card conservation after every event and that
folding the log reproduces the final state (``fold(events) == state``), raising :class:`InvariantError`
on the first failure.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from service.play.bots import Habits, RandomBot, SensibleBot
from service.rules.cards import Card
from service.rules.commands import Command, CreateGame, StartRound
from service.rules.decide import create, execute
from service.rules.events import Awaiting, Event
from service.rules.options import UNSUPPORTED, Options, Stacking, Variant, make_options
from service.rules.state import State, conservation_error, evolve, fold, new_state
from service.rules.violations import Violation

#: A game that has not ended after this many accepted commands is reported as not terminating.
MAX_COMMANDS = 200_000

#: A table position seen this many times is a cycle the players cannot leave: the game is stalled.
STALL_REPEATS = 64

#: Positions are compared for a stall only while this few cards are outside the hands: a cycle needs
#: the same cards to come back, which only happens when the pile and the discard pile are nearly empty.
STALL_CARDS = 6


class InvariantError(AssertionError):
    """A rules invariant broke during a simulated game."""


@dataclass(slots=True)
class SimulatedGame:
    """One finished game: its events, final state and accepted commands with the events each produced."""

    events: list[Event]
    state: State
    steps: list[tuple[Command, tuple[Event, ...]]] = field(default_factory=list)
    #: The game was stopped in a cycle of positions that the rules force to repeat (see :func:`play_game`).
    stalled: bool = False

    @property
    def rounds(self) -> int:
        return len(self.state.results)


def house_rule_combinations(variant: Variant) -> Iterator[dict[str, Any]]:
    """Every combination of the house rules ``variant`` supports (digest §9), as ``CreateGame`` options:
    each ``stacking`` mode with every subset of the on/off house rules (128 for classic, Sonic and Mario
    Kart; 16 for UNO Attack, which has no draw to match, forced play or Wild Draw Four)."""
    switches = [
        name
        for name in ("jump_in", "seven_o", "draw_to_match", "force_play", "wd4_any_time")
        if name not in UNSUPPORTED[variant]
    ]
    for mode in Stacking:
        for on in itertools.product((False, True), repeat=len(switches)):
            chosen = [name for name, switched in zip(switches, on, strict=True) if switched]
            yield {"stacking": mode.value, **dict.fromkeys(chosen, True)}


def seat_names(count: int) -> tuple[str, ...]:
    """Player names for simulated games: p1, p2, …"""
    return tuple(f"p{i + 1}" for i in range(count))


def play_game(
    variant: Variant,
    players: int,
    seed: int,
    *,
    options: Options | None = None,
    checks: bool = True,
    sensible: Sequence[bool] | None = None,
    habits: Habits | None = None,
    fixed_decks: Mapping[int, Sequence[Card]] | None = None,
    fixed_by: str = "admin",
) -> SimulatedGame:
    """Bots play one complete game dealt from a seed derived from ``seed``.

    ``sensible[i]`` picks the sensible bot for seat ``i`` (default: alternate, starting random).
    ``fixed_decks[n]`` deals round ``n`` from that deck (top first) instead of the seed's shuffle, as
    the admin's fixed deck does in the service, the round recording ``fixed_by`` as who fixed it.

    A game can have no end under the rules: with ``force_play``, two players who hold nothing playable
    can pass the last two Reverses between them for ever — each draws the other's, must play it, and
    turns play back. When a position (hands, piles, turn, direction) comes back :data:`STALL_REPEATS`
    times the game is stopped and marked ``stalled`` instead of running to :data:`MAX_COMMANDS`.
    """
    rng = random.Random(seed)
    game_seed = rng.randbytes(32)
    chosen = options or make_options(variant)
    kinds = sensible if sensible is not None else [i % 2 == 1 for i in range(players)]
    bots = [
        (SensibleBot if kinds[i] else RandomBot)(random.Random(rng.getrandbits(64)), habits)
        for i in range(players)
    ]
    created = create(CreateGame(variant, seat_names(players), chosen, game_seed))
    if isinstance(created, Violation):
        raise ValueError(str(created))
    state = new_state(created)
    game = SimulatedGame([created], state)
    seen: dict[tuple[object, ...], int] = {}
    while state.awaiting is not Awaiting.GAME_OVER:
        if len(game.steps) > MAX_COMMANDS:
            raise InvariantError(f"game with seed {seed} did not end after {MAX_COMMANDS} commands")
        command = _next_command(state, bots, rng)
        fixed = (fixed_decks or {}).get(state.round + 1)
        if isinstance(command, StartRound) and fixed is not None:
            command = StartRound(deck=tuple(fixed), fixed_by=fixed_by)
        outcome = execute(state, command)
        if isinstance(outcome, Violation):
            raise InvariantError(f"a bot's command was rejected: {command} → {outcome}")
        events, after = outcome
        if checks:
            _check_events(state, events, after)
        state = after
        game.events.extend(events)
        game.steps.append((command, events))
        if len(state.pile) + len(state.discard) <= STALL_CARDS:
            position = _position(state)
            seen[position] = seen.get(position, 0) + 1
            if seen[position] >= STALL_REPEATS:
                game.stalled = True
                break
    game.state = state
    if checks and fold(game.events) != state:
        raise InvariantError("folding the game's events does not give its final state")
    return game


def _next_command(state: State, bots: Sequence[RandomBot], rng: random.Random) -> Command:
    if state.awaiting is Awaiting.ROUND_START:
        return StartRound()
    if state.exposed:
        # Table talk comes before the next turn action closes the window; seats speak in a random order.
        order = list(range(state.size))
        rng.shuffle(order)
        for seat in order:
            said = bots[seat].talk(state, seat)
            if said is not None:
                return said
    if state.options.jump_in and state.jumpable and state.awaiting in _JUMPABLE:
        # Before the turn player acts, anyone else holding the top card's twin may jump in.
        order = [seat for seat in range(state.size) if seat != state.turn]
        rng.shuffle(order)
        for seat in order:
            jump = bots[seat].jump_in(state, seat)
            if jump is not None:
                return jump
    return bots[state.turn].act(state)


#: What the game may wait for when a jump-in can come (``house.jump-in``: not while a penalty or a
#: choice waits).
_JUMPABLE = (Awaiting.PLAY, Awaiting.FOLLOW_UP)


def _position(state: State) -> tuple[object, ...]:
    """What makes two moments of a round the same position (for a stall): every card's place, whose turn
    it is and what for, the direction and the colour."""
    return (
        state.round,
        tuple(tuple(sorted(c.token for c in hand)) for hand in state.hands),
        tuple(sorted(c.token for c in state.pile)),
        state.discard,
        state.turn,
        state.awaiting,
        state.direction,
        state.colour,
    )


def _check_events(before: State, events: tuple[Event, ...], after: State) -> None:
    state = before
    for event in events:
        state = evolve(state, event)
        problem = conservation_error(state)
        if problem:
            raise InvariantError(f"after {event}: {problem}")
    if state != after:
        raise InvariantError("the decider's state differs from evolving its events")
