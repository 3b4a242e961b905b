"""The projections' schema migrations: ``migrations/*.sql`` of this package, applied in name order, once.

The projection tables belong to this package, not to the event store: they are derived data that a
rebuild may drop and recreate, and the store must not depend on them. They are migrated the same way as
the store's schema (see :mod:`service.store.migrate` for the reasoning), with a ledger of their own:

* every file ``NNNN_name.sql`` runs in its own transaction together with its row in
  ``projection_migrations`` (name, SHA-256, time): applied completely or not at all;
* concurrent migrators are serialised by a transaction-level advisory lock (a key of its own, so the
  projections never wait for the store's migrator or the other way round);
* an applied file that has changed since is a :class:`MigrationError`;
* everything runs as the login user on a connection of its own; the service's restricted login only
  checks that nothing is pending.

:func:`apply_migrations` first brings the event store's schema up to date: the projection migrations
grant the store's role ``uno_audit_app`` read access and the projector reads ``events``, so the store's
schema must exist before this one.

Then it keeps the read models' privileges (:func:`grant_read_models`): the service's login writes them
through the role ``uno_audit_projector``, which may INSERT, UPDATE and DELETE the read-model tables and
nothing else. Those grants are code rather than a migration file because the tables change under the
files: a rebuild swaps in fresh tables (which carry no grants of their own), and a later migration may
add a view. The read-model tables are, by this package's convention, the views (:data:`VIEW_NAMES`) and
every ``projection_*`` table but the ledger, which the projector only reads.
"""

from __future__ import annotations

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql

from projections.views import VIEW_NAMES
from service.store.migrate import APP_ROLE, PROJECTOR_ROLE, Ledger, Migration, SchemaNotCurrent
from service.store.migrate import apply_migrations as apply_ledger
from service.store.migrate import migrations as ledger_migrations

#: The read models' migrations (the lock key spells "uno-proj": never waiting on the store's migrator).
PROJECTIONS = Ledger("projections", "projection_migrations", 0x756E6F2D70726F6A)

#: Who needs what on the read-model tables (a rebuild's fresh ones too); the ledger gets SELECT for both.
READ_MODEL_GRANTS = (
    (APP_ROLE, "SELECT"),
    *((PROJECTOR_ROLE, privilege) for privilege in ("SELECT", "INSERT", "UPDATE", "DELETE")),
)

_MISSING = """
SELECT c.relname, g.role, g.privilege
  FROM pg_class c
  CROSS JOIN unnest(%(roles)s::text[], %(privileges)s::text[]) AS g(role, privilege)
 WHERE c.relnamespace = current_schema()::regnamespace
   AND c.relkind IN ('r', 'p')
   AND (c.relname = ANY(%(views)s) OR c.relname LIKE 'projection\\_%%')
   AND (c.relname <> %(ledger)s OR g.privilege = 'SELECT')
   AND NOT has_table_privilege(g.role, c.oid, g.privilege)
 ORDER BY 1, 2, 3
"""


def migrations() -> list[Migration]:
    """The projection migrations shipped with this package, in the order they are applied (by name)."""
    return ledger_migrations(PROJECTIONS)


async def apply_migrations(dsn: str) -> list[str]:
    """Bring the store's schema and then the projections' up to date, and the read models' privileges;
    return the projection migrations applied by this call (``[]`` when everything was applied already).
    Safe to call concurrently."""
    await apply_ledger(dsn)
    applied = await apply_ledger(dsn, PROJECTIONS)
    await grant_read_models(dsn)
    return applied


async def grant_read_models(dsn: str) -> None:
    """Grant what is missing of SELECT to ``uno_audit_app`` and SELECT, INSERT, UPDATE and DELETE to
    ``uno_audit_projector`` on every read-model table (see the module docstring).

    Only reads when nothing is missing, so the service's login may call it; when something is and the
    login may not grant it (a rebuild's tables swapped in by hand, say), :class:`SchemaNotCurrent`.
    """
    params = {
        "roles": [role for role, _ in READ_MODEL_GRANTS],
        "privileges": [privilege for _, privilege in READ_MODEL_GRANTS],
        "views": list(VIEW_NAMES),
        "ledger": PROJECTIONS.table,
    }
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        missing = await (await conn.execute(_MISSING, params)).fetchall()
        if not missing:
            return
        try:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (PROJECTIONS.lock_key,))
                for table, role, privilege in await (await conn.execute(_MISSING, params)).fetchall():
                    await conn.execute(
                        sql.SQL("GRANT {} ON {} TO {}").format(
                            sql.SQL(privilege), sql.Identifier(table), sql.Identifier(role)
                        )
                    )
        except pg_errors.InsufficientPrivilege:
            table, role, privilege = missing[0]
            raise SchemaNotCurrent(
                f"{role} lacks {privilege} on the read model {table} and the login {conn.info.user} may "
                "not grant it: run `uno-audit migrate --database-url OWNER_URL`"
            ) from None


migrate = apply_migrations
"""A short name for callers: ``await projections.migrate(database_url)``."""
