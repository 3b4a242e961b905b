"""Sixteen clients race conflicting commands for the seat on turn: exactly one wins every time.

Each race starts where one seat must act; sixteen tasks, each on a channel of its own, send a command
for that seat with distinct command ids at once. Without ``expected_version`` the handler re-decides
after a lost append, so the losers are refused by the rules (FAILED_PRECONDITION); with it, they hear
of the conflict (ABORTED). Afterwards the log has contiguous versions, a valid hash chain, one ledger
row per winner and none per loser, and the server's view agrees with the log folded from scratch.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from service.api.server import RunningServer
from service.rules.cards import Card, Colour
from service.rules.legality import playable_cards
from service.store import EventStore
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import (
    ADMIN,
    Game,
    assert_chain,
    assert_view_matches,
    commands_of,
    create_game,
    error_info,
    folded,
    header,
)

pytestmark = pytest.mark.timeout(60)

CLIENTS = 16
RACES = 8
COLOURS = [c.value for c in Colour]
Request = tuple[str, Any]


@pytest.fixture
async def stubs(address: str) -> AsyncIterator[list[pb_grpc.GameServiceStub]]:
    """One stub per client, each on its own channel (its own HTTP/2 connection)."""
    channels = [grpc.aio.insecure_channel(address) for _ in range(CLIENTS)]
    try:
        stubs = [pb_grpc.GameServiceStub(c) for c in channels]  # type: ignore[no-untyped-call]
        for channel in channels:
            await channel.channel_ready()
        yield stubs
    finally:
        for channel in channels:
            await channel.close()


def _requests(view: pb.GameView, game_id: str, race: int, *, versioned: bool) -> list[Request]:
    """Sixteen conflicting commands for the seat on turn (``view`` is the admin's)."""
    expected = view.version if versioned else None

    def head() -> pb.CommandHeader:
        return header(game_id, expected_version=expected)

    hand = [Card.parse(t) for t in view.hands[view.turn].cards]
    awaiting = view.awaiting
    if awaiting == "play":
        top = Card.parse(view.top)
        colour = Colour(view.colour) if view.colour else None
        options = playable_cards(hand, top, colour)

        def play(card: Card, i: int) -> Request:
            request = pb.PlayRequest(header=head(), card=card.token)
            if card.is_wild:
                request.colour = COLOURS[i % 4]
            return "Play", request

        if versioned:  # a mix: draws and every playable card, all decided against one version
            mixed: list[Request] = []
            for i in range(CLIENTS):
                if i % 2 == 0 or not options:
                    mixed.append(("Draw", pb.DrawRequest(header=head())))
                else:
                    mixed.append(play(options[i // 2 % len(options)], i))
            return mixed
        if race % 2 == 1 and options:  # everyone plays the same card: after one play the turn moves on
            return [play(options[0], i) for i in range(CLIENTS)]
        return [("Draw", pb.DrawRequest(header=head())) for _ in range(CLIENTS)]
    if awaiting == "drawn":
        if versioned:
            chosen = COLOURS[0] if Card.parse(view.drawn).is_wild else ""
            return [
                ("Pass", pb.PassRequest(header=head()))
                if i % 2
                else ("Play", pb.PlayRequest(header=head(), card=view.drawn, colour=chosen))
                for i in range(CLIENTS)
            ]
        return [("Pass", pb.PassRequest(header=head())) for _ in range(CLIENTS)]
    if awaiting == "colour":
        return [("Choose", pb.ChooseRequest(header=head(), colour=COLOURS[i % 4])) for i in range(CLIENTS)]
    if awaiting == "wd4-response":
        return [
            ("Accept", pb.AcceptRequest(header=head()))
            if i % 2
            else ("Challenge", pb.ChallengeRequest(header=head()))
            for i in range(CLIENTS)
        ]
    raise AssertionError(f"no race for {awaiting!r}")


async def _race(
    stubs: list[pb_grpc.GameServiceStub], game: Game, seat: int, requests: list[Request]
) -> tuple[list[tuple[Request, pb.CommandReply]], list[tuple[Request, grpc.aio.AioRpcError]]]:
    start = asyncio.Event()

    async def client(stub: pb_grpc.GameServiceStub, request: Request) -> pb.CommandReply:
        await start.wait()
        reply: pb.CommandReply = await getattr(stub, request[0])(request[1], metadata=game.seat(seat))
        return reply

    tasks = [asyncio.create_task(client(stub, r)) for stub, r in zip(stubs, requests, strict=True)]
    await asyncio.sleep(0)
    start.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    won, lost = [], []
    for request, result in zip(requests, results, strict=True):
        if isinstance(result, grpc.aio.AioRpcError):
            lost.append((request, result))
        elif isinstance(result, BaseException):
            raise result
        else:
            won.append((request, result))
    return won, lost


@pytest.mark.parametrize("versioned", [False, True], ids=["no-expected-version", "expected-version"])
async def test_exactly_one_of_sixteen_conflicting_commands_wins(
    versioned: bool,
    stub: pb_grpc.GameServiceStub,
    stubs: list[pb_grpc.GameServiceStub],
    store: EventStore,
    database_url: str,
) -> None:
    game = await create_game(stub, players=3)
    await stub.StartRound(pb.StartRoundRequest(header=header(game.game_id)), metadata=game.seat(0))
    winners: list[str] = []
    losers: list[str] = []
    for race in range(RACES):
        view: pb.GameView = await stub.GetGame(pb.GetGameRequest(game_id=game.game_id), metadata=ADMIN)
        if view.awaiting in ("round-start", "game-over"):
            break
        requests = _requests(view, game.game_id, race, versioned=versioned)
        won, lost = await _race(stubs, game, view.turn, requests)

        assert len(won) == 1, f"race {race} ({view.awaiting}): {len(won)} winners"
        (_, request), reply = won[0]
        winners.append(request.header.command_id)
        assert reply.version > view.version
        assert [e.version for e in reply.events] == list(range(view.version + 1, reply.version + 1))
        assert not reply.duplicate
        allowed = (
            {grpc.StatusCode.ABORTED, grpc.StatusCode.FAILED_PRECONDITION}
            if versioned
            else {grpc.StatusCode.FAILED_PRECONDITION}
        )
        for (_, request), error in lost:
            losers.append(request.header.command_id)
            assert error.code() in allowed, f"{error.code().name}: {error.details()}"
            info = error_info(error)
            if error.code() is grpc.StatusCode.ABORTED:
                assert info.reason == "VERSION_CONFLICT"
                assert int(info.metadata["actual_version"]) >= reply.version
            else:
                assert "." in info.reason  # a rule id such as turn.order or turn.end

        state, events = await folded(store, game.game_id)
        after: pb.GameView = await stub.GetGame(pb.GetGameRequest(game_id=game.game_id), metadata=ADMIN)
        assert_view_matches(after, state, len(events))
        assert after.version == reply.version, "a loser appended something"

    assert len(winners) >= 4, "the game ended before the races could be run"
    _, events = await folded(store, game.game_id)
    assert_chain(events)
    ledger = await commands_of(database_url, game.game_id)
    assert set(winners) <= set(ledger)
    assert not set(losers) & set(ledger)
    # Every stored event belongs to exactly one recorded command, and each command's versions are all there.
    covered = sorted(v for first, last in ledger.values() for v in range(first, last + 1))
    assert covered == list(range(1, len(events) + 1))
    for command_id, (first, last) in ledger.items():
        assert {e.metadata["command_id"] for e in events[first - 1 : last]} == {command_id}


async def test_a_view_read_overtaken_by_a_command_applies_no_event_twice(
    server: RunningServer, stub: pb_grpc.GameServiceStub, store: EventStore
) -> None:
    """A read of the game's new events that a command overtakes must not apply that command's events again
    (the handler's cached state would then hold cards twice and decide later commands wrongly)."""
    game = await create_game(stub, players=3)
    await stub.StartRound(pb.StartRoundRequest(header=header(game.game_id)), metadata=game.seat(0))
    view: pb.GameView = await stub.GetGame(pb.GetGameRequest(game_id=game.game_id), metadata=ADMIN)
    assert view.awaiting in ("play", "colour")

    read_stream = server.store.read_stream
    reading = asyncio.Event()

    async def slow_read_stream(game_id: str, after_version: int = 0, limit: int | None = None) -> Any:
        reading.set()
        await asyncio.sleep(0.3)  # a slow database: the command below commits meanwhile
        return await read_stream(game_id, after_version, limit)

    server.store.read_stream = slow_read_stream  # type: ignore[method-assign]
    try:
        viewing = asyncio.ensure_future(stub.GetGame(pb.GetGameRequest(game_id=game.game_id), metadata=ADMIN))
        await asyncio.wait_for(reading.wait(), 5)
        if view.awaiting == "play":
            command: Request = ("Draw", pb.DrawRequest(header=header(game.game_id)))
        else:
            command = ("Choose", pb.ChooseRequest(header=header(game.game_id), colour="R"))
        reply = await getattr(stub, command[0])(command[1], metadata=game.seat(view.turn))
        overtaken: pb.GameView = await viewing
    finally:
        server.store.read_stream = read_stream  # type: ignore[method-assign]

    state, events = await folded(store, game.game_id)
    assert reply.version == len(events)
    assert_view_matches(overtaken, state, len(events))
    after: pb.GameView = await stub.GetGame(pb.GetGameRequest(game_id=game.game_id), metadata=ADMIN)
    assert_view_matches(after, state, len(events))
