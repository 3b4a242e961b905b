"""Games the read models cannot fold: set aside with the reason, reported, while every other game projects.

A game whose payload does not decode, whose event the engine cannot apply, whose versions have a hole or
whose rows the database refuses (:data:`GAME_DATA_ERRORS`) gets a row in ``projection_quarantine`` (a
:class:`Cause`, the error cut to :data:`REASON_LIMIT`) in the batch's own transaction; its later events
are skipped. A failure tied to no game is recorded instead (:func:`record_failure`); :func:`read_health`
reports both. docs/DESIGN.md ("Projections") says how a quarantine is lifted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

import psycopg

from projections.source import Connection
from service.store.cursors import Lag, follower_lag

REASON_LIMIT = 1000
"""The most characters of an error kept as a quarantine's or a failure's reason."""

REPORT_LIMIT = 100
"""The most quarantined games :func:`read_health` lists (it counts them all)."""

GAME_DATA_ERRORS: tuple[type[psycopg.Error], ...] = (
    psycopg.DataError,
    psycopg.IntegrityError,
    psycopg.errors.ProgramLimitExceeded,
)
"""The database errors caused by the values of the rows written, hence by the game they came from."""


class Cause(StrEnum):
    """Why a game was quarantined, in one word (the reason's detail may quote hidden information)."""

    DECODE = "decode"
    """A payload this build cannot decode."""
    FOLD = "fold"
    """An event that cannot be applied to the game as folded so far."""
    STREAM = "stream"
    """The game's versions do not follow each other."""
    WRITE = "write"
    """The database refused the game's rows."""


def bounded(text: str) -> str:
    """``text`` cut to :data:`REASON_LIMIT` characters (an ellipsis says it was cut)."""
    return text if len(text) <= REASON_LIMIT else text[: REASON_LIMIT - 1] + "…"


def describe(error: BaseException) -> str:
    """An error as a reason: its type and message, bounded."""
    return bounded(f"{type(error).__name__}: {error}")


@dataclass(frozen=True, slots=True)
class Quarantined:
    """A game set aside: its views reflect its events below ``version`` and nothing after.

    ``position`` (the global position of that event) and ``at`` are filled in when read back from the
    table (:func:`read_health`); the folds that find a game know only its stream.
    """

    game_id: str
    version: int
    cause: Cause
    reason: str
    position: int | None = None
    at: datetime | None = None

    def as_dict(self) -> dict[str, object]:
        """JSON-ready (``rebuild``'s report)."""
        return {
            "game_id": self.game_id,
            "version": self.version,
            "cause": self.cause.value,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class ProjectionHealth:
    """A projection set's lag, its quarantined games (the oldest :data:`REPORT_LIMIT`) and whether
    its projector is failing (``failing`` is then the last error, else ``None``)."""

    lag: Lag
    quarantined: tuple[Quarantined, ...]
    quarantined_total: int
    failing: str | None
    failing_since: datetime | None

    def serving(self, lag_limit_seconds: float) -> bool:
        """Whether the read models may be called up to date: nothing quarantined, the projector not
        failing and no more than ``lag_limit_seconds`` behind the log."""
        return (
            not self.quarantined_total
            and self.failing is None
            and self.lag.seconds_behind <= lag_limit_seconds
        )


_HELD = """
WITH cleared AS (
    UPDATE projection_checkpoints SET failing = NULL, failing_since = NULL
     WHERE projection_set = %(set)s AND failing IS NOT NULL
)
SELECT game_id, version FROM projection_quarantine WHERE projection_set = %(set)s AND game_id = ANY(%(games)s)
"""
_INSERT = """
INSERT INTO projection_quarantine (projection_set, game_id, version, position, cause, reason)
SELECT %(set)s, %(game)s, %(version)s,
       coalesce((SELECT e.position FROM events e WHERE e.game_id = %(game)s AND e.version = %(version)s), 0),
       %(cause)s, %(reason)s
ON CONFLICT (projection_set, game_id) DO UPDATE
   SET version = EXCLUDED.version, position = EXCLUDED.position, cause = EXCLUDED.cause,
       reason = EXCLUDED.reason, quarantined_at = EXCLUDED.quarantined_at
 WHERE EXCLUDED.version < projection_quarantine.version
"""
_ALL = """
SELECT game_id, version, position, cause, reason, quarantined_at FROM projection_quarantine
 WHERE projection_set = %s ORDER BY quarantined_at, game_id
"""
_FAILED = """
UPDATE projection_checkpoints SET failing = %s, failing_since = coalesce(failing_since, now())
 WHERE projection_set = %s
"""
_HEALTH = """
SELECT (SELECT failing FROM projection_checkpoints WHERE projection_set = %(set)s),
       (SELECT failing_since FROM projection_checkpoints WHERE projection_set = %(set)s),
       (SELECT count(*) FROM projection_quarantine WHERE projection_set = %(set)s),
       coalesce((SELECT json_agg(json_build_array(q.game_id, q.version, q.position, q.cause, q.reason,
                                                  q.quarantined_at) ORDER BY q.quarantined_at, q.game_id)
                   FROM (SELECT * FROM projection_quarantine WHERE projection_set = %(set)s
                          ORDER BY quarantined_at, game_id LIMIT %(limit)s) AS q), '[]')
"""


async def held_games(conn: Connection, projection_set: str, games: Iterable[str]) -> dict[str, int]:
    """The quarantined games among ``games``, each with the version from which its events are skipped.

    Run inside a batch's transaction (after its lock): it also clears the set's failure record, which
    stays cleared if the batch commits — a batch that commits is the projector making progress.
    """
    cursor = await conn.execute(_HELD, {"set": projection_set, "games": list(games)})
    return {game_id: int(version) for game_id, version in await cursor.fetchall()}


async def read_quarantine(conn: Connection, projection_set: str) -> dict[str, Quarantined]:
    """Every quarantined game of the set (a rebuild of some views leaves them out as the live views do)."""
    cursor = await conn.execute(_ALL, (projection_set,))
    return {
        game_id: Quarantined(game_id, version, Cause(cause), reason, position, at)
        for game_id, version, position, cause, reason, at in await cursor.fetchall()
    }


async def quarantine(conn: Connection, projection_set: str, games: Iterable[Quarantined]) -> None:
    """Record ``games`` as quarantined (in the caller's transaction); a game already quarantined keeps
    the earlier of the two versions."""
    params = [
        {
            "set": projection_set,
            "game": q.game_id,
            "version": q.version,
            "cause": q.cause.value,
            "reason": bounded(q.reason),
        }
        for q in games
    ]
    if params:
        async with conn.cursor() as cursor:
            await cursor.executemany(_INSERT, params)


async def replace_quarantine(conn: Connection, projection_set: str, games: Iterable[Quarantined]) -> None:
    """Make ``games`` the whole quarantine of the set (a rebuild of all views, in its swap transaction)."""
    await conn.execute("DELETE FROM projection_quarantine WHERE projection_set = %s", (projection_set,))
    await quarantine(conn, projection_set, games)


async def record_failure(conn: Connection, projection_set: str, error: BaseException) -> None:
    """Record that the set's projector failed with ``error`` (autocommit: the failed batch is gone)."""
    await conn.execute(_FAILED, (describe(error), projection_set))


async def read_health(
    conn: Connection, projection_set: str, *, limit: int = REPORT_LIMIT
) -> ProjectionHealth:
    """The set's :class:`ProjectionHealth`: a few index lookups, safe to poll."""
    lag = await follower_lag(conn, projection_set)
    cursor = await conn.execute(_HEALTH, {"set": projection_set, "limit": limit})
    row = await cursor.fetchone()
    assert row is not None
    failing, since, total, listed = row
    games = tuple(
        Quarantined(game_id, version, Cause(cause), reason, position, datetime.fromisoformat(at))
        for game_id, version, position, cause, reason, at in listed
    )
    return ProjectionHealth(lag, games, int(total), failing, since)
