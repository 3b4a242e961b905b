"""bench/peer.py, briefly: a short load stores every event it counts, in one process and in two, and its
database is gone afterwards. Skipped without the eventsourcing library (the ``bench`` extra)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

pytest.importorskip("eventsourcing")

from bench.peer import EVENTS_TABLE, peer_commands_per_second, peer_database, run_peer

GAMES = 2
ROOT = Path(__file__).resolve().parent.parent


def test_importing_the_peer_leaves_the_psycopg_loggers_alone() -> None:
    # eventsourcing.postgres sets them to ERROR when imported; in a fresh process, before and after.
    code = (
        "import logging, psycopg, psycopg_pool\n"
        "names = ('psycopg', 'psycopg.pool')\n"
        "before = [logging.getLogger(n).level for n in names]\n"
        "import bench.peer, eventsourcing.postgres\n"
        "print(before, [logging.getLogger(n).level for n in names])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    before, after = done.stdout.strip().split("] [")
    assert before + "]" == "[" + after, done.stdout


def _databases(server_url: str, name: str) -> int:
    with psycopg.connect(server_url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_database WHERE datname = %s", (name,)).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("processes", [1, 2])
def test_every_command_is_stored(postgres_url: str, processes: int) -> None:
    with peer_database(postgres_url) as url:
        result = run_peer(url, games=GAMES, seconds=0.5, processes=processes, warmup=0.1)
        with psycopg.connect(url, autocommit=True) as conn:
            rows = conn.execute(
                sql.SQL("SELECT originator_id, count(*), max(originator_version) FROM {} GROUP BY 1").format(
                    sql.Identifier(EVENTS_TABLE)
                )
            ).fetchall()
    assert result["commands"] > 0
    assert result["commands_total"] >= result["commands"]
    assert result["threads"] == ([GAMES] if processes == 1 else [1] * GAMES)
    # Each game: its creation, then two events per command, versions without gaps.
    assert len(rows) == GAMES
    assert all(count == version and version % 2 == 1 for _, count, version in rows)
    assert (
        sum(count for _, count, _ in rows) == GAMES + 2 * result["commands_total"] == result["stored_events"]
    )
    assert result["events"] == 2 * result["commands"]
    assert 0 < result["p50_ms"] <= result["p99_ms"]
    assert _databases(postgres_url, result["database"]) == 0


async def test_the_async_call_drops_its_database(postgres_url: str) -> None:
    result = await peer_commands_per_second(postgres_url, games=GAMES, seconds=0.5, warmup=0.1)
    assert result["database"].startswith("uno_bench_peer_")
    assert result["commands"] > 0
    assert result["stored_events"] == GAMES + 2 * result["commands_total"]
    assert _databases(postgres_url, result["database"]) == 0
