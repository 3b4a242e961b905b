"""Followers' cursors: where each follower of the global order stands, the one place its SQL is written.

A cursor lives in the table ``projection_checkpoints`` (its name from before cursors were named apart
from signed checkpoints), in the database its follower writes to. Every function runs on the caller's
connection and transaction, so a move commits with the follower's own rows, and a move is guarded
(``WHERE`` it is still where the caller read it). docs/DESIGN.md ("Followers' cursors") says why this
makes following exactly-once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, LiteralString

from service.store.global_order import Connection
from service.store.model import Cursor

LAG_COUNT_CAP = 100_000
"""Events behind are counted exactly up to this many; beyond, estimated from positions (cheap)."""

_ENSURE = (
    "INSERT INTO projection_checkpoints (projection_set) VALUES (%s) ON CONFLICT (projection_set) DO NOTHING"
)
_READ = "SELECT xid::text::bigint, position FROM projection_checkpoints WHERE projection_set = %s"
_APPLIED = "SELECT applied FROM projection_checkpoints WHERE projection_set = %s"
_MOVE = (
    "UPDATE projection_checkpoints SET xid = %(new_xid)s::xid8, position = %(new_position)s, "
    "applied = {applied}, last_recorded_at = (SELECT e.recorded_at FROM events e "
    "WHERE e.xid = %(new_xid)s::xid8 AND e.position = %(new_position)s), updated_at = now() "
    "WHERE projection_set = %(name)s AND xid = %(old_xid)s::xid8 AND position = %(old_position)s"
)
_ADVANCE: LiteralString = _MOVE.format(applied="applied + %(applied)s")
_RESET: LiteralString = _MOVE.format(applied="%(applied)s")
_LAG = """
WITH cp AS (
    SELECT coalesce(c.xid, '0'::xid8) AS xid, coalesce(c.position, 0) AS position
      FROM (SELECT) AS one LEFT JOIN projection_checkpoints c ON c.projection_set = %(name)s
)
SELECT cp.xid::text::bigint, cp.position,
       (SELECT count(*) FROM (SELECT FROM events e WHERE (e.xid, e.position) > (cp.xid, cp.position)
                              LIMIT %(cap)s) AS pending),
       (SELECT e.recorded_at FROM events e WHERE (e.xid, e.position) > (cp.xid, cp.position)
         ORDER BY e.xid, e.position LIMIT 1),
       (SELECT e.recorded_at FROM events e ORDER BY e.position DESC LIMIT 1),
       (SELECT max(e.position) FROM events e)
  FROM cp
"""


class CursorMoved(Exception):
    """The checkpoint was not where the caller read it: someone moved it without the follower's lock."""


async def ensure_cursor(conn: Connection, name: str) -> None:
    """Create ``name``'s checkpoint at the start of the log if it has none."""
    await conn.execute(_ENSURE, (name,))


async def read_cursor(conn: Connection, name: str) -> Cursor:
    """``name``'s checkpoint (the start of the log if it has none yet)."""
    cursor = await conn.execute(_READ, (name,))
    row = await cursor.fetchone()
    return Cursor() if row is None else Cursor(int(row[0]), int(row[1]))


async def applied_count(conn: Connection, name: str) -> int:
    """How many events ``name``'s follower has applied in all."""
    cursor = await conn.execute(_APPLIED, (name,))
    row = await cursor.fetchone()
    return 0 if row is None else int(row[0])


async def move_cursor(
    conn: Connection, name: str, old: Cursor, new: Cursor, applied: int, *, from_zero: bool = False
) -> None:
    """Move ``name``'s checkpoint from ``old`` to ``new`` (in the caller's transaction), counting
    ``applied`` more events, or ``applied`` in all when ``from_zero`` (a rebuild that folded the log
    from its start). Raises :class:`CursorMoved` if it is not at ``old``: the caller's transaction
    must not commit."""
    params = {
        "new_xid": str(new.xid),
        "new_position": new.position,
        "applied": applied,
        "name": name,
        "old_xid": str(old.xid),
        "old_position": old.position,
    }
    cursor = await conn.execute(_RESET if from_zero else _ADVANCE, params)
    if cursor.rowcount != 1:
        raise CursorMoved(f"the checkpoint of {name!r} moved under its lock")


@dataclass(frozen=True, slots=True)
class Lag:
    """How far a follower is behind the log.

    ``events_behind`` counts the events after the checkpoint (exact when ``exact``; beyond
    :data:`LAG_COUNT_CAP` it is estimated from positions). ``seconds_behind`` is the time between the
    first event not yet applied and the newest event (0 when caught up): how much of the log's recent
    history the follower does not show yet. ``cursor`` is the checkpoint.
    """

    events_behind: int
    seconds_behind: float
    exact: bool
    cursor: Cursor

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, for a health status or metrics."""
        return {
            "events_behind": self.events_behind,
            "seconds_behind": self.seconds_behind,
            "exact": self.exact,
            "cursor": {"xid": self.cursor.xid, "position": self.cursor.position},
        }


async def follower_lag(conn: Connection, name: str) -> Lag:
    """The lag of ``name``'s follower (see :class:`Lag`); a few index lookups, safe to poll."""
    cursor = await conn.execute(_LAG, {"name": name, "cap": LAG_COUNT_CAP})
    row = await cursor.fetchone()
    assert row is not None
    xid, position, behind, first_pending, newest, max_position = row
    exact = behind < LAG_COUNT_CAP
    if not exact:
        behind = max(behind, int(max_position or 0) - position)
    seconds = 0.0
    if behind and first_pending is not None and newest is not None:
        seconds = max(0.0, (newest - first_pending).total_seconds())
    return Lag(int(behind), seconds, exact, Cursor(int(xid), int(position)))
