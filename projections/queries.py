"""Reads of the views for the gRPC layer, able to wait for a client's own write; and a tournament's games
with their outcomes, for the command line.

``min_version`` (a game's views) and ``min_cursor`` (a tournament's standings) make a read wait, bounded
(``timeout``, 2 s by default), for the projector, else raise :class:`ProjectionLag`; without them it reads
what is projected now. Each read is one statement, from an ``AsyncConnectionPool`` or an
:class:`~service.store.EventStore`. docs/DESIGN.md ("Reads that wait, and the consistency check") says why
it polls.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from psycopg_pool import AsyncConnectionPool

from projections.projector import DEFAULT_SET, Lag, read_lag
from projections.source import Connection
from projections.writer import text_key
from service.store import Cursor, EventStore

Source: TypeAlias = "AsyncConnectionPool[Any] | EventStore"
T = TypeVar("T")

DEFAULT_TIMEOUT = 2.0
"""How long a read with a minimum waits for the projector, in seconds."""


class ProjectionLag(Exception):
    """The projection did not reach what the read asked for in time; ``lag`` says how far behind it is."""

    def __init__(self, what: str, wanted: object, have: object, lag: Lag) -> None:
        super().__init__(
            f"{what}: the projection is at {have}, not yet at {wanted} "
            f"({lag.events_behind} events, {lag.seconds_behind:.3f} s behind)"
        )
        self.wanted = wanted
        self.have = have
        self.lag = lag


@dataclass(frozen=True, slots=True)
class SeatScore:
    """A seat's player and running match total."""

    seat: int
    player: str
    total: int


@dataclass(frozen=True, slots=True)
class RoundRow:
    """A finished round: the winner's seat, the points and every seat's cards at the end."""

    round: int
    winner: int
    points: int
    hands: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True)
class GameScores:
    """A game's scores as of its stream version ``version``."""

    game_id: str
    version: int
    status: str
    seats: tuple[SeatScore, ...]
    rounds: tuple[RoundRow, ...]


@dataclass(frozen=True, slots=True)
class Standing:
    """One player's line in a tournament's standings."""

    player: str
    games: int
    wins: int
    rounds_won: int
    points: int
    uno_penalties_given: int
    uno_penalties_taken: int
    challenges_won: int
    challenges_lost: int


@dataclass(frozen=True, slots=True)
class Standings:
    """A tournament's standings (most wins first, then most points), as of the checkpoint ``cursor``."""

    tournament_id: str
    cursor: Cursor
    rows: tuple[Standing, ...]


@dataclass(frozen=True, slots=True)
class Hand:
    """A seat's cards as of the game's stream version ``version``."""

    game_id: str
    seat: int
    version: int
    cards: tuple[str, ...]


_SCORES = """
SELECT t.version, t.status,
       coalesce((SELECT json_agg(json_build_array(m.seat, m.player, m.total) ORDER BY m.seat)
                   FROM match_scores m WHERE m.game_id = t.game_id), '[]'),
       coalesce((SELECT json_agg(json_build_array(r.round, r.winner, r.points, r.hands) ORDER BY r.round)
                   FROM round_scores r WHERE r.game_id = t.game_id), '[]')
  FROM tables t WHERE t.game_id = %s
"""
_STANDINGS = """
SELECT coalesce(cp.xid, '0'::xid8)::text::bigint, coalesce(cp.position, 0),
       coalesce((SELECT json_agg(json_build_array(s.player, s.games, s.wins, s.rounds_won, s.points,
                                                  s.uno_penalties_given, s.uno_penalties_taken,
                                                  s.challenges_won, s.challenges_lost)
                                 ORDER BY s.wins DESC, s.points DESC, s.player)
                   FROM standings s WHERE s.tournament_key = %s), '[]')
  FROM (SELECT) AS one LEFT JOIN projection_checkpoints cp ON cp.projection_set = %s
"""
# A tournament's games and their outcomes: the catalogue (games) and the log say which games there are and
# which finished (a GameEnded stored, or an imported record whose game has a winner: the leaves of the
# tournament's tree, service/audit/tournaments.py); the views give a played game's scores. No hand is
# read: the round scores' hands are left out.
_FINISHED = """(EXISTS (SELECT FROM events e WHERE e.game_id = g.game_id AND e.type = 'GameEnded')
                OR i.payload->'outcome'->>'winner' IS NOT NULL)"""
_IMPORTED = "LEFT JOIN events i ON i.game_id = g.game_id AND i.version = 1 AND i.type = 'RecordImported'"
_TOURNAMENTS = f"""
SELECT g.tournament_id, count(*), count(*) FILTER (WHERE {_FINISHED}), count(i.game_id)
  FROM games g {_IMPORTED}
 WHERE g.tournament_id <> '' GROUP BY g.tournament_id ORDER BY g.tournament_id
"""
_TOURNAMENT_GAMES = f"""
SELECT g.game_id, g.variant, g.players,
       coalesce((SELECT max(e.version) FROM events e WHERE e.game_id = g.game_id), 0),
       {_FINISHED}, i.game_id IS NOT NULL, i.payload->'outcome'->>'winner', i.payload->'outcome'->'scores',
       t.status,
       (SELECT json_agg(json_build_array(m.player, m.total) ORDER BY m.seat)
          FROM match_scores m WHERE m.game_id = g.game_id),
       (SELECT r.winner FROM round_scores r WHERE r.game_id = g.game_id ORDER BY r.round DESC LIMIT 1)
  FROM games g {_IMPORTED} LEFT JOIN tables t ON t.game_id = g.game_id
 WHERE g.tournament_id = %s AND g.game_id > %s ORDER BY g.game_id LIMIT %s
"""
_HAND = """
SELECT t.version, h.cards FROM tables t LEFT JOIN hands h ON h.game_id = t.game_id AND h.seat = %s
 WHERE t.game_id = %s
"""


@dataclass(frozen=True, slots=True)
class TournamentCount:
    """A tournament's games: how many, how many finished (its tree's leaves), how many imported."""

    tournament_id: str
    games: int
    finished: int
    imported: int


@dataclass(frozen=True, slots=True)
class TournamentGame:
    """One game of a tournament and its outcome, with no card in it. ``status`` is the read models'
    (``None`` for a game they do not hold: an imported one, or one not projected yet); ``scores`` the
    match totals by player, in seat order; ``winner`` the player who won, once finished."""

    game_id: str
    variant: str
    players: tuple[str, ...]
    version: int
    finished: bool
    imported: bool
    status: str | None
    scores: tuple[tuple[str, int], ...]
    winner: str | None


@asynccontextmanager
async def connection(source: Source) -> AsyncIterator[Connection]:
    """A connection from ``source``'s pool."""
    async with source.connection() as conn:
        yield conn


async def _wait(
    source: Source,
    read: Callable[[Connection], Awaitable[tuple[bool, object, T]]],
    what: str,
    wanted: object,
    timeout: float,
    projection_set: str,
) -> T:
    """Run ``read`` until it says its result is recent enough, at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    pause = 0.005
    while True:
        async with connection(source) as conn:
            enough, have, result = await read(conn)
            if enough:
                return result
            if time.monotonic() >= deadline:
                raise ProjectionLag(what, wanted, have, await read_lag(conn, projection_set))
        await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, 0.1)


async def scores(
    source: Source,
    game_id: str,
    *,
    min_version: int | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    projection_set: str = DEFAULT_SET,
) -> GameScores | None:
    """The game's match and round scores (``None`` for a game not projected), at ``min_version`` or later."""

    async def read(conn: Connection) -> tuple[bool, object, GameScores | None]:
        cursor = await conn.execute(_SCORES, (game_id,), prepare=True)
        row = await cursor.fetchone()
        version = 0 if row is None else int(row[0])
        if row is None:
            return min_version is None, version, None
        seats = tuple(SeatScore(s, p, t) for s, p, t in row[2])
        rounds = tuple(RoundRow(r, w, p, tuple(tuple(h) for h in hands)) for r, w, p, hands in row[3])
        result = GameScores(game_id, version, row[1], seats, rounds)
        return min_version is None or version >= min_version, version, result

    return await _wait(source, read, f"scores of game {game_id!r}", min_version, timeout, projection_set)


async def standings(
    source: Source,
    tournament_id: str,
    *,
    min_cursor: Cursor | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    projection_set: str = DEFAULT_SET,
) -> Standings:
    """The tournament's standings, with every event up to ``min_cursor`` (inclusive) counted.

    ``min_cursor`` is :func:`service.store.cursor_of` of the client's last stored event (its append
    result's last event).
    """

    async def read(conn: Connection) -> tuple[bool, object, Standings]:
        cursor = await conn.execute(_STANDINGS, (text_key(tournament_id), projection_set), prepare=True)
        row = await cursor.fetchone()
        assert row is not None
        at = Cursor(int(row[0]), int(row[1]))
        rows = tuple(Standing(*values) for values in row[2])
        return min_cursor is None or at >= min_cursor, at, Standings(tournament_id, at, rows)

    return await _wait(source, read, f"standings of {tournament_id!r}", min_cursor, timeout, projection_set)


async def hand(
    source: Source,
    game_id: str,
    seat: int,
    *,
    min_version: int | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    projection_set: str = DEFAULT_SET,
) -> Hand | None:
    """The seat's cards (``None`` for a game not projected or a seat it does not have), at
    ``min_version`` or later. Hidden information: the caller decides who may see which seat."""

    async def read(conn: Connection) -> tuple[bool, object, Hand | None]:
        cursor = await conn.execute(_HAND, (seat, game_id), prepare=True)
        row = await cursor.fetchone()
        if row is None:
            return min_version is None, 0, None
        version = int(row[0])
        result = None if row[1] is None else Hand(game_id, seat, version, tuple(row[1]))
        return min_version is None or version >= min_version, version, result

    return await _wait(
        source, read, f"hand of seat {seat} in game {game_id!r}", min_version, timeout, projection_set
    )


async def tournaments(source: Source) -> list[TournamentCount]:
    """Every tournament some game is in, by id, with its counts (what the log holds now: no waiting)."""
    async with connection(source) as conn:
        cursor = await conn.execute(_TOURNAMENTS)
        return [TournamentCount(t, int(n), int(f), int(i)) for t, n, f, i in await cursor.fetchall()]


async def tournament_games(
    source: Source, tournament_id: str, *, after: str = "", limit: int = 500
) -> list[TournamentGame]:
    """A page of the tournament's games, by id, after the game id ``after``: each with its outcome, an
    imported game's as its import recorded it, a played game's from the views (scores as projected)."""
    async with connection(source) as conn:
        cursor = await conn.execute(_TOURNAMENT_GAMES, (tournament_id, after, limit))
        rows = await cursor.fetchall()
    games = []
    for game_id, variant, players, version, finished, imported, won, totals, status, seats, last in rows:
        if imported:
            totals = totals or {}  # by player; jsonb keeps no key order: the seats' order is the game's
            scores = tuple((p, int(totals[p])) for p in players if p in totals)
            winner = won
        else:
            scores = tuple((str(p), int(t)) for p, t in seats or ())
            winner = players[last] if status == "over" and last is not None else None
        games.append(
            TournamentGame(
                game_id, variant, tuple(players), int(version), bool(finished), bool(imported),
                None if imported else status, scores, winner,
            )
        )  # fmt: skip
    return games
