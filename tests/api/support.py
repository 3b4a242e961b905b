"""Helpers for the API tests: tokens, requests, errors, and what the store holds of a game."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import json
import random
import uuid
from collections import Counter
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

import grpc
import psycopg
from google.protobuf import json_format
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from service.cli.main import main
from service.domain.catalogue import decode_event
from service.rules.cards import DECKS, Card
from service.rules.events import GameCreated
from service.rules.state import HAND_SIZE, State, fold
from service.store import GENESIS_HASH, EventStore, StoredEvent
from service.store.model import stored_hash
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

ADMIN_TOKEN = "test-admin"
Metadata = tuple[tuple[str, str], ...]
ADMIN: Metadata = (("authorization", f"Bearer {ADMIN_TOKEN}"),)


def _clients(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["clients", *argv])
    return code, out.getvalue(), err.getvalue()


async def clients(*argv: str) -> tuple[int, str, str]:
    """``uno-audit clients ARGV`` in this process (off the event loop: it runs its own): exit status,
    standard output, standard error."""
    return await asyncio.to_thread(_clients, *argv)


async def add(database_url: str, name: str) -> str:
    """A new client key for ``name``, issued as an operator does (``uno-audit clients add``)."""
    code, out, err = await clients("add", name, "--database-url", database_url)
    assert code == 0, err
    shown = json.loads(out)
    assert shown["client"] == name
    return str(shown["key"])


def auth(token: str) -> Metadata:
    return (("authorization", f"Bearer {token}"),)


def new_id() -> str:
    return str(uuid.uuid4())


def header(
    game_id: str, *, expected_version: int | None = None, as_seat: int | None = None
) -> pb.CommandHeader:
    """A command header with a fresh command id."""
    made = pb.CommandHeader(game_id=game_id, command_id=new_id())
    if expected_version is not None:
        made.expected_version = expected_version
    if as_seat is not None:
        made.as_seat = as_seat
    return made


@dataclasses.dataclass(slots=True)
class Game:
    """A game created over the API: its id and the seat tokens."""

    game_id: str
    tokens: list[str]
    reply: pb.CreateGameReply

    def seat(self, seat: int) -> Metadata:
        return auth(self.tokens[seat])


async def create_game(
    stub: pb_grpc.GameServiceStub,
    *,
    variant: int = pb.CLASSIC,
    players: int = 3,
    options: Mapping[str, Any] | None = None,
    fixed_deck: Sequence[str] = (),
    target_score: int | None = None,
    dealer: int | None = None,
) -> Game:
    """Create a game (as the admin when a fixed deck is given, else without a token)."""
    request = pb.CreateGameRequest(
        command_id=new_id(),
        variant=variant,  # type: ignore[arg-type]
        players=[f"p{i}" for i in range(players)],
        fixed_deck=list(fixed_deck),
    )
    if options:
        request.options.update(dict(options))
    if target_score is not None:
        request.target_score = target_score
    if dealer is not None:
        request.dealer = dealer
    reply: pb.CreateGameReply = await stub.CreateGame(request, metadata=ADMIN if fixed_deck else None)
    assert [s.seat for s in reply.seats] == list(range(players))
    return Game(reply.game_id, [s.token for s in reply.seats], reply)


def arranged_deck(
    hands: Mapping[int, Sequence[str]],
    first: str,
    *,
    players: int,
    dealer: int = 0,
    then: Sequence[str] = (),
    deck: str = "classic",
) -> list[str]:
    """A whole deck (top first) that deals ``hands`` (partly given, filled up with number cards) and flips
    ``first``; the draw pile then starts with ``then``. Deals as ``service.rules.state.deal`` does."""
    left = Counter(c.token for c in DECKS[deck])
    for token in [*(t for cards in hands.values() for t in cards), first, *then]:
        assert left[token] > 0, f"the {deck} deck has no more {token}"
        left[token] -= 1
    # Fill-ins: number cards (no action or wild), in canonical order, so the tests stay deterministic.
    fillers = [t for t in (c.token for c in DECKS[deck]) if Card.parse(t).number is not None]
    spare: list[str] = []
    for token in fillers:
        if left[token] > 0:
            left[token] -= 1
            spare.append(token)
    full: dict[int, list[str]] = {seat: list(hands.get(seat, ())) for seat in range(players)}
    for seat in range(players):
        while len(full[seat]) < HAND_SIZE:
            full[seat].append(spare.pop(0))
    dealt = [full[(dealer + 1 + i) % players][i // players] for i in range(HAND_SIZE * players)]
    rest = spare + [t for t, n in left.items() for _ in range(n)]
    out = [*dealt, first, *then, *rest]
    assert Counter(out) == Counter(c.token for c in DECKS[deck])
    return out


def error_info(error: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo:
    """The ``google.rpc.ErrorInfo`` detail of a failed call (every error of the service carries one)."""
    status = rpc_status.from_call(error)
    assert status is not None, f"no rich status in {error!r}"
    assert status.code == error.code().value[0]
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info
    raise AssertionError(f"no ErrorInfo in {status}")


def bad_request(error: grpc.aio.AioRpcError) -> error_details_pb2.BadRequest:
    """The ``google.rpc.BadRequest`` detail of an INVALID_ARGUMENT (it names the field)."""
    status = rpc_status.from_call(error)
    assert status is not None, f"no rich status in {error!r}"
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            found = error_details_pb2.BadRequest()
            detail.Unpack(found)
            return found
    raise AssertionError(f"no BadRequest in {status}")


async def fails(call: Awaitable[Any]) -> grpc.aio.AioRpcError:
    """The error a call ends with (the test fails if it succeeds)."""
    try:
        result = await call
    except grpc.aio.AioRpcError as error:
        return error
    raise AssertionError(f"expected the call to fail, it answered {result!r}")


async def fails_with(
    call: Awaitable[Any], code: grpc.StatusCode, *, field: str | None = None, reason: str | None = None
) -> grpc.aio.AioRpcError:
    """The call fails with ``code``; INVALID_ARGUMENT names ``field``; ``reason`` is ErrorInfo's."""
    error = await fails(call)
    assert error.code() is code, f"{error.code().name}: {error.details()} (expected {code.name})"
    info = error_info(error)
    if field is not None:
        assert info.metadata["field"] == field, f"{info} names another field than {field}"
        assert field in (error.details() or "")
        assert [v.field for v in bad_request(error).field_violations] == [field]
    if reason is not None:
        assert info.reason == reason, f"{error.details()}: reason {info.reason!r}, not {reason!r}"
    return error


def payload(event: pb.Event) -> dict[str, Any]:
    """The payload of an event message as plain JSON values (numbers come back as floats)."""
    return json_format.MessageToDict(event.payload)


async def count_rows(database_url: str) -> dict[str, int]:
    """How many rows the tables that record commands hold (to show that a refusal wrote nothing)."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        counts = {}
        for table in ("games", "events", "commands", "seats"):
            cursor = await conn.execute(f"SELECT count(*) FROM {table}")
            row = await cursor.fetchone()
            assert row is not None
            counts[table] = int(row[0])
        return counts


async def commands_of(database_url: str, game_id: str) -> dict[str, tuple[int, int]]:
    """The command ledger of a game: command id → (first version, last version)."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cursor = await conn.execute(
            "SELECT command_id, first_version, last_version FROM commands WHERE game_id = %s", (game_id,)
        )
        return {row[0]: (row[1], row[2]) for row in await cursor.fetchall()}


def assert_chain(events: Sequence[StoredEvent]) -> None:
    """Versions 1..n without gaps or duplicates, and every hash recomputed from its row and predecessor."""
    assert [e.version for e in events] == list(range(1, len(events) + 1))
    prev = GENESIS_HASH
    for event in events:
        assert event.prev_hash == prev, f"version {event.version} does not link to its predecessor"
        assert event.hash == stored_hash(event, prev)
        prev = event.hash


async def folded(store: EventStore, game_id: str) -> tuple[State, list[StoredEvent]]:
    """The game's state folded from its stored log (the secret seed put back into GameCreated)."""
    events = await store.read_stream(game_id)
    decoded = [decode_event(e.type, e.payload) for e in events]
    first = decoded[0]
    assert isinstance(first, GameCreated)
    assert first.seed is None, "the secret seed must never be written to the log"
    decoded[0] = dataclasses.replace(first, seed=await store.seed(game_id))
    return fold(decoded), events


def assert_view_matches(view: pb.GameView, state: State, version: int) -> None:
    """What a view says agrees with the state folded from the log."""
    assert view.version == version
    assert view.awaiting == state.awaiting.value
    assert view.round == state.round
    assert view.turn == state.turn
    assert list(view.hand_sizes) == [len(hand) for hand in state.hands]
    assert list(view.scores) == list(state.scores)
    assert view.winner == (state.winner if state.winner is not None else -1)
    assert view.draw_pile == len(state.pile)
    assert view.discard_pile == len(state.discard)
    for hand in view.hands:
        assert list(hand.cards) == [c.token for c in state.hands[hand.seat]]


# A whole classic game in 19 commands: seat 1 (left of dealer 0) plays its seven reds on R5 while seats 2
# and 0 hold nothing playable and draw unplayable cards; at 1 point it wins the match (target score 1).
SCRIPT_HANDS = {
    1: ["R1", "R2", "R3", "R4", "R6", "R7", "R8"],
    2: ["Y0", "G0", "B0", "Y9", "Y9", "G9", "G9"],
    0: ["B9", "B9", "YS", "GS", "BS", "YR", "GR"],
}
SCRIPT_DRAWS = ["YS", "GS", "BS", "YR", "GR", "BR", "BR", "Y+2", "Y+2", "G+2", "G+2", "B+2"]
SCRIPT_DECK = arranged_deck(SCRIPT_HANDS, "R5", players=3, then=SCRIPT_DRAWS)


async def create_scripted(stub: pb_grpc.GameServiceStub) -> Game:
    game = await create_game(
        stub, fixed_deck=SCRIPT_DECK, options={"dealer_selection": "given"}, target_score=1
    )
    assert (game.reply.view.awaiting, game.reply.view.turn) == ("play", 1)
    return game


async def play_script(stub: pb_grpc.GameServiceStub, game: Game) -> list[pb.CommandReply]:
    """Play the scripted game to its end; the replies, in order."""
    replies: list[pb.CommandReply] = []
    for i, card in enumerate(SCRIPT_HANDS[1]):
        request = pb.PlayRequest(header=header(game.game_id), card=card, uno=i == 5)
        replies.append(await stub.Play(request, metadata=game.seat(1)))
        if i < 6:
            for seat in (2, 0):
                replies.append(
                    await stub.Draw(pb.DrawRequest(header=header(game.game_id)), metadata=game.seat(seat))
                )
                assert replies[-1].view.turn == (0 if seat == 2 else 1)
    assert replies[-1].view.awaiting == "game-over"
    assert replies[-1].view.winner == 1
    return replies


def deal_from(monkeypatch: Any, seed: int) -> None:
    """Make this process's server deal every game it creates from one seed made from ``seed``, not from a
    fresh secret one: with seeded bots, a whole bot game is then the same game, of the same length, each
    run (a fresh deal makes a round of three bots anything from 80 to 3,000 calls)."""
    from service.api import servicer
    from service.rules.fair import SEED_BYTES

    fixed = random.Random(seed).randbytes(SEED_BYTES)
    monkeypatch.setattr(servicer, "new_seed", lambda: fixed)
