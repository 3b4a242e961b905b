"""The peer: the eventsourcing library's PostgreSQL application, loaded as bench/service.py loads the service.

    python bench/peer.py [--games 1 8 64] [--seconds 5] [--processes 1 2] [--database-url URL] [--json]

A ``Game`` aggregate in a ``PeerGames`` application on the library's own PostgreSQL persistence
(``eventsourcing.postgres``: its table, and its insert — one transaction that locks the table, NOTIFYs and
inserts the rows). What makes its commands/s comparable with the service's end to end figures: the same
games in flight (one worker per game, each issuing one command after another on its own game, as a bot
connection does), two events per command (``CardPlayed`` + ``Prompted``, their stored payloads of the
service's size: a card, a colour, a seat), and the aggregate cache on (a command takes its game from the
cache, fast-forwarded by one SELECT as the library does by default, instead of replaying it). The library
is synchronous, so the workers are threads: in this process, or in ``--processes`` spawned ones sharing the
games out. Each figure comes from a fresh database ``uno_bench_peer_<hex>`` on the server of the URL, which
is dropped afterwards, also on failure; before that every game's stored version is checked against the
commands its worker made (1 + 2 × commands), so no figure counts a command that was not stored.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import multiprocessing
import os
import queue
import random
import secrets
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.synchronize import Barrier
from typing import Any, TypedDict
from uuid import UUID

import psycopg
from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo


def _import_quietly() -> None:
    """Import the library's PostgreSQL module now, putting back the psycopg loggers' levels it sets to
    ERROR on import: importing the peer must not silence the service's own pool warnings (in a test
    process, or in bench/service.py's, which also serves in process)."""
    names = ("psycopg", "psycopg.pool")
    levels = {name: logging.getLogger(name).level for name in names}
    import eventsourcing.postgres  # noqa: F401

    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


_import_quietly()

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
WARMUP_SECONDS = 1.0  # every game is loaded into the cache and every pool connection used before the window
START_TIMEOUT = 120.0  # for spawned processes to import, connect and meet at the barrier
EVENTS_PER_COMMAND = 2

COLOURS = ("red", "yellow", "green", "blue")
CARDS = tuple(
    f"{colour}-{value}" for colour in COLOURS for value in (*range(10), "skip", "reverse", "draw-two")
)
WILDS = ("wild", "wild-draw-four")


class Game(Aggregate):
    """A game of ``seats`` players; each command is a card played, then the next seat prompted."""

    def __init__(self, seats: int) -> None:
        self.seats = seats
        self.turn = 0
        self.top = ""
        self.colour = ""
        self.awaiting = "play"
        self.plays = 0

    @event("CardPlayed")
    def card_played(self, seat: int, card: str, colour: str | None, uno: bool, hand: int) -> None:
        self.top = card
        self.colour = colour or card.split("-", 1)[0]
        self.plays += 1

    @event("Prompted")
    def prompted(self, seat: int, awaiting: str, pointer: int | None, new_turn: bool) -> None:
        self.turn = seat
        self.awaiting = awaiting

    def play(self, rng: random.Random) -> None:
        """One command: two events, as the service's play command mostly appends."""
        card = rng.choice(WILDS) if rng.random() < 0.08 else rng.choice(CARDS)
        colour = rng.choice(COLOURS) if card in WILDS else None
        self.card_played(
            seat=self.turn, card=card, colour=colour, uno=rng.random() < 0.1, hand=rng.randint(1, 9)
        )
        following = (self.turn + 1) % self.seats
        self.prompted(seat=following, awaiting="play", pointer=None, new_turn=True)


class PeerGames(Application[UUID]):
    """The library's application as it comes; its events table is ``peergames_events``."""


EVENTS_TABLE = f"{PeerGames.name.lower()}_events"


class PeerResult(TypedDict):
    """One load's figures. ``commands`` and the rates count the commands completed within the measured
    window (after the warm-up); ``commands_total`` all of them, warm-up included, which ``stored_events``
    (the rows in the events table at the end) must equal ``games`` + 2 × of."""

    games: int
    processes: int
    threads: list[int]  # per process
    seconds: float
    commands: int
    events: int
    commands_per_second: float
    events_per_second: float
    p50_ms: float
    p99_ms: float
    commands_total: int
    stored_events: int
    event_bytes: float  # mean size of a command's stored event (state column: JSON, timestamp included)
    database: str


class PeerError(RuntimeError):
    """The run failed, or what is stored disagrees with the commands counted."""


@dataclass
class _Tally:
    """What one process's workers did: completions in the window, their latencies, commands per game."""

    window: float = 0.0
    latencies: list[float] = field(default_factory=list)
    per_game: dict[str, int] = field(default_factory=dict)


# --- the database -----------------------------------------------------------------------------------------


def _environment(database_url: str, pool_size: int, *, create_table: bool) -> dict[str, str]:
    """The library's settings for the database of ``database_url``: it reads no URL, so the parts are
    taken from a connection (which resolves what the URL leaves out, as libpq does: user, password)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        info = conn.info
        return {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_DBNAME": info.dbname,
            "POSTGRES_HOST": info.host,
            "POSTGRES_PORT": str(info.port),
            "POSTGRES_USER": info.user,
            "POSTGRES_PASSWORD": info.password or "",
            # A connection per worker, as the service's pool has one per game in flight; none more.
            "POSTGRES_POOL_SIZE": str(pool_size),
            "POSTGRES_MAX_OVERFLOW": "0",
            # The cache on: big enough for every game, so no command replays its game's events.
            "AGGREGATE_CACHE_MAXSIZE": str(max(pool_size, 1) * 4),
            # Spawned processes find the table made: concurrent CREATE TABLE IF NOT EXISTS can collide.
            "CREATE_TABLE": "y" if create_table else "n",
        }


@contextmanager
def peer_database(server_url: str) -> Iterator[str]:
    """A fresh database ``uno_bench_peer_<hex>`` on the server of ``server_url`` (a login that may
    create databases), its URL yielded, dropped afterwards (its connections ended), also on failure."""
    name = f"uno_bench_peer_{secrets.token_hex(4)}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        params = conninfo_to_dict(server_url)
        params["dbname"] = name
        yield make_conninfo("", **params)
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _stored(database_url: str) -> tuple[dict[str, int], int, float, str]:
    """Each game's last stored version, the rows stored, the mean size of a command's event, and the
    database's name."""
    table = sql.Identifier(EVENTS_TABLE)
    with psycopg.connect(database_url, autocommit=True) as conn:
        versions = {
            str(game): int(version)
            for game, version in conn.execute(
                sql.SQL("SELECT originator_id, max(originator_version) FROM {} GROUP BY 1").format(table)
            )
        }
        row = conn.execute(
            sql.SQL(
                "SELECT count(*), avg(octet_length(state)) FILTER (WHERE originator_version > 1) FROM {}"
            ).format(table)
        ).fetchone()
        name = conn.info.dbname
    assert row is not None
    return versions, int(row[0]), float(row[1] or 0.0), name


# --- the load ---------------------------------------------------------------------------------------------


def _work(
    app: PeerGames, game: UUID, start: float, end: float, seed: int, tally: _Tally, lock: threading.Lock
) -> None:
    """Commands on ``game`` until ``end``: take it from the cache, play (two events), save. A command
    counts in the window when it completes within [start, end]."""
    rng = random.Random(seed)
    latencies: list[float] = []
    total = 0
    while (began := time.perf_counter()) < end:
        aggregate: Game = app.repository.get(game)
        aggregate.play(rng)
        app.save(aggregate)
        done = time.perf_counter()
        total += 1
        if start <= done <= end:
            latencies.append(done - began)
    with lock:
        tally.latencies.extend(latencies)
        tally.per_game[str(game)] = total


def _run_threads(app: PeerGames, games: Sequence[UUID], warmup: float, seconds: float) -> _Tally:
    """One thread per game, all measured over the same window after ``warmup``."""
    tally = _Tally(window=seconds)
    lock = threading.Lock()
    start = time.perf_counter() + warmup
    end = start + seconds
    # Daemon threads: an interrupted run is not kept alive by its workers (they stop at ``end`` anyway).
    workers = [
        threading.Thread(target=_work, args=(app, game, start, end, index, tally, lock), daemon=True)
        for index, game in enumerate(games)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if len(tally.per_game) != len(games):
        raise PeerError(f"{len(games) - len(tally.per_game)} of {len(games)} workers failed (see stderr)")
    return tally


def _child(
    database_url: str, games: list[str], warmup: float, seconds: float, barrier: Barrier, results: Any
) -> None:
    """A spawned process's share: its games on threads, with an application (pool, cache) of its own."""
    try:
        with PeerGames(env=_environment(database_url, len(games), create_table=False)) as app:
            ids = [UUID(game) for game in games]
            barrier.wait(timeout=START_TIMEOUT)  # every process starts its window together
            tally = _run_threads(app, ids, warmup, seconds)
        results.put(("ok", tally.latencies, tally.per_game))
    except BaseException as error:  # reported to the parent, which stops the run
        results.put(("error", repr(error), {}))
        raise


def _run_processes(
    database_url: str, shares: list[list[UUID]], warmup: float, seconds: float
) -> list[_Tally]:
    context = multiprocessing.get_context("spawn")  # no fork of a process holding threads and connections
    barrier = context.Barrier(len(shares))
    results = context.Queue()
    children = [
        context.Process(
            target=_child,
            args=(database_url, [str(game) for game in share], warmup, seconds, barrier, results),
            name=f"uno-bench-peer-{index}",
        )
        for index, share in enumerate(shares)
    ]
    tallies: list[_Tally] = []
    try:
        for child in children:
            child.start()
        deadline = time.monotonic() + START_TIMEOUT + warmup + seconds + 60.0
        while len(tallies) < len(children):
            try:
                status, latencies, per_game = results.get(timeout=1.0)
            except queue.Empty:
                if time.monotonic() > deadline or any(c.exitcode not in (None, 0) for c in children):
                    raise PeerError("a peer process died or hung") from None
                continue
            if status != "ok":
                raise PeerError(f"a peer process failed: {latencies}")
            tallies.append(_Tally(window=seconds, latencies=latencies, per_game=per_game))
        for child in children:
            child.join(timeout=30.0)
    finally:
        barrier.abort()  # a child still waiting to start gives up
        for child in children:
            if child.is_alive():
                child.terminate()
            child.join(timeout=10.0)
    return tallies


def _percentile(ordered: Sequence[float], fraction: float) -> float:
    """Nearest rank, in ms; 0 with no samples."""
    if not ordered:
        return 0.0
    rank = min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))
    return ordered[rank] * 1000.0


def run_peer(
    database_url: str, games: int, seconds: float, processes: int = 1, warmup: float = WARMUP_SECONDS
) -> PeerResult:
    """The load on an existing database (its events table is made if missing): ``games`` games created,
    then one thread per game for ``warmup`` + ``seconds``, in this process (``processes`` 1) or in
    ``processes`` spawned ones sharing the games (never more processes than games). Blocks; raises
    :class:`PeerError` when a worker fails or a game's stored version is not 1 + 2 × its commands."""
    if games < 1 or processes < 1 or seconds <= 0:
        raise ValueError("games and processes must be at least 1, seconds above 0")
    processes = min(processes, games)
    in_process = processes == 1
    tallies: list[_Tally] = []
    with PeerGames(env=_environment(database_url, games if in_process else 1, create_table=True)) as app:
        created = [Game(seats=4) for _ in range(games)]
        app.save(*created)
        ids = [game.id for game in created]
        if in_process:
            tallies.append(_run_threads(app, ids, warmup, seconds))
    if not in_process:
        shares = [ids[index::processes] for index in range(processes)]
        tallies.extend(_run_processes(database_url, shares, warmup, seconds))

    per_game = {game: count for tally in tallies for game, count in tally.per_game.items()}
    versions, stored, event_bytes, name = _stored(database_url)
    wrong = [g for g in map(str, ids) if versions.get(g) != 1 + EVENTS_PER_COMMAND * per_game.get(g, -1)]
    if wrong:
        raise PeerError(f"{len(wrong)} games' stored versions disagree with their commands, e.g. {wrong[0]}")
    latencies = sorted(latency for tally in tallies for latency in tally.latencies)
    commands = len(latencies)
    return PeerResult(
        games=games,
        processes=processes,
        threads=[len(tally.per_game) for tally in tallies],
        seconds=seconds,
        commands=commands,
        events=EVENTS_PER_COMMAND * commands,
        commands_per_second=round(commands / seconds, 1),
        events_per_second=round(EVENTS_PER_COMMAND * commands / seconds, 1),
        p50_ms=round(_percentile(latencies, 0.50), 2),
        p99_ms=round(_percentile(latencies, 0.99), 2),
        commands_total=sum(per_game.values()),
        stored_events=stored,
        event_bytes=round(event_bytes, 1),
        database=name,
    )


def measure_peer(
    server_url: str, games: int, seconds: float, processes: int = 1, warmup: float = WARMUP_SECONDS
) -> PeerResult:
    """:func:`run_peer` in a fresh database on the server of ``server_url``, dropped afterwards. Blocks."""
    with peer_database(server_url) as database_url:
        return run_peer(database_url, games, seconds, processes, warmup)


async def peer_commands_per_second(
    database_url: str, games: int, seconds: float, processes: int = 1, warmup: float = WARMUP_SECONDS
) -> PeerResult:
    """:func:`measure_peer` on a thread, for an event loop (bench/service.py's). ``database_url`` is any
    database on the server; the run uses a database of its own there. Once started it runs to its end
    (about ``warmup`` + ``seconds``) even if the awaiting task is cancelled."""
    return await asyncio.to_thread(measure_peer, database_url, games, seconds, processes, warmup)


# --- the command line -------------------------------------------------------------------------------------


def report(results: Sequence[PeerResult]) -> str:
    lines = [
        "the peer: eventsourcing (PostgreSQL, aggregate cache on), 2 events per command",
        f"{'games':>5}  {'processes':>9}  {'threads':>7}  {'commands/s':>10}  {'events/s':>9}  "
        f"{'p50 ms':>7}  {'p99 ms':>7}  {'event bytes':>11}",
    ]
    for each in results:
        threads = "+".join(map(str, each["threads"]))
        lines.append(
            f"{each['games']:>5}  {each['processes']:>9}  {threads:>7}  "
            f"{each['commands_per_second']:>10,.1f}  {each['events_per_second']:>9,.1f}  "
            f"{each['p50_ms']:>7.2f}  {each['p99_ms']:>7.2f}  {each['event_bytes']:>11.1f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the eventsourcing library's PostgreSQL application, loaded")
    parser.add_argument("--games", type=int, nargs="+", default=[1, 8, 64], help="games in flight (1 8 64)")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured window of each load (default 5)")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2], help="processes (default 1 2)")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL),
        help=f"a PostgreSQL server, as a login that may create databases (default {DEFAULT_URL}); each "
        "load runs in a database uno_bench_peer_<random> made and dropped there",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    if min(args.games) < 1 or min(args.processes) < 1 or args.seconds <= 0:
        parser.error("--games and --processes must be at least 1, --seconds above 0")
    results: list[PeerResult] = []
    try:
        for processes in args.processes:
            for games in args.games:
                result = measure_peer(args.database_url, games, args.seconds, processes)
                results.append(result)
                # Progress, as a run of several loads takes a while; the table comes at the end.
                rate = result["commands_per_second"]
                print(f"peer: {games} games, {processes} processes: {rate:,.1f} commands/s", file=sys.stderr)
    except KeyboardInterrupt:
        return 130
    print(json.dumps({"peer": results}) if args.json else report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
