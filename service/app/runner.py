"""The application's two write protocols over the event store, written once for every writer.

* :class:`Writer` — *load → decide → append → retry* (:meth:`Writer.handle`); the command handler and the
  auditor's writer are both writers;
* :func:`create_stream` — the idempotent creation of a new stream, its id derived from the command id.

Both are transport-free (refusals are :mod:`service.domain.errors` exceptions) and idempotent through the
store's command ledger. docs/DESIGN.md ("The write loop").
"""

from __future__ import annotations

import contextlib
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from service.domain.errors import Conflict, DataLoss, InvalidInput, ServiceError
from service.ops import metrics, stages
from service.store import (
    AppendResult,
    CommandReused,
    GameNotFound,
    LedgerMismatch,
    NewEvent,
    StreamStore,
    VersionConflict,
    last_group_wait,
)

#: How many times a command is decided again because the stream moved on meanwhile.
MAX_ATTEMPTS = 8

S = TypeVar("S")  # what a writer loads: a game's state, a stored game's log
C = TypeVar("C")  # what a writer decides: a table command, an audit entry's decision
D = TypeVar("D")  # what a decision carries back to its writer besides the events
R = TypeVar("R")  # what a writer answers


@dataclass(frozen=True, slots=True)
class Head:
    """Where a stream stands: the version and the hash the next append must follow."""

    version: int
    last_hash: bytes


@dataclass(frozen=True, slots=True)
class Decision(Generic[D]):
    """What a command decided: the events to append (none: nothing to do), and the writer's ``outcome``."""

    events: Sequence[NewEvent]
    outcome: D


@dataclass(frozen=True, slots=True)
class Appended(Generic[S, D]):
    """The command appended its events: the snapshot it was decided on, the decision, the store's result."""

    snapshot: S
    decision: Decision[D]
    result: AppendResult


@dataclass(frozen=True, slots=True)
class Repeated:
    """A retry of a command already carried out: ``result`` holds the versions its events took then."""

    result: AppendResult


@dataclass(frozen=True, slots=True)
class Unchanged(Generic[S]):
    """The command decided there was nothing to append."""

    snapshot: S


Ran = Appended[S, D] | Repeated | Unchanged[S]


class Writer(ABC, Generic[S, C, D, R]):
    """Writes commands of type ``C`` to streams it loads as ``S``; :meth:`handle` is the one write loop.

    A subclass says how to :meth:`load` a stream (``fresh=False`` may answer from its cache, which can be
    behind the store; ``fresh=True`` must read the store), where a snapshot's :meth:`head` is,
    how to :meth:`decide` a command (raising a :class:`~service.domain.errors.ServiceError` to refuse it) and
    what to :meth:`answer` once the command ran.
    """

    def __init__(self, store: StreamStore) -> None:
        self.store = store

    @abstractmethod
    async def load(self, game_id: str, fresh: bool) -> S: ...

    @abstractmethod
    def head(self, snapshot: S) -> Head: ...

    @abstractmethod
    def decide(self, snapshot: S, command: C) -> Decision[D]: ...

    @abstractmethod
    async def answer(self, game_id: str, ran: Ran[S, D]) -> R: ...

    async def handle(
        self,
        game_id: str,
        command: C,
        *,
        command_id: str,
        request_hash: bytes,
        metadata: Mapping[str, object],
        expected_version: int | None = None,
    ) -> R:
        """Decide ``command`` on the stream and append its events; the writer's answer.

        A refusal or a version mismatch found on a cached snapshot is confirmed on a fresh one before it
        is believed, and a retry of a command already carried out is answered with its first result
        (:class:`Repeated`) instead. ``expected_version`` is the version the client decided against:
        when the stream is elsewhere, the command fails with a ``VERSION_CONFLICT``
        :class:`~service.domain.errors.Conflict` rather than being decided again. A command id whose ledger
        row and events disagree is :class:`~service.domain.errors.DataLoss` (``LEDGER_MISMATCH``): never
        carried out twice, never answered with another command's result.
        """
        with ledger_mismatch_refused():
            snapshot = await self.load(game_id, False)
            fresh = False
            for _ in range(MAX_ATTEMPTS):
                at = self.head(snapshot)
                if expected_version is not None and expected_version != at.version:
                    if not fresh:  # the cache may be behind; the client's word decides
                        snapshot, fresh = await self.load(game_id, True), True
                        continue
                    repeated = await earlier(self.store, game_id, command_id, request_hash)
                    if repeated is not None:  # a retry of a command that moved the game on
                        return await self.answer(game_id, repeated)
                    raise version_conflict(
                        f"the game is at version {at.version}, not {expected_version}", at.version
                    )
                try:
                    decision = self.decide(snapshot, command)
                except InvalidInput:
                    raise  # judged on the request alone
                except ServiceError:
                    # A retry of a command accepted earlier is answered with its first result; anything else
                    # is judged again on the store's latest state before it is refused.
                    repeated = await earlier(self.store, game_id, command_id, request_hash)
                    if repeated is not None:
                        return await self.answer(game_id, repeated)
                    if fresh:
                        raise
                    snapshot, fresh = await self.load(game_id, True), True
                    continue
                if not decision.events:
                    return await self.answer(game_id, Unchanged(snapshot))
                queued = time.perf_counter()
                try:
                    result = await metrics.timed_write(
                        self.store.append(
                            game_id,
                            at.version,
                            decision.events,
                            command_id=command_id,
                            request_hash=request_hash,
                            metadata=metadata,
                            prev_hash=at.last_hash,
                        )
                    )
                except VersionConflict as conflict:
                    metrics.conflict(retried=expected_version is None)
                    if expected_version is not None and conflict.actual > at.version:
                        raise version_conflict(
                            f"the game moved on to version {conflict.actual} meanwhile", conflict.actual
                        ) from None
                    # Moved on, or (head not above the snapshot) rewound behind it: a fresh load says which.
                    snapshot, fresh = await self.load(game_id, True), True
                    continue
                except GameNotFound:
                    # The snapshot knows a game the store does not (rewound to before its creation): a
                    # fresh load drops the snapshot and answers NOT_FOUND.
                    snapshot, fresh = await self.load(game_id, True), True
                    continue
                except CommandReused as reused:
                    raise InvalidInput("command_id", f"already used for another request ({reused})") from None
                stages.appended(queued, queued + last_group_wait())
                ran: Ran[S, D] = (
                    Repeated(result) if result.duplicate else Appended(snapshot, decision, result)
                )
                return await self.answer(game_id, ran)
            raise Conflict(
                f"the game changed {MAX_ATTEMPTS} times while deciding; try again", reason="GAME_BUSY"
            )


async def earlier(store: StreamStore, game_id: str, command_id: str, request_hash: bytes) -> Repeated | None:
    """The first result of ``command_id`` when the game carried it out before for the same request;
    refused (``command_id``) when the game used it for another request."""
    seen = await store.command(game_id, command_id)
    if seen is None:
        return None
    seen_hash, first, last = seen
    if seen_hash != request_hash:
        raise InvalidInput("command_id", "already used for another request")
    return Repeated(AppendResult(first, last, b"", True, ()))


@contextlib.contextmanager
def ledger_mismatch_refused() -> Iterator[None]:
    """A :class:`~service.store.LedgerMismatch` within, as the refusal of its command: DATA_LOSS (see
    :meth:`Writer.handle`)."""
    try:
        yield
    except LedgerMismatch as mismatch:
        raise DataLoss(
            f"the store contradicts itself: {mismatch}; the command was not carried out",
            reason="LEDGER_MISMATCH",
            command_id=mismatch.command_id,
        ) from None


def version_conflict(message: str, actual: int) -> Conflict:
    """The stream is not at the version the client expected (it may read ``actual_version`` and retry)."""
    return Conflict(message, reason="VERSION_CONFLICT", actual_version=str(actual))


@dataclass(frozen=True, slots=True)
class NewStream:
    """A stream created now: its id and the store's result."""

    game_id: str
    result: AppendResult


@dataclass(frozen=True, slots=True)
class ExistingStream:
    """A retried creation: the stream the first attempt created, and its version then."""

    game_id: str
    version: int


async def create_stream(
    store: StreamStore,
    *,
    command_id: str,
    request_hash: bytes,
    write: Callable[[str], Awaitable[AppendResult]],
) -> NewStream | ExistingStream:
    """Create a stream through ``write(game_id)`` (the store's ``create_game``), its id derived from the
    creating command's id (:func:`stream_id_of`).

    So a retry reaches the store with the same id: the same request is answered with the stream it
    created (:class:`ExistingStream`), another request is refused (``command_id``) — and a command id is
    recorded only in its own stream's ledger, like every other command's.
    """
    game_id = stream_id_of(command_id)
    try:
        with ledger_mismatch_refused():
            result = await metrics.timed_write(write(game_id), "create")
    except CommandReused as reused:
        raise InvalidInput("command_id", f"already used for another request ({reused})") from None
    if result.duplicate:
        return ExistingStream(game_id, result.last_version)
    return NewStream(game_id, result)


def stream_id_of(command_id: str) -> str:
    """The id of the stream a creating command makes: a name-based UUID (RFC 9562 version 5) of the
    command id, the same for every retry of the command."""
    return str(uuid.uuid5(_CREATIONS, command_id))


#: The namespace of the ids of created streams (a fixed random UUID: changing it would make a creation
#: retried across the change create a second stream).
_CREATIONS = uuid.UUID("5b0f5c8e-8d1f-4b53-9a52-6f0de1c1c4a7")
