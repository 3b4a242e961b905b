"""The store's values and its hash chain, shared by every implementation of :class:`~service.store.Store`.

Both stores (PostgreSQL and in memory) number and chain a command's events here, with the same code, so
a hash the in-memory store hands out is the hash PostgreSQL would store and the verifier recomputes.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeAlias

from service.codec import canonical

from .errors import StoreError

GENESIS_HASH = bytes(32)
"""The ``prev_hash`` of every game's version 1."""

DISPUTE_TYPES = ("DisputeFiled", "DisputeRuled")
"""The stored types of the audit trail's disputes and rulings (:mod:`service.audit.entries`), which the
catalogue looks up across games."""

CommandRow: TypeAlias = tuple[bytes, int, int]
"""A command recorded in a game's ledger: ``(request_hash, first_version, last_version)``."""


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to append: its type name and its JSON payload (see :func:`service.catalogue.encode`)."""

    type: str
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event as stored: where it is in its stream and in the global log, and its link in the chain."""

    position: int
    game_id: str
    version: int
    type: str
    payload: dict[str, Any]
    metadata: dict[str, Any]
    recorded_at: datetime
    xid: int
    prev_hash: bytes
    hash: bytes


@dataclass(frozen=True, slots=True)
class AppendResult:
    """The versions a command wrote and the hash of its last event.

    ``duplicate`` is true when an earlier command with the same id (and request) already wrote them:
    the result is that command's, and nothing was appended now. ``events`` are the events this call
    stored, as stored (position, time, xid, hashes); empty for a duplicate, whose events
    ``read_stream`` returns (versions ``first_version``..``last_version``).
    """

    first_version: int
    last_version: int
    last_hash: bytes
    duplicate: bool
    events: tuple[StoredEvent, ...] = ()


@dataclass(frozen=True, slots=True, order=True)
class Cursor:
    """A place in the gap-free global order: just after the event written at ``position`` by ``xid``."""

    xid: int = 0
    position: int = 0


START = Cursor()
"""The cursor before the first event of the log."""


@dataclass(frozen=True, slots=True)
class GameRow:
    """A game of the catalogue and its current stream version (0 before its first event)."""

    game_id: str
    variant: str
    players: list[str]
    tournament_id: str
    created_at: datetime
    version: int


def chain_hash(prev_hash: bytes, game_id: str, version: int, type: str, payload: Mapping[str, Any]) -> bytes:
    """The hash of one event: ``sha256(prev_hash ‖ game_id ‖ "\\n" ‖ version ‖ "\\n" ‖ canonical)``.

    ``game_id`` is UTF-8, ``version`` decimal ASCII digits, and ``canonical`` is
    :func:`service.codec.canonical` of ``(type, payload)``: sorted keys, no spaces, UTF-8. Linking each
    event to its predecessor's hash means that changing, removing or reordering any stored event changes
    every later hash, which the verifier detects by recomputing the chain from ``GENESIS_HASH``. The game
    id and version are hashed too so an event cannot be moved to another game or place unnoticed. The
    framing is unambiguous: canonical JSON contains no raw newline and starts with ``{``, so the last two
    newlines always delimit the version. Metadata (command id, actor) is deliberately not covered: it
    describes the request, not the game.
    """
    digest = hashlib.sha256(prev_hash)
    digest.update(game_id.encode())
    digest.update(b"\n")
    digest.update(str(version).encode("ascii"))
    digest.update(b"\n")
    digest.update(canonical(type, payload))
    return digest.digest()


def cursor_of(event: StoredEvent) -> Cursor:
    """The cursor just after ``event``: pass it to ``read_all`` to continue from there."""
    return Cursor(event.xid, event.position)


class Batch:
    """The events of one command, numbered after ``after_version`` and chained from ``prev_hash``.

    Checking the payloads and computing the hashes before anything is written means that a value the
    store could not keep exactly is refused up front, and that the store's own trigger (PostgreSQL)
    only has to compare the links it is given.
    """

    def __init__(
        self,
        game_id: str,
        after_version: int,
        prev_hash: bytes,
        events: Sequence[NewEvent],
        metadata: Mapping[str, Any],
        command_id: str,
    ) -> None:
        check_json(metadata, "metadata")
        self.game_id = game_id
        self.command_id = command_id
        self.metadata = {**metadata, "command_id": command_id}
        self.first_version = after_version + 1
        self.last_version = after_version + len(events)
        self.events = list(events)
        self.prev_hashes: list[bytes] = []
        self.hashes: list[bytes] = []
        for version, event in enumerate(self.events, start=self.first_version):
            check_json(event.payload, event.type)
            self.prev_hashes.append(prev_hash)
            prev_hash = chain_hash(prev_hash, game_id, version, event.type, event.payload)
            self.hashes.append(prev_hash)

    def result(self, written: Sequence[tuple[int, datetime, int]]) -> AppendResult:
        """The result of storing the batch, given ``(position, recorded_at, xid)`` of each event."""
        if len(written) != len(self.events):
            raise StoreError(f"wrote {len(written)} of {len(self.events)} events")  # cannot happen
        stored = tuple(
            StoredEvent(
                position,
                self.game_id,
                version,
                event.type,
                event.payload,
                self.metadata,
                recorded_at,
                xid,
                prev_hash,
                digest,
            )
            for version, event, prev_hash, digest, (position, recorded_at, xid) in zip(
                range(self.first_version, self.last_version + 1),
                self.events,
                self.prev_hashes,
                self.hashes,
                written,
                strict=True,
            )
        )
        return AppendResult(self.first_version, self.last_version, self.hashes[-1], False, stored)


def check_json(value: Any, where: str) -> None:
    """Refuse values whose stored form would not hash like the original.

    ``jsonb`` keeps strings, integers, booleans, null, lists and objects exactly, but stores numbers as
    ``numeric``: a float would come back as another text (``1e16`` as ``10000000000000000``), and the
    verifier's recomputed hash would no longer match. Object keys must be strings for the same reason,
    and no string may hold U+0000, which ``jsonb`` cannot store at all. The in-memory store refuses the
    same values, so that code tested against it does not fail only in production.
    """
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError(f"{where}: jsonb cannot store the character U+0000")
        return
    if value is None or isinstance(value, bool | int):
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where}: object keys must be strings, not {key!r}")
            check_json(key, where)
            check_json(item, where)
        return
    if isinstance(value, list | tuple):
        for item in value:
            check_json(item, where)
        return
    if isinstance(value, float):
        hint = "" if math.isfinite(value) else " (not even JSON)"
        raise TypeError(f"{where}: floats{hint} do not survive jsonb unchanged; use integers or strings")
    raise TypeError(f"{where}: {type(value).__name__} is not a JSON value")


def check_append(expected_version: int, events: Sequence[NewEvent]) -> None:
    """The arguments every ``append`` refuses before looking at the store."""
    if expected_version < 0:
        raise ValueError(f"expected_version must not be negative, not {expected_version}")
    if not events:
        raise ValueError("append needs at least one event")


def check_create(
    game_id: str, players: Sequence[str], seat_token_hashes: Sequence[bytes], events: Sequence[NewEvent]
) -> None:
    """The arguments every ``create_game`` refuses before looking at the store."""
    if not game_id:
        raise ValueError("a game id must not be empty")
    if not events:
        raise ValueError("a game is created with at least one event")
    if len(seat_token_hashes) != len(players):
        raise ValueError(f"{len(players)} players but {len(seat_token_hashes)} seat token hashes")


def check_limit(limit: int) -> None:
    """Pages of the global log and of the catalogue hold at least one row."""
    if limit < 1:
        raise ValueError(f"limit must be positive, not {limit}")
