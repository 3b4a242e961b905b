"""The event store: append-only, hash-chained game streams with a gap-free global order, and the games table.

:mod:`~service.store.interface` holds the abstract :class:`Store`; :mod:`~service.store.store` the
PostgreSQL :class:`EventStore` (over ``streams``, ``games``, ``group_commit``, ``global_order`` and
``cursors``); :mod:`~service.store.memory` the same contract in memory; :mod:`~service.store.model` the
values and hash chain both share; :mod:`~service.store.migrate` the schema. docs/DESIGN.md ("The layers",
"The event store") lists each module and says why.
"""

from service.store.errors import (
    CommandReused,
    GameExists,
    GameNotFound,
    LedgerMismatch,
    NotReplicated,
    StoreError,
    VersionConflict,
)
from service.store.failover import SyncStandby, database_away
from service.store.group_commit import last_group_wait
from service.store.interface import GameCatalogue, Store, StreamStore, Wakeups
from service.store.memory import MemoryStore
from service.store.migrate import MigrationError, apply_migrations, migrations
from service.store.model import (
    GENESIS_HASH,
    AppendResult,
    Cursor,
    GameRow,
    LedgerRow,
    NewEvent,
    StoredEvent,
    chain_hash,
    cursor_of,
)
from service.store.store import APP_ROLE, EventStore
from service.store.streams import Listener

__all__ = [
    "APP_ROLE",
    "GENESIS_HASH",
    "AppendResult",
    "CommandReused",
    "Cursor",
    "EventStore",
    "GameCatalogue",
    "GameExists",
    "GameNotFound",
    "GameRow",
    "LedgerMismatch",
    "LedgerRow",
    "Listener",
    "MemoryStore",
    "MigrationError",
    "NewEvent",
    "NotReplicated",
    "Store",
    "StoreError",
    "StoredEvent",
    "StreamStore",
    "SyncStandby",
    "VersionConflict",
    "Wakeups",
    "apply_migrations",
    "chain_hash",
    "cursor_of",
    "database_away",
    "last_group_wait",
    "migrations",
]
