"""The ``uno-audit`` command line.

* ``uno-audit simulate --variant V --players N --games G --seed S [--json] [--records DIR]``: bots play
  complete games in-process with the rules' invariants checked; exit 1 if an invariant breaks.
* ``uno-audit verify --record FILE [--json]``: replay and adjudicate a game record offline; exit 0 when
  valid, 1 when it has violations, 2 when the file cannot be read.
* ``uno-audit verify --game ID [--json] [--reveal-seed] [--no-projections] [--database-url DSN]``: a
  stored game's full report (hash chain, seed, today's replay, violations, rulings, disputes); exit 0
  when valid, 1 when not (a log that cannot be read back counts as not valid), 2 for an unknown game.
  ``--reveal-seed`` reveals (and records revealing) the seed of a game in progress.
* ``uno-audit verify --all [--json] [--no-projections] [--database-url DSN]``: every stored game through
  today's rules engine, with a progress bar on standard error, a summary table and the games whose
  stored outcome differs from today's replay; exit 1 if any game is invalid.
* ``uno-audit adjudicate catch|challenge --game ID --position N [--by SEAT] [--target SEAT] [--json]
  [--database-url DSN]``: the ruling on the UNO catch or Wild Draw Four challenge at a position of a
  stored game; exit 2 if it cannot be adjudicated as asked.
* ``uno-audit export --game ID [--reveal-seed] [--json] [--database-url DSN]``: a stored game's
  ``uno-game-record/1`` text on standard output, byte for byte (``> game.jsonl``).
* ``uno-audit import FILE [--tournament T] [--json] [--database-url DSN]``: store a table game's record
  as an imported game; prints its id, the seat tokens (shown once) and the verdict at import.
* ``uno-audit serve [--listen HOST:PORT] [--database-url DSN] [--data-dir DIR] [--admin-token T]``: the
  gRPC game service; without a database URL (flag or ``DATABASE_URL``) it starts an embedded PostgreSQL.
* ``uno-audit bots --server ADDR --games N --variant V --players P --concurrency C``: bots play complete
  games as gRPC clients of a running server.
* ``uno-audit project [--database-url DSN]``: the projector alone, keeping the read models current.
* ``uno-audit rebuild [--view NAME] [--database-url DSN]``: rebuild read models from zero and swap them in.

The commands on stored games talk to the database directly (``--database-url``, default
``$DATABASE_URL``), migrating it first, through :class:`service.audit.auditor.Auditor`.

Bad input (an unknown variant, option, card or game, a malformed record line, a request the auditor
refuses) gets a one-line message on standard error naming what and where, and exit status 2 — never a
traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from projections import VIEW_NAMES
from service.audit.entries import DisputeKind
from service.audit.export import record_from_game
from service.audit.record import RecordError, read_record_file, write_record
from service.audit.verify import LINE_EVIDENCE, Report, verify_record
from service.rules.options import OptionError, Variant
from service.rules.simulate import InvariantError, play_game

if TYPE_CHECKING:  # the database's modules load only for the commands that use it
    from service.audit.auditor import Auditor
    from service.audit.stored_game import Adjudication

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
MAX_ID = 128  # the longest game or tournament id the service takes
MAX_SEAT = 9  # ten players at most
DISPUTE_KINDS = {"catch": DisputeKind.UNO_CATCH, "challenge": DisputeKind.WD4_CHALLENGE}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse's own exit status for bad usage is 2 as well
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _variant(name: str) -> Variant:
    try:
        return Variant.parse(name)
    except OptionError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _bounded(low: int, high: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not between {low} and {high}")
        return value

    return parse


def _game_id(text: str) -> str:
    if not 1 <= len(text) <= MAX_ID or not text.isprintable():
        raise argparse.ArgumentTypeError(f"a game id is 1 to {MAX_ID} printable characters, not {text!r}")
    return text


def _tournament(text: str) -> str:
    if len(text) > MAX_ID or not text.isprintable():
        raise argparse.ArgumentTypeError(f"a tournament id is at most {MAX_ID} printable characters")
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="uno-audit", description="Rules-audit backend for UNO-family card games.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    simulate = commands.add_parser("simulate", help="bots play complete games with invariants checked")
    simulate.add_argument(
        "--variant", type=_variant, required=True, help="classic, sonic, attack, mario-kart"
    )
    simulate.add_argument("--players", type=_bounded(2, 10), default=4)
    simulate.add_argument("--games", type=_bounded(1, 1_000_000), default=1)
    simulate.add_argument("--seed", type=_bounded(0, 2**63 - 1), default=0)
    simulate.add_argument("--json", action="store_true", help="print one JSON object")
    simulate.add_argument("--records", type=Path, help="write each game as a game record into this folder")

    verify = commands.add_parser(
        "verify", help="replay and adjudicate a game record, a stored game or every stored game"
    )
    source = verify.add_mutually_exclusive_group(required=True)
    source.add_argument("--record", type=Path, help="an uno-game-record/1 file (offline)")
    source.add_argument("--game", type=_game_id, metavar="ID", help="a stored game")
    source.add_argument("--all", action="store_true", help="every stored game")
    verify.add_argument("--json", action="store_true", help="print the report as one JSON object")
    verify.add_argument(
        "--reveal-seed",
        action="store_true",
        help="with --game: reveal the seed of a game in progress (recorded in its log)",
    )
    verify.add_argument(
        "--no-projections",
        action="store_true",
        help="with --game or --all: do not cross-check the read models",
    )
    _database_option(
        verify, required=False, text="PostgreSQL URL for --game and --all (default: $DATABASE_URL)"
    )

    serve = commands.add_parser("serve", help="run the gRPC game service")
    serve.add_argument("--listen", default="127.0.0.1:50051", help="host:port (default 127.0.0.1:50051)")
    serve.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL"),
        help="PostgreSQL URL (default: $DATABASE_URL; without one an embedded PostgreSQL runs in --data-dir)",
    )
    serve.add_argument(
        "--data-dir", type=Path, default=Path("uno-audit-data"), help="embedded database folder"
    )
    serve.add_argument(
        "--admin-token",
        default=os.environ.get("UNO_AUDIT_ADMIN_TOKEN"),
        help="the adjudicator's token (default: $UNO_AUDIT_ADMIN_TOKEN; none: no admin)",
    )

    serve.add_argument(
        "--no-projector",
        action="store_true",
        help="do not run the projector (run `uno-audit project` instead)",
    )

    for name, text in (
        ("project", "keep the read models current (the projector)"),
        ("rebuild", "rebuild read models from zero and swap them in"),
    ):
        sub = commands.add_parser(name, help=text)
        _database_option(sub)
        if name == "rebuild":
            sub.add_argument("--view", choices=VIEW_NAMES, help="one read model (default: all)")

    bots = commands.add_parser("bots", help="bots play complete games against a running server")
    bots.add_argument("--server", default="127.0.0.1:50051", help="host:port of the server")
    bots.add_argument("--games", type=_bounded(1, 1_000_000), default=1)
    bots.add_argument("--variant", type=_variant, required=True)
    bots.add_argument("--players", type=_bounded(2, 10), default=4)
    bots.add_argument("--concurrency", type=_bounded(1, 10_000), default=1)
    bots.add_argument("--seed", type=_bounded(0, 2**63 - 1), default=0)
    bots.add_argument("--target-score", type=_bounded(1, 1_000_000), help="play matches to this score")

    adjudicate = commands.add_parser(
        "adjudicate", help="rule on the UNO catch or Wild Draw Four challenge at a position of a stored game"
    )
    adjudicate.add_argument("kind", choices=sorted(DISPUTE_KINDS), help="catch or challenge")
    adjudicate.add_argument("--game", type=_game_id, metavar="ID", required=True, help="a stored game")
    adjudicate.add_argument(
        "--position",
        type=_bounded(1, 2**31 - 1),
        metavar="N",
        required=True,
        help="the position in the game's log (line n of an imported record is position n + 1)",
    )
    adjudicate.add_argument(
        "--by", type=_bounded(0, MAX_SEAT), metavar="SEAT", help="the seat that catches or challenges"
    )
    adjudicate.add_argument("--target", type=_bounded(0, MAX_SEAT), metavar="SEAT", help="the seat caught")
    adjudicate.add_argument("--json", action="store_true", help="print the ruling as one JSON object")
    _database_option(adjudicate)

    export = commands.add_parser("export", help="write a stored game's record to standard output")
    export.add_argument("--game", type=_game_id, metavar="ID", required=True, help="a stored game")
    export.add_argument(
        "--reveal-seed",
        action="store_true",
        help="a game in progress: reveal its seed (recorded in its log) so that it can be exported",
    )
    export.add_argument(
        "--json", action="store_true", help="print {game_id, sha256, record} instead of the bare record"
    )
    _database_option(export)

    imports = commands.add_parser("import", help="store a table game's record as an imported game")
    imports.add_argument("file", type=Path, metavar="FILE", help="an uno-game-record/1 file (- : stdin)")
    imports.add_argument(
        "--tournament", type=_tournament, default="", metavar="T", help="the tournament it belongs to"
    )
    imports.add_argument("--json", action="store_true", help="print one JSON object")
    _database_option(imports)
    return parser


def _database_option(sub: argparse.ArgumentParser, *, required: bool = True, text: str | None = None) -> None:
    sub.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL"),
        required=required and not os.environ.get("DATABASE_URL"),
        metavar="DSN",
        help=text or "PostgreSQL URL (default: $DATABASE_URL)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "simulate":
        return _simulate(args)
    if args.command == "serve":
        return _serve(args)
    if args.command == "bots":
        return _bots(args)
    if args.command == "project":
        return _project(args)
    if args.command == "rebuild":
        return _rebuild(args)
    if args.command == "adjudicate":
        return _adjudicate(args)
    if args.command == "export":
        return _export(args)
    if args.command == "import":
        return _import(args)
    if args.game is not None or args.all:
        return _verify_stored(args)
    for flag, given in (("--reveal-seed", args.reveal_seed), ("--no-projections", args.no_projections)):
        if given:
            print(f"uno-audit verify: {flag} goes with --game or --all, not --record", file=sys.stderr)
            return EXIT_USAGE
    return _verify(args)


def _project(args: argparse.Namespace) -> int:
    import signal

    from projections.projector import run_projector
    from service.api.server import configure_logging

    configure_logging()

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run_projector(args.database_url, stop=stop)

    asyncio.run(run())
    return EXIT_OK


def _rebuild(args: argparse.Namespace) -> int:
    from projections.rebuild import RebuildBusy, rebuild

    try:
        report = asyncio.run(rebuild(args.database_url, args.view))
    except RebuildBusy as busy:
        print(f"uno-audit rebuild: {busy}", file=sys.stderr)
        return EXIT_INVALID
    print(
        json.dumps(
            {
                "views": list(report.views),
                "events": report.events,
                "rows": report.rows,
                "cursor": {"xid": report.cursor.xid, "position": report.cursor.position},
                "seconds": {phase: round(took, 3) for phase, took in report.phases.items()},
            }
        )
    )
    return EXIT_OK


def _serve(args: argparse.Namespace) -> int:
    from service.api.server import serve  # the service's dependencies load only for serve

    host, _, port = args.listen.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        print(f"uno-audit serve: --listen must be HOST:PORT, not {args.listen!r}", file=sys.stderr)
        return EXIT_USAGE
    try:
        asyncio.run(
            serve(
                listen=args.listen,
                database_url=args.database_url,
                data_dir=args.data_dir,
                admin_token=args.admin_token,
                projector=not args.no_projector,
            )
        )
    except OSError as error:
        print(f"uno-audit serve: {error}", file=sys.stderr)
        return EXIT_INVALID
    return EXIT_OK


def _bots(args: argparse.Namespace) -> int:
    import grpc

    from service.api.client_bots import run_bots

    try:
        summary = asyncio.run(
            run_bots(
                args.server,
                games=args.games,
                variant=args.variant,
                players=args.players,
                concurrency=args.concurrency,
                seed=args.seed,
                target_score=args.target_score,
            )
        )
    except grpc.aio.AioRpcError as error:
        print(f"uno-audit bots: {error.code().name}: {error.details()}", file=sys.stderr)
        return EXIT_INVALID
    print(json.dumps(summary.to_json()))
    return EXIT_OK if summary.rejected == 0 else EXIT_INVALID


def _simulate(args: argparse.Namespace) -> int:
    if args.records is not None:
        try:
            args.records.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            print(f"uno-audit simulate: cannot write records to {args.records}: {error}", file=sys.stderr)
            return EXIT_USAGE
    rounds = moves = events = 0
    started = time.perf_counter()
    for index in range(args.games):
        seed = args.seed + index
        try:
            game = play_game(args.variant, args.players, seed)
        except InvariantError as error:
            print(f"uno-audit simulate: game {index + 1} (seed {seed}): {error}", file=sys.stderr)
            return EXIT_INVALID
        rounds += game.rounds
        moves += len(game.steps)
        events += len(game.events)
        if args.records is not None:
            name = f"{args.variant.value}-{args.players}p-seed{seed}.jsonl"
            (args.records / name).write_text(write_record(record_from_game(game)), encoding="utf-8")
    seconds = time.perf_counter() - started
    summary = {
        "variant": args.variant.value,
        "players": args.players,
        "games": args.games,
        "rounds": rounds,
        "moves": moves,
        "events": events,
        "seconds": round(seconds, 3),
        "moves_per_second": round(moves / seconds) if seconds > 0 else None,
        "invariants": "held",
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"{args.games} {args.variant.value} games of {args.players}: {rounds} rounds, {moves} moves, "
            f"{events} events in {seconds:.2f} s ({summary['moves_per_second']} moves/s); "
            "card conservation and fold(events) == state held throughout"
        )
    return EXIT_OK


def _verify(args: argparse.Namespace) -> int:
    try:
        record = read_record_file(args.record)
    except RecordError as error:
        print(f"uno-audit verify: {args.record}: {error}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as error:
        print(f"uno-audit verify: cannot read {args.record}: {error.strerror or error}", file=sys.stderr)
        return EXIT_USAGE
    report = verify_record(record)
    if args.json:
        print(json.dumps(report.to_json(), ensure_ascii=False))
    else:
        print(_human(report))
    return EXIT_OK if report.valid else EXIT_INVALID


def _human(report: Report) -> str:
    data = report.to_json()
    lines = [f"{data['variant']} game: {'VALID' if data['valid'] else 'INVALID'}"]
    for v in data["violations"]:
        lines.append(f"  line {v['line']}: {v['rule']}: {v['message']}")
    for r in data["rulings"]:
        applied = {True: "table agreed", False: "TABLE DISAGREED", None: "table did not say"}[r["applied_ok"]]
        why = f" ({r['reason']})" if r.get("reason") else ""
        lines.append(
            f"  line {r['line']}: {r['kind']} by {r['by']} against {r['against']}: {r['verdict']} "
            f"[{r['rule']}]{why}; {applied}"
        )
    for rnd in data["rounds"]:
        lines.append(f"  round {rnd['round']}: {rnd['winner']} scored {rnd['points']}")
    scores = ", ".join(f"{name} {points}" for name, points in data["scores"].items())
    lines.append(f"  scores: {scores}; winner: {data['winner'] or 'none yet'}")
    if data["stopped_at"] is not None:
        lines.append(f"  the record could not be followed past line {data['stopped_at']}")
    return "\n".join(lines)


# --- the arbiter's commands on stored games ------------------------------------------------------------


class _Stop(Exception):
    """A command on stored games that cannot go on: a one-line message for standard error, and the exit
    status (bad usage, an unknown game, a refusal: 2)."""

    def __init__(self, message: str, status: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.status = status


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def _on_auditor(args: argparse.Namespace, work: Callable[[Auditor], Awaitable[int]]) -> int:
    """Run ``work`` with an auditor over the database at ``args.database_url`` (migrated first); its exit
    status, or 2 with a one-line message for a refusal or a database that cannot be used."""
    import psycopg
    from psycopg_pool import PoolTimeout

    from service.audit.auditor import Auditor, Refused
    from service.store import EventStore, StoreError

    url: str = args.database_url

    async def run() -> int:
        try:  # fail fast, with the server's own words, rather than after the pool's 30 s of retries
            probe = await psycopg.AsyncConnection.connect(url, connect_timeout=10)
        except psycopg.Error as error:
            raise _Stop(f"cannot connect to the database: {_one_line(error)}") from None
        await probe.close()
        store = await EventStore.open(url, max_size=4)
        try:
            await store.migrate()
            return await work(Auditor(store))
        finally:
            await store.close()

    try:
        return asyncio.run(run())
    except _Stop as stop:
        print(f"uno-audit {args.command}: {stop}", file=sys.stderr)
        return stop.status
    except Refused as refused:
        print(f"uno-audit {args.command}: {refused}", file=sys.stderr)
        return EXIT_USAGE
    except (psycopg.Error, PoolTimeout, StoreError) as error:
        print(f"uno-audit {args.command}: database: {_one_line(error)}", file=sys.stderr)
        return EXIT_USAGE


def _new_id() -> str:
    return str(uuid.uuid4())


def _print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False))


def _verify_stored(args: argparse.Namespace) -> int:
    which = "--game" if args.game is not None else "--all"
    if not args.database_url:
        print(f"uno-audit verify: {which} needs --database-url or $DATABASE_URL", file=sys.stderr)
        return EXIT_USAGE
    if args.all and args.reveal_seed:
        print("uno-audit verify: --reveal-seed goes with --game, not --all", file=sys.stderr)
        return EXIT_USAGE
    if args.game is not None:
        return _on_auditor(args, lambda auditor: _verify_game(auditor, args))
    return _on_auditor(args, lambda auditor: _verify_every(auditor, args))


async def _verify_game(auditor: Auditor, args: argparse.Namespace) -> int:
    from service.audit.auditor import Refused

    try:
        report = await auditor.verify(
            args.game,
            check_projections=not args.no_projections,
            reveal_seed=args.reveal_seed,
            command_id=_new_id() if args.reveal_seed else None,
        )
    except Refused as refused:
        if refused.kind != "precondition":
            raise
        # The game is stored but its log cannot be read as a game: it does not verify.
        if args.json:
            _print_json({"game_id": args.game, "valid": False, "error": str(refused)})
        else:
            print(f"game {args.game}: INVALID\n  {refused}")
        return EXIT_INVALID
    if args.json:
        _print_json(report)
    else:
        print(_human_game(report))
    return EXIT_OK if report["valid"] else EXIT_INVALID


def _cards(cards: Sequence[str]) -> str:
    return " ".join(cards) if cards else "(none)"


def _outcome(outcome: dict[str, Any]) -> str:
    scores = ", ".join(f"{name} {points}" for name, points in (outcome.get("scores") or {}).items())
    parts = [f"winner {outcome.get('winner') or 'none yet'}", f"scores {scores or '-'}"]
    parts.append(f"{len(outcome.get('rounds') or [])} rounds")
    if "valid" in outcome:
        parts.append("valid" if outcome["valid"] else "invalid")
    if outcome.get("stopped_at") is not None:
        parts.append(f"stopped at {outcome['stopped_at']}")
    return ", ".join(parts)


def _event_text(event: dict[str, Any] | None) -> str:
    if event is None:
        return "nothing"
    return f"{event['type']} {json.dumps(event['payload'], ensure_ascii=False, sort_keys=True)}"


def _evidence_lines(evidence: dict[str, Any], indent: str) -> list[str]:
    lines = []
    for name, value in evidence.items():
        label = name.replace("_", " ")
        if name in LINE_EVIDENCE:
            text = "-" if value is None else f"position {value}"
        elif isinstance(value, list):
            text = _cards(value)
        else:
            text = "-" if value is None else str(value)
        lines.append(f"{indent}{label}: {text}")
    return lines


_TABLE_SAID = {True: "the table agreed", False: "THE TABLE DISAGREED", None: "the table did not say"}


def _ruling_line(ruling: dict[str, Any]) -> str:
    why = f" ({ruling['reason']})" if ruling.get("reason") else ""
    said = _TABLE_SAID.get(ruling.get("applied_ok"), "")
    return (
        f"position {ruling['position']}: {ruling['kind']} by {ruling['by']} against {ruling['against']}: "
        f"{ruling['verdict']} [{ruling['rule']}]{why}; {said}"
    )


def _human_game(report: dict[str, Any]) -> str:
    """A stored game's report as text (the report object itself is ``--json``)."""
    lines = [
        f"game {report['game_id']}: {'VALID' if report['valid'] else 'INVALID'}",
        f"  {report['origin']} {report.get('variant') or '?'} game, version {report['version']}, "
        f"{report['status']}; rules {'kept' if report['rules_valid'] else 'BROKEN'}",
    ]
    unreadable = report.get("unreadable")
    if unreadable is not None:
        lines.append(
            f"  UNREADABLE from position {unreadable['position']}: the log cannot be read back as a "
            f"record: {unreadable['message']}"
        )
    chain = report["chain"]
    if chain["valid"]:
        lines.append(f"  hash chain: intact, {chain['events']} events, head {chain['head']}")
    else:
        lines.append(f"  hash chain: TAMPERED ({chain['events']} events, head {chain['head']})")
        for finding in chain["findings"]:
            lines.append(f"    position {finding['position']}: {finding['kind']}: {finding['message']}")
    if report["seed"] is not None:
        lines.extend(_seed_lines(report["seed"]))
    if report["replay"] is not None:
        lines.extend(_replay_lines(report["origin"], report["replay"]))
    projections = report.get("projections")
    if projections is None:
        lines.append("  read models: not checked")
    elif not projections["problems"]:
        lines.append("  read models: agree with the log")
    else:
        lines.append("  read models: DISAGREE with the log")
        lines.extend(f"    {problem}" for problem in projections["problems"])
    for violation in report["violations"]:
        lines.append(f"  position {violation['position']}: {violation['rule']}: {violation['message']}")
    for ruling in report["rulings"]:
        lines.append("  " + _ruling_line(ruling))
    for dispute in report["disputes"]:
        about = f" of {dispute['target']}" if dispute.get("target") else ""
        head = (
            f"  dispute {dispute['dispute_id']} filed at position {dispute['filed_at']} by {dispute['by']}: "
            f"{dispute['kind']}{about} at position {dispute['position']}: {dispute['claim']!r}"
        )
        ruling = dispute.get("ruling")
        if ruling is None:
            lines.append(f"{head}; open")
        else:
            lines.append(
                f"{head}; ruled at position {dispute['ruled_at']}: {ruling['verdict']} [{ruling['rule']}]"
                + (f" ({ruling['reason']})" if ruling.get("reason") else "")
            )
    for rnd in report["rounds"]:
        lines.append(f"  round {rnd['round']}: {rnd['winner']} scored {rnd['points']}")
    scores = ", ".join(f"{name} {points}" for name, points in report["scores"].items())
    lines.append(f"  scores: {scores or '-'}; winner: {report['winner'] or 'none yet'}")
    if report["stopped_at"] is not None:
        lines.append(f"  the game could not be followed past position {report['stopped_at']}")
    return "\n".join(lines)


def _replay_lines(origin: str, replay: dict[str, Any]) -> list[str]:
    lines = []
    diverged = replay["diverged_at"]
    if origin == "imported":
        lines.append("  replay: an imported record; today's verdict is compared with the one at import")
    elif diverged is None:
        lines.append("  replay: today's rules engine makes the same events of the same commands")
    else:
        lines.append(f"  replay: DIVERGED at position {diverged['position']}")
        lines.append(f"    stored:          {_event_text(diverged['stored'])}")
        lines.append(f"    today's engine:  {_event_text(diverged['replayed'])}")
    if replay["outcome_differs"]:
        lines.append("  outcome differs from today's replay:")
        lines.append(f"    stored:   {_outcome(replay['stored'])}")
        lines.append(f"    replayed: {_outcome(replay['replayed'])}")
    else:
        lines.append("  outcome: the stored outcome is today's replay's")
    return lines


def _seed_lines(seed: dict[str, Any]) -> list[str]:
    if seed["status"] == "none":
        return ["  seed: none recorded; the cards are as the log says"]
    status = {"secret": "secret", "revealed": f"revealed at position {seed['revealed_at']}"}.get(
        seed["status"], seed["status"]
    )
    commitment = {
        True: "commitment holds",
        False: "COMMITMENT BROKEN (the seed does not hash to the committed SHA-256)",
        None: "no commitment to check",
    }[seed["commitment_ok"]]
    lines = [f"  seed: {status}; {commitment}; cards re-derived through position {seed['checked_to']}"]
    if seed.get("committed"):
        lines.append(f"    committed SHA-256: {seed['committed']}")
    if seed.get("seed"):
        lines.append(f"    seed: {seed['seed']}")
    for mismatch in seed["mismatches"]:
        lines.append(f"    position {mismatch['position']}: DEALING MISMATCH: {mismatch['message']}")
    return lines


def _first_problem(report: dict[str, Any]) -> str | None:
    """The first thing wrong with a stored game's report, as one line (``None`` when there is none)."""
    if "error" in report:
        return str(report["error"])
    for finding in report["chain"]["findings"]:
        return f"position {finding['position']}: chain {finding['kind']}: {finding['message']}"
    unreadable = report.get("unreadable")
    if unreadable is not None:
        return f"position {unreadable['position']}: unreadable: {unreadable['message']}"
    seed = report["seed"] or {"commitment_ok": None, "mismatches": []}
    if seed["commitment_ok"] is False:
        return "the seed does not match its commitment"
    for mismatch in seed["mismatches"]:
        return f"position {mismatch['position']}: {mismatch['message']}"
    replay = report["replay"] or {"diverged_at": None, "outcome_differs": False}
    diverged = replay["diverged_at"]
    if diverged is not None:
        stored, replayed = diverged["stored"], diverged["replayed"]
        return (
            f"position {diverged['position']}: stored {stored['type'] if stored else 'nothing'}, "
            f"today's engine {replayed['type'] if replayed else 'nothing'}"
        )
    for violation in report["violations"]:
        return f"position {violation['position']}: {violation['rule']}: {violation['message']}"
    if replay["outcome_differs"]:
        return "the stored outcome differs from today's replay"
    for problem in (report.get("projections") or {}).get("problems", []):
        return f"read models: {problem}"
    return None


def _summary(report: dict[str, Any]) -> dict[str, Any]:
    """One row of ``verify --all``: a game's report in brief."""
    chain = report.get("chain")  # none when the auditor refused the game (``error``)
    replay = report.get("replay")  # none as well when the log cannot be read back as a record
    diverged = None if replay is None else replay["diverged_at"]
    return {
        "game_id": report["game_id"],
        "origin": report.get("origin"),
        "version": report.get("version"),
        "valid": bool(report["valid"]),
        "chain": None if chain is None else chain["valid"],
        "diverged_at": None if diverged is None else diverged["position"],
        "outcome_differs": None if replay is None else replay["outcome_differs"],
        "first_problem": _first_problem(report),
    }


async def _verify_every(auditor: Auditor, args: argparse.Namespace) -> int:
    from tqdm import tqdm

    total = await auditor.count_games()
    rows: list[dict[str, Any]] = []
    differs: list[tuple[str, dict[str, Any]]] = []
    with tqdm(total=total, desc="verifying", unit="game", file=sys.stderr, dynamic_ncols=True) as bar:
        async for report in auditor.verify_all(check_projections=not args.no_projections):
            rows.append(_summary(report))
            replay = report.get("replay")
            if replay is not None and replay["outcome_differs"]:
                differs.append((report["game_id"], replay))
            bar.update(1)
    invalid = [row["game_id"] for row in rows if not row["valid"]]
    if args.json:
        _print_json(
            {
                "games": len(rows),
                "invalid": invalid,
                "outcome_differs": [game_id for game_id, _ in differs],
                "reports": rows,
            }
        )
    else:
        print(_human_summary(rows, invalid, differs))
    return EXIT_INVALID if invalid else EXIT_OK


def _human_summary(
    rows: list[dict[str, Any]], invalid: list[str], differs: list[tuple[str, dict[str, Any]]]
) -> str:
    if not rows:
        return "no games stored"

    def cell(value: Any, yes: str, no: str) -> str:
        return "?" if value is None else (yes if value else no)

    header = ("GAME", "ORIGIN", "VERSION", "VALID", "CHAIN", "DIVERGED AT", "OUTCOME", "FIRST PROBLEM")
    table = [header] + [
        (
            row["game_id"],
            row["origin"] or "?",
            "?" if row["version"] is None else str(row["version"]),
            cell(row["valid"], "yes", "NO"),
            cell(row["chain"], "ok", "TAMPERED"),
            "-" if row["diverged_at"] is None else str(row["diverged_at"]),
            cell(row["outcome_differs"], "DIFFERS", "same"),
            row["first_problem"] or "-",
        )
        for row in rows
    ]
    widths = [max(len(line[column]) for line in table) for column in range(len(header) - 1)]
    lines = [
        "  ".join(value.ljust(width) for value, width in zip(line, widths, strict=False)) + "  " + line[-1]
        for line in table
    ]
    lines.append("")
    lines.append(
        f"{_count(len(rows), 'game')}: {len(rows) - len(invalid)} valid, {len(invalid)} invalid; "
        f"outcome differs from today's replay in {len(differs)}"
    )
    if invalid:
        lines.append("invalid: " + ", ".join(invalid))
    if differs:
        lines.append("outcome differs (the stored outcome is not what today's rules engine replays):")
        for game_id, replay in differs:
            diverged = replay["diverged_at"]
            where = "" if diverged is None else f"; diverged at position {diverged['position']}"
            lines.append(f"  {game_id}{where}")
            lines.append(f"    stored:   {_outcome(replay['stored'])}")
            lines.append(f"    replayed: {_outcome(replay['replayed'])}")
    return "\n".join(lines)


def _adjudicate(args: argparse.Namespace) -> int:
    kind = DISPUTE_KINDS[args.kind]

    async def work(auditor: Auditor) -> int:
        found = await auditor.adjudicate(args.game, kind, args.position, by=args.by, target=args.target)
        if args.json:
            _print_json(
                {
                    "game_id": args.game,
                    "kind": kind.value,
                    "position": found.position,
                    "recorded": found.recorded,
                    "ruling": found.ruling,
                }
            )
        else:
            print(_human_adjudication(args.game, found))
        return EXIT_OK

    return _on_auditor(args, work)


def _human_adjudication(game_id: str, found: Adjudication) -> str:
    ruling = found.ruling
    why = f" ({ruling['reason']})" if ruling.get("reason") else ""
    if found.recorded:
        where = f"the {ruling['kind']} recorded at position {found.position}"
    else:
        where = f"a {ruling['kind']} made right after position {found.position} (not in the log)"
    lines = [
        f"game {game_id}: {where}",
        f"  verdict: {ruling['verdict']}{why}",
        f"  rule: {ruling['rule']}",
        f"  by {ruling['by'] or '-'} against {ruling['against'] or '-'}",
        "  evidence:",
        *_evidence_lines(ruling["evidence"], "    "),
    ]
    if found.recorded:
        lines.append(f"  {_TABLE_SAID.get(ruling.get('applied_ok'), '')}")
    return "\n".join(lines)


def _export(args: argparse.Namespace) -> int:
    async def work(auditor: Auditor) -> int:
        command_id = _new_id() if args.reveal_seed else None
        text = await auditor.export(args.game, reveal_seed=args.reveal_seed, command_id=command_id)
        if args.json:
            sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
            _print_json({"game_id": args.game, "sha256": sha256, "record": text})
        else:
            _write_exactly(text)
        return EXIT_OK

    return _on_auditor(args, work)


def _write_exactly(text: str) -> None:
    """``text`` on standard output as UTF-8, byte for byte: no newline added or translated."""
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        buffer.write(text.encode("utf-8"))
        buffer.flush()


def _import(args: argparse.Namespace) -> int:
    from service.api.auth import new_token, token_hash
    from service.audit.auditor import Refused

    name = "standard input" if str(args.file) == "-" else str(args.file)
    try:
        data = sys.stdin.buffer.read() if str(args.file) == "-" else args.file.read_bytes()
    except OSError as error:
        print(f"uno-audit import: cannot read {name}: {error.strerror or error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        print(f"uno-audit import: {name}: line {line}: not UTF-8: {error.reason}", file=sys.stderr)
        return EXIT_USAGE
    tokens: list[str] = []

    def hashes(count: int) -> list[bytes]:
        tokens[:] = [new_token() for _ in range(count)]
        return [token_hash(token) for token in tokens]

    async def work(auditor: Auditor) -> int:
        try:
            imported = await auditor.import_record(
                text,
                tournament_id=args.tournament,
                seat_token_hashes=hashes,
                command_id=_new_id(),
                request_hash=hashlib.sha256(b"ImportRecord\0" + text.encode("utf-8")).digest(),
            )
        except Refused as refused:
            if refused.field == "record":
                raise _Stop(f"{name}: {refused.message}") from None
            raise
        report = imported.report
        seats = [
            {"seat": seat, "player": player, "token": token}
            for seat, (player, token) in enumerate(zip(imported.players, tokens, strict=False))
        ]
        if args.json:
            _print_json(
                {
                    "game_id": imported.game_id,
                    "version": imported.version,
                    "duplicate": imported.duplicate,
                    "seats": seats,
                    "valid": report["valid"],
                    "violations": len(report["violations"]),
                    "report": report,
                }
            )
        else:
            print(_human_import(name, imported.game_id, imported.version, seats, report, imported.duplicate))
        return EXIT_OK

    return _on_auditor(args, work)


def _count(number: int, thing: str) -> str:
    return f"{number} {thing}" if number == 1 else f"{number} {thing}s"


def _human_import(
    name: str,
    game_id: str,
    version: int,
    seats: list[dict[str, Any]],
    report: dict[str, Any],
    duplicate: bool,
) -> str:
    lines = [
        f"imported {name} as game {game_id}: {report['variant']}, {len(report['scores'])} players, "
        f"version {version}"
    ]
    if duplicate or not seats:
        lines.append("the record was imported before; its seat tokens were shown then, not again")
    else:
        lines.append("seat tokens (shown once: only their hashes are stored; hand each player theirs now):")
        lines.extend(f"  seat {s['seat']} {s['player']}: {s['token']}" for s in seats)
    rulings = _count(len(report["rulings"]), "ruling")
    if report["valid"]:
        lines.append(f"verdict at import: VALID ({rulings})")
    else:
        violations = _count(len(report["violations"]), "violation")
        lines.append(f"verdict at import: INVALID: {violations} ({rulings})")
        for violation in report["violations"]:
            lines.append(f"  line {violation['line']}: {violation['rule']}: {violation['message']}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
