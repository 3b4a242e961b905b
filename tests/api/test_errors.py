"""Malformed, out-of-range and refused requests of every RPC: the right status code, the field or rule named
in ``google.rpc.ErrorInfo``, and nothing written (the tables hold as many rows before as after)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from google.protobuf import message

from service.store import EventStore
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import (
    ADMIN,
    Game,
    arranged_deck,
    count_rows,
    create_game,
    error_info,
    fails_with,
    folded,
    header,
    new_id,
)

pytestmark = pytest.mark.timeout(60)

INVALID = grpc.StatusCode.INVALID_ARGUMENT
RULE = grpc.StatusCode.FAILED_PRECONDITION
#: ErrorInfo.reason of an option the rules refuse (an unknown one, a bad value, an unsupported house rule).
OPTIONS = "setup.options"
LONG = "x" * 129
# Dealer 0; seat 1 starts on R5 holding R1 G3 W Y7 Y8 G5 B2; seat 2 holds no card seat 1 holds.
HANDS = {
    1: ["R1", "G3", "W", "Y7", "Y8", "G5", "B2"],
    2: ["Y1", "Y2", "G4", "G6", "B6", "B7", "B8"],
    0: ["B9"],
}
DECK = arranged_deck(HANDS, "R5", players=3)

# Each command RPC with a request that is well-formed apart from its header.
COMMANDS: dict[str, tuple[type[Any], dict[str, Any]]] = {
    "StartRound": (pb.StartRoundRequest, {}),
    "Play": (pb.PlayRequest, {"card": "R1"}),
    "Draw": (pb.DrawRequest, {}),
    "Pass": (pb.PassRequest, {}),
    "Press": (pb.PressRequest, {}),
    "CallUno": (pb.CallUnoRequest, {}),
    "Catch": (pb.CatchRequest, {"target": 2}),
    "Challenge": (pb.ChallengeRequest, {}),
    "Accept": (pb.AcceptRequest, {}),
    "Choose": (pb.ChooseRequest, {"colour": "R"}),
}


@dataclass
class Case:
    name: str
    call: Callable[[], Awaitable[Any]]
    code: grpc.StatusCode
    field: str | None = None
    reason: str | None = None


async def _check(cases: list[Case], database_url: str) -> None:
    for case in cases:
        before = await count_rows(database_url)
        try:
            error = await fails_with(case.call(), case.code, field=case.field, reason=case.reason)
        except AssertionError as failed:
            raise AssertionError(f"{case.name}: {failed}") from None
        assert error_info(error).domain == "uno-audit"
        assert await count_rows(database_url) == before, f"{case.name} wrote something"


async def _started(stub: pb_grpc.GameServiceStub) -> Game:
    game = await create_game(stub, fixed_deck=DECK, options={"dealer_selection": "given"})
    view = game.reply.view
    assert (view.awaiting, view.turn, view.top, view.colour) == ("play", 1, "R5", "R")
    return game


def _command(
    stub: pb_grpc.GameServiceStub, rpc: str, head: pb.CommandHeader, **fields: Any
) -> message.Message:
    kind, defaults = COMMANDS[rpc]
    return kind(header=head, **{**defaults, **fields})  # type: ignore[no-any-return]


async def test_command_headers(stub: pb_grpc.GameServiceStub, database_url: str) -> None:
    game = await _started(stub)
    version = game.reply.version
    seat1 = game.seat(1)
    cases: list[Case] = []
    for rpc in COMMANDS:
        method = getattr(stub, rpc)

        def call(head: pb.CommandHeader, metadata: Any = seat1, rpc: str = rpc, method: Any = method) -> Any:
            return lambda: method(_command(stub, rpc, head), metadata=metadata)

        gid = game.game_id
        cases += [
            Case(f"{rpc} empty game_id", call(header("")), INVALID, "header.game_id"),
            Case(f"{rpc} long game_id", call(header(LONG)), INVALID, "header.game_id"),
            Case(
                f"{rpc} empty command_id", call(pb.CommandHeader(game_id=gid)), INVALID, "header.command_id"
            ),
            Case(
                f"{rpc} long command_id",
                call(pb.CommandHeader(game_id=gid, command_id=LONG)),
                INVALID,
                "header.command_id",
            ),
            Case(
                f"{rpc} unprintable command_id",
                call(pb.CommandHeader(game_id=gid, command_id="a\nb")),
                INVALID,
                "header.command_id",
            ),
            Case(
                f"{rpc} negative expected_version",
                call(header(gid, expected_version=-1)),
                INVALID,
                "header.expected_version",
            ),
            Case(
                f"{rpc} unknown game",
                call(header(new_id(), as_seat=1), ADMIN),
                grpc.StatusCode.NOT_FOUND,
                reason="NOT_FOUND",
            ),
            Case(
                f"{rpc} stale expected_version",
                call(header(gid, expected_version=version - 1)),
                grpc.StatusCode.ABORTED,
                reason="VERSION_CONFLICT",
            ),
            Case(
                f"{rpc} future expected_version",
                call(header(gid, expected_version=version + 5)),
                grpc.StatusCode.ABORTED,
                reason="VERSION_CONFLICT",
            ),
        ]
        if rpc != "StartRound":  # StartRound names no seat: anyone of the game may deal
            cases += [
                Case(f"{rpc} admin without as_seat", call(header(gid), ADMIN), INVALID, "header.as_seat"),
                Case(f"{rpc} as_seat out of range", call(header(gid, as_seat=3), ADMIN), INVALID),
                Case(f"{rpc} negative as_seat", call(header(gid, as_seat=-1), ADMIN), INVALID),
            ]
    await _check(cases, database_url)
    aborted = await fails_with(
        stub.Draw(pb.DrawRequest(header=header(game.game_id, expected_version=version - 1)), metadata=seat1),
        grpc.StatusCode.ABORTED,
    )
    assert error_info(aborted).metadata["actual_version"] == str(version)


async def test_command_arguments_and_rules(stub: pb_grpc.GameServiceStub, database_url: str) -> None:
    game = await _started(stub)
    gid = game.game_id
    seat1, seat2 = game.seat(1), game.seat(2)

    def play(card: str, metadata: Any = seat1, **fields: Any) -> Callable[[], Awaitable[Any]]:
        return lambda: stub.Play(pb.PlayRequest(header=header(gid), card=card, **fields), metadata=metadata)

    def choose(**fields: Any) -> Callable[[], Awaitable[Any]]:
        return lambda: stub.Choose(pb.ChooseRequest(header=header(gid), **fields), metadata=seat1)

    def simple(rpc: str, metadata: Any = seat1, **fields: Any) -> Callable[[], Awaitable[Any]]:
        return lambda: getattr(stub, rpc)(_command(stub, rpc, header(gid), **fields), metadata=metadata)

    cases = [
        # Malformed arguments.
        Case("unknown card token", play("Z9"), INVALID, "card"),
        Case("empty card", play(""), INVALID, "card"),
        Case("lower-case card", play("r1"), INVALID, "card"),
        Case("bad colour", play("W", colour="X"), INVALID, "colour"),
        Case("lower-case colour", play("W", colour="r"), INVALID, "colour"),
        Case("play target out of range", play("R1", target=3), INVALID),
        Case("play negative target", play("R1", target=-1), INVALID),
        Case("catch target out of range", simple("Catch", target=3), INVALID),
        Case("catch negative target", simple("Catch", target=-2), INVALID),
        Case("choose both", choose(colour="R", target=2), INVALID, "colour"),
        Case("choose neither", choose(), INVALID, "colour"),
        Case("choose bad colour", choose(colour="P"), INVALID, "colour"),
        Case("choose target out of range", choose(target=7), INVALID),
        # Rule violations: FAILED_PRECONDITION with the rule id.
        Case("a card not held", play("B9"), RULE, reason="play.in-hand"),
        Case("out of turn", play("Y1", seat2), RULE, reason="turn.order"),
        Case("draw out of turn", simple("Draw", seat2), RULE, reason="turn.order"),
        Case("no match", play("G3"), RULE, reason="play.match"),
        Case("wild without colour", play("W"), RULE, reason="play.wild-colour"),
        Case("colour for a coloured card", play("R1", colour="G"), RULE, reason="play.wild-colour"),
        Case("uno with seven cards", play("R1", uno=True), RULE, reason="uno.call"),
        Case("call uno with seven cards", simple("CallUno"), RULE, reason="uno.call"),
        Case("pass before drawing", simple("Pass"), RULE, reason="draw.pass"),
        Case("press without launcher", simple("Press"), RULE, reason="attack.launcher"),
        Case("catch oneself", simple("Catch", target=1), RULE, reason="uno.catch.invalid"),
        Case("catch a full hand", simple("Catch", target=2), RULE, reason="uno.catch.invalid"),
        Case("challenge nothing", simple("Challenge"), RULE, reason="wd4.challenge"),
        Case("accept nothing", simple("Accept"), RULE, reason="wd4.accept"),
        Case("choose unasked", choose(colour="G"), RULE, reason="turn.order"),
        Case("deal during a round", simple("StartRound"), RULE, reason="round.end"),
    ]
    await _check(cases, database_url)
    # Nothing was refused for the wrong reason: the seat can still do what it may.
    played: pb.CommandReply = await stub.Play(pb.PlayRequest(header=header(gid), card="R1"), metadata=seat1)
    assert played.view.top == "R1"


async def test_start_round_arguments(stub: pb_grpc.GameServiceStub, database_url: str) -> None:
    game = await create_game(stub, options={"dealer_selection": "given"})
    gid = game.game_id

    def deal(deck: list[str], metadata: Any = ADMIN) -> Callable[[], Awaitable[Any]]:
        request = pb.StartRoundRequest(header=header(gid), fixed_deck=deck)
        return lambda: stub.StartRound(request, metadata=metadata)

    await _check(
        [
            Case("fixed deck by a seat", deal(DECK, game.seat(0)), grpc.StatusCode.PERMISSION_DENIED),
            Case("bad token in the deck", deal([*DECK[:5], "R99", *DECK[6:]]), INVALID, "fixed_deck[5]"),
            Case("a deck of other cards", deal(["R1"] * len(DECK)), RULE, reason="deck.composition"),
            Case("a short deck", deal(DECK[:-1]), RULE, reason="deck.composition"),
            Case(
                "a spectator deals",
                lambda: stub.StartRound(pb.StartRoundRequest(header=header(gid))),
                grpc.StatusCode.UNAUTHENTICATED,
            ),
        ],
        database_url,
    )
    started: pb.CommandReply = await stub.StartRound(
        pb.StartRoundRequest(header=header(gid)), metadata=game.seat(2)
    )
    assert started.view.round == 1


async def test_create_game(stub: pb_grpc.GameServiceStub, database_url: str) -> None:
    def create(metadata: Any = None, **fields: Any) -> Callable[[], Awaitable[Any]]:
        values: dict[str, Any] = {"command_id": new_id(), "variant": pb.CLASSIC, "players": ["a", "b", "c"]}
        values.update(fields)
        options = values.pop("options", None)
        request = pb.CreateGameRequest(**values)
        if options is not None:
            request.options.update(options)
        return lambda: stub.CreateGame(request, metadata=metadata)

    def kindless(option: str, *, in_list: bool = False) -> Callable[[], Awaitable[Any]]:
        """A CreateGame whose option is a protobuf ``Value`` with no kind set (a JSON client can't send
        one; a protobuf client can)."""
        request = pb.CreateGameRequest(command_id=new_id(), variant=pb.CLASSIC, players=["a", "b", "c"])
        value = request.options.fields[option]
        (value.list_value.values.add() if in_list else value).Clear()
        return lambda: stub.CreateGame(request)

    await _check(
        [
            Case("empty command_id", create(command_id=""), INVALID, "command_id"),
            Case("long command_id", create(command_id=LONG), INVALID, "command_id"),
            Case("variant unspecified", create(variant=pb.VARIANT_UNSPECIFIED), INVALID, "variant"),
            Case("unknown variant number", create(variant=99), INVALID, "variant"),
            Case("one player", create(players=["a"]), INVALID, "players"),
            Case("no players", create(players=[]), INVALID, "players"),
            Case("eleven players", create(players=[f"p{i}" for i in range(11)]), INVALID, "players"),
            Case("duplicate names", create(players=["a", "b", "a"]), INVALID, "players"),
            Case("empty name", create(players=["a", ""]), INVALID, "players[1]"),
            # A name is keyed on in the read models: a 3,000-character one once stopped the projector.
            Case("a 3,000-character name", create(players=["a", "b" * 3000]), INVALID, "players[1]"),
            Case("a 65-character name", create(players=["a", "b" * 65]), INVALID, "players[1]"),
            Case("a NUL in a name", create(players=["a", "b\x00"]), INVALID, "players[1]"),
            Case("a line break in a name", create(players=["a", "b\nc"]), INVALID, "players[1]"),
            Case(
                "unknown option", create(options={"house_rule": True}), INVALID, "options.house_rule", OPTIONS
            ),
            Case(
                "an option without a value", kindless("target_score"), INVALID, "options", "INVALID_ARGUMENT"
            ),
            Case("a list holding no value", kindless("launcher_weights", in_list=True), INVALID, "options"),
            Case(
                "bad option type",
                create(options={"single_round": "yes"}),
                INVALID,
                "options.single_round",
                OPTIONS,
            ),
            Case(
                "option out of range",
                create(options={"target_score": 0}),
                INVALID,
                "options.target_score",
                OPTIONS,
            ),
            Case(
                "fractional option",
                create(options={"target_score": 1.5}),
                INVALID,
                "options.target_score",
                OPTIONS,
            ),
            Case(
                "bad option choice",
                create(options={"dealer_selection": "vote"}),
                INVALID,
                "options.dealer_selection",
                OPTIONS,
            ),
            Case(
                "33 options",
                create(options={f"o{i}": 1 for i in range(33)}),
                INVALID,
                "options",
                "INVALID_ARGUMENT",
            ),
            Case("a 65-character option name", create(options={"o" * 65: 1}), INVALID, "options"),
            Case("a control character in an option name", create(options={"a\x01": 1}), INVALID, "options"),
            Case("options nested 5 deep", create(options={"x": [[[[1]]]]}), INVALID, "options"),
            Case("a 129-character tournament id", create(tournament_id="t" * 129), INVALID, "tournament_id"),
            Case("a NUL in a tournament id", create(tournament_id="t\x00"), INVALID, "tournament_id"),
            Case("a 17-character card", create(ADMIN, fixed_deck=["R1" * 9]), INVALID, "fixed_deck[0]"),
            Case("a 257-card fixed deck", create(ADMIN, fixed_deck=["R1"] * 257), INVALID, "fixed_deck"),
            Case("target_score zero", create(target_score=0), INVALID, "options.target_score", OPTIONS),
            Case("target_score negative", create(target_score=-5), INVALID, "options.target_score", OPTIONS),
            Case("dealer out of range", create(dealer=3), INVALID, "dealer"),
            Case("negative dealer", create(dealer=-1), INVALID, "dealer"),
            Case("long tournament_id", create(tournament_id=LONG), INVALID, "tournament_id"),
            Case("a NUL in tournament_id", create(tournament_id="t\x00"), INVALID, "tournament_id"),
            Case("fixed deck without admin", create(fixed_deck=DECK), grpc.StatusCode.PERMISSION_DENIED),
            Case(
                # A creation's token is a client key or the admin's: any other is no credential.
                "fixed deck with a token that is no client key",
                create((("authorization", "Bearer nobody"),), fixed_deck=DECK),
                grpc.StatusCode.UNAUTHENTICATED,
            ),
            Case("bad fixed deck token", create(ADMIN, fixed_deck=["R1", "??"]), INVALID, "fixed_deck[1]"),
            Case(
                "fixed deck of other cards",
                create(ADMIN, fixed_deck=["R1"] * len(DECK)),
                INVALID,
                "fixed_deck",
            ),
        ],
        database_url,
    )
    assert (await count_rows(database_url))["games"] == 0


async def test_reading_rpcs(stub: pb_grpc.GameServiceStub, database_url: str) -> None:
    game = await create_game(stub)

    def get(game_id: str) -> Callable[[], Awaitable[Any]]:
        return lambda: stub.GetGame(pb.GetGameRequest(game_id=game_id))

    def watch(game_id: str, after: int = 0) -> Callable[[], Awaitable[Any]]:
        return lambda: stub.WatchGame(pb.WatchGameRequest(game_id=game_id, after_version=after)).read()

    def listing(size: int = 0, **fields: str) -> Callable[[], Awaitable[Any]]:
        return lambda: stub.ListGames(pb.ListGamesRequest(page_size=size, **fields))

    await _check(
        [
            Case("GetGame empty id", get(""), INVALID, "game_id"),
            Case("GetGame long id", get(LONG), INVALID, "game_id"),
            Case("GetGame unknown", get(new_id()), grpc.StatusCode.NOT_FOUND),
            Case("WatchGame empty id", watch(""), INVALID, "game_id"),
            Case("WatchGame long id", watch(LONG), INVALID, "game_id"),
            Case("WatchGame unknown", watch(new_id()), grpc.StatusCode.NOT_FOUND),
            Case("WatchGame negative after_version", watch(game.game_id, -1), INVALID, "after_version"),
            Case("ListGames negative page", listing(-1), INVALID, "page_size"),
            Case("ListGames page too large", listing(501), INVALID, "page_size"),
            Case("ListGames NUL in the page token", listing(page_token="a\x00"), INVALID, "page_token"),
            Case("ListGames long page token", listing(page_token=LONG), INVALID, "page_token"),
            Case("ListGames NUL in the tournament", listing(tournament_id="\x00"), INVALID, "tournament_id"),
            Case("GetGame NUL in the id", get("g\x00"), INVALID, "game_id"),
        ],
        database_url,
    )
    for size in (0, 1, 500):  # 0 means the default
        listed: pb.ListGamesReply = await stub.ListGames(pb.ListGamesRequest(page_size=size))
        assert [g.game_id for g in listed.games] == [game.game_id]
        assert listed.next_page_token == ""


async def test_list_and_object_options_are_read_from_the_struct(
    stub: pb_grpc.GameServiceStub, store: EventStore
) -> None:
    # A Struct hands its lists out as protobuf ListValues: they must reach the options as lists.
    request = pb.CreateGameRequest(command_id=new_id(), variant=pb.ATTACK, players=["a", "b", "c"])
    request.options.update({"launcher_weights": [0, 1, 2], "custom_count": 3})
    reply: pb.CreateGameReply = await stub.CreateGame(request)
    state, _ = await folded(store, reply.game_id)
    assert (state.options.launcher_weights, state.options.custom_count) == ((0, 1, 2), 3)
