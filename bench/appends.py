"""Appends/s of the store alone, with group commit on and off, beside pgbench's one-transaction ceiling.

    python bench/appends.py [--seconds 4] [--database-url URL] [--json]

In one run, on one PostgreSQL server, in a fresh database ``uno_bench_<random>`` that the script creates
and drops (also on Ctrl-C or failure), at 1, 8 and 64 concurrent games:

* **pgbench**: :func:`bench.service.pgbench`, the store's own one-statement append (ledger row, two
  events, ``pg_notify``) run by ``pgbench -c N -j N`` against the real tables with every trigger on,
  each client appending to a game of its own. This is the ceiling of appends sent one transaction each.
* **store, group commit off**: ``EventStore.open(group_commit=False)``: ``N`` tasks, one game each, each
  awaiting ``append`` in a loop (expected version and ``prev_hash`` from the previous result, as the
  command handler passes them); each append is one statement on a pooled connection (pool of
  ``max(10, N)``, as ``bench/service.py`` gives it).
* **store, group commit on**: the same with ``group_commit=True`` (the default), and the mean number of
  commands per group in the measuring windows.

The store runs four times in each mode, in the order off, on, on, off, off, on, on, off (:data:`ORDER`);
each mode's figure pools its four runs.

Then :func:`statement_costs` times the ways a group could be sent (the group statement, a transaction
with a ``SAVEPOINT`` per command, single statements) on one connection, for groups of 1, 8 and 64: why
group commit sends the group statement.

Every append carries two events of the sizes pgbench writes (``PLAYED``, ``PROMPTED``), so all three
write the same rows. Each run is counted over ``--seconds`` after a warm-up of ``WARMUP_SECONDS``. Run
it twice on a quiet machine and compare: on a shared one the WAL flush's latency moves a lot.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import hashlib
import json
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import service as service_bench  # noqa: E402
from bench.service import (  # noqa: E402
    PGBENCH,
    PLAYED,
    PLAYERS,
    PROMPTED,
    WARMUP_SECONDS,
    Figure,
    Window,
    cpu_figures,
    create_database,
    database_url,
    drop_database,
    pgbench,
    pooled,
    run_for,
    settle,
)
from service.store import EventStore, NewEvent  # noqa: E402
from service.store.group_commit import BATCH_APPEND, Pending, batch_item  # noqa: E402
from service.store.model import HASH_VERSION, Batch  # noqa: E402
from service.store.streams import NOTIFY_CHANNEL, write_params, write_statement  # noqa: E402

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
LOADS = (1, 8, 64)
#: The store's runs of each load, group commit off and on: ABBA twice, so that a drift of the machine's
#: load during a load (or the first run's cold caches) meets both modes alike.
ORDER = (False, True, True, False, False, True, True, False)

#: One command's events: what pgbench's script writes, as the store is given them.
COMMAND_EVENTS = (NewEvent("CardPlayed", json.loads(PLAYED)), NewEvent("Prompted", json.loads(PROMPTED)))


@dataclass(slots=True)
class StoreRun:
    """One measurement of the store: the appends in the window, the CPU used, the groups sent."""

    figure: Figure
    cpu: dict[str, float]
    groups: int
    commands: int


def combined(runs: Sequence[StoreRun]) -> dict[str, Any]:
    """Runs of one load and mode as one figure: appends over seconds, pooled latencies, each run's rate,
    CPU per append, and the mean group (commands per group over all runs' windows)."""
    figure = pooled([run.figure for run in runs])
    cpu = {name: sum(run.cpu.get(name, 0.0) for run in runs) for name in runs[0].cpu}
    result = figure.to_json()
    result.update(cpu_figures(cpu, figure.seconds, figure.operations))
    groups, commands = sum(run.groups for run in runs), sum(run.commands for run in runs)
    result["mean_group"] = round(commands / groups, 2) if groups else None
    return result


async def store_rate(url: str, games: int, seconds: float, *, group_commit: bool) -> StoreRun:
    """``EventStore.append`` from ``games`` tasks, one game each: appends, latencies, CPU, groups."""
    window = Window(seconds)
    store = await EventStore.open(url, max_size=max(10, games), group_commit=group_commit)
    stats: dict[str, dict[str, int]] = {}
    cpu: dict[str, float] = {}
    try:

        async def worker(index: int) -> None:
            game_id = f"store-{uuid.uuid4()}"
            created = await store.create_game(
                game_id,
                variant="classic",
                players=[f"p{i + 1}" for i in range(PLAYERS)],
                tournament_id="",
                seed=secrets.token_bytes(32),
                seat_token_hashes=[secrets.token_bytes(32) for _ in range(PLAYERS)],
                command_id=f"create-{game_id}",
                request_hash=hashlib.sha256(game_id.encode()).digest(),
                events=[NewEvent("GameCreated", {"variant": "classic"})],
                metadata={"actor": "anyone", "command": "CreateGame"},
            )
            version, last_hash = created.last_version, created.last_hash
            while True:
                command_id = f"{game_id}-{version}"
                started = time.perf_counter()
                result = await store.append(
                    game_id,
                    version,
                    COMMAND_EVENTS,
                    command_id=command_id,
                    request_hash=hashlib.sha256(command_id.encode()).digest(),
                    metadata={"actor": index % PLAYERS, "command": "Play"},
                    prev_hash=last_hash,
                )
                window.record(started, time.perf_counter())
                version, last_hash = result.last_version, result.last_hash

        async def watch() -> None:
            """The group counters and this process's CPU time at the window's start and end."""
            for name, at in (("start", window.start), ("end", window.end)):
                await asyncio.sleep(max(0.0, at - time.perf_counter()))
                stats[name] = store.group_commit_stats()
                cpu[name] = time.process_time()
            await asyncio.sleep(3600)  # until run_for cancels the workers

        workers = [functools.partial(worker, i) for i in range(games)]
        used = await run_for(window, [*workers, watch], {})  # PostgreSQL's CPU; the bench's is cpu
    finally:
        await store.close()
    if "start" in cpu and "end" in cpu:
        used["bench"] = cpu["end"] - cpu["start"]
    start, end = stats.get("start"), stats.get("end")
    groups = commands = 0
    if start is not None and end is not None:
        groups = end["groups"] - start["groups"]
        commands = end["commands"] - start["commands"]
    return StoreRun(window.figure(), used, groups, commands)


#: What the statements comparison sends: the single-command statement, as ``append`` sends it alone.
SINGLE = "WITH " + write_statement("(VALUES (%(game_id)s)) AS source (game_id)")
GROUP_SIZES = (1, 8, 64)
#: Groups timed per size and way (they take turns, so the machine's load meets each way alike).
COMPARE_ROUNDS = {1: 300, 8: 100, 64: 30}


async def statement_costs(url: str) -> dict[str, dict[str, float]]:
    """How to send a group, on one connection: milliseconds per group of ``n`` commands (median).

    * ``group``: :data:`~service.store.group_commit.BATCH_APPEND`, what group commit sends: one
      statement, each command checked (ledger row, head, hash) and written only if it passes;
    * ``savepoints``: one transaction, pipelined (one round trip): per command ``SAVEPOINT``, the
      single-command statement, ``RELEASE``; then ``COMMIT`` (the other way to let a command fail alone:
      a refused command costs a ``ROLLBACK TO SAVEPOINT`` and the resending of the rest, not timed here);
    * ``singles``: the single-command statement ``n`` times, one after another (no group commit).
    """
    games = [f"cmp-{i}" for i in range(max(GROUP_SIZES))]
    heads: dict[str, tuple[int, bytes]] = {}
    store = await EventStore.open(url, group_commit=False)
    try:
        for game_id in games:
            created = await store.create_game(
                game_id,
                variant="classic",
                players=[f"p{i + 1}" for i in range(PLAYERS)],
                tournament_id="",
                seed=None,
                seat_token_hashes=[bytes(32)] * PLAYERS,
                command_id=f"create-{game_id}",
                request_hash=bytes(32),
                events=[NewEvent("GameCreated", {"variant": "classic"})],
                metadata={},
            )
            heads[game_id] = created.last_version, created.last_hash
    finally:
        await store.close()
    request = bytes(32)

    def next_commands(n: int) -> list[Batch]:
        made = []
        for game_id in games[:n]:
            version, last_hash = heads[game_id]
            command_id = f"{game_id}-{version}"
            batch = Batch(game_id, version, last_hash, COMMAND_EVENTS, {"actor": 0}, command_id, request)
            heads[game_id] = batch.last_version, batch.hashes[-1]
            made.append(batch)
        return made

    group_statement = BATCH_APPEND.format(channel=NOTIFY_CHANNEL)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:

        async def group(n: int) -> None:
            items = [batch_item(i, Pending(b)) for i, b in enumerate(next_commands(n))]
            params = {"batch": Jsonb(items), "hash_version": HASH_VERSION}
            cursor = await conn.execute(group_statement, params, prepare=True)
            assert all(row[1] is not None for row in await cursor.fetchall())

        async def savepoints(n: int) -> None:
            async with conn.pipeline() as pipeline:
                await conn.execute("BEGIN")
                cursors = []
                for batch in next_commands(n):
                    await conn.execute("SAVEPOINT command")
                    cursors.append(await conn.execute(SINGLE, write_params(batch), prepare=True))
                    await conn.execute("RELEASE SAVEPOINT command")
                await conn.execute("COMMIT")
                await pipeline.sync()
                for cursor in cursors:
                    assert len(await cursor.fetchall()) == len(COMMAND_EVENTS)

        async def singles(n: int) -> None:
            for batch in next_commands(n):
                cursor = await conn.execute(SINGLE, write_params(batch), prepare=True)
                assert len(await cursor.fetchall()) == len(COMMAND_EVENTS)

        ways = {"group": group, "savepoints": savepoints, "singles": singles}
        costs: dict[str, dict[str, float]] = {}
        for n in GROUP_SIZES:
            times: dict[str, list[float]] = {name: [] for name in ways}
            for _ in range(COMPARE_ROUNDS[n]):
                for name, way in ways.items():
                    started = time.perf_counter()
                    await way(n)
                    times[name].append(time.perf_counter() - started)
            costs[str(n)] = {name: round(statistics.median(spent) * 1000, 3) for name, spent in times.items()}
    return costs


async def run_all(url: str, seconds: float, workdir: Path) -> dict[str, Any]:
    store = await EventStore.open(url)
    try:
        await store.migrate()
    finally:
        await store.close()
    await settle(url)
    results: dict[str, Any] = {"seconds": seconds, "warmup_seconds": WARMUP_SECONDS, "loads": {}}
    for games in LOADS:
        _say(f"{games} game(s): pgbench ...")
        ceiling = (await pgbench(url, games, seconds, workdir)).to_json()
        runs: dict[bool, list[StoreRun]] = {False: [], True: []}
        for group_commit in ORDER:
            _say(f"{games} game(s): store, group commit {'on' if group_commit else 'off'} ...")
            runs[group_commit].append(await store_rate(url, games, seconds, group_commit=group_commit))
        results["loads"][str(games)] = {
            "pgbench": ceiling,
            "off": combined(runs[False]),
            "on": combined(runs[True]),
        }
        await settle(url)  # the next load meets no pending autovacuum or checkpoint of this one
    _say("one group on one connection: the group statement, savepoints, single statements ...")
    results["statements"] = await statement_costs(url)
    return results


def report(results: dict[str, Any]) -> str:
    lines = [
        f"appends/s of the store alone (2 events each) — {results['seconds']:g} s per measurement after "
        f"{results['warmup_seconds']:g} s warm-up; {results['database']}; latencies p50/p99 in ms",
        "",
        f"{'games':>5}  {'pgbench TPS':>11}  {'store, off':>10}  {'store, on':>10}  {'on/off':>6}  "
        f"{'on/pgbench':>10}  {'mean group':>10}  {'off p50/p99':>12}  {'on p50/p99':>12}  "
        "CPU ms per append off/on: bench, postgres",
    ]
    for games, load in results["loads"].items():
        ceiling, off, on = load["pgbench"], load["off"], load["on"]
        group = f"{on['mean_group']:.1f}" if on["mean_group"] is not None else "-"
        lines.append(
            f"{games:>5}  {ceiling['tps']:>11,.0f}  {off['per_second']:>10,.0f}  {on['per_second']:>10,.0f}  "
            f"{on['per_second'] / off['per_second']:>6.2f}  {on['per_second'] / ceiling['tps']:>10.2f}  "
            f"{group:>10}  {off['p50_ms']:>5.2f}/{off['p99_ms']:<6.2f}  "
            f"{on['p50_ms']:>5.2f}/{on['p99_ms']:<6.2f}  {_cpu(off)} / {_cpu(on)}"
        )
    lines.append("each run, appends/s, in the order they ran:")
    for games, load in results["loads"].items():
        runs = {mode: iter(load[mode]["runs"]) for mode in ("off", "on")}
        modes = ["on" if group_commit else "off" for group_commit in ORDER]
        cells = [f"{mode} {next(runs[mode])['per_second']:,.0f}" for mode in modes]
        lines.append(f"{games:>5} game(s): {', '.join(cells)}")
    lines += [
        "",
        "one group of n commands on one connection, ms per group (median) and commands/s:",
        f"{'n':>5}  {'group statement':>22}  {'SAVEPOINT per command':>22}  {'n single statements':>22}",
    ]
    for n, cost in results["statements"].items():
        row = "  ".join(f"{cost[way]:>8.2f} ({int(n) / cost[way] * 1000:>8,.0f}/s)" for way in cost)
        lines.append(f"{n:>5}  {row}")
    return "\n".join(lines)


def _cpu(figure: dict[str, Any]) -> str:
    used = figure.get("cpu_ms_per_op", {})
    figures = (used.get(name) for name in ("bench", "postgres"))
    return ", ".join("-" if value is None else f"{value:.3f}" for value in figures)


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="store appends/s with group commit on and off vs pgbench")
    parser.add_argument("--seconds", type=float, default=4.0, help="length of each run (default 4)")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL),
        help=f"a PostgreSQL server as a superuser's URL (default {DEFAULT_URL}); the script creates and "
        "drops a database uno_bench_<random> there",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    if shutil.which(PGBENCH) is None:
        parser.error("pgbench is not on PATH (Debian: apt-get install postgresql-client)")
    name = f"uno_bench_{secrets.token_hex(4)}"
    service_bench._databases.add(name)  # whose backends the CPU figures count as PostgreSQL's
    created = False
    try:
        create_database(args.database_url, name)
        created = True
        _say(f"database {name} created")
        with tempfile.TemporaryDirectory(prefix="uno-bench-") as workdir:
            results = asyncio.run(run_all(database_url(args.database_url, name), args.seconds, Path(workdir)))
    except KeyboardInterrupt:
        _say("interrupted")
        return 130
    finally:
        if created:
            drop_database(args.database_url, name)
            _say(f"database {name} dropped")
    with psycopg.connect(args.database_url) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    results["database"] = f"PostgreSQL {row[0] if row else '?'}"
    results["load_average"] = os.getloadavg()
    print(json.dumps(results) if args.json else report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
