"""Bot players as real gRPC clients: a demo of the API and the service's load generator.

Each game is created over the channel (with options: the house rules among them); every seat then acts
with its own seat token on the view the server gives that seat — the bots know no more than a person at
the table. What a seat does is decided by :class:`service.play.policy.Policy` (its eager style); this
module carries it: the seat views made from the replies (:class:`BotTable`, :func:`fold_hands`) and the
commands sent as requests. The transport is the client package's (``uno_audit_client``): the channels, the
retries with the same command id (:class:`RetryPolicy`) and the receipts kept (:class:`Receipt`).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
from google.protobuf import json_format

from service.api.messages import VARIANTS
from service.domain.catalogue import type_name
from service.play.policy import Policy, SeatView, Style
from service.rules import events as ev
from service.rules.cards import Card, Colour
from service.rules.commands import Catch, Choose, Command, Play, Reshuffle, StartRound
from service.rules.events import Awaiting
from service.rules.options import Options, Variant, make_options

# The transport is the client package's; the names its callers import from here are re-exported.
from uno_audit_client.client import OWN_CONNECTION, bearer, new_command_id, open_channel
from uno_audit_client.client import Metadata as Metadata
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc
from uno_audit_client.receipts import Receipt as Receipt
from uno_audit_client.retry import RETRYABLE as RETRYABLE
from uno_audit_client.retry import RetryPolicy as RetryPolicy
from uno_audit_client.retry import retryable as retryable
from uno_audit_client.retry import server_delay as server_delay

#: The most connections ``run_bots`` opens (one per table played at a time, up to this).
MAX_CONNECTIONS = 64

#: The event types that change nobody's hand (the cards a penalty, a catch or a challenge costs follow as
#: events of their own).
HANDS_KEPT: frozenset[str] = frozenset(
    type_name(kind)
    for kind in (
        ev.GameCreated,
        ev.DealerDrawn,
        ev.CardFlipped,
        ev.FlipReturned,
        ev.PileReshuffled,
        ev.Passed,
        ev.ColourChosen,
        ev.JumpedIn,
        ev.StackAccepted,
        ev.UnoCalled,
        ev.UnoCaught,
        ev.Wd4Accepted,
        ev.Wd4Challenged,
        ev.Prompted,
        ev.RoundEnded,
        ev.GameEnded,
    )
)
CARD_PLAYED = type_name(ev.CardPlayed)
CARD_DRAWN = type_name(ev.CardDrawn)
#: The event types that put cards into the hand of their ``player``, listed in ``cards``.
CARDS_GIVEN = frozenset({type_name(ev.CardsTaken), type_name(ev.LauncherPressed)})
HANDS_TRADED = type_name(ev.HandsTraded)
HANDS_ROTATED = type_name(ev.HandsRotated)
DIRECTION_REVERSED = type_name(ev.DirectionReversed)


def _seat(payload: Mapping[str, Any], name: str) -> int | None:
    value = payload.get(name)
    return int(value) if isinstance(value, float | int) and not isinstance(value, bool) else None


def _take_out(hand: list[str], cards: list[Any]) -> bool:
    """Take one copy of each of ``cards`` out of ``hand`` (False if one is not there)."""
    for card in cards:
        if card not in hand:
            return False
        hand.remove(card)
    return True


def fold_hands(hands: dict[int, list[str]], events: Iterable[pb.Event], direction: int, players: int) -> None:
    """Follow on ``hands`` (card tokens by seat, as the server orders them) the ``events`` of a reply,
    as its seat was shown them, from a table going round in ``direction``: the cards played leave their
    player's hand, the cards drawn or taken join it, trades and rotations move hands between seats. A hand
    that takes cards the events hide is forgotten, and so is every hand for a deal or an event type not
    known here."""
    for event in events:
        kind = event.type
        if kind in HANDS_KEPT:
            continue
        if kind == DIRECTION_REVERSED:
            direction = -direction
            continue
        payload = json_format.MessageToDict(event.payload)
        seat = _seat(payload, "player")
        if seat is None:
            hands.clear()
        elif kind == CARD_PLAYED:
            hand = hands.get(seat)
            played = [payload.get("card"), *(payload.get("discarded") or [])]
            if hand is not None and not _take_out(hand, played):
                del hands[seat]  # not the hand the bots thought: forget it
        elif kind == CARD_DRAWN or kind in CARDS_GIVEN:
            cards = [payload.get("card")] if kind == CARD_DRAWN else payload.get("cards")
            if not isinstance(cards, list) or not all(isinstance(card, str) for card in cards):
                hands.pop(seat, None)  # cards we may not see (or a payload we cannot read)
            elif seat in hands:
                hands[seat].extend(cards)
        elif kind == HANDS_TRADED:
            other = _seat(payload, "other")
            if other is None:
                hands.clear()
                continue
            mine, theirs = hands.pop(seat, None), hands.pop(other, None)
            if theirs is not None:
                hands[seat] = theirs
            if mine is not None:
                hands[other] = mine
        elif kind == HANDS_ROTATED:  # each seat takes the hand of the seat before it
            before = dict(hands)
            hands.clear()
            for taker in range(players):
                passed = before.get((taker - direction) % players)
                if passed is not None:
                    hands[taker] = passed
        else:  # a deal, or an event the bots do not know
            hands.clear()


Reply = TypeVar("Reply")


@dataclass(slots=True)
class LoadSummary:
    """What a bots run did."""

    games: int = 0
    rounds: int = 0
    commands: int = 0
    rejected: int = 0
    #: Attempts repeated after UNAVAILABLE, DEADLINE_EXCEEDED or CANCELLED.
    retries: int = 0
    #: Commands answered as duplicates: the server had applied them, and the first reply was lost.
    duplicates: int = 0
    #: Games created whose reply was lost: their seat tokens are shown once, so nobody can play them.
    abandoned: int = 0
    #: GetGame calls: views the bots read rather than followed from the replies.
    view_reads: int = 0
    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    #: The games played to their end, in the order they ended (not in the JSON: one id per game).
    game_ids: list[str] = field(default_factory=list)

    def percentile(self, p: float) -> float:
        if not self.latencies_ms:
            return 0.0
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]

    def to_json(self) -> dict[str, float | int]:
        return {
            "games": self.games,
            "rounds": self.rounds,
            "commands": self.commands,
            "rejected": self.rejected,
            "retries": self.retries,
            "duplicates": self.duplicates,
            "abandoned": self.abandoned,
            "view_reads": self.view_reads,
            "seconds": round(self.seconds, 3),
            "commands_per_second": round(self.commands / self.seconds, 1) if self.seconds else 0.0,
            "p50_ms": round(self.percentile(50), 3),
            "p99_ms": round(self.percentile(99), 3),
        }


class BotTable:
    """One game played by bots over a channel, every seat deciding by one eager :class:`Policy`.

    How the bots know a seat's hand without GetGame: a command's reply carries the view of the seat that
    sent it (its hand, and what everyone sees) and the command's events as that seat may see them. The
    table keeps the latest view any seat was given — the top card, the turn, the counts, as everyone sees
    them — and the hands it knows, by seat: each seat's own view shows its hand, and the events of every
    reply since say how it changed (:func:`fold_hands`): a card played leaves its player's hand, and the
    face-up cards discarded with it; a trade swaps two hands, a rotation passes every hand on; cards drawn
    or taken join a hand when the reply shows them (the sender's own), and otherwise, being hidden, the hand
    is forgotten, as every hand is for a deal or an event type the bots do not know. A seat about to act —
    its turn, or a look for a jump-in — decides on the latest view with its own hand put in; it reads its
    view with GetGame (:meth:`view_of`, the bots' only read, counted in ``view_reads``) only when its hand
    is not known, its count disagrees with the table's, or a drawn card waits for it: in practice once a
    round for every seat but seat 0 (which deals it), and after another seat's command made it take hidden
    cards (a Draw Two, a catch). Every view a seat is given checks what was folded: a hand that differs
    from it, or a reply whose events do not follow on from the last version seen (a duplicate, another
    client at the table), forgets every hand but that seat's. One table's bots act one at a time, so what
    a seat saw still holds when it acts (a look for a jump-in included).

    Every call goes through one :class:`RetryPolicy`: a server that restarts or loses its database answers
    UNAVAILABLE for a while, and the bots wait it out, resending the very same request — the same command
    id — so a command the server applied before its reply was lost is answered as a duplicate, never
    applied twice.
    """

    def __init__(
        self,
        stub: pb_grpc.GameServiceStub,
        rng: random.Random,
        summary: LoadSummary,
        policy: RetryPolicy,
        progress: Callable[[LoadSummary], None] | None = None,
        keep: Callable[[Receipt], None] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self.stub = stub
        self.rng = rng
        self.summary = summary
        self.policy = policy
        self.progress = progress
        self.keep = keep
        #: What every seat of this table does (sharing the table's random generator).
        self.bot = Policy(rng, style=Style.EAGER)
        self.game_id = ""
        self.tokens: dict[int, str] = {}
        #: The options the game is created with (CreateGameRequest.options: the house rules among them),
        #: and as the rules read them once the game's rule set is known (what the bots decide by).
        self.requested: dict[str, Any] = dict(options or {})
        self.options: Options = make_options(Variant.CLASSIC)
        self.version = 0
        self.retries = 0  # this table's: its calls run one at a time, so a call sees its own retries here
        #: The latest view any seat was given: the table as everyone sees it (its hand is its seat's).
        self.latest = pb.GameView()
        #: The hands the bots know, by seat: each seat's own view shows its hand, and the events of every
        #: reply since say how it changed, unless they hide the cards it took.
        self.hands: dict[int, list[str]] = {}

    async def call(
        self, rpc: Callable[..., Awaitable[Reply]], request: object, metadata: Metadata = ()
    ) -> Reply:
        """``rpc(request)`` under the retry policy: every attempt sends the same request object."""

        async def attempt() -> Reply:
            return await rpc(request, metadata=metadata, timeout=self.policy.call_timeout)

        reply: Reply = await self.policy.run(attempt, self._retried)
        return reply

    def _retried(self, _attempt: int, _error: BaseException) -> None:
        self.retries += 1
        self.summary.retries += 1
        if self.progress is not None:
            self.progress(self.summary)

    async def create(
        self, variant: Variant, players: int, target_score: int | None, tournament_id: str = ""
    ) -> pb.GameView:
        """Create the game. A retried creation whose first reply was lost fails with ALREADY_EXISTS (the
        command id is this request's alone, so only its own earlier attempt can have used it): that game's
        seat tokens are gone, so it is counted as abandoned and another is created under a new id. Without
        a retry, ALREADY_EXISTS cannot be our own doing and ends the run."""
        while True:
            retries = self.retries
            request = pb.CreateGameRequest(
                command_id=new_command_id(),
                variant=VARIANTS[variant],
                players=[f"bot{i + 1}" for i in range(players)],
                tournament_id=tournament_id,
            )
            if self.requested:
                request.options.update(self.requested)
            if target_score is not None:
                request.target_score = target_score
            try:
                reply: pb.CreateGameReply = await self.call(self.stub.CreateGame, request)
                break
            except grpc.aio.AioRpcError as error:
                if error.code() is not grpc.StatusCode.ALREADY_EXISTS or self.retries == retries:
                    raise
                self.summary.abandoned += 1
        self.game_id = reply.game_id
        self.tokens = {seat.seat: seat.token for seat in reply.seats}
        if self.keep is not None:
            self.keep(Receipt(reply.game_id, None, reply.version, reply.receipt))
        self.options = make_options(variant, self.requested)  # the server accepted them: so do the rules
        self.version = reply.version
        return reply.view

    async def send(self, method: str, seat: int, request: object) -> pb.CommandReply | None:
        """Send a command; None if the rules refused it. Its latency includes any retries."""
        started = time.perf_counter()
        try:
            reply: pb.CommandReply = await self.call(
                getattr(self.stub, method), request, bearer(self.tokens[seat])
            )
        except grpc.aio.AioRpcError as error:
            if error.code() is not grpc.StatusCode.FAILED_PRECONDITION:
                raise
            self.summary.rejected += 1
            return None
        self.summary.latencies_ms.append((time.perf_counter() - started) * 1000)
        self.summary.commands += 1
        if reply.duplicate:
            self.summary.duplicates += 1
        self.version = reply.version
        self.follow(reply.view, reply.events)
        if self.keep is not None:
            self.keep(Receipt(self.game_id, seat, reply.version, reply.receipt))
        return reply

    def header(self) -> pb.CommandHeader:
        return pb.CommandHeader(game_id=self.game_id, command_id=new_command_id())

    async def view_of(self, seat: int) -> pb.GameView:
        """``seat``'s view read with GetGame (the bots' only read)."""
        request = pb.GetGameRequest(game_id=self.game_id)
        view: pb.GameView = await self.call(self.stub.GetGame, request, bearer(self.tokens[seat]))
        self.summary.view_reads += 1
        self.follow(view, None)
        return view

    def follow(self, view: pb.GameView, events: Sequence[pb.Event] | None) -> None:
        """Take in a view a seat was given: a command's reply, with its ``events``, or a GetGame view
        (``None``: what led to it is unknown). The hands known follow the events (:func:`fold_hands`);
        every hand is forgotten when the view does not follow on from the latest one by exactly these
        events, or when a hand the events gave differs from what the seat's view shows."""
        latest = self.latest
        if view.version < latest.version:  # an older view (the table's calls run one at a time: never)
            return
        if events is None:
            if view.version != latest.version:
                self.hands.clear()
        elif [e.version for e in events] != list(range(latest.version + 1, view.version + 1)):
            self.hands.clear()
        else:
            fold_hands(self.hands, events, latest.direction, len(view.players))
        self.latest = view
        if view.viewer_seat >= 0 and len(view.hands) == 1 and view.hands[0].seat == view.viewer_seat:
            seat, mine = view.viewer_seat, list(view.hands[0].cards)
            if self.hands.get(seat, mine) != mine:
                self.hands.clear()
            self.hands[seat] = mine

    async def view_for(self, seat: int) -> pb.GameView:
        """The view ``seat`` decides on: the latest view when it is that seat's; else the latest view with
        the seat's hand as the bots know it, when they do (its count agrees with the table's) and no drawn
        card waits for it; else its view read with GetGame."""
        latest = self.latest
        if latest.viewer_seat == seat:
            return latest
        hand = self.hands.get(seat)
        if (
            hand is None
            or seat >= len(latest.hand_sizes)
            or len(hand) != latest.hand_sizes[seat]
            or (latest.awaiting == "drawn" and latest.turn == seat)
        ):
            return await self.view_of(seat)
        view = pb.GameView()
        view.CopyFrom(latest)
        view.viewer_seat = seat
        del view.hands[:]
        view.hands.add(seat=seat, cards=hand)
        view.drawn = ""
        return view

    async def play(
        self, variant: Variant, players: int, target_score: int | None = None, tournament_id: str = ""
    ) -> None:
        view = await self.create(variant, players, target_score, tournament_id)
        self.options = make_options(variant, self.requested)  # a subclass's create may not set them
        self.latest, self.hands = view, {}
        while self.latest.awaiting != "game-over":
            view = self.latest
            if view.awaiting == "round-start":
                reply = await self.send("StartRound", 0, pb.StartRoundRequest(header=self.header()))
                self.summary.rounds += 1
                if reply is None:
                    await self.view_of(0)
                continue
            catches = self.bot.catches(view.exposed_seats, players)
            for catch in catches:
                await self.send_command(catch)
            if not catches and view.jumpable and await self.jump_in(view, variant, players) is not None:
                continue
            seat = self.latest.turn
            if await self.act(await self.view_for(seat), seat, variant, players) is None:
                await self.view_of(seat)  # refused: what the seat sees now

    async def jump_in(self, view: pb.GameView, variant: Variant, players: int) -> pb.GameView | None:
        """The seat the policy sends to look at its own hand for the top card's twin jumps in if it holds
        it: the view after it, or None when it does not."""
        seat = self.bot.looker(players, view.turn, view.top_by)
        if seat is None:
            return None
        play = self.bot.jump_in(seat_view(await self.view_for(seat), seat, variant, self.options))
        reply = await self.send_command(play) if play is not None else None
        return reply.view if reply is not None else None

    async def act(self, view: pb.GameView, seat: int, variant: Variant, players: int) -> pb.GameView | None:
        """Send the command this seat's view calls for; the view after it (None if it was refused)."""
        reply = await self.send_command(self.bot.act(seat_view(view, seat, variant, self.options)))
        return reply.view if reply is not None else None

    async def play_card(
        self,
        card: Card,
        seat: int,
        hand: list[Card],
        view: pb.GameView,
        variant: Variant,
        *,
        jump_in: bool = False,
    ) -> pb.CommandReply | None:
        """Play ``card`` from ``hand`` (out of turn, ``jump_in``), naming a colour and a target and calling
        UNO as the policy does."""
        mine = seat_view(view, seat, variant, self.options, hand)
        return await self.send_command(self.bot.play(mine, card, jump_in=jump_in))

    async def send_command(self, command: Command) -> pb.CommandReply | None:
        """Send a seat's ``command`` as its request; None if the rules refused it."""
        assert not isinstance(command, StartRound | Reshuffle)  # a bot's move is a seat's
        return await self.send(type(command).__name__, command.player, request_for(command, self.header()))


def seat_view(
    view: pb.GameView, seat: int, variant: Variant, options: Options, hand: Sequence[Card] | None = None
) -> SeatView:
    """The policy's view of ``seat`` from a view the server gives it (``hand``: the seat's hand, if not
    the view's)."""
    try:
        awaiting = Awaiting(view.awaiting)
    except ValueError:
        raise RuntimeError(f"the game waits for {view.awaiting!r}, which bots do not know") from None
    if hand is None:
        hand = [Card.parse(token) for token in view.hands[0].cards] if view.hands else []
    return SeatView(
        seat=seat,
        awaiting=awaiting,
        hand=tuple(hand),
        top=Card.parse(view.top),
        colour=Colour(view.colour) if view.colour else None,
        hand_sizes=tuple(view.hand_sizes),
        direction=view.direction,
        variant=variant,
        options=options,
        drawn=Card.parse(view.drawn) if view.drawn else None,
        top_by=view.top_by if view.top_by >= 0 else None,
        jumpable=view.jumpable,
        pending=view.pending_draw,
        exposed=tuple(view.exposed_seats),
    )


def request_for(command: Command, header: pb.CommandHeader) -> Any:
    """The gRPC request that sends ``command`` (its player is the seat whose token goes with it)."""
    request = getattr(pb, f"{type(command).__name__}Request")(header=header)
    if isinstance(command, Play):
        request.card, request.jump_in, request.uno = command.card.token, command.jump_in, command.uno
    if isinstance(command, Play | Choose):
        if command.colour is not None:
            request.colour = command.colour.value
        if command.target is not None:
            request.target = command.target
    elif isinstance(command, Catch):
        request.target = command.target
    return request


async def run_bots(
    address: str,
    *,
    games: int,
    variant: Variant,
    players: int,
    concurrency: int,
    seed: int = 0,
    target_score: int | None = None,
    tournament_id: str = "",
    options: Mapping[str, Any] | None = None,
    policy: RetryPolicy = RetryPolicy(),
    progress: Callable[[LoadSummary], None] | None = None,
    credentials: grpc.ChannelCredentials | None = None,
    keep: Callable[[Receipt], None] | None = None,
    summary: LoadSummary | None = None,
) -> LoadSummary:
    """Play ``games`` complete games against the server at ``address``, ``concurrency`` at a time
    (matches to ``target_score`` points, or the rule set's default; ``options`` as CreateGame takes them,
    the house rules among them), every call retried as ``policy`` says. ``progress`` is told the summary
    so far after each finished game and each retry.
    ``credentials`` make the channel TLS (:func:`service.api.tls.channel_credentials`); none, plaintext.
    ``keep`` is given every reply's receipt, as the players would keep them. ``summary``, if given, is
    the one filled in: the caller still has what was done when the run is cancelled (Ctrl-C) midway."""
    summary = LoadSummary() if summary is None else summary
    rng = random.Random(seed)
    seeds = [rng.getrandbits(64) for _ in range(games)]
    # A connection per table at a time (up to MAX_CONNECTIONS): a server of several workers shares its
    # port by connection, and channels to one address in one process share one connection unless each has
    # its own subchannel pool.
    channels = [
        open_channel(address, credentials, OWN_CONNECTION)
        for _ in range(max(1, min(concurrency, MAX_CONNECTIONS)))
    ]
    free: asyncio.Queue[pb_grpc.GameServiceStub] = asyncio.Queue()
    for channel in channels:
        free.put_nowait(pb_grpc.GameServiceStub(channel))  # type: ignore[no-untyped-call]
    gate = asyncio.Semaphore(concurrency)

    async def one(game_seed: int) -> None:
        async with gate:
            stub = await free.get()
            try:
                table = BotTable(stub, random.Random(game_seed), summary, policy, progress, keep, options)
                await table.play(variant, players, target_score, tournament_id)
            finally:
                free.put_nowait(stub)
            summary.game_ids.append(table.game_id)
            summary.games += 1
            if progress is not None:
                progress(summary)

    started = time.perf_counter()
    try:
        await asyncio.gather(*(one(s) for s in seeds))
    finally:
        summary.seconds = time.perf_counter() - started
        for channel in channels:
            await channel.close()
    return summary
