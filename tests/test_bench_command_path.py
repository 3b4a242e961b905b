"""bench/command_path.py, briefly: a short run counts accepted commands and their CPU, drops its database,
and its command line measures the code at ``--before`` in a child process too."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from bench import service as bench_service
from bench.command_path import main, measure
from service.api.servicer import GameService

ROOT = Path(__file__).resolve().parent.parent


def _exists(server_url: str, name: str) -> bool:
    with psycopg.connect(server_url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_database WHERE datname = %s", (name,)).fetchone()
    assert row is not None
    return bool(row[0])


def test_a_short_run_counts_commands_and_drops_its_database(postgres_url: str) -> None:
    result = asyncio.run(measure(postgres_url, games=2, seconds=0.5, warmup=0.2))
    assert result["commands"] > 0
    assert result["cpu_us_per_command"] > 0
    assert not _exists(postgres_url, result["database"])


def test_the_command_line_measures_the_code_at_before_in_a_child(postgres_url: str) -> None:
    options = [
        "--games",
        "1",
        "--runs",
        "1",
        "--seconds",
        "0.3",
        "--warmup",
        "0.2",
        "--json",
        "--database-url",
        postgres_url,
    ]
    done = subprocess.run(
        [sys.executable, "bench/command_path.py", *options, "--before", str(ROOT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert [run["commands"] > 0 for run in found["runs"] + found["before"]] == [True, True]
    assert not any(_exists(postgres_url, run["database"]) for run in found["runs"] + found["before"])


def test_a_game_whose_command_fails_stops_the_run_and_drops_its_database(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(self: GameService, request: Any, context: Any) -> None:
        raise ValueError("broken on purpose")

    monkeypatch.setattr(GameService, "Play", broken)
    names: list[str] = []
    create = bench_service.create_database

    def noted(url: str, name: str) -> None:
        names.append(name)
        create(url, name)

    monkeypatch.setattr(bench_service, "create_database", noted)
    with pytest.raises(RuntimeError, match="a game's command failed") as failed:
        asyncio.run(measure(postgres_url, games=2, seconds=0.5, warmup=0.2))
    assert isinstance(failed.value.__cause__, ValueError)
    assert names and not _exists(postgres_url, names[0])


@pytest.mark.parametrize(
    "arguments",
    [
        ["--games", "0"],
        ["--runs", "-1"],
        ["--seconds", "0"],
        ["--games", "x"],
        ["--warmup", "-1"],
        ["--seconds", "nan"],
    ],
)
def test_garbage_arguments_are_refused_with_exit_2(arguments: list[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        main(arguments)
    assert refused.value.code == 2
