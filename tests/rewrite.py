"""A rewrite of a stored game the way only the database superuser can make one: events edited and every
hash from the first edit on recomputed, and the games row kept in step with the game's first event,
so that the chain alone says "intact" (what receipts are for)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from service.store import GENESIS_HASH
from service.store.model import stored_hash
from service.store.streams import EVENT_COLUMNS, stored_event

#: ``edit(version, type, payload)`` gives the payload the event is to have (the same one: untouched).
Edit = Callable[[int, str, dict[str, Any]], dict[str, Any]]
#: ``edit(version, metadata)`` gives the metadata the event is to have.
MetadataEdit = Callable[[int, dict[str, Any]], dict[str, Any]]


async def rewrite_recomputing_chain(
    owner_url: str, game_id: str, edit: Edit, metadata: MetadataEdit = lambda version, kept: kept
) -> None:
    """Edit ``game_id``'s events with ``edit`` (payloads) and ``metadata`` and rewrite every hash and link
    after them, with the events' row triggers off for the while (as the owner, who may), in one
    transaction."""
    async with await psycopg.AsyncConnection.connect(owner_url) as conn:
        cursor = await conn.execute(
            f"SELECT {EVENT_COLUMNS} FROM events e WHERE e.game_id = %s ORDER BY e.version", (game_id,)
        )
        rows = [stored_event(row) for row in await cursor.fetchall()]
        previous = GENESIS_HASH
        await conn.execute("ALTER TABLE events DISABLE TRIGGER USER")
        for row in rows:
            version = row.version
            payload = edit(version, row.type, row.payload)
            meta = metadata(version, row.metadata)
            digest = stored_hash(dataclasses.replace(row, payload=payload, metadata=meta), previous)
            await conn.execute(
                "UPDATE events SET payload = %s, metadata = %s, prev_hash = %s, hash = %s"
                " WHERE game_id = %s AND version = %s",
                (Jsonb(payload), Jsonb(meta), previous, digest, game_id, version),
            )
            previous = digest
            if row.type == "GameCreated":  # the games row in step, as a thorough forger keeps it
                await conn.execute(
                    "UPDATE games SET variant = %s, players = %s WHERE game_id = %s",
                    (payload["variant"], Jsonb(payload["players"]), game_id),
                )
        await conn.execute("ALTER TABLE events ENABLE TRIGGER USER")
        await conn.commit()


def marked_at(at: int) -> Edit:
    """An edit of the event at version ``at`` alone: a field added to its payload."""

    def edit(version: int, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {**payload, "rewritten": True} if version == at else payload

    return edit
