"""ListGames: pages through the catalogue by game id, optionally one tournament's games."""

from __future__ import annotations

import pytest

from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import new_id

pytestmark = pytest.mark.timeout(30)


async def _create(stub: pb_grpc.GameServiceStub, tournament: str = "") -> str:
    request = pb.CreateGameRequest(
        command_id=new_id(), variant=pb.MARIO_KART, players=["a", "b"], tournament_id=tournament
    )
    reply: pb.CreateGameReply = await stub.CreateGame(request)
    assert reply.view.tournament_id == tournament
    return reply.game_id


async def _all_pages(stub: pb_grpc.GameServiceStub, size: int, tournament: str = "") -> list[list[str]]:
    pages, token = [], ""
    while True:
        reply: pb.ListGamesReply = await stub.ListGames(
            pb.ListGamesRequest(page_size=size, page_token=token, tournament_id=tournament)
        )
        pages.append([g.game_id for g in reply.games])
        if not reply.next_page_token:
            return pages
        token = reply.next_page_token


async def test_pages_and_tournaments(stub: pb_grpc.GameServiceStub) -> None:
    loose = [await _create(stub) for _ in range(3)]
    cup = [await _create(stub, "cup") for _ in range(4)]

    pages = await _all_pages(stub, 2)
    assert [len(p) for p in pages] == [2, 2, 2, 1]
    assert [g for p in pages for g in p] == sorted(loose + cup)
    assert await _all_pages(stub, 7) == [sorted(loose + cup)]

    cup_pages = await _all_pages(stub, 3, "cup")
    assert [g for p in cup_pages for g in p] == sorted(cup)
    assert await _all_pages(stub, 3, "no-such-cup") == [[]]

    reply: pb.ListGamesReply = await stub.ListGames(pb.ListGamesRequest(tournament_id="cup"))
    for summary in reply.games:
        assert summary.variant == pb.MARIO_KART
        assert list(summary.players) == ["a", "b"]
        assert summary.tournament_id == "cup"
        assert summary.version >= 1
        assert summary.created_at.seconds > 0
