"""The read-model RPCs over a real channel: scores, standings, hands and projection lag, from the projector
that runs inside the server; reading one's own write with a minimum version."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from service.client.bots import run_bots
from service.rules.options import Variant
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import ADMIN, auth, create_game, fails_with, header, new_id

pytestmark = pytest.mark.timeout(60)

TOURNAMENT = "spring-cup"


async def test_scores_and_standings_follow_the_games(stub: pb_grpc.GameServiceStub, address: str) -> None:
    summary = await run_bots(
        address, games=2, variant=Variant.SONIC, players=3, concurrency=2, seed=5, tournament_id=TOURNAMENT
    )
    assert summary.rejected == 0
    listed = await stub.ListGames(pb.ListGamesRequest(tournament_id=TOURNAMENT))
    assert len(listed.games) == 2
    wins: dict[str, int] = {}
    points: dict[str, int] = {}
    for game in listed.games:
        view = await stub.GetGame(pb.GetGameRequest(game_id=game.game_id), metadata=ADMIN)
        scores = await stub.GetScores(pb.GetScoresRequest(game_id=game.game_id, min_version=view.version))
        assert scores.version >= view.version
        assert [s.total for s in scores.seats] == list(view.scores)
        assert [s.player for s in scores.seats] == list(view.players)
        assert len(scores.rounds) == 1  # Sonic: a single round
        assert scores.rounds[0].winner == view.winner
        assert scores.rounds[0].points == view.scores[view.winner]
        assert len(scores.rounds[0].hands[view.winner].cards) == 0
        winner = view.players[view.winner]
        wins[winner] = wins.get(winner, 0) + 1
        points[winner] = points.get(winner, 0) + view.scores[view.winner]
    lag = await stub.GetProjectionLag(pb.GetProjectionLagRequest())
    cursor = lag.checkpoint
    standings = await stub.GetStandings(pb.GetStandingsRequest(tournament_id=TOURNAMENT, min_cursor=cursor))
    by_player = {row.player: row for row in standings.standings}
    assert set(by_player) == {"bot1", "bot2", "bot3"}
    assert all(row.games == 2 for row in by_player.values())
    assert {p: r.wins for p, r in by_player.items() if r.wins} == wins
    assert {p: r.points for p, r in by_player.items() if r.points} == points
    paged = []
    token = ""
    for _ in range(3):  # three players, pages of two: two pages, then no token
        page = await stub.GetStandings(
            pb.GetStandingsRequest(tournament_id=TOURNAMENT, min_cursor=cursor, page_size=2, page_token=token)
        )
        paged.append([row.player for row in page.standings])
        token = page.next_page_token
        if not token:
            break
    assert paged == [[r.player for r in standings.standings][:2], [r.player for r in standings.standings][2:]]
    for bad in ("-1", "x", "1" * 10):
        await fails_with(
            stub.GetStandings(pb.GetStandingsRequest(tournament_id=TOURNAMENT, page_token=bad)),
            grpc.StatusCode.INVALID_ARGUMENT,
            field="page_token",
        )


async def test_a_seat_reads_its_own_hand_as_of_its_own_write(stub: pb_grpc.GameServiceStub) -> None:
    game = await create_game(stub, players=3)
    reply = await stub.StartRound(pb.StartRoundRequest(header=header(game.game_id)), metadata=game.seat(0))
    view = await stub.GetGame(pb.GetGameRequest(game_id=game.game_id), metadata=game.seat(1))
    hand = await stub.GetHand(
        pb.GetHandRequest(game_id=game.game_id, seat=1, min_version=reply.version), metadata=game.seat(1)
    )
    assert hand.version >= reply.version
    assert sorted(hand.cards) == sorted(view.hands[0].cards)
    admin = await stub.GetHand(
        pb.GetHandRequest(game_id=game.game_id, seat=2, min_version=reply.version), metadata=ADMIN
    )
    assert len(admin.cards) == view.hand_sizes[2]
    await fails_with(
        stub.GetHand(pb.GetHandRequest(game_id=game.game_id, seat=2), metadata=game.seat(1)),
        grpc.StatusCode.PERMISSION_DENIED,
    )
    await fails_with(
        stub.GetHand(pb.GetHandRequest(game_id=game.game_id, seat=1)), grpc.StatusCode.UNAUTHENTICATED
    )
    lagging = await fails_with(
        stub.GetHand(
            pb.GetHandRequest(game_id=game.game_id, seat=1, min_version=reply.version + 1000),
            metadata=game.seat(1),
        ),
        grpc.StatusCode.UNAVAILABLE,
        reason="PROJECTION_LAG",
    )
    assert "not yet at" in (lagging.details() or "")


async def test_read_model_requests_are_validated(stub: pb_grpc.GameServiceStub) -> None:
    await fails_with(
        stub.GetScores(pb.GetScoresRequest(game_id="")), grpc.StatusCode.INVALID_ARGUMENT, field="game_id"
    )
    await fails_with(stub.GetScores(pb.GetScoresRequest(game_id=new_id())), grpc.StatusCode.NOT_FOUND)
    await fails_with(
        stub.GetStandings(pb.GetStandingsRequest(tournament_id="")),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="tournament_id",
    )
    game = await create_game(stub, players=2)
    await fails_with(
        stub.GetScores(pb.GetScoresRequest(game_id=game.game_id, min_version=-1)),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="min_version",
    )


async def test_the_read_models_have_a_health_status(
    channel: grpc.aio.Channel, stub: pb_grpc.GameServiceStub
) -> None:
    game = await create_game(stub, players=2)
    await stub.StartRound(pb.StartRoundRequest(header=header(game.game_id)), metadata=auth(game.tokens[0]))
    health = health_pb2_grpc.HealthStub(channel)
    for _ in range(50):
        reply = await health.Check(health_pb2.HealthCheckRequest(service="uno.audit.v1.Projections"))
        if reply.status == health_pb2.HealthCheckResponse.SERVING:
            break
        await asyncio.sleep(0.1)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    lag = await stub.GetProjectionLag(pb.GetProjectionLagRequest())
    assert lag.seconds_behind <= 5.0
