"""The read models' health over a real channel: a game the projector cannot fold is quarantined, named by
``GetProjectionLag`` and keeps ``uno.audit.v1.Projections`` NOT_SERVING, while other games project."""

from __future__ import annotations

import asyncio
import hashlib

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from service.api.server import RunningServer
from service.store import NewEvent
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import ADMIN, create_game, header, new_id

pytestmark = pytest.mark.timeout(60)

PROJECTIONS = "uno.audit.v1.Projections"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


async def _status_becomes(health: health_pb2_grpc.HealthStub, wanted: int, timeout: float = 20.0) -> None:
    """Poll the health status of the read models until it is ``wanted`` (the server looks every second)."""
    async with asyncio.timeout(timeout):
        while True:
            reply = await health.Check(health_pb2.HealthCheckRequest(service=PROJECTIONS))
            if reply.status == wanted:
                return
            await asyncio.sleep(0.1)


async def test_a_game_that_cannot_be_folded_is_named_and_the_read_models_are_not_serving(
    server: RunningServer, channel: grpc.aio.Channel, stub: pb_grpc.GameServiceStub
) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    earlier = await create_game(stub, players=2)
    await stub.StartRound(pb.StartRoundRequest(header=header(earlier.game_id)), metadata=earlier.seat(0))
    await _status_becomes(health, SERVING)

    # Straight into the store, past the service's validation: an event no build of the catalogue decodes.
    bad = await create_game(stub, players=2)
    command_id = new_id()
    await server.store.append(
        bad.game_id,
        1,
        [NewEvent("CardPlayed", {"card": "not a card"})],
        command_id=command_id,
        request_hash=hashlib.sha256(command_id.encode()).digest(),
        metadata={"actor": "admin", "command": "Play"},
    )
    later = await create_game(stub, players=3)
    started = await stub.StartRound(
        pb.StartRoundRequest(header=header(later.game_id)), metadata=later.seat(0)
    )

    await _status_becomes(health, NOT_SERVING)
    scores = await stub.GetScores(pb.GetScoresRequest(game_id=later.game_id, min_version=started.version))
    assert scores.version == started.version  # a game created after the bad one projects completely
    hand = await stub.GetHand(
        pb.GetHandRequest(game_id=earlier.game_id, seat=1, min_version=2), metadata=earlier.seat(1)
    )
    assert hand.version >= 2  # and one created before it

    lag = await stub.GetProjectionLag(pb.GetProjectionLagRequest(), metadata=ADMIN)
    assert lag.quarantined_total == 1 and not lag.failing
    [game] = lag.quarantined
    assert (game.game_id, game.version, game.cause) == (bad.game_id, 2, "decode")
    assert "CardPlayed" in game.reason and game.position > 0 and game.quarantined_at.seconds > 0
    assert lag.events_behind == 0  # the bad game's event was passed, not waited on
    # Anyone may see which game and why in one word; the error's text is the admin's.
    public = await stub.GetProjectionLag(pb.GetProjectionLagRequest())
    assert [(g.game_id, g.cause, g.reason) for g in public.quarantined] == [(bad.game_id, "decode", "")]
    # The status stays NOT_SERVING: a quarantine is lifted by a rebuild, not by time.
    await asyncio.sleep(1.5)
    reply = await health.Check(health_pb2.HealthCheckRequest(service=PROJECTIONS))
    assert reply.status == NOT_SERVING
