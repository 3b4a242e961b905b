"""``serve --workers N`` supervises its processes (:mod:`service.api.workers`), tested on real processes.

``kill -9`` of the projector's process: it is started again and catches up, and commands never wait for
it. ``kill -9`` of a worker: the other keeps answering, a replacement binds the port beside it, bots that
retry UNAVAILABLE with the same command id lose no command and store none twice (the ledger check of
``bench/chaos.py``), and the metrics' counters keep the dead worker's counts. Restarts again and again
are a crash loop, in health and metrics. SIGHUP replaces every process, signing with the key file's new
key, and the bots lose nothing either. Every wait is polled, bounded by a generous timeout.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import grpc
import psycopg
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from projections.migrate import apply_migrations
from projections.projector import read_lag
from service.api.server import SUPERVISION_SERVICE
from service.api.workers import BACKOFF_FIRST_SECONDS, BACKOFF_MAX_SECONDS, CRASH_LOOP_RESTARTS, backoff
from service.checkpoints.keys import Signer, write_signer
from service.client.bots import LoadSummary, run_bots
from service.rules.options import Variant
from tests import tiers
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .test_serve_workers import (
    START_SECONDS,
    Serve,
    _alive,
    _connections_by_process,
    _free_port,
    needs_script,
)

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is not an installed package
    sys.path.insert(0, str(ROOT))

from bench.chaos import CHANNEL_OPTIONS, Journal, RecordingTable, Stopped, check_ledger  # noqa: E402

if TYPE_CHECKING:
    from tests.conftest import ServiceLogin

pytestmark = pytest.mark.timeout(300)

T = TypeVar("T")
TABLES = 6  # bot tables, each on a connection of its own


async def _until(found: Callable[[], T | None], what: str, seconds: float = START_SECONDS) -> T:
    """Poll ``found`` until it gives something; fail after ``seconds`` (a bound, not a measure)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"not within {seconds} s: {what}")


def _restarted(serve: Serve, kind: str) -> list[dict[str, Any]]:
    return [
        line for line in serve.lines() if line.get("event") == "process restarted" and line["kind"] == kind
    ]


def _scrape(port: int) -> dict[tuple[str, str], float]:
    """The parent's metrics by name and ``kind`` label ("" for none)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return {
        (sample.name, sample.labels.get("kind", "")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _total(port: int, name: str) -> float:
    """A metric's samples summed over their labels, as the parent serves them."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    families = text_string_to_metric_families(text)
    return sum(sample.value for family in families for sample in family.samples if sample.name == name)


async def _health(address: str, service: str = "") -> int:
    async with grpc.aio.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
        return int(reply.status)


async def _answered(address: str, count: int) -> list[int]:
    """The health statuses of ``count`` fresh connections in a row, each retried after UNAVAILABLE (a
    reset while a worker dies) as a client would; the resets are bounded like every wait."""
    statuses: list[int] = []
    deadline = time.monotonic() + START_SECONDS
    while len(statuses) < count:
        try:
            statuses.append(await _health(address))
        except grpc.aio.AioRpcError as error:
            assert error.code() is grpc.StatusCode.UNAVAILABLE and time.monotonic() < deadline, error
    return statuses


@pytest.fixture
def started() -> Iterator[list[Serve]]:
    """The servers a test started, ended (SIGKILL to their sessions) whatever the test did."""
    servers: list[Serve] = []
    yield servers
    for serve in servers:
        serve.end()


async def _start(
    started: list[Serve],
    tmp_path: Path,
    name: str,
    database_url: str,
    service_login: ServiceLogin,
    *more: str,
) -> tuple[Serve, str, int]:
    """``serve --workers 2`` with its projector and metrics: the process, its address, its metrics port."""
    await apply_migrations(database_url)
    service_url = await service_login.url(database_url)
    address, metrics_port = f"127.0.0.1:{_free_port()}", _free_port()
    serve = Serve(
        tmp_path, name, "--listen", address, "--database-url", service_url, "--workers", "2",
        "--metrics-listen", f"127.0.0.1:{metrics_port}", *more,
    )  # fmt: skip
    started.append(serve)
    return serve, address, metrics_port


def test_the_backoff_starts_at_once_then_doubles_up_to_its_cap() -> None:
    waits = [backoff(recent) for recent in range(12)]
    assert waits[:4] == [0.0, BACKOFF_FIRST_SECONDS, 2 * BACKOFF_FIRST_SECONDS, 4 * BACKOFF_FIRST_SECONDS]
    assert waits == sorted(waits) and waits[-1] == BACKOFF_MAX_SECONDS


@needs_script
async def test_a_killed_projector_is_restarted_and_catches_up_while_commands_succeed(
    tmp_path: Path, database_url: str, service_login: ServiceLogin, started: list[Serve]
) -> None:
    serve, address, metrics_port = await _start(started, tmp_path, "projector", database_url, service_login)
    try:
        projector: int = (await asyncio.to_thread(serve.serving))["projector"]
        os.kill(projector, signal.SIGKILL)
        # At once: the command path does not go through the projector, so nothing is even retried.
        summary = await run_bots(
            address, games=2, variant=Variant.CLASSIC, players=2, concurrency=2, seed=5, target_score=1
        )
        assert (summary.games, summary.retries) == (2, 0)

        (restarted,) = await _until(lambda: _restarted(serve, "projector"), "the projector restarted")
        assert restarted["pid"] != projector and _alive(restarted["pid"])
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:

            async def behind() -> int:
                return (await read_lag(conn)).events_behind

            deadline = time.monotonic() + START_SECONDS
            while await behind() > 0 and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            assert await behind() == 0, "the restarted projector did not catch up"
        figures = await asyncio.to_thread(_scrape, metrics_port)
        assert figures["uno_audit_process_restarts_total", "projector"] == 1
        assert figures["uno_audit_process_restarts_total", "worker"] == 0
        assert figures["uno_audit_crash_loop", "projector"] == 0
        assert await _health(address, SUPERVISION_SERVICE) == health_pb2.HealthCheckResponse.SERVING

        serve.process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(serve.process.wait, 60) == 0, serve.err.read_text()
    finally:
        serve.end()


async def _play(stub: pb_grpc.GameServiceStub, seed: int, journal: Journal, stop: asyncio.Event) -> None:
    """Bot games one after another until ``stop``, every call recorded in ``journal``."""
    rng = random.Random(seed)
    while not stop.is_set():
        table = RecordingTable(stub, random.Random(rng.getrandbits(64)), LoadSummary(), journal, stop)
        try:
            await table.play(Variant.CLASSIC, 2, 50)
        except Stopped:
            return
        journal.games += 1


@needs_script
async def test_a_killed_worker_is_replaced_while_the_other_serves_and_no_command_is_lost_or_doubled(
    tmp_path: Path, database_url: str, service_login: ServiceLogin, started: list[Serve]
) -> None:
    serve, address, metrics_port = await _start(started, tmp_path, "worker", database_url, service_login)
    journal, stop = Journal(), asyncio.Event()
    options = (*CHANNEL_OPTIONS, ("grpc.use_local_subchannel_pool", 1))
    channels = [grpc.aio.insecure_channel(address, options=options) for _ in range(TABLES)]
    tables: list[asyncio.Task[None]] = []
    try:
        serving = await asyncio.to_thread(serve.serving)
        workers: list[int] = serving["pids"][:2]
        stubs = [pb_grpc.GameServiceStub(channel) for channel in channels]  # type: ignore[no-untyped-call]
        tables = [asyncio.create_task(_play(stub, seed, journal, stop)) for seed, stub in enumerate(stubs)]
        await _until(lambda: len(journal.acknowledged) >= 50, "the bots played")

        # The worker holding the most of the tables' connections: at least half of them break.
        port = int(address.rsplit(":", 1)[1])
        held = _connections_by_process(port, workers)
        index = held.index(max(held))
        commands = "uno_audit_commands_total"
        counted = await asyncio.to_thread(_total, metrics_port, commands)
        os.kill(workers[index], signal.SIGKILL)
        # Fresh connections are answered, by the other worker or already by the replacement: a connection
        # that reached the killed worker's socket as it died is reset (UNAVAILABLE, for a retry), no more.
        answered = await _answered(address, 8)
        assert answered == [health_pb2.HealthCheckResponse.SERVING] * 8
        (restarted,) = await _until(lambda: _restarted(serve, "worker"), "a replacement worker")
        assert restarted["worker"] == index and restarted["pid"] not in workers and _alive(restarted["pid"])
        assert _alive(workers[1 - index]), "the other worker stopped"
        moved_on = len(journal.acknowledged) + 50
        await _until(lambda: len(journal.acknowledged) >= moved_on, "the bots played on")
        # The killed worker's counts stay in the sums (its metric files are kept): counters never go back.
        assert await asyncio.to_thread(_total, metrics_port, commands) >= counted + 50
    finally:
        stop.set()
        done = await asyncio.wait_for(asyncio.gather(*tables, return_exceptions=True), 180)
        for channel in channels:
            await channel.close()
    try:
        assert [each for each in done if each is not None] == []
        figures = await asyncio.to_thread(_scrape, metrics_port)
        assert figures["uno_audit_process_restarts_total", "worker"] == 1
        serve.process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(serve.process.wait, 60) == 0, serve.err.read_text()
    finally:
        serve.end()
    ledger = await check_ledger(database_url, journal)
    assert ledger["problems"] == []
    assert (ledger["lost"], ledger["duplicated"], ledger["refused_stored"]) == (0, 0, 0)
    assert journal.undecided == {} and journal.undocumented == [] and journal.broken_off == []
    assert set(journal.statuses) <= {"OK", "UNAVAILABLE", "FAILED_PRECONDITION", "ALREADY_EXISTS"}
    # A creation whose reply the killed worker took with it is stored; its retry is answered ALREADY_EXISTS
    # (GAME_EXISTS: the seat tokens are shown once). No other call is.
    lost_creations = [a for a in journal.acknowledged.values() if (a.method, a.first) == ("CreateGame", None)]
    assert journal.statuses["ALREADY_EXISTS"] == len(lost_creations)


@needs_script
async def test_restarts_again_and_again_are_a_crash_loop_in_health_and_metrics(
    tmp_path: Path, database_url: str, service_login: ServiceLogin, started: list[Serve]
) -> None:
    tiers.full_only("five restarts of the projector, each after its back-off")
    serve, address, metrics_port = await _start(started, tmp_path, "loop", database_url, service_login)
    try:
        victim: int = (await asyncio.to_thread(serve.serving))["projector"]
        for kill in range(1, CRASH_LOOP_RESTARTS + 1):
            os.kill(victim, signal.SIGKILL)

            def seen(kill: int = kill) -> list[dict[str, Any]] | None:
                found = _restarted(serve, "projector")
                return found if len(found) == kill else None

            restarts = await _until(seen, f"restart {kill} of the projector")
            victim = restarts[-1]["pid"]

        async def looping() -> bool:  # on fresh connections, whichever worker each lands on
            statuses = [await _health(address, SUPERVISION_SERVICE) for _ in range(8)]
            return statuses == [health_pb2.HealthCheckResponse.NOT_SERVING] * 8

        deadline = time.monotonic() + START_SECONDS
        while not await looping() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert await looping()
        figures = await asyncio.to_thread(_scrape, metrics_port)
        assert figures["uno_audit_crash_loop", "projector"] == 1
        assert figures["uno_audit_crash_loop", "worker"] == 0
        assert figures["uno_audit_process_restarts_total", "projector"] == CRASH_LOOP_RESTARTS
        # The workers themselves still serve: the overall status, and a game.
        assert await _health(address) == health_pb2.HealthCheckResponse.SERVING
        summary = await run_bots(
            address, games=1, variant=Variant.CLASSIC, players=2, concurrency=1, seed=9, target_score=1
        )
        assert summary.games == 1
    finally:
        serve.end()


@needs_script
async def test_sighup_replaces_every_process_with_the_new_key_and_no_command_fails_or_is_lost(
    tmp_path: Path, database_url: str, service_login: ServiceLogin, started: list[Serve]
) -> None:
    key_file = tmp_path / "checkpoint.key"
    first, rotated = Signer.generate("uno-audit-test"), Signer.generate("uno-audit-test")
    write_signer(first, key_file)
    more = ("--checkpoint-key-file", str(key_file))
    serve, address, metrics_port = await _start(
        started, tmp_path, "reload", database_url, service_login, *more
    )
    # CANCELLED is documented for a graceful stop (README "Errors": resend with the same command id), and
    # the old processes stop gracefully: a call the stopping server had received, not yet started, gets it.
    journal, stop = Journal(graceful_stops=True), asyncio.Event()
    options = (*CHANNEL_OPTIONS, ("grpc.use_local_subchannel_pool", 1))
    channels = [grpc.aio.insecure_channel(address, options=options) for _ in range(TABLES)]
    tables: list[asyncio.Task[None]] = []
    try:
        old: list[int] = (await asyncio.to_thread(serve.serving))["pids"]
        stubs = [pb_grpc.GameServiceStub(channel) for channel in channels]  # type: ignore[no-untyped-call]
        tables = [asyncio.create_task(_play(stub, seed, journal, stop)) for seed, stub in enumerate(stubs)]
        await _until(lambda: len(journal.acknowledged) >= 50, "the bots played")

        write_signer(rotated, key_file, force=True)
        serve.process.send_signal(signal.SIGHUP)
        await _until(
            lambda: [line for line in serve.lines() if line.get("event") == "reloaded"], "the reload"
        )
        moved_on = len(journal.acknowledged) + 50
        await _until(lambda: len(journal.acknowledged) >= moved_on, "the bots played on")
    finally:
        stop.set()
        done = await asyncio.wait_for(asyncio.gather(*tables, return_exceptions=True), 180)
        for channel in channels:
            await channel.close()
    try:
        assert [each for each in done if each is not None] == []
        lines = serve.lines()
        fresh = {line["pid"]: line["old"] for line in lines if line.get("event") == "process reloaded"}
        assert sorted(fresh.values()) == sorted(old), "not every process was replaced"
        assert not any(_alive(pid) for pid in old)
        keys = {line["pid"]: line["key"] for line in lines if line.get("event") == "worker serving"}
        assert [keys[pid] for pid in fresh if pid in keys] == [f"{rotated.key_id:08x}"] * 2
        figures = await asyncio.to_thread(_scrape, metrics_port)
        assert figures["uno_audit_process_restarts_total", "worker"] == 0  # a reload is no crash
        serve.process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(serve.process.wait, 60) == 0, serve.err.read_text()
    finally:
        serve.end()
    ledger = await check_ledger(database_url, journal)
    assert ledger["problems"] == []
    assert (ledger["lost"], ledger["duplicated"], ledger["refused_stored"]) == (0, 0, 0)
    assert journal.undecided == {} and journal.undocumented == [] and journal.broken_off == []
    # Refused only: the bots' deliberate mistakes (a challenge the rules refuse), never the reload.
    assert set(journal.refused.values()) <= {"FAILED_PRECONDITION"}
