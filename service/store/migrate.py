"""Schema migrations: the plain SQL files in ``migrations/``, applied in name order, each exactly once.

Each file runs in its own transaction with its ledger row (``schema_migrations``), serialised by an
advisory lock; an applied file that changed is a :class:`MigrationError`. The owner's login migrates; the
service's login only checks (:class:`SchemaNotCurrent`). :func:`ensure_service_login` makes the service's
login role and :func:`check_service_login` refuses one too powerful. docs/DESIGN.md ("Migrations and
roles") gives the reasoning and the three roles.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql

from service.store.errors import StoreError
from service.store.global_order import Connection

_FILE_NAME = re.compile(r"(\d{4}_[a-z0-9_]+)\.sql")

APP_ROLE = "uno_audit_app"
"""The API's privileges (NOLOGIN): SELECT and INSERT on the store's tables, SELECT on the read models."""

PROJECTOR_ROLE = "uno_audit_projector"
"""The read models' writer (NOLOGIN): SELECT on the log, INSERT/UPDATE/DELETE on the read models only."""

SERVICE_LOGIN = "uno_audit_service"
"""The login ``uno-audit serve`` connects as: a member of :data:`APP_ROLE` and :data:`PROJECTOR_ROLE`."""

#: Concurrent creators of the cluster-wide login (several databases migrating at once) may collide in
#: PostgreSQL's system catalogue; the loser looks again, this many times at most.
_LOGIN_ATTEMPTS = 3


class MigrationError(StoreError):
    """The database's migration history does not match the migration files of this build."""


class SchemaNotCurrent(MigrationError):
    """Migrations are pending and the login may not apply them: the owner must run ``uno-audit migrate``."""


class LoginNotRestricted(StoreError):
    """The login is more powerful than the service may be (see :func:`check_service_login`)."""


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


def _changed(migration: Migration, ledger: Ledger) -> MigrationError:
    return MigrationError(
        f"migration {migration.name} of {ledger.package} was applied from a different file; applied "
        "migrations must not change (add a new migration instead)"
    )


async def pending_migrations(conn: Connection, ledger: Ledger = STORE) -> list[str]:
    """The names of ``ledger``'s migrations not yet applied to ``conn``'s database (read only, no lock).

    Needs only SELECT on the ledger table, so the service's login can ask. An applied file that has
    changed since raises :class:`MigrationError`.
    """
    exists = await (await conn.execute("SELECT to_regclass(%s) IS NOT NULL", (ledger.table,))).fetchone()
    recorded: dict[str, bytes] = {}
    if exists is not None and exists[0]:
        query = sql.SQL("SELECT name, sha256 FROM {}").format(sql.Identifier(ledger.table))
        recorded = {name: bytes(digest) for name, digest in await (await conn.execute(query)).fetchall()}
    pending = []
    for migration in migrations(ledger):
        digest = recorded.get(migration.name)
        if digest is None:
            pending.append(migration.name)
        elif digest != migration.sha256:
            raise _changed(migration, ledger)
    return pending


async def apply_migrations(dsn: str, ledger: Ledger = STORE) -> list[str]:
    """Bring the database at ``dsn`` up to date with ``ledger``'s migrations; return the names applied by
    this call.

    Runs on a connection of its own, as the login user. Safe to call concurrently and repeatedly: a call
    that finds everything applied returns ``[]`` having only read the ledger, which is why the service's
    restricted login may call it too; if something is pending and that login may not apply it, it raises
    :class:`SchemaNotCurrent`.
    """
    create_ledger = sql.SQL(
        "CREATE TABLE IF NOT EXISTS {} (name text PRIMARY KEY, sha256 bytea NOT NULL, "
        "applied_at timestamptz NOT NULL DEFAULT now())"
    ).format(sql.Identifier(ledger.table))
    recorded = sql.SQL("SELECT sha256 FROM {}").format(sql.Identifier(ledger.table))
    recorded_one = recorded + sql.SQL(" WHERE name = %s")
    record = sql.SQL("INSERT INTO {} (name, sha256) VALUES (%s, %s)").format(sql.Identifier(ledger.table))
    applied: list[str] = []
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        pending = await pending_migrations(conn, ledger)
        for migration in migrations(ledger):
            if migration.name not in pending:
                continue
            try:
                async with conn.transaction():
                    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (ledger.lock_key,))
                    await conn.execute(create_ledger)
                    row = await (await conn.execute(recorded_one, (migration.name,))).fetchone()
                    if row is not None:  # a concurrent migrator applied it while this one waited
                        if bytes(row[0]) != migration.sha256:
                            raise _changed(migration, ledger)
                        continue
                    # No parameters: psycopg sends the file with the simple query protocol, which runs a
                    # script of several statements (DO blocks included) as one request.
                    await conn.execute(migration.sql.encode())
                    await conn.execute(record, (migration.name, migration.sha256))
            except pg_errors.InsufficientPrivilege as error:
                raise SchemaNotCurrent(
                    f"the database's schema is not current ({ledger.package}: {', '.join(pending)} pending) "
                    f"and the login {conn.info.user} may not migrate it ({error.diag.message_primary}): "
                    "run `uno-audit migrate --database-url OWNER_URL`"
                ) from None
            applied.append(migration.name)
    return applied


async def ensure_service_login(dsn: str, password: str | None = None) -> None:
    """Make sure the login :data:`SERVICE_LOGIN` exists, may log in, is a member of :data:`APP_ROLE` and
    :data:`PROJECTOR_ROLE` and has no attribute beyond LOGIN and INHERIT; set its ``password`` if given.

    Run as the owner, after the migrations (which create the two roles). The password travels as a
    SCRAM-SHA-256 verifier computed here, so neither the server's statement log nor ``pg_stat_activity``
    ever holds it in clear. A role of that name that is a superuser or may create roles is not demoted
    silently: that is :class:`LoginNotRestricted`, for a person to look at.
    """
    name = sql.Identifier(SERVICE_LOGIN)
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        for attempt in range(_LOGIN_ATTEMPTS):
            try:
                async with conn.transaction():
                    await _ensure_login(conn, name, password)
                return
            except (pg_errors.DuplicateObject, pg_errors.UniqueViolation, pg_errors.InternalError_):
                # Another database's migrator created the role or the membership at the same moment
                # ("tuple concurrently updated"); look again.
                if attempt == _LOGIN_ATTEMPTS - 1:
                    raise


async def _ensure_login(conn: Connection, name: sql.Identifier, password: str | None) -> None:
    cursor = await conn.execute(
        "SELECT rolcanlogin, rolsuper OR rolcreaterole OR rolcreatedb OR rolreplication OR rolbypassrls "
        "FROM pg_roles WHERE rolname = %s",
        (SERVICE_LOGIN,),
    )
    row = await cursor.fetchone()
    if row is None:
        await conn.execute(
            sql.SQL(
                "CREATE ROLE {} LOGIN INHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
            ).format(name)
        )
    elif row[1]:
        raise LoginNotRestricted(
            f"the role {SERVICE_LOGIN} exists with more than LOGIN (superuser, CREATEROLE, CREATEDB, "
            "REPLICATION or BYPASSRLS): the service's login must be restricted; drop or ALTER it by hand"
        )
    elif not row[0]:
        await conn.execute(sql.SQL("ALTER ROLE {} LOGIN").format(name))
    for role in (APP_ROLE, PROJECTOR_ROLE):
        cursor = await conn.execute(
            "SELECT pg_has_role(%s, %s, 'MEMBER') AND pg_has_role(%s, %s, 'USAGE')",
            (SERVICE_LOGIN, role, SERVICE_LOGIN, role),
        )
        member = await cursor.fetchone()
        if member is None or not member[0]:
            await conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(role), name))
    if password is not None:
        verifier = conn.pgconn.encrypt_password(password.encode(), SERVICE_LOGIN.encode(), b"scram-sha-256")
        await conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(name, sql.Literal(verifier.decode())))


async def check_service_login(conn: Connection) -> None:
    """Raise :class:`LoginNotRestricted` unless ``conn``'s login is fit to be the service's: not a superuser,
    no CREATEROLE, CREATEDB, REPLICATION or BYPASSRLS, no CREATE in the schema, no UPDATE, DELETE or
    TRUNCATE of the events, no ownership of them, and no role it may ``SET ROLE`` to that has any of these.

    Membership counts whether inherited or not, because ``SET ROLE`` reaches every role one is a member of.
    """
    cursor = await conn.execute(
        """
        WITH reachable AS (
            SELECT r.* FROM pg_roles r WHERE pg_has_role(current_user, r.oid, 'MEMBER')
        ), events_owner AS (
            SELECT relowner FROM pg_class WHERE oid = to_regclass('events')
        )
        SELECT
            coalesce(bool_or(rolsuper), false),
            coalesce(bool_or(rolcreaterole OR rolcreatedb OR rolreplication OR rolbypassrls), false),
            has_schema_privilege(current_schema(), 'CREATE'),
            coalesce(has_table_privilege(to_regclass('events'), 'UPDATE, DELETE, TRUNCATE'), false)
                OR coalesce(bool_or(oid = (SELECT relowner FROM events_owner)), false),
            current_schema()
        FROM reachable
        """
    )
    row = await cursor.fetchone()
    assert row is not None  # an aggregate without GROUP BY returns one row
    superuser, attributes, create, change, schema = row
    if superuser:
        what = "is (or may SET ROLE to) a superuser"
    elif attributes:
        what = "has (or may SET ROLE to a role with) CREATEROLE, CREATEDB, REPLICATION or BYPASSRLS"
    elif create:
        what = f"may CREATE in the schema {schema}"
    elif change:
        what = "may update, delete or truncate the events, or owns them"
    else:
        return
    raise LoginNotRestricted(
        f"the login {conn.info.user} {what}: the service must log in as its own restricted role "
        f"({SERVICE_LOGIN}, made by `uno-audit migrate --database-url OWNER_URL`)"
    )
