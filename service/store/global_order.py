"""The gap-free global order of PostgreSQL's log: the one place its SQL is written.

Why not simply ``WHERE position > last ORDER BY position``: ``position`` comes from a sequence when the
row is inserted, but rows become visible when their transaction *commits*, and transactions commit in
any order. If transaction A takes position 10 and B takes 11, and B commits first, a reader can see 11
while 10 is still invisible; it moves its cursor to 11, and when A commits, 10 is below the cursor and
is never read. Under concurrent writers that skip is routine, and a projector or auditor following the
log silently loses events.

The order used here is ``(xid, position)``, where ``xid`` is the id of the writing transaction (set by
the insert trigger, never by the client), and only rows with ``xid < pg_snapshot_xmin(
pg_current_snapshot())`` are read. Every transaction with an id below that horizon has finished
(committed or rolled back), so the set of rows below it is final, and every transaction that commits
later has an id at or above the horizon, so its rows sort after any cursor handed out. Hence no event is
ever skipped, none is read twice, and each game's events come in version order (the insert trigger
ensures a later version is written by a younger transaction). The price is latency: an event waits
until every older transaction (in the whole cluster) has finished, so keep transactions short
(``idle_in_transaction_session_timeout`` helps against stragglers). On a distributed PostgreSQL the
horizon and the transaction ids are each node's own: see ``docs/DESIGN.md`` ("The event store").

Readers differ only in what they select, so a :class:`GlobalReader` is made from a select list over
``events e``: the store's ``read_all`` (whole rows), the projector's batches and the rebuild's bulk COPY
(the payload as text, decoded once per distinct text), the benchmark's read ceiling. Every read runs on
a connection the caller gives, so the projector reads inside its batch transaction.
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
