"""The commands on game records: ``verify`` (a record offline, a stored game or every stored game),
``export``, ``import`` and ``replay`` (the arbiter's page)."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from service.audit.render import count, finding_line, render
from service.cli.audit import MAX_JOBS, verify_stored
from service.cli.console import print_json, write_exactly
from service.cli.database import on_auditor
from service.cli.exits import EXIT_INVALID, EXIT_OK, EXIT_USAGE, Refused
from service.cli.options import MAX_SEAT, bounded, game_id, stored_games_database, tournament_id
from service.records.report import RulesReport, Unit
from service.records.verify import verify_record

if TYPE_CHECKING:  # the database's modules load only when a command runs
    from service.app.auditor import Auditor
    from service.records.record import GameRecord


def register_verify(commands: Any) -> None:
    """The ``verify`` command."""
    verify = commands.add_parser(
        "verify", help="replay and adjudicate a game record, a stored game or every stored game"
    )
    source = verify.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--record", type=Path, metavar="FILE", help="an uno-game-record/1 file, offline (- : stdin)"
    )
    source.add_argument("--game", type=game_id, metavar="ID", help="a stored game")
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
    verify.add_argument(
        "--receipts",
        type=Path,
        metavar="FILE",
        help="with --game: a player's receipts (JSON Lines of signed checkpoints) to check the log against",
    )
    verify.add_argument(
        "--key",
        action="append",
        default=[],
        metavar="VKEY",
        help="with --receipts: the service's public key",
    )
    verify.add_argument(
        "--witness", action="append", default=[], metavar="VKEY", help="with --receipts: a trusted witness"
    )
    verify.add_argument(
        "--threshold",
        type=bounded(0, 2**31 - 1),
        default=0,
        metavar="K",
        help="with --receipts: witness signatures required",
    )
    verify.add_argument(
        "--each",
        action="store_true",
        help="with --receipts: a line per receipt after the summary line (--json always lists each)",
    )
    verify.add_argument(
        "--jobs",
        type=bounded(1, MAX_JOBS),
        metavar="N",
        help="with --all: verify in N processes, each with its own connections (1: in this one); "
        "default: one per core this command may use, when the store has games enough to share",
    )
    stored_games_database(verify)
    verify.set_defaults(run=verify_command)


def verify_command(args: argparse.Namespace) -> int:
    """Verify ``--game``, ``--all`` or, offline, ``--record``; exit 0 when valid, 1 when not."""
    if args.receipts is not None and args.game is None:
        raise Refused("--receipts goes with --game")
    if args.each and args.receipts is None:
        raise Refused("--each goes with --receipts")
    if args.jobs is not None and not args.all:
        raise Refused("--jobs goes with --all")
    if args.game is not None or args.all:
        return verify_stored(args)
    for flag, given in (("--reveal-seed", args.reveal_seed), ("--no-projections", args.no_projections)):
        if given:
            raise Refused(f"{flag} goes with --game or --all, not --record")
    record = load_record("verify", args.record)
    if record is None:
        return EXIT_USAGE
    report = verify_record(record)
    if args.json:
        print_json(report.to_json())
    else:
        print(render(report))
    return EXIT_OK if report.valid else EXIT_INVALID


def register_export(commands: Any) -> None:
    """The ``export`` command."""
    export = commands.add_parser("export", help="write a stored game's record to standard output")
    export.add_argument("--game", type=game_id, metavar="ID", required=True, help="a stored game")
    export.add_argument(
        "--reveal-seed",
        action="store_true",
        help="a game in progress: reveal its seed (recorded in its log) so that it can be exported",
    )
    export.add_argument(
        "--json", action="store_true", help="print {game_id, sha256, record} instead of the bare record"
    )
    stored_games_database(export)
    export.set_defaults(run=export_command)


def register_import(commands: Any) -> None:
    """The ``import`` command."""
    imports = commands.add_parser("import", help="store a table game's record as an imported game")
    imports.add_argument("file", type=Path, metavar="FILE", help="an uno-game-record/1 file (- : stdin)")
    imports.add_argument(
        "--tournament", type=tournament_id, default="", metavar="T", help="the tournament it belongs to"
    )
    imports.add_argument("--json", action="store_true", help="print one JSON object")
    stored_games_database(imports)
    imports.set_defaults(run=import_command)


def register_replay(commands: Any) -> None:
    """The ``replay`` command."""
    replay = commands.add_parser(
        "replay", help="the arbiter's replay of a record or a stored game: one self-contained HTML page"
    )
    replayed = replay.add_mutually_exclusive_group(required=True)
    replayed.add_argument("--record", type=Path, help="an uno-game-record/1 file (offline)")
    replayed.add_argument("--game", type=game_id, metavar="ID", help="a stored game")
    replay.add_argument(
        "--out", type=Path, metavar="FILE", help="write the page here (default: standard output)"
    )
    replay.add_argument(
        "--as-seat",
        type=bounded(0, MAX_SEAT),
        metavar="N",
        help="only what seat N may see: its own hand, the others' counts (default: every hand)",
    )
    stored_games_database(replay)
    replay.set_defaults(run=replay_command)


def _new_id() -> str:
    return str(uuid.uuid4())


def export_command(args: argparse.Namespace) -> int:
    """Write a stored game's record on standard output, byte for byte (``--json``: with its SHA-256)."""

    async def work(auditor: Auditor) -> int:
        command_id = _new_id() if args.reveal_seed else None
        text = await auditor.export(args.game, reveal_seed=args.reveal_seed, command_id=command_id)
        if args.json:
            sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
            print_json({"game_id": args.game, "sha256": sha256, "record": text})
        else:
            write_exactly(text)
        return EXIT_OK

    return on_auditor(args, work)


def import_command(args: argparse.Namespace) -> int:
    """Store a table game's record as an imported game; print its id, seat tokens and verdict."""
    from service.domain.auth import new_token, token_hash
    from service.domain.errors import InvalidInput

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
        except InvalidInput as refused:
            if refused.field == "record":
                raise Refused(f"{name}: {refused.detail}") from None
            raise
        report = imported.report
        # A record imported before is that game, whose tokens were shown then: the ones made now are not
        # stored anywhere, so they are not shown either.
        seats = [
            _Seat(seat, player, token)
            for seat, (player, token) in enumerate(zip(imported.players, tokens, strict=False))
            if not imported.duplicate
        ]
        if args.json:
            print_json(
                {
                    "game_id": imported.game_id,
                    "version": imported.version,
                    "duplicate": imported.duplicate,
                    "seats": [seat.to_json() for seat in seats],
                    "valid": report.valid,
                    "violations": len(report.violations),
                    "report": report.to_json(),
                }
            )
        else:
            print(_human_import(name, imported.game_id, imported.version, seats, report, imported.duplicate))
        return EXIT_OK

    return on_auditor(args, work)


@dataclass(frozen=True, slots=True)
class _Seat:
    """A seat of an imported game and its new token (shown once)."""

    seat: int
    player: str
    token: str

    def to_json(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def _human_import(
    name: str, game_id: str, version: int, seats: list[_Seat], report: RulesReport, duplicate: bool
) -> str:
    game = f"game {game_id}: {report.variant.value}, {len(report.outcome.scores)} players, version {version}"
    lines = [f"{name} was imported before, as {game}" if duplicate else f"imported {name} as {game}"]
    if duplicate or not seats:
        lines.append("nothing stored again; its seat tokens were shown at its import, not again")
    else:
        lines.append("seat tokens (shown once: only their hashes are stored; hand each player theirs now):")
        lines.extend(f"  seat {s.seat} {s.player}: {s.token}" for s in seats)
    rulings = count(len(report.rulings), "ruling")
    if report.valid:
        lines.append(f"verdict at import: VALID ({rulings})")
    else:
        violations = count(len(report.violations), "violation")
        lines.append(f"verdict at import: INVALID: {violations} ({rulings})")
        lines.extend(f"  {finding_line(violation, Unit.LINE)}" for violation in report.violations)
    return "\n".join(lines)


def replay_command(args: argparse.Namespace) -> int:
    """``uno-audit replay``: the arbiter's replay page of a record file (offline) or a stored game, on
    standard output or in ``--out``. Exit 0 once written, whatever the game's verdict (the page says it)."""
    if args.record is not None:
        return _replay_record(args)

    async def work(auditor: Auditor) -> int:
        return _write_page(args, await auditor.replay(args.game, seat=args.as_seat))

    return on_auditor(args, work)


def load_record(command: str, path: Path) -> GameRecord | None:
    """The record in the file at ``path``, or on standard input for ``-`` (``curl … | uno-audit verify
    --record -``), read as :func:`~service.records.record.read_record_file` reads a file; ``None`` once one
    line on standard error has said why it cannot be read."""
    from service.records.record import RecordError, read_record, read_record_file

    name = "standard input" if str(path) == "-" else str(path)
    try:
        if str(path) != "-":
            return read_record_file(path)
        data = sys.stdin.buffer.read()
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            raise RecordError(data.count(b"\n", 0, error.start) + 1, f"not UTF-8: {error.reason}") from None
        return read_record(text)
    except RecordError as error:
        print(f"uno-audit {command}: {name}: {error}", file=sys.stderr)
    except OSError as error:
        print(f"uno-audit {command}: cannot read {name}: {error.strerror or error}", file=sys.stderr)
    return None


def _replay_record(args: argparse.Namespace) -> int:
    from service.audit.replay_html import SeatError, record_replay_html
    from service.records.verify import verify_record

    record = load_record("replay", args.record)
    if record is None:
        return EXIT_USAGE
    try:
        page = record_replay_html(record, verify_record(record), seat=args.as_seat, title=args.record.name)
    except SeatError as error:
        print(f"uno-audit replay: --as-seat: {error}", file=sys.stderr)
        return EXIT_USAGE
    return _write_page(args, page)


def _write_page(args: argparse.Namespace, page: str) -> int:
    if args.out is None:
        write_exactly(page)
        return EXIT_OK
    try:
        args.out.write_text(page, encoding="utf-8")
    except OSError as error:
        print(f"uno-audit replay: cannot write {args.out}: {error.strerror or error}", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {args.out}: open it in a browser, ← and → step through the positions")
    return EXIT_OK
