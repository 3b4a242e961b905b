"""The arbiter's commands on stored games: ``verify --game`` / ``--all`` (with a player's receipts) and
``adjudicate``, through :class:`service.app.auditor.Auditor`; human text or, with ``--json``, one JSON
object."""

from __future__ import annotations

import argparse
import dataclasses
import uuid
from typing import TYPE_CHECKING, Any

from service.audit.render import render, render_adjudication, render_summary
from service.cli.checkpoints import MAX_RECEIPTS_FILE_BYTES, read_small, verifiers
from service.cli.console import print_json, progress_bar
from service.cli.database import on_auditor
from service.cli.exits import EXIT_INVALID, EXIT_OK, Refused
from service.cli.options import MAX_SEAT, bounded, game_id, stored_games_database
from service.domain.entries import DisputeKind

if TYPE_CHECKING:  # the database's modules load only when a command runs
    from service.app.auditor import Auditor
    from service.audit.game_report import GameSummary, ReplaySection
    from service.checkpoints.receipts import ReceiptCheck

DISPUTE_KINDS = {"catch": DisputeKind.UNO_CATCH, "challenge": DisputeKind.WD4_CHALLENGE}


def register_adjudicate(commands: Any) -> None:
    """The ``adjudicate`` command."""
    adjudicate = commands.add_parser(
        "adjudicate", help="rule on the UNO catch or Wild Draw Four challenge at a position of a stored game"
    )
    adjudicate.add_argument("kind", choices=sorted(DISPUTE_KINDS), help="catch or challenge")
    adjudicate.add_argument("--game", type=game_id, metavar="ID", required=True, help="a stored game")
    adjudicate.add_argument(
        "--position",
        type=bounded(1, 2**31 - 1),
        metavar="N",
        required=True,
        help="the position in the game's log (line n of an imported record is position n + 1)",
    )
    adjudicate.add_argument(
        "--by",
        type=bounded(0, MAX_SEAT),
        metavar="SEAT",
        help="the seat that catches or challenges, when none is recorded at the position (else compared)",
    )
    adjudicate.add_argument(
        "--target",
        type=bounded(0, MAX_SEAT),
        metavar="SEAT",
        help="the seat caught, when no catch is recorded at the position (else only compared)",
    )
    adjudicate.add_argument("--json", action="store_true", help="print the ruling as one JSON object")
    stored_games_database(adjudicate)
    adjudicate.set_defaults(run=adjudicate_command)


def verify_stored(args: argparse.Namespace) -> int:
    """``verify --game`` or ``--all``: exit 0 when every game verified is valid, 1 when one is not."""
    if args.all and args.reveal_seed:
        raise Refused("--reveal-seed goes with --game, not --all")
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
            command_id=str(uuid.uuid4()) if args.reveal_seed else None,
        )
    except Precondition as refused:
        if refused.reason != "LOG_UNREADABLE":
            raise
        # The game is stored but its log cannot be read as a game: it does not verify.
        if args.json:
            print_json(Unverified(args.game, str(refused)).to_json())
        else:
            print(f"game {args.game}: INVALID\n  {refused}")
        return EXIT_INVALID
    if args.receipts is not None:
        report = dataclasses.replace(report, receipts=tuple(await _receipt_checks(auditor, args)))
    if args.json:
        print_json(report.to_json())
    else:
        print(render(report, each_receipt=args.each))
    return EXIT_OK if report.valid else EXIT_INVALID


async def _receipt_checks(auditor: Auditor, args: argparse.Namespace) -> list[ReceiptCheck]:
    """``--receipts``: each of a player's receipts against the game's stored events."""
    from service.checkpoints.receipts import check_receipts, read_receipts

    if not args.key:
        raise Refused("--receipts needs the service's published verifier key (--key)")
    keys, witnesses = verifiers(args.key), verifiers(args.witness, "--witness")
    try:
        notes = read_receipts(read_small(args.receipts, MAX_RECEIPTS_FILE_BYTES))
    except ValueError as bad:
        raise Refused(f"{args.receipts}: {bad}") from None
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
        print_json(
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


def adjudicate_command(args: argparse.Namespace) -> int:
    """The ruling on the catch or challenge at ``--position`` of a stored game."""
    kind = DISPUTE_KINDS[args.kind]

    async def work(auditor: Auditor) -> int:
        found = await auditor.adjudicate(args.game, kind, args.position, by=args.by, target=args.target)
        if args.json:
            print_json(found.to_json())
        else:
            print(render_adjudication(found))
        return EXIT_OK

    return on_auditor(args, work)
