"""The PostgreSQL event store: append-only, hash-chained game streams with a gap-free global order.

See :mod:`service.store.store` for the guarantees and ``docs/DESIGN.md`` ("The event store") for why.
"""

from .errors import CommandReused, GameExists, GameNotFound, StoreError, VersionConflict
from .migrate import MigrationError, apply_migrations, migrations
from .store import (
    APP_ROLE,
    GENESIS_HASH,
    NOTIFY_CHANNEL,
    AppendResult,
    Cursor,
    EventStore,
    GameRow,
    Listener,
    NewEvent,
    StoredEvent,
    chain_hash,
    cursor_of,
)

__all__ = [
    "APP_ROLE",
    "GENESIS_HASH",
    "NOTIFY_CHANNEL",
    "AppendResult",
    "CommandReused",
    "Cursor",
    "EventStore",
    "GameExists",
    "GameNotFound",
    "GameRow",
    "Listener",
    "MigrationError",
    "NewEvent",
    "StoreError",
    "StoredEvent",
    "VersionConflict",
    "apply_migrations",
    "chain_hash",
    "cursor_of",
    "migrations",
]
