"""The arbiter's commands on stored games: ``verify --game`` / ``--all`` (with a player's receipts) and
``adjudicate``, through :class:`service.app.auditor.Auditor`; human text or, with ``--json``, one JSON
object. ``verify --all --jobs N`` shares the games out to N processes (:func:`verify_in_processes`) and
prints what one process would, byte for byte."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import math
import os
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from service.audit.render import render, render_adjudication, render_summary
from service.cli.checkpoints import MAX_RECEIPTS_FILE_BYTES, read_small, verifiers
from service.cli.console import print_json, progress_bar
from service.cli.database import database_url, on_auditor
from service.cli.exits import EXIT_INVALID, EXIT_OK, Refused, one_line
from service.cli.options import MAX_SEAT, bounded, game_id, stored_games_database
from service.domain.entries import DisputeKind

if TYPE_CHECKING:  # the database's modules load only when a command runs
    from service.app.auditor import Auditor
    from service.audit.game_report import GameReport, GameSummary, ReplaySection, Unverified
    from service.checkpoints.receipts import ReceiptCheck
    from service.store import StoredEvent

DISPUTE_KINDS = {"catch": DisputeKind.UNO_CATCH, "challenge": DisputeKind.WD4_CHALLENGE}
#: The most processes ``verify --all --jobs`` takes (more than any machine it runs on has cores for).
MAX_JOBS = 64
#: The most games a process is handed at a time: small enough that the processes finish together and the
#: progress bar moves, large enough that handing them over costs nothing beside verifying them (~1 s).
MAX_CHUNK = 64
#: Without ``--jobs``, a store of fewer games than this per core is verified in this process: starting
#: a process (an interpreter, the service's modules, a connection) costs about what verifying them does.
MIN_GAMES_PER_PROCESS = 32
#: The connections each verifying process opens at most: the reads of the game after the one it verifies
#: need no more to keep ahead, and 64 processes must not take a default server's 100 connections.
WORKER_CONNECTIONS = 2
#: What a game's row of ``verify --all`` needs: its summary, and its replay when the outcome differs.
Brief = tuple["GameSummary", "ReplaySection | None"]


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
    # The URL is the processes' (each opens its own connections): the embedded database, if that is the
    # one, stays up until they are done, and on_auditor uses it rather than starting it again.
    with database_url(args) as url:
        given = argparse.Namespace(**{**vars(args), "database_url": url})
        return on_auditor(given, lambda auditor: _verify_every(auditor, given))


async def _verify_game(auditor: Auditor, args: argparse.Namespace) -> int:
    from service.audit.game_report import Unverified, lost_game
    from service.domain.errors import NotFound, Precondition

    # The receipts first: a missing key or an unreadable file is refused before any work is done.
    notes = None if args.receipts is None else _receipts_file(args)
    try:
        report = await auditor.verify(
            args.game,
            check_projections=not args.no_projections,
            reveal_seed=args.reveal_seed,
            command_id=str(uuid.uuid4()) if args.reveal_seed else None,
        )
    except NotFound as unknown:
        if notes is None or unknown.reason != "UNKNOWN_GAME":
            raise
        # The store does not know the game: lost if a genuine receipt names it, else "no game" (exit 2).
        lost = lost_game(args.game, _check_receipts(args, [], notes))
        if args.json:
            print_json(lost.to_json())
        else:
            print(render(lost, each_receipt=args.each))
        return EXIT_INVALID
    except Precondition as refused:
        if refused.reason != "LOG_UNREADABLE":
            raise
        # The game is stored but its log cannot be read as a game: it does not verify.
        if args.json:
            print_json(Unverified(args.game, str(refused)).to_json())
        else:
            print(f"game {args.game}: INVALID\n  {refused}")
        return EXIT_INVALID
    if notes is not None:
        rows = await auditor.store.read_stream(args.game)
        report = dataclasses.replace(report, receipts=tuple(_check_receipts(args, rows, notes)))
    if args.json:
        print_json(report.to_json())
    else:
        print(render(report, each_receipt=args.each))
    return EXIT_OK if report.valid else EXIT_INVALID


def _receipts_file(args: argparse.Namespace) -> list[str]:
    """``--receipts``: a player's receipts, as signed notes; :class:`Refused` without ``--key`` or for a
    file that cannot be read as receipts (a line that is not one names the whole file unusable)."""
    from service.checkpoints.receipts import read_receipts

    if not args.key:
        raise Refused("--receipts needs the service's published verifier key (--key)")
    verifiers(args.key)  # a malformed key is refused here too, before the game is read
    verifiers(args.witness, "--witness")
    try:
        return read_receipts(read_small(args.receipts, MAX_RECEIPTS_FILE_BYTES))
    except ValueError as bad:
        raise Refused(f"{args.receipts}: {bad}") from None


def _check_receipts(
    args: argparse.Namespace, rows: Sequence[StoredEvent], notes: list[str]
) -> list[ReceiptCheck]:
    """Each of a player's receipts against the game's stored ``rows`` (none: the store does not know it)."""
    from service.checkpoints.receipts import check_receipts

    keys, witnesses = verifiers(args.key), verifiers(args.witness, "--witness")
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
    ids = await auditor.game_ids()
    processes = _processes(args.jobs, len(ids))
    if processes > 1:  # no more than the server has connections left for
        processes = max(1, min(processes, await _connections_left(auditor) // WORKER_CONNECTIONS))
    briefs = (
        verify_in_processes(args.database_url, ids, processes, not args.no_projections)
        if processes > 1
        else _verify_here(auditor, not args.no_projections)
    )
    rows: list[GameSummary] = []
    differs: list[tuple[str, ReplaySection]] = []
    with progress_bar(len(ids), "verifying", "game") as bar:
        async for chunk in briefs:
            for summary, replay in chunk:
                rows.append(summary)
                if replay is not None and replay.outcome_differs:
                    differs.append((summary.game_id, replay))
            bar.update(len(chunk))
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


def _brief(report: GameReport | Unverified) -> Brief:
    from service.audit.game_report import GameReport

    return report.summary(), report.replay if isinstance(report, GameReport) else None


def _processes(jobs: int | None, games: int) -> int:
    """How many processes verify ``games`` games: ``--jobs`` (never more than the games), else one per
    core this process may use, as long as each has :data:`MIN_GAMES_PER_PROCESS` games; 1: this one."""
    if jobs is not None:
        return max(1, min(jobs, games))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cores, MAX_JOBS, games // MIN_GAMES_PER_PROCESS))


async def _connections_left(auditor: Auditor) -> int:
    """How many more connections the server takes now (beside those kept for superusers)."""
    async with auditor.store.connection() as conn:
        cursor = await conn.execute(
            "SELECT current_setting('max_connections')::int"
            " - current_setting('superuser_reserved_connections')::int - count(*)::int"
            " FROM pg_stat_activity WHERE backend_type = 'client backend'"
        )
        row = await cursor.fetchone()
    return int(row[0]) if row is not None else 0


async def _verify_here(auditor: Auditor, check_projections: bool) -> AsyncIterator[list[Brief]]:
    """Every game's brief, verified in this process (:meth:`Auditor.verify_all`), one at a time."""
    async for report in auditor.verify_all(check_projections=check_projections):
        yield [_brief(report)]


async def verify_in_processes(
    url: str, ids: Sequence[str], processes: int, check_projections: bool
) -> AsyncIterator[list[Brief]]:
    """The briefs of ``ids`` verified by ``processes`` processes, chunk by chunk in the order of ``ids``
    (each process verifies the chunks it is handed as :meth:`Auditor.verify_many` does, over its own
    connections: :func:`_verify_chunk`)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    size = min(MAX_CHUNK, max(1, math.ceil(len(ids) / (processes * 4))))
    chunks = [list(ids[start : start + size]) for start in range(0, len(ids), size)]
    # spawn: this process has threads (the connection pool's), which a forked child would inherit
    # half-way through whatever they were doing.
    pool = ProcessPoolExecutor(
        processes, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker
    )
    try:
        futures = [pool.submit(_verify_chunk, url, chunk, check_projections) for chunk in chunks]
        for future in futures:
            yield await asyncio.wrap_future(future)
    except WorkerRefused as refused:
        raise Refused(str(refused)) from None
    except BrokenProcessPool as broken:
        raise Refused(f"a verifying process stopped: {broken}") from None
    finally:
        # Interrupted or failed: the chunks not started are dropped; those started end (about a second).
        pool.shutdown(wait=True, cancel_futures=True)


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


# --- a process of ``verify --all --jobs N`` ---------------------------------------------------------------


class WorkerRefused(Exception):
    """A verifying process that cannot use the database: its reason, on one line (what the command says)."""


#: A verifying process's event loop and auditor, made at its first chunk and kept for the next ones.
_worker: tuple[asyncio.AbstractEventLoop, Auditor] | None = None


def _start_worker() -> None:
    """Set up a verifying process: Ctrl-C is the command's to handle (it stops handing out chunks), and what
    the auditor logs goes to standard error, as in the command's own process."""
    import signal
    import sys

    import structlog

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    structlog.configure(logger_factory=lambda *_: structlog.PrintLogger(sys.stderr))


def _verify_chunk(url: str, ids: list[str], check_projections: bool) -> list[Brief]:
    """In a verifying process: the briefs of ``ids`` (:meth:`Auditor.verify_many`), over the process's own
    connections to ``url`` (opened at its first chunk; the database is migrated already)."""
    global _worker
    if _worker is None:
        _worker = _open_worker(url)
    loop, auditor = _worker

    async def verify() -> list[Brief]:
        return [
            _brief(report) async for report in auditor.verify_many(ids, check_projections=check_projections)
        ]

    return loop.run_until_complete(verify())


def _open_worker(url: str) -> tuple[asyncio.AbstractEventLoop, Auditor]:
    import atexit

    import psycopg
    from psycopg_pool import PoolTimeout

    from projections.check import check_game
    from service.app.auditor import Auditor
    from service.store import EventStore, StoreError

    loop = asyncio.new_event_loop()
    try:
        store = loop.run_until_complete(EventStore.open(url, max_size=WORKER_CONNECTIONS))
    except (psycopg.Error, PoolTimeout, StoreError) as error:
        raise WorkerRefused(f"database: {one_line(error)}") from None
    # The pool's connections are closed when the process ends (after the command's last chunk).
    atexit.register(lambda: loop.run_until_complete(store.close()))
    return loop, Auditor(store, check_game)
