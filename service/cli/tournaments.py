"""``uno-audit tournament create|list|show``: the tournaments of the stored games.

A tournament is the games created in it: an id each game carries (``CreateGame``'s ``tournament_id``,
``bots --tournament``, ``import --tournament``), with no record of its own. ``create`` checks that an id
is one the service takes and that no game is in it yet, and writes nothing: the tournament exists from
its first game on. ``list`` and ``show`` read the games table, the log and the read models
(:mod:`projections.queries`); no hand is ever read. Exit 2 for a bad id or an unknown tournament.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from service.cli.database import on_auditor
from service.cli.exits import EXIT_OK, Refused
from service.cli.options import stored_games_database

#: A tournament's games are read a page at a time.
_PAGE = 500


def tournament_name(text: str) -> str:
    """A tournament id as the service takes one (``limits.identifier``): 1 to 128 printable characters."""
    from service.domain.errors import InvalidInput
    from service.domain.limits import identifier

    try:
        return identifier(text, "tournament")
    except InvalidInput as bad:
        raise argparse.ArgumentTypeError(f"a tournament id {bad.detail}, not {text[:140]!r}") from None


def register(commands: Any) -> None:
    """The ``tournament`` command and its ``create``, ``list`` and ``show``."""
    tournament = commands.add_parser("tournament", help="create, list and show tournaments")
    actions = tournament.add_subparsers(dest="action", required=True, parser_class=type(tournament))
    create = actions.add_parser("create", help="check a new tournament's id (it exists from its first game)")
    create.add_argument("tournament", type=tournament_name, metavar="T", help="the id: 1-128 printable")
    listing = actions.add_parser("list", help="every tournament, with its games finished and in all")
    show = actions.add_parser("show", help="a tournament's games, their results and its standings")
    show.add_argument("tournament", type=tournament_name, metavar="T", help="the tournament's id")
    for sub, run in ((create, _create), (listing, _list), (show, _show)):
        sub.add_argument("--json", action="store_true", help="print one JSON object")
        stored_games_database(sub)
        sub.set_defaults(run=lambda args, run=run: on_auditor(args, lambda auditor: run(auditor.store, args)))


async def _create(store: Any, args: argparse.Namespace) -> int:
    games = await store.list_games(tournament_id=args.tournament, limit=1)
    if games:
        raise Refused(f"tournament {args.tournament!r} exists: games are in it (uno-audit tournament show)")
    if args.json:
        print(json.dumps({"tournament": args.tournament, "games": 0}, ensure_ascii=False))
    else:
        print(
            f"tournament {args.tournament}: a free id, nothing stored yet; it exists from its first game "
            f"on (uno-audit bots --tournament {args.tournament}, uno-audit import --tournament "
            f"{args.tournament}, or CreateGame's tournament_id)"
        )
    return EXIT_OK


async def _list(store: Any, args: argparse.Namespace) -> int:
    from projections import queries

    found = await queries.tournaments(store)
    if args.json:
        rows = [
            {"tournament": t.tournament_id, "games": t.games, "finished": t.finished, "imported": t.imported}
            for t in found
        ]
        print(json.dumps({"tournaments": rows}, ensure_ascii=False))
        return EXIT_OK
    if not found:
        print("no tournament: no game is in one")
    for t in found:
        imported = f", {t.imported} imported" if t.imported else ""
        print(f"{t.tournament_id}: {t.finished}/{t.games} games finished{imported}")
    return EXIT_OK


async def _show(store: Any, args: argparse.Namespace) -> int:
    from projections import queries

    games: list[queries.TournamentGame] = []
    while True:
        page = await queries.tournament_games(
            store, args.tournament, after=games[-1].game_id if games else "", limit=_PAGE
        )
        games += page
        if len(page) < _PAGE:
            break
    if not games:
        raise Refused(f"no tournament {args.tournament!r}: no game is in it")
    standings = await queries.standings(store, args.tournament)
    if args.json:
        print(json.dumps(_to_json(args.tournament, games, standings), ensure_ascii=False))
        return EXIT_OK
    finished = sum(game.finished for game in games)
    print(f"tournament {args.tournament}: {finished}/{len(games)} games finished (its tree's leaves)")
    for game in games:
        print(f"  {game.game_id}  {game.variant}  {_result(game)}")
    print(f"standings (played games, as the read models stand at position {standings.cursor.position}):")
    if not standings.rows:
        print("  none yet")
    for rank, row in enumerate(standings.rows, start=1):
        print(
            f"  {rank}. {row.player}: {row.wins} won of {row.games}, {row.rounds_won} rounds, "
            f"{row.points} points"
        )
    return EXIT_OK


def _result(game: Any) -> str:
    """A game's result in words: who won and the totals, or where it stands."""
    totals = ", ".join(f"{player} {total}" for player, total in game.scores)
    how = "imported, " if game.imported else ""
    if game.finished and game.winner is not None:
        return f"{how}finished: {game.winner} won ({totals})"
    if game.finished:
        return f"{how}finished (scores not projected yet)"
    if game.imported:
        return "imported, unfinished: the record stops before the game's end (not a leaf)"
    return f"in progress ({game.status or 'not projected yet'}{', ' + totals if totals else ''})"


def _to_json(tournament: str, games: list[Any], standings: Any) -> dict[str, Any]:
    return {
        "tournament": tournament,
        "games": [
            {
                "game_id": game.game_id,
                "variant": game.variant,
                "players": list(game.players),
                "version": game.version,
                "finished": game.finished,
                "imported": game.imported,
                "status": game.status,
                "winner": game.winner,
                "scores": dict(game.scores),
            }
            for game in games
        ],
        "finished": sum(game.finished for game in games),
        "standings": [dataclasses.asdict(row) for row in standings.rows],
        "standings_position": standings.cursor.position,
    }
