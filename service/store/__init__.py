"""The event store: append-only, hash-chained game streams with a gap-free global order, and the catalogue.

* :mod:`service.store.interface` — the abstract :class:`Store` (a Protocol): the generic
  :class:`StreamStore` and the :class:`GameCatalogue`, joined by ``create_game``;
* :mod:`service.store.model` — the values every implementation shares, and the hash chain;
* :mod:`service.store.store` — :class:`EventStore`, the PostgreSQL store the service runs on, composed of
  :mod:`service.store.streams` and :mod:`service.store.games`; :mod:`service.store.group_commit` sends the
  appends that wait at the same time together;
* :mod:`service.store.global_order` and :mod:`service.store.cursors` — PostgreSQL's gap-free reader
  and its followers' checkpoints, shared with the projector;
* :mod:`service.store.memory` — :class:`MemoryStore`, the same contract in memory;
* :mod:`service.store.migrate` — the schema's migrations.

See ``docs/DESIGN.md`` ("The event store") for why.
"""

from service.store.errors import (
    CommandReused,
    GameExists,
    GameNotFound,
    LedgerMismatch,
    StoreError,
    VersionConflict,
)
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
    "Store",
    "StoreError",
    "StoredEvent",
    "StreamStore",
    "VersionConflict",
    "Wakeups",
    "apply_migrations",
    "chain_hash",
    "cursor_of",
    "migrations",
]
