"""The arbiter's commands on stored games: ``verify --game`` / ``--all``, ``adjudicate``, ``export``,
``import`` (usage: :mod:`service.cli.main`).

They talk to the database directly (``--database-url``, default ``$DATABASE_URL``), migrating it first,
through :class:`service.app.auditor.Auditor`, and print human text or, with ``--json``, one JSON object.
A refusal or a database that cannot be used gets one line on standard error and exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import json
import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from service.audit.render import count, finding_line, render, render_adjudication, render_summary
from service.domain.entries import DisputeKind
from service.records.report import RulesReport, Unit

if TYPE_CHECKING:  # the database's modules load only when a command runs
    from tqdm import tqdm

    from service.app.auditor import Auditor
    from service.audit.game_report import GameSummary, ReplaySection
    from service.checkpoints.receipts import ReceiptCheck
    from service.records.record import GameRecord

#: The exit statuses of every ``uno-audit`` command: done (valid), invalid, bad usage or refused.
EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
DISPUTE_KINDS = {"catch": DisputeKind.UNO_CATCH, "challenge": DisputeKind.WD4_CHALLENGE}


class _Stop(Exception):
    """A command on stored games that cannot go on: a one-line message for standard error, and the exit
    status (bad usage, an unknown game, a refusal: 2)."""

    def __init__(self, message: str, status: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.status = status


def progress_bar(total: int, desc: str, unit: str) -> tqdm[NoReturn]:
    """A progress bar on standard error, drawn only when standard error is a terminal: it is for a person
    watching; piped or logged, standard error gets nothing but errors."""
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        file=sys.stderr,
        dynamic_ncols=True,
        disable=not sys.stderr.isatty(),
    )


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def on_auditor(args: argparse.Namespace, work: Callable[[Auditor], Awaitable[int]]) -> int:
    """Run ``work`` with an auditor over the database at ``args.database_url`` (or the embedded one in
    ``args.data_dir``), migrated first; its exit status, or 2 with a one-line message for a refusal or a
    database that cannot be used."""
    import psycopg
    import structlog
    from psycopg_pool import PoolTimeout

    from projections.check import check_game
    from service.app.auditor import Auditor
    from service.domain.errors import ServiceError, exit_code
    from service.store import EventStore, StoreError

    # Standard output is the command's report (one JSON object with --json): whatever the auditor logs
    # (a game ``verify --all`` could not verify and went on past) goes to standard error.
    structlog.configure(logger_factory=lambda *_: structlog.PrintLogger(sys.stderr))
    url: str | None = args.database_url
    embedded = None
    if url is None:
        data_dir: Path = args.data_dir
        if not data_dir.is_dir():
            print(
                f"uno-audit {args.command}: no database: give --database-url (or $DATABASE_URL), or run "
                f"`uno-audit serve` first, which keeps an embedded one in {data_dir}",
                file=sys.stderr,
            )
            return EXIT_USAGE
        from service.ops.embedded import embedded_database

        url, embedded = embedded_database(data_dir)  # shared with a `serve` running on the same folder

    async def run(url: str) -> int:
        # Fail fast, with the server's own words, rather than after the pool's 30 s of retries; libpq
        # gives up after $PGCONNECT_TIMEOUT seconds (main() makes 10 the default), as for every command.
        try:
            probe = await psycopg.AsyncConnection.connect(url)
        except psycopg.Error as error:
            raise _Stop(f"cannot connect to the database: {_one_line(error)}") from None
        await probe.close()
        store = await EventStore.open(url, max_size=4)
        try:
            await store.migrate()
            return await work(Auditor(store, check_game))
        finally:
            await store.close()

    try:
        return asyncio.run(run(url))
    except _Stop as stop:
        print(f"uno-audit {args.command}: {stop}", file=sys.stderr)
        return stop.status
    except ServiceError as refused:
        print(f"uno-audit {args.command}: {refused}", file=sys.stderr)
        return exit_code(refused)
    except (psycopg.Error, PoolTimeout, StoreError) as error:
        print(f"uno-audit {args.command}: database: {_one_line(error)}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        if embedded is not None:
            embedded.cleanup()  # stops it only if no other process (a `serve`) uses it


def _new_id() -> str:
    return str(uuid.uuid4())


def _print_json(value: object) -> None:
    print(json.dumps(value, ensure_ascii=False))


def verify_stored(args: argparse.Namespace) -> int:
    if args.all and args.reveal_seed:
        print("uno-audit verify: --reveal-seed goes with --game, not --all", file=sys.stderr)
        return EXIT_USAGE
    if args.game is not None:
        return on_auditor(args, lambda auditor: _verify_game(auditor, args))
    return on_auditor(args, lambda auditor: _verify_every(auditor, args))


async def _verify_game(auditor: Auditor, args: argparse.Namespace) -> int:
    from service.audit.game_report import Unverified
    from service.domain.errors import Precondition

    try:
        report = await auditor.verify(
            args.game,
            check_projections=not args.no_projections,
            reveal_seed=args.reveal_seed,
            command_id=_new_id() if args.reveal_seed else None,
        )
    except Precondition as refused:
        if refused.reason != "LOG_UNREADABLE":
            raise
        # The game is stored but its log cannot be read as a game: it does not verify.
        if args.json:
            _print_json(Unverified(args.game, str(refused)).to_json())
        else:
            print(f"game {args.game}: INVALID\n  {refused}")
        return EXIT_INVALID
    receipts = await _receipt_checks(auditor, args) if args.receipts is not None else None
    valid = report.valid and (receipts is None or all(check.ok for check in receipts))
    if args.json:
        out = report.to_json()
        if receipts is not None:
            out["receipts"] = [check.to_json() for check in receipts]
            out["valid"] = valid
        _print_json(out)
    else:
        text = render(report)
        if report.valid and not valid:  # the game itself holds together; a receipt says it was rewritten
            first, _, rest = text.partition("\n")
            text = f"{first.replace(': VALID', ': INVALID')} (a receipt does not match the log)\n{rest}"
        print(text)
        for check in receipts or ():
            verdict = check.verdict.upper()
            print(f"  receipt {check.index + 1} (version {check.version}): {verdict}: {check.message}")
    return EXIT_OK if valid else EXIT_INVALID


async def _receipt_checks(auditor: Auditor, args: argparse.Namespace) -> list[ReceiptCheck]:
    """``--receipts``: each of a player's receipts against the game's stored events."""
    from service.checkpoints.receipts import check_receipts, read_receipts
    from service.cli.checkpoints import MAX_RECEIPTS_FILE_BYTES, Refused, read_small, verifiers

    try:
        if not args.key:
            raise Refused("--receipts needs the service's published verifier key (--key)")
        keys, witnesses = verifiers(args.key), verifiers(args.witness, "--witness")
        try:
            notes = read_receipts(read_small(args.receipts, MAX_RECEIPTS_FILE_BYTES))
        except ValueError as bad:
            raise Refused(f"{args.receipts}: {bad}") from None
    except Refused as refused:
        raise _Stop(str(refused)) from None
    rows = await auditor.store.read_stream(args.game)
    return check_receipts(
        args.game,
        rows,
        notes,
        service=keys[0].name,
        log_keys=keys,
        witnesses=witnesses,
        threshold=args.threshold,
    )


async def _verify_every(auditor: Auditor, args: argparse.Namespace) -> int:
    from service.audit.game_report import GameReport

    total = await auditor.count_games()
    rows: list[GameSummary] = []
    differs: list[tuple[str, ReplaySection]] = []
    with progress_bar(total, "verifying", "game") as bar:
        async for report in auditor.verify_all(check_projections=not args.no_projections):
            rows.append(report.summary())
            replay = report.replay if isinstance(report, GameReport) else None
            if replay is not None and replay.outcome_differs:
                differs.append((report.game_id, replay))
            bar.update(1)
    invalid = [row.game_id for row in rows if not row.valid]
    if args.json:
        _print_json(
            {
                "games": len(rows),
                "invalid": invalid,
                "outcome_differs": [game_id for game_id, _ in differs],
                "reports": [row.to_json() for row in rows],
            }
        )
    else:
        print(render_summary(rows, invalid, differs))
    return EXIT_INVALID if invalid else EXIT_OK


def adjudicate(args: argparse.Namespace) -> int:
    kind = DISPUTE_KINDS[args.kind]

    async def work(auditor: Auditor) -> int:
        found = await auditor.adjudicate(args.game, kind, args.position, by=args.by, target=args.target)
        if args.json:
            _print_json(found.to_json())
        else:
            print(render_adjudication(found))
        return EXIT_OK

    return on_auditor(args, work)


def export(args: argparse.Namespace) -> int:
    async def work(auditor: Auditor) -> int:
        command_id = _new_id() if args.reveal_seed else None
        text = await auditor.export(args.game, reveal_seed=args.reveal_seed, command_id=command_id)
        if args.json:
            sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
            _print_json({"game_id": args.game, "sha256": sha256, "record": text})
        else:
            _write_exactly(text)
        return EXIT_OK

    return on_auditor(args, work)


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


def import_record(args: argparse.Namespace) -> int:
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
                raise _Stop(f"{name}: {refused.detail}") from None
            raise
        report = imported.report
        seats = [
            _Seat(seat, player, token)
            for seat, (player, token) in enumerate(zip(imported.players, tokens, strict=False))
        ]
        if args.json:
            _print_json(
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
    lines = [
        f"imported {name} as game {game_id}: {report.variant.value}, {len(report.outcome.scores)} players, "
        f"version {version}"
    ]
    if duplicate or not seats:
        lines.append("the record was imported before; its seat tokens were shown then, not again")
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


def replay(args: argparse.Namespace) -> int:
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
        _write_exactly(page)
        return EXIT_OK
    try:
        args.out.write_text(page, encoding="utf-8")
    except OSError as error:
        print(f"uno-audit replay: cannot write {args.out}: {error.strerror or error}", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {args.out}: open it in a browser, ← and → step through the positions")
    return EXIT_OK
