"""The event store's exceptions: what a caller must tell apart to answer a command correctly.

They are kept apart from :mod:`service.store.store` so that the migration runner can share the base class
without importing the store. Every exception the store raises on purpose is a :class:`StoreError`; a
database that cannot be reached surfaces as psycopg's or psycopg_pool's own errors.
"""

from __future__ import annotations


class StoreError(Exception):
    """Base class of the event store's errors."""


class VersionConflict(StoreError):
    """The stream moved on: the append expected ``expected`` but the game is at ``actual``.

    The command handler re-loads and re-decides (the rules may now give another answer); a client that
    named its expected version itself gets gRPC ``ABORTED``. ``actual`` may be the expected version itself
    (the given ``prev_hash`` is not that version's hash), or below it: the store was rewound behind its
    reader (a restore, a failover that lost a suffix), which a re-load from the store corrects.
    """

    def __init__(self, game_id: str, expected: int, actual: int) -> None:
        if actual == expected:  # the version is there but not the given prev_hash: rewound, written again
            detail = f"game {game_id!r}: the given prev_hash is not the stored hash of version {expected}"
            super().__init__(f"{detail} (the stream was rewound and written again since, or a stale cache)")
        else:
            super().__init__(f"game {game_id!r} is at version {actual}, not at the expected {expected}")
        self.game_id = game_id
        self.expected = expected
        self.actual = actual


class CommandReused(StoreError):
    """A command id already recorded for another game or for another request.

    Command ids are chosen by clients to make retries safe; reusing one for something else is a client
    error (gRPC ``INVALID_ARGUMENT`` or ``ALREADY_EXISTS``), never a retry.
    """

    def __init__(self, command_id: str, reason: str) -> None:
        super().__init__(f"command id {command_id!r} was already used {reason}")
        self.command_id = command_id


class GameExists(StoreError):
    """``create_game`` with a game id that is taken (by another command)."""

    def __init__(self, game_id: str) -> None:
        super().__init__(f"game {game_id!r} already exists")
        self.game_id = game_id


class GameNotFound(StoreError):
    """An append to a game that was never created."""

    def __init__(self, game_id: str) -> None:
        super().__init__(f"game {game_id!r} does not exist")
        self.game_id = game_id


class LedgerMismatch(StoreError):
    """The command ledger and the events disagree about a command id: the events carry it but its ledger
    row is gone, or the row names other versions or another request than those events. Such a command is
    neither carried out again nor answered as a retry: the store was edited behind the service's back
    (``uno-audit verify --game`` names the rows)."""

    def __init__(self, game_id: str, command_id: str, detail: str) -> None:
        super().__init__(f"game {game_id!r}, command {command_id!r}: {detail}")
        self.game_id = game_id
        self.command_id = command_id


class NotReplicated(StoreError):
    """Committed on this server, but not proven on a synchronous standby, so not acknowledged: a failover
    now could lose it. Nothing is promised either way; a retry with the same command id finds out (and is
    answered once the standby has it). See :class:`service.store.failover.SyncStandby`."""

    def __init__(self, lsn: str, why: str) -> None:
        super().__init__(f"the commit (WAL up to {lsn}) is not on a synchronous standby: {why}")
        self.lsn = lsn
        self.why = why
