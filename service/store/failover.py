"""What a failover does to the store, and its two defences: the synchronous standby's proof, and the pool
that drops connections left on a node that is no longer the primary.

:class:`SyncStandby` acknowledges a commit only once a standby in the synchronous quorum holds it, checked
after the commit on the connection that made it (:data:`SYNC_PROOF`); :func:`database_away` names the errors
a failover causes, which the API answers UNAVAILABLE; :class:`StorePool` closes a connection that met one.
docs/HA.md ("The guarantee") says why the proof closes the race a settings check would leave open.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Final

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import AsyncConnectionPool

from service.store.errors import NotReplicated, StoreError
from service.store.global_order import Connection

#: This server's WAL flushed so far, read after the commit returned (so past the commit record), and
#: whether a standby in the synchronous quorum has flushed that much, and how many such standbys there are.
#: One snapshot of ``pg_current_wal_flush_lsn()``: it is volatile, so it is read once, in the subquery.
SYNC_PROOF: Final = """
SELECT here.lsn::text, coalesce(max(r.flush_lsn) >= here.lsn, false), count(r.pid)
  FROM (SELECT pg_current_wal_flush_lsn() AS lsn) here
  LEFT JOIN pg_stat_replication r ON r.sync_state IN ('sync', 'quorum')
 GROUP BY here.lsn
"""
#: Whether a standby of the quorum has now flushed up to ``%s`` (an LSN :data:`SYNC_PROOF` read).
SYNC_CAUGHT_UP: Final = """
SELECT coalesce(max(flush_lsn) >= %s::pg_lsn, false) FROM pg_stat_replication
 WHERE sync_state IN ('sync', 'quorum')
"""
#: What the guard needs of the login and the server: to read the standbys' positions, and commits that are
#: flushed before they return (with ``synchronous_commit = off`` the flush position may lag the commit).
SYNC_READY: Final = """
SELECT pg_has_role(current_user, 'pg_read_all_stats', 'USAGE')
       OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user),
       current_setting('synchronous_commit')
"""

#: Seconds a commit may wait for a standby of the quorum that is connected but behind (other sessions'
#: WAL flushed with ours): a healthy standby takes milliseconds; one that takes longer is refused.
DEFAULT_SYNC_WAIT = 2.0


@dataclass(frozen=True, slots=True)
class SyncStandby:
    """Whether every commit must be proven on a synchronous standby before it is acknowledged.

    ``required=False`` (a lone server, the embedded one): :meth:`confirm` does nothing.
    """

    required: bool = False
    wait: float = DEFAULT_SYNC_WAIT

    async def confirm(self, conn: Connection) -> None:
        """Return once a standby of the synchronous quorum has flushed this server's WAL up to where it was
        flushed when this was called; :class:`NotReplicated` when none is in the quorum, or it has not
        within :attr:`wait` seconds. Call it on the connection that committed, right after the commit.

        The proof is about the commit already made, so no change of settings can slip between a check and
        the commit: a primary that runs alone (``wait_primary``), or is still committing after another
        node was promoted, has no standby in its quorum that flushed its WAL.
        """
        if not self.required:
            return
        cursor = await conn.execute(SYNC_PROOF, prepare=True)
        row = await cursor.fetchone()
        assert row is not None  # one row: the left join keeps this server's position
        lsn, flushed, standbys = row
        if flushed:
            return
        if standbys == 0:
            raise NotReplicated(lsn, "no standby is in the synchronous quorum")
        deadline = asyncio.get_running_loop().time() + self.wait
        pause = 0.001
        while asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.05)
            cursor = await conn.execute(SYNC_CAUGHT_UP, (lsn,), prepare=True)
            caught_up = await cursor.fetchone()
            if caught_up is not None and caught_up[0]:
                return
        raise NotReplicated(lsn, f"no standby of the synchronous quorum flushed it within {self.wait:g} s")

    async def check_ready(self, conn: Connection) -> None:
        """Refuse (:class:`~service.store.errors.StoreError`) a login or server the proof cannot work with."""
        if not self.required:
            return
        cursor = await conn.execute(SYNC_READY)
        row = await cursor.fetchone()
        assert row is not None
        can_read, synchronous_commit = row
        if not can_read:
            raise StoreError("the login cannot read the standbys' positions: GRANT pg_read_all_stats TO it")
        if synchronous_commit == "off":
            raise StoreError(
                "synchronous_commit is off: a commit may return before it is flushed; set it to on"
            )


#: The setting of a lone server: commits are acknowledged as PostgreSQL returns them.
NO_SYNC_STANDBY: Final = SyncStandby()

#: SQLSTATEs of a server that is going away or is no longer the primary: its connection is of no more use.
_SPOILING_CLASSES: Final = ("08", "53", "57", "58")


def database_away(error: BaseException) -> bool:
    """Whether ``error`` means "the database cannot serve this now; the same request may succeed soon":
    a lost or refused connection, a server shutting down or restarting, a node that no longer takes writes
    (``ReadOnlySqlTransaction``: a primary drained for a switchover, a standby), a pool with no connection
    to give, a transaction cancelled by a conflict with recovery or a deadlock."""
    if isinstance(error, NotReplicated):
        return False  # answered on its own (it is not the database's absence: the commit was made)
    if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
        return True
    return isinstance(error, pg_errors.ReadOnlySqlTransaction)


def spoils_connection(error: BaseException) -> bool:
    """Whether the connection that met ``error`` must not be used again: it is on a server that is going
    away, or on one that no longer takes writes (which a new connection through the multi-host DSN skips)."""
    if isinstance(error, pg_errors.ReadOnlySqlTransaction | psycopg.InterfaceError):
        return True
    if isinstance(error, pg_errors.QueryCanceled):
        return False  # a statement timeout: the session is fine
    sqlstate = getattr(error, "sqlstate", None)
    return isinstance(error, psycopg.OperationalError) and (
        sqlstate is None or sqlstate.startswith(_SPOILING_CLASSES)
    )


class StorePool(AsyncConnectionPool[Connection]):
    """psycopg_pool's pool, but a connection that met a failover's error is closed rather than kept.

    The pool itself replaces only a connection that broke. One that is still open on a node drained for a
    switchover would fail every write given to it (``ReadOnlySqlTransaction``) until that node restarts;
    closed, it is replaced through the DSN, which finds the primary of the moment.
    """

    @asynccontextmanager
    async def connection(self, timeout: float | None = None) -> AsyncIterator[Connection]:
        async with super().connection(timeout) as conn:
            try:
                yield conn
            except BaseException as error:
                if spoils_connection(error) and not conn.closed:
                    await conn.close()  # the pool discards a closed connection when it comes back
                raise
