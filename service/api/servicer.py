"""``GameService``: the gRPC front door. Validates requests, authenticates callers, runs the command handler.

Every RPC validates its input before anything else (INVALID_ARGUMENT names the field), resolves the caller
from its token (a seat of the game, the admin, or a spectator), and answers with what that caller may see.
One structured log line per command: game, command id, seat, outcome, rule id, latency.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import grpc
from google.protobuf import message as pb_message
from google.protobuf import struct_pb2, timestamp_pb2

from projections import queries
from projections.projector import DEFAULT_SET
from projections.quarantine import read_health
from service.api import errors
from service.api.callers import Callers
from service.api.messages import VARIANT_OF, event_message, game_view
from service.api.notify import Notifier
from service.app.handler import Accepted, CommandHandler
from service.app.runner import stream_id_of
from service.checkpoints.keyring import Keyring
from service.domain import limits
from service.domain.auth import Caller, token_hash
from service.domain.errors import (
    InvalidInput,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    ServiceError,
    Unauthenticated,
    Unavailable,
)
from service.ops import metrics, stages
from service.ops.logging import logger
from service.rules import commands as cmd
from service.rules.cards import Card, CardError, Colour
from service.rules.events import Awaiting
from service.rules.fair import new_seed
from service.rules.options import OptionError, make_options
from service.rules.setup import valid_name
from service.rules.violations import Rule
from service.store import Cursor, EventStore
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

log = logger("api")
Context = grpc.aio.ServicerContext[Any, Any]

COLOURS = {c.value: c for c in Colour}


def _colour(value: str, field: str) -> Colour | None:
    if not value:
        return None
    colour = COLOURS.get(limits.token(value, field))
    if colour is None:
        raise InvalidInput(field, f"{value!r} is not a colour (R, Y, G or B)")
    return colour


def _card(value: str, field: str) -> Card:
    try:
        return Card.parse(limits.token(value, field))
    except CardError as bad:
        raise InvalidInput(field, str(bad)) from None


def _deck(tokens: Any, field: str) -> tuple[Card, ...]:
    limits.count(tokens, field, limits.MAX_DECK)
    return tuple(_card(token, f"{field}[{i}]") for i, token in enumerate(tokens))


def _options(options: struct_pb2.Struct) -> dict[str, Any]:
    """``CreateGame.options`` as plain values, bounded: at most :data:`~service.domain.limits.MAX_OPTIONS`
    keys of printable names, values nested at most :data:`~service.domain.limits.MAX_OPTION_DEPTH` deep (which
    options exist and what each takes is the rules' business: :func:`make_options`)."""
    limits.count(options.fields, "options", limits.MAX_OPTIONS)
    for key in options.fields:
        if not key or len(key) > limits.MAX_OPTION_KEY or not key.isprintable():
            raise InvalidInput(
                "options", f"an option name is 1 to {limits.MAX_OPTION_KEY} printable characters"
            )
    if _depth(options) > limits.MAX_OPTION_DEPTH:
        raise InvalidInput("options", f"option values nest at most {limits.MAX_OPTION_DEPTH} deep")
    try:
        return {k: _plain(v) for k, v in dict(options).items()}
    except ValueError:  # a protobuf Value with no kind set, at any depth
        raise InvalidInput("options", "every option needs a value (a number, text, true/false)") from None


def _option_refused(bad: OptionError) -> InvalidInput:
    """``setup.options``: an unknown option, a bad value, or a house rule the rule set does not take,
    named as the field ``options.<name>`` (``options`` alone when the rules name no option)."""
    field = "options" if bad.option is None else f"options.{bad.option}"
    return InvalidInput(field, str(bad), reason=Rule.SETUP_OPTIONS.value)


def _depth(value: struct_pb2.Struct | struct_pb2.ListValue) -> int:
    """How deep a Struct's lists and objects nest (1 for a flat one), read from the messages."""
    children = value.fields.values() if isinstance(value, struct_pb2.Struct) else value.values
    deepest = 0
    for child in children:
        kind = child.WhichOneof("kind")
        if kind == "struct_value":
            deepest = max(deepest, _depth(child.struct_value))
        elif kind == "list_value":
            deepest = max(deepest, _depth(child.list_value))
    return 1 + deepest


def _plain(value: Any) -> Any:
    """A Struct value as the options expect it: lists and objects as Python's, JSON numbers that are
    whole as ints. (A Struct hands out its lists and objects as protobuf ``ListValue`` and ``Struct``;
    reading a ``Value`` with no kind raises ``ValueError``.)"""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list | struct_pb2.ListValue):
        return [_plain(v) for v in value]
    if isinstance(value, dict | struct_pb2.Struct):
        return {k: _plain(v) for k, v in dict(value).items()}
    return value


def request_hash_of(method: str, request: pb_message.Message, caller: Caller) -> bytes:
    """What a command's ledger row keeps of its request: the method, the request and who sent it.

    The caller is part of it so that a command id is bound to the identity that first used it: another
    seat (or the admin) sending the same id is "another request", refused, never answered with the
    first caller's result.
    """
    digest = hashlib.sha256()
    for part in (method.encode(), caller.identity.encode(), request.SerializeToString(deterministic=True)):
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.digest()


#: Who the admin's commands are logged as acting (their metadata's ``actor``): also the name a round
#: dealt from the admin's fixed deck records as having fixed it (``RoundStarted.fixed_by``).
ADMIN = "admin"

#: Builds a table command from its request and the seat (or ``"admin"``) it is sent for.
Build = Callable[[Any, "int | str"], cmd.Command]
CommandRpc = Callable[["GameService", Any, Context], Awaitable[pb.CommandReply]]


def acting_seat(caller: Caller, header: pb.CommandHeader) -> int:
    """The seat a table action is for: the caller's own, or the one the admin names."""
    if caller.admin:
        if not header.HasField("as_seat"):
            raise InvalidInput("header.as_seat", "the admin must name the seat it acts for")
        return header.as_seat
    if caller.seat is None:
        raise Unauthenticated("acting needs a seat token of this game")
    if header.HasField("as_seat") and header.as_seat != caller.seat:
        raise PermissionDenied(f"a seat token acts only for its own seat ({caller.seat})")
    return caller.seat


def dealer_or_admin(caller: Caller, header: pb.CommandHeader) -> int | str:
    """Who starts a round: any seat of the game, or the admin."""
    if caller.spectator:
        raise Unauthenticated("starting a round needs a seat token of this game or the admin")
    return ADMIN if caller.admin else acting_seat(caller, header)


def _rejected(fields: dict[str, Any], error: ServiceError) -> dict[str, Any]:
    """A command's log fields once ``error`` refused it: its status code and the rule (or reason)."""
    return {**fields, "outcome": "rejected", "code": errors.code_of(error).name, "rule": error.reason}


def _command_ended(started: float, fields: dict[str, Any]) -> None:
    """The one log line and the metric of a command of GameService, begun at ``started`` (a
    ``perf_counter`` reading): ``fields`` names the command, its outcome and, when refused, the rule."""
    log.info("command", latency_ms=round((time.perf_counter() - started) * 1000, 3), **fields)
    metrics.command(fields["command"], fields["outcome"], fields.get("rule", ""))


def command_rpc(
    method: str, build: Build, actor: Callable[[Caller, pb.CommandHeader], int | str] = acting_seat
) -> CommandRpc:
    """The RPC of one table action: validate the header, authenticate, build the command, run it through
    the command handler, answer with what the caller may see. One structured log line per command."""

    async def rpc(self: GameService, request: Any, context: Context) -> pb.CommandReply:
        started = time.perf_counter()
        stamps = stages.begin(started)
        header: pb.CommandHeader = request.header
        fields: dict[str, Any] = {"command": method, "game": header.game_id, "command_id": header.command_id}
        try:
            game_id = limits.identifier(header.game_id, "header.game_id")
            command_id = limits.identifier(header.command_id, "header.command_id")
            if header.HasField("expected_version") and header.expected_version < 0:
                raise InvalidInput("header.expected_version", "must not be negative")
            caller = await self.callers.caller(context, game_id)
            fields["seat"] = seat = actor(caller, header)
            stages.handled()
            outcome = await self.handler.handle(
                game_id,
                build(request, seat),
                command_id=command_id,
                request_hash=request_hash_of(method, request, caller),
                expected_version=header.expected_version if header.HasField("expected_version") else None,
                metadata={"command_id": command_id, "actor": seat, "command": method},
            )
        except ServiceError as error:  # answered by errors.ErrorStatuses, like every refusal
            _command_ended(started, _rejected(fields, error))
            raise
        fields["outcome"] = "duplicate" if outcome.duplicate else "accepted"
        fields["version"] = outcome.version
        _command_ended(started, fields)
        players = outcome.state.players
        reply = pb.CommandReply(
            version=outcome.version,
            events=[event_message(e, caller, players) for e in outcome.events],
            view=game_view(
                outcome.game_id,
                outcome.state,
                outcome.version,
                caller,
                outcome.tournament_id,
            ),
            duplicate=outcome.duplicate,
            receipt=self.receipt(outcome),
        )
        timing = stages.end(stamps, answer=self.stage_timing)
        if timing is not None:
            context.set_trailing_metadata(((stages.TIMING_KEY, timing),))
        return reply

    rpc.__name__ = rpc.__qualname__ = method
    return rpc


def _start_round(request: pb.StartRoundRequest, actor: int | str) -> cmd.Command:
    if not request.fixed_deck:
        return cmd.StartRound()
    if actor != ADMIN:
        raise PermissionDenied("only the admin may deal from a fixed deck")
    return _fixed_round(request.fixed_deck)


def _fixed_round(deck: Sequence[str]) -> cmd.StartRound:
    """A round dealt from the admin's fixed deck, which its ``RoundStarted`` says (``fixed_by``), so that
    the verifier reports the deal as the admin's instead of finding it is not the seed's shuffle."""
    return cmd.StartRound(deck=_deck(deck, "fixed_deck"), fixed_by=ADMIN)


def _play(request: pb.PlayRequest, seat: int | str) -> cmd.Command:
    assert isinstance(seat, int)
    target = request.target if request.HasField("target") else None
    card, colour = _card(request.card, "card"), _colour(request.colour, "colour")
    return cmd.Play(seat, card, colour, request.uno, target, jump_in=request.jump_in)


def _choose(request: pb.ChooseRequest, seat: int | str) -> cmd.Command:
    assert isinstance(seat, int)
    colour = _colour(request.colour, "colour")
    target = request.target if request.HasField("target") else None
    if (colour is None) == (target is None):
        raise InvalidInput("colour", "choose either a colour or a target")
    return cmd.Choose(seat, colour, target)


def _catch(request: pb.CatchRequest, seat: int | str) -> cmd.Command:
    assert isinstance(seat, int)
    return cmd.Catch(seat, request.target)


def _by_seat(command: Callable[[int], cmd.Command]) -> Build:
    """A command that needs nothing from its request but the acting seat."""

    def build(_request: Any, seat: int | str) -> cmd.Command:
        assert isinstance(seat, int)
        return command(seat)

    return build


class GameService(pb_grpc.GameServiceServicer):
    """The ``uno.audit.v1.GameService`` implementation."""

    def __init__(
        self,
        store: EventStore,
        handler: CommandHandler,
        notifier: Notifier,
        callers: Callers,
        keyring: Keyring,
        *,
        reads: EventStore | None = None,
        stage_timing: bool = False,
    ) -> None:
        self.store = store
        #: Answer each command's stages in its trailing metadata (``serve --stage-timing``).
        self.stage_timing = stage_timing
        #: Where the reads that may lag go (GetStandings): a standby's store, or the primary's.
        self.reads = reads or store
        self.handler = handler
        self.notifier = notifier
        self.callers = callers
        self.keyring = keyring

    # --- the table actions: one RPC each, all built by command_rpc -------------------------------------

    StartRound = command_rpc("StartRound", _start_round, dealer_or_admin)
    Play = command_rpc("Play", _play)
    Draw = command_rpc("Draw", _by_seat(cmd.Draw))
    Pass = command_rpc("Pass", _by_seat(cmd.Pass))
    Press = command_rpc("Press", _by_seat(cmd.Press))
    CallUno = command_rpc("CallUno", _by_seat(cmd.CallUno))
    Catch = command_rpc("Catch", _catch)
    Challenge = command_rpc("Challenge", _by_seat(cmd.Challenge))
    Accept = command_rpc("Accept", _by_seat(cmd.Accept))
    Choose = command_rpc("Choose", _choose)

    # --- creating and reading ----------------------------------------------------------------------------

    async def _admit(self, client: str, command_id: str) -> None:
        """Refuse a creation over ``client``'s quotas, unless it is a retry of one that was admitted (it then
        finds its game and is answered as a retry)."""
        try:
            await self.callers.gate.admit_creation(client)
        except ResourceExhausted:
            if await self.store.game(stream_id_of(command_id)) is None:
                raise

    async def CreateGame(self, request: pb.CreateGameRequest, context: Context) -> pb.CreateGameReply:
        started = time.perf_counter()
        try:
            caller, token = self.callers.server_caller(context)
            client = await self.callers.gate.creator(caller, token)
            command_id = limits.identifier(request.command_id, "command_id")
            variant = VARIANT_OF.get(request.variant)
            if variant is None:
                raise InvalidInput("variant", "choose CLASSIC, SONIC, ATTACK or MARIO_KART")
            given = _options(request.options)
            if request.HasField("target_score"):
                given["target_score"] = request.target_score
            try:
                options = make_options(variant, given)
            except OptionError as bad:
                raise _option_refused(bad) from None
            limits.optional_identifier(request.tournament_id, "tournament_id")
            limits.count(request.players, "players", limits.MAX_PLAYERS)
            for seat, name in enumerate(request.players):
                if not valid_name(name):
                    raise InvalidInput(
                        f"players[{seat}]", f"a name is 1 to {limits.MAX_NAME} printable characters"
                    )
            first_round = None
            if request.fixed_deck:
                if not caller.admin:
                    raise PermissionDenied("only the admin may deal from a fixed deck")
                first_round = _fixed_round(request.fixed_deck)
            dealer = request.dealer if request.HasField("dealer") else None
            await self._admit(client, command_id)
            create = cmd.CreateGame(variant, tuple(request.players), options, new_seed(), dealer)
            created = await self.handler.create_game(
                create,
                command_id=command_id,
                request_hash=request_hash_of("CreateGame", request, caller),
                tournament_id=request.tournament_id,
                metadata={
                    "command_id": command_id,
                    "actor": ADMIN if caller.admin else "anyone",
                    "command": "CreateGame",
                    "tournament_id": request.tournament_id,
                    "client": client,
                },
                first_round=first_round,
                client=client,
            )
        except ServiceError as error:
            _command_ended(started, _rejected({"command": "CreateGame"}, error))
            raise
        outcome = created.outcome
        for seat, token in enumerate(created.tokens):
            self.callers.remember(created.game_id, token_hash(token), seat)
        _command_ended(
            started,
            {
                "command": "CreateGame",
                "game": created.game_id,
                "command_id": command_id,
                "outcome": "accepted",
                "version": outcome.version,
            },
        )
        return pb.CreateGameReply(
            game_id=created.game_id,
            version=outcome.version,
            seats=[
                pb.SeatToken(seat=seat, player=name, token=token)
                for seat, (name, token) in enumerate(zip(create.players, created.tokens, strict=True))
            ],
            view=game_view(created.game_id, outcome.state, outcome.version, caller, outcome.tournament_id),
            receipt=self.receipt(outcome),
        )

    def receipt(self, outcome: Accepted) -> str:
        """The signed checkpoint of the game at the outcome's version: its last event's chain hash (a
        duplicate's events are the first answer's, read back, so the version is theirs too)."""
        return self.keyring.receipt(outcome.game_id, outcome.version, outcome.events[-1].hash)

    async def GetGame(self, request: pb.GetGameRequest, context: Context) -> pb.GameView:
        game_id = limits.identifier(request.game_id, "game_id")
        caller = await self.callers.caller(context, game_id)
        loaded = await self.handler.load(game_id)
        return game_view(game_id, loaded.state, loaded.version, caller, loaded.tournament_id)

    async def ListGames(self, request: pb.ListGamesRequest, context: Context) -> pb.ListGamesReply:
        self.callers.server_caller(context)  # a malformed authorization header is refused here too
        size = limits.page_size(request.page_size, 50)
        rows = await self.store.list_games(
            tournament_id=limits.optional_identifier(request.tournament_id, "tournament_id"),
            after=limits.optional_identifier(request.page_token, "page_token"),
            limit=size + 1,
        )
        games = []
        for row in rows[:size]:
            created = timestamp_pb2.Timestamp()
            created.FromDatetime(row.created_at)
            games.append(
                pb.GameSummary(
                    game_id=row.game_id,
                    variant=VARIANT_OF_NAME[row.variant],
                    players=row.players,
                    version=row.version,
                    tournament_id=row.tournament_id,
                    created_at=created,
                )
            )
        token = rows[size - 1].game_id if len(rows) > size else ""
        return pb.ListGamesReply(games=games, next_page_token=token)

    async def WatchGame(self, request: pb.WatchGameRequest, context: Context) -> AsyncIterator[pb.Event]:
        game_id = limits.identifier(request.game_id, "game_id")
        if request.after_version < 0:
            raise InvalidInput("after_version", "must not be negative")
        caller = await self.callers.caller(context, game_id)
        client = await self.callers.client_of(caller, game_id)
        # Subscribed (and counted against the stream limits) before anything is read: an append after
        # the load wakes this stream even if it commits before the first wait.
        with self.notifier.watcher(game_id, caller, client=client) as watcher:
            await self.notifier.heard()  # the first stream opens the LISTEN connection
            loaded = await self.handler.load(game_id)
            players = loaded.state.players
            stored = watcher.events(
                request.after_version,
                version=loaded.version,
                over=loaded.state.awaiting is Awaiting.GAME_OVER,
                follow=request.follow,
            )
            async for event in stored:
                yield event_message(event, caller, players)

    # --- read models -------------------------------------------------------------------------------------

    async def GetScores(self, request: pb.GetScoresRequest, context: Context) -> pb.GetScoresReply:
        try:
            game_id = limits.identifier(request.game_id, "game_id")
            await self.callers.caller(context, game_id)
            wanted = self._min_version(request)
            found = await queries.scores(self.store, game_id, min_version=wanted)
            if found is None:
                raise NotFound(f"no game {game_id!r} in the read models")
        except queries.ProjectionLag as lag:
            raise _lagging(lag) from None
        return pb.GetScoresReply(
            game_id=game_id,
            version=found.version,
            status=found.status,
            seats=[pb.SeatScore(seat=s.seat, player=s.player, total=s.total) for s in found.seats],
            rounds=[
                pb.RoundScore(
                    round=r.round,
                    winner=r.winner,
                    points=r.points,
                    hands=[pb.Hand(seat=seat, cards=list(cards)) for seat, cards in enumerate(r.hands)],
                )
                for r in found.rounds
            ],
        )

    async def GetStandings(self, request: pb.GetStandingsRequest, context: Context) -> pb.GetStandingsReply:
        try:
            tournament = limits.identifier(request.tournament_id, "tournament_id")
            self.callers.server_caller(context)
            cursor = None
            if request.HasField("min_cursor"):
                if request.min_cursor.xid < 0 or request.min_cursor.position < 0:
                    raise InvalidInput("min_cursor", "xid and position must not be negative")
                cursor = Cursor(request.min_cursor.xid, request.min_cursor.position)
            size = limits.page_size(request.page_size, 100)
            start = offset_of(request.page_token)
            found = await queries.standings(self.reads, tournament, min_cursor=cursor)
        except queries.ProjectionLag as lag:
            raise _lagging(lag) from None
        end = start + size
        return pb.GetStandingsReply(
            tournament_id=tournament,
            cursor=pb.ProjectionCursor(xid=found.cursor.xid, position=found.cursor.position),
            next_page_token=str(end) if end < len(found.rows) else "",
            standings=[
                pb.Standing(
                    player=row.player,
                    games=row.games,
                    wins=row.wins,
                    rounds_won=row.rounds_won,
                    points=row.points,
                    uno_penalties_given=row.uno_penalties_given,
                    uno_penalties_taken=row.uno_penalties_taken,
                    challenges_won=row.challenges_won,
                    challenges_lost=row.challenges_lost,
                )
                for row in found.rows[start:end]
            ],
        )

    async def GetHand(self, request: pb.GetHandRequest, context: Context) -> pb.GetHandReply:
        try:
            game_id = limits.identifier(request.game_id, "game_id")
            caller = await self.callers.caller(context, game_id)
            if caller.spectator:
                raise Unauthenticated("reading a hand needs that seat's token or the admin's")
            if not caller.admin and request.seat != caller.seat:
                raise PermissionDenied(f"a seat token reads only its own hand (seat {caller.seat})")
            found = await queries.hand(
                self.store, game_id, request.seat, min_version=self._min_version(request)
            )
            if found is None:
                raise NotFound(f"no seat {request.seat} of game {game_id!r} in the read models")
        except queries.ProjectionLag as lag:
            raise _lagging(lag) from None
        return pb.GetHandReply(
            game_id=game_id, seat=found.seat, version=found.version, cards=list(found.cards)
        )

    async def GetProjectionLag(
        self, request: pb.GetProjectionLagRequest, context: Context
    ) -> pb.ProjectionLagReply:
        """The lag, the quarantined games and the projector's failure; the errors' text only for the
        admin, since a quarantined game's reason may quote hidden information from its events."""
        caller, _ = self.callers.server_caller(context)
        async with queries.connection(self.store) as conn:
            health = await read_health(conn, DEFAULT_SET)
        lag = health.lag
        reply = pb.ProjectionLagReply(
            events_behind=lag.events_behind,
            seconds_behind=lag.seconds_behind,
            checkpoint=pb.ProjectionCursor(xid=lag.cursor.xid, position=lag.cursor.position),
            quarantined=[
                pb.QuarantinedGame(
                    game_id=game.game_id,
                    version=game.version,
                    position=game.position or 0,
                    cause=game.cause.value,
                    reason=game.reason if caller.admin else "",
                )
                for game in health.quarantined
            ],
            quarantined_total=health.quarantined_total,
            failing=health.failing is not None,
            failing_reason=(health.failing or "") if caller.admin else "",
        )
        for message, game in zip(reply.quarantined, health.quarantined, strict=True):
            if game.at is not None:
                message.quarantined_at.FromDatetime(game.at)
        if health.failing_since is not None:
            reply.failing_since.FromDatetime(health.failing_since)
        return reply

    @staticmethod
    def _min_version(request: pb.GetScoresRequest | pb.GetHandRequest) -> int | None:
        if not request.HasField("min_version"):
            return None
        if request.min_version < 0:
            raise InvalidInput("min_version", "must not be negative")
        return request.min_version


def offset_of(page_token: str) -> int:
    """Where a page of a ranked list starts: its token is the number of rows before it ("" for 0)."""
    if not page_token:
        return 0
    if not page_token.isdigit() or len(page_token) > 9:
        raise InvalidInput("page_token", "not a token this list handed out")
    return int(page_token)


def _lagging(lag: queries.ProjectionLag) -> Unavailable:
    """UNAVAILABLE: the read models did not reach the asked-for point in time; the client may retry."""
    return Unavailable(
        str(lag),
        reason="PROJECTION_LAG",
        events_behind=str(lag.lag.events_behind),
        seconds_behind=f"{lag.lag.seconds_behind:.3f}",
    )


VARIANT_OF_NAME = {variant.value: value for value, variant in VARIANT_OF.items()}
