"""Baseline throughput of RLCard 1.2's UNO engine under uniformly random legal play.

RLCard is an optional dependency (``pip install -e '.[bench]'``); it is imported only when the
benchmark runs, so this module imports cleanly without it.

What one RLCard ``UnoGame.step`` does (read from rlcard 1.2.0, ``rlcard/games/uno/``), so that a
comparison with this project's engine is stated honestly:

* It does not validate the action: an action outside ``get_legal_actions()`` is applied as given
  (or crashes). Legality is only enforced by the caller choosing from the legal list.
* ``draw`` takes exactly one card and always ends the turn. The drawn card is played at once,
  without a choice, if it is a wild (colour picked at random; a drawn Wild Draw Four makes nobody
  draw) or matches the target's colour (a drawn Skip, Reverse or Draw Two takes effect); a card
  matching only by number or symbol is kept in hand. ``draw`` is offered only when nothing in hand
  is playable. An empty draw pile is refilled with every played card, the current top included.
* Wild Draw Four is offered only when no other card, a plain Wild included, is playable. There is
  no challenge, no stacking, no UNO call or penalty, and no scoring: the game ends when a hand is
  empty and the payoff is +1/-1.
* With two players a Reverse passes the turn to the other player (it does not act as a Skip).
* After applying the action it builds the next player's observation (hand, target, every played
  card since the last reshuffle, and the legal actions, computed again).

Each step is counted as one move. The loop also calls ``get_legal_actions()`` and ``is_over()``
itself, so legal actions are computed twice per move (once here, once inside ``step``).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable


def rlcard_moves_per_second(
    seconds: float, seed: int, clock: Callable[[], float] = time.perf_counter
) -> dict[str, float]:
    """Play whole 2-player RLCard UNO games with random legal actions for about ``seconds``.

    One ``numpy.random.RandomState(seed)``, made once, deals every game and drives the engine's own
    randomness (making one per game cost RLCard time that is not its engine's); the action choices
    come from one ``random.Random(seed)``. The clock is checked after each finished game, so the run
    overshoots ``seconds`` by at most one game and only whole games are counted.

    ``clock`` measures the time: wall time by default, ``time.process_time`` for the CPU time of this
    process alone (steadier on a machine busy with other work).

    Returns ``moves`` (steps taken), ``games`` (games finished), ``seconds`` (measured on ``clock``)
    and ``moves_per_second``.
    """
    try:
        import numpy
        from rlcard.games.uno.game import UnoGame
    except ImportError as exc:
        raise RuntimeError("RLCard is not installed: pip install -e '.[bench]'") from exc

    if seconds <= 0:
        raise ValueError("seconds must be positive")

    rng = random.Random(seed)
    game = UnoGame(allow_step_back=False, num_players=2)
    game.np_random = numpy.random.RandomState(seed)
    moves = 0
    games = 0
    start = clock()
    elapsed = 0.0
    while elapsed < seconds:
        game.init_game()
        while not game.is_over():
            legal: list[str] = game.get_legal_actions()
            game.step(rng.choice(legal))
            moves += 1
        games += 1
        elapsed = clock() - start

    return {
        "moves": moves,
        "games": games,
        "seconds": elapsed,
        "moves_per_second": moves / elapsed,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=3.0, help="how long to play (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="seed for deals and choices (default 0)")
    args = parser.parse_args(argv)
    result = rlcard_moves_per_second(args.seconds, args.seed)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
