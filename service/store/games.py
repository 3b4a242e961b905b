"""The games table on PostgreSQL: games, seats (token hashes), secret seeds, listing, dispute lookups.

Every table here is keyed by ``game_id`` and lives with the game's stream on a distributed PostgreSQL
(``deploy/citus.sql``). A game enters the table only together with its first events:
:data:`NEW_GAME_ROWS` are the CTEs that :meth:`EventStore.create_game
<service.store.EventStore.create_game>` puts in front of the stream's write statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from service.store.canonical import json_text
from service.store.global_order import Connection
from service.store.interface import GameCatalogue
from service.store.model import DISPUTE_TYPES, GameRow, StoredEvent, check_limit
from service.store.streams import EVENT_COLUMNS, stored_event

#: The rows of a new game (games, seeds, seats), as CTEs: ``game`` returns the game id (nothing if it is
#: taken). Its ``created_at`` is the time its first events are hashed with (``recorded_at``, the
#: write's parameter).
NEW_GAME_ROWS = """
game AS (
    INSERT INTO games (game_id, variant, players, tournament_id, created_at, client)
    VALUES (%(game_id)s, %(variant)s, %(players)s, %(tournament_id)s, %(recorded_at)s, %(client)s)
    RETURNING game_id
), secret AS (
    INSERT INTO game_secrets (game_id, seed) SELECT game_id, %(seed)s::bytea FROM game
), seat AS (
    INSERT INTO seats (game_id, seat, token_sha256)
    SELECT game.game_id, s.ordinality - 1, s.token
      FROM game, unnest(%(seat_hashes)s::bytea[]) WITH ORDINALITY AS s(token, ordinality)
)"""

#: The constraint a taken game id violates.
GAME_KEY = "games_pkey"

_GAME_COLUMNS = (
    "g.game_id, g.variant, g.players, g.tournament_id, g.created_at, "
    "coalesce((SELECT max(e.version) FROM events e WHERE e.game_id = g.game_id), 0), g.client"
)
_GAME = f"SELECT {_GAME_COLUMNS} FROM games g WHERE g.game_id = %s"
_LIST_GAMES = {
    (False, False): f"SELECT {_GAME_COLUMNS} FROM games g ORDER BY g.game_id LIMIT %s",
    (False, True): f"SELECT {_GAME_COLUMNS} FROM games g WHERE g.game_id > %s ORDER BY g.game_id LIMIT %s",
    (True, False): (
        f"SELECT {_GAME_COLUMNS} FROM games g WHERE g.tournament_id = %s ORDER BY g.game_id LIMIT %s"
    ),
    (True, True): (
        f"SELECT {_GAME_COLUMNS} FROM games g WHERE g.tournament_id = %s AND g.game_id > %s "
        "ORDER BY g.game_id LIMIT %s"
    ),
}
_SEED = "SELECT seed FROM game_secrets WHERE game_id = %s"
_SEAT_FOR_TOKEN = "SELECT seat FROM seats WHERE game_id = %s AND token_sha256 = %s"
# The audit trail's disputes (partial index events_disputes, migration 0002).
# Spelt out as literals, the very predicate of the index, so that the planner can use it.
_DISPUTE_TYPES = "e.type IN ({})".format(", ".join(f"'{name}'" for name in DISPUTE_TYPES))
_DISPUTES = {
    False: f"SELECT {EVENT_COLUMNS} FROM events e WHERE {_DISPUTE_TYPES} ORDER BY e.game_id, e.version",
    True: (
        f"SELECT {EVENT_COLUMNS} FROM events e WHERE {_DISPUTE_TYPES} AND e.game_id = %s ORDER BY e.version"
    ),
}


def new_game_params(
    *,
    variant: str,
    players: Sequence[str],
    tournament_id: str,
    seed: bytes | None,
    seat_token_hashes: Sequence[bytes],
    client: str,
) -> dict[str, Any]:
    """The parameters of :data:`NEW_GAME_ROWS` (besides ``game_id``, which the stream's write shares)."""
    return {
        "variant": variant,
        "players": Jsonb(list(players), dumps=json_text),
        "tournament_id": tournament_id,
        "client": client,
        "seed": seed,
        "seat_hashes": list(seat_token_hashes),
    }


class PostgresGames(GameCatalogue):
    """The games table over a pool of connections; :class:`~service.store.EventStore` is one."""

    def __init__(self, pool: AsyncConnectionPool[Connection]) -> None:
        self._pool = pool

    async def game(self, game_id: str) -> GameRow | None:
        """The game's row and current version, or ``None`` if there is no such game."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(_GAME, (game_id,), prepare=True)
            row = await cursor.fetchone()
            return None if row is None else _game(row)

    async def list_games(
        self, *, tournament_id: str | None = None, after: str | None = None, limit: int = 50
    ) -> list[GameRow]:
        """Games ordered by id, optionally of one tournament: the page after the game id ``after``.

        Keyset pagination: pass the last game id of a page as ``after`` to get the next one, which stays
        correct while games are being created and costs the same on every page.
        """
        check_limit(limit)
        params: list[Any] = []
        if tournament_id is not None:
            params.append(tournament_id)
        if after is not None:
            params.append(after)
        params.append(limit)
        query = _LIST_GAMES[tournament_id is not None, after is not None]
        async with self._pool.connection() as conn:
            cursor = await conn.execute(query, params)
            return [_game(row) for row in await cursor.fetchall()]

    async def seed(self, game_id: str) -> bytes | None:
        """The game's secret dealing seed (``None`` if unknown or never set). Reveal it with care."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(_SEED, (game_id,))
            row = await cursor.fetchone()
            return None if row is None or row[0] is None else bytes(row[0])

    async def seat_for_token(self, game_id: str, token_hash: bytes) -> int | None:
        """The seat whose token has the SHA-256 ``token_hash`` in this game, or ``None``."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(_SEAT_FOR_TOKEN, (game_id, token_hash), prepare=True)
            row = await cursor.fetchone()
            return None if row is None else int(row[0])

    async def dispute_events(self, game_id: str | None = None) -> list[StoredEvent]:
        """The ``DisputeFiled`` and ``DisputeRuled`` events of one game, or of all (by game, then version)."""
        async with self._pool.connection() as conn:
            if game_id is None:
                cursor = await conn.execute(_DISPUTES[False])
            else:
                cursor = await conn.execute(_DISPUTES[True], (game_id,), prepare=True)
            return [stored_event(row) for row in await cursor.fetchall()]


def _game(row: tuple[Any, ...]) -> GameRow:
    game_id, variant, players, tournament_id, created_at, version, client = row
    return GameRow(game_id, variant, list(players), tournament_id, created_at, int(version), client)
