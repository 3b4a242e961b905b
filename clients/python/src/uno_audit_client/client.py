"""A thin asyncio client of the uno-audit GameService: connect, create a game, act as a seat, watch.

Every call is retried as :class:`~uno_audit_client.retry.RetryPolicy` says, resending the same request —
so a command keeps its command id and is answered from the server's ledger (``duplicate``) if it was
applied before its reply was lost. Every reply's receipt is kept in a :class:`ReceiptBook` and, unless
``verify_receipts`` is off, checked at once against the service's keys (pinned with ``keys``, else read
once with ``GetCheckpointKeys``). The replies are the generated protobuf messages (``uno_audit_client.gen``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from uno_audit_client.gen.uno.audit.v1 import checkpoint_pb2 as cp
from uno_audit_client.gen.uno.audit.v1 import checkpoint_pb2_grpc as cp_grpc
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc
from uno_audit_client.receipts import Receipt, ReceiptBook, Verifier
from uno_audit_client.retry import RetryPolicy

Metadata = tuple[tuple[str, str], ...]

#: Options that give a channel a connection of its own: channels to one address in one process otherwise
#: share one, and a server of several workers shares its port by connection.
OWN_CONNECTION: tuple[tuple[str, Any], ...] = (("grpc.use_local_subchannel_pool", 1),)


def bearer(token: str | None) -> Metadata:
    """The call metadata that presents ``token`` (a seat token, a client key or the admin token)."""
    return () if not token else (("authorization", f"Bearer {token}"),)


def new_command_id() -> str:
    """A fresh command id: a random UUID, unique within any game."""
    return str(uuid.uuid4())


@dataclass(frozen=True, slots=True)
class TLS:
    """TLS for the channel: the CA certificates to trust (PEM; ``None``: the system's), and the client's
    own certificate chain and key (PEM) where the server asks for mutual TLS."""

    root_certificates: bytes | None = None
    certificate_chain: bytes | None = None
    private_key: bytes | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        if (self.certificate_chain is None) != (self.private_key is None):
            raise ValueError("a client certificate needs its private key, and the key its certificate")
        return grpc.ssl_channel_credentials(
            root_certificates=self.root_certificates,
            private_key=self.private_key,
            certificate_chain=self.certificate_chain,
        )


def open_channel(
    address: str,
    tls: TLS | grpc.ChannelCredentials | None = None,
    options: Sequence[tuple[str, Any]] = (),
) -> grpc.aio.Channel:
    """A channel to ``address`` (``host:port``): plaintext without ``tls``, else TLS."""
    if tls is None:
        return grpc.aio.insecure_channel(address, options=list(options))
    credentials = tls.credentials() if isinstance(tls, TLS) else tls
    return grpc.aio.secure_channel(address, credentials, options=list(options))


def variant_of(variant: str | int) -> int:
    """The ``Variant`` enum value of a rule set's name (``classic``, ``sonic``, ``attack``,
    ``mario-kart``, any case) or of its number."""
    if isinstance(variant, int):
        return variant
    try:
        return int(pb.Variant.Value(variant.upper().replace("-", "_")))
    except ValueError:
        raise ValueError(f"unknown variant {variant!r}") from None


class CreationLost(Exception):
    """A CreateGame retried after its reply was lost: the game was made (``game_id``), but its seat
    tokens were shown once, in the lost reply, and nobody can play it. Create another."""

    def __init__(self, game_id: str) -> None:
        super().__init__(f"game {game_id} was created but its reply was lost: its seat tokens are gone")
        self.game_id = game_id


class Client:
    """A connection to a uno-audit server, for one caller.

    ``token`` is the caller's credential when not acting as a seat: a client key (which CreateGame needs
    on a server listening beyond loopback), the admin token, or none (a spectator). ``retry`` governs
    every call; ``retries`` counts the attempts repeated. ``receipts`` keeps every reply's receipt,
    checked against ``keys`` (or the keys the service publishes) unless ``verify_receipts`` is false.
    """

    def __init__(
        self,
        channel: grpc.aio.Channel,
        *,
        token: str | None = None,
        retry: RetryPolicy = RetryPolicy(),
        keys: Sequence[Verifier] | None = None,
        verify_receipts: bool = True,
        on_retry: Callable[[int, grpc.aio.AioRpcError], None] | None = None,
    ) -> None:
        self.channel = channel
        self.token = token
        self.retry = retry
        self.verify_receipts = verify_receipts
        self.on_retry = on_retry
        self.retries = 0
        self.receipts = ReceiptBook(keys or ())
        self._pinned = keys is not None
        self.games: Any = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
        self.checkpoints: Any = cp_grpc.CheckpointServiceStub(channel)  # type: ignore[no-untyped-call]

    @classmethod
    def connect(
        cls,
        address: str,
        *,
        token: str | None = None,
        tls: TLS | grpc.ChannelCredentials | None = None,
        retry: RetryPolicy = RetryPolicy(),
        keys: Sequence[Verifier] | None = None,
        verify_receipts: bool = True,
        options: Sequence[tuple[str, Any]] = (),
    ) -> Client:
        """A client of the server at ``address``: plaintext, or TLS with ``tls`` (:class:`TLS`, or gRPC
        channel credentials); ``token`` presented on calls not made as a seat."""
        channel = open_channel(address, tls, options)
        return cls(channel, token=token, retry=retry, keys=keys, verify_receipts=verify_receipts)

    async def close(self) -> None:
        await self.channel.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()

    async def call(self, rpc: Callable[..., Awaitable[Any]], request: Any, metadata: Metadata = ()) -> Any:
        """``rpc(request)`` under the retry policy: every attempt sends the same request object."""

        async def attempt() -> Any:
            return await rpc(request, metadata=metadata, timeout=self.retry.call_timeout)

        return await self.retry.run(attempt, self._retried)

    def _retried(self, attempt: int, error: grpc.aio.AioRpcError) -> None:
        self.retries += 1
        if self.on_retry is not None:
            self.on_retry(attempt, error)

    # --- receipts ----------------------------------------------------------------------------------------

    async def trusted_keys(self) -> list[Verifier]:
        """The keys receipts are checked with: those pinned, else the service's published keys, read once
        (trust on first use: pin the organiser's keys where it matters)."""
        if not self.receipts.keys and not self._pinned:
            reply = await self.call(self.checkpoints.GetCheckpointKeys, cp.GetCheckpointKeysRequest())
            self.receipts.keys = [Verifier.parse(key.verifier_key) for key in reply.keys]
        return self.receipts.keys

    async def keep(self, game_id: str, seat: int | None, version: int, note: str) -> Receipt:
        """Keep a reply's receipt, checked first when ``verify_receipts`` (:class:`ReceiptError` if it
        does not hold: the reply is then not to be trusted)."""
        receipt = Receipt(game_id, seat, version, note)
        if self.verify_receipts:
            await self.trusted_keys()
        self.receipts.keep(receipt, check=self.verify_receipts)
        return receipt

    async def check_receipts(self, game_id: str, notes: Sequence[str] | None = None) -> Any:
        """The server's verdict on ``notes`` (default: every receipt kept for ``game_id``) against the
        stored game (``CheckpointService.CheckReceipts``; adjudicator only): a ``CheckReceiptsReply``."""
        if notes is None:
            notes = [receipt.receipt for receipt in self.receipts.of(game_id)]
        request = cp.CheckReceiptsRequest(game_id=game_id, receipts=list(notes))
        return await self.call(self.checkpoints.CheckReceipts, request, bearer(self.token))

    # --- games -------------------------------------------------------------------------------------------

    async def create_game(
        self,
        players: Sequence[str],
        *,
        variant: str | int = "classic",
        options: Mapping[str, Any] | None = None,
        target_score: int | None = None,
        tournament_id: str = "",
        dealer: int | None = None,
        fixed_deck: Sequence[str] = (),
        command_id: str | None = None,
    ) -> Game:
        """Create a game for ``players`` (seat names, clockwise); the :class:`Game` holds its seat tokens.
        :class:`CreationLost` if a retry finds the game made but its reply lost."""
        request = pb.CreateGameRequest(
            command_id=command_id or new_command_id(),
            variant=variant_of(variant),  # type: ignore[arg-type]  # the enum's values are ints
            players=list(players),
            tournament_id=tournament_id,
            fixed_deck=list(fixed_deck),
        )
        if options:
            request.options.update(dict(options))
        if target_score is not None:
            request.target_score = target_score
        if dealer is not None:
            request.dealer = dealer
        retries = self.retries
        try:
            reply: pb.CreateGameReply = await self.call(self.games.CreateGame, request, bearer(self.token))
        except grpc.aio.AioRpcError as error:
            # Only this request's own earlier attempt can have used its command id (unless the caller chose
            # one): the game exists, its tokens went with the lost reply.
            if error.code() is grpc.StatusCode.ALREADY_EXISTS and self.retries > retries:
                raise CreationLost(_error_metadata(error).get("game_id", "")) from error
            raise
        await self.keep(reply.game_id, None, reply.version, reply.receipt)
        return Game(self, reply)

    def game(self, game_id: str, tokens: Mapping[int, str] | None = None) -> Game:
        """A game created elsewhere, played with the seat ``tokens`` given (by seat)."""
        created = pb.CreateGameReply(game_id=game_id)
        for seat, token in (tokens or {}).items():
            created.seats.add(seat=seat, token=token)
        return Game(self, created)

    async def get_game(self, game_id: str, *, token: str | None = None) -> pb.GameView:
        """The game as the caller (``token``, else the client's) may see it."""
        view: pb.GameView = await self.call(
            self.games.GetGame, pb.GetGameRequest(game_id=game_id), bearer(token or self.token)
        )
        return view

    async def list_games(
        self, *, tournament_id: str = "", page_size: int = 0, page_token: str = ""
    ) -> pb.ListGamesReply:
        """A page of the games (of a tournament): ``next_page_token`` names the next page."""
        request = pb.ListGamesRequest(tournament_id=tournament_id, page_size=page_size, page_token=page_token)
        reply: pb.ListGamesReply = await self.call(self.games.ListGames, request, bearer(self.token))
        return reply

    async def watch(
        self, game_id: str, *, after_version: int = 0, follow: bool = False, token: str | None = None
    ) -> AsyncIterator[pb.Event]:
        """The game's events (and audit entries) after ``after_version``, as the caller may see them: those
        stored, then each as it is appended, until the game's end (with ``follow``, on for the audit
        entries to come, until the caller stops). A stream cut off by an unavailable server is opened
        again after the last version received, under the retry policy, so nothing comes twice."""
        seen = after_version
        while True:
            started, attempt = time.monotonic(), 1
            while True:
                request = pb.WatchGameRequest(game_id=game_id, after_version=seen, follow=follow)
                call = self.games.WatchGame(request, metadata=bearer(token or self.token))
                try:
                    async for event in call:
                        seen = max(seen, int(event.version))
                        started, attempt = (
                            time.monotonic(),
                            1,
                        )  # the server answers: a later cut starts afresh
                        yield event
                    return
                except grpc.aio.AioRpcError as error:
                    wait = self.retry.next_wait(attempt, error, started)
                    if wait is None:
                        raise
                    self._retried(attempt, error)
                finally:
                    call.cancel()
                await asyncio.sleep(wait)
                attempt += 1


class Game:
    """A game: its id, its seat tokens (when this client created it or was given them), and its seats."""

    def __init__(self, client: Client, created: pb.CreateGameReply) -> None:
        self.client = client
        self.created = created
        self.game_id: str = created.game_id
        self.tokens: dict[int, str] = {seat.seat: seat.token for seat in created.seats}
        #: The latest version a reply of this game named.
        self.version: int = created.version

    def seat(self, seat: int) -> Seat:
        """The seat ``seat``: it acts with its token, or, without one, with the client's (the admin
        token acts for any seat)."""
        return Seat(self, seat, self.tokens.get(seat))

    async def view(self, seat: int | None = None) -> pb.GameView:
        """The game as ``seat`` sees it (``None``: as the client's token may)."""
        token = self.tokens.get(seat) if seat is not None else None
        return await self.client.get_game(self.game_id, token=token)

    def watch(
        self, *, after_version: int = 0, follow: bool = False, seat: int | None = None
    ) -> AsyncIterator[pb.Event]:
        """:meth:`Client.watch` of this game, as ``seat`` (or the client's token) may see it."""
        token = self.tokens.get(seat) if seat is not None else None
        return self.client.watch(self.game_id, after_version=after_version, follow=follow, token=token)


class Seat:
    """One seat of a game, acting. Every command takes an optional ``command_id`` (default: a fresh one;
    the same id again is the same command, answered from the ledger) and ``expected_version`` (refused
    with ABORTED if the game has moved on). A command the rules refuse raises ``grpc.aio.AioRpcError``
    FAILED_PRECONDITION, the rule's id as its ``ErrorInfo.reason`` (:func:`error_reason`)."""

    def __init__(self, game: Game, seat: int, token: str | None) -> None:
        self.game = game
        self.seat = seat
        self.token = token

    def header(self, command_id: str | None = None, expected_version: int | None = None) -> pb.CommandHeader:
        """The header of a command of this seat's."""
        made = pb.CommandHeader(game_id=self.game.game_id, command_id=command_id or new_command_id())
        if expected_version is not None:
            made.expected_version = expected_version
        if self.token is None:  # the client's token acts for the seat: only the admin's may
            made.as_seat = self.seat
        return made

    async def send(self, method: str, request: Any) -> pb.CommandReply:
        """Send ``request`` with ``GameService.<method>`` as this seat; its receipt kept (and checked)."""
        client = self.game.client
        rpc = getattr(client.games, method)
        reply: pb.CommandReply = await client.call(rpc, request, bearer(self.token or client.token))
        self.game.version = max(self.game.version, int(reply.version))
        await client.keep(self.game.game_id, self.seat, reply.version, reply.receipt)
        return reply

    async def view(self) -> pb.GameView:
        """The game as this seat sees it (its own hand)."""
        return await self.game.client.get_game(self.game.game_id, token=self.token)

    async def start_round(
        self,
        *,
        fixed_deck: Sequence[str] = (),
        command_id: str | None = None,
        expected_version: int | None = None,
    ) -> pb.CommandReply:
        """Deal the next round (``fixed_deck``: admin only)."""
        header = self.header(command_id, expected_version)
        return await self.send("StartRound", pb.StartRoundRequest(header=header, fixed_deck=list(fixed_deck)))

    async def play(
        self,
        card: str,
        *,
        colour: str = "",
        uno: bool = False,
        target: int | None = None,
        jump_in: bool = False,
        command_id: str | None = None,
        expected_version: int | None = None,
    ) -> pb.CommandReply:
        """Play ``card`` (a token such as ``R7`` or ``W+4``), naming ``colour`` for a wild, calling UNO
        with it, naming a ``target`` seat where the card asks for one, or out of turn (``jump_in``)."""
        request = pb.PlayRequest(
            header=self.header(command_id, expected_version),
            card=card,
            colour=colour,
            uno=uno,
            jump_in=jump_in,
        )
        if target is not None:
            request.target = target
        return await self.send("Play", request)

    async def draw(
        self, *, command_id: str | None = None, expected_version: int | None = None
    ) -> pb.CommandReply:
        return await self.send("Draw", pb.DrawRequest(header=self.header(command_id, expected_version)))

    async def pass_turn(
        self, *, command_id: str | None = None, expected_version: int | None = None
    ) -> pb.CommandReply:
        return await self.send("Pass", pb.PassRequest(header=self.header(command_id, expected_version)))

    async def press(
        self, *, command_id: str | None = None, expected_version: int | None = None
    ) -> pb.CommandReply:
        """Press the card launcher (UNO Attack)."""
        return await self.send("Press", pb.PressRequest(header=self.header(command_id, expected_version)))

    async def call_uno(
        self, *, command_id: str | None = None, expected_version: int | None = None
    ) -> pb.CommandReply:
        return await self.send("CallUno", pb.CallUnoRequest(header=self.header(command_id, expected_version)))

    async def catch(
        self, target: int, *, command_id: str | None = None, expected_version: int | None = None
    ) -> pb.CommandReply:
        """Catch ``target``, down to one card without having called UNO."""
        request = pb.CatchRequest(header=self.header(command_id, expected_version), target=target)
        return await self.send("Catch", request)

    async def challenge(
        self, *, command_id: str | None = None, expected_version: int | None = None
    ) -> pb.CommandReply:
        """Challenge the Wild Draw Four played on this seat."""
        request = pb.ChallengeRequest(header=self.header(command_id, expected_version))
        return await self.send("Challenge", request)

    async def accept(
        self, *, command_id: str | None = None, expected_version: int | None = None
    ) -> pb.CommandReply:
        """Take the Wild Draw Four's cards (or a stacked draw penalty's) without a challenge."""
        return await self.send("Accept", pb.AcceptRequest(header=self.header(command_id, expected_version)))

    async def choose(
        self,
        *,
        colour: str = "",
        target: int | None = None,
        command_id: str | None = None,
        expected_version: int | None = None,
    ) -> pb.CommandReply:
        """Answer the game's question: a colour (``R``, ``Y``, ``G``, ``B``) or a target seat."""
        request = pb.ChooseRequest(header=self.header(command_id, expected_version), colour=colour)
        if target is not None:
            request.target = target
        return await self.send("Choose", request)


def _error_metadata(error: grpc.aio.AioRpcError) -> dict[str, str]:
    """The ``google.rpc.ErrorInfo`` metadata of a failed call's status (empty without one)."""
    info = error_info(error)
    return dict(info.metadata) if info is not None else {}


def error_info(error: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo | None:
    """The ``google.rpc.ErrorInfo`` of a failed call (its ``reason``: the broken rule's id for a
    FAILED_PRECONDITION), or ``None``."""
    try:
        status = rpc_status.from_call(error)
    except ValueError:
        return None
    for detail in status.details if status is not None else ():
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info
    return None


def error_reason(error: grpc.aio.AioRpcError) -> str:
    """The ``ErrorInfo.reason`` of a failed call ("" without one): for a refused command, the rule's id."""
    info = error_info(error)
    return info.reason if info is not None else ""
