"""Who may act, and who sees what.

A seat token acts only for its seat; tokens of other games, missing and malformed tokens are
UNAUTHENTICATED; the admin names the seat it acts for. In every reply, view and watched event a player
sees their own cards only, a spectator sees counts, and the admin sees everything: checked over complete
bot games, every event streamed to every seat compared with the admin's (unredacted) copy.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from typing import Any

import grpc
import pytest

from service.api.messages import VARIANTS
from service.client.bots import BotTable, LoadSummary, RetryPolicy
from service.domain.catalogue import decode_event
from service.rules.cards import DECKS, Card, Colour, tokens
from service.rules.events import GameCreated
from service.rules.legality import playable_cards
from service.rules.options import Variant
from service.rules.state import State, deal, evolve, new_state
from service.store import EventStore
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import (
    ADMIN,
    Metadata,
    arranged_deck,
    auth,
    count_rows,
    create_game,
    fails_with,
    header,
    new_id,
    payload,
)

pytestmark = pytest.mark.timeout(60)

UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED
DECK = arranged_deck({1: ["R1", "R2"], 2: ["Y1"]}, "R5", players=3)


# --- acting ---------------------------------------------------------------------------------------------


async def test_a_seat_token_acts_for_its_own_seat_only(
    stub: pb_grpc.GameServiceStub, database_url: str
) -> None:
    game = await create_game(stub, fixed_deck=DECK, options={"dealer_selection": "given"})
    other = await create_game(stub)
    assert game.reply.view.turn == 1
    rows = await count_rows(database_url)
    play = pb.PlayRequest(header=header(game.game_id, as_seat=1), card="R1")

    await fails_with(stub.Play(play, metadata=game.seat(2)), grpc.StatusCode.PERMISSION_DENIED)
    await fails_with(stub.Play(play, metadata=other.seat(1)), UNAUTHENTICATED)  # a token of another game
    await fails_with(stub.Play(play), UNAUTHENTICATED)  # a spectator cannot act
    await fails_with(stub.StartRound(pb.StartRoundRequest(header=header(game.game_id))), UNAUTHENTICATED)
    for bad in (
        "Basic " + game.tokens[1],  # another scheme
        "Bearer",  # no token
        "Bearer    ",
        game.tokens[1],  # no scheme
        "Bearer " + game.tokens[1] + "x",  # a wrong token
        "Bearer test-admin-not",
    ):
        metadata: Metadata = (("authorization", bad),)
        await fails_with(stub.Play(play, metadata=metadata), UNAUTHENTICATED)
        await fails_with(
            stub.GetGame(pb.GetGameRequest(game_id=game.game_id), metadata=metadata), UNAUTHENTICATED
        )
        watch = stub.WatchGame(pb.WatchGameRequest(game_id=game.game_id), metadata=metadata)
        await fails_with(watch.read(), UNAUTHENTICATED)
    await fails_with(
        stub.GetGame(pb.GetGameRequest(game_id=game.game_id), metadata=other.seat(0)), UNAUTHENTICATED
    )
    await fails_with(
        stub.CreateGame(
            pb.CreateGameRequest(command_id="c", variant=pb.CLASSIC, players=["a", "b"]),
            metadata=(("authorization", "Token x"),),
        ),
        UNAUTHENTICATED,
    )
    # The admin must say which seat it acts for.
    await fails_with(
        stub.Play(pb.PlayRequest(header=header(game.game_id), card="R1"), metadata=ADMIN),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="header.as_seat",
    )
    assert await count_rows(database_url) == rows

    # What is allowed: the seat for itself (naming its seat or not), the admin for any seat.
    played: pb.CommandReply = await stub.Play(play, metadata=game.seat(1))
    assert played.view.turn == 2 and played.view.viewer_seat == 1
    by_admin: pb.CommandReply = await stub.Play(
        pb.PlayRequest(header=header(game.game_id, as_seat=2), card="Y1"), metadata=ADMIN
    )
    assert by_admin.events[0].type == "CardPlayed" and payload(by_admin.events[0])["player"] == 2
    assert by_admin.view.viewer_seat == -1 and len(by_admin.view.hands) == 3


async def test_only_the_admin_deals_a_fixed_deck(stub: pb_grpc.GameServiceStub, database_url: str) -> None:
    rows = await count_rows(database_url)
    create = pb.CreateGameRequest(
        command_id="fixed", variant=pb.CLASSIC, players=["a", "b", "c"], fixed_deck=DECK
    )
    await fails_with(stub.CreateGame(create), grpc.StatusCode.PERMISSION_DENIED)
    game = await create_game(stub, options={"single_round": True, "dealer_selection": "given"})
    await fails_with(
        stub.StartRound(
            pb.StartRoundRequest(header=header(game.game_id), fixed_deck=DECK), metadata=game.seat(0)
        ),
        grpc.StatusCode.PERMISSION_DENIED,
    )
    assert (await count_rows(database_url))["events"] == rows["events"] + 1
    started: pb.CommandReply = await stub.StartRound(
        pb.StartRoundRequest(header=header(game.game_id), fixed_deck=DECK), metadata=ADMIN
    )
    assert [list(h.cards) for h in started.view.hands][1][:2] == ["R1", "R2"]


# --- seeing ---------------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """Struct numbers arrive as floats: whole ones back to ints, to compare with stored payloads."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _nulls(cards: list[Any]) -> list[None]:
    return [None] * len(cards)


def visible(kind: str, full: Mapping[str, Any], seat: int | None, players: int) -> dict[str, Any]:
    """What ``seat`` (None: a spectator) may see of an event: the policy of docs/DESIGN.md, spelt out."""
    out = dict(full)
    own = full.get("player") == seat and seat is not None
    if kind == "GameCreated":
        out["seed"] = None
    elif kind == "RoundStarted":
        if full.get("deck") is not None:
            deck = tuple(Card.parse(token) for token in full["deck"])
            hands = [tokens(hand) for hand in deal(deck, players, full["dealer"])[0]]
        else:
            hands = full["hands"]
        out["deck"] = None
        out["hands"] = [hand if s == seat else _nulls(hand) for s, hand in enumerate(hands)]
    elif kind == "CardDrawn" and not own:
        out["card"] = None
    elif kind in ("CardsTaken", "LauncherPressed") and not own:
        out["cards"] = _nulls(full["cards"])
    elif kind in ("PileReshuffled", "FlipReturned"):
        out["pile"] = _nulls(full["pile"])
    elif kind == "Wd4Challenged" and not own:  # the offender shows their hand to the challenger only
        out["hand"] = _nulls(full["hand"])
        out["matching"] = _nulls(full["matching"])
    return out


class _RecordingTable(BotTable):
    """A bot table that keeps every reply and view each seat got, and watches the game as every caller."""

    def __init__(self, stub: pb_grpc.GameServiceStub, seed: int) -> None:
        super().__init__(stub, random.Random(seed), LoadSummary(), RetryPolicy())
        self.deck_seed = seed
        self.replies: list[tuple[int, pb.CommandReply]] = []
        self.views: list[tuple[int, pb.GameView]] = []
        self.watchers: dict[str, asyncio.Task[list[pb.Event]]] = {}

    async def create(
        self, variant: Variant, players: int, target_score: int | None, tournament_id: str = ""
    ) -> pb.GameView:
        """As the admin, with the first round dealt from a deck shuffled by the test's seed: the bots' game
        is then the same on every run (as long as no reshuffle draws on the server's secret seed)."""
        deck = [c.token for c in DECKS[variant.value]]
        random.Random(self.deck_seed).shuffle(deck)
        request = pb.CreateGameRequest(
            command_id=new_id(),
            variant=VARIANTS[variant],
            players=[f"bot{i}" for i in range(players)],
            fixed_deck=deck,
        )
        request.options.update({"dealer_selection": "given"})
        if target_score is not None:
            request.target_score = target_score
        reply: pb.CreateGameReply = await self.stub.CreateGame(request, metadata=ADMIN)
        self.game_id = reply.game_id
        self.tokens = {seat.seat: seat.token for seat in reply.seats}
        self.version = reply.version
        view = reply.view
        callers: dict[str, Metadata | None] = {"admin": ADMIN, "spectator": None}
        callers.update({str(seat): auth(token) for seat, token in self.tokens.items()})
        for name, metadata in callers.items():
            self.watchers[name] = asyncio.create_task(self._watch(metadata))
        return view

    async def act(self, view: pb.GameView, seat: int, variant: Variant, players: int) -> pb.GameView | None:
        """The bots' move, except that a seat that can play mostly does (shorter games, faster tests)."""
        if view.awaiting == "play":
            hand = [Card.parse(token) for token in view.hands[0].cards]
            top, colour = Card.parse(view.top), Colour(view.colour) if view.colour else None
            options = playable_cards(hand, top, colour)
            if options and self.rng.random() < 0.7:
                reply = await self.play_card(self.rng.choice(options), seat, hand, view, variant)
                return reply.view if reply is not None else None
        return await super().act(view, seat, variant, players)

    async def _watch(self, metadata: Metadata | None) -> list[pb.Event]:
        call = self.stub.WatchGame(pb.WatchGameRequest(game_id=self.game_id), metadata=metadata)
        return [event async for event in call]

    async def send(self, method: str, seat: int, request: object) -> pb.CommandReply | None:
        reply = await super().send(method, seat, request)
        if reply is not None:
            self.replies.append((seat, reply))
        return reply

    async def view_of(self, seat: int) -> pb.GameView:
        view = await super().view_of(seat)
        self.views.append((seat, view))
        return view


def _check_view(view: pb.GameView, seat: int | None, state: State) -> None:
    """A seat's or a spectator's view: counts for all, cards of the viewer's own hand only."""
    assert list(view.hand_sizes) == [len(hand) for hand in state.hands]
    if seat is None:
        assert view.viewer_seat == -1
        assert not view.hands
        assert view.drawn == ""
        return
    assert view.viewer_seat == seat
    assert [(h.seat, list(h.cards)) for h in view.hands] == [(seat, [c.token for c in state.hands[seat]])]
    mine = state.drawn is not None and state.awaiting.value == "drawn" and state.turn == seat
    assert view.drawn == (state.drawn.token if mine and state.drawn else "")


async def _play_and_scan(
    stub: pb_grpc.GameServiceStub, store: EventStore, variant: Variant, seed: int, players: int
) -> set[str]:
    """Play one bot game watched by everyone; check every event, reply and view; the event types that
    some caller saw redacted."""
    table = _RecordingTable(stub, seed)
    await table.play(variant, players, target_score=1)
    assert table.summary.rejected == 0
    # Every stream ends by itself after GameEnded.
    results = await asyncio.wait_for(asyncio.gather(*table.watchers.values()), 15)
    watched = dict(zip(table.watchers, results, strict=True))

    stored = await store.read_stream(table.game_id)
    assert stored[-1].type == "GameEnded"
    full = {e.version: (e.type, e.payload) for e in stored}
    # The states after every version, to check each view against the game at its version.
    first = decode_event(stored[0].type, stored[0].payload)
    assert isinstance(first, GameCreated)
    states: dict[int, State] = {1: new_state(first)}
    for event in stored[1:]:
        states[event.version] = evolve(states[event.version - 1], decode_event(event.type, event.payload))

    # The admin sees the log as stored; every stream is the whole log, in order, ending with GameEnded.
    for name, events in watched.items():
        assert [e.version for e in events] == list(range(1, len(stored) + 1)), name
        assert [e.type for e in events] == [e.type for e in stored]
        assert _plain(payload(events[0]))["seed"] is None
        assert _plain(payload(events[-1]))["seed"] == stored[-1].payload["seed"], "revealed at the end"
    assert [_plain(payload(e)) for e in watched["admin"]] == [e.payload for e in stored]
    hidden: set[str] = set()
    for name, events in watched.items():
        if name == "admin":
            continue
        seat = None if name == "spectator" else int(name)
        for message in events:
            kind, truth = full[message.version]
            seen = _plain(payload(message))
            assert seen == visible(kind, truth, seat, players), (
                f"{name} sees too much or too little of {kind}"
            )
            if seen != truth:
                hidden.add(kind)

    # Every reply a seat got: its events as that seat may see them, and its view.
    assert table.replies
    for seat, reply in table.replies:
        for message in reply.events:
            kind, truth = full[message.version]
            assert _plain(payload(message)) == visible(kind, truth, seat, players)
        _check_view(reply.view, seat, states[reply.view.version])
    for seat, view in table.views:
        _check_view(view, seat, states[view.version])

    # GetGame at the end: a spectator sees counts, a seat its own hand, the admin every hand.
    final = states[len(stored)]
    request = pb.GetGameRequest(game_id=table.game_id)
    _check_view(await stub.GetGame(request), None, final)
    for seat, token in table.tokens.items():
        _check_view(await stub.GetGame(request, metadata=auth(token)), seat, final)
    admin: pb.GameView = await stub.GetGame(request, metadata=ADMIN)
    assert [(h.seat, list(h.cards)) for h in admin.hands] == [
        (seat, [c.token for c in hand]) for seat, hand in enumerate(final.hands)
    ]
    return hidden


@pytest.mark.parametrize(
    ("variant", "private"),
    [(Variant.CLASSIC, {"RoundStarted", "CardDrawn"}), (Variant.ATTACK, {"RoundStarted", "LauncherPressed"})],
    ids=["classic", "attack"],
)
async def test_nobody_sees_another_players_cards_in_whole_games(
    variant: Variant, private: set[str], stub: pb_grpc.GameServiceStub, store: EventStore
) -> None:
    hidden: set[str] = set()
    for seed in range(3):
        hidden |= await _play_and_scan(stub, store, variant, seed, players=3)
    assert private <= hidden


async def test_the_drawn_card_shows_to_the_drawer_only(stub: pb_grpc.GameServiceStub) -> None:
    # Seat 1 holds no red and no 5: it must draw, and draws R9 (playable), which only seat 1 sees.
    deck = arranged_deck(
        {1: ["G1", "G2", "G3", "G4", "G6", "G7", "G8"]}, "R5", players=3, then=["R9"], deck="classic"
    )
    game = await create_game(stub, fixed_deck=deck, options={"dealer_selection": "given"})
    drawn: pb.CommandReply = await stub.Draw(
        pb.DrawRequest(header=header(game.game_id)), metadata=game.seat(1)
    )
    assert drawn.events[0].type == "CardDrawn"
    assert payload(drawn.events[0])["card"] == "R9"
    assert drawn.view.awaiting == "drawn" and drawn.view.drawn == "R9"
    for metadata, expected in ((game.seat(0), ""), (game.seat(2), ""), (None, ""), (ADMIN, "R9")):
        view: pb.GameView = await stub.GetGame(pb.GetGameRequest(game_id=game.game_id), metadata=metadata)
        assert view.drawn == expected
        watch = pb.WatchGameRequest(game_id=game.game_id, after_version=drawn.events[0].version - 1)
        call = stub.WatchGame(watch, metadata=metadata)
        event = await call.read()
        call.cancel()
        assert isinstance(event, pb.Event)
        assert event.type == "CardDrawn"
        assert payload(event)["card"] == (expected or None)


async def test_a_dealt_round_shows_each_seat_its_own_hand(
    stub: pb_grpc.GameServiceStub, store: EventStore
) -> None:
    game = await create_game(stub, options={"dealer_selection": "given"})
    dealt: pb.CommandReply = await stub.StartRound(
        pb.StartRoundRequest(header=header(game.game_id)), metadata=game.seat(1)
    )
    started = next(e for e in dealt.events if e.type == "RoundStarted")
    stored = {e.version: e for e in await store.read_stream(game.game_id)}
    truth = stored[started.version].payload
    assert truth["deck"] is not None
    seen = _plain(payload(started))
    assert seen == visible("RoundStarted", truth, 1, 3)
    assert seen["deck"] is None
    assert len(seen["hands"][1]) == 7 and None not in seen["hands"][1]
    assert seen["hands"][0] == seen["hands"][2] == [None] * 7


async def test_a_returned_first_card_hides_the_new_pile_order(
    stub: pb_grpc.GameServiceStub, store: EventStore
) -> None:
    # A Wild Draw Four flipped first goes back into the pile, which is shuffled again (setup.first-card).
    deck = arranged_deck({}, "W+4", players=3)
    game = await create_game(stub, fixed_deck=deck, options={"dealer_selection": "given"})
    stored = await store.read_stream(game.game_id)
    returned = next(e for e in stored if e.type == "FlipReturned")
    assert returned.payload["card"] == "W+4" and len(returned.payload["pile"]) > 50
    for metadata in (game.seat(0), game.seat(1), None, ADMIN):
        call = stub.WatchGame(
            pb.WatchGameRequest(game_id=game.game_id, after_version=returned.version - 1), metadata=metadata
        )
        event = await asyncio.wait_for(call.read(), 5)
        call.cancel()
        assert isinstance(event, pb.Event) and event.type == "FlipReturned"
        seen = _plain(payload(event))
        expected = returned.payload["pile"] if metadata is ADMIN else [None] * len(returned.payload["pile"])
        assert seen == {"card": "W+4", "pile": expected}
