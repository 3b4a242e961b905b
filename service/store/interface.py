"""The abstract store: what the application core may ask of the log and of the games table.

:class:`Store` (a :class:`typing.Protocol`) joins :class:`StreamStore` (append with a version check, the
command ledger, stream and global reads, wake-ups) and :class:`GameCatalogue` (games, seats' token hashes,
secret seeds, listing, dispute lookups) with :meth:`Store.create_game`, all or nothing.
:class:`~service.store.EventStore` and :class:`~service.store.MemoryStore` implement it, and
``tests/store/test_contract.py`` runs one suite on both. docs/DESIGN.md ("The abstract store") says why a
Protocol, and what is left out of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol, Self

from service.store.model import (
    START,
    AppendResult,
    CommandRow,
    Cursor,
    GameRow,
    LedgerRow,
    NewEvent,
    StoredEvent,
)


class Wakeups(Protocol):
    """Game ids as appends commit: wake-up calls, not the data (read the events after one arrives).

    ``async with`` starts listening on entry, so an append between a reader's catch-up and its first
    wait is not missed; plain ``async for`` starts at the first step. A wait cancelled by a timeout
    leaves it usable; after :meth:`aclose` the iteration ends. An implementation subclasses this
    protocol for its ``async with`` and ``async for``, and provides the three other methods.
    """

    async def start(self) -> None:
        """Start listening (once); from now on no append is missed."""
        ...

    async def aclose(self) -> None:
        """Stop listening. Idempotent."""
        ...

    async def __anext__(self) -> str: ...

    def __aiter__(self) -> Self:
        return self

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.aclose()


class StreamStore(Protocol):
    """The generic stream store: one append-only, hash-chained stream per id, and the global order.

    * ``append`` writes ``events`` as versions ``expected_version + 1``.. of the stream in one
      transaction, chained from the hash of ``expected_version`` (``prev_hash`` if the caller has it
      cached). A command id recorded before for the same stream and ``request_hash`` returns that first
      result with ``duplicate=True`` and writes nothing, even after the stream moved on; for another
      request it raises :class:`~service.store.CommandReused`. Otherwise a stream not at
      ``expected_version`` raises :class:`~service.store.VersionConflict` with its version, an unknown
      stream :class:`~service.store.GameNotFound`, a wrong ``prev_hash`` :class:`~service.store.StoreError`.
      Streams are started only by :meth:`Store.create_game`.
    * ``read_all`` pages through every stream's events in the gap-free global order (``Cursor``): no
      event is ever skipped or returned twice, and each stream's events come in version order.
    * ``command`` and ``ledger`` read the command ledger, kept per stream: a command id names one
      command of one stream. ``command`` checks the row against the events that carry the id, and raises
      :class:`~service.store.errors.LedgerMismatch` when they disagree (as ``append`` does for a retry).
    """

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
    ) -> AppendResult: ...

    async def read_stream(
        self, game_id: str, after_version: int = 0, limit: int | None = None
    ) -> list[StoredEvent]: ...

    async def stream_version(self, game_id: str) -> int: ...

    async def read_all(self, after: Cursor = START, limit: int = 1000) -> list[StoredEvent]: ...

    async def command(self, game_id: str, command_id: str) -> CommandRow | None: ...

    async def ledger(self, game_id: str) -> list[LedgerRow]: ...

    def listen(self) -> Wakeups: ...


class GameCatalogue(Protocol):
    """The games: their rows (with their stream's version), seats, seeds, and dispute lookups."""

    async def game(self, game_id: str) -> GameRow | None: ...

    async def list_games(
        self, *, tournament_id: str | None = None, after: str | None = None, limit: int = 50
    ) -> list[GameRow]: ...

    async def seed(self, game_id: str) -> bytes | None: ...

    async def seat_for_token(self, game_id: str, token_hash: bytes) -> int | None: ...

    async def dispute_events(self, game_id: str | None = None) -> list[StoredEvent]: ...


class Store(StreamStore, GameCatalogue, Protocol):
    """The whole store: the stream store and the games table, joined by :meth:`create_game`."""

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
        """Catalogue the game (row, seed, one token hash per seat, the ``client`` that created it) and start
        its stream with ``events`` (versions 1..n), in one unit of work. A retried command id answers its
        first result (``duplicate=True``); used for another request, :class:`~service.store.CommandReused`
        and nothing is written; a taken ``game_id`` without that command,
        :class:`~service.store.GameExists`."""
        ...
