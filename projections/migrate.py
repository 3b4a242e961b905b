"""The projections' schema migrations: ``migrations/*.sql`` of this package, applied in name order, once.

The projection tables belong to this package, not to the event store: they are derived data that a
rebuild may drop and recreate, and the store must not depend on them. They are migrated the same way as
the store's schema (see :mod:`service.store.migrate` for the reasoning), with a ledger of their own:

* every file ``NNNN_name.sql`` runs in its own transaction together with its row in
  ``projection_migrations`` (name, SHA-256, time): applied completely or not at all;
* concurrent migrators are serialised by a transaction-level advisory lock (a key of its own, so the
  projections never wait for the store's migrator or the other way round);
* an applied file that has changed since is a :class:`MigrationError`;
* everything runs as the login user on a connection of its own.

:func:`apply_migrations` first brings the event store's schema up to date: the projection migrations
grant the store's role ``uno_audit_app`` read access and the projector reads ``events``, so the store's
schema must exist before this one.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

import psycopg

from service.store import MigrationError
from service.store import apply_migrations as apply_store_migrations

# The advisory lock key of the projection migrators (any fixed 64-bit number; this one spells "uno-proj").
MIGRATION_LOCK_KEY = 0x756E6F2D70726F6A

_FILE_NAME = re.compile(r"(\d{4}_[a-z0-9_]+)\.sql")

_CREATE_LEDGER = b"""
CREATE TABLE IF NOT EXISTS projection_migrations (
    name       text PRIMARY KEY,
    sha256     bytea NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


@dataclass(frozen=True, slots=True)
class Migration:
    """One migration file: ``name`` is the file name without ``.sql`` (``"0001_projections"``)."""

    name: str
    sql: str

    @property
    def sha256(self) -> bytes:
        """The digest recorded in ``projection_migrations``, to notice a file edited after it was applied."""
        return hashlib.sha256(self.sql.encode()).digest()


def migrations() -> list[Migration]:
    """The projection migrations shipped with this package, in the order they are applied (by name)."""
    folder = resources.files(__package__).joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        match = _FILE_NAME.fullmatch(entry.name)
        if match is not None:
            found.append(Migration(match.group(1), entry.read_text(encoding="utf-8")))
    found.sort(key=lambda migration: migration.name)
    if not found:
        raise MigrationError(f"no migration files found in {folder}")
    return found


async def apply_migrations(dsn: str) -> list[str]:
    """Bring the store's schema and then the projections' up to date; return the projection migrations
    applied by this call (``[]`` when everything was applied already). Safe to call concurrently."""
    await apply_store_migrations(dsn)
    applied: list[str] = []
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        for migration in migrations():
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
                await conn.execute(_CREATE_LEDGER)
                cursor = await conn.execute(
                    "SELECT sha256 FROM projection_migrations WHERE name = %s", (migration.name,)
                )
                row = await cursor.fetchone()
                if row is not None:
                    if bytes(row[0]) != migration.sha256:
                        raise MigrationError(
                            f"projection migration {migration.name} was applied from a different file; "
                            "applied migrations must not change (add a new migration instead)"
                        )
                    continue
                await conn.execute(migration.sql.encode())  # simple query protocol: a whole script
                await conn.execute(
                    "INSERT INTO projection_migrations (name, sha256) VALUES (%s, %s)",
                    (migration.name, migration.sha256),
                )
            applied.append(migration.name)
    return applied


migrate = apply_migrations
"""The name the brief and the CLI use: ``await projections.migrate(database_url)``."""
