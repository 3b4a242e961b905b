"""Schema migrations: the plain SQL files in ``migrations/``, applied in name order, each exactly once.

Why plain SQL and this little runner rather than a migration framework: the schema is the part of the
audit trail an arbiter reads with ``psql``, so it should be readable as it is, and the rules that matter
here are few and easy to state:

* every file ``NNNN_name.sql`` runs in its own transaction, together with its row in
  ``schema_migrations`` (name, SHA-256 of the file, time), so a migration is applied completely or not
  at all, and a crash between two files leaves a consistent, resumable state;
* migrators that run at the same moment (several service instances starting, or ``migrate`` called twice
  concurrently) are serialised by ``pg_advisory_xact_lock`` taken first in each of those transactions:
  the second one waits, then sees the row of the first and skips the file. The lock is held by the
  transaction, so it cannot leak past a failed migration;
* a file that was applied and has since changed is an error (:class:`MigrationError`), not silently
  ignored: an applied migration is history, changes belong in a new file;
* migrations run as the login user on a connection of their own, never as the service's restricted role
  ``uno_audit_app`` (which may not create or alter anything).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

import psycopg

from .errors import StoreError

# The advisory lock key that serialises migrators (any fixed 64-bit number; this one spells "uno-audi").
MIGRATION_LOCK_KEY = 0x756E6F2D61756469

_FILE_NAME = re.compile(r"(\d{4}_[a-z0-9_]+)\.sql")

_CREATE_LEDGER = b"""
CREATE TABLE IF NOT EXISTS schema_migrations (
    name       text PRIMARY KEY,
    sha256     bytea NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


class MigrationError(StoreError):
    """The database's migration history does not match the migration files of this build."""


@dataclass(frozen=True, slots=True)
class Migration:
    """One migration file: ``name`` is the file name without ``.sql`` (``"0001_events"``)."""

    name: str
    sql: str

    @property
    def sha256(self) -> bytes:
        """The digest recorded in ``schema_migrations``, to notice a file edited after it was applied."""
        return hashlib.sha256(self.sql.encode()).digest()


def migrations() -> list[Migration]:
    """The migrations shipped with this package, in the order they are applied (by name)."""
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
    """Bring the database at ``dsn`` up to date; return the names of the migrations applied by this call.

    Runs on a connection of its own, as the login user. Safe to call concurrently and repeatedly: a call
    that finds everything applied returns ``[]``.
    """
    applied: list[str] = []
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        for migration in migrations():
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
                await conn.execute(_CREATE_LEDGER)
                cursor = await conn.execute(
                    "SELECT sha256 FROM schema_migrations WHERE name = %s", (migration.name,)
                )
                row = await cursor.fetchone()
                if row is not None:
                    if bytes(row[0]) != migration.sha256:
                        raise MigrationError(
                            f"migration {migration.name} was applied from a different file; applied "
                            "migrations must not change (add a new migration instead)"
                        )
                    continue
                # No parameters: psycopg sends the file with the simple query protocol, which runs a
                # script of several statements (DO blocks included) as one request.
                await conn.execute(migration.sql.encode())
                await conn.execute(
                    "INSERT INTO schema_migrations (name, sha256) VALUES (%s, %s)",
                    (migration.name, migration.sha256),
                )
            applied.append(migration.name)
    return applied
