"""Service throughput and latency on one PostgreSQL, side by side with what the database itself can do.

    python bench/service.py [--seconds 8] [--fill 1000000] [--latency-runs 2] [--e2e-only]
                            [--database-url URL] [--json]

Everything runs in one go on the same PostgreSQL server, in a fresh database ``uno_bench_<random>`` (and
``uno_bench_<random>_empty`` for the empty store of (d)) that the script creates and drops, also on
Ctrl-C or failure; the servers it starts are stopped likewise. ``uno-audit serve`` logs in as the
service's login ``uno_audit_service`` (made if missing, its password left as it is: the server must let
it in, as a trusting local server does). Each figure is printed next to its baseline and target, and
the figures of the performance issue (one server process, the bots as the client) beside them.

(a) **The ceiling: pgbench.** ``pgbench -n -M prepared -f append.sql -c N -j N -T s`` at 1, 8 and 64
    clients, where ``append.sql`` is the store's own write statement (one statement, so one transaction
    and one round trip, as :meth:`EventStore.append` sends it): the command row, two event rows (jsonb
    payloads and metadata of the service's sizes, bytea hashes) and ``pg_notify``, into the *real*
    tables with every trigger on. Each client appends to a stream of its own (``:client_id``), its
    version kept in a pgbench variable that persists across transactions; the hashes are
    ``sha256(game/version)``, so a row's ``prev_hash`` is its predecessor's ``hash`` and the insert
    trigger's checks pass and cost what they cost the service.
(b) **The store alone.** :meth:`EventStore.append` in a loop, from 1 and from 8 tasks (one game each),
    appending the commands of games simulated by the rules engine (mostly 2 events, a few 3 or 4), with
    ``prev_hash`` passed from the previous result as the command handler does.
(c) **End to end.** ``uno-audit serve --workers 1`` and then ``--workers 2`` in a subprocess, with 1, 8
    and 64 games in flight, each game on a connection of its own (with several workers the kernel
    spreads connections over them). The load generator must not take the cores it measures: the bots
    (a rules engine per move, and a seat's hand followed from the replies) cost the client about 40 % of
    the server's CPU per command.
    So the commands are generated before the run — four-player classic games played by the simulation's
    bots (:func:`service.play.simulate.play_game`, the dealer given: seat 0), each game's accepted
    commands mapped to gRPC requests (:class:`Script`) — and replayed by a lean asynchronous client
    (:func:`replay`): requests serialized in advance, replies never decoded, no rules engine, no
    GetGame. The server deals the same cards because the admin creates each game with the simulation's
    deck as ``fixed_deck`` (and deals later rounds with theirs); a game is cut before the first
    reshuffle of the discards (the server shuffles those with its own seed). Every replayed command
    must be accepted (a refusal is counted and shown: none is expected). A command is an accepted game
    command (the CreateGame calls are made but not counted; their number per command is shown); its
    latency is the client's, from sending to the reply. **(c2)** then paces commands to half of the
    best rate measured (one shared pacer spacing the sends evenly, at the workers and concurrency that
    reached it) and reports their p99; **(c3)** the bots as the client, 8 games, for comparison of the
    two clients' CPU. Without ``--e2e-only`` the same replayed loads run against a server in this
    process too (``start_server``, one event loop with the client), for comparison.
(d) **A full store.** The p50/p99 of the commands of 1 game at a time (bots, as in (c3), against a
    fresh ``uno-audit serve --workers 1``) on an empty store, measured first, before anything else ran;
    then the store under test (which by now holds the events of (a)–(c)) gets ``--fill`` more events
    and the same measurement runs on it. The fill writes whole games — games, seats, commands and
    events rows, with contiguous versions and ``chain_hash`` hashes, copied from games simulated by the
    rules engine — by ``COPY`` in one transaction with all triggers on, so every row passed the checks
    an appended one passes (about 40 s per million events on 2 cores; no trigger is disabled). Then
    ``VACUUM ANALYZE`` and ``CHECKPOINT`` (done before the empty-store run as well), so no run meets a
    pending autovacuum or checkpoint. With ``--latency-runs`` above 1 the later runs alternate between
    the full store and the empty one (a database of its own that only (d) writes to), so a change in
    the machine's load meets both alike; each side's latencies are pooled.

``--e2e-only`` runs (a), (c) (with (c2) and (c3)) and (e) alone: the figures of
bench/README.md's "End to end".

For every load the CPU time used per operation is shown as well, per process (read from ``/proc``): the
bench (client) process, the server subprocess (``serve`` and its workers; ``server.wN``: worker N
alone; with ``--workers 2`` the last is the projector's own process, which folds every event into the
read models; with ``--workers 1`` the one server process runs it), and
PostgreSQL (the backends of this run's databases and the server's shared helpers, see
:func:`cpu_between`). The load average before and after the run is printed: on a shared machine the
figures are only as good as the quiet they were taken in.

(e) **The gRPC floor.** The same replayed loads, with the same client, against ``bench/grpc_floor.py`` in
    1 and 2 processes on one port: a ``GameService`` that parses each request, reads its metadata and
    answers a reply of a typical size made once — no store, no rules, no checks. Its CPU per command is
    what grpcio's core, its asyncio binding and protobuf cost before any of the service's own work.

(c4) **Where the time goes.** The half-peak load of (c2) again, against ``serve --stage-timing
    --metrics-listen``: each command's breakdown — the wait before the servicer ran (the client's send
    to the server's first stamp: one clock, CLOCK_MONOTONIC, on both sides), the server's stages
    (:mod:`service.ops.stages`: admit, decide, group wait, database, reply) and the way back — and, from
    the metrics scraped before and after the window, the event loop's lag (a 5 ms ticker) and the
    garbage collector's passes.
(f) **The peer.** ``bench/peer.py`` (the ``bench`` extra): the eventsourcing library's PostgreSQL
    application with 8 and 64 games in flight, in one process and in two, each command two events, its
    aggregate cache on; each figure beside the service's best end-to-end rate at the same games.

Targets (the latency issue's): p99 at half the peak ≤ 10 ms and ≤ 2 × the p50 with one game (c); the
service end to end ≥ 3 × the peer at 8 and 64 games, with the peer in one process and in two (f).
Targets (the performance issue's, as ratios in one run): end to end ≥ 1.0 × pgbench's best TPS at 64
games and ≥ 0.5 × at 8; p99 ≤ 5 ms at half the peak rate; the server's CPU per command at the peak
≤ 0.4 ms; latency with the full store ≤ 1.2 × empty (p50 and p99). Each load is measured for
``--seconds`` after a warm-up of ``WARMUP_SECONDS``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import glob
import hashlib
import itertools
import json
import logging
import os
import random
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402
import psycopg  # noqa: E402
import structlog  # noqa: E402
from grpc_health.v1 import health_pb2, health_pb2_grpc  # noqa: E402
from psycopg import sql  # noqa: E402
from psycopg.conninfo import conninfo_to_dict, make_conninfo  # noqa: E402

from projections.migrate import apply_migrations as migrate_projections  # noqa: E402
from service.api.config import ServeConfig  # noqa: E402
from service.api.server import start_server  # noqa: E402
from service.app.handler import stored_form  # noqa: E402
from service.checkpoints.keys import Signer  # noqa: E402
from service.client.bots import BotTable, LoadSummary, RetryPolicy  # noqa: E402
from service.play.simulate import SimulatedGame, play_game, seat_names  # noqa: E402
from service.rules.commands import (  # noqa: E402
    Accept,
    CallUno,
    Catch,
    Challenge,
    Choose,
    Command,
    Draw,
    Pass,
    Play,
    Press,
    StartRound,
)
from service.rules.events import FlipReturned, PileReshuffled, RoundStarted  # noqa: E402
from service.rules.options import Variant, make_options  # noqa: E402
from service.store import GENESIS_HASH, EventStore, NewEvent, chain_hash  # noqa: E402
from service.store.canonical import canonical  # noqa: E402
from service.store.migrate import SERVICE_LOGIN, ensure_service_login  # noqa: E402
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb  # noqa: E402
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc  # noqa: E402

try:  # the bench extra (pip install -e '.[bench]'): without it, no peer figures
    from importlib.metadata import version as _version

    from bench.peer import peer_commands_per_second

    EVENTSOURCING = _version("eventsourcing")
except ImportError:
    peer_commands_per_second = None  # type: ignore[assignment]
    EVENTSOURCING = ""

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
PGBENCH = "pgbench"
PLAYERS = 4
TARGET_SCORE = 50  # bots' matches: usually one round (a few hundred commands)
SEED = 2024
WARMUP_SECONDS = 1.0
CONCURRENCIES = (1, 8, 64)
PGBENCH_CLIENTS = (1, 8, 64)
WORKERS = (1, 2)  # serve --workers, for (c)
STORE_TASKS = (1, 8)
TEMPLATE_GAMES = 16

#: End to end ≥ this × pgbench's best one-transaction TPS, by games in flight (none for 1 game).
E2E_VS_PGBENCH = {"8": 0.5, "64": 1.0}
P99_AT_HALF_PEAK_MS = 5.0
# The peer (bench/peer.py, the eventsourcing library's PostgreSQL application): the service end to end
# ≥ this × it at each of these games in flight, with the peer in 1 and in 2 processes.
SERVICE_VS_PEER = 3.0
PEER_GAMES = (8, 64)
PEER_PROCESSES = (1, 2)
# The latency issue's target at half the peak: p99 ≤ 10 ms and ≤ 2 × the p50 with one game.
P99_AT_HALF_PEAK_MS_NOW = 10.0
P99_VS_SINGLE_P50 = 2.0
SERVER_CPU_MS = 0.4  # the server's CPU per command at the peak load
FULL_VS_EMPTY = 1.2  # latency with the filled store ≤ this × empty store
# The figures (bots as the client, one server process), printed beside today's.
BASELINE_E2E = {"1": 495, "8": 1_029, "64": 1_174}
BASELINE_PGBENCH = {"1": 881, "8": 4_578}
BASELINE_P99_MS = 8.9
BASELINE_SERVER_CPU_MS = 0.81

# The sizes of the service's events: a play and the prompt that follows (see a stored game).
PLAYED = '{"uno": false, "card": "R7", "colour": null, "player": 1, "target": null, "discarded": []}'
PROMPTED = '{"player": 2, "pointer": null, "awaiting": "play", "new_turn": true}'

# The store's write statement (service/store/streams.py, write_statement) with the events spelt out:
# one statement, hence one transaction. Versions :v-1 and :v; hashes sha256(game/version).
PGBENCH_SCRIPT = """\\set v :v + 2
WITH command AS (
    INSERT INTO commands (game_id, command_id, request_sha256, first_version, last_version)
    VALUES ('pgb-' || :run || '-' || :client_id, 'pgb-' || :run || '-' || :client_id || '-' || :v,
            sha256(convert_to('request/' || :run || '/' || :client_id || '/' || :v, 'UTF8')), :v - 1, :v)
    ON CONFLICT (game_id, command_id) DO NOTHING
    RETURNING game_id
), appended AS (
    INSERT INTO events (game_id, version, type, payload, metadata, prev_hash, hash)
    SELECT command.game_id, e.version, e.type, e.payload::jsonb,
           jsonb_build_object('actor', :client_id % 4, 'command', 'Play',
                              'command_id', 'pgb-' || :run || '-' || :client_id || '-' || :v),
           sha256(convert_to(command.game_id || '/' || (e.version - 1), 'UTF8')),
           sha256(convert_to(command.game_id || '/' || e.version, 'UTF8'))
      FROM command,
           (VALUES (:v - 1, 'CardPlayed', :played), (:v, 'Prompted', :prompted)) AS e(version, type, payload)
     ORDER BY e.version
    RETURNING version, position, recorded_at, xid
), notified AS (
    SELECT pg_notify('uno_events', game_id) FROM command
)
SELECT a.position, a.recorded_at, a.xid::text::bigint FROM appended a, notified ORDER BY a.version;
"""

# Child processes (servers, pgbench) still running; main() ends them whatever happens.
_children: list[subprocess.Popen[bytes]] = []


# --- figures ----------------------------------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile, nearest rank (as ``LoadSummary.percentile``)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


@dataclass(slots=True)
class Figure:
    """One measured load: how many operations in how long, and their latencies."""

    operations: int
    seconds: float
    latencies_ms: list[float] = field(repr=False)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.operations / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "operations": self.operations,
            "seconds": round(self.seconds, 3),
            "per_second": round(self.rate, 1),
            "p50_ms": round(percentile(self.latencies_ms, 50), 3),
            "p99_ms": round(percentile(self.latencies_ms, 99), 3),
            **self.extra,
        }


class Window:
    """Counts what completes inside the measuring window (after the warm-up) and paces sends if asked."""

    def __init__(self, seconds: float, rate: float | None = None) -> None:
        self.start = time.perf_counter() + WARMUP_SECONDS
        self.end = self.start + seconds
        self.seconds = seconds
        self.latencies_ms: list[float] = []
        self.other_calls = 0  # calls that are not measured operations (CreateGame, GetGame)
        self._interval = 1.0 / rate if rate else 0.0
        self._next_slot = 0.0

    async def pace(self) -> None:
        """Wait for this send's slot: sends are spaced ``1/rate`` apart, whoever sends."""
        if not self._interval:
            return
        now = time.perf_counter()
        slot = max(now, self._next_slot)
        self._next_slot = slot + self._interval
        if slot > now:
            await asyncio.sleep(slot - now)

    def record(self, started: float, ended: float) -> None:
        if self.start <= ended < self.end:
            self.latencies_ms.append((ended - started) * 1000)

    def record_other(self) -> None:
        if self.start <= time.perf_counter() < self.end:
            self.other_calls += 1

    def figure(self, **extra: Any) -> Figure:
        return Figure(len(self.latencies_ms), self.seconds, self.latencies_ms, dict(extra))


async def run_for(
    window: Window, workers: Sequence[Callable[[], Coroutine[Any, Any, None]]], processes: Pids
) -> dict[str, float]:
    """Run the workers until the window closes, then cancel them; a worker's failure is raised.

    Returns the CPU seconds that ``processes`` (and PostgreSQL) used in the window.
    """
    cpu = asyncio.create_task(cpu_between(window.start, window.end, processes))
    tasks = [asyncio.create_task(worker()) for worker in workers]
    try:
        done, _ = await asyncio.wait(
            tasks, timeout=window.end - time.perf_counter(), return_when=asyncio.FIRST_EXCEPTION
        )
        for task in done:
            task.result()  # a worker only ends by failing
        return await cpu  # the load goes on until the last reading
    finally:
        cpu.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, cpu, return_exceptions=True)


# --- CPU used, per process, while a window is open ------------------------------------------------------

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu(pid: int) -> float:
    """CPU seconds (user + system, all threads) the process has used so far; 0 where unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    except (OSError, IndexError, ValueError):
        return 0.0


# PostgreSQL's shared helpers, counted with the backends of our databases (process titles).
_PG_BACKGROUND = ("checkpointer", "background writer", "walwriter", "autovacuum launcher", "archiver")
_databases: set[str] = set()  # the databases this run created: their backends' CPU is ours


def _ours(title: str) -> bool:
    words = title.replace("\0", " ").split()
    if not words or not words[0].startswith("postgres"):
        return False
    if "-D" in words:  # the postmaster
        return True
    text = " ".join(words)
    return any(name in words for name in _databases) or any(f": {b}" in text for b in _PG_BACKGROUND)


Pids = dict[str, Sequence[int]]
"""Processes by the name their CPU is shown under: a server is its parent and its workers."""


def _snapshot(processes: Pids) -> dict[str, dict[int, float]]:
    """CPU seconds so far of the named processes, and of each PostgreSQL process working for us."""
    snapshot = {name: {pid: _cpu(pid) for pid in pids} for name, pids in processes.items()}
    postgres: dict[int, float] = {}
    with contextlib.suppress(OSError):
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if (entry / "comm").read_text().strip() == "postgres" and _ours(
                        (entry / "cmdline").read_text(errors="replace")
                    ):
                        postgres[int(entry.name)] = _cpu(int(entry.name))
    snapshot["postgres"] = postgres
    return snapshot


async def cpu_between(start: float, end: float, processes: Pids) -> dict[str, float]:
    """CPU seconds each process (and PostgreSQL) used between ``start`` and ``end``.

    PostgreSQL's figure adds up the backends of this run's databases (a backend started within the
    span counts from its start; one that ends within it takes its CPU with it) and the shared helpers
    (checkpointer, background writer, WAL writer, autovacuum launcher), which other work on the
    machine may keep busy too.
    """
    await asyncio.sleep(max(0.0, start - time.perf_counter()))
    before = await asyncio.to_thread(_snapshot, processes)
    await asyncio.sleep(max(0.0, end - time.perf_counter()))
    after = await asyncio.to_thread(_snapshot, processes)
    return {
        name: sum(max(0.0, used - before[name].get(pid, 0.0)) for pid, used in pids.items())
        for name, pids in after.items()
    }


def cpu_figures(cpu: dict[str, float], seconds: float, operations: float) -> dict[str, Any]:
    """CPU per operation (ms) and cores kept busy, per process."""
    return {
        "cpu_ms_per_op": {
            name: round(used / operations * 1000, 3) if operations else None for name, used in cpu.items()
        },
        "cores_busy": {name: round(used / seconds, 2) for name, used in cpu.items()},
    }


# --- the database -----------------------------------------------------------------------------------------


def database_url(server_url: str, name: str) -> str:
    params = conninfo_to_dict(server_url)
    params["dbname"] = name
    return make_conninfo("", **params)


def create_database(server_url: str, name: str) -> None:
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def drop_database(server_url: str, name: str) -> None:
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


async def settle(url: str) -> None:
    """VACUUM ANALYZE the store's tables and CHECKPOINT, so no later run meets either half done."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("VACUUM (ANALYZE) games, seats, game_secrets, commands, events")
        await conn.execute("CHECKPOINT")


async def count_events(url: str) -> int:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        row = await (await conn.execute("SELECT count(*) FROM events")).fetchone()
        return int(row[0]) if row else 0


# --- simulated games: the events the store benchmarks append and the fill copies --------------------------


@dataclass(frozen=True, slots=True)
class Template:
    """A game as the service would store it: its creation event, then each command's events."""

    created: NewEvent
    commands: list[tuple[str, list[NewEvent]]]

    @property
    def events(self) -> int:
        return 1 + sum(len(events) for _, events in self.commands)


def templates(count: int, seed: int) -> list[Template]:
    options = make_options(Variant.CLASSIC, {"target_score": TARGET_SCORE * 2})
    made = []
    for index in range(count):
        game = play_game(Variant.CLASSIC, PLAYERS, seed + index, options=options, checks=False)
        commands = [
            (type(command).__name__, [stored_form(e) for e in events]) for command, events in game.steps
        ]
        made.append(Template(stored_form(game.events[0]), commands))
    return made


# --- (a) pgbench ------------------------------------------------------------------------------------------


async def pgbench(url: str, clients: int, seconds: float, workdir: Path) -> Figure:
    """TPS and per-transaction latency of the store's append statement at ``clients`` clients."""
    run = clients  # one set of games per run
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn, conn.transaction():
        for client in range(clients):
            game = f"pgb-{run}-{client}"
            await conn.execute(
                "INSERT INTO games (game_id, variant, players) VALUES (%s, 'classic', %s::jsonb)",
                (game, json.dumps([f"p{i + 1}" for i in range(PLAYERS)])),
            )
            await conn.execute(
                "INSERT INTO events (game_id, version, type, payload, metadata, prev_hash, hash) "
                "VALUES (%s, 1, 'GameCreated', '{}', '{}', %s, sha256(convert_to(%s, 'UTF8')))",
                (game, GENESIS_HASH, f"{game}/1"),
            )
    script = workdir / "append.sql"
    script.write_text(PGBENCH_SCRIPT)
    prefix = workdir / f"latency-{clients}"
    command = [
        PGBENCH, "-n", "-M", "prepared", "-f", str(script), "-c", str(clients), "-j", str(clients),
        "-T", str(max(1, round(seconds))), "-D", "v=1", "-D", f"run={run}", "-D", f"played={PLAYED}",
        "-D", f"prompted={PROMPTED}", "-l", f"--log-prefix={prefix}", url,
    ]  # fmt: skip
    duration = max(1, round(seconds))
    measured: dict[str, float] = {}

    async def probe(pid: int) -> None:
        now = time.perf_counter()
        measured.update(await cpu_between(now + 0.5, now + duration - 0.25, {"pgbench": [pid]}))

    output = await _run(command, probe)
    tps = re.search(r"tps = ([\d.]+) \(without initial connection time\)", output)
    failed = re.search(r"number of failed transactions: (\d+)", output)
    if tps is None:
        raise RuntimeError(f"pgbench printed no TPS:\n{output}")
    latencies: list[float] = []
    for log in glob.glob(f"{prefix}.*"):
        with open(log) as lines:
            latencies.extend(int(line.split()[2]) / 1000 for line in lines)
    rate = float(tps.group(1))
    figure = Figure(
        round(rate * duration),
        duration,
        latencies,
        {"tps": round(rate, 1), "failed": int(failed.group(1)) if failed else None},
    )
    if measured:
        figure.extra.update(cpu_figures(measured, duration - 0.75, rate * (duration - 0.75)))
    return figure


async def _run(command: list[str], watch: Callable[[int], Coroutine[Any, Any, None]]) -> str:
    """Run a child to its end (ending it if we are cancelled) while ``watch(pid)`` runs; its output.

    Raises if the child failed.
    """
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    _children.append(process)
    watching = asyncio.create_task(watch(process.pid))
    try:
        out, _ = await asyncio.to_thread(process.communicate)
        await watching
    finally:
        watching.cancel()
        _end(process)
    text = out.decode(errors="replace")
    if process.returncode != 0:
        raise RuntimeError(f"{command[0]} exited with {process.returncode}:\n{text}")
    return text


def _end(process: subprocess.Popen[bytes], grace: float = 15.0) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    with contextlib.suppress(ValueError):
        _children.remove(process)


# --- (b) the store's append -------------------------------------------------------------------------------


async def store_appends(url: str, tasks: int, seconds: float, games: Sequence[Template]) -> Figure:
    """``EventStore.append`` of simulated games' commands from ``tasks`` tasks, one game each at a time."""
    window = Window(seconds)
    events = 0
    store = await EventStore.open(url, max_size=max(10, tasks))
    try:

        async def worker(index: int) -> None:
            nonlocal events
            for turn in range(1_000_000):
                game = games[(index + turn * tasks) % len(games)]
                game_id, command_id = str(uuid.uuid4()), str(uuid.uuid4())
                result = await store.create_game(
                    game_id,
                    variant="classic",
                    players=[f"p{i + 1}" for i in range(PLAYERS)],
                    tournament_id="",
                    seed=secrets.token_bytes(32),
                    seat_token_hashes=[secrets.token_bytes(32) for _ in range(PLAYERS)],
                    command_id=command_id,
                    request_hash=hashlib.sha256(command_id.encode()).digest(),
                    events=[game.created],
                    metadata={"command_id": command_id, "actor": "anyone", "command": "CreateGame"},
                )
                version, last_hash = result.last_version, result.last_hash
                for name, new in game.commands:
                    command_id = str(uuid.uuid4())
                    started = time.perf_counter()
                    result = await store.append(
                        game_id,
                        version,
                        new,
                        command_id=command_id,
                        request_hash=hashlib.sha256(command_id.encode()).digest(),
                        metadata={"command_id": command_id, "actor": 0, "command": name},
                        prev_hash=last_hash,
                    )
                    ended = time.perf_counter()
                    if window.start <= ended < window.end:
                        events += len(new)
                    window.record(started, ended)
                    version, last_hash = result.last_version, result.last_hash

        workers = [functools.partial(worker, i) for i in range(tasks)]
        used = await run_for(window, workers, {"bench": [os.getpid()]})
    finally:
        await store.close()
    figure = window.figure()
    figure.extra.update(cpu_figures(used, seconds, figure.operations))
    figure.extra["events_per_append"] = round(events / figure.operations, 2) if figure.operations else 0
    return figure


# --- (c) end to end: simulated games' commands, replayed by a lean client ---------------------------------

#: The replayed games are simulated with the first round's dealer given (seat 0) rather than drawn: the
#: server then deals from the simulation's deck as given and the dealer is the same, so every command the
#: simulation accepted is valid on the server as well.
SCRIPT_OPTIONS = {"dealer_selection": "given"}
SCRIPT_GAMES = 128
ADMIN = -1  # the "seat" of the admin's commands (a later round dealt from its fixed deck)
_SERVICE = "/uno.audit.v1.GameService/"
_METHODS = (
    "StartRound",
    "Play",
    "Draw",
    "Pass",
    "Press",
    "CallUno",
    "Catch",
    "Challenge",
    "Accept",
    "Choose",
)


@dataclass(frozen=True, slots=True)
class Script:
    """A simulated game as the replaying client sends it, every request serialized in advance.

    ``create`` is the CreateGameRequest (without its command id) that deals the first round from the
    simulation's own deck (``fixed_deck``, which takes the admin token); ``steps`` are the simulation's
    accepted commands in order, each as (method, seat or :data:`ADMIN`, the request without its header):
    a later round as the admin's StartRound with that round's deck. The game stops before anything the
    server would shuffle with its own seed (a reshuffle of the discards, a first card returned to the
    pile): its draws would then differ from the simulation's."""

    create: bytes
    steps: tuple[tuple[str, int, bytes], ...]


def scripts(count: int, seed: int) -> list[Script]:
    """``count`` scripts from simulated four-player classic games (seeds ``seed``, ``seed + 1``, ...)."""
    options = make_options(Variant.CLASSIC, {"target_score": TARGET_SCORE, **SCRIPT_OPTIONS})
    made: list[Script] = []
    index = seed
    while len(made) < count:
        script = _script(play_game(Variant.CLASSIC, PLAYERS, index, options=options, checks=False))
        index += 1
        if script is not None:
            made.append(script)
    return made


def _script(game: SimulatedGame) -> Script | None:
    first_deck: list[str] | None = None
    steps: list[tuple[str, int, bytes]] = []
    for command, events in game.steps:
        if any(isinstance(event, PileReshuffled | FlipReturned) for event in events):
            break  # shuffled by the server's own seed: what follows would not be the simulation's
        if isinstance(command, StartRound):
            deck = next(event.deck for event in events if isinstance(event, RoundStarted))
            tokens = [card.token for card in deck or ()]
            if first_deck is None:
                first_deck = tokens
            else:
                request = pb.StartRoundRequest(fixed_deck=tokens)
                steps.append(("StartRound", ADMIN, request.SerializeToString()))
            continue
        steps.append(_request(command))
    if first_deck is None or not steps:
        return None
    create = pb.CreateGameRequest(
        variant=pb.CLASSIC, players=seat_names(PLAYERS), target_score=TARGET_SCORE, fixed_deck=first_deck
    )
    create.options.update(SCRIPT_OPTIONS)
    return Script(create.SerializeToString(), tuple(steps))


def _request(command: Command) -> tuple[str, int, bytes]:
    """A seat's command as its gRPC method, seat and request (without the header), serialized."""
    request: Any
    if isinstance(command, Play):
        request = pb.PlayRequest(
            card=command.card.token,
            colour=command.colour.value if command.colour else "",
            uno=command.uno,
            jump_in=command.jump_in,
        )
        if command.target is not None:
            request.target = command.target
    elif isinstance(command, Choose):
        request = pb.ChooseRequest(colour=command.colour.value if command.colour else "")
        if command.target is not None:
            request.target = command.target
    elif isinstance(command, Catch):
        request = pb.CatchRequest(target=command.target)
    elif isinstance(command, Draw | Pass | Press | CallUno | Challenge | Accept):
        request = getattr(pb, f"{type(command).__name__}Request")()
    else:
        raise TypeError(f"no request for {command!r}")
    return type(command).__name__, command.player, request.SerializeToString()


def _header(game_id: str, command_id: str) -> bytes:
    """The serialized ``header`` field (number 1 in every command request): prepended to a request's
    other fields, it makes the whole request (protobuf merges concatenated fields)."""
    header = pb.CommandHeader(game_id=game_id, command_id=command_id)
    return pb.CallUnoRequest(header=header).SerializeToString()


def _bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


async def replay(
    address: str,
    games: int,
    seconds: float,
    scripts: Sequence[Script],
    admin_token: str,
    *,
    rate: float | None = None,
    server: Sequence[int] = (),
    breakdown: list[tuple[float, ...]] | None = None,
) -> Figure:
    """``games`` games in flight for the window, each replaying scripts one after another.

    The client is lean on purpose, so that the machine's cores go to the server and the database: the
    requests are serialized in advance (a command costs the client a header, a send and a status), the
    replies are not decoded (an error status is the only answer it reads), and there is no rules
    engine and no GetGame. Each game has a connection of its own (a channel with a subchannel pool of its
    own), as players would: with ``serve --workers N`` the kernel spreads connections over the workers.
    A command the server refuses (FAILED_PRECONDITION: the script and the server disagree, which should
    not happen) ends that game's replay and is counted.

    CPU is counted for this process ("client", or "client+server" for a server in this process), the
    ``server`` processes (a parent and its workers: also each worker alone) and PostgreSQL.
    """
    window = Window(seconds, rate)
    processes: Pids = {"client": [os.getpid()]} if server else {"client+server": [os.getpid()]}
    if server:
        processes["server"] = list(server)
        for index, pid in enumerate(server[1:]):
            processes[f"server.w{index}"] = [pid]
    rejected = 0
    admin = _bearer(admin_token)
    channels = [
        grpc.aio.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])
        for _ in range(games)
    ]
    try:

        async def worker(index: int) -> None:
            nonlocal rejected
            channel = channels[index]
            create: grpc.aio.UnaryUnaryMultiCallable[bytes, pb.CreateGameReply] = channel.unary_unary(
                _SERVICE + "CreateGame", response_deserializer=pb.CreateGameReply.FromString
            )
            calls: dict[
                str, grpc.aio.UnaryUnaryMultiCallable[bytes, bytes]
            ] = {  # bytes both ways: nothing decoded
                method: channel.unary_unary(_SERVICE + method) for method in _METHODS
            }
            for turn in itertools.count():
                script = scripts[(index + turn * games) % len(scripts)]
                request = pb.CreateGameRequest(command_id=str(uuid.uuid4())).SerializeToString()
                created = await create(request + script.create, metadata=admin, timeout=30)
                window.record_other()
                game_id = created.game_id
                seats = {seat.seat: _bearer(seat.token) for seat in created.seats}
                seats[ADMIN] = admin
                for number, (method, seat, body) in enumerate(script.steps):
                    await window.pace()
                    started = time.perf_counter()
                    try:
                        call = calls[method](
                            _header(game_id, str(number)) + body, metadata=seats[seat], timeout=30
                        )
                        await call
                    except grpc.aio.AioRpcError as error:
                        if error.code() is not grpc.StatusCode.FAILED_PRECONDITION:
                            raise
                        rejected += 1
                        break
                    ended = time.perf_counter()
                    window.record(started, ended)
                    if breakdown is not None and window.start <= ended < window.end:
                        breakdown.append(_stages(started, ended, await call.trailing_metadata()))

        used = await run_for(window, [functools.partial(worker, i) for i in range(games)], processes)
    finally:
        await asyncio.gather(*(channel.close() for channel in channels))
    figure = window.figure(rejected=rejected, client="replay")
    figure.extra["other_calls_per_command"] = (
        round(window.other_calls / figure.operations, 3) if figure.operations else None
    )
    figure.extra.update(cpu_figures(used, seconds, figure.operations))
    return figure


# --- (c4) where a command's time goes ---------------------------------------------------------------------

#: The columns of a command's breakdown, in order: before the servicer ran (the client's send, the
#: transport, gRPC's queue and the event loop), the server's stages (service/ops/stages.py), then the reply
#: back to the client (serialization, transport, the client's loop).
BREAKDOWN = ("before servicer", "admit", "decide", "group wait", "database", "reply", "back to client")


def _stages(started: float, ended: float, trailing: grpc.aio.Metadata | None) -> tuple[float, ...]:
    """One command's breakdown in ms, from the client's clock and the server's ``uno-audit-timing``
    (``perf_counter`` is CLOCK_MONOTONIC on Linux: one clock for both processes)."""
    text = next(str(value) for key, value in trailing or () if key == "uno-audit-timing")
    fields = {name: int(number) for name, number in (part.split("=") for part in text.split(","))}
    received, replied = fields.pop("received") / 1e9, fields.pop("replied") / 1e9
    server = [fields[name] / 1000 for name in ("admit", "decide", "group_wait", "database", "reply")]
    return ((received - started) * 1000, *server, (ended - replied) * 1000)


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the server's Prometheus endpoint, by name and labels."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def histogram_delta(
    before: dict[tuple[str, tuple[tuple[str, str], ...]], float],
    after: dict[tuple[str, tuple[tuple[str, str], ...]], float],
    name: str,
    **labels: str,
) -> dict[str, Any]:
    """What a histogram gained between two scrapes: count, sum in ms, and the bucket bound (ms) under
    which 99 % and all of the new observations fell."""

    def value(suffix: str, extra: dict[str, str]) -> float:
        key = (name + suffix, tuple(sorted({**labels, **extra}.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    count = value("_count", {})
    bounds = sorted(
        float(dict(key[1])["le"])
        for key in after
        if key[0] == name + "_bucket" and {**dict(key[1]), "le": ""} == {**labels, "le": ""}
    )
    cumulative = [(bound, value("_bucket", {"le": _le(bound)})) for bound in bounds]

    def under(share: float) -> float | None:
        return next((b * 1000 for b, n in cumulative if count and n >= share * count), None)

    return {
        "count": int(count),
        "sum_ms": round(value("_sum", {}) * 1000, 2),
        "p99_ms": under(0.99),
        "max_ms": under(1.0),
    }


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


async def breakdown_run(
    url: str, workers: int, games: int, rate: float, plays: Sequence[Script], seconds: float
) -> dict[str, Any]:
    """(c4): the half-peak load again against ``serve --stage-timing --metrics-listen``: each command's
    breakdown, and the event loop's lag and the collector's pauses from the metrics, over the window."""
    metrics_port = free_port()
    rows: list[tuple[float, ...]] = []
    extra = ("--stage-timing", "--metrics-listen", f"127.0.0.1:{metrics_port}")
    async with served(url, workers, extra) as server:
        before = await asyncio.to_thread(scrape, metrics_port)
        figure = await replay(
            server.address,
            games,
            seconds,
            plays,
            server.admin_token,
            rate=rate,
            server=server.pids,
            breakdown=rows,
        )
        after = await asyncio.to_thread(scrape, metrics_port)
    columns: list[tuple[float, ...]] = list(zip(*rows, strict=True)) if rows else [() for _ in BREAKDOWN]
    return {
        **figure.to_json(),
        "stages_ms": {
            name: {
                "mean": round(sum(column) / len(column), 3) if column else 0.0,
                "p50": round(percentile(column, 50), 3),
                "p99": round(percentile(column, 99), 3),
            }
            for name, column in zip(BREAKDOWN, columns, strict=True)
        },
        "loop_lag": histogram_delta(before, after, "uno_audit_event_loop_lag_seconds"),
        "gc": {
            str(generation): histogram_delta(
                before, after, "uno_audit_gc_pause_seconds", generation=str(generation)
            )
            for generation in (0, 1, 2)
        },
    }


# --- (d) bots, as people's clients would be ----------------------------------------------------------------


class _TimedTable(BotTable):
    """A bots' table whose commands are paced and timed by a :class:`Window`."""

    def __init__(
        self, stub: pb_grpc.GameServiceStub, rng: random.Random, summary: LoadSummary, window: Window
    ) -> None:
        super().__init__(stub, rng, summary, RetryPolicy())
        self.window = window

    async def send(self, method: str, seat: int, request: object) -> pb.CommandReply | None:
        await self.window.pace()
        started = time.perf_counter()
        reply = await super().send(method, seat, request)
        if reply is not None:
            self.window.record(started, time.perf_counter())
        return reply

    async def create(
        self, variant: Variant, players: int, target_score: int | None, tournament_id: str = ""
    ) -> pb.GameView:
        view = await super().create(variant, players, target_score, tournament_id)
        self.window.record_other()
        return view

    async def view_of(self, seat: int) -> pb.GameView:
        view = await super().view_of(seat)
        self.window.record_other()
        return view


async def bots(
    address: str, games: int, seconds: float, *, rate: float | None = None, server: Sequence[int] = ()
) -> Figure:
    """Bots keep ``games`` games in flight for the window (each game followed by a new one), over one
    channel, deciding every move from the seat's view (kept from the replies, a GetGame when a hand is not
    known) and the rules: a client as heavy as a person's.

    CPU is counted for this process ("client", or "client+server" for a server in this process), the
    ``server`` processes and PostgreSQL.
    """
    window = Window(seconds, rate)
    processes: Pids = {"client": [os.getpid()]} if server else {"client+server": [os.getpid()]}
    if server:
        processes["server"] = list(server)
    summary = LoadSummary()
    seeds = random.Random(SEED)
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]

        async def worker(rng: random.Random) -> None:
            while True:
                table = _TimedTable(stub, random.Random(rng.getrandbits(64)), summary, window)
                await table.play(Variant.CLASSIC, PLAYERS, TARGET_SCORE)

        rngs = [random.Random(seeds.getrandbits(64)) for _ in range(games)]
        used = await run_for(window, [functools.partial(worker, r) for r in rngs], processes)
    figure = window.figure(rejected=summary.rejected, client="bots")
    figure.extra["other_calls_per_command"] = (
        round(window.other_calls / figure.operations, 2) if figure.operations else None
    )
    figure.extra.update(cpu_figures(used, seconds, figure.operations))
    return figure


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass(frozen=True, slots=True)
class Served:
    """A running ``uno-audit serve``: where, its processes (the parent first, then its workers), and the
    admin token it was given."""

    address: str
    pids: list[int]
    admin_token: str


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
    return sorted(found)


@contextlib.asynccontextmanager
async def served(url: str, workers: int = 1, extra: Sequence[str] = ()) -> AsyncIterator[Served]:
    """``uno-audit serve --workers N [extra]`` in a subprocess on a free port, with an admin token (the
    replayed games are dealt from fixed decks); SIGTERM at the end."""
    token = secrets.token_hex(24)
    service_url = make_conninfo(url, user=SERVICE_LOGIN)  # serve refuses the owner's login
    command = [sys.executable, "-m", "service.cli", "serve", "--database-url", service_url, *extra]
    # A server database needs the receipts' signing key: a new one per run, given as serve's variable.
    key = Signer.generate("uno-audit").encode()
    variables = {"UNO_AUDIT_ADMIN_TOKEN": token, "UNO_AUDIT_CHECKPOINT_KEY": key}
    async with _subprocess_server(command, workers, variables) as (address, pids):
        yield Served(address, pids, token)


@contextlib.asynccontextmanager
async def floor_served(workers: int) -> AsyncIterator[Served]:
    """``bench/grpc_floor.py``: a GameService that does nothing, with N processes on one port."""
    command = [sys.executable, "-m", "bench.grpc_floor"]
    async with _subprocess_server(command, workers, {}) as (address, pids):
        yield Served(address, pids, "")


@contextlib.asynccontextmanager
async def _subprocess_server(
    command: list[str], workers: int, env: dict[str, str]
) -> AsyncIterator[tuple[str, list[int]]]:
    """``command --listen ADDRESS --workers N`` on a free port until it serves: its address and its
    processes (the parent first); SIGTERM at the end."""
    port = free_port()
    address = f"127.0.0.1:{port}"
    errors = tempfile.TemporaryFile()  # noqa: SIM115 - closed when the server has stopped
    process = subprocess.Popen(
        [*command, "--listen", address, "--workers", str(workers)],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,  # one JSON log line per command, as in production, to nowhere
        stderr=errors,
        start_new_session=True,
    )
    _children.append(process)
    try:
        await _wait_serving(address, process, errors, workers)
        yield address, [process.pid, *_children_of(process.pid)]
    finally:
        await asyncio.to_thread(_end, process)
        errors.close()


async def _wait_serving(
    address: str, process: subprocess.Popen[bytes], errors: IO[bytes], workers: int
) -> None:
    """Until every worker listens and a health check on each of a few fresh connections says SERVING.

    No connection is made before every worker listens: on this machine's kernel, connections made while
    the workers of ``serve --workers 2`` started left one worker with every later connection in 3 of 6
    starts (seen with ``ss``; the cause is not known), and the loads would have measured one worker."""
    deadline = time.monotonic() + 60
    port = int(address.rsplit(":", 1)[1])
    while time.monotonic() < deadline:
        if process.poll() is not None:
            errors.seek(0)
            raise RuntimeError(f"the server exited:\n{errors.read().decode(errors='replace')}")
        if _listeners(port) >= workers:
            statuses = []
            for _ in range(4 * workers):
                async with grpc.aio.insecure_channel(
                    address, options=[("grpc.use_local_subchannel_pool", 1)]
                ) as channel:
                    with contextlib.suppress(grpc.aio.AioRpcError):
                        reply = await health_pb2_grpc.HealthStub(channel).Check(
                            health_pb2.HealthCheckRequest(service=""), timeout=1
                        )
                        statuses.append(reply.status)
            serving = [s for s in statuses if s == health_pb2.HealthCheckResponse.SERVING]
            if len(serving) == 4 * workers:
                return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"the server did not serve on {address} within 60 s")


def _listeners(port: int) -> int:
    """How many sockets listen on ``port``, as the kernel lists them (``/proc/net/tcp``, ``tcp6``)."""
    found = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table, encoding="ascii") as rows:
            next(rows)
            for row in rows:
                local, state = row.split()[1], row.split()[3]
                found += state == "0A" and int(local.rsplit(":", 1)[1], 16) == port
    return found


@contextlib.asynccontextmanager
async def in_process(url: str) -> AsyncIterator[Served]:
    """A server in this process (``start_server``), logging like ``serve`` but to nowhere."""
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.ReturnLoggerFactory(),  # rendered, then dropped
        cache_logger_on_first_use=True,
    )
    token = secrets.token_hex(24)
    running = await start_server(ServeConfig(listen="127.0.0.1:0", database_url=url, admin_token=token))
    try:
        yield Served(f"127.0.0.1:{running.port}", [], token)
    finally:
        await running.stop(grace=1.0)


# --- (d) filling the store --------------------------------------------------------------------------------


def _copy_text(value: str) -> str:
    """A text value in COPY's text format."""
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _hex(digest: bytes) -> str:
    return "\\\\x" + digest.hex()


def _fill_rows(games: Sequence[Template], events: int) -> Iterator[tuple[str, str, str, str, str]]:
    """Rows of whole games (games, seats, commands, events) in COPY text format, ≥ ``events`` events.

    The hashes are :func:`chain_hash` of each event in its new game (the canonical form of each template
    event is computed once; the first event of every template is checked against ``chain_hash``).
    """
    prepared = []
    for game in games:
        rows = []
        for name, new in [("CreateGame", [game.created]), *game.commands]:
            rows.append(
                (
                    name,
                    [
                        (
                            e.type,
                            _copy_text(json.dumps(e.payload, ensure_ascii=False)),
                            canonical(e.type, e.payload),
                        )
                        for e in new
                    ],
                )
            )
        prepared.append(rows)
    players = _copy_text(json.dumps([f"p{i + 1}" for i in range(PLAYERS)]))
    written = 0
    index = 0
    while written < events:
        template = prepared[index % len(prepared)]
        game_id = str(uuid.uuid4())
        prefix = game_id.encode() + b"\n"
        games_row = f"{game_id}\tclassic\t{players}\t\n"
        seats_rows = "".join(f"{game_id}\t{s}\t{_hex(secrets.token_bytes(32))}\n" for s in range(PLAYERS))
        commands_rows: list[str] = []
        events_rows: list[str] = []
        prev = GENESIS_HASH
        version = 0
        for name, batch in template:
            command_id = str(uuid.uuid4())
            first = version + 1
            actor = '"anyone"' if name == "CreateGame" else "0"
            metadata = _copy_text(f'{{"actor": {actor}, "command": "{name}", "command_id": "{command_id}"}}')
            for kind, payload, canon in batch:
                version += 1
                digest = hashlib.sha256(prev + prefix + str(version).encode() + b"\n" + canon).digest()
                events_rows.append(
                    f"{game_id}\t{version}\t{kind}\t{payload}\t{metadata}\t{_hex(prev)}\t{_hex(digest)}\n"
                )
                prev = digest
            commands_rows.append(
                f"{command_id}\t{game_id}\t{_hex(secrets.token_bytes(32))}\t{first}\t{version}\n"
            )
        if index < len(prepared):  # the shortcut above must be chain_hash itself
            first_event = games[index].created
            expected = chain_hash(GENESIS_HASH, game_id, 1, first_event.type, first_event.payload)
            assert events_rows[0].endswith(_hex(expected) + "\n"), "fill hashes differ from chain_hash"
        yield games_row, seats_rows, "".join(commands_rows), "".join(events_rows), str(version)
        written += version
        index += 1


async def fill(url: str, events: int, games: Sequence[Template]) -> dict[str, Any]:
    """Add whole games with at least ``events`` events by COPY, in one transaction, all triggers on.

    The rows go in chunks of games, each chunk as four COPYs (games, seats, commands, events: the
    foreign keys are checked at the end of each statement).
    """
    started = time.perf_counter()
    tables = (
        "games (game_id, variant, players, tournament_id)",
        "seats (game_id, seat, token_sha256)",
        "commands (command_id, game_id, request_sha256, first_version, last_version)",
        "events (game_id, version, type, payload, metadata, prev_hash, hash)",
    )
    added = count = 0
    async with await psycopg.AsyncConnection.connect(url) as conn, conn.transaction():
        cursor = conn.cursor()
        chunks: list[list[str]] = [[] for _ in tables]
        pending = 0

        async def flush() -> None:
            for target, rows in zip(tables, chunks, strict=True):
                async with cursor.copy(sql.SQL("COPY {} FROM STDIN").format(sql.SQL(target))) as copy:
                    await copy.write("".join(rows))
                rows.clear()

        for *rows, version in _fill_rows(games, events):
            for chunk, text in zip(chunks, rows, strict=True):
                chunk.append(text)
            added += int(version)
            pending += int(version)
            count += 1
            if pending >= 50_000:
                await flush()
                pending = 0
        if pending:
            await flush()
    return {
        "games": count,
        "events": added,
        "seconds": round(time.perf_counter() - started, 1),
        "method": "COPY of whole games (valid chains) in one transaction, all triggers on",
    }


# --- the whole run ----------------------------------------------------------------------------------------


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def pooled(figures: Sequence[Figure]) -> Figure:
    """Several runs of one load as one figure (their latencies together), with each run's own figures."""
    return Figure(
        sum(f.operations for f in figures),
        sum(f.seconds for f in figures),
        [latency for f in figures for latency in f.latencies_ms],
        {"runs": [{k: f.to_json()[k] for k in ("per_second", "p50_ms", "p99_ms")} for f in figures]},
    )


async def latency_run(url: str, seconds: float) -> Figure:
    """Bots play 1 game at a time against a fresh ``uno-audit serve --workers 1`` on the store at ``url``."""
    async with served(url) as server:
        return await bots(server.address, 1, seconds, server=server.pids)


async def run_all(
    url: str, empty_url: str, seconds: float, fill_events: int, runs: int, workdir: Path, e2e_only: bool
) -> dict[str, Any]:
    results: dict[str, Any] = {
        "seconds_per_measurement": seconds,
        "warmup_seconds": WARMUP_SECONDS,
        "load_average_before": os.getloadavg()[0],
    }
    for each in (url,) if e2e_only else (url, empty_url):
        store = await EventStore.open(each)
        try:
            await store.migrate()
        finally:
            await store.close()
        await migrate_projections(each)  # serve refuses a schema that is not current
        await ensure_service_login(each)  # and any login but the service's (its password left as is)
        await settle(each)
    games = [] if e2e_only else templates(TEMPLATE_GAMES, SEED)
    plays = scripts(SCRIPT_GAMES, SEED)
    steps = sum(len(script.steps) for script in plays)
    results["scripts"] = {"games": len(plays), "commands": steps, "per_game": round(steps / len(plays), 1)}

    empty: list[Figure] = []
    if not e2e_only:
        # (d) starts on the empty store; its later runs alternate with those on the full store (below).
        _say("(d) command latency, 1 game, empty store ...")
        empty.append(await latency_run(empty_url, seconds))

    results["pgbench"] = {}
    for clients in PGBENCH_CLIENTS:
        _say(f"(a) pgbench, {clients} client(s) ...")
        results["pgbench"][str(clients)] = (await pgbench(url, clients, seconds, workdir)).to_json()

    if not e2e_only:
        results["store_append"] = {}
        for tasks in STORE_TASKS:
            _say(f"(b) EventStore.append, {tasks} task(s) ...")
            figure = await store_appends(url, tasks, seconds, games)
            results["store_append"][str(tasks)] = figure.to_json()

    results["e2e"] = {}
    for workers in WORKERS:
        results["e2e"][str(workers)] = {}
        async with served(url, workers) as server:
            for count in CONCURRENCIES:
                _say(f"(c) end to end, serve --workers {workers}, {count} game(s), replayed ...")
                figure = await replay(
                    server.address, count, seconds, plays, server.admin_token, server=server.pids
                )
                results["e2e"][str(workers)][str(count)] = figure.to_json()
    results["floor"] = {}
    for workers in WORKERS:
        results["floor"][str(workers)] = {}
        async with floor_served(workers) as server:
            for count in CONCURRENCIES:
                _say(f"(e) the gRPC floor (bench/grpc_floor.py), {workers} process(es), {count} game(s) ...")
                figure = await replay(server.address, count, seconds, plays, "", server=server.pids)
                results["floor"][str(workers)][str(count)] = figure.to_json()
    if peer_commands_per_second is not None:
        results["peer"] = {}
        for processes in PEER_PROCESSES:
            results["peer"][str(processes)] = {}
            for count in PEER_GAMES:
                _say(f"(f) the peer (bench/peer.py), {processes} process(es), {count} games ...")
                found = await peer_commands_per_second(url, count, seconds, processes, WARMUP_SECONDS)
                results["peer"][str(processes)][str(count)] = dict(found)
        peak_workers, peak_games = max(
            ((w, c) for w in WORKERS for c in CONCURRENCIES),
            key=lambda wc: results["e2e"][str(wc[0])][str(wc[1])]["per_second"],
        )
    rate = results["e2e"][str(peak_workers)][str(peak_games)]["per_second"] / 2
    async with served(url, peak_workers) as server:
        _say(
            f"(c2) at half the peak rate ({rate:.0f} commands/s, {peak_games} games, {peak_workers} workers)"
        )
        half = await replay(
            server.address, peak_games, seconds, plays, server.admin_token, rate=rate, server=server.pids
        )
        _say("(c3) the bots as the client (the rules engine per move), 8 games, for comparison ...")
        heavy = await bots(server.address, 8, seconds, server=server.pids)
    results["half_peak"] = {
        **half.to_json(),
        "target_rate": round(rate, 1),
        "games": peak_games,
        "workers": peak_workers,
    }
    results["bots_8"] = {**heavy.to_json(), "workers": peak_workers}
    _say("(c4) where the time goes: the half-peak load, serve --stage-timing --metrics-listen ...")
    results["breakdown"] = await breakdown_run(url, peak_workers, peak_games, rate, plays, seconds)

    if e2e_only:
        results["load_average_after"] = os.getloadavg()[0]
        return results

    results["e2e_in_process"] = {}
    async with in_process(url) as server:
        for count in CONCURRENCIES:
            _say(f"(c) end to end, server in this process, {count} game(s) ...")
            figure = await replay(server.address, count, seconds, plays, server.admin_token)
            results["e2e_in_process"][str(count)] = figure.to_json()

    before = await count_events(url)
    _say(f"(d) filling the store with {fill_events:,} events (it holds {before:,}) ...")
    results["fill"] = await fill(url, fill_events, games)
    started = time.perf_counter()
    await settle(url)
    results["fill"]["settle_seconds"] = round(time.perf_counter() - started, 1)
    results["fill"]["events_stored"] = await count_events(url)
    # The rest of (d) alternates full and empty store (F E F E ...), so a change in the machine's load
    # meets both alike; each side's latencies are pooled over its runs.
    full: list[Figure] = []
    for turn in range(runs):
        _say(f"(d) command latency, 1 game, {results['fill']['events_stored']:,} events stored ...")
        full.append(await latency_run(url, seconds))
        if turn < runs - 1:
            _say("(d) command latency, 1 game, empty store ...")
            empty.append(await latency_run(empty_url, seconds))
    results["latency_empty"] = pooled(empty).to_json()
    results["latency_full"] = pooled(full).to_json()
    results["load_average_after"] = os.getloadavg()[0]
    return results


# --- the report -------------------------------------------------------------------------------------------


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def breakdown_lines(found: dict[str, Any]) -> list[str]:
    """(c4)'s table: each stage's mean, p50 and p99, then the loop's lag and the collector's pauses."""
    lines = [
        "-" * 130,
        f"(c4) where a command's time goes at half the peak ({found['per_second']:,.0f}/s, p50 "
        f"{found['p50_ms']:.2f}, p99 {found['p99_ms']:.2f} ms; serve --stage-timing): ms per command",
        f"    {'stage':<20}{'mean':>9}{'p50':>9}{'p99':>9}",
    ]
    for name, figure in found["stages_ms"].items():
        lines.append(f"    {name:<20}{figure['mean']:>9.3f}{figure['p50']:>9.3f}{figure['p99']:>9.3f}")
    lag = found["loop_lag"]
    lines.append(
        f"    event-loop lag (5 ms ticker, all workers): {lag['count']:,} ticks, {lag['sum_ms']:.1f} ms late "
        f"in all; 99 % under {lag['p99_ms']} ms, all under {lag['max_ms']} ms"
    )
    passes = ", ".join(
        f"gen {generation}: {gc['count']:,} passes, {gc['sum_ms']:.1f} ms, all under {gc['max_ms']} ms"
        for generation, gc in found["gc"].items()
    )
    lines.append(f"    garbage collector (all workers): {passes}")
    return lines


def report(results: dict[str, Any]) -> str:
    pg = results["pgbench"]
    best_pg = max(figure["tps"] for figure in pg.values())
    lines = [
        f"uno-audit service benchmark — {results['seconds_per_measurement']:g} s per measurement "
        f"after {results['warmup_seconds']:g} s warm-up; latencies in ms; load average (1 min) "
        f"{results['load_average_before']:.2f} before, {results['load_average_after']:.2f} after",
        f"replayed: {results['scripts']['games']} simulated games, "
        f"{results['scripts']['commands']:,} commands ({results['scripts']['per_game']} per game)",
        "",
        f"{'measurement':<48}{'per s':>9}{'p50':>8}{'p99':>8}   against / target; the issue's baseline",
        "-" * 130,
    ]

    def row(name: str, figure: dict[str, Any], note: str) -> None:
        lines.append(
            f"{name:<48}{figure['per_second']:>9,.0f}{figure['p50_ms']:>8.2f}{figure['p99_ms']:>8.2f}"
            f"   {note}"
        )

    for clients, figure in pg.items():
        failed = f", {figure['failed']} failed" if figure.get("failed") else ""
        base = f"; baseline {BASELINE_PGBENCH[clients]:,}" if clients in BASELINE_PGBENCH else ""
        row(f"(a) pgbench append txn, {clients} client(s)", figure, f"the ceiling (TPS){failed}{base}")
    for tasks, figure in results.get("store_append", {}).items():
        base = pg.get(tasks, {}).get("tps", best_pg)
        row(
            f"(b) EventStore.append, {tasks} task(s)",
            figure,
            f"{figure['per_second'] / base:.2f} × pgbench {tasks} "
            f"({figure['events_per_append']} events/append)",
        )
    for workers, loads in results["e2e"].items():
        for count, figure in loads.items():
            ratio = figure["per_second"] / best_pg
            target = E2E_VS_PGBENCH.get(count)
            verdict = f"; target ≥ {target} × → {_verdict(ratio >= target)}" if target is not None else ""
            rejected = f", {figure['rejected']} REJECTED" if figure.get("rejected") else ""
            row(
                f"(c) serve --workers {workers}, {count} game(s), replayed",
                figure,
                f"{ratio:.2f} × best pgbench {best_pg:,.0f}{verdict}; baseline {BASELINE_E2E[count]:,} "
                f"(bots){rejected}",
            )
    half = results["half_peak"]
    row(
        f"(c2) half peak ({half['target_rate']:,.0f}/s, {half['games']} games, {half['workers']} w)",
        half,
        f"p99 target ≤ {P99_AT_HALF_PEAK_MS:g} ms → {_verdict(half['p99_ms'] <= P99_AT_HALF_PEAK_MS)}; "
        f"baseline p99 {BASELINE_P99_MS} ms",
    )
    heavy = results["bots_8"]
    row(f"(c3) bots as the client, 8 games, {heavy['workers']} w", heavy, "for comparison: a heavy client")
    single = results["e2e"][str(half["workers"])]["1"]
    bound = min(P99_AT_HALF_PEAK_MS_NOW, P99_VS_SINGLE_P50 * single["p50_ms"])
    lines.append(
        f"{'':<48}{'':>9}{'':>8}{'':>8}   p99 target ≤ {P99_AT_HALF_PEAK_MS_NOW:g} ms and ≤ "
        f"{P99_VS_SINGLE_P50:g} × 1-game p50 ({single['p50_ms']:.2f}) = {bound:.2f} ms → "
        f"{_verdict(half['p99_ms'] <= bound)}"
    )
    for workers, loads in results.get("floor", {}).items():
        for count, figure in loads.items():
            row(
                f"(e) gRPC floor, {workers} process(es), {count} game(s)",
                figure,
                "a GameService doing nothing (bench/grpc_floor.py), the same client",
            )
    for processes, loads in results.get("peer", {}).items():
        for count, peer in loads.items():
            best = max(loads_[count]["per_second"] for loads_ in results["e2e"].values())
            ratio = best / peer["commands_per_second"] if peer["commands_per_second"] else float("inf")
            lines.append(
                f"{f'(f) the peer, {processes} process(es), {count} games':<48}"
                f"{peer['commands_per_second']:>9,.0f}{peer['p50_ms']:>8.2f}{peer['p99_ms']:>8.2f}"
                f"   eventsourcing {EVENTSOURCING}: service (c) {best:,.0f} = {ratio:.2f} × it; target ≥ "
                f"{SERVICE_VS_PEER:g} × → {_verdict(ratio >= SERVICE_VS_PEER)}; baseline 192–214 (in process)"
            )
    for count, figure in results.get("e2e_in_process", {}).items():
        row(f"    replayed, server in the bench process, {count}", figure, "for comparison (shares the loop)")
    if "breakdown" in results:
        lines += breakdown_lines(results["breakdown"])
    measured = [
        *((f"(a) pgbench, {n} client(s)", f) for n, f in pg.items()),
        *((f"(b) EventStore.append, {n} task(s)", f) for n, f in results.get("store_append", {}).items()),
        *(
            (f"(c) --workers {w}, {n} game(s)", f)
            for w, loads in results["e2e"].items()
            for n, f in loads.items()
        ),
        ("(c2) at half peak", half),
        ("(c3) bots, 8 games", heavy),
        *(
            (f"(e) floor, {w} process(es), {n} game(s)", f)
            for w, loads in results.get("floor", {}).items()
            for n, f in loads.items()
        ),
        *((f"(c) in the bench process, {n}", f) for n, f in results.get("e2e_in_process", {}).items()),
    ]
    if "latency_full" in results:
        empty, full = results["latency_empty"], results["latency_full"]
        stored = results["fill"]["events_stored"]
        row("(d) 1 game (bots), empty store", empty, "the baseline")
        p50_ratio = full["p50_ms"] / empty["p50_ms"] if empty["p50_ms"] else float("inf")
        p99_ratio = full["p99_ms"] / empty["p99_ms"] if empty["p99_ms"] else float("inf")
        row(
            f"(d) 1 game (bots), {stored:,} events stored",
            full,
            f"p50 {p50_ratio:.2f} ×, p99 {p99_ratio:.2f} × empty; target ≤ {FULL_VS_EMPTY} × → "
            f"{_verdict(max(p50_ratio, p99_ratio) <= FULL_VS_EMPTY)}",
        )
        filled = results["fill"]

        def runs(figure: dict[str, Any]) -> str:
            return ", ".join(f"{run['p50_ms']:.2f}/{run['p99_ms']:.2f}" for run in figure["runs"])

        lines += [
            "-" * 130,
            f"(d) p50/p99 of each run: empty {runs(empty)}; full {runs(full)} "
            "(runs alternate after the fill)",
            f"fill: {filled['events']:,} events in {filled['games']:,} games, {filled['seconds']} s "
            f"({filled['method']}); VACUUM ANALYZE + CHECKPOINT {filled['settle_seconds']} s",
        ]
    lines += [
        "",
        "CPU per operation in ms (cores kept busy); server = serve and its workers (server.wN: worker N "
        "alone); postgres = our backends + checkpointer, WAL writer…; "
        f"baseline server {BASELINE_SERVER_CPU_MS}",
    ]
    for name, figure in measured:
        if "cpu_ms_per_op" in figure:
            used = "  ".join(
                f"{process} {ms:.3f} ({figure['cores_busy'][process]:.2f})"
                for process, ms in figure["cpu_ms_per_op"].items()
                if ms is not None
            )
            other = figure.get("other_calls_per_command")
            calls = f"  [+{other:.2f} CreateGame/GetGame per command]" if other is not None else ""
            lines.append(f"  {name:<40}{used}{calls}")
    peak = results["e2e"][str(half["workers"])][str(half["games"])]
    server_ms = peak["cpu_ms_per_op"].get("server")
    if server_ms is not None:
        floor_ms = results.get("floor", {}).get(str(half["workers"]), {}).get(str(half["games"]), {})
        floor = floor_ms.get("cpu_ms_per_op", {}).get("server")
        beside = f"; the gRPC floor at the same load {floor:.3f} ms" if floor is not None else ""
        lines.append(
            f"server CPU per command at the peak ({half['workers']} w, {half['games']} games): "
            f"{server_ms:.3f} ms; target ≤ {SERVER_CPU_MS} ms → {_verdict(server_ms <= SERVER_CPU_MS)}; "
            f"baseline {BASELINE_SERVER_CPU_MS}{beside}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="service throughput and latency vs pgbench, one run")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each measurement (default 8)")
    parser.add_argument(
        "--fill", type=int, default=1_000_000, help="events to add before the last latency run (default 1M)"
    )
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL),
        help=f"a PostgreSQL server as a superuser's URL (default {DEFAULT_URL}); the script creates and "
        "drops a database uno_bench_<random> there",
    )
    parser.add_argument(
        "--latency-runs",
        type=int,
        default=2,
        help="runs of (d) on each store, alternating after the fill (default 2)",
    )
    parser.add_argument(
        "--e2e-only",
        action="store_true",
        help="only (a) pgbench, (c) end to end (with (c2), (c3)) and (e) the gRPC floor: no (b), no "
        "in-process server, no (d)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    if shutil.which(PGBENCH) is None:
        parser.error("pgbench is not on PATH (Debian: apt-get install postgresql-client)")

    if args.latency_runs < 1:
        parser.error("--latency-runs must be at least 1")
    name = f"uno_bench_{secrets.token_hex(4)}"
    names = (name, f"{name}_empty")  # the store under test, and the empty store of (d)
    _databases.update(names)
    created = []
    try:
        for each in names:
            create_database(args.database_url, each)
            created.append(each)
        _say(f"databases {', '.join(names)} created")
        with tempfile.TemporaryDirectory(prefix="uno-bench-") as workdir:
            results = asyncio.run(
                run_all(
                    database_url(args.database_url, names[0]),
                    database_url(args.database_url, names[1]),
                    args.seconds,
                    args.fill,
                    args.latency_runs,
                    Path(workdir),
                    args.e2e_only,
                )
            )
    except KeyboardInterrupt:
        _say("interrupted")
        return 130
    finally:
        for process in list(_children):
            _end(process, grace=5.0)
        for each in created:
            drop_database(args.database_url, each)
        if created:
            _say(f"databases {', '.join(created)} dropped")
    results["database"] = "PostgreSQL " + _server_version(args.database_url)
    print(json.dumps(results) if args.json else report(results))
    return 0


def _server_version(server_url: str) -> str:
    with psycopg.connect(server_url) as conn:
        return str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]


if __name__ == "__main__":
    sys.exit(main())
