"""Bots play complete games in-process, with the rules' invariants checked as they go.

:func:`play_game` runs one game to the end of its match and returns its log, its final state and the
commands that were accepted; with ``checks`` it verifies card conservation after every event and that
folding the log reproduces the final state (``fold(events) == state``), raising :class:`InvariantError`
on the first failure.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from service.rules.commands import Command, CreateGame, StartRound
from service.rules.decide import create, execute
from service.rules.events import Awaiting, Event
from service.rules.options import Options, Variant, make_options
from service.rules.state import State, conservation_error, evolve, fold, new_state
from service.rules.violations import Violation

from .bots import Habits, RandomBot, SensibleBot

#: A game that has not ended after this many accepted commands is reported as not terminating.
MAX_COMMANDS = 200_000


class InvariantError(AssertionError):
    """A rules invariant broke during a simulated game."""


@dataclass(slots=True)
class SimulatedGame:
    """One finished game: its events, final state and accepted commands with the events each produced."""

    events: list[Event]
    state: State
    steps: list[tuple[Command, tuple[Event, ...]]] = field(default_factory=list)

    @property
    def rounds(self) -> int:
        return len(self.state.results)


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
) -> SimulatedGame:
    """Bots play one complete game dealt from a seed derived from ``seed``.

    ``sensible[i]`` picks the sensible bot for seat ``i`` (default: alternate, starting random).
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
    while state.awaiting is not Awaiting.GAME_OVER:
        if len(game.steps) > MAX_COMMANDS:
            raise InvariantError(f"game with seed {seed} did not end after {MAX_COMMANDS} commands")
        command = _next_command(state, bots, rng)
        outcome = execute(state, command)
        if isinstance(outcome, Violation):
            raise InvariantError(f"a bot's command was rejected: {command} → {outcome}")
        events, after = outcome
        if checks:
            _check_events(state, events, after)
        state = after
        game.events.extend(events)
        game.steps.append((command, events))
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
    return bots[state.turn].act(state)


def _check_events(before: State, events: tuple[Event, ...], after: State) -> None:
    state = before
    for event in events:
        state = evolve(state, event)
        problem = conservation_error(state)
        if problem:
            raise InvariantError(f"after {event}: {problem}")
    if state != after:
        raise InvariantError("the decider's state differs from evolving its events")
