"""Jump-ins racing other commands over a real server and PostgreSQL (``house.jump-in``: the first accepted
play wins; it closes what any turn action of another player closes).

Each race is run :data:`REPEATS` times on a fresh game dealt from a fixed deck, the two commands sent at
once from two channels (``asyncio.gather``), and which order the server took is read from the log; the
test asks that both orders happened. After each race the log is a valid chain and folds to the view.

Two seats can never both hold a card identical to the top card (no deck has three copies of a card that
is not wild), so two jump-ins can never both be legal on one position. The race of two jump-ins is
therefore one whose loser is refused ``house.jump-in`` whatever the order: a +2 flipped first (its 2 cards
already taken) under stacking, one seat jumping in with its twin, another "jumping in" with a +2 of
another colour. Landing first, the second is not identical; landing after, a draw penalty waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any

import grpc
import pytest

from service.store import EventStore
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import (
    ADMIN,
    Game,
    arranged_deck,
    assert_chain,
    assert_view_matches,
    create_game,
    error_info,
    folded,
    header,
)

pytestmark = pytest.mark.timeout(120)

REPEATS = 24
#: The head start one command of a race gets, every fourth race.
LEAD = 0.003
RULE = grpc.StatusCode.FAILED_PRECONDITION
Outcome = pb.CommandReply | grpc.aio.AioRpcError

# Four players, dealer 0. R+2 flipped first: seat 1 takes 2 and loses the turn; seat 2 is on turn. Seat 3
# holds the other R+2, seat 0 a G+2.
TWO_JUMPERS = arranged_deck(
    {
        1: ["R1", "R2", "Y3", "Y4", "B5", "B6", "G7"],
        2: ["Y1", "Y2", "G3", "G4", "B7", "B8", "B9"],
        3: ["R+2", "R3", "G1", "G2", "Y5", "Y6", "Y7"],
        0: ["G+2", "R4", "B1", "B2", "B3", "B4", "Y8"],
    },
    "R+2",
    players=4,
)
# Four players, dealer 0, R5 flipped: seat 1 (on turn) holds R3; seat 3 holds the other R5.
TURN_AND_JUMPER = arranged_deck(
    {
        1: ["R3", "R1", "Y3", "Y4", "B5", "B6", "G7"],
        2: ["Y1", "Y2", "G3", "G4", "B7", "B8", "B9"],
        3: ["R5", "R2", "G1", "G2", "Y5", "Y6", "Y7"],
        0: ["G5", "R4", "B1", "B2", "B3", "B4", "Y8"],
    },
    "R5",
    players=4,
)
# Three players, dealer 0, R5 flipped: seat 1 plays its six reds while seats 2 and 0 draw cards that do not
# match, and goes down to G1 with R7 without calling UNO; seat 0 holds the other R7.
CATCH_HANDS = {
    1: ["R1", "R2", "R3", "R4", "R6", "R7", "G1"],
    2: ["Y1", "Y2", "Y3", "Y4", "B1", "B2", "B3"],
    0: ["R7", "Y6", "Y7", "B4", "B6", "G2", "G3"],
}
CATCH_DRAWS = ["YS", "GS", "BS", "YR", "GR", "BR", "BR", "Y+2", "Y+2", "G+2"]
CATCH_DECK = arranged_deck(CATCH_HANDS, "R5", players=3, then=CATCH_DRAWS)


@pytest.fixture
async def racers(address: str) -> AsyncIterator[list[pb_grpc.GameServiceStub]]:
    """Two stubs, each on a channel (an HTTP/2 connection) of its own."""
    channels = [grpc.aio.insecure_channel(address) for _ in range(2)]
    try:
        for channel in channels:
            await channel.channel_ready()
        yield [pb_grpc.GameServiceStub(c) for c in channels]  # type: ignore[no-untyped-call]
    finally:
        for channel in channels:
            await channel.close()


async def _race(
    first: Callable[[], Awaitable[Any]], second: Callable[[], Awaitable[Any]], i: int
) -> tuple[Outcome, Outcome]:
    """Both calls at once; their outcomes, in the order given. A call is made only when its turn comes
    (a grpc.aio call starts as soon as it is made). Race ``i`` starts them in the order given or
    the other, and every fourth race gives one of them a head start of :data:`LEAD` seconds (the server
    may favour one kind of command when they arrive together: both orders must still be seen)."""
    go = asyncio.Event()
    lead = (0.0, 0.0, LEAD, -LEAD)[i % 4]

    async def when_told(call: Callable[[], Awaitable[Any]], delay: float) -> Any:
        await go.wait()
        if delay > 0:
            await asyncio.sleep(delay)
        return await call()

    calls = [when_told(first, -lead), when_told(second, lead)]
    flip = i % 2 == 1
    tasks = [asyncio.create_task(c) for c in (reversed(calls) if flip else calls)]
    await asyncio.sleep(0)
    go.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    if flip:
        results.reverse()
    outcomes: list[Outcome] = []
    for result in results:
        if not isinstance(result, pb.CommandReply | grpc.aio.AioRpcError):
            raise AssertionError(f"not a reply nor a status: {result!r}")
        outcomes.append(result)
    return outcomes[0], outcomes[1]


def _channels(
    racers: list[pb_grpc.GameServiceStub], i: int
) -> tuple[pb_grpc.GameServiceStub, pb_grpc.GameServiceStub]:
    """The two channels, swapped every other race (so neither command always has the same one)."""
    return (racers[0], racers[1]) if i % 8 < 4 else (racers[1], racers[0])


def _refused(outcome: Outcome, reason: str) -> str:
    """The refusal's message, asserting it is FAILED_PRECONDITION with ``reason``."""
    assert isinstance(outcome, grpc.aio.AioRpcError), f"accepted: {outcome}"
    assert outcome.code() is RULE, f"{outcome.code().name}: {outcome.details()}"
    assert error_info(outcome).reason == reason, outcome.details()
    return outcome.details() or ""


def _play(game: Game, seat: int, card: str, *, jump_in: bool = False) -> pb.PlayRequest:
    return pb.PlayRequest(header=header(game.game_id), card=card, jump_in=jump_in)


async def _consistent(stub: pb_grpc.GameServiceStub, store: EventStore, game: Game) -> list[str]:
    """The log is a valid chain and folds to the server's view; its event types, in order."""
    state, events = await folded(store, game.game_id)
    assert_chain(events)
    view = await stub.GetGame(pb.GetGameRequest(game_id=game.game_id), metadata=ADMIN)
    assert_view_matches(view, state, len(events))
    return [e.type for e in events]


async def test_two_seats_jumping_in_at_once_one_is_accepted(
    stub: pb_grpc.GameServiceStub, racers: list[pb_grpc.GameServiceStub], store: EventStore
) -> None:
    orders: set[str] = set()
    for i in range(REPEATS):
        game = await create_game(
            stub,
            players=4,
            fixed_deck=TWO_JUMPERS,
            options={"dealer_selection": "given", "stacking": "draw-two", "jump_in": True},
        )
        view = game.reply.view
        assert (view.awaiting, view.turn, view.top, view.hand_sizes[1]) == ("play", 2, "R+2", 9)
        a, b = _channels(racers, i)
        twin, other = await _race(
            partial(a.Play, _play(game, 3, "R+2", jump_in=True), metadata=game.seat(3)),
            partial(b.Play, _play(game, 0, "G+2", jump_in=True), metadata=game.seat(0)),
            i,
        )
        assert isinstance(twin, pb.CommandReply), twin
        assert [e.type for e in twin.events][:2] == ["JumpedIn", "CardPlayed"]
        # The twin's +2 waits to be stacked on, by seat 0: no jumping in on it.
        assert (twin.view.awaiting, twin.view.turn, twin.view.pending_draw) == ("stack", 0, 2)
        message = _refused(other, "house.jump-in")
        if "waits" in message:
            orders.add("twin first")
        else:
            assert "not identical" in message, message
            orders.add("other first")
        types = await _consistent(stub, store, game)
        assert types.count("JumpedIn") == 1
    assert orders == {"twin first", "other first"}, f"only {orders} in {REPEATS} races"


async def test_a_jump_in_racing_the_turn_players_play(
    stub: pb_grpc.GameServiceStub, racers: list[pb_grpc.GameServiceStub], store: EventStore
) -> None:
    orders: set[str] = set()
    for i in range(REPEATS):
        game = await create_game(
            stub,
            players=4,
            fixed_deck=TURN_AND_JUMPER,
            options={"dealer_selection": "given", "jump_in": True},
        )
        assert (game.reply.view.awaiting, game.reply.view.turn) == ("play", 1)
        a, b = _channels(racers, i)
        turn, jump = await _race(
            partial(a.Play, _play(game, 1, "R3"), metadata=game.seat(1)),
            partial(b.Play, _play(game, 3, "R5", jump_in=True), metadata=game.seat(3)),
            i,
        )
        types = await _consistent(stub, store, game)
        if isinstance(turn, pb.CommandReply):
            orders.add("turn first")
            assert turn.view.top == "R3" and turn.view.turn == 2
            assert "not identical" in _refused(jump, "house.jump-in")  # R5 on R3
            assert "JumpedIn" not in types
        else:
            orders.add("jump first")
            assert isinstance(jump, pb.CommandReply), jump
            assert [e.type for e in jump.events][:2] == ["JumpedIn", "CardPlayed"]
            assert (jump.view.top, jump.view.turn) == ("R5", 0)  # play went on from seat 3
            _refused(turn, "turn.order")
            assert types.count("JumpedIn") == 1
        assert types.count("CardPlayed") == 1
    assert orders == {"turn first", "jump first"}, f"only {orders} in {REPEATS} races"


async def _down_to_one_uncalled(stub: pb_grpc.GameServiceStub, game: Game) -> None:
    """Seat 1 plays its six reds, seats 2 and 0 drawing between, and goes down to one card uncalled."""
    for card in CATCH_HANDS[1][:6]:
        reply: pb.CommandReply = await stub.Play(_play(game, 1, card), metadata=game.seat(1))
        if card == "R7":
            break
        for seat in (2, 0):
            reply = await stub.Draw(pb.DrawRequest(header=header(game.game_id)), metadata=game.seat(seat))
            assert reply.view.awaiting == "play", reply.view  # every card drawn is unplayable
    view = reply.view
    assert (view.top, view.turn, list(view.exposed_seats), view.hand_sizes[1]) == ("R7", 2, [1], 1)


async def test_a_jump_in_racing_an_uno_catch(
    stub: pb_grpc.GameServiceStub, racers: list[pb_grpc.GameServiceStub], store: EventStore
) -> None:
    orders: set[str] = set()
    for i in range(REPEATS):
        game = await create_game(
            stub, players=3, fixed_deck=CATCH_DECK, options={"dealer_selection": "given", "jump_in": True}
        )
        await _down_to_one_uncalled(stub, game)
        a, b = _channels(racers, i)
        catch, jump = await _race(
            partial(a.Catch, pb.CatchRequest(header=header(game.game_id), target=1), metadata=game.seat(2)),
            partial(b.Play, _play(game, 0, "R7", jump_in=True), metadata=game.seat(0)),
            i,
        )
        # The jump-in is legal either way: a catch is no turn action, and leaves the top card jumpable.
        assert isinstance(jump, pb.CommandReply), jump
        types = await _consistent(stub, store, game)
        view = await stub.GetGame(pb.GetGameRequest(game_id=game.game_id), metadata=ADMIN)
        assert not view.exposed_seats  # closed, by the catch or by the jump-in
        if isinstance(catch, pb.CommandReply):
            orders.add("catch first")
            assert types.index("UnoCaught") < types.index("JumpedIn")
            assert view.hand_sizes[1] == 3  # one card and the two of the penalty
        else:
            orders.add("jump first")
            # The jump-in, another player's turn action, closed seat 1's window: nothing left to catch.
            _refused(catch, "uno.catch.invalid")
            assert "UnoCaught" not in types
            assert view.hand_sizes[1] == 1
        assert types.count("JumpedIn") == 1
    assert orders == {"catch first", "jump first"}, f"only {orders} in {REPEATS} races"
