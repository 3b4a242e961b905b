"""The live schema is ready for Citus as ``deploy/citus.sql`` distributes it.

Citus refuses a primary key or unique constraint that lacks the distribution column, and a foreign key
between distributed tables would tie shards together. These tests read the migrated schema from
``pg_catalog`` (store and read models) and the plan from ``deploy/citus.sql``, so a new table, key or
foreign key that would not distribute fails here, on plain PostgreSQL, before anyone runs Citus.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from projections.migrate import PROJECTIONS
from projections.migrate import apply_migrations as migrate_all
from service.store.migrate import STORE

PLAN = Path(__file__).resolve().parents[2] / "deploy" / "citus.sql"
#: The migration runner's ledgers stay plain tables on the coordinator.
LEDGERS = frozenset({STORE.table, PROJECTIONS.table})

_DISTRIBUTED = re.compile(
    r"create_distributed_table\('(\w+)',\s*'(\w+)'(?:,\s*colocate_with\s*=>\s*'(\w+)')?\)", re.IGNORECASE
)
_REFERENCE = re.compile(r"create_reference_table\('(\w+)'\)", re.IGNORECASE)


@dataclass
class Plan:
    """What ``deploy/citus.sql`` does: distributed tables (column, co-location) and reference tables."""

    distributed: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    reference: set[str] = field(default_factory=set)


def read_plan(text: str) -> Plan:
    plan = Plan()
    for line in text.splitlines():
        if line.lstrip().startswith("--"):
            continue
        for table, column, colocate in _DISTRIBUTED.findall(line):
            plan.distributed[table] = (column, colocate or None)
        plan.reference.update(_REFERENCE.findall(line))
    return plan


async def distribution_problems(conn: psycopg.AsyncConnection, plan: Plan) -> list[str]:
    """Everything in the live schema that ``plan`` could not distribute (empty when all is well)."""
    problems: list[str] = []
    cursor = await conn.execute(
        "SELECT c.relname FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace "
        "AND c.relkind IN ('r', 'p') ORDER BY 1"
    )
    tables = [row[0] for row in await cursor.fetchall()]
    for table in tables:
        if table not in plan.distributed and table not in plan.reference and table not in LEDGERS:
            problems.append(f"{table}: not placed in deploy/citus.sql")
    for table in sorted(set(plan.distributed) | plan.reference):
        if table not in tables:
            problems.append(f"{table}: placed in deploy/citus.sql but not in the schema")
    by_game = {t for t, (column, _) in plan.distributed.items() if column == "game_id"}
    for table, (column, colocate) in sorted(plan.distributed.items()):
        if table not in tables:
            continue
        cursor = await conn.execute(
            "SELECT count(*) FROM pg_attribute WHERE attrelid = %s::regclass AND attname = %s "
            "AND NOT attisdropped",
            (table, column),
        )
        if await cursor.fetchone() != (1,):
            problems.append(f"{table}: has no distribution column {column}")
        if column == "game_id" and table != "games" and colocate != "games":
            problems.append(f"{table}: distributed by game_id but not co-located with games")
        # Primary keys, unique constraints and unique indexes alike: each must include the column.
        cursor = await conn.execute(
            "SELECT i.indexrelid::regclass::text, array_agg(a.attname::text ORDER BY a.attnum) "
            "FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey) "
            "WHERE i.indrelid = %s::regclass AND i.indisunique GROUP BY 1 ORDER BY 1",
            (table,),
        )
        for index, columns in await cursor.fetchall():
            if column not in columns:
                problems.append(f"{table}: unique {index} ({', '.join(columns)}) lacks {column}")
        cursor = await conn.execute(
            "SELECT conname::text FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'x'",
            (table,),
        )
        problems += [f"{table}: exclusion constraint {name}" for (name,) in await cursor.fetchall()]
    cursor = await conn.execute(
        "SELECT conname::text, conrelid::regclass::text, confrelid::regclass::text FROM pg_constraint "
        "WHERE contype = 'f' AND connamespace = current_schema()::regnamespace ORDER BY 1"
    )
    for name, source, target in await cursor.fetchall():
        if source in plan.distributed or target in plan.distributed:
            problems.append(f"{source}: foreign key {name} to {target} joins distributed tables")
    if not by_game:
        problems.append("nothing is distributed by game_id")
    return problems


async def test_every_key_includes_its_distribution_column_and_no_foreign_key_joins_shards(
    database_url: str,
) -> None:
    await migrate_all(database_url)  # the store's schema, then the read models'
    plan = read_plan(PLAN.read_text(encoding="utf-8"))
    assert {t for t, (column, _) in plan.distributed.items() if column == "game_id"} >= {
        "games",
        "events",
        "commands",
        "seats",
        "game_secrets",
    }
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        assert await distribution_problems(conn, plan) == []


async def test_the_check_finds_a_key_without_game_id_a_foreign_key_and_an_unplaced_table(
    database_url: str,
) -> None:
    """The check above can fail: the schema before migration 0003, and a few new mistakes, do."""
    await migrate_all(database_url)
    plan = read_plan(PLAN.read_text(encoding="utf-8"))
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute("ALTER TABLE commands DROP CONSTRAINT commands_pkey")
        await conn.execute("ALTER TABLE commands ADD PRIMARY KEY (command_id)")
        await conn.execute("ALTER TABLE seats ADD FOREIGN KEY (game_id) REFERENCES games")
        await conn.execute("CREATE UNIQUE INDEX events_by_position ON events (position)")
        await conn.execute("CREATE TABLE side_notes (game_id text PRIMARY KEY)")
        problems = await distribution_problems(conn, plan)
    assert sorted(problems) == [
        "commands: unique commands_pkey (command_id) lacks game_id",
        "events: unique events_by_position (position) lacks game_id",
        "seats: foreign key seats_game_id_fkey to games joins distributed tables",
        "side_notes: not placed in deploy/citus.sql",
    ]


def test_the_plan_is_read_from_the_file() -> None:
    plan = read_plan(PLAN.read_text(encoding="utf-8"))
    assert "command_ids" not in plan.distributed
    assert plan.distributed["events"] == ("game_id", "games")
    assert plan.distributed["games"] == ("game_id", None)
    assert "standings" in plan.reference
