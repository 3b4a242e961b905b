"""Helpers for the event store tests: games, events and the checks every stream must pass."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from service.store import (
    GENESIS_HASH,
    AppendResult,
    Cursor,
    NewEvent,
    Store,
    StoredEvent,
    cursor_of,
)
from service.store.canonical import canonical
from service.store.model import HASH_VERSION, event_hash, row_facts, stored_hash

PLAYERS = ("ada", "bob", "cy")


def token_hash(game_id: str, seat: int) -> bytes:
    return hashlib.sha256(f"token:{game_id}:{seat}".encode()).digest()


def request_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def played(n: int, **extra: Any) -> NewEvent:
    """A small event with a payload that says which one it is."""
    return NewEvent("CardPlayed", {"player": n % 3, "card": f"R{n % 10}", "n": n, **extra})


async def new_game(
    store: Store, game_id: str, *, tournament_id: str = "", events: Sequence[NewEvent] | None = None
) -> AppendResult:
    """Create ``game_id`` with a GameCreated event (or ``events``) through the store."""
    return await store.create_game(
        game_id,
        variant="classic",
        players=PLAYERS,
        tournament_id=tournament_id,
        seed=b"seed:" + game_id.encode(),
        seat_token_hashes=[token_hash(game_id, seat) for seat in range(len(PLAYERS))],
        command_id=f"create:{game_id}",
        request_hash=request_hash(f"create:{game_id}"),
        events=events or [NewEvent("GameCreated", {"variant": "classic", "players": list(PLAYERS)})],
        metadata={"actor": "admin"},
    )


async def read_until(store: Store, after: Cursor, expected: int) -> list[StoredEvent]:
    """Follow ``read_all`` from ``after`` until ``expected`` events came (another session of the cluster
    holding an old transaction open may delay them, which is the gap-free order working as designed).
    The test's timeout bounds the wait."""
    seen: list[StoredEvent] = []
    while len(seen) < expected:
        page = await store.read_all(after, limit=3)
        if page:
            seen.extend(page)
            after = cursor_of(page[-1])
        else:
            await asyncio.sleep(0.01)
    return seen


def assert_valid_stream(events: Sequence[StoredEvent]) -> None:
    """Versions 1..n without gaps, each hash recomputed from the row, each prev_hash its predecessor's."""
    assert [e.version for e in events] == list(range(1, len(events) + 1))
    prev = GENESIS_HASH
    for event in events:
        assert event.prev_hash == prev, f"version {event.version} does not link to its predecessor"
        assert event.hash == stored_hash(event, prev)
        prev = event.hash


async def count(url: str, query: str, *params: Any) -> int:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = await conn.execute(query, params)
        row = await cursor.fetchone()
        assert row is not None
        return int(row[0])


#: An event row written with plain SQL, as its writer hashed it (the parameters: :func:`forged_row`).
INSERT_ROW = (
    "INSERT INTO events (game_id, version, type, payload, metadata, recorded_at, prev_hash, hash, "
    "hash_version) VALUES (%(game_id)s, %(version)s, %(type)s, %(payload)s, %(metadata)s, "
    "%(recorded_at)s, %(prev_hash)s, %(hash)s, %(hash_version)s) RETURNING position"
)


def forged_row(
    game_id: str,
    version: int,
    prev_hash: bytes,
    event: NewEvent,
    metadata: dict[str, Any] | None = None,
    recorded_at: datetime | None = None,
) -> dict[str, Any]:
    """The parameters of :data:`INSERT_ROW` for a row of the current hash version (2) that links on
    ``prev_hash``: its metadata (default ``{}``) and time (default now) hashed with it, as a writer that
    bypasses the store must, since a stream never goes back to version 1."""
    metadata = {} if metadata is None else metadata
    at = datetime.now(UTC) if recorded_at is None else recorded_at
    content = canonical(event.type, event.payload)
    digest = event_hash(
        HASH_VERSION, prev_hash, game_id, version, content, row_facts(HASH_VERSION, metadata, at)
    )
    return {
        "game_id": game_id,
        "version": version,
        "type": event.type,
        "payload": Jsonb(event.payload),
        "metadata": Jsonb(metadata),
        "recorded_at": at,
        "prev_hash": prev_hash,
        "hash": digest,
        "hash_version": HASH_VERSION,
    }
