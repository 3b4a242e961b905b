"""A rewrite of a stored game the way only the database superuser can make one: events edited and every
hash from the first edit on recomputed, and the games row kept in step with the game's first event,
so that the chain alone says "intact" (what receipts are for).

``python -m tests.rewrite --game ID [--database-url OWNER_DSN | --data-dir DIR]``, from the repository's
root, makes the rewrite of docs/arbiter.md's walk-through: the first two players' names swapped, and the
read models rebuilt from the rewritten log, as a thorough forger would, so that they agree with it too.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
from collections.abc import Callable
from pathlib import Path
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
) -> int:
    """Edit ``game_id``'s events with ``edit`` (payloads) and ``metadata`` and rewrite every hash and link
    after them, with the events' row triggers off for the while (as the owner, who may), in one
    transaction; the number of events the game holds."""
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
    return len(rows)


def marked_at(at: int) -> Edit:
    """An edit of the event at version ``at`` alone: a field added to its payload."""

    def edit(version: int, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {**payload, "rewritten": True} if version == at else payload

    return edit


def swap_two_names(version: int, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The first two players' names swapped in the game's first event: the game has another winner."""
    if kind != "GameCreated":
        return payload
    first, second, *rest = payload["players"]
    return {**payload, "players": [second, first, *rest]}


def main(argv: list[str] | None = None) -> int:
    """Swap the first two players' names of a stored game, recomputing the chain, as its owner."""
    from projections.rebuild import rebuild
    from service.cli.database import database_url
    from service.cli.exits import Refused

    parser = argparse.ArgumentParser(prog="python -m tests.rewrite", description=main.__doc__)
    parser.add_argument("--game", required=True, metavar="ID", help="the stored game to rewrite")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL"),
        metavar="OWNER_DSN",
        help="the database owner's URL (default: $DATABASE_URL; without one, the embedded database)",
    )
    parser.add_argument(
        "--data-dir", type=Path, default=Path("uno-audit-data"), metavar="DIR", help="the embedded database"
    )
    args = parser.parse_args(argv)
    try:
        with database_url(args) as url:
            events = asyncio.run(rewrite_recomputing_chain(url, args.game, swap_two_names))
            if events:
                asyncio.run(rebuild(url, workers=1))
    except Refused as refused:
        print(f"{parser.prog}: {refused}", file=sys.stderr)
        return 2
    except psycopg.Error as error:
        print(f"{parser.prog}: database: {str(error).strip().splitlines()[0]}", file=sys.stderr)
        return 2
    if not events:
        print(f"{parser.prog}: no game {args.game} stored", file=sys.stderr)
        return 2
    print(
        f"game {args.game}: the first two players' names swapped, every hash after them recomputed, "
        "the read models rebuilt"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
