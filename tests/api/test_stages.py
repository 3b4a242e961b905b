"""A command's server stages (service/ops/stages.py) on a real server and store: answered only when
``stage_timing`` is on, consistent with the client's own clock, and counted once per stage per accepted
command in the metrics; the collector's passes and the event loop's ticker are counted too.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import AsyncIterator

import grpc
import pytest
from prometheus_client import REGISTRY

from service.api.config import ServeConfig
from service.api.server import RunningServer, start_server
from service.ops import stages
from tests.postgres import service_url
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import ADMIN_TOKEN, create_scripted, header

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def timed_server(database_url: str) -> AsyncIterator[RunningServer]:
    running = await start_server(
        ServeConfig(
            listen="127.0.0.1:0",
            database_url=service_url(database_url),
            admin_token=ADMIN_TOKEN,
            stage_timing=True,
            projector=False,
        )
    )
    try:
        yield running
    finally:
        await running.stop(grace=2.0)


def _timing(trailing: grpc.aio.Metadata | None) -> dict[str, int] | None:
    for key, value in trailing or ():
        if key == stages.TIMING_KEY:
            return {name: int(number) for name, number in (part.split("=") for part in str(value).split(","))}
    return None


def _stage_counts() -> dict[str, float]:
    return {
        stage: REGISTRY.get_sample_value("uno_audit_command_stage_seconds_count", {"stage": stage}) or 0.0
        for stage in stages.STAGES
    }


async def _draw(stub: pb_grpc.GameServiceStub, game_id: str, seat: tuple[tuple[str, str], ...]) -> tuple:
    call = stub.Draw(pb.DrawRequest(header=header(game_id)), metadata=seat)
    before = time.perf_counter()
    await call
    after = time.perf_counter()
    return before, after, await call.trailing_metadata()


async def test_stages_are_answered_with_the_clients_clock_and_counted(timed_server: RunningServer) -> None:
    counted = _stage_counts()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{timed_server.port}") as channel:
        stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
        game = await create_scripted(stub)
        before, after, trailing = await _draw(stub, game.game_id, game.seat(1))
    timing = _timing(trailing)
    assert timing is not None, f"no {stages.TIMING_KEY} in {trailing}"
    received, replied = timing.pop("received") / 1e9, timing.pop("replied") / 1e9
    # One clock on both sides (CLOCK_MONOTONIC): the server's span lies inside the client's.
    assert before <= received <= replied <= after
    assert set(timing) == set(stages.STAGES)
    assert all(us >= 0 for us in timing.values()), timing
    assert sum(timing.values()) <= (replied - received) * 1e6 + len(timing)  # each rounded to 1 µs
    assert timing["database"] > 0  # the draw's events were written
    # The creation is not a table command; the draw is, and each of its stages is observed once.
    assert {stage: n - counted[stage] for stage, n in _stage_counts().items()} == dict.fromkeys(
        stages.STAGES, 1.0
    )


async def test_stages_are_not_answered_by_default(stub: pb_grpc.GameServiceStub) -> None:
    game = await create_scripted(stub)
    _, _, trailing = await _draw(stub, game.game_id, game.seat(1))
    assert _timing(trailing) is None
    assert all(key != stages.TIMING_KEY for key, _ in trailing or ())


async def test_the_collector_and_the_loop_are_watched(server: RunningServer) -> None:
    def passes() -> float:
        return REGISTRY.get_sample_value("uno_audit_gc_pause_seconds_count", {"generation": "2"}) or 0.0

    def ticks() -> float:
        return REGISTRY.get_sample_value("uno_audit_event_loop_lag_seconds_count") or 0.0

    await asyncio.sleep(0.05)  # the ticker records the passes noted so far (start-up's among them)
    collected, ticked = passes(), ticks()
    gc.collect()
    await asyncio.sleep(0.05)
    assert passes() == collected + 1
    assert ticks() >= ticked + 2  # a 5 ms ticker, 50 ms: a loaded machine still wakes it twice


def test_the_collectors_callback_touches_no_metric(monkeypatch: pytest.MonkeyPatch) -> None:
    # A pass can start inside a metric's update, which holds a lock (one for all of them in multiprocess
    # mode): a callback that took it again would hang the process. It only notes the pass for the ticker.
    def refuse(*_: object) -> None:
        raise AssertionError("the collector's callback recorded a metric")

    monkeypatch.setattr(stages.metrics, "gc_pause", refuse)
    noted = len(stages._paused)
    stages._timed("start", {"generation": 2})
    stages._timed("stop", {"generation": 2})
    assert len(stages._paused) == noted + 1
    assert stages._paused.pop()[0] == 2


async def test_a_retry_answered_from_the_ledger_counts_no_stage(timed_server: RunningServer) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{timed_server.port}") as channel:
        stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
        game = await create_scripted(stub)
        request = pb.DrawRequest(header=header(game.game_id))
        await stub.Draw(request, metadata=game.seat(1))
        counted = _stage_counts()
        retried = stub.Draw(request, metadata=game.seat(1))
        reply = await retried
        trailing = await retried.trailing_metadata()
    assert reply.duplicate
    assert _stage_counts() == counted  # it appended nothing: no group wait, no statement to count
    timing = _timing(trailing)
    assert timing is not None and all(us >= 0 for us in timing.values()), timing
    assert timing["group_wait"] == timing["database"] == 0
