"""The gap-free global order of PostgreSQL's log: the one place its SQL is written.

Rows are read in ``(xid, position)`` order and only below ``pg_snapshot_xmin(pg_current_snapshot())``, so
no event is skipped or read twice. A :class:`GlobalReader` is made from a select list over ``events e``
(``read_all``, the projector's batches, the rebuild's COPY, the benchmark) and reads on a connection its
caller gives. docs/DESIGN.md ("The gap-free global order") says why a sequence alone skips events.
"""

from __future__ import annotations

from typing import Any, LiteralString, TypeAlias

import psycopg
from psycopg import sql

from service.store.model import Cursor, check_limit

Connection: TypeAlias = psycopg.AsyncConnection[tuple[Any, ...]]

BELOW_HORIZON = "e.xid < pg_snapshot_xmin(pg_current_snapshot())"
"""Only rows of transactions older than the oldest one running: the set below is final."""

_AFTER = "(e.xid, e.position) > (%s::xid8, %s)"
_UPTO = "(e.xid, e.position) <= (%s::xid8, %s)"
_ORDER = "ORDER BY e.xid, e.position"
_LAST = (
    f"SELECT e.xid::text::bigint, e.position FROM events e WHERE {BELOW_HORIZON} "
    "ORDER BY e.xid DESC, e.position DESC LIMIT 1"
)


class GlobalReader:
    """Reads ``columns`` (a select list over ``events e``) of the log in the gap-free order."""

    def __init__(self, columns: LiteralString) -> None:
        self.columns = columns
        self._page: LiteralString = (
            f"SELECT {columns} FROM events e WHERE {_AFTER} AND {BELOW_HORIZON} {_ORDER} LIMIT %s"
        )
        self._page_upto: LiteralString = (
            f"SELECT {columns} FROM events e WHERE {_AFTER} AND {_UPTO} AND {BELOW_HORIZON} {_ORDER} LIMIT %s"
        )
        #: Everything below the horizon, in order: what a reader from the start of the log reads.
        self.everything: LiteralString = f"SELECT {columns} FROM events e WHERE {BELOW_HORIZON} {_ORDER}"

    async def page(
        self, conn: Connection, after: Cursor, limit: int, upto: Cursor | None = None
    ) -> list[tuple[Any, ...]]:
        """The next ``limit`` rows after ``after`` (at most up to ``upto``); ``[]``: caught up for now."""
        check_limit(limit)
        if upto is None:
            cursor = await conn.execute(self._page, (str(after.xid), after.position, limit), prepare=True)
        else:
            cursor = await conn.execute(
                self._page_upto,
                (str(after.xid), after.position, str(upto.xid), upto.position, limit),
                prepare=True,
            )
        return await cursor.fetchall()

    def copy_upto(self, bound: Cursor, condition: sql.Composable | None = None) -> sql.Composed:
        """``COPY (...) TO STDOUT`` of every row up to ``bound`` (and meeting ``condition``), in order.

        ``bound`` must have been read below the horizon (:func:`last_readable`, a checkpoint): every
        transaction up to its xid had finished then, so the rows up to it are final and the copy needs
        no horizon of its own, nor a transaction id that would hold other readers back while it runs.
        """
        where = sql.SQL("(e.xid, e.position) <= ({}::xid8, {})").format(str(bound.xid), bound.position)
        if condition is not None:
            where = sql.SQL("{} AND {}").format(where, condition)
        return sql.SQL("COPY (SELECT {} FROM events e WHERE {} {}) TO STDOUT").format(
            sql.SQL(self.columns), where, sql.SQL(_ORDER)
        )


async def last_readable(conn: Connection) -> Cursor | None:
    """The cursor of the last event below the horizon (``None`` for an empty log)."""
    cursor = await conn.execute(_LAST)
    row = await cursor.fetchone()
    return None if row is None else Cursor(int(row[0]), int(row[1]))
