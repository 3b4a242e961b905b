"""The store in one process's memory: the same contract as PostgreSQL's, for code that needs no database.

:class:`MemoryStore` is a real implementation of :class:`~service.store.Store`, not a mock, held to the
same contract tests; it lets the command handler and the audit code be tested without a server, and keeps
nothing past the process. Events handed back by reads are the stored objects: not to be modified.
docs/DESIGN.md ("The in-memory store") says how each operation stays atomic and the order gap-free.
"""

from __future__ import annotations

import asyncio
import bisect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from service.store.errors import CommandReused, GameExists, GameNotFound, StoreError, VersionConflict
from service.store.interface import Store, Wakeups
from service.store.model import (
    DISPUTE_TYPES,
    GENESIS_HASH,
    START,
    AppendResult,
    Batch,
    Carried,
    CommandRow,
    Cursor,
    GameRow,
    LedgerRow,
    NewEvent,
    StoredEvent,
    agreed,
    check_append,
    check_create,
    check_limit,
    cursor_of,
)


@dataclass(slots=True)
class _Game:
    """A stored game: its row (without the version, which is its stream's), seed and seats."""

    variant: str
    players: list[str]
    tournament_id: str
    created_at: datetime
    seed: bytes | None
    seats: dict[bytes, int]
    stream: list[StoredEvent] = field(default_factory=list)
    client: str = ""


class MemoryStore(Store):
    """A :class:`~service.store.Store` in memory; see the module docstring."""

    def __init__(self) -> None:
        self._games: dict[str, _Game] = {}
        self._commands: dict[tuple[str, str], LedgerRow] = {}
        self._log: list[StoredEvent] = []
        self._keys: list[Cursor] = []  # cursor_of each event of _log, for bisecting
        self._xid = 0
        self._listeners: set[MemoryWakeups] = set()

    # --- the stream store ------------------------------------------------------------------------------

    async def append(
        self,
        game_id: str,
        expected_version: int,
        events: Sequence[NewEvent],
        *,
        command_id: str,
        request_hash: bytes,
        metadata: Mapping[str, Any],
        prev_hash: bytes | None = None,
    ) -> AppendResult:
        """Append ``events`` after ``expected_version`` (see :class:`~service.store.StreamStore`)."""
        await _turn()
        check_append(expected_version, events)
        stream = self._stream(game_id)
        if prev_hash is None:
            prev_hash = _hash_at(stream, expected_version)
            if prev_hash is None:
                return self._settle(command_id, game_id, expected_version, request_hash)
        batch = Batch(game_id, expected_version, prev_hash, events, metadata, command_id, request_hash)
        earlier = self._earlier(command_id, game_id, request_hash)
        if earlier is not None:
            return earlier
        if game_id not in self._games or len(stream) != expected_version:
            return self._settle(command_id, game_id, expected_version, request_hash)
        if _hash_at(stream, expected_version) != prev_hash:
            raise VersionConflict(game_id, expected_version, expected_version)
        return self._commit(batch, request_hash, stream)

    async def read_stream(
        self, game_id: str, after_version: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        """The game's events with versions above ``after_version``, in version order, at most ``limit``."""
        await _turn()
        stream = self._stream(game_id)[max(after_version, 0) :]
        return stream if limit is None else stream[:limit]

    async def stream_version(self, game_id: str) -> int:
        """The game's last version: 0 for a game without events (or an unknown one)."""
        await _turn()
        return len(self._stream(game_id))

    async def read_all(self, after: Cursor = START, limit: int = 1000) -> list[StoredEvent]:
        """The next events of the global log after ``after``, in the gap-free order (append order)."""
        await _turn()
        check_limit(limit)
        start = bisect.bisect_right(self._keys, after)
        return self._log[start : start + limit]

    async def command(self, game_id: str, command_id: str) -> CommandRow | None:
        """``(request_hash, first_version, last_version)`` of a command recorded for the game, or ``None``;
        :class:`~service.store.errors.LedgerMismatch` when the ledger and the events disagree."""
        await _turn()
        return self._agreed(game_id, command_id)

    async def ledger(self, game_id: str) -> list[LedgerRow]:
        """The game's whole command ledger, in version order."""
        await _turn()
        rows = [row for (game, _), row in self._commands.items() if game == game_id]
        return sorted(rows, key=lambda row: (row.first_version, row.command_id))

    def listen(self) -> MemoryWakeups:
        """The ids of games as they are appended to (see :class:`~service.store.interface.Wakeups`)."""
        return MemoryWakeups(self._listeners)

    # --- the games table ------------------------------------------------------------------------------

    async def game(self, game_id: str) -> GameRow | None:
        """The game's row and current version, or ``None`` if there is no such game."""
        await _turn()
        game = self._games.get(game_id)
        return None if game is None else _row(game_id, game)

    async def list_games(
        self, *, tournament_id: str | None = None, after: str | None = None, limit: int = 50
    ) -> list[GameRow]:
        """Games ordered by id, optionally of one tournament: the page after the game id ``after``."""
        await _turn()
        check_limit(limit)
        rows = [
            _row(game_id, game)
            for game_id, game in sorted(self._games.items())
            if (tournament_id is None or game.tournament_id == tournament_id)
            and (after is None or game_id > after)
        ]
        return rows[:limit]

    async def seed(self, game_id: str) -> bytes | None:
        """The game's secret dealing seed (``None`` if unknown or never set)."""
        await _turn()
        game = self._games.get(game_id)
        return None if game is None else game.seed

    async def seat_for_token(self, game_id: str, token_hash: bytes) -> int | None:
        """The seat whose token has the SHA-256 ``token_hash`` in this game, or ``None``."""
        await _turn()
        game = self._games.get(game_id)
        return None if game is None else game.seats.get(token_hash)

    async def dispute_events(self, game_id: str | None = None) -> list[StoredEvent]:
        """The ``DisputeFiled`` and ``DisputeRuled`` events of one game, or of all (by game, then version)."""
        await _turn()
        games = sorted(self._games) if game_id is None else [game_id]
        return [e for g in games for e in self._stream(g) if e.type in DISPUTE_TYPES]

    # --- the unit of work ------------------------------------------------------------------------------

    async def create_game(
        self,
        game_id: str,
        *,
        variant: str,
        players: Sequence[str],
        tournament_id: str,
        seed: bytes | None,
        seat_token_hashes: Sequence[bytes],
        command_id: str,
        request_hash: bytes,
        events: Sequence[NewEvent],
        metadata: Mapping[str, Any],
        client: str = "",
    ) -> AppendResult:
        """Catalogue the game and start its stream, all or nothing (see :class:`~service.store.Store`)."""
        await _turn()
        check_create(game_id, players, seat_token_hashes, events)
        batch = Batch(game_id, 0, GENESIS_HASH, events, metadata, command_id, request_hash)
        earlier = self._earlier(command_id, game_id, request_hash)
        if earlier is not None:
            return earlier
        if game_id in self._games:
            raise GameExists(game_id)
        game = _Game(
            variant,
            list(players),
            tournament_id,
            batch.recorded_at,
            seed,
            {token: seat for seat, token in enumerate(seat_token_hashes)},
            client=client,
        )
        self._games[game_id] = game
        return self._commit(batch, request_hash, game.stream)

    # --- helpers ---------------------------------------------------------------------------------------

    def _stream(self, game_id: str) -> list[StoredEvent]:
        game = self._games.get(game_id)
        return [] if game is None else game.stream

    def _commit(self, batch: Batch, request_hash: bytes, stream: list[StoredEvent]) -> AppendResult:
        """Store ``batch`` as one transaction: ledger row, events, wake-ups."""
        self._xid += 1
        first_position = len(self._log) + 1
        positions = range(first_position, first_position + len(batch.events))
        result = batch.result([(position, self._xid) for position in positions])
        stored = [
            replace(e, payload=_json_copy(e.payload), metadata=_json_copy(e.metadata)) for e in result.events
        ]
        stream.extend(stored)
        self._log.extend(stored)
        self._keys.extend(cursor_of(e) for e in stored)
        self._commands[batch.game_id, batch.command_id] = LedgerRow(
            batch.command_id, request_hash, batch.first_version, batch.last_version, batch.recorded_at
        )
        for listener in self._listeners:
            listener.notify(batch.game_id)
        return result

    def _earlier(self, command_id: str, game_id: str, request_hash: bytes) -> AppendResult | None:
        """The first result of ``command_id`` if the game recorded it for the same request, else ``None``;
        :class:`CommandReused` if it recorded it for another request."""
        seen = self._agreed(game_id, command_id)
        if seen is None:
            return None
        stored_request, first_version, last_version = seen
        if stored_request != request_hash:
            raise CommandReused(command_id, "for another request")
        last_hash = self._stream(game_id)[last_version - 1].hash
        return AppendResult(first_version, last_version, last_hash, duplicate=True)

    def _agreed(self, game_id: str, command_id: str) -> CommandRow | None:
        """The command's ledger row agreed with the events that carry its id (see
        :func:`~service.store.model.agreed`)."""
        row = self._commands.get((game_id, command_id))
        ledger = None if row is None else (row.request_sha256, row.first_version, row.last_version)
        carrying = [
            e
            for e in self._stream(game_id)
            if isinstance(e.metadata, dict) and e.metadata.get("command_id") == command_id
        ]
        carried = Carried(
            len(carrying),
            carrying[0].version if carrying else None,
            carrying[-1].version if carrying else None,
            frozenset(str(e.metadata.get("request_sha256", "")) for e in carrying),
        )
        return agreed(game_id, command_id, ledger, carried)

    def _settle(
        self, command_id: str, game_id: str, expected_version: int, request_hash: bytes
    ) -> AppendResult:
        """Explain an append that cannot be written: an earlier run of the command, or which error."""
        earlier = self._earlier(command_id, game_id, request_hash)
        if earlier is not None:
            return earlier
        actual = len(self._stream(game_id))
        if actual == 0:
            raise GameNotFound(game_id)
        raise VersionConflict(game_id, expected_version, actual)


class MemoryWakeups(Wakeups):
    """Game ids as appends to a :class:`MemoryStore` commit, from the moment it starts listening."""

    def __init__(self, listeners: set[MemoryWakeups]) -> None:
        """Use :meth:`MemoryStore.listen`."""
        self._listeners = listeners
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._started = False
        self._closed = False

    def notify(self, game_id: str) -> None:
        """Called by the store for each committed append."""
        self._queue.put_nowait(game_id)

    async def start(self) -> None:
        """Start listening (once); from now on no append is missed."""
        if self._closed:
            raise StoreError("this listener is closed")
        if not self._started:
            self._listeners.add(self)
            self._started = True

    async def aclose(self) -> None:
        """Stop listening; a waiting iteration ends. Idempotent."""
        self._closed = True
        self._listeners.discard(self)
        self._queue.put_nowait(None)

    async def __anext__(self) -> str:
        if self._closed:
            raise StopAsyncIteration
        await self.start()
        game_id = await self._queue.get()
        if game_id is None:
            raise StopAsyncIteration
        return game_id


async def _turn() -> None:
    """Let other tasks run, as a database round trip would: a caller's read and its later write are two
    operations, and a test of racing callers must be able to see them interleave."""
    await asyncio.sleep(0)


def _hash_at(stream: Sequence[StoredEvent], version: int) -> bytes | None:
    """The hash of ``version`` (``GENESIS_HASH`` for 0), ``None`` if the stream does not have it."""
    if version == 0:
        return GENESIS_HASH
    return stream[version - 1].hash if version <= len(stream) else None


def _row(game_id: str, game: _Game) -> GameRow:
    return GameRow(
        game_id,
        game.variant,
        list(game.players),
        game.tournament_id,
        game.created_at,
        len(game.stream),
        game.client,
    )


def _json_copy(value: dict[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = json.loads(json.dumps(value))
    return copied
