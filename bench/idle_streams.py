"""What idle ``WatchGame`` streams cost the database: transactions/s with none open and with many.

    python bench/idle_streams.py [--streams 200] [--seconds 10] [--windows 3] [--database-url URL] [--json]

It creates a database ``uno_bench_idle_<random>`` on the server at ``--database-url`` (a superuser's),
starts the service in this process on it (``start_server``, with its projector, as ``uno-audit serve``
runs), creates ``--streams`` / 2 two-player games and leaves them waiting for their first round, and
drops the database at the end (also on Ctrl-C or failure). Then:

1. **0 streams**: ``--windows`` windows of ``--seconds`` each, counting the database's transactions
   (committed and rolled back, ``pg_stat_database``) and the scans of its tables (sequential and index,
   ``pg_stat_user_tables``): what the server costs at rest (the projector's poll, the health status of
   the read models).
2. **N streams**: every seat of every game opens a stream from its game's current version, with its
   own seat token (a player watching their game); they catch up; then the same windows.
3. **Alive**: a round is dealt in every game and every stream must receive its events, so the figures
   of (2) are not those of streams that had silently died.

The counts are read from a connection to the server's ``postgres`` database (transactions) and from a
short one to the database itself before and after each window (scans: its own two reads are taken off).
PostgreSQL 15 publishes a backend's counts when it goes idle, but a backend that published less than a
second before holds them back for up to :data:`FLUSH_SECONDS`; so each phase starts with a pause that
long after the burst of work before it (creating the games, opening the streams), and a burst's
transactions are not counted in the windows that follow.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import secrets
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402
import psycopg  # noqa: E402
import structlog  # noqa: E402
from psycopg import sql  # noqa: E402
from psycopg.conninfo import conninfo_to_dict, make_conninfo  # noqa: E402

from service.api.config import ServeConfig  # noqa: E402
from service.api.server import RunningServer, start_server  # noqa: E402
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb  # noqa: E402
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc  # noqa: E402

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
#: How long PostgreSQL 15 may hold back an idle backend's counts (PGSTAT_IDLE_INTERVAL), plus a margin.
FLUSH_SECONDS = 12.0
#: What 200 idle streams cost before streams stopped polling (the issue's figure: one read a second each).
POLLING_FIGURE = "203 transactions/s with 200 idle streams (each polled once a second)"


def _url(server_url: str, dbname: str) -> str:
    params = conninfo_to_dict(server_url)
    params["dbname"] = dbname
    return make_conninfo("", **params)


async def transactions(server_url: str, name: str) -> int:
    """Committed plus rolled-back transactions of database ``name`` so far, read from ``postgres``."""
    async with await psycopg.AsyncConnection.connect(_url(server_url, "postgres"), autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s", (name,)
        )
        row = await cursor.fetchone()
        assert row is not None, f"no database {name}"
        return int(row[0])


async def scans(server_url: str, name: str) -> int:
    """Sequential and index scans of database ``name``'s tables so far."""
    async with await psycopg.AsyncConnection.connect(_url(server_url, name), autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT coalesce(sum(coalesce(seq_scan, 0) + coalesce(idx_scan, 0)), 0) FROM pg_stat_user_tables"
        )
        row = await cursor.fetchone()
        assert row is not None
        return int(row[0])


async def windows(server_url: str, name: str, count: int, seconds: float) -> list[dict[str, float]]:
    """``count`` windows of ``seconds``: transactions/s and table scans/s of database ``name`` in each,
    after :data:`FLUSH_SECONDS` for the counts of the work before to be published."""
    await asyncio.sleep(FLUSH_SECONDS)
    measured = []
    for _ in range(count):
        xacts, scanned, started = (
            await transactions(server_url, name),
            await scans(server_url, name),
            time.monotonic(),
        )
        await asyncio.sleep(seconds)
        xacts_after, scanned_after, ended = (
            await transactions(server_url, name),
            await scans(server_url, name),
            time.monotonic(),
        )
        length = ended - started
        measured.append(
            {
                "seconds": round(length, 2),
                "transactions_per_second": round((xacts_after - xacts) / length, 2),
                # Each look at the scans is a connection to this database: one transaction, counted in
                # this window or the next; its query reads a view of the catalogue, not a table.
                "scans_per_second": round((scanned_after - scanned) / length, 2),
            }
        )
    return measured


class Stream:
    """One seat watching its game: the events it has received."""

    def __init__(self, stub: pb_grpc.GameServiceStub, game_id: str, after: int, token: str) -> None:
        request = pb.WatchGameRequest(game_id=game_id, after_version=after)
        self.call = stub.WatchGame(request, metadata=(("authorization", f"Bearer {token}"),))
        self.received: list[int] = []
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for event in self.call:
            self.received.append(event.version)

    async def close(self) -> None:
        self.call.cancel()
        with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
            await self.task


@contextlib.asynccontextmanager
async def server(url: str) -> AsyncIterator[RunningServer]:
    """The service in this process, its JSON log lines rendered and dropped."""
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.JSONRenderer()],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.ReturnLoggerFactory(),
        cache_logger_on_first_use=True,
    )
    running = await start_server(ServeConfig(listen="127.0.0.1:0", database_url=url, admin_token=None))
    try:
        yield running
    finally:
        await running.stop(grace=1.0)


async def run(server_url: str, name: str, streams: int, seconds: float, count: int) -> dict[str, Any]:
    results: dict[str, Any] = {"streams": streams, "seconds": seconds}
    async with (
        server(_url(server_url, name)) as running,
        grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel,
    ):
        stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
        games = []
        for i in range(streams // 2):
            created: pb.CreateGameReply = await stub.CreateGame(
                pb.CreateGameRequest(command_id=f"idle-{i}", variant=pb.CLASSIC, players=["ann", "bob"])
            )
            assert created.view.awaiting != "game-over"
            games.append(created)
        results["idle_0"] = await windows(server_url, name, count, seconds)

        opened = [
            Stream(stub, game.game_id, game.version, seat.token) for game in games for seat in game.seats
        ]
        deadline = time.monotonic() + 30
        while running.notifier.open_streams < len(opened):
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {running.notifier.open_streams} of {len(opened)} streams opened")
            await asyncio.sleep(0.1)
        results["idle_n"] = await windows(server_url, name, count, seconds)
        results["open_streams"] = running.notifier.open_streams

        # Still alive: every game deals a round, every stream receives it.
        dealt = {}
        for game in games:
            header = pb.CommandHeader(game_id=game.game_id, command_id=f"deal-{game.game_id}")
            reply = await stub.StartRound(
                pb.StartRoundRequest(header=header),
                metadata=(("authorization", f"Bearer {game.seats[0].token}"),),
            )
            dealt[game.game_id] = reply.version
        deadline = time.monotonic() + 30
        expected = [dealt[game.game_id] for game in games for _ in game.seats]
        while any((s.received or [0])[-1] < v for s, v in zip(opened, expected, strict=True)):
            if time.monotonic() > deadline:
                raise RuntimeError("some streams did not receive the round dealt in their game")
            await asyncio.sleep(0.1)
        results["alive"] = len(opened)
        for stream in opened:
            await stream.close()
    return results


def _mean(measured: list[dict[str, float]], key: str) -> float:
    return sum(window[key] for window in measured) / len(measured)


def report(results: dict[str, Any]) -> str:
    n = results["streams"]
    lines = [
        f"idle WatchGame streams: {len(results['idle_0'])} windows of {results['seconds']:g} s per row "
        f"({results['database']})",
        "",
        "| open streams | transactions/s (mean) | each window | table scans/s (mean) | each window |",
        "|---|---|---|---|---|",
    ]
    for streams, measured in ((0, results["idle_0"]), (n, results["idle_n"])):
        xacts = ", ".join(f"{w['transactions_per_second']:.2f}" for w in measured)
        scanned = ", ".join(f"{w['scans_per_second']:.2f}" for w in measured)
        lines.append(
            f"| {streams} | {_mean(measured, 'transactions_per_second'):.2f} | {xacts} "
            f"| {_mean(measured, 'scans_per_second'):.2f} | {scanned} |"
        )
    extra = _mean(results["idle_n"], "transactions_per_second") - _mean(
        results["idle_0"], "transactions_per_second"
    )
    lines += [
        "",
        f"difference: {extra:+.2f} transactions/s for {n} streams",
        f"before (polling): {POLLING_FIGURE}",
        f"alive after the windows: {results['alive']} of {results['open_streams']} streams received a new "
        "round",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="database transactions/s of idle WatchGame streams")
    parser.add_argument("--streams", type=int, default=200, help="idle streams to open (default 200)")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each window (default 10)")
    parser.add_argument("--windows", type=int, default=3, help="windows with and without streams (default 3)")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL),
        help=f"a PostgreSQL server as a superuser's URL (default {DEFAULT_URL}); the script creates and "
        "drops a database uno_bench_idle_<random> there",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    if args.streams < 2 or args.streams % 2:
        parser.error("--streams must be even (two seats per game)")
    name = f"uno_bench_idle_{secrets.token_hex(4)}"
    with psycopg.connect(args.database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        version = conn.execute("SHOW server_version").fetchone()
    try:
        results = asyncio.run(run(args.database_url, name, args.streams, args.seconds, args.windows))
    except KeyboardInterrupt:
        return 130
    finally:
        with psycopg.connect(args.database_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
    results["database"] = f"PostgreSQL {version[0] if version else '?'}"
    print(json.dumps(results) if args.json else report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
