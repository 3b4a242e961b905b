"""``uno-audit publish --tournament T --out DIR``: a tournament's public static site (service/audit/site.py).

It signs the tournament's checkpoint with the key ``checkpoint`` uses (``--key-file``, else
``$UNO_AUDIT_CHECKPOINT_KEY``, else ``DATA_DIR/checkpoint.key``), verifies every game as ``verify`` does,
and writes the site into DIR: a new or empty folder, or one publish made before (replaced whole, its
checkpoint kept as the previous one, with the consistency proof from it). Exit 0 when written, 2 when
refused (an unknown tournament, a folder of someone else's, no key, a previous checkpoint the new tree
does not extend).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from service.checkpoints import (
    KEY_ENV,
    GameInclusion,
    NoteError,
    NoteVerificationError,
    ProofError,
    Receipt,
    Signer,
    TournamentLeaf,
    open_checkpoint,
    tournament_checkpoint,
    tournament_origin,
    tournament_tree,
    verify_consistency,
)
from service.cli.checkpoints import (
    SERVE_KEY_FILE,
    consistency_to_json,
    inclusion_to_json,
    read_small,
    signing_key,
)
from service.cli.database import on_auditor
from service.cli.exits import EXIT_OK, Refused
from service.cli.options import stored_games_database
from service.cli.tournaments import tournament_name

if TYPE_CHECKING:  # the database's modules load only when the command runs
    from projections.queries import TournamentGame
    from service.app.auditor import Auditor
    from service.audit.game_report import GameReport, Unverified
    from service.audit.site import Previous, SiteGame

#: The tournament's games are listed a page at a time.
_PAGE = 500


def register(commands: Any) -> None:
    """The ``publish`` command."""
    publish = commands.add_parser("publish", help="write a tournament's public site, with its proofs")
    publish.add_argument(
        "--tournament", type=tournament_name, required=True, metavar="T", help="the tournament's id"
    )
    publish.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="DIR",
        help="the site's folder: new, empty, or one publish made before (then replaced)",
    )
    publish.add_argument(
        "--key-file",
        type=Path,
        metavar="FILE",
        help=f"the signing key (else ${KEY_ENV}, else the key serve keeps: DATA_DIR/{SERVE_KEY_FILE})",
    )
    stored_games_database(publish)
    publish.set_defaults(run=publish_command)


def publish_command(args: argparse.Namespace) -> int:
    """Check the folder and the key before reading anything, then build and write the site."""
    from service.audit.site import SiteError, check_out

    try:
        check_out(args.out)
    except SiteError as bad:
        raise Refused(f"--out: {bad}") from None
    signer = signing_key(args.key_file, args.data_dir)
    previous = _previous_checkpoint(args.out, signer, args.tournament)
    return on_auditor(args, lambda auditor: _publish(auditor, signer, args, previous))


def _previous_checkpoint(out: Path, signer: Signer, tournament: str) -> Receipt | None:
    """The signed checkpoint of the site publish made in ``out`` before, opened with the signing key's
    verifier; ``None`` for a new site. :class:`Refused` if it is not one of this tournament's by this key:
    the new site could not show its history (a new folder starts one afresh)."""
    from service.audit.site import MARKER

    path = out / "checkpoint.txt"
    if not (out / MARKER).is_file() or not path.is_file():
        return None
    try:
        previous = open_checkpoint(read_small(path), [signer.verifier])
    except (NoteError, NoteVerificationError) as bad:
        raise Refused(f"--out: {path} is not a checkpoint signed by the key {signer.name}: {bad}") from None
    origin = tournament_origin(signer.name, tournament)
    if previous.origin != origin:
        raise Refused(f"--out: {path} is the checkpoint of {previous.origin}, not of {origin}") from None
    return previous


def _format_1(leaves: Sequence[TournamentLeaf]) -> list[TournamentLeaf]:
    """``leaves`` as leaf format 1 signed them (id, version, head): to recognise a checkpoint of before."""
    return [TournamentLeaf(leaf.game_id, leaf.version, leaf.head_hash) for leaf in leaves]


def _history(
    previous: Receipt, leaves: Sequence[TournamentLeaf], root: bytes, tournament: str, out: Path
) -> Previous:
    """The previous checkpoint and the consistency proof from it to ``tree``'s head ``root``, checked
    here (``prove`` would prove from any size, whatever root was signed at it); :class:`Refused` when the
    new tree does not extend the old one, rather than publish a site that hides its history."""
    from service.audit.site import Previous

    tree = tournament_tree(leaves)
    old, size = previous.size, tree.size
    where = f"the previous checkpoint in {out} ({old} games)"
    if old > size:
        raise Refused(f"{where} signs more games than the tournament has finished ({size})")
    proof = tree.consistency_proof(old, size)
    try:
        verify_consistency(old, size, proof, previous.root_hash, root)
    except ProofError as broken:
        if tournament_tree(_format_1(leaves[:old])).root() == previous.root_hash:
            raise Refused(
                f"{where} signs the same first {old} games in leaf format 1, before leaves named their "
                "players: a format-2 tree cannot be proved to extend it; publish into a new folder (the old "
                "site's checkpoint and proofs still verify as they are)"
            ) from None
        raise Refused(f"{where} is not a prefix of the tournament's {size}: {broken}") from None
    consistency = None if old in (0, size) else consistency_to_json(tournament, old, size, proof)
    return Previous(previous.note, old, previous.root_hash, consistency)


async def _publish(
    auditor: Auditor, signer: Signer, args: argparse.Namespace, previous: Receipt | None
) -> int:
    from projections import queries
    from service.audit.site import Site, SiteError, site_files, write_site
    from service.audit.tournaments import ChainBroken, UnknownTournament, tournament_leaves

    store, tournament = auditor.store, args.tournament
    try:
        leaves = await tournament_leaves(store, tournament)
    except ChainBroken as broken:
        raise Refused(f"{broken}; verify the game before signing anything") from None
    except UnknownTournament as unknown:
        raise Refused(str(unknown)) from None
    checkpoint = tournament_checkpoint(signer.name, tournament, leaves)
    tree = tournament_tree(leaves)
    history = (
        None if previous is None else _history(previous, leaves, checkpoint.root_hash, tournament, args.out)
    )
    listed: list[queries.TournamentGame] = []
    while True:
        page = await queries.tournament_games(
            store, tournament, after=listed[-1].game_id if listed else "", limit=_PAGE
        )
        listed += page
        if len(page) < _PAGE:
            break
    standings = await queries.standings(store, tournament)
    reports = {report.game_id: report async for report in auditor.verify_many(g.game_id for g in listed)}
    indexes = {leaf.game_id: index for index, leaf in enumerate(leaves)}
    games = []
    for game in listed:
        index = indexes.get(game.game_id)
        inclusion = None
        if index is not None:  # a leaf: its proof against the tree just signed
            inclusion = GameInclusion(leaves[index], index, tree.size, tree.inclusion_proof(index))
        games.append(await _game(auditor, game, reports[game.game_id], inclusion, tournament))
    site = Site(
        tournament=tournament,
        note=checkpoint.sign(signer),
        size=checkpoint.size,
        root_hash=checkpoint.root_hash,
        keys=(signer.verifier.encode(),),
        games=tuple(games),
        standings=tuple(dataclasses.asdict(row) for row in standings.rows),
        position=standings.cursor.position,
        previous=history,
    )
    try:
        write_site(args.out, site_files(site))
    except SiteError as bad:
        raise Refused(f"--out: {bad}") from None
    leaf_count = sum(game.inclusion is not None for game in games)
    print(f"published tournament {tournament}: {len(games)} games, {leaf_count} signed, in {args.out}")
    if history is not None:
        print(_history_line(history, checkpoint.size, args.out))
    return EXIT_OK


def _history_line(history: Previous, size: int, out: Path) -> str:
    from service.audit.site import CONSISTENCY, PREVIOUS

    if history.consistency is None:
        nothing = "it signed no game" if history.size == 0 else "the same games"
        return f"previous checkpoint kept as {out / PREVIOUS}: {nothing}, nothing to prove"
    return (
        f"consistent with the previous checkpoint (size {history.size} \u2192 {size}): "
        f"{out / PREVIOUS}, {out / CONSISTENCY}"
    )


async def _game(
    auditor: Auditor,
    game: TournamentGame,
    report: GameReport | Unverified,
    proved: GameInclusion | None,
    tournament: str,
) -> SiteGame:
    """One game as the site shows it: its verdict, its public replay, and (a leaf) its proof and the row
    that binds its result."""
    from service.audit.game_report import GameReport
    from service.audit.log import LogError
    from service.audit.replay_html import game_replay_html
    from service.audit.site import SiteGame, game_end, signed_result
    from service.records.record import RecordError

    summary = report.summary()
    replay = None
    if isinstance(report, GameReport):
        log = await auditor.load(game.game_id)
        try:  # the replay is CPU work: off the event loop, as the auditor's own
            page = functools.partial(game_replay_html, log, report, public=True)
            replay = await asyncio.to_thread(page)
        except (LogError, RecordError) as unreadable:
            print(f"uno-audit publish: game {game.game_id}: no replay: {unreadable}", file=sys.stderr)
    inclusion: dict[str, Any] | None = None
    end, result = None, _listed_result(game)
    if proved is not None:
        inclusion = inclusion_to_json(tournament, proved)
        rows = await auditor.store.read_stream(game.game_id)
        try:
            end = game_end(rows[proved.leaf.version - 1], proved.leaf)
        except ValueError as moved:  # the game changed since its leaf was read: publish again
            raise Refused(str(moved)) from None
        if end is not None:  # the signed row's result, by the signed names: not the read models'
            result = signed_result(proved.leaf, end.to_json())
    leaf = None if proved is None else proved.leaf
    return SiteGame(
        game_id=game.game_id,
        variant=game.variant if leaf is None else leaf.variant,
        players=tuple(game.players) if leaf is None or leaf.players is None else leaf.players,
        status=_status(game),
        result=result,
        verified=summary.valid,
        problem=summary.first_problem,
        replay=replay,
        inclusion=inclusion,
        end=end,
    )


def _listed_result(game: TournamentGame) -> dict[str, Any] | None:
    """A finished game's result as the read models (or its import) give it."""
    if not game.finished or game.winner is None:
        return None
    return {"winner": game.winner, "scores": [[name, total] for name, total in game.scores]}


def _status(game: TournamentGame) -> str:
    if game.finished:
        return "imported, finished" if game.imported else "finished"
    if game.imported:
        return "imported, unfinished: the record stops before the game's end"
    return f"in progress ({game.status or 'not projected yet'})"
