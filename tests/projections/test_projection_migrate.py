"""The projection schema is migrated by the projections package, once, after the store's schema."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from projections.migrate import apply_migrations, migrations
from projections.writer import text_key

pytestmark = pytest.mark.timeout(60)


async def test_concurrent_migrators_apply_each_file_once(empty_database_url: str) -> None:
    results = await asyncio.gather(*(apply_migrations(empty_database_url) for _ in range(3)))
    names = [m.name for m in migrations()]
    # Each file is its own transaction, so the migrators may share the files out; each runs once.
    assert sorted(name for applied in results for name in applied) == names
    assert await apply_migrations(empty_database_url) == []
    async with await psycopg.AsyncConnection.connect(empty_database_url, autocommit=True) as conn:
        cursor = await conn.execute("SELECT name FROM projection_migrations ORDER BY name")
        assert [name for (name,) in await cursor.fetchall()] == names
        cursor = await conn.execute("SELECT count(*) FROM schema_migrations")  # the store's, applied first
        row = await cursor.fetchone()
        assert row is not None and row[0] >= 1
        # The service's role may read every view (and nothing here lets it write one).
        cursor = await conn.execute(
            "SELECT bool_and(has_table_privilege('uno_audit_app', t, 'SELECT')), "
            "bool_or(has_table_privilege('uno_audit_app', t, 'INSERT')) "
            "FROM unnest(ARRAY['hands', 'tables', 'round_scores', 'match_scores', 'standings', "
            "'player_stats', 'projection_checkpoints', 'projection_quarantine']) AS t"
        )
        assert await cursor.fetchone() == (True, False)


async def test_the_migrations_key_of_a_text_is_the_writers(database_url: str) -> None:
    """Migration 0002 keyed the rows already there with SQL; new rows get their keys from Python."""
    texts = ["p1", "Zoë 🂡", "x" * 100_000, ""]
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        for text in texts:
            cursor = await conn.execute("SELECT sha256(convert_to(%s, 'UTF8'))", (text,))
            assert await cursor.fetchone() == (text_key(text),)
