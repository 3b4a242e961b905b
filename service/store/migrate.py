"""Schema migrations: the plain SQL files in ``migrations/``, applied in name order, each exactly once.

Why plain SQL and this little runner rather than a migration framework: the schema is the part of the
audit trail an arbiter reads with ``psql``, so it should be readable as it is, and the rules that matter
here are few and easy to state:

* every file ``NNNN_name.sql`` runs in its own transaction, together with its row in the ledger
  (``schema_migrations`` for the store; the read models keep their own, see :class:`Ledger`: name,
  SHA-256 of the file, time), so a migration is applied completely or not
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
from psycopg import sql

from .errors import StoreError

_FILE_NAME = re.compile(r"(\d{4}_[a-z0-9_]+)\.sql")


class MigrationError(StoreError):
    """The database's migration history does not match the migration files of this build."""


@dataclass(frozen=True, slots=True)
class Migration:
    """One migration file: ``name`` is the file name without ``.sql`` (``"0001_events"``)."""

    name: str
    sql: str

    @property
    def sha256(self) -> bytes:
        """The digest recorded in the ledger, to notice a file edited after it was applied."""
        return hashlib.sha256(self.sql.encode()).digest()


@dataclass(frozen=True, slots=True)
class Ledger:
    """A set of migrations: the package whose ``migrations/`` folder holds them, the table that records
    them, and the advisory lock key that serialises their migrators (any fixed 64-bit number)."""

    package: str
    table: str
    lock_key: int


#: The event store's own migrations (the lock key spells "uno-audi").
STORE = Ledger("service.store", "schema_migrations", 0x756E6F2D61756469)


def migrations(ledger: Ledger = STORE) -> list[Migration]:
    """The migrations shipped with ``ledger``'s package, in the order they are applied (by name)."""
    folder = resources.files(ledger.package).joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        match = _FILE_NAME.fullmatch(entry.name)
        if match is not None:
            found.append(Migration(match.group(1), entry.read_text(encoding="utf-8")))
    found.sort(key=lambda migration: migration.name)
    if not found:
        raise MigrationError(f"no migration files found in {folder}")
    return found


async def apply_migrations(dsn: str, ledger: Ledger = STORE) -> list[str]:
    """Bring the database at ``dsn`` up to date with ``ledger``'s migrations; return the names applied by
    this call.

    Runs on a connection of its own, as the login user. Safe to call concurrently and repeatedly: a call
    that finds everything applied returns ``[]``.
    """
    create_ledger = sql.SQL(
        "CREATE TABLE IF NOT EXISTS {} (name text PRIMARY KEY, sha256 bytea NOT NULL, "
        "applied_at timestamptz NOT NULL DEFAULT now())"
    ).format(sql.Identifier(ledger.table))
    recorded = sql.SQL("SELECT sha256 FROM {} WHERE name = %s").format(sql.Identifier(ledger.table))
    record = sql.SQL("INSERT INTO {} (name, sha256) VALUES (%s, %s)").format(sql.Identifier(ledger.table))
    applied: list[str] = []
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        for migration in migrations(ledger):
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (ledger.lock_key,))
                await conn.execute(create_ledger)
                row = await (await conn.execute(recorded, (migration.name,))).fetchone()
                if row is not None:
                    if bytes(row[0]) != migration.sha256:
                        raise MigrationError(
                            f"migration {migration.name} of {ledger.package} was applied from a different "
                            "file; applied migrations must not change (add a new migration instead)"
                        )
                    continue
                # No parameters: psycopg sends the file with the simple query protocol, which runs a
                # script of several statements (DO blocks included) as one request.
                await conn.execute(migration.sql.encode())
                await conn.execute(record, (migration.name, migration.sha256))
            applied.append(migration.name)
    return applied
