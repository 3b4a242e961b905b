"""The projections' schema migrations: ``migrations/*.sql`` of this package, applied in name order, once.

The same rules as :mod:`service.store.migrate`, with a ledger (``projection_migrations``) and an advisory
lock key of their own. :func:`apply_migrations` first brings the event store's schema up to date, then
:func:`grant_read_models` lets ``uno_audit_projector`` write the read-model tables (the views,
:data:`VIEW_NAMES`, and every ``projection_*`` table but the ledger). docs/DESIGN.md ("Migrations and
roles") says why the tables are this package's and why the grants are code.
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
