"""The Prometheus endpoint of a real server, scraped over HTTP while bots play, while a stream is open and
while a command races an audit entry: each figure moves by what the test did, counted independently (the
store's rows, the calls the test made, the error it got back).

The metrics are process-wide (:mod:`service.ops.metrics`), so every check compares two scrapes. The figures
tied to the store's rows are checked on one server process and on ``serve --workers 2`` too (each
worker's metrics through the parent's endpoint: prometheus_client's multiprocess mode).
"""

from __future__ import annotations

import asyncio
import signal
import socket
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from projections.migrate import apply_migrations
from service.api.config import ServeConfig
from service.api.server import ListenError, RunningServer, start_server
from service.client.bots import run_bots
from service.rules.options import Variant
from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as apb
from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from . import support
from .support import ADMIN, ADMIN_TOKEN, create_scripted, deal_from, error_info, fails, header, new_id

if TYPE_CHECKING:
    from tests.conftest import ServiceLogin

pytestmark = pytest.mark.timeout(180)

POOL_SIZE = 4
GAME_SERVICE = "uno.audit.v1.GameService"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@dataclass(frozen=True, slots=True)
class Endpoints:
    """Where a server serves gRPC and its metrics, and the most database connections it may open."""

    port: int
    metrics_port: int
    pool_max: int
    #: The admin's call metadata (serve refuses the tests' short admin token: it has a long one).
    admin: tuple[tuple[str, str], ...] = ADMIN


#: ``serve``'s pool per worker (start_server's default).
SERVE_POOL_SIZE = 10
SERVE_ADMIN_TOKEN = "metrics-test-admin-token"


@pytest.fixture(params=[1, 2], ids=["one-process", "two-workers"])
async def endpoints(
    request: pytest.FixtureRequest, database_url: str, service_login: ServiceLogin, tmp_path: Path
) -> AsyncIterator[Endpoints]:
    """A server without a projector and with its metrics: one process (as ``metered``), or ``uno-audit
    serve --workers 2``, whose parent serves every worker's metrics."""
    if request.param == 1:
        await apply_migrations(database_url)
        running = await start_server(
            ServeConfig(
                listen="127.0.0.1:0",
                database_url=await service_login.url(database_url),
                admin_token=ADMIN_TOKEN,
                pool_size=POOL_SIZE,
                projector=False,
                metrics_listen="127.0.0.1:0",
            )
        )
        try:
            assert running.exporter is not None
            yield Endpoints(running.port, running.exporter.port, POOL_SIZE)
        finally:
            await running.stop(grace=2.0)
        return
    from .test_serve_workers import UNO_AUDIT, Serve, _free_port

    if not UNO_AUDIT.exists():
        pytest.skip("the uno-audit script is not installed")
    await apply_migrations(database_url)
    token = tmp_path / "admin-token"
    token.write_text(SERVE_ADMIN_TOKEN)
    port, metrics_port = _free_port(), _free_port()
    serve = Serve(
        tmp_path, "metered", "--listen", f"127.0.0.1:{port}", "--workers", "2", "--no-projector",
        "--database-url", await service_login.url(database_url), "--admin-token-file", str(token),
        "--metrics-listen", f"127.0.0.1:{metrics_port}",
    )  # fmt: skip
    try:
        await asyncio.to_thread(serve.serving)
        yield Endpoints(
            port, metrics_port, 2 * SERVE_POOL_SIZE, (("authorization", f"Bearer {SERVE_ADMIN_TOKEN}"),)
        )
        serve.process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(serve.process.wait, 60) == 0, serve.err.read_text()
    finally:
        serve.end()


@pytest.fixture
async def metered(database_url: str, service_login: ServiceLogin) -> AsyncIterator[RunningServer]:
    """A server with its metrics on a free port, and no projector: the read models stay behind the log,
    so the lag gauges have something to show."""
    await apply_migrations(database_url)
    running = await start_server(
        ServeConfig(
            listen="127.0.0.1:0",
            database_url=await service_login.url(database_url),
            admin_token=ADMIN_TOKEN,
            pool_size=POOL_SIZE,
            projector=False,
            metrics_listen="127.0.0.1:0",
        )
    )
    try:
        yield running
    finally:
        await running.stop(grace=2.0)


def _get(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text: str = reply.read().decode()
        return text


async def scrape(server: RunningServer | Endpoints) -> Samples:
    """Every sample the endpoint serves, by name and labels."""
    if isinstance(server, Endpoints):
        port = server.metrics_port
    else:
        assert server.exporter is not None
        port = server.exporter.port
    text = await asyncio.to_thread(_get, port)
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """A sample's value; 0 when the endpoint has none with these labels (a counter never incremented)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def call(method: str, service: str = GAME_SERVICE, kind: str = "unary") -> Mapping[str, str]:
    return {"grpc_type": kind, "grpc_service": service, "grpc_method": method}


async def _count(database_url: str, query: str) -> int:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cursor = await conn.execute(query)
        row = await cursor.fetchone()
        assert row is not None
        return int(row[0])


async def test_a_bot_game_moves_the_call_command_write_and_pool_figures(
    endpoints: Endpoints, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    metered = endpoints
    address = f"127.0.0.1:{metered.port}"
    before = await scrape(metered)
    # One round, the same each run: a whole match would prove nothing more. (This process's servers
    # only: the workers of `serve` deal as they do in production, a round of any length.)
    deal_from(monkeypatch, 6)
    monkeypatch.setattr(support, "ADMIN", metered.admin)  # the scripted game's fixed deck is the admin's
    summary = await run_bots(
        address, games=1, variant=Variant.CLASSIC, players=3, concurrency=1, seed=7, target_score=1
    )
    # Exact counts below rest on this: no call was repeated or refused.
    assert (summary.games, summary.retries, summary.rejected) == (1, 0, 0)
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
        game = await create_scripted(stub)
        refused = await fails(
            stub.Play(pb.PlayRequest(header=header(game.game_id), card="G5"), metadata=game.seat(1))
        )
        listed: pb.ListGamesReply = await stub.ListGames(pb.ListGamesRequest())
        (bots_game,) = [g.game_id for g in listed.games if g.game_id != game.game_id]
        audit = audit_pb2_grpc.AuditServiceStub(channel)  # type: ignore[no-untyped-call]
        verified = await audit.VerifyGame(apb.VerifyGameRequest(game_id=bots_game), metadata=metered.admin)
    assert refused.code() is grpc.StatusCode.FAILED_PRECONDITION
    rule = error_info(refused).reason
    after = await scrape(metered)

    # What the store holds, counted apart from the metrics: a Play is stored with its command id.
    plays = await _count(
        database_url,
        "SELECT count(DISTINCT metadata->>'command_id') FROM events WHERE metadata->>'command' = 'Play'",
    )
    commands = await _count(database_url, "SELECT count(*) FROM commands")
    games = await _count(database_url, "SELECT count(*) FROM games")
    assert plays > 0 and games == 2

    play = call("Play")
    assert moved(before, after, "grpc_server_started_total", **play) == plays + 1
    assert moved(before, after, "grpc_server_handled_total", **play, grpc_code="OK") == plays
    assert moved(before, after, "grpc_server_handled_total", **play, grpc_code="FailedPrecondition") == 1
    assert moved(before, after, "grpc_server_handling_seconds_count", **play) == plays + 1
    assert moved(before, after, "grpc_server_msg_sent_total", **play) == plays
    create = call("CreateGame")
    assert moved(before, after, "grpc_server_handled_total", **create, grpc_code="OK") == games

    assert verified.valid
    assert moved(before, after, "uno_audit_verifications_total", verdict="valid") == 1

    commands_total = "uno_audit_commands_total"
    assert moved(before, after, commands_total, command="Play", outcome="accepted", rule="") == plays
    assert moved(before, after, commands_total, command="Play", outcome="rejected", rule=rule) == 1
    assert moved(before, after, commands_total, command="CreateGame", outcome="accepted", rule="") == games

    # One write per command: a game's creation, or an append of every other command's events.
    writes = "uno_audit_append_seconds_count"
    assert moved(before, after, writes, operation="create") == games
    assert moved(before, after, writes, operation="append") == commands - games
    assert moved(before, after, "uno_audit_append_seconds_sum", operation="append") > 0

    # The pool: this server's (the only one running; or both workers'), and used by the game. Workers copy
    # their pools' figures to their metric files every second: a scrape may be a copy behind.
    deadline = time.monotonic() + 30
    while moved(before, after, "uno_audit_db_pool_requests_total") < commands and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        after = await scrape(metered)
    assert value(after, "uno_audit_db_pool_connections_max") == metered.pool_max
    assert 1 <= value(after, "uno_audit_db_pool_connections") <= metered.pool_max
    assert value(after, "uno_audit_db_pool_connections_idle") <= value(after, "uno_audit_db_pool_connections")
    assert moved(before, after, "uno_audit_db_pool_requests_total") >= commands


async def test_lag_gauges_show_the_read_models_behind(metered: RunningServer) -> None:
    """No projector runs: the gauges report the whole log as not projected, as GetProjectionLag does."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{metered.port}") as channel:
        stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
        await create_scripted(stub)
        lag: pb.ProjectionLagReply = await stub.GetProjectionLag(pb.GetProjectionLagRequest())
    assert lag.events_behind > 0
    deadline = asyncio.get_running_loop().time() + 10
    while True:  # the health loop reads the lag once a second
        samples = await scrape(metered)
        if value(samples, "uno_audit_projection_lag_events") == lag.events_behind:
            break
        assert asyncio.get_running_loop().time() < deadline, "the lag gauge never showed the lag"
        await asyncio.sleep(0.2)
    assert value(samples, "uno_audit_projection_lag_seconds") >= 0
    assert ("uno_audit_projection_lag_seconds", frozenset()) in samples
    assert value(samples, "uno_audit_projection_quarantined_games") == 0
    assert ("uno_audit_projection_quarantined_games", frozenset()) in samples
    assert ("uno_audit_projector_failing", frozenset()) in samples


async def test_the_open_streams_gauge_follows_a_watch(metered: RunningServer) -> None:
    watching = call("WatchGame", kind="server_stream")
    async with grpc.aio.insecure_channel(f"127.0.0.1:{metered.port}") as channel:
        stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
        game = await create_scripted(stub)
        before = await scrape(metered)
        watch = stub.WatchGame(pb.WatchGameRequest(game_id=game.game_id, follow=True), metadata=ADMIN)
        await watch.read()  # the stream is open: the server has sent its first event
        during = await scrape(metered)
        watch.cancel()
        deadline = asyncio.get_running_loop().time() + 10
        while True:  # the server learns of the cancellation a moment later
            after = await scrape(metered)
            closed = moved(before, after, "uno_audit_watch_streams_open") == 0
            if closed and moved(during, after, "grpc_server_handled_total", **watching, grpc_code="Canceled"):
                break
            assert asyncio.get_running_loop().time() < deadline, "the stream was never counted closed"
            await asyncio.sleep(0.1)
    assert moved(before, during, "uno_audit_watch_streams_open") == 1
    assert moved(before, during, "grpc_server_started_total", **watching) == 1
    assert moved(before, during, "grpc_server_msg_sent_total", **watching) >= 1
    assert moved(before, during, "grpc_server_handled_total", **watching, grpc_code="Canceled") == 0
    assert moved(during, after, "grpc_server_handled_total", **watching, grpc_code="Canceled") == 1


async def test_a_command_that_loses_a_race_is_counted_as_a_conflict_and_retried(
    metered: RunningServer,
) -> None:
    """The command handler's cached state falls behind when the auditor appends an audit entry to the same
    stream: the next command is decided on the cache and its append conflicts. Sent with the version the
    client decided against (the cache's), it is refused; sent without, it is decided again."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{metered.port}") as channel:
        stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
        audit = audit_pb2_grpc.AuditServiceStub(channel)  # type: ignore[no-untyped-call]
        game = await create_scripted(stub)
        played = await stub.Play(
            pb.PlayRequest(header=header(game.game_id), card="R1"), metadata=game.seat(1)
        )
        before = await scrape(metered)
        dispute = apb.FileDisputeRequest(
            game_id=game.game_id,
            command_id=new_id(),
            kind=apb.UNO_CATCH,
            position=played.version,
            target=1,
            claim="seat 1 did not call",
        )
        verified = await audit.VerifyGame(
            apb.VerifyGameRequest(game_id=game.game_id, check_projections=False), metadata=ADMIN
        )
        await audit.FileDispute(dispute, metadata=game.seat(0))
        stale = pb.DrawRequest(header=header(game.game_id, expected_version=played.version))
        aborted = await fails(stub.Draw(stale, metadata=game.seat(2)))
        drawn = await stub.Draw(pb.DrawRequest(header=header(game.game_id)), metadata=game.seat(2))
        after = await scrape(metered)
    assert drawn.version > played.version + 1  # the Draw's events follow the dispute's entry
    assert aborted.code() is grpc.StatusCode.ABORTED
    assert error_info(aborted).reason == "VERSION_CONFLICT"
    assert moved(before, after, "uno_audit_append_conflicts_total", then="refused") == 1
    assert moved(before, after, "uno_audit_append_conflicts_total", then="retried") == 1
    commands_total = "uno_audit_commands_total"
    assert moved(before, after, commands_total, command="Draw", outcome="accepted", rule="") == 1
    assert (
        moved(before, after, commands_total, command="Draw", outcome="rejected", rule="VERSION_CONFLICT") == 1
    )
    assert moved(before, after, "grpc_server_handled_total", **call("Draw"), grpc_code="Aborted") == 1
    # A game dealt from the admin's fixed deck says so (RoundStarted.fixed_by), and is valid.
    assert (verified.valid, verified.chain_valid, verified.rules_valid) == (True, True, True)
    assert moved(before, after, "uno_audit_verifications_total", verdict="valid") == 1
    assert moved(before, after, "uno_audit_verifications_total", verdict="rules_broken") == 0
    verify = call("VerifyGame", service="uno.audit.v1.AuditService")
    assert moved(before, after, "grpc_server_handled_total", **verify, grpc_code="OK") == 1


async def test_the_endpoint_closes_with_the_server(database_url: str, service_login: ServiceLogin) -> None:
    await apply_migrations(database_url)
    url = await service_login.url(database_url)
    running = await start_server(
        ServeConfig(
            listen="127.0.0.1:0",
            database_url=url,
            admin_token=None,
            projector=False,
            metrics_listen="127.0.0.1:0",
        )
    )
    assert running.exporter is not None
    port = running.exporter.port
    assert "grpc_server_started_total" in await asyncio.to_thread(_get, port)
    await running.stop(grace=1.0)
    with pytest.raises(urllib.error.URLError):
        await asyncio.to_thread(_get, port)


async def test_a_metrics_address_in_use_is_refused(database_url: str, service_login: ServiceLogin) -> None:
    await apply_migrations(database_url)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        where = f"127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(ListenError, match=where):
            await start_server(
                ServeConfig(
                    listen="127.0.0.1:0",
                    database_url=await service_login.url(database_url),
                    admin_token=None,
                    projector=False,
                    metrics_listen=where,
                )
            )
