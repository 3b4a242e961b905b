"""A game never wedges when the store is behind the server's cache.

A failover that lost a suffix, a restore or a point-in-time recovery while serving leaves the store behind
what a running server cached. The test rewinds a game's stream under a running server as a superuser
would by restoring (the row triggers off, the suffix and its ledger rows deleted), then plays on: the
next command is decided on the store's game, not refused as GAME_BUSY or on the cached state; a game whose
creation is gone is NOT_FOUND, never INTERNAL.
"""

from __future__ import annotations

import grpc
import psycopg
import pytest

from service.api.server import RunningServer
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import ADMIN, arranged_deck, create_game, error_info, fails, header, new_id

pytestmark = pytest.mark.timeout(60)


async def _rewind(database_url: str, game_id: str, to_version: int) -> None:
    """Delete the game's events and ledger rows above ``to_version`` (all its rows at 0), as a restore of
    an older copy leaves it, while the server runs."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        for table in ("events", "commands"):
            await conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        await conn.execute("DELETE FROM events WHERE game_id = %s AND version > %s", (game_id, to_version))
        await conn.execute(
            "DELETE FROM commands WHERE game_id = %s AND last_version > %s", (game_id, to_version)
        )
        if to_version == 0:
            for table in ("seats", "game_secrets", "games"):
                await conn.execute(f"DELETE FROM {table} WHERE game_id = %s", (game_id,))
        for table in ("events", "commands"):
            await conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")
        await conn.commit()


async def _stored_versions(database_url: str, game_id: str) -> list[int]:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cursor = await conn.execute(
            "SELECT version FROM events WHERE game_id = %s ORDER BY version", (game_id,)
        )
        return [row[0] for row in await cursor.fetchall()]


async def _dealt(stub: pb_grpc.GameServiceStub) -> tuple[object, int]:
    # A dealt round whose first card is a number, so the seat on turn may draw (no colour to choose).
    deck = arranged_deck({}, "R5", players=2)
    game = await create_game(stub, players=2, fixed_deck=deck, options={"dealer_selection": "given"})
    assert game.reply.view.awaiting == "play"
    return game, game.reply.view.turn


async def test_a_game_rewound_under_the_server_is_played_from_the_store(
    server: RunningServer, stub: pb_grpc.GameServiceStub, database_url: str
) -> None:
    game, turn = await _dealt(stub)
    dealt = game.reply.view.version  # type: ignore[attr-defined]
    first = await stub.Draw(pb.DrawRequest(header=header(game.game_id)), metadata=game.seat(turn))  # type: ignore[attr-defined]
    assert first.view.version > dealt
    # The server has the draw cached; the store loses it, as a failover that lost a suffix would.
    await _rewind(database_url, game.game_id, dealt)  # type: ignore[attr-defined]

    # A command decided on the cache would be refused (the seat has drawn already) or conflict for ever;
    # decided on the store, the seat on turn draws again, at the versions the lost draw had.
    again = await stub.Draw(pb.DrawRequest(header=header(game.game_id)), metadata=game.seat(turn))  # type: ignore[attr-defined]
    assert again.view.version == first.view.version
    assert await _stored_versions(database_url, game.game_id) == list(range(1, first.view.version + 1))  # type: ignore[attr-defined]

    # A client that names the version it decided against is judged against the store's head too.
    await _rewind(database_url, game.game_id, dealt)  # type: ignore[attr-defined]
    request = pb.DrawRequest(header=header(game.game_id, expected_version=dealt))  # type: ignore[attr-defined]
    named = await stub.Draw(request, metadata=game.seat(turn))  # type: ignore[attr-defined]
    assert named.view.version == first.view.version


async def test_a_game_whose_creation_is_lost_is_not_found(
    server: RunningServer, stub: pb_grpc.GameServiceStub, database_url: str
) -> None:
    game, turn = await _dealt(stub)
    await _rewind(database_url, game.game_id, 0)  # type: ignore[attr-defined]
    for _ in range(2):  # and stays so: the cached game is dropped, not retried for ever
        # The adjudicator's token: a seat token is checked against the seats the store lost with the game.
        draw = pb.DrawRequest(header=header(game.game_id, as_seat=turn))  # type: ignore[attr-defined]
        error = await fails(stub.Draw(draw, metadata=ADMIN))
        assert error.code() is grpc.StatusCode.NOT_FOUND, f"{error.code()}: {error.details()}"
        assert error_info(error).reason == "NOT_FOUND"


async def test_a_lost_creation_retried_is_created_again(
    server: RunningServer, stub: pb_grpc.GameServiceStub, database_url: str
) -> None:
    """The client's retry of a creation the store lost (same command id) creates it again, the same id."""
    request = pb.CreateGameRequest(command_id=new_id(), variant=pb.CLASSIC, players=["a", "b"])
    created = await stub.CreateGame(request)
    await _rewind(database_url, created.game_id, 0)
    again = await stub.CreateGame(request)
    assert again.game_id == created.game_id
    assert await _stored_versions(database_url, created.game_id) != []
