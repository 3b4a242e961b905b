"""Graceful shutdown: ``stop()`` refuses new calls but lets the commands in flight finish and answer, and
no command is ever half-written."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from service.api.config import ServeConfig
from service.api.server import RunningServer, start_server
from service.client.bots import RetryPolicy, run_bots
from service.rules.options import Variant
from service.store import EventStore
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import ADMIN_TOKEN, assert_chain, commands_of, create_scripted, header

pytestmark = pytest.mark.timeout(60)


async def _assert_whole_commands(store: EventStore, database_url: str, game_id: str) -> None:
    """Every recorded command of the game has all its events, and every event belongs to one."""
    events = await store.read_stream(game_id)
    assert_chain(events)
    ledger = await commands_of(database_url, game_id)
    covered = sorted(v for first, last in ledger.values() for v in range(first, last + 1))
    assert covered == list(range(1, len(events) + 1))
    for command_id, (first, last) in ledger.items():
        assert {e.metadata["command_id"] for e in events[first - 1 : last]} == {command_id}


async def test_stop_lets_commands_in_flight_finish(database_url: str, store: EventStore) -> None:
    running = await start_server(
        ServeConfig(listen="127.0.0.1:0", database_url=database_url, admin_token=ADMIN_TOKEN)
    )
    stopped = False
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
            games = [await create_scripted(stub) for _ in range(6)]

            # A slow database: every append waits before and after it writes.
            append = running.store.append
            entered = asyncio.Event()
            waiting = 0

            async def slow_append(*args: Any, **kwargs: Any) -> Any:
                nonlocal waiting
                waiting += 1
                if waiting == len(games):
                    entered.set()
                await asyncio.sleep(0.4)
                result = await append(*args, **kwargs)
                await asyncio.sleep(0.4)
                return result

            running.store.append = slow_append  # type: ignore[method-assign]
            requests = [pb.PlayRequest(header=header(g.game_id), card="R1") for g in games]
            calls = [
                asyncio.ensure_future(stub.Play(r, metadata=g.seat(1)))
                for g, r in zip(games, requests, strict=True)
            ]
            await asyncio.wait_for(entered.wait(), 10)  # every command is inside the handler now
            stopping = asyncio.create_task(running.stop(grace=10))
            stopped = True
            await asyncio.sleep(0.1)
            # New calls are refused meanwhile.
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.GetGame(pb.GetGameRequest(game_id=games[0].game_id))
            assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
            replies = await asyncio.gather(*calls)
            await asyncio.wait_for(stopping, 15)
    finally:
        if not stopped:
            await running.stop(grace=1)

    for game, reply in zip(games, replies, strict=True):
        assert isinstance(reply, pb.CommandReply)
        assert reply.events[0].type == "CardPlayed"
        events = await store.read_stream(game.game_id)
        assert events[-1].version == reply.version
        assert [e.type for e in events[-len(reply.events) :]] == [e.type for e in reply.events]
        await _assert_whole_commands(store, database_url, game.game_id)


async def test_stop_under_load_leaves_no_partial_command(database_url: str, store: EventStore) -> None:
    running: RunningServer = await start_server(
        ServeConfig(listen="127.0.0.1:0", database_url=database_url, admin_token=ADMIN_TOKEN)
    )
    try:
        bots = asyncio.create_task(
            run_bots(
                f"127.0.0.1:{running.port}",
                games=8,
                variant=Variant.CLASSIC,
                players=4,
                concurrency=8,
                seed=3,
                # No retries: the bots end at the first refusal of the stopping server, whichever it is
                # (retrying UNAVAILABLE, they would wait out the test unless some call was CANCELLED).
                policy=RetryPolicy(retry_for=0),
            )
        )
        while len(await store.read_all(limit=400)) < 400:  # well under way
            assert not bots.done()
            await asyncio.sleep(0.05)
    finally:
        # Commands take milliseconds; a short grace keeps the test fast when gRPC holds a call that arrived
        # just as the server stopped (it never reaches the servicer and is cancelled when the grace ends).
        await asyncio.wait_for(running.stop(grace=3), 10)
    with pytest.raises(grpc.aio.AioRpcError) as interrupted:
        await asyncio.wait_for(bots, 10)
    assert interrupted.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)

    games = await store.list_games()
    assert len(games) == 8
    for game in games:
        await _assert_whole_commands(store, database_url, game.game_id)
