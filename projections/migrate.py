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

from service.store.migrate import Ledger, Migration
from service.store.migrate import apply_migrations as apply_ledger
from service.store.migrate import migrations as ledger_migrations

#: The read models' migrations (the lock key spells "uno-proj": never waiting on the store's migrator).
PROJECTIONS = Ledger("projections", "projection_migrations", 0x756E6F2D70726F6A)


def migrations() -> list[Migration]:
    """The projection migrations shipped with this package, in the order they are applied (by name)."""
    return ledger_migrations(PROJECTIONS)


async def apply_migrations(dsn: str) -> list[str]:
    """Bring the store's schema and then the projections' up to date; return the projection migrations
    applied by this call (``[]`` when everything was applied already). Safe to call concurrently."""
    await apply_ledger(dsn)
    return await apply_ledger(dsn, PROJECTIONS)


migrate = apply_migrations
"""A short name for callers: ``await projections.migrate(database_url)``."""
