"""Writing a batch's :class:`~projections.fold.Changes` to the view tables (live ones or a rebuild's).

Per-game rows are upserted whole (``INSERT ... ON CONFLICT DO UPDATE``): a row says everything about its
key, so writing it twice gives the same table. The aggregates (``standings``, ``player_stats``) are
*added to*: ``ON CONFLICT DO UPDATE SET games = t.games + excluded.games …``, which is not idempotent on
its own — it is exactly-once because the batch's rows and its checkpoint commit in one transaction
under the projection set's lock (see :mod:`projections.projector`).

Each table gets one ``executemany``, which psycopg sends in pipeline mode: one round trip per table
whatever the number of rows, and the rows of a batch are only those of the games it touched.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, LiteralString

import psycopg
from psycopg import sql

from .fold import Changes
from .source import Connection
from .views import STAT_COLUMNS

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
    "standings": (("tournament_id", "player", *STAT_COLUMNS), ("tournament_id", "player")),
    "player_stats": (("player", *STAT_COLUMNS), ("player",)),
}
_ADDED = frozenset({"standings", "player_stats"})


def upsert(view: str, suffix: str = "") -> sql.Composed:
    """The statement that writes one row of ``view`` into the table ``view + suffix``."""
    columns, key = COLUMNS[view]
    table = sql.Identifier(view + suffix)
    rest = [c for c in columns if c not in key]
    if view in _ADDED:
        sets = sql.SQL(", ").join(
            sql.SQL("{c} = {t}.{c} + EXCLUDED.{c}").format(c=sql.Identifier(c), t=table) for c in rest
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
        return [(t, p, *delta) for (t, p), delta in sorted(changes.standings.items())]
    if view == "player_stats":
        return [(p, *delta) for p, delta in sorted(changes.player_stats.items())]
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
