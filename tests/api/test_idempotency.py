"""Idempotent retries: the same command id and request answer the first result and append nothing; the same
command id with another request is INVALID_ARGUMENT naming ``command_id``."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import psycopg
import pytest

from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import (
    ADMIN,
    SCRIPT_HANDS,
    Game,
    Metadata,
    arranged_deck,
    count_rows,
    create_game,
    create_scripted,
    error_info,
    fails_with,
    header,
    new_id,
)

pytestmark = pytest.mark.timeout(30)

# Seat 1 (left of dealer 0) starts on R5 with R1 to play; seat 2 holds no red card, Y1 and Y2 can follow.
DECK = arranged_deck(
    {0: ["B9"], 1: ["R1", "G3"], 2: ["Y1", "Y2", "G4", "G6", "B6", "B7", "B8"]},
    "R5",
    players=3,
    then=["Y7", "Y8", "Y9"],
)


async def _started(stub: pb_grpc.GameServiceStub) -> Game:
    game = await create_game(stub, fixed_deck=DECK, options={"dealer_selection": "given"})
    view = game.reply.view
    assert (view.awaiting, view.turn, view.top) == ("play", 1, "R5")
    return game


def _same_events(first: pb.CommandReply, again: pb.CommandReply) -> None:
    assert again.version == first.version
    assert [(e.position, e.version, e.type, e.payload) for e in again.events] == [
        (e.position, e.version, e.type, e.payload) for e in first.events
    ]
    assert [e.recorded_at for e in again.events] == [e.recorded_at for e in first.events]


@pytest.mark.parametrize("versioned", [False, True], ids=["no-expected-version", "expected-version"])
async def test_a_retry_answers_the_first_result_and_appends_nothing(
    versioned: bool, stub: pb_grpc.GameServiceStub, database_url: str
) -> None:
    game = await _started(stub)
    expected = game.reply.version if versioned else None
    play = pb.PlayRequest(header=header(game.game_id, expected_version=expected), card="R1")
    first: pb.CommandReply = await stub.Play(play, metadata=game.seat(1))
    assert not first.duplicate
    assert first.events[0].type == "CardPlayed"
    assert first.view.turn == 2
    rows = await count_rows(database_url)

    again: pb.CommandReply = await stub.Play(play, metadata=game.seat(1))
    assert again.duplicate
    _same_events(first, again)
    assert await count_rows(database_url) == rows

    # The game moves on (seat 2 plays); the retry still answers the first result.
    moved: pb.CommandReply = await stub.Play(
        pb.PlayRequest(header=header(game.game_id), card="Y1"), metadata=game.seat(2)
    )
    assert moved.view.version > first.version
    rows = await count_rows(database_url)
    late: pb.CommandReply = await stub.Play(play, metadata=game.seat(1))
    assert late.duplicate
    _same_events(first, late)
    _the_first_reply_exactly(first, late)
    assert await count_rows(database_url) == rows


def _the_first_reply_exactly(first: pb.CommandReply, again: pb.CommandReply) -> None:
    """The retry's reply is the first one byte for byte (the view after the command, not the game as it
    is now; the same receipt), but for the flag that marks it a retry."""
    marked = pb.CommandReply()
    marked.CopyFrom(first)
    marked.duplicate = True
    assert again.view == first.view, (again.view, first.view)
    assert again.SerializeToString(deterministic=True) == marked.SerializeToString(deterministic=True)


async def test_a_late_retry_of_every_seats_commands_answers_each_first_reply_exactly(
    stub: pb_grpc.GameServiceStub,
) -> None:
    """Every command of a scripted game, retried by its seat after the game has ended: each retry is the
    first reply, the view redacted for that seat at that version."""
    game = await create_scripted(stub)
    sent: list[tuple[str, Any, Metadata, pb.CommandReply]] = []
    for i, card in enumerate(SCRIPT_HANDS[1]):  # the moves of support.play_script, each request kept
        moves: list[tuple[str, Any, Metadata]] = [
            ("Play", pb.PlayRequest(header=header(game.game_id), card=card, uno=i == 5), game.seat(1))
        ]
        if i < 6:
            moves += [
                ("Draw", pb.DrawRequest(header=header(game.game_id)), game.seat(seat)) for seat in (2, 0)
            ]
        for method, request, metadata in moves:
            sent.append((method, request, metadata, await getattr(stub, method)(request, metadata=metadata)))
    assert sent[-1][3].view.awaiting == "game-over"
    assert len(sent) >= 5
    for method, request, metadata, first in sent:
        again: pb.CommandReply = await getattr(stub, method)(request, metadata=metadata)
        _the_first_reply_exactly(first, again)


async def test_concurrent_copies_of_one_command_append_once(
    stub: pb_grpc.GameServiceStub, database_url: str
) -> None:
    game = await _started(stub)
    rows = await count_rows(database_url)
    draw = pb.DrawRequest(header=header(game.game_id))
    replies = await asyncio.gather(*(stub.Draw(draw, metadata=game.seat(1)) for _ in range(8)))
    assert sum(not r.duplicate for r in replies) == 1
    for reply in replies:
        _same_events(replies[0], reply)
    after = await count_rows(database_url)
    assert after["events"] == rows["events"] + len(replies[0].events)
    assert after["commands"] == rows["commands"] + 1


async def test_one_command_id_for_another_request_is_invalid(
    stub: pb_grpc.GameServiceStub, database_url: str
) -> None:
    game = await _started(stub)
    play = pb.PlayRequest(header=header(game.game_id), card="R1")
    await stub.Play(play, metadata=game.seat(1))
    rows = await count_rows(database_url)
    reused = pb.CommandHeader(game_id=game.game_id, command_id=play.header.command_id)

    # Legal in itself (seat 2 may play Y1 now), but the id already names another request.
    await fails_with(
        stub.Play(pb.PlayRequest(header=reused, card="Y1"), metadata=game.seat(2)),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="command_id",
    )
    # Illegal as well (seat 1 is not on turn): the reuse is still what is reported.
    await fails_with(
        stub.Draw(pb.DrawRequest(header=reused), metadata=game.seat(1)),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="command_id",
    )
    # The same body as another RPC is another request too.
    same_header = pb.CommandHeader(game_id=game.game_id, command_id=new_id())
    await stub.Draw(pb.DrawRequest(header=same_header), metadata=game.seat(2))
    await fails_with(
        stub.Pass(pb.PassRequest(header=same_header), metadata=game.seat(2)),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="command_id",
    )
    # Another seat sending the very same request: the id is bound to the seat that first used it, so the
    # copy is refused, not answered with seat 1's result.
    rows = await count_rows(database_url)
    for intruder in (game.seat(2), game.seat(0)):
        await fails_with(
            stub.Play(play, metadata=intruder), grpc.StatusCode.INVALID_ARGUMENT, field="command_id"
        )
    await fails_with(stub.Play(play), grpc.StatusCode.UNAUTHENTICATED)
    assert await count_rows(database_url) == rows

    # Another game: a command id names one command of one game, so there it is a new command.
    other = await _started(stub)
    accepted = await stub.Play(
        pb.PlayRequest(
            header=pb.CommandHeader(game_id=other.game_id, command_id=reused.command_id), card="R1"
        ),
        metadata=other.seat(1),
    )
    assert not accepted.duplicate and accepted.events[0].type == "CardPlayed"


async def test_a_create_game_retry_creates_nothing(stub: pb_grpc.GameServiceStub, database_url: str) -> None:
    request = pb.CreateGameRequest(command_id=new_id(), variant=pb.SONIC, players=["a", "b"])
    first = await stub.CreateGame(request)
    rows = await count_rows(database_url)
    # The seat tokens were shown once and are not shown again: the retry is told which game its command
    # created (ALREADY_EXISTS with the game id), and nothing is created.
    error = await fails_with(stub.CreateGame(request), grpc.StatusCode.ALREADY_EXISTS, reason="GAME_EXISTS")
    assert error_info(error).metadata["game_id"] == first.game_id
    other = pb.CreateGameRequest(command_id=request.command_id, variant=pb.CLASSIC, players=["a", "b"])
    await fails_with(stub.CreateGame(other), grpc.StatusCode.INVALID_ARGUMENT, field="command_id")
    assert await count_rows(database_url) == rows
    listed = await stub.ListGames(pb.ListGamesRequest(), metadata=ADMIN)
    assert len(listed.games) == 1


# --- a ledger that disagrees with the events ---------------------------------------------------------------

#: Superuser edits of one command's ledger row, each leaving the ledger at odds with the events that carry
#: the command id (the rows' triggers switched off, as only the database's owner can).
_ROW = " WHERE game_id = %(game)s AND command_id = %(id)s"
LEDGER_EDITS = {
    "deleted": "DELETE FROM commands" + _ROW,
    "versions": "UPDATE commands SET last_version = last_version + 1" + _ROW,
    "request": "UPDATE commands SET request_sha256 = sha256(request_sha256)" + _ROW,
}


async def _edit_ledger(database_url: str, edit: str, game_id: str, command_id: str) -> None:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        await conn.execute("ALTER TABLE commands DISABLE TRIGGER USER")
        cursor = await conn.execute(LEDGER_EDITS[edit], {"game": game_id, "id": command_id})
        assert cursor.rowcount == 1
        await conn.execute("ALTER TABLE commands ENABLE TRIGGER USER")


@pytest.mark.parametrize("versioned", [False, True], ids=["no-expected-version", "expected-version"])
@pytest.mark.parametrize("edit", sorted(LEDGER_EDITS))
async def test_a_resend_the_ledger_contradicts_is_data_loss_and_appends_nothing(
    edit: str, versioned: bool, stub: pb_grpc.GameServiceStub, database_url: str
) -> None:
    game = await _started(stub)
    expected = game.reply.version if versioned else None
    play = pb.PlayRequest(header=header(game.game_id, expected_version=expected), card="R1")
    first: pb.CommandReply = await stub.Play(play, metadata=game.seat(1))
    await _edit_ledger(database_url, edit, game.game_id, play.header.command_id)
    rows = await count_rows(database_url)

    error = await fails_with(
        stub.Play(play, metadata=game.seat(1)), grpc.StatusCode.DATA_LOSS, reason="LEDGER_MISMATCH"
    )
    assert error_info(error).metadata["command_id"] == play.header.command_id
    assert "ledger" in (error.details() or "")
    assert await count_rows(database_url) == rows
    # The game itself goes on: the next seat's new command is carried out.
    moved: pb.CommandReply = await stub.Play(
        pb.PlayRequest(header=header(game.game_id), card="Y1"), metadata=game.seat(2)
    )
    assert moved.version == first.version + len(moved.events)


async def test_a_create_game_resend_after_its_ledger_row_was_deleted_creates_nothing(
    stub: pb_grpc.GameServiceStub, database_url: str
) -> None:
    request = pb.CreateGameRequest(command_id=new_id(), variant=pb.CLASSIC, players=["a", "b"])
    first = await stub.CreateGame(request)
    await _edit_ledger(database_url, "deleted", first.game_id, request.command_id)
    rows = await count_rows(database_url)
    await fails_with(stub.CreateGame(request), grpc.StatusCode.DATA_LOSS, reason="LEDGER_MISMATCH")
    assert await count_rows(database_url) == rows
