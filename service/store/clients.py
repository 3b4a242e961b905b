"""Client applications on PostgreSQL: their keys (only hashes), and what their quotas count.

The service reads (:class:`PostgresClients`, part of :class:`~service.store.EventStore`); the operator's
command line writes, as the database's owner (:func:`add_client`, :func:`revoke_client`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from psycopg_pool import AsyncConnectionPool

from service.store.errors import StoreError
from service.store.global_order import Connection

#: The client recorded for a game created without a key (every keyless caller is this one client).
ANONYMOUS = ""
#: The client recorded for a game the adjudicator (admin token) created or imported.
ADMIN_CLIENT = "admin"

#: What a client's name may be (the table's CHECK says the same): it is shown in logs and metrics.
CLIENT_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


@dataclass(frozen=True, slots=True)
class ClientRow:
    """A client application: its name, when its key was issued, and when it was revoked (if it was)."""

    name: str
    created_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True, slots=True)
class Usage:
    """What a client's quotas count now: games it created within the window asked about, and games of
    its still in progress (counted up to the bound asked about)."""

    created_recently: int
    live: int


class ClientExists(StoreError):
    """A client name that is taken."""


_CLIENT_FOR_KEY = "SELECT name FROM clients WHERE key_sha256 = %s AND revoked_at IS NULL"
_USAGE = """
SELECT (SELECT count(*) FROM games g
         WHERE g.client = %(client)s AND g.created_at > now() - make_interval(secs => %(window)s)),
       (SELECT count(*) FROM (
            SELECT FROM games g
             WHERE g.client = %(client)s
               AND NOT EXISTS (SELECT FROM events e WHERE e.game_id = g.game_id AND e.type = 'GameEnded')
             LIMIT %(bound)s) live)
"""


class PostgresClients:
    """The service's reads of the clients and of their games."""

    def __init__(self, pool: AsyncConnectionPool[Connection]) -> None:
        self._pool = pool

    async def client_for_key(self, key_hash: bytes) -> str | None:
        """The name of the client whose key has the SHA-256 ``key_hash``, unless revoked."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(_CLIENT_FOR_KEY, (key_hash,), prepare=True)
            row = await cursor.fetchone()
            return None if row is None else str(row[0])

    async def client_usage(self, client: str, *, window_seconds: int, live_bound: int) -> Usage:
        """How many games ``client`` created in the last ``window_seconds``, and how many of its games are
        in progress (counted up to ``live_bound``: a quota only needs to know whether it is reached)."""
        params = {"client": client, "window": window_seconds, "bound": live_bound}
        async with self._pool.connection() as conn:
            cursor = await conn.execute(_USAGE, params, prepare=True)
            row = await cursor.fetchone()
            assert row is not None
            return Usage(int(row[0]), int(row[1]))


async def add_client(conn: Connection, name: str, key_hash: bytes) -> None:
    """Record a new client with its key's hash; :class:`ClientExists` if the name is taken."""
    if not CLIENT_NAME.fullmatch(name):
        raise ValueError(
            "a client name is 1 to 64 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit"
        )
    cursor = await conn.execute(
        "INSERT INTO clients (name, key_sha256) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING",
        (name, key_hash),
    )
    if cursor.rowcount == 0:
        raise ClientExists(f"a client named {name!r} exists (revoke it, or choose another name)")


async def list_clients(conn: Connection) -> list[ClientRow]:
    """Every client, by name."""
    cursor = await conn.execute("SELECT name, created_at, revoked_at FROM clients ORDER BY name")
    return [ClientRow(name, created, revoked) for name, created, revoked in await cursor.fetchall()]


async def revoke_client(conn: Connection, name: str) -> bool:
    """Revoke the client's key from now on; whether there was such a client not yet revoked."""
    cursor = await conn.execute(
        "UPDATE clients SET revoked_at = now() WHERE name = %s AND revoked_at IS NULL", (name,)
    )
    return cursor.rowcount == 1
