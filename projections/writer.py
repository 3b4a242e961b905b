"""Writing a batch's :class:`~projections.fold.Changes` to the view tables (live ones or a rebuild's).

Per-game rows are upserted whole; the aggregates are added to, exactly once because rows and checkpoint
commit together. One ``executemany`` per table; aggregates are keyed by :func:`text_key`. When the
database refuses a game's rows, :func:`write_batch` writes the batch again one game at a time, in
savepoints, so only that game is left out. docs/DESIGN.md ("Reading and writing the views") says why.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, LiteralString

import psycopg
from psycopg import sql

from projections.fold import Changes, Folder
from projections.quarantine import GAME_DATA_ERRORS
from projections.source import Connection
from projections.views import STAT_COLUMNS

Hook = Callable[[str], Awaitable[None]]
"""A test seam: awaited with a stage name ("wrote hands", …) inside the batch transaction."""

#: Each view's columns and primary key, in the order of the migration (and of the rows in views.py).
COLUMNS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "hands": (("game_id", "seat", "cards"), ("game_id", "seat")),
    "tables": (
        (
            "game_id",
            "variant",
            "round",
            "dealer",
            "top",
            "colour",
            "direction",
            "turn",
            "awaiting",
            "draw_pile",
            "discard_pile",
            "version",
            "status",
        ),
        ("game_id",),
    ),
    "round_scores": (("game_id", "round", "winner", "points", "hands"), ("game_id", "round")),
    "match_scores": (("game_id", "seat", "player", "total"), ("game_id", "seat")),
    "standings": (
        ("tournament_key", "player_key", "tournament_id", "player", *STAT_COLUMNS),
        ("tournament_key", "player_key"),
    ),
    "player_stats": (("player_key", "player", *STAT_COLUMNS), ("player_key",)),
}
_ADDED = frozenset({"standings", "player_stats"})


def text_key(text: str) -> bytes:
    """The key of a free-text value (32 bytes, whatever its length): SHA-256 of its UTF-8 bytes, which is
    ``sha256(convert_to(text, 'UTF8'))`` in SQL (the migration that introduced the keys computes it so)."""
    return hashlib.sha256(text.encode()).digest()


def upsert(view: str, suffix: str = "") -> sql.Composed:
    """The statement that writes one row of ``view`` into the table ``view + suffix``."""
    columns, key = COLUMNS[view]
    table = sql.Identifier(view + suffix)
    rest = [c for c in columns if c not in key]
    if view in _ADDED:  # the counters add up; the text a key was made of stays as it is
        sets = sql.SQL(", ").join(
            sql.SQL("{c} = {t}.{c} + EXCLUDED.{c}").format(c=sql.Identifier(c), t=table) for c in STAT_COLUMNS
        )
    else:
        sets = sql.SQL(", ").join(sql.SQL("{c} = EXCLUDED.{c}").format(c=sql.Identifier(c)) for c in rest)
    template: LiteralString = (
        "INSERT INTO {t} ({cols}) VALUES ({vals}) ON CONFLICT ({key}) DO UPDATE SET {sets}"
    )
    return sql.SQL(template).format(
        t=table,
        cols=sql.SQL(", ").join(map(sql.Identifier, columns)),
        vals=sql.SQL(", ").join(sql.Placeholder() * len(columns)),
        key=sql.SQL(", ").join(map(sql.Identifier, key)),
        sets=sets,
    )


def rows_of(changes: Changes, view: str) -> Sequence[Sequence[Any]]:
    """The rows ``changes`` holds for ``view``, as statement parameters."""
    # The aggregates' rows go in key order: several writers adding to the same rows at once (the
    # partitions of a rebuild) then lock them in the same order and cannot deadlock.
    if view == "standings":
        return [
            (text_key(t), text_key(p), t, p, *delta) for (t, p), delta in sorted(changes.standings.items())
        ]
    if view == "player_stats":
        return [(text_key(p), p, *delta) for p, delta in sorted(changes.player_stats.items())]
    rows: Sequence[Sequence[Any]] = getattr(changes, view)
    return rows


def write_sync(
    conn: psycopg.Connection[tuple[Any, ...]], changes: Changes, views: Sequence[str], *, suffix: str = ""
) -> int:
    """:func:`write` on a synchronous connection (the rebuild's bulk phase reads and writes that way)."""
    written = 0
    for view in views:
        rows = rows_of(changes, view)
        if rows:
            with conn.cursor() as cursor:
                cursor.executemany(upsert(view, suffix), rows)
            written += len(rows)
    return written


async def write(
    conn: Connection, changes: Changes, views: Sequence[str], *, suffix: str = "", hook: Hook | None = None
) -> int:
    """Write ``changes`` to the tables of ``views`` (named ``view + suffix``); return the rows written."""
    written = 0
    for view in views:
        rows = rows_of(changes, view)
        if rows:
            async with conn.cursor() as cursor:
                await cursor.executemany(upsert(view, suffix), rows)
            written += len(rows)
        if hook is not None:
            await hook(f"wrote {view}")
    return written


def write_batch_sync(
    conn: psycopg.Connection[tuple[Any, ...]], folder: Folder, views: Sequence[str], *, suffix: str = ""
) -> tuple[int, dict[str, psycopg.Error]]:
    """:func:`write_batch` on a synchronous connection (the rebuild's bulk phase)."""
    try:
        with conn.transaction():
            return write_sync(conn, folder.changes(), views, suffix=suffix), {}
    except GAME_DATA_ERRORS:
        pass
    written = 0
    refused: dict[str, psycopg.Error] = {}
    for game_id in folder.pending_games():
        try:
            with conn.transaction():
                written += write_sync(conn, folder.changes((game_id,)), views, suffix=suffix)
        except GAME_DATA_ERRORS as error:
            refused[game_id] = error
    return written, refused


async def write_batch(
    conn: Connection, folder: Folder, views: Sequence[str], *, suffix: str = "", hook: Hook | None = None
) -> tuple[int, dict[str, psycopg.Error]]:
    """Write ``folder``'s staged batch inside the caller's transaction; return the rows written and the
    games whose rows the database refused, with its error (their rows are not written; the caller
    quarantines them and drops them from the folder). See the module docstring."""
    try:
        async with conn.transaction():
            return await write(conn, folder.changes(), views, suffix=suffix, hook=hook), {}
    except GAME_DATA_ERRORS:
        pass
    written = 0
    refused: dict[str, psycopg.Error] = {}
    for game_id in folder.pending_games():
        try:
            async with conn.transaction():
                written += await write(conn, folder.changes((game_id,)), views, suffix=suffix)
        except GAME_DATA_ERRORS as error:
            refused[game_id] = error
    return written, refused
