"""Rules engine throughput: random-legal two-player classic games through decide + evolve, side by side
with RLCard 1.2's UNO engine driven by random legal actions, in the same run.

    python bench/rules_speed.py [--seconds 3] [--runs 5] [--seed 0] [--json] [--compiled PATH]
                                [--clock wall|cpu]

``--compiled PATH`` times the compiled engine too: ``PATH`` is a copy of the project built with mypyc
(``UNO_AUDIT_COMPILE=1 pip install --no-deps --target PATH .``), run in a child process that imports
``service`` from ``PATH`` first (the parent has the work tree's pure engine loaded). The engines take
turns run by run — pure, compiled, RLCard — so that a change in the machine's speed hits all alike, and
run ``n`` of each plays the same seeds.

A *move* is one accepted command (a play, draw, pass, UNO call, catch, challenge, colour choice, round
start). Each of ours goes through :func:`service.rules.decide.execute` — legality check, effects, events,
and the state each event evolves — and the random-legal bots decide everything the rules ask, including
UNO calls (forgotten 10 % of the time), catches and Wild Draw Four challenges; games are full matches to
500 points with scoring. RLCard's step checks nothing, has no UNO calls, challenges or scoring, and ends
a game at the first empty hand (see ``bench/rlcard_baseline.py``). RLCard is optional: without it
(``pip install -e '.[bench]'``) only our figure is printed.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.compiled import in_compiled
from bench.rlcard_baseline import rlcard_moves_per_second
from service.play.bots import RandomBot
from service.rules import CreateGame, StartRound, Variant, Violation, create, execute, make_options
from service.rules.events import Awaiting
from service.rules.state import new_state


def uno_audit_moves_per_second(
    seconds: float, seed: int, clock: Callable[[], float] = time.perf_counter
) -> dict[str, Any]:
    """Play whole two-player classic matches with random-legal bots for about ``seconds`` on ``clock``."""
    options = make_options(Variant.CLASSIC)
    rng = random.Random(seed)
    # Locals: Python 3.11 reads an enum member through EnumType.__getattr__, twice a move here.
    game_over, round_start = Awaiting.GAME_OVER, Awaiting.ROUND_START
    moves = games = events = rounds = 0
    started = clock()
    elapsed = 0.0
    while elapsed < seconds:
        bots = [RandomBot(random.Random(rng.getrandbits(64))) for _ in range(2)]
        created = create(CreateGame(Variant.CLASSIC, ("ann", "bob"), options, rng.randbytes(32)))
        assert not isinstance(created, Violation)
        state = new_state(created)
        while state.awaiting is not game_over:
            if state.awaiting is round_start:
                command: Any = StartRound()
            else:
                command = None
                if state.exposed:
                    for seat in (0, 1):
                        command = bots[seat].talk(state, seat)
                        if command is not None:
                            break
                if command is None:
                    command = bots[state.turn].act(state)
            outcome = execute(state, command)
            if isinstance(outcome, Violation):
                raise AssertionError(f"a random-legal bot's command was rejected: {outcome}")
            produced, state = outcome
            moves += 1
            events += len(produced)
        games += 1
        rounds += len(state.results)
        elapsed = clock() - started
    return {
        "moves": moves,
        "games": games,
        "rounds": rounds,
        "events": events,
        "seconds": round(elapsed, 3),
        "moves_per_second": round(moves / elapsed),
    }


#: The clocks a run can be timed on (``--clock``).
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


def _run_compiled(path: str, seconds: float, seed: int, clock: str) -> dict[str, Any]:
    """One timed run of the compiled engine installed in ``path``, in a child process
    (:func:`bench.compiled.in_compiled`)."""
    result: dict[str, Any] = in_compiled(
        path,
        "from bench.rules_speed import CLOCKS, uno_audit_moves_per_second\n"
        "result = uno_audit_moves_per_second(given['seconds'], given['seed'], CLOCKS[given['clock']])",
        {"seconds": seconds, "seed": seed, "clock": clock},
    )
    return result


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ordered = sorted(runs, key=lambda run: run["moves_per_second"])
    middle = dict(ordered[len(ordered) // 2])
    middle["moves_per_second"] = round(middle["moves_per_second"])
    middle["runs"] = [round(run["moves_per_second"]) for run in runs]
    return middle


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="rules engine moves per second vs RLCard 1.2")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of one timed run (default 3)")
    parser.add_argument("--runs", type=int, default=5, help="alternating runs of each engine (default 5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="time runs on wall time (default) or on each process's own CPU time, steadier on a busy machine",
    )
    parser.add_argument(
        "--compiled",
        metavar="PATH",
        help="also time the compiled engine in PATH (UNO_AUDIT_COMPILE=1 pip install --target PATH .)",
    )
    args = parser.parse_args(argv)

    # The engines take turns, so a change in the machine's speed during the run hits them alike;
    # each figure is the median of its runs.
    ours: list[dict[str, Any]] = []
    compiled: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []
    baseline = True
    clock = CLOCKS[args.clock]
    for run in range(args.runs):
        ours.append(uno_audit_moves_per_second(args.seconds, args.seed + run, clock))
        if args.compiled:
            compiled.append(_run_compiled(args.compiled, args.seconds, args.seed + run, args.clock))
        if baseline:
            try:
                theirs.append(rlcard_moves_per_second(args.seconds, args.seed + run, clock))
            except RuntimeError as missing:
                print(f"(baseline skipped: {missing})", file=sys.stderr)
                baseline = False
    pure = _median(ours)
    fast = _median(compiled) if compiled else None
    rl = _median(theirs) if theirs else None
    if args.json:
        print(json.dumps({"uno_audit": pure, "uno_audit_compiled": fast, "rlcard": rl}))
        return 0
    unit = "moves/s" if args.clock == "wall" else "moves/cpu-s"
    print(f"{'engine (median of ' + str(args.runs) + ' runs)':<34}{unit:>12}   runs")
    print(f"{'uno-audit decide+evolve, pure':<34}{pure['moves_per_second']:>12,}   {pure['runs']}")
    if fast is not None:
        print(f"{'uno-audit decide+evolve, mypyc':<34}{fast['moves_per_second']:>12,}   {fast['runs']}")
    if rl is not None:
        print(f"{'RLCard 1.2 UnoGame':<34}{rl['moves_per_second']:>12,}   {rl['runs']}")
        print(f"ratio pure / RLCard: {pure['moves_per_second'] / rl['moves_per_second']:.2f}")
        if fast is not None:
            print(f"ratio compiled / RLCard: {fast['moves_per_second'] / rl['moves_per_second']:.2f}")
    if fast is not None:
        print(f"ratio compiled / pure: {fast['moves_per_second'] / pure['moves_per_second']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
