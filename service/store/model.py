"""The store's values and its hash chain, shared by every implementation of :class:`~service.store.Store`.

Both stores (PostgreSQL and in memory) number and chain a command's events here, with the same code, so
a hash the in-memory store hands out is the hash PostgreSQL would store and the verifier recomputes.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeAlias

from service.store.canonical import canonical, canonical_json
from service.store.errors import LedgerMismatch, StoreError

GENESIS_HASH = bytes(32)
"""The ``prev_hash`` of every game's version 1."""

HASH_VERSION = 2
"""The row hash every new event gets (:func:`event_hash`). Rows stored with an earlier one keep it: a row's
``hash_version`` says how its hash was made, and the verifier recomputes each row by its own."""

HASH_VERSIONS = (1, 2)
"""Every row hash version a writer has used."""

DISPUTE_TYPES = ("DisputeFiled", "DisputeRuled")
"""The stored types of the audit trail's disputes and rulings (:mod:`service.domain.entries`), which the
games table looks up across games."""

CommandRow: TypeAlias = tuple[bytes, int, int]
"""A command recorded in a game's ledger: ``(request_hash, first_version, last_version)``."""


@dataclass(frozen=True, slots=True)
class LedgerRow:
    """A whole row of a game's command ledger (the ``commands`` table)."""

    command_id: str
    request_sha256: bytes
    first_version: int
    last_version: int
    recorded_at: datetime


@dataclass(frozen=True, slots=True)
class Carried:
    """What the events say of one command id: the versions that carry it (``count`` of them, from
    ``first`` to ``last``) and the request hashes (hex) their metadata names (``""`` for a row of hash
    version 1, which names none)."""

    count: int
    first: int | None
    last: int | None
    requests: frozenset[str]


def agreed(game_id: str, command_id: str, ledger: CommandRow | None, carried: Carried) -> CommandRow | None:
    """The ledger row of ``command_id`` once it agrees with the events that carry the id (``None``: a new
    command, which neither knows); :class:`LedgerMismatch` when they disagree. Both stores settle every
    retry through here, so a command is never carried out twice, nor answered with another's result."""
    if ledger is None:
        if carried.count:
            raise LedgerMismatch(
                game_id,
                command_id,
                f"the events at {carried.first}–{carried.last} carry this command id, and the command "
                "ledger has no row for it",
            )
        return None
    request, first, last = ledger
    if (carried.first, carried.last, carried.count) != (first, last, last - first + 1):
        held = f"{carried.first}–{carried.last}" if carried.count else "none"
        raise LedgerMismatch(
            game_id,
            command_id,
            f"the command ledger says versions {first}–{last}, the events that carry the id are {held}",
        )
    if not carried.requests <= {"", request.hex()}:
        raise LedgerMismatch(
            game_id, command_id, "the command ledger's request hash is not the one the events carry"
        )
    return ledger


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to append: its type name and its JSON payload (see
    :func:`service.domain.catalogue.encode`)."""

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
    hash_version: int = 1


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
    """A game of the games table and its current stream version (0 before its first event)."""

    game_id: str
    variant: str
    players: list[str]
    tournament_id: str
    created_at: datetime
    version: int
    client: str = ""


def chain_hash(prev_hash: bytes, game_id: str, version: int, type: str, payload: Mapping[str, Any]) -> bytes:
    """The hash of one event of row version 1: ``sha256(prev_hash ‖ game_id ‖ "\n" ‖ version ‖ "\n" ‖
    canonical)``.

    ``game_id`` is UTF-8, ``version`` decimal ASCII digits, and ``canonical`` is
    :func:`service.store.canonical.canonical` of ``(type, payload)``: sorted keys, no spaces, UTF-8. Linking
    each event to its predecessor's hash means that changing, removing or reordering any stored event changes
    every later hash, which the verifier detects by recomputing the chain from ``GENESIS_HASH``. The game
    id and version are hashed too so an event cannot be moved to another game or place unnoticed. The
    framing is unambiguous: canonical JSON contains no raw newline and starts with ``{``, so the last two
    newlines always delimit the version. Version 1 leaves the metadata out; :func:`event_hash` says what
    version 2 adds.
    """
    return event_hash(1, prev_hash, game_id, version, canonical(type, payload), b"")


def row_facts(hash_version: int, metadata: Any, recorded_at: datetime) -> bytes:
    """What row version ``hash_version`` hashes besides the type and payload: nothing for version 1; for
    version 2, the canonical JSON of ``{"hash_version", "metadata", "recorded_at"}`` (the time in UTC,
    ISO 8601 with microseconds, as ``timestamptz`` keeps it)."""
    if hash_version == 1:
        return b""
    # The object written key by key, in sorted order, around the metadata's canonical JSON: every event's row
    # has its facts written (tests/test_codec_load_canonical.py compares them with the whole object's).
    return b'{"hash_version":%d,"metadata":%s,"recorded_at":"%s"}' % (
        hash_version,
        canonical_json(metadata),
        utc_text(recorded_at).encode("ascii"),
    )


def utc_text(moment: datetime) -> str:
    """``moment`` as the hash writes it: UTC, ISO 8601, microseconds (``2026-12-05T07:30:00.5+00:00`` is
    written ``2026-12-05T07:30:00.500000+00:00``)."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def event_hash(
    hash_version: int, prev_hash: bytes, game_id: str, version: int, content: bytes, facts: bytes
) -> bytes:
    """The hash of a row of ``hash_version`` from its canonical ``content`` (type and payload) and
    :func:`row_facts`. Version 1 is :func:`chain_hash`'s framing. Version 2 appends ``"\n" ‖ facts``:
    the command id, the request's hash, the actor, the command and the time are then under the chain
    too. Canonical JSON holds no raw newline, so a version-2 preimage has one newline more than any
    version-1 preimage, and the two can never be taken for each other.
    """
    if hash_version not in HASH_VERSIONS:
        raise ValueError(f"no row hash version {hash_version}")
    digest = hashlib.sha256(prev_hash)
    digest.update(game_id.encode())
    digest.update(b"\n")
    digest.update(str(version).encode("ascii"))
    digest.update(b"\n")
    digest.update(content)
    if hash_version >= 2:
        digest.update(b"\n")
        digest.update(facts)
    return digest.digest()


def stored_hash(row: StoredEvent, prev_hash: bytes | None = None, version: int | None = None) -> bytes:
    """The hash ``row`` should carry by its own ``hash_version`` (after ``prev_hash`` and at ``version``:
    by default its own)."""
    return event_hash(
        row.hash_version,
        row.prev_hash if prev_hash is None else prev_hash,
        row.game_id,
        row.version if version is None else version,
        canonical(row.type, row.payload),
        row_facts(row.hash_version, row.metadata, row.recorded_at),
    )


def cursor_of(event: StoredEvent) -> Cursor:
    """The cursor just after ``event``: pass it to ``read_all`` to continue from there."""
    return Cursor(event.xid, event.position)


class Batch:
    """The events of one command, numbered after ``after_version`` and chained from ``prev_hash``.

    Checking the payloads and computing the hashes before anything is written means that a value the
    store could not keep exactly is refused up front, and that the store's own trigger (PostgreSQL)
    only has to compare the links it is given. The events are rows of :data:`HASH_VERSION`: their
    metadata (``metadata`` plus ``command_id`` and ``request_sha256``, the ledger row's facts) and their
    time, ``recorded_at`` (default: now), are hashed with them and stored as given.
    """

    def __init__(
        self,
        game_id: str,
        after_version: int,
        prev_hash: bytes,
        events: Sequence[NewEvent],
        metadata: Mapping[str, Any],
        command_id: str,
        request_hash: bytes,
        recorded_at: datetime | None = None,
    ) -> None:
        check_json(metadata, "metadata")
        self.game_id = game_id
        self.command_id = command_id
        self.request_hash = request_hash
        self.metadata = {**metadata, "command_id": command_id, "request_sha256": request_hash.hex()}
        # A whole number of microseconds in UTC: what timestamptz keeps, so the stored time hashes alike.
        self.recorded_at = (recorded_at or datetime.now(UTC)).astimezone(UTC)
        self.first_version = after_version + 1
        self.last_version = after_version + len(events)
        self.events = list(events)
        self.prev_hashes: list[bytes] = []
        self.hashes: list[bytes] = []
        facts = row_facts(HASH_VERSION, self.metadata, self.recorded_at)
        for version, event in enumerate(self.events, start=self.first_version):
            check_json(event.payload, event.type)
            self.prev_hashes.append(prev_hash)
            content = canonical(event.type, event.payload)
            prev_hash = event_hash(HASH_VERSION, prev_hash, game_id, version, content, facts)
            self.hashes.append(prev_hash)

    def result(self, written: Sequence[tuple[int, int]]) -> AppendResult:
        """The result of storing the batch, given ``(position, xid)`` of each event."""
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
                self.recorded_at,
                xid,
                prev_hash,
                digest,
                HASH_VERSION,
            )
            for version, event, prev_hash, digest, (position, xid) in zip(
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
    """Pages of the global log and of the games table hold at least one row."""
    if limit < 1:
        raise ValueError(f"limit must be positive, not {limit}")
