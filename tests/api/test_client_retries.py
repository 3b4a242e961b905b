"""Clients that survive: ``uno-audit bots`` plays on through an unavailable server, resending each call with
the same command id, so every command is stored exactly once; and docs/grpc.md's service config retries.

Faults come from a proxy between the bots and a real server: it forwards calls byte for byte, but may refuse
one (UNAVAILABLE before the server sees it) or lose its reply (the server applied the command, the client
gets UNAVAILABLE). The last test restarts the real server on its port in the middle of a game.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import psycopg
import pytest
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from projections.migrate import apply_migrations
from service.api.config import ServeConfig
from service.api.server import RunningServer, start_server
from service.client.bots import BotTable, LoadSummary, RetryPolicy, run_bots
from service.rules.options import Variant
from service.store import EventStore
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import ADMIN, ADMIN_TOKEN, assert_chain, commands_of, deal_from

if TYPE_CHECKING:  # the root conftest is not importable as a module of a package
    from tests.conftest import ServiceLogin

# Two tests play whole games, whose length the server's shuffle decides: patience on a busy machine.
pytestmark = pytest.mark.timeout(300)

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "grpc.md"
#: Quick to retry, patient enough for a test machine shared with others.
FAST = RetryPolicy(retry_for=60, backoff_cap=0.5, first_backoff=0.01, call_timeout=20)

REFUSE, LOSE = "refuse", "lose"


@dataclass(slots=True)
class Attempt:
    """One call the proxy saw."""

    method: str
    command_id: str
    at: float
    fault: str | None
    code: grpc.StatusCode = grpc.StatusCode.OK
    duplicate: bool = False


#: Decides the fault for the n-th attempt (0-based) of a method: REFUSE, LOSE, a status code or None.
Schedule = Callable[[str, int], "str | grpc.StatusCode | None"]


@dataclass
class Proxy(grpc.GenericRpcHandler):
    """Forwards GameService's unary calls to ``upstream`` and does to each what ``schedule`` says. A refusal
    carries RetryInfo ``retry_delay`` as the service's own UNAVAILABLE does."""

    upstream: grpc.aio.Channel
    schedule: Schedule
    retry_delay: float = 0.01
    attempts: list[Attempt] = field(default_factory=list)
    seen: Counter[str] = field(default_factory=Counter)

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[Any, Any]:
        method = details.method.rsplit("/", 1)[-1]
        forward = self.upstream.unary_unary(details.method)  # bytes in, bytes out

        async def handle(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
            fault = self.schedule(method, self.seen[method])
            self.seen[method] += 1
            attempt = Attempt(method, command_id_of(method, request), time.monotonic(), None)
            self.attempts.append(attempt)
            if isinstance(fault, grpc.StatusCode):
                attempt.fault, attempt.code = fault.name, fault
                await context.abort(fault, f"the proxy answers {fault.name}")
            if fault == REFUSE:
                attempt.fault, attempt.code = REFUSE, grpc.StatusCode.UNAVAILABLE
                await context.abort_with_status(self.unavailable("refused before the server"))
            metadata = [(k, v) for k, v in context.invocation_metadata() or () if k == "authorization"]
            try:
                reply: bytes = await forward(request, metadata=metadata)
            except grpc.aio.AioRpcError as error:
                attempt.code = error.code()
                await context.abort(
                    error.code(), error.details() or "", tuple(error.trailing_metadata() or ())
                )
            if method not in ("GetGame", "CreateGame", "ListGames"):
                attempt.duplicate = pb.CommandReply.FromString(reply).duplicate
            if fault == LOSE:
                attempt.fault, attempt.code = LOSE, grpc.StatusCode.UNAVAILABLE
                await context.abort_with_status(self.unavailable("the server answered; the reply is lost"))
            return reply

        return grpc.unary_unary_rpc_method_handler(handle)

    def unavailable(self, message: str) -> grpc.Status:
        delay = duration_pb2.Duration()
        delay.FromTimedelta(timedelta(seconds=self.retry_delay))
        detail = any_pb2.Any()
        detail.Pack(error_details_pb2.RetryInfo(retry_delay=delay))
        status: grpc.Status = rpc_status.to_status(
            status_pb2.Status(code=code_pb2.UNAVAILABLE, message=message, details=[detail])
        )
        return status

    def acknowledged(self) -> dict[str, Attempt]:
        """Command id → the attempt whose reply reached the client (at most one per id, asserted)."""
        answered = [a for a in self.attempts if a.code is grpc.StatusCode.OK and a.command_id]
        ids = Counter(a.command_id for a in answered)
        assert max(ids.values(), default=1) == 1, f"acknowledged twice: {ids.most_common(3)}"
        return {a.command_id: a for a in answered}


def command_id_of(method: str, request: bytes) -> str:
    if method in ("GetGame", "ListGames"):
        return ""
    if method == "CreateGame":
        return str(pb.CreateGameRequest.FromString(request).command_id)
    message = getattr(pb, f"{method}Request").FromString(request)
    return str(message.header.command_id)


@pytest.fixture
async def proxied(address: str) -> AsyncIterator[Callable[..., Any]]:
    """Start proxies to the test's server: ``await proxied(schedule, retry_delay=…)`` → (proxy, address)."""
    opened: list[tuple[grpc.aio.Server, grpc.aio.Channel]] = []

    async def start(schedule: Schedule, retry_delay: float = 0.01) -> tuple[Proxy, str]:
        upstream = grpc.aio.insecure_channel(address)
        proxy = Proxy(upstream, schedule, retry_delay)
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((proxy,))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        opened.append((server, upstream))
        return proxy, f"127.0.0.1:{port}"

    yield start
    for server, upstream in opened:
        await server.stop(None)
        await upstream.close()


async def test_a_bot_game_goes_on_through_refusals_and_lost_replies_storing_each_command_once(
    proxied: Callable[..., Any], database_url: str, store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    deal_from(monkeypatch, 6)  # a round of 84 calls, where a fresh deal takes 80 to 3,200

    def schedule(method: str, n: int) -> str | None:
        if method == "CreateGame":
            return REFUSE if n == 0 else None
        if method == "GetGame":
            return REFUSE if n % 4 == 1 else None
        if n % 5 == 2:
            return REFUSE
        return LOSE if n % 7 == 4 else None

    proxy, address = await proxied(schedule)
    summary = await run_bots(
        address, games=1, variant=Variant.CLASSIC, players=3, target_score=1, concurrency=1, policy=FAST
    )

    assert (summary.games, summary.rejected, summary.abandoned) == (1, 0, 0)
    failed = [a for a in proxy.attempts if a.fault is not None]
    lost = [a for a in failed if a.fault == LOSE]
    assert lost, "the game was too short for the schedule to lose a reply"
    # Each injected UNAVAILABLE was followed by exactly one more attempt, and the bots counted each.
    assert summary.retries == len(failed) > 0
    assert summary.to_json()["retries"] == summary.retries

    acknowledged = proxy.acknowledged()
    # A lost reply's command was resent with the same id and answered as a duplicate of its first result.
    for attempt in lost:
        assert acknowledged[attempt.command_id].duplicate, attempt
    duplicates = [a for a in acknowledged.values() if a.duplicate]
    assert summary.duplicates == len(duplicates) == len(lost)
    assert summary.commands == len(acknowledged) - 1  # all but CreateGame

    # The store holds exactly the acknowledged commands: none twice under another id, none lost.
    (game,) = await store.list_games()
    game_id = game.game_id
    ledger = await commands_of(database_url, game_id)
    assert set(ledger) == set(acknowledged)
    events = await store.read_stream(game_id)
    assert_chain(events)
    assert events[-1].type == "GameEnded"
    per_command = Counter(e.metadata["command_id"] for e in events)
    assert per_command == {cid: last - first + 1 for cid, (first, last) in ledger.items()}


async def test_a_lost_creation_is_abandoned_and_another_game_is_made(
    proxied: Callable[..., Any], stub: pb_grpc.GameServiceStub
) -> None:
    proxy, address = await proxied(lambda method, n: LOSE if method == "CreateGame" and n == 0 else None)
    summary = LoadSummary()
    async with grpc.aio.insecure_channel(address) as channel:
        game_service = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
        table = BotTable(game_service, random.Random(1), summary, FAST)
        await table.create(Variant.CLASSIC, 2, 1)
        # The new game's seat tokens act: its creation's reply reached the table.
        started = await table.send("StartRound", 0, pb.StartRoundRequest(header=table.header()))

    assert started is not None
    assert (summary.abandoned, summary.retries, summary.rejected) == (1, 1, 0)
    creations = [a for a in proxy.attempts if a.method == "CreateGame"]
    # Lost, then the same id again (ALREADY_EXISTS: the tokens are gone), then a new id.
    assert [a.code for a in creations] == [
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.OK,
    ]
    assert creations[0].command_id == creations[1].command_id != creations[2].command_id
    listed: pb.ListGamesReply = await stub.ListGames(pb.ListGamesRequest())
    assert table.game_id in {g.game_id for g in listed.games}
    (abandoned,) = [g.game_id for g in listed.games if g.game_id != table.game_id]
    view: pb.GameView = await stub.GetGame(pb.GetGameRequest(game_id=abandoned), metadata=ADMIN)
    assert (view.awaiting, view.version) == ("round-start", 1)


@pytest.mark.parametrize(
    ("retry_delay", "backoff_cap", "at_least", "below"),
    [(0.4, 5.0, 0.4, 2.0), (30.0, 0.2, 0.0, 2.0)],
    ids=["the server's delay is waited", "the cap bounds it"],
)
async def test_a_retry_waits_the_servers_retry_info_delay_within_the_cap(
    proxied: Callable[..., Any], retry_delay: float, backoff_cap: float, at_least: float, below: float
) -> None:
    proxy, address = await proxied(
        lambda method, n: REFUSE if method == "CreateGame" and n == 0 else None, retry_delay=retry_delay
    )
    summary = LoadSummary()
    policy = RetryPolicy(retry_for=60, backoff_cap=backoff_cap, first_backoff=0.001)
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
        await BotTable(stub, random.Random(1), summary, policy).create(Variant.CLASSIC, 2, None)

    assert summary.retries == 1
    first, second = [a.at for a in proxy.attempts if a.method == "CreateGame"]
    assert at_least <= second - first < below


@pytest.mark.parametrize(
    "code", [grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.ABORTED]
)
async def test_other_statuses_are_not_retried(proxied: Callable[..., Any], code: grpc.StatusCode) -> None:
    proxy, address = await proxied(lambda method, n: code if method == "CreateGame" else None)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await run_bots(address, games=1, variant=Variant.CLASSIC, players=2, concurrency=1, policy=FAST)
    assert raised.value.code() is code
    assert len(proxy.attempts) == 1


async def test_retry_for_zero_gives_up_at_the_first_unavailable(proxied: Callable[..., Any]) -> None:
    proxy, address = await proxied(lambda method, n: REFUSE)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await run_bots(
            address,
            games=1,
            variant=Variant.CLASSIC,
            players=2,
            concurrency=1,
            policy=RetryPolicy(retry_for=0),
        )
    assert raised.value.code() is grpc.StatusCode.UNAVAILABLE
    assert len(proxy.attempts) == 1


async def test_retries_stop_after_retry_for_seconds(proxied: Callable[..., Any]) -> None:
    proxy, address = await proxied(lambda method, n: REFUSE)
    started = time.monotonic()
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        policy = RetryPolicy(retry_for=1, backoff_cap=0.2, first_backoff=0.05)
        await run_bots(address, games=1, variant=Variant.CLASSIC, players=2, concurrency=1, policy=policy)
    assert raised.value.code() is grpc.StatusCode.UNAVAILABLE
    assert time.monotonic() - started > 0.5  # it retried for a while; that it stopped, the timeout shows
    assert len(proxy.attempts) > 3


async def _commands_stored(database_url: str) -> int:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cursor = await conn.execute("SELECT count(*) FROM commands")
        row = await cursor.fetchone()
        assert row is not None
        return int(row[0])


async def test_bots_ride_out_a_server_restart_mid_game(
    database_url: str, service_login: ServiceLogin
) -> None:
    await apply_migrations(database_url)
    service_url = await service_login.url(database_url)
    running: RunningServer = await start_server(
        ServeConfig(listen="127.0.0.1:0", database_url=service_url, admin_token=ADMIN_TOKEN)
    )
    port = running.port
    seen: list[LoadSummary] = []
    bots = asyncio.create_task(
        run_bots(
            f"127.0.0.1:{port}",
            games=1,
            variant=Variant.CLASSIC,
            players=3,
            target_score=1,
            concurrency=1,
            policy=RetryPolicy(retry_for=60, backoff_cap=1.0, first_backoff=0.05),
            progress=seen.append,
        )
    )
    try:
        while await _commands_stored(database_url) < 10:
            assert not bots.done(), "the bots ended before the restart"
            await asyncio.sleep(0.02)
        await running.stop(grace=1.0)
        await asyncio.sleep(0.5)  # calls in this gap are refused: nothing listens on the port
        running = await start_server(
            ServeConfig(listen=f"127.0.0.1:{port}", database_url=service_url, admin_token=ADMIN_TOKEN)
        )
        summary = await asyncio.wait_for(bots, 240)
    finally:
        bots.cancel()  # a no-op once they finished
        await running.stop(grace=1.0)

    assert (summary.games, summary.rejected) == (1, 0)
    assert summary.retries > 0
    assert seen and seen[-1].games == 1
    # Every stored command was acknowledged once: the games' creations, the counted commands, nothing more.
    assert await _commands_stored(database_url) == summary.games + summary.abandoned + summary.commands


def readme_service_config() -> dict[str, Any]:
    """The service config JSON of docs/grpc.md's "Retrying" section."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text[text.index("## Retrying") :]
    found = re.search(r"```json\n(.*?)```", section, re.DOTALL)
    assert found is not None, "no JSON block in docs/grpc.md's Retrying section"
    config: dict[str, Any] = json.loads(found.group(1))
    return config


async def test_the_readmes_service_config_retries_unavailable_on_the_channel(
    proxied: Callable[..., Any],
) -> None:
    config = readme_service_config()
    (policy,) = [c["retryPolicy"] for c in config["methodConfig"]]
    assert policy["retryableStatusCodes"] == ["UNAVAILABLE"]
    proxy, address = await proxied(lambda method, n: REFUSE if method == "ListGames" and n < 2 else None)
    # As docs/grpc.md's snippet opens it: the channel accepts the config, and its retries are gRPC's own.
    async with grpc.aio.insecure_channel(
        address, options=[("grpc.service_config", json.dumps(config))]
    ) as channel:
        stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
        reply: pb.ListGamesReply = await stub.ListGames(pb.ListGamesRequest())
    assert list(reply.games) == []
    assert [a.code for a in proxy.attempts] == [grpc.StatusCode.UNAVAILABLE] * 2 + [grpc.StatusCode.OK]
