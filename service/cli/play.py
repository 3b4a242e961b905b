"""The commands where bots play: ``simulate`` (in-process, the rules' invariants checked, records written
if asked) and ``bots`` (as gRPC clients of a running server)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from service.cli.console import progress_bar
from service.cli.exits import EXIT_INVALID, EXIT_OK, EXIT_USAGE
from service.cli.options import bounded, parse_variant, rule_option, tls_client_options
from service.cli.tournaments import tournament_name
from service.play.simulate import STALL_REPEATS, InvariantError, house_rule_combinations, play_game
from service.records.export import RecordMode, record_from_game
from service.records.record import write_record
from service.rules.options import OptionError, Variant, make_options


def register_simulate(commands: Any) -> None:
    """The ``simulate`` command."""
    simulate = commands.add_parser("simulate", help="bots play complete games with invariants checked")
    simulate.add_argument(
        "--variant", type=parse_variant, required=True, help="classic, sonic, attack, mario-kart"
    )
    simulate.add_argument("--players", type=bounded(2, 10), default=4, help="players at each table (2-10)")
    simulate.add_argument("--games", type=bounded(1, 1_000_000), default=1, help="games to play")
    simulate.add_argument(
        "--seed", type=bounded(0, 2**63 - 1), default=0, help="the first game's seed (the next: +1, ...)"
    )
    simulate.add_argument(
        "--option",
        type=rule_option,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a rule option, e.g. stacking=any or jump_in=true (repeat for several)",
    )
    simulate.add_argument(
        "--every-house-rule",
        action="store_true",
        help="play every house-rule combination the rule set supports at 2 to 10 players, "
        "--games games each (--players is ignored)",
    )
    simulate.add_argument("--json", action="store_true", help="print one JSON object")
    simulate.add_argument("--records", type=Path, help="write each game as a game record into this folder")
    simulate.add_argument(
        "--record-mode",
        choices=[mode.value for mode in RecordMode],
        default=RecordMode.SEED.value,
        help="how the records give the cards: the seed, each round's deck and reshuffles, or the dealt "
        "hands with every card listed",
    )
    simulate.set_defaults(run=simulate_command)


def register_bots(commands: Any) -> None:
    """The ``bots`` command."""
    bots = commands.add_parser("bots", help="bots play complete games against a running server")
    bots.add_argument("--server", default="127.0.0.1:50051", help="host:port of the server")
    bots.add_argument("--games", type=bounded(1, 1_000_000), default=1, help="games to play")
    bots.add_argument(
        "--variant", type=parse_variant, required=True, help="classic, sonic, attack, mario-kart"
    )
    bots.add_argument("--players", type=bounded(2, 10), default=4, help="players at each table (2-10)")
    bots.add_argument(
        "--concurrency", type=bounded(1, 10_000), default=1, help="games played at the same time"
    )
    bots.add_argument(
        "--seed",
        type=bounded(0, 2**63 - 1),
        default=0,
        help="seeds the bots' choices (each game's drawn from it)",
    )
    bots.add_argument("--target-score", type=bounded(1, 1_000_000), help="play matches to this score")
    bots.add_argument(
        "--tournament",
        type=tournament_name,
        metavar="T",
        help="create the games in this tournament (1-128 printable characters)",
    )
    bots.add_argument(
        "--option",
        type=rule_option,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a rule option of the games created, e.g. stacking=any or jump_in=true (repeat for several)",
    )
    bots.add_argument(
        "--retry-for",
        type=bounded(0, 86_400),
        default=60,
        metavar="S",
        help="retry an unavailable server for up to S seconds per call, with the same command id (0: never)",
    )
    bots.add_argument("--backoff-cap", type=bounded(1, 3_600), default=5, metavar="S", help="longest wait")
    bots.add_argument("--call-timeout", type=bounded(1, 3_600), default=30, metavar="S", help="per attempt")
    bots.add_argument(
        "--receipts",
        type=Path,
        metavar="FILE",
        help="keep every reply's receipt (a signed checkpoint), one JSON object per line, as players would",
    )
    tls_client_options(bots)
    bots.set_defaults(run=bots_command)


def bots_command(args: argparse.Namespace) -> int:
    """Bots play ``--games`` games on the server; print each game's id as it ends, one a line, then the
    summary as one JSON object (the last line)."""
    import grpc

    from service.api.tls import TLSError, channel_credentials
    from service.client.bots import LoadSummary, Receipt, RetryPolicy, run_bots

    try:
        credentials = channel_credentials(args.tls_ca, args.tls_cert, args.tls_key)
    except TLSError as error:
        print(f"uno-audit bots: {error}", file=sys.stderr)
        return EXIT_USAGE

    options = dict(args.option)
    try:
        make_options(args.variant, options)
    except OptionError as error:
        print(f"uno-audit bots: setup.options: {error}", file=sys.stderr)
        return EXIT_USAGE
    policy = RetryPolicy(
        retry_for=args.retry_for, backoff_cap=args.backoff_cap, call_timeout=args.call_timeout
    )
    bar = progress_bar(args.games, "games", "game")

    printed = 0

    def progress(summary: LoadSummary) -> None:
        nonlocal printed
        for game_id in summary.game_ids[printed:]:  # each game's id once it ends, above the bar
            bar.write(game_id, file=sys.stdout)
        printed = len(summary.game_ids)
        bar.update(summary.games - bar.n)
        bar.set_postfix(retries=summary.retries)

    try:
        kept = contextlib.ExitStack()
        keep = None
        if args.receipts is not None:
            receipts = kept.enter_context(args.receipts.open("w", encoding="utf-8"))

            def keep(receipt: Receipt) -> None:
                receipts.write(json.dumps(receipt.to_json()) + "\n")

    except OSError as error:
        print(f"uno-audit bots: cannot write {args.receipts}: {error.strerror or error}", file=sys.stderr)
        return EXIT_USAGE
    summary = LoadSummary()
    try:
        with bar, kept:
            asyncio.run(
                run_bots(
                    args.server,
                    games=args.games,
                    variant=args.variant,
                    players=args.players,
                    concurrency=args.concurrency,
                    seed=args.seed,
                    target_score=args.target_score,
                    tournament_id=args.tournament or "",
                    options=options,
                    policy=policy,
                    progress=progress,
                    credentials=credentials,
                    keep=keep,
                    summary=summary,
                )
            )
    except grpc.aio.AioRpcError as error:
        print(f"uno-audit bots: {error.code().name}: {error.details()}", file=sys.stderr)
        return EXIT_INVALID
    except KeyboardInterrupt:
        # What was done before Ctrl-C, marked partial (games in flight are not counted); main() then
        # says "interrupted" on standard error.
        print(json.dumps({**summary.to_json(), "partial": True}), flush=True)
        raise
    print(json.dumps(summary.to_json()))
    return EXIT_OK if summary.rejected == 0 else EXIT_INVALID


def simulate_command(args: argparse.Namespace) -> int:
    """Bots play ``--games`` games in-process; print what was played."""
    given = dict(args.option)
    tables = _tables(args.variant, args.players, given, args.every_house_rule)
    try:
        settings = [(players, make_options(args.variant, options)) for players, options in tables]
    except OptionError as error:
        print(f"uno-audit simulate: setup.options: {error}", file=sys.stderr)
        return EXIT_USAGE
    if args.records is not None:
        try:
            args.records.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            print(f"uno-audit simulate: cannot write records to {args.records}: {error}", file=sys.stderr)
            return EXIT_USAGE
    rounds = moves = events = 0
    stalled: list[int] = []
    total = args.games * len(settings)
    started = time.perf_counter()
    with progress_bar(total, "games", "game") as bar:
        for index in range(total):
            seed = args.seed + index
            players, options = settings[index % len(settings)]
            try:
                game = play_game(args.variant, players, seed, options=options)
            except InvariantError as error:
                bar.close()  # its line first, then the error on a line of its own
                house = json.dumps(options.house_rules())
                print(
                    f"uno-audit simulate: game {index + 1} (seed {seed}, {players} players, house rules "
                    f"{house}): {error}",
                    file=sys.stderr,
                )
                return EXIT_INVALID
            rounds += game.rounds
            moves += len(game.steps)
            events += len(game.events)
            if game.stalled:
                stalled.append(seed)
            if args.records is not None:
                name = f"{args.variant.value}-{players}p-seed{seed}.jsonl"
                record = record_from_game(game, RecordMode(args.record_mode))
                (args.records / name).write_text(write_record(record), encoding="utf-8")
            bar.update(1)
    seconds = time.perf_counter() - started
    summary = {
        "variant": args.variant.value,
        "players": args.players if not args.every_house_rule else "2-10",
        "games": total,
        "house_rule_combinations": len({json.dumps(o.house_rules(), sort_keys=True) for _, o in settings}),
        "rounds": rounds,
        "moves": moves,
        "events": events,
        "seconds": round(seconds, 3),
        "moves_per_second": round(moves / seconds) if seconds > 0 else None,
        "invariants": "held",
        "stalled_seeds": stalled,
    }
    if args.json:
        print(json.dumps(summary))
    else:
        combinations = summary["house_rule_combinations"]
        print(
            f"{total} {args.variant.value} games of {summary['players']} ({combinations} house-rule "
            f"combination{'s' if combinations != 1 else ''}): {rounds} rounds, {moves} moves, "
            f"{events} events in {seconds:.2f} s ({summary['moves_per_second']} moves/s); "
            "card conservation and fold(events) == state held throughout"
        )
        if stalled:
            seeds = ", ".join(str(seed) for seed in stalled)
            print(
                f"{len(stalled)} game{'s' if len(stalled) != 1 else ''} stopped in a cycle of positions "
                f"repeating {STALL_REPEATS} times, which the players could not leave (seeds {seeds})"
            )
    return EXIT_OK


def _tables(
    variant: Variant, players: int, given: dict[str, Any], every_house_rule: bool
) -> list[tuple[int, dict[str, Any]]]:
    """The (players, options) of the tables ``simulate`` plays in turn: one, or with
    ``every_house_rule`` every house-rule combination at every size from 2 to 10 (the given options
    apply to all of them; a house rule given is overridden by the combination)."""
    if not every_house_rule:
        return [(players, given)]
    return [
        (size, {**given, **combination})
        for combination in house_rule_combinations(variant)
        for size in range(2, 11)
    ]
