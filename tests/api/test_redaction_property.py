"""No reply shows a caller a card the rules hide from it: a property over random live games.

Random games of every rule set are played over a real gRPC channel, each seat sending its commands with
its own token (the random bots of :mod:`service.play.bots` choose among the legal moves; they forget UNO
often, so others catch them), by the book or with every house rule the rule set takes (the bots then
stack, jump in out of turn, and swap and rotate hands with seven-o: a hand that moves is its new holder's
own from then on, and nobody else's). Most games open from a deck the admin arranges, with a card that
shows or moves a hand: a bluffed Wild Draw Four that its victim challenges (the offender's hand goes to
the challenger alone), a run of skips down to one uncalled card that is caught before its player goes out
(the next round is dealt from the secret seed), UNO Attack's Trade Hands or Attack-Attack; others are
dealt from the seed from the start, with the rule set's own dealer draw. While the round is still in
play, seats file disputes (on the challenges and catches the log holds, and on a catch it does not hold,
whose ruling rests on the target's hand), the adjudicator rules on all but one of them and reveals the
seed to itself by exporting the game, while a seat and a spectator watch live. Then every identity — each
seat, the admin, no token, a seat of another game, a malformed token — calls every read RPC that answers
it (GetGame, WatchGame from the start, ListGames, GetScores, GetHand of its seat and another,
GetStandings, GetProjectionLag, ListDisputes of the game and of every game), sends its commands and
filings again (a retry's reply) and another seat's (refused), is refused the adjudicator's RPCs
(VerifyGame, AdjudicateCatch, AdjudicateChallenge, ExportGame) and sends commands the rules refuse.

The ground truth is folded from the stored log (the secret seed put back), one round at a time, since a
card seen in one round says nothing of where its copy lies in the next. In a round, a card is *public*
once it lies face up (anywhere in the discard pile, flipped, returned, drawn for the dealer, scored at the
round's end) and a seat's *own* once it held it (dealt, drawn, taken, fired, traded to it) or had it
shown by the rules (the challenged hand, to the challenger). When the game ends, its seed is revealed and
every card can be derived. Every card token in any string or struct of a reply to a caller who is not the
adjudicator — payloads, views, rulings, error messages and their details — must be public or the
caller's own in the round the text is about, as the game stood when the reply was given; a card the
caller named in its own request may come back in the refusal. The secret seed appears in no reply and the
service's log lines name no card at all.

The check can fail: the adjudicator's own replies, checked as if a seat had received them, show cards the
seat may not see; and with the redaction of a dealt deck, or of a ruling's evidence, switched off, the
same check finds the leak in what WatchGame streams and ListDisputes lists.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
import re
from collections import Counter
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
import pytest
import structlog
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from service.api import messages as views
from service.api.server import RunningServer
from service.domain import visibility
from service.domain.catalogue import split, type_name
from service.domain.entries import DisputeFiled, DisputeRuled
from service.play.bots import Habits, RandomBot
from service.rules import commands as cmd
from service.rules import events as ev
from service.rules.cards import DECKS
from service.rules.events import Awaiting
from service.rules.options import ATTACK_EDITIONS, HOUSE_RULES, UNSUPPORTED, Variant
from service.rules.state import HAND_SIZE, State, evolve, new_state
from service.store import EventStore
from tests.tiers import examples
from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as apb
from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import ADMIN, Metadata, auth, deal_from, new_id

pytestmark = pytest.mark.timeout(120)

AuditStub = audit_pb2_grpc.AuditServiceStub
GameStub = pb_grpc.GameServiceStub
R = TypeVar("R", bound=Message)

TOURNAMENT = "redaction-cup"
#: Every card token of every deck, longest first so that ``W+4`` is read as one token, not ``W``.
ALL_TOKENS = sorted({c.token for deck in DECKS.values() for c in deck}, key=len, reverse=True)
#: A card token standing on its own in any text (an error message, a struct value, a list of cards).
CARD = re.compile(r"(?<![A-Za-z0-9+])(?:" + "|".join(re.escape(t) for t in ALL_TOKENS) + r")(?![A-Za-z0-9+])")
DISPUTE_ENTRIES = {type_name(DisputeFiled), type_name(DisputeRuled)}
REFUSED = {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED}
NEVER = 1 << 62


# --- who asks --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Identity:
    """A caller: its metadata, and the seat whose view of the game it may have (``None``: a spectator's)."""

    name: str
    metadata: Metadata | None
    seat: int | None = None
    admin: bool = False
    #: A token of another game (refused wherever a game is named), or an authorization header that is
    #: not ``Bearer <token>`` at all (refused everywhere).
    stranger: bool = False
    malformed: bool = False

    @property
    def of_game(self) -> bool:
        """Whether the game's own RPCs answer it (a seat, the admin, or a spectator without a token)."""
        return not (self.stranger or self.malformed)


# --- what it was shown -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Seen:
    """Texts one reply (or refusal) showed ``who``: about the round at version ``about`` (or round
    ``round``, when given), answered when the game's stream stood at version ``at``."""

    who: Identity
    what: str
    texts: tuple[str, ...]
    about: int
    at: int
    round: int | None = None
    echoed: frozenset[str] = frozenset()


def texts_of(message: Message) -> tuple[str, ...]:
    """Every string of ``message``: field values, struct keys and values, at any depth."""
    found: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                found.append(key)
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(json_format.MessageToDict(message))
    return tuple(found)


def error_texts(error: grpc.aio.AioRpcError) -> tuple[str, ...]:
    """The message of a refusal and every string of its rich details (an unknown detail fails the test:
    the check reads all of a refusal, or it does not pass)."""
    found = [error.details() or ""]
    status = rpc_status.from_call(error)
    if status is not None:
        found.append(status.message)
        for detail in status.details:
            read: Message
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                read = error_details_pb2.ErrorInfo()
            elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                read = error_details_pb2.BadRequest()
            else:
                raise AssertionError(f"a refusal carries a detail this check cannot read: {detail.type_url}")
            detail.Unpack(read)
            found.extend(texts_of(read))
    return tuple(found)


def cards_in(texts: Iterable[str]) -> set[str]:
    return {token for text in texts for token in CARD.findall(text)}


# --- the ground truth ------------------------------------------------------------------------------------


@dataclass(slots=True)
class Knowledge:
    """Who may know which cards of one game, round by round, as its stored log says (see the module
    docstring). Versions are the stream's, audit entries included."""

    deck: frozenset[str]
    seed: str
    rounds: dict[int, int] = field(default_factory=dict)  # version -> the round being played then
    public: dict[int, dict[str, int]] = field(default_factory=dict)  # round -> card -> since version
    own: dict[tuple[int, int], dict[str, int]] = field(default_factory=dict)  # (round, seat) -> ...
    ended: int = NEVER  # the version of GameEnded, which reveals the seed

    def hidden(self, seat: int | None, round: int, at: int) -> frozenset[str]:
        """The cards ``seat`` (``None``: a spectator) cannot know of round ``round`` at version ``at``."""
        if self.ended <= at:
            return frozenset()
        public = self.public.get(round, {})
        own = self.own.get((round, seat), {}) if seat is not None else {}
        return frozenset(t for t in self.deck if public.get(t, NEVER) > at and own.get(t, NEVER) > at)

    def leaks(self, seen: Seen) -> set[str]:
        """What ``seen`` shows that its caller may not see: hidden cards, and the seed before the end."""
        round = seen.round if seen.round is not None else self.rounds[seen.about]
        found = (cards_in(seen.texts) & self.hidden(seen.who.seat, round, seen.at)) - seen.echoed
        if self.ended > seen.at and any(self.seed in text for text in seen.texts):
            found.add("the seed")
        return found


def learn(into: dict[str, int], cards: Iterable[str], version: int) -> None:
    """Record that ``cards`` are known from ``version`` on (unless they were already)."""
    for token in cards:
        into.setdefault(token, version)


async def folded(store: EventStore, game_id: str) -> State:
    """The game's state as the dealer knows it: its stored log folded with the secret seed put back."""
    rows = await store.read_stream(game_id)
    seed = await store.seed(game_id)
    events = [event for _, event in split(rows).game]
    first = events[0]
    assert isinstance(first, ev.GameCreated)
    state = new_state(dataclasses.replace(first, seed=seed))
    for event in events[1:]:
        state = evolve(state, event)
    return state


async def knowledge_of(store: EventStore, game_id: str) -> Knowledge:
    """The game's ground truth, folded from its stored log with the secret seed put back."""
    rows = await store.read_stream(game_id)
    seed = await store.seed(game_id)
    assert seed is not None
    game = {row.version: event for row, event in split(rows).game}
    first = game[1]
    assert isinstance(first, ev.GameCreated)
    state: State = new_state(dataclasses.replace(first, seed=seed))
    known = Knowledge(frozenset(c.token for c in state.deck), seed.hex())
    for row in rows:
        v = row.version
        event = game.get(v)
        if event is not None and v > 1:
            state = evolve(state, event)
        r = state.round
        known.rounds[v] = r
        if event is None:
            continue  # an audit entry: rulings and reveals are the adjudicator's
        public = known.public.setdefault(r, {})
        learn(public, (c.token for c in state.discard), v)
        for seat, hand in enumerate(state.hands):
            learn(known.own.setdefault((r, seat), {}), (c.token for c in hand), v)
        if isinstance(event, ev.DealerDrawn):
            learn(public, (c.token for _, c in event.draws), v)
        elif isinstance(event, ev.FlipReturned | ev.CardFlipped):
            learn(public, [event.card.token], v)
        elif isinstance(event, ev.RoundEnded):
            learn(public, (c.token for hand in event.hands for c in hand), v)
        elif isinstance(event, ev.Wd4Challenged):  # the offender's hand, shown to the challenger
            shown = (c.token for c in (*event.hand, *event.matching))
            learn(known.own.setdefault((r, event.player), {}), shown, v)
        elif isinstance(event, ev.GameEnded):
            known.ended = v
    return known


# --- one game's calls ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sent:
    """An accepted command: the seat that sent it, the RPC and the request (to send it again)."""

    method: str
    seat: int
    request: Message


@dataclass(slots=True)
class Calls:
    """The calls of one game and what each showed its caller."""

    stub: GameStub
    audit: AuditStub
    store: EventStore
    game_id: str = ""
    seen: list[Seen] = field(default_factory=list)

    async def version(self) -> int:
        return await self.store.stream_version(self.game_id)

    def reply(self, who: Identity, what: str, reply: pb.CommandReply, at: int) -> None:
        """A command's reply, given at version ``at``: each event about its own round, the view about the
        game as it stands (a duplicate's events are the first reply's, its view is today's)."""
        for event in reply.events:
            self.event(who, what, event, at)
        self.seen.append(Seen(who, f"{what} view", texts_of(reply.view), reply.view.version, at))

    async def served(self, who: Identity, what: str, call: Awaitable[R]) -> R:
        """The reply of a call ``who`` must be answered; kept whole, about the game as it stands."""
        try:
            reply = await call
        except grpc.aio.AioRpcError as error:
            raise AssertionError(
                f"{what} refused {who.name}: {error.code().name} {error.details()}"
            ) from None
        at = await self.version()
        if isinstance(reply, pb.CommandReply):
            self.reply(who, what, reply, at)
        else:
            self.seen.append(Seen(who, what, texts_of(reply), at, at))
        return reply

    async def refused(
        self,
        who: Identity,
        what: str,
        call: Awaitable[Any],
        codes: Iterable[grpc.StatusCode] = REFUSED,
        echoed: Iterable[str] = (),
    ) -> None:
        """A call the service must refuse ``who`` with one of ``codes``; the refusal's texts are kept."""
        try:
            answered = await call
        except grpc.aio.AioRpcError as error:
            wanted = set(codes)
            assert error.code() in wanted, f"{what} for {who.name}: {error.code().name} {error.details()}"
            at = await self.version()
            self.seen.append(Seen(who, what, error_texts(error), at, at, echoed=frozenset(echoed)))
            return
        raise AssertionError(f"{what} answered {who.name}, who may not have it: {answered}")

    def event(self, who: Identity, what: str, event: pb.Event, at: int) -> None:
        """A streamed or replied event, about its own round; a dispute's or ruling's entry is about the
        round of the position it disputes (its evidence is the table as it stood there)."""
        about = event.version
        if event.type in DISPUTE_ENTRIES:
            about = int(event.payload.fields["position"].number_value)
        self.seen.append(Seen(who, f"{what} event {event.version}", texts_of(event), about, at))

    async def watch(self, who: Identity, until: int) -> None:
        """WatchGame from the start up to version ``until``: every event, about its own round."""
        call = self.stub.WatchGame(pb.WatchGameRequest(game_id=self.game_id), metadata=who.metadata)
        if not who.of_game:
            return await self.refused(who, "WatchGame", call.read(), {grpc.StatusCode.UNAUTHENTICATED})
        at = await self.version()
        async for event in call:
            self.event(who, "WatchGame", event, at)
            if event.version >= until:
                call.cancel()
                return None
        raise AssertionError(f"WatchGame ended before version {until} for {who.name}")

    def disputes(self, who: Identity, what: str, disputes: Iterable[apb.Dispute], at: int) -> None:
        """Disputes, each about the round of the position it disputes (its ruling's evidence too)."""
        for dispute in disputes:
            self.seen.append(
                Seen(who, f"{what} {dispute.dispute_id}", texts_of(dispute), dispute.position, at)
            )


class Watcher:
    """A WatchGame stream held open while the game goes on: what it pushes live is checked like the rest."""

    def __init__(self, calls: Calls, who: Identity) -> None:
        self.calls = calls
        self.who = who
        self.last = 0
        self.call = calls.stub.WatchGame(pb.WatchGameRequest(game_id=calls.game_id), metadata=who.metadata)
        self.task = asyncio.create_task(self.read())

    async def read(self) -> None:
        async for event in self.call:
            self.calls.event(self.who, "WatchGame live", event, await self.calls.version())
            self.last = event.version

    async def stop(self, until: int) -> None:
        """Once the stream has pushed version ``until``, close it."""
        async with asyncio.timeout(10):
            while self.last < until and not self.task.done():
                await asyncio.sleep(0.05)
        self.call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        assert self.last >= until, f"WatchGame stopped at version {self.last} for {self.who.name}"


#: Bots that often forget to call UNO, so that the games have catches (and disputes about them).
FORGETFUL = Habits(forget_uno=0.5)


class Table:
    """One game played over the channel by the random bots of :mod:`service.play.bots`, each seat sending
    its commands with its own token. The bots choose among the legal moves of the true state (folded from
    the store, as the dealer knows it): their choices are not under test, what each seat is shown is.
    Every accepted command is kept, to be sent again."""

    def __init__(self, calls: Calls, created: pb.CreateGameReply, state: State, seed: int) -> None:
        self.calls = calls
        self.tokens = {seat.seat: seat.token for seat in created.seats}
        self.state = state
        self.version = created.version
        self.rng = random.Random(seed)
        self.bots = [RandomBot(random.Random(self.rng.getrandbits(64)), FORGETFUL) for _ in created.seats]
        self.sent: list[Sent] = []

    def seat(self, seat: int) -> Identity:
        return Identity(f"seat {seat}", auth(self.tokens[seat]), seat=seat)

    def header(self) -> pb.CommandHeader:
        return pb.CommandHeader(game_id=self.calls.game_id, command_id=new_id())

    async def send(self, method: str, seat: int, request: Message) -> None:
        """``request`` as ``seat``, which must be accepted; the true state caught up with the log."""
        who = self.seat(seat)
        await self.calls.served(who, method, getattr(self.calls.stub, method)(request, metadata=who.metadata))
        self.sent.append(Sent(method, seat, request))
        rows = await self.calls.store.read_stream(self.calls.game_id, after_version=self.version)
        for _, event in split(rows).game:
            self.state = evolve(self.state, event)
        self.version = rows[-1].version

    async def step(self) -> None:
        """The next command, as :func:`service.play.simulate.play_game` picks it: a new round, table talk
        while an UNO window is open, else the move of the seat the game waits for."""
        state = self.state
        if state.awaiting is Awaiting.ROUND_START:
            return await self.send("StartRound", 0, pb.StartRoundRequest(header=self.header()))
        command: cmd.Command | None = None
        if state.exposed:
            order = list(range(state.size))
            self.rng.shuffle(order)
            command = next((c for s in order if (c := self.bots[s].talk(state, s)) is not None), None)
        if command is None and state.options.jump_in and state.jumpable and state.awaiting in JUMPABLE:
            # house.jump-in: before the seat on turn acts, another holding the top card's twin may jump in.
            order = [s for s in range(state.size) if s != state.turn]
            self.rng.shuffle(order)
            command = next((c for s in order if (c := self.bots[s].jump_in(state, s)) is not None), None)
        if command is None:
            command = self.bots[state.turn].act(state)
        assert not isinstance(command, cmd.StartRound | cmd.Reshuffle)  # a bot's move is a seat's
        method = type(command).__name__
        request = getattr(pb, f"{method}Request")(header=self.header())
        if isinstance(command, cmd.Play | cmd.Choose):
            request.colour = command.colour.value if command.colour is not None else ""
            if command.target is not None:
                request.target = command.target
        if isinstance(command, cmd.Play):
            request.card, request.uno, request.jump_in = command.card.token, command.uno, command.jump_in
        elif isinstance(command, cmd.Catch):
            request.target = command.target
        await self.send(method, command.player, request)


# --- the games -------------------------------------------------------------------------------------------


Opening = list[tuple[str, int, Message]]


@dataclass(frozen=True, slots=True)
class Case:
    """One random game: its rule set (and UNO Attack's edition), players, the seed that shuffles its
    first deck and drives its bots, its opening (:data:`OPENINGS`) and how many commands the bots send
    after it."""

    variant: Variant
    players: int
    seed: int
    opening: str
    steps: int
    edition: str = "original"
    #: The house rules the game is created with (docs/RULES.md §9), as (option, value) pairs.
    house: tuple[tuple[str, Any], ...] = ()

    @property
    def deck(self) -> str:
        return (
            "attack-2010" if self.variant is Variant.ATTACK and self.edition == "2010" else self.variant.value
        )


#: What a jump-in may come on (house.jump-in: not while a penalty or a choice waits).
JUMPABLE = (Awaiting.PLAY, Awaiting.FOLLOW_UP)


def every_house_rule(variant: Variant) -> tuple[tuple[str, Any], ...]:
    """Every house rule ``variant`` takes, on (stacking: any)."""
    return tuple(
        (n, "any" if n == "stacking" else True) for n in HOUSE_RULES if n not in UNSUPPORTED[variant]
    )


FIRST = "R5"  # a number card: no rule set gives it an effect when it is turned up first
#: Seat 0 (the first player: the last seat deals) holds ``held`` besides random cards, the draw pile
#: starts with ``then``, and the seats send ``commands``:
#:
#: * bluff: a Wild Draw Four played over a red card (illegal), challenged: its hand shown to seat 1;
#: * run (two players): skips and reverses keep seat 0 on turn down to one card without an UNO call,
#:   seat 1 catches it, and seat 0 goes out all the same: the next round is dealt from the secret seed;
#: * trade: UNO Attack 2010's Trade Hands with seat 1; attack: Attack-Attack fires cards at seat 1;
#: * seeded (not here): no arranged deck, the rule set's own dealer selection (a draw in classic and
#:   Mario Kart) and every deal from the secret seed.
OPENINGS: dict[str, tuple[list[str], list[str], Opening]] = {
    "bluff": (
        ["W+4", "R1"],
        [],
        [("Play", 0, pb.PlayRequest(card="W+4", colour="B")), ("Challenge", 1, pb.ChallengeRequest())],
    ),
    "run": (
        ["RS", "RR", "RS", "RR", "YR", "YS", "Y1"],
        ["GS", "YS"],
        [
            *(("Play", 0, pb.PlayRequest(card=card)) for card in ["RS", "RR", "RS", "RR", "YR", "YS"]),
            ("Catch", 1, pb.CatchRequest(target=0)),
            ("Play", 0, pb.PlayRequest(card="GS")),
            ("Play", 0, pb.PlayRequest(card="YS", uno=True)),
            ("Play", 0, pb.PlayRequest(card="Y1")),
        ],
    ),
    "trade": (["RTH"], [], [("Play", 0, pb.PlayRequest(card="RTH", target=1))]),
    "attack": (["WAA"], [], [("Play", 0, pb.PlayRequest(card="WAA", colour="B", target=1))]),
}
#: What each opening leaves in the log.
OPENED: dict[str, type] = {
    "bluff": ev.Wd4Challenged,
    "run": ev.RoundEnded,
    "trade": ev.HandsTraded,
    "attack": ev.LauncherPressed,
    "seeded": ev.RoundStarted,
}


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """A game of any rule set, with an opening its deck and player count allow."""
    variant = draw(st.sampled_from(list(Variant)))
    players = draw(st.integers(2, 4))
    edition = draw(st.sampled_from(ATTACK_EDITIONS)) if variant is Variant.ATTACK else "original"
    house = draw(st.sampled_from([(), every_house_rule(variant)]))
    if variant is Variant.ATTACK:
        opening = draw(st.sampled_from(["trade" if edition == "2010" else "attack", "seeded"]))
    else:
        # Where a Wild Draw Four may be played at any time, it cannot be challenged: no bluff to call.
        bluff = [] if dict(house).get("wd4_any_time") else ["bluff"]
        opening = draw(st.sampled_from([*bluff, "seeded", *(["run"] if players == 2 else [])]))
    steps = draw(st.integers(0, 60))
    return Case(variant, players, draw(st.integers(0, 2**32 - 1)), opening, steps, edition, house)


def arranged(case: Case, held: Sequence[str], then: Sequence[str]) -> list[str]:
    """The rule set's deck shuffled by the case's seed, with ``held`` dealt to seat 0, FIRST turned up and
    ``then`` on top of the draw pile (the deal as :func:`service.rules.state.deal` makes it: one card at
    a time, starting left of the dealer)."""
    rest = [c.token for c in DECKS[case.deck]]
    random.Random(case.seed).shuffle(rest)
    for token in [*held, FIRST, *then]:
        rest.remove(token)
    hands = [list(held) if seat == 0 else [] for seat in range(case.players)]
    for hand in hands:
        while len(hand) < HAND_SIZE:
            hand.append(rest.pop())
    dealer = case.players - 1
    dealt = [
        hands[(dealer + 1 + i) % case.players][i // case.players] for i in range(HAND_SIZE * case.players)
    ]
    deck = [*dealt, FIRST, *then, *rest]
    assert Counter(deck) == Counter(c.token for c in DECKS[case.deck])
    return deck


async def play(calls: Calls, case: Case) -> Table:
    """Create the game (as the admin from an arranged deck, or as anyone from the secret seed), play its
    opening with the seats' tokens, let the bots send ``case.steps`` more commands, and leave it in the
    middle of a round."""
    request = pb.CreateGameRequest(
        command_id=new_id(),
        variant=views.VARIANTS[case.variant],
        players=[f"p{i}" for i in range(case.players)],
        tournament_id=TOURNAMENT,
    )
    options: dict[str, Any] = {"single_round": False, **dict(case.house)}
    if case.variant is Variant.ATTACK:
        options["attack_edition"] = case.edition
    commands: Opening = []
    if case.opening != "seeded":
        held, then, commands = OPENINGS[case.opening]
        request.fixed_deck[:] = arranged(case, held, then)
        request.dealer = case.players - 1
        options["dealer_selection"] = "given"
    request.options.update(options)
    created: pb.CreateGameReply = await calls.stub.CreateGame(request, metadata=ADMIN if commands else None)
    calls.game_id = created.game_id
    if commands:
        assert (created.view.awaiting, created.view.turn, created.view.top) == ("play", 0, FIRST)
    table = Table(calls, created, await folded(calls.store, created.game_id), case.seed)
    for method, seat, command in commands:
        sent = type(command)()
        sent.CopyFrom(command)
        sent.header.CopyFrom(table.header())  # type: ignore[attr-defined]
        await table.send(method, seat, sent)
    for _ in range(case.steps):
        if table.state.awaiting is Awaiting.GAME_OVER:
            break
        await table.step()
    if table.state.awaiting is Awaiting.ROUND_START:
        await table.step()
    return table


async def dispute(calls: Calls, table: Table, players: int) -> list[tuple[Identity, apb.FileDisputeRequest]]:
    """Seats dispute the log's challenges and catches, and a catch it does not hold (judged on the
    target's hand); the adjudicator rules on all of them but the last, which stays open."""
    rows = await calls.store.read_stream(calls.game_id)
    now = rows[-1].version
    filings: list[tuple[Identity, apb.FileDisputeRequest]] = []

    def filing(seat: int, kind: apb.DisputeKind, position: int, **named: int) -> None:
        request = apb.FileDisputeRequest(
            game_id=calls.game_id, command_id=new_id(), kind=kind, position=position, claim="not so", **named
        )
        filings.append((table.seat(seat), request))

    challenges = [r for r in rows if r.type == type_name(ev.Wd4Challenged)][:2]
    catches = [r for r in rows if r.type == type_name(ev.UnoCaught)][:2]
    for row in challenges:
        filing(int(row.payload["player"]), apb.WD4_CHALLENGE, row.version)
    for row in catches:
        filing(int(row.payload["target"]), apb.UNO_CATCH, row.version)
    filing(0, apb.UNO_CATCH, now, by=0, target=1)  # no catch there: ruled on seat 1's hand
    filing(players - 1, apb.UNO_CATCH, now, by=players - 1, target=0)  # stays open
    for n, (who, request) in enumerate(filings):
        filed = await calls.served(
            who, "FileDispute", calls.audit.FileDispute(request, metadata=who.metadata)
        )
        if n < len(filings) - 1:
            ruling = apb.RuleOnDisputeRequest(
                game_id=calls.game_id, dispute_id=filed.dispute_id, command_id=new_id(), note="ruled"
            )
            await calls.audit.RuleOnDispute(ruling, metadata=ADMIN)
    return filings


def identities(table: Table, players: int, other: pb.CreateGameReply) -> list[Identity]:
    """The admin first (its export reveals the seed to it, recorded in the log every other reader then
    reads), each seat, no token, a seat of another game, a malformed authorization header."""
    return [
        Identity("admin", ADMIN, admin=True),
        *(table.seat(seat) for seat in range(players)),
        Identity("no token", None),
        Identity("a seat of another game", auth(other.seats[0].token), stranger=True),
        Identity("a malformed token", (("authorization", "Basic " + table.tokens[0]),), malformed=True),
    ]


async def read_everything(
    calls: Calls, table: Table, who: Identity, filings: Sequence[tuple[Identity, apb.FileDisputeRequest]]
) -> None:
    """Every read RPC ``who`` may call, each command and filing it sent sent again, the adjudicator's
    RPCs (refused to anyone else), and commands the rules refuse."""
    stub, audit, game_id, md = calls.stub, calls.audit, calls.game_id, who.metadata
    players = len(table.tokens)
    now = await calls.version()
    seat = who.seat if who.seat is not None else 0
    other = (seat + 1) % players
    on_game = who.of_game
    unauthenticated = {grpc.StatusCode.UNAUTHENTICATED}

    async def read(what: str, call: Awaitable[R], answered: bool) -> R | None:
        if answered:
            return await calls.served(who, what, call)
        await calls.refused(who, what, call)
        return None

    await read("GetGame", stub.GetGame(pb.GetGameRequest(game_id=game_id), metadata=md), on_game)
    await calls.watch(who, now)
    await read("ListGames", stub.ListGames(pb.ListGamesRequest(), metadata=md), not who.malformed)
    scores = stub.GetScores(pb.GetScoresRequest(game_id=game_id, min_version=now), metadata=md)
    if on_game:
        found = await scores
        at = await calls.version()
        totals = pb.GetScoresReply()
        totals.CopyFrom(found)
        del totals.rounds[:]
        calls.seen.append(Seen(who, "GetScores", texts_of(totals), at, at))
        for r in found.rounds:  # the hands a round ended with, about that round
            calls.seen.append(Seen(who, f"GetScores round {r.round}", texts_of(r), at, at, round=r.round))
    else:
        await calls.refused(who, "GetScores", scores, unauthenticated)
    seated = who.admin or who.seat is not None
    own = pb.GetHandRequest(game_id=game_id, seat=seat, min_version=now)
    await read("GetHand", stub.GetHand(own, metadata=md), seated)
    another = pb.GetHandRequest(game_id=game_id, seat=other, min_version=now)
    await read("GetHand of another seat", stub.GetHand(another, metadata=md), who.admin)
    standings = pb.GetStandingsRequest(tournament_id=TOURNAMENT)
    await read("GetStandings", stub.GetStandings(standings, metadata=md), not who.malformed)
    await read(
        "GetProjectionLag",
        stub.GetProjectionLag(pb.GetProjectionLagRequest(), metadata=md),
        not who.malformed,
    )

    listed = audit.ListDisputes(apb.ListDisputesRequest(game_id=game_id), metadata=md)
    if seated:
        reply = await listed
        calls.disputes(who, "ListDisputes", reply.disputes, await calls.version())
    else:
        await calls.refused(who, "ListDisputes", listed)
    everything = audit.ListDisputes(apb.ListDisputesRequest(), metadata=md)
    if who.admin:
        reply = await everything
        calls.disputes(
            who,
            "ListDisputes of every game",
            [d for d in reply.disputes if d.game_id == game_id],
            await calls.version(),
        )
    else:
        await calls.refused(who, "ListDisputes of every game", everything)
    for filer, request in filings:
        if filer == who:  # the same command id again: the dispute as it stands now
            retried = await audit.FileDispute(request, metadata=md)
            calls.disputes(who, "FileDispute retried", [retried], await calls.version())
        elif filer.seat == other and on_game:  # another seat's filing sent again: refused, not answered
            codes = {grpc.StatusCode.INVALID_ARGUMENT, *REFUSED}
            await calls.refused(
                who, "FileDispute of another seat", audit.FileDispute(request, metadata=md), codes
            )

    adjudicated = [
        ("VerifyGame", audit.VerifyGame(apb.VerifyGameRequest(game_id=game_id), metadata=md)),
        (
            "AdjudicateCatch",
            audit.AdjudicateCatch(
                apb.AdjudicateRequest(game_id=game_id, position=now, target=other), metadata=md
            ),
        ),
        (
            "ExportGame",
            audit.ExportGame(
                apb.ExportGameRequest(game_id=game_id, reveal_seed=True, command_id=new_id()), metadata=md
            ),
        ),
    ]
    rows = await calls.store.read_stream(game_id)
    for position in [r.version for r in rows if r.type == type_name(ev.Wd4Challenged)][:1]:
        ask = apb.AdjudicateRequest(game_id=game_id, position=position)
        adjudicated.append(("AdjudicateChallenge", audit.AdjudicateChallenge(ask, metadata=md)))
    for what, call in adjudicated:
        await read(what, call, who.admin)

    if who.seat is not None:
        await retries(calls, table, who)
        await refusals(calls, table, who)
    elif not who.admin:
        play = pb.PlayRequest(header=table.header(), card=FIRST)
        await calls.refused(who, "Play", stub.Play(play, metadata=md), unauthenticated)


async def retries(calls: Calls, table: Table, who: Identity) -> None:
    """``who``'s first and last accepted commands sent again (a duplicate's reply), and one of another
    seat's sent with ``who``'s token (refused: a command id is bound to its first caller)."""
    mine = [s for s in table.sent if s.seat == who.seat]
    for sent in [*mine[:3], *mine[3:][-3:]]:
        reply = await calls.served(
            who,
            f"{sent.method} retried",
            getattr(calls.stub, sent.method)(sent.request, metadata=who.metadata),
        )
        assert reply.duplicate
    theirs = next((s for s in table.sent if s.seat != who.seat), None)
    if theirs is not None:
        call = getattr(calls.stub, theirs.method)(theirs.request, metadata=who.metadata)
        codes = {grpc.StatusCode.INVALID_ARGUMENT, *REFUSED}
        await calls.refused(who, f"{theirs.method} of seat {theirs.seat} sent again", call, codes)


async def refusals(calls: Calls, table: Table, who: Identity) -> None:
    """Commands the rules (or the token) refuse ``who``: their messages may name the caller's own
    cards, public ones and the card it asked to play, nothing else."""
    assert who.seat is not None
    stub, md, seat = calls.stub, who.metadata, who.seat
    players = len(table.tokens)
    admin_view: pb.GameView = await stub.GetGame(pb.GetGameRequest(game_id=calls.game_id), metadata=ADMIN)
    mine = list(admin_view.hands[seat].cards)
    theirs = [c for hand in admin_view.hands if hand.seat != seat for c in hand.cards if c not in mine]
    failed = {grpc.StatusCode.FAILED_PRECONDITION}
    for card in theirs[:2]:  # a card another seat holds, which this one does not
        play = pb.PlayRequest(header=table.header(), card=card, colour="R" if card.startswith("W") else "")
        await calls.refused(who, f"Play {card}", stub.Play(play, metadata=md), failed, echoed=[card])
    if mine:
        other = (seat + 1) % players
        play = pb.PlayRequest(header=table.header(), card=mine[0])
        play.header.as_seat = other
        await calls.refused(
            who, "Play for another seat", stub.Play(play, metadata=md), {grpc.StatusCode.PERMISSION_DENIED}
        )
    for target in range(players):
        if target != seat and len(admin_view.hands[target].cards) > 1:
            catch = pb.CatchRequest(header=table.header(), target=target)
            await calls.refused(who, f"Catch {target}", stub.Catch(catch, metadata=md), failed)
    if not (admin_view.awaiting == "wd4-response" and admin_view.turn == seat):
        await calls.refused(
            who, "Challenge", stub.Challenge(pb.ChallengeRequest(header=table.header()), metadata=md), failed
        )
    if admin_view.awaiting not in ("round-start", "game-over"):
        start = pb.StartRoundRequest(header=table.header())
        await calls.refused(who, "StartRound", stub.StartRound(start, metadata=md), failed)
    stale = pb.DrawRequest(header=table.header())
    stale.header.expected_version = 1
    await calls.refused(
        who, "Draw at a stale version", stub.Draw(stale, metadata=md), {grpc.StatusCode.ABORTED}
    )


def check(known: Knowledge, seen: Iterable[Seen]) -> list[str]:
    """Every reply to a caller other than the adjudicator that shows what the caller may not see."""
    return [
        f"{s.who.name}: {s.what} shows {sorted(found)}"
        for s in seen
        if not s.who.admin and (found := known.leaks(s))
    ]


# --- the property ----------------------------------------------------------------------------------------


@settings(
    max_examples=examples(2),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(Case(Variant.CLASSIC, players=2, seed=1, opening="run", steps=30))
@example(Case(Variant.SONIC, players=3, seed=2, opening="bluff", steps=40))
@example(Case(Variant.ATTACK, players=3, seed=3, opening="trade", steps=40, edition="2010"))
@example(Case(Variant.ATTACK, players=2, seed=4, opening="attack", steps=30))
@example(Case(Variant.MARIO_KART, players=4, seed=5, opening="bluff", steps=40))
@example(Case(Variant.CLASSIC, players=3, seed=6, opening="seeded", steps=30))
@example(
    Case(
        Variant.CLASSIC,
        players=3,
        seed=7,
        opening="seeded",
        steps=60,
        house=every_house_rule(Variant.CLASSIC),
    )
)
@example(
    Case(
        Variant.ATTACK,
        players=4,
        seed=8,
        opening="trade",
        steps=60,
        edition="2010",
        house=every_house_rule(Variant.ATTACK),
    )
)
@example(
    Case(Variant.SONIC, players=2, seed=9, opening="run", steps=40, house=every_house_rule(Variant.SONIC))
)
@given(case=cases())
async def test_no_reply_shows_a_caller_a_card_the_rules_hide_from_it(
    server: RunningServer, channel: grpc.aio.Channel, stub: GameStub, monkeypatch: Any, case: Case
) -> None:
    # The same game each run: a fresh secret seed would change the deal (and the launcher), and in some
    # deals the bots finish the game, whose seed is then no secret to test.
    deal_from(monkeypatch, case.seed)
    calls = Calls(stub, audit_pb2_grpc.AuditServiceStub(channel), server.store)  # type: ignore[no-untyped-call]
    with structlog.testing.capture_logs() as logged:
        table = await play(calls, case)
        assert table.state.awaiting is not Awaiting.GAME_OVER, f"{case} ends the game: its seed is no secret"
        watchers = [Watcher(calls, who) for who in [Identity("no token", None), table.seat(1)]]
        filings = await dispute(calls, table, case.players)
        other: pb.CreateGameReply = await stub.CreateGame(
            pb.CreateGameRequest(command_id=new_id(), variant=pb.CLASSIC, players=["x", "y"])
        )
        for who in identities(table, case.players, other):
            await read_everything(calls, table, who, filings)
        for watcher in watchers:
            await watcher.stop(await calls.version())
    known = await knowledge_of(server.store, calls.game_id)
    assert known.ended == NEVER, "the game must still be in progress: its seed is secret"

    assert check(known, calls.seen) == []
    # The game holds what the property is about: its opening (a hand shown, traded or fired at) and rulings.
    rows = await server.store.read_stream(calls.game_id)
    assert any(r.type == type_name(DisputeRuled) for r in rows)
    assert any(r.type == type_name(OPENED[case.opening]) for r in rows)
    recorded = rows[0].payload["options"]
    assert {name: recorded[name] for name, _ in case.house} == dict(case.house)  # played by its house rules
    # The service's log lines name no card and not the seed.
    for entry in logged:
        texts = [str(value) for value in entry.values()]
        assert not cards_in(texts), f"a log line names cards: {entry}"
        assert not any(known.seed in text for text in texts), f"a log line holds the seed: {entry}"

    # The check can fail: the adjudicator's replies, as if a seat had been sent them, show its hidden cards.
    admin_seen = [dataclasses.replace(s, who=table.seat(0)) for s in calls.seen if s.who.admin]
    assert check(known, admin_seen), "the adjudicator's replies show a seat nothing hidden from it"


@pytest.mark.parametrize(
    ("switched_off", "shown_in"),
    [
        (type_name(ev.RoundStarted), {"WatchGame"}),  # the dealt deck
        (type_name(DisputeRuled), {"WatchGame", "ListDisputes"}),  # the hand a ruling rests on
    ],
)
async def test_the_check_finds_a_leaking_redaction(
    server: RunningServer,
    channel: grpc.aio.Channel,
    stub: GameStub,
    monkeypatch: pytest.MonkeyPatch,
    switched_off: str,
    shown_in: set[str],
) -> None:
    """With one event's redaction switched off, what WatchGame streams and ListDisputes lists to seat 0
    shows cards the rules hide from it, and the property's check names each reply that does (so a
    passing property is not a check that cannot fail)."""
    calls = Calls(stub, audit_pb2_grpc.AuditServiceStub(channel), server.store)  # type: ignore[no-untyped-call]
    table = await play(calls, Case(Variant.CLASSIC, players=2, seed=6, opening="bluff", steps=4))
    await dispute(calls, table, 2)  # seat 0's, on a catch of seat 1 that the log does not hold, is ruled
    seat = table.seat(0)

    async def leaks() -> set[str]:
        """The RPCs whose replies to seat 0 show it what it may not see."""
        calls.seen.clear()
        await calls.watch(seat, await calls.version())
        listed = await calls.audit.ListDisputes(
            apb.ListDisputesRequest(game_id=calls.game_id), metadata=seat.metadata
        )
        calls.disputes(seat, "ListDisputes", listed.disputes, await calls.version())
        known = await knowledge_of(server.store, calls.game_id)
        return {s.what.split()[0] for s in calls.seen if known.leaks(s)}

    assert await leaks() == set()
    monkeypatch.delitem(visibility._REDACTIONS, switched_off)
    assert await leaks() == shown_in
