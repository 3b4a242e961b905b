"""The house rules over a real channel: a stacked draw penalty in the view (``awaiting`` "stack",
``pending_draw``) and taken with Accept, a jump-in (``PlayRequest.jump_in``), seven-o's swap and rotation;
and the redaction of their events: another seat learns nothing new, and after a swap or a rotation each
seat's GetGame and GetHand show the hand it now holds and nothing of anyone else's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from service.domain import visibility
from service.domain.catalogue import GAME_TYPES
from service.store import EventStore
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import (
    ADMIN,
    Game,
    Metadata,
    arranged_deck,
    assert_view_matches,
    count_rows,
    create_game,
    fails_with,
    folded,
    header,
    payload,
)
from .test_redaction_property import cards_in, texts_of

pytestmark = pytest.mark.timeout(60)

RULE = grpc.StatusCode.FAILED_PRECONDITION

# Dealer 0: seat 1 plays first, on R5. Every hand is given whole, so no fill-in card spoils a scenario.
STACK_HANDS = {
    1: ["R+2", "R1", "R2", "R3", "Y4", "Y6", "B1"],
    2: ["G+2", "G1", "G2", "G3", "Y1", "Y2", "B2"],
    0: ["W+4", "B3", "B4", "B6", "Y3", "G4", "G6"],
}
STACK_DECK = arranged_deck(STACK_HANDS, "R5", players=3)
# Seat 1 holds a 7 and a 0 (seven-o), seat 0 the twin of the first card (a jump-in).
SEVEN_HANDS = {
    1: ["R7", "R0", "R1", "R2", "Y4", "Y6", "B1"],
    2: ["G7", "G1", "G2", "G3", "Y1", "Y2", "B2"],
    0: ["R5", "B3", "B4", "B6", "Y3", "G4", "G6"],
}
SEVEN_DECK = arranged_deck(SEVEN_HANDS, "R5", players=3)


async def _game(stub: pb_grpc.GameServiceStub, deck: Sequence[str], **options: Any) -> Game:
    game = await create_game(stub, fixed_deck=deck, options={"dealer_selection": "given", **options})
    view = game.reply.view
    assert (view.awaiting, view.turn, view.top) == ("play", 1, "R5")
    return game


async def _play(
    stub: pb_grpc.GameServiceStub, game: Game, seat: int, card: str, **fields: Any
) -> pb.CommandReply:
    reply: pb.CommandReply = await stub.Play(
        pb.PlayRequest(header=header(game.game_id), card=card, **fields), metadata=game.seat(seat)
    )
    return reply


async def _view(stub: pb_grpc.GameServiceStub, game: Game, metadata: Metadata | None) -> pb.GameView:
    view: pb.GameView = await stub.GetGame(pb.GetGameRequest(game_id=game.game_id), metadata=metadata)
    return view


async def _events(
    stub: pb_grpc.GameServiceStub, game: Game, metadata: Metadata | None, after: int
) -> list[pb.Event]:
    """The game's events after version ``after`` as ``metadata``'s caller is streamed them."""
    stream = stub.WatchGame(pb.WatchGameRequest(game_id=game.game_id, after_version=after), metadata=metadata)
    out: list[pb.Event] = []
    async for event in stream:
        out.append(event)
        if event.version >= after and len(out) >= 1 and event.type == "Prompted":
            break  # every command here ends with its prompt
    return out


async def _hand(stub: pb_grpc.GameServiceStub, game: Game, seat: int, version: int) -> list[str]:
    reply: pb.GetHandReply = await stub.GetHand(
        pb.GetHandRequest(game_id=game.game_id, seat=seat, min_version=version), metadata=game.seat(seat)
    )
    return list(reply.cards)


def test_every_game_event_type_is_either_public_or_redacted() -> None:
    redacted = set(visibility._REDACTIONS) & GAME_TYPES
    assert not visibility.PUBLIC & redacted
    assert visibility.PUBLIC | redacted == GAME_TYPES, GAME_TYPES - visibility.PUBLIC - redacted
    assert {"JumpedIn", "HandsRotated", "StackAccepted", "HandsTraded"} <= visibility.PUBLIC


async def test_a_stack_waits_in_the_view_and_the_victim_takes_the_whole_total(
    stub: pb_grpc.GameServiceStub, store: EventStore, database_url: str
) -> None:
    game = await _game(stub, STACK_DECK, stacking="any")
    assert json_format.MessageToDict(game.reply.view.house_rules) == {"stacking": "any"}
    reply = await _play(stub, game, 1, "R+2")
    view = reply.view
    assert (view.awaiting, view.turn, view.pending_draw) == ("stack", 2, 2)
    # Only the victim answers; a card that does not stack is refused; nothing is appended.
    before = await count_rows(database_url)
    await fails_with(
        stub.Accept(pb.AcceptRequest(header=header(game.game_id)), metadata=game.seat(0)),
        RULE,
        reason="house.stacking",
    )
    await fails_with(_play(stub, game, 2, "G1"), RULE, reason="house.stacking")
    await fails_with(_play(stub, game, 0, "W+4", colour="B"), RULE, reason="house.stacking")
    assert await count_rows(database_url) == before

    view = (await _play(stub, game, 2, "G+2")).view
    assert (view.awaiting, view.turn, view.pending_draw) == ("stack", 0, 4)
    view = (await _play(stub, game, 0, "W+4", colour="B")).view
    # A W+4 keeps its own answer, the whole stack beneath it pending.
    assert (view.awaiting, view.turn, view.pending_draw) == ("wd4-response", 1, 8)
    sizes = list(view.hand_sizes)
    reply = await stub.Accept(pb.AcceptRequest(header=header(game.game_id)), metadata=game.seat(1))
    view = reply.view
    assert (view.awaiting, view.turn, view.pending_draw) == ("play", 2, 0)
    assert view.hand_sizes[1] == sizes[1] + 8
    taken = [e for e in reply.events if e.type == "CardsTaken"]
    assert len(taken) == 1 and len(payload(taken[0])["cards"]) == 8
    state, events = await folded(store, game.game_id)
    assert_view_matches(await _view(stub, game, ADMIN), state, len(events))


async def test_accept_takes_a_stacked_penalty_and_other_seats_see_no_card_of_it(
    stub: pb_grpc.GameServiceStub, store: EventStore
) -> None:
    game = await _game(stub, STACK_DECK, stacking="draw-two")
    await _play(stub, game, 1, "R+2")
    version = (await _view(stub, game, None)).version
    reply = await stub.Accept(pb.AcceptRequest(header=header(game.game_id)), metadata=game.seat(2))
    assert [e.type for e in reply.events][:2] == ["StackAccepted", "CardsTaken"]
    assert payload(reply.events[0]) == {"player": 2.0, "total": 2.0}
    view = reply.view
    assert (view.awaiting, view.turn, view.pending_draw) == ("play", 0, 0)
    state, _ = await folded(store, game.game_id)
    taken = [c.token for c in state.hands[2][-2:]]
    assert payload(reply.events[1])["cards"] == taken  # the taker sees its cards
    for who, metadata in (("seat 0", game.seat(0)), ("seat 1", game.seat(1)), ("a spectator", None)):
        seen = await _events(stub, game, metadata, version)
        admin = await _events(stub, game, ADMIN, version)
        assert [e.type for e in seen] == [e.type for e in admin]
        for mine, full in zip(seen, admin, strict=True):
            if mine.type == "CardsTaken":
                assert payload(mine)["cards"] == [None, None], who
            else:  # the house rule's own event hides nothing, and shows nothing new
                assert payload(mine) == payload(full), who
        shown = cards_in(text for event in seen for text in texts_of(event))
        assert not shown & set(taken) - {"R+2"}, (who, shown)


async def test_a_wild_draw_four_alone_shows_four_pending(stub: pb_grpc.GameServiceStub) -> None:
    hands = {**STACK_HANDS, 1: ["W+4", *STACK_HANDS[1][1:]], 0: ["R+2", *STACK_HANDS[0][1:]]}
    game = await _game(stub, arranged_deck(hands, "R5", players=3))
    assert game.reply.view.house_rules == type(game.reply.view.house_rules)()
    view = (await _play(stub, game, 1, "W+4", colour="G")).view
    assert (view.awaiting, view.turn, view.pending_draw) == ("wd4-response", 2, 4)
    view = (await stub.Accept(pb.AcceptRequest(header=header(game.game_id)), metadata=game.seat(2))).view
    assert (view.awaiting, view.pending_draw) == ("play", 0)


async def test_a_jump_in_takes_the_turn_and_is_refused_where_it_may_not_be(
    stub: pb_grpc.GameServiceStub, store: EventStore, database_url: str
) -> None:
    plain = await _game(stub, SEVEN_DECK)
    assert (plain.reply.view.jumpable, plain.reply.view.top_by) == (False, -1)  # no jump_in: never
    before = await count_rows(database_url)
    # Without the house rule a play out of turn is turn.order, with the flag or without.
    await fails_with(_play(stub, plain, 0, "R5", jump_in=True), RULE, reason="turn.order")
    await fails_with(_play(stub, plain, 0, "R5"), RULE, reason="turn.order")
    game = await _game(stub, SEVEN_DECK, jump_in=True)
    assert (game.reply.view.jumpable, game.reply.view.top_by) == (True, -1)  # on a flipped card too
    before = await count_rows(database_url)
    await fails_with(_play(stub, game, 2, "G7", jump_in=True), RULE, reason="house.jump-in")  # not identical
    await fails_with(_play(stub, game, 0, "R5"), RULE, reason="turn.order")  # out of turn, not flagged
    assert await count_rows(database_url) == before

    reply = await _play(stub, game, 0, "R5", jump_in=True)
    assert [e.type for e in reply.events][:2] == ["JumpedIn", "CardPlayed"]
    assert payload(reply.events[0]) == {"player": 0.0}
    view = reply.view
    assert (view.awaiting, view.turn, view.top) == ("play", 1, "R5")  # play goes on from seat 0
    assert (view.jumpable, view.top_by) == (True, 0)
    # Its own card cannot be jumped on by the player who played it (and there is no third R5 anyway).
    await fails_with(_play(stub, game, 0, "R5", jump_in=True), RULE, reason="house.jump-in")
    # A turn action (seat 1 draws) ends the chance: the view says so, and a jump-in is refused.
    drew = await stub.Draw(pb.DrawRequest(header=header(game.game_id)), metadata=game.seat(1))
    assert not drew.view.jumpable and drew.view.top_by == 0
    state, events = await folded(store, game.game_id)
    assert_view_matches(await _view(stub, game, ADMIN), state, len(events))
    assert [e.type for e in events].count("JumpedIn") == 1


async def test_a_seven_swaps_hands_and_each_seat_sees_only_the_hand_it_now_holds(
    stub: pb_grpc.GameServiceStub, store: EventStore, database_url: str
) -> None:
    game = await _game(stub, SEVEN_DECK, seven_o=True)
    before = await count_rows(database_url)
    await fails_with(_play(stub, game, 1, "R7"), RULE, reason="house.seven-o")  # no target
    await fails_with(_play(stub, game, 1, "R7", target=1), RULE, reason="house.seven-o")  # itself
    assert await count_rows(database_url) == before
    version = (await _view(stub, game, None)).version
    old = {seat: set(cards) for seat, cards in SEVEN_HANDS.items()}

    reply = await _play(stub, game, 1, "R7", target=2)
    assert [e.type for e in reply.events][:2] == ["CardPlayed", "HandsTraded"]
    assert payload(reply.events[1]) == {"player": 1.0, "other": 2.0}
    new = {1: SEVEN_HANDS[2], 2: [c for c in SEVEN_HANDS[1] if c != "R7"], 0: SEVEN_HANDS[0]}
    await _each_seat_sees_its_new_hand(stub, game, reply.version, new, old, version)
    state, _ = await folded(store, game.game_id)
    assert {seat: [c.token for c in state.hands[seat]] for seat in new} == new


async def test_a_zero_rotates_the_hands_and_each_seat_sees_only_the_hand_it_now_holds(
    stub: pb_grpc.GameServiceStub, store: EventStore
) -> None:
    game = await _game(stub, SEVEN_DECK, seven_o=True)
    version = (await _view(stub, game, None)).version
    old = {seat: set(cards) for seat, cards in SEVEN_HANDS.items()}
    reply = await _play(stub, game, 1, "R0")
    assert [e.type for e in reply.events][:2] == ["CardPlayed", "HandsRotated"]
    assert payload(reply.events[1]) == {"player": 1.0}
    # Clockwise: each hand passes to the next seat (seat 1's, less the 0, to seat 2; 2's to 0; 0's to 1).
    new = {2: [c for c in SEVEN_HANDS[1] if c != "R0"], 0: SEVEN_HANDS[2], 1: SEVEN_HANDS[0]}
    await _each_seat_sees_its_new_hand(stub, game, reply.version, new, old, version)
    state, _ = await folded(store, game.game_id)
    assert {seat: [c.token for c in state.hands[seat]] for seat in new} == new


async def _each_seat_sees_its_new_hand(
    stub: pb_grpc.GameServiceStub,
    game: Game,
    version: int,
    new: dict[int, list[str]],
    old: dict[int, set[str]],
    before: int,
) -> None:
    """Each seat's GetGame and GetHand show its new hand and no other; the events of the move show a seat
    no card but those face up on the table."""
    public = {"R5", "R7", "R0"}
    for seat, hand in new.items():
        view = await _view(stub, game, game.seat(seat))
        assert [(h.seat, list(h.cards)) for h in view.hands] == [(seat, hand)], seat
        assert view.viewer_seat == seat
        assert await _hand(stub, game, seat, version) == hand, seat
        # Nothing in the view but its own (new) hand and what lies face up.
        assert cards_in(texts_of(view)) <= set(hand) | public, seat
        # The move's events: no card of any hand, old or new.
        seen = cards_in(
            text for event in await _events(stub, game, game.seat(seat), before) for text in texts_of(event)
        )
        assert seen <= public, (seat, seen)
        assert not seen & (old[seat] | set(hand)) - public
    spectator = await _view(stub, game, None)
    assert not spectator.hands and cards_in(texts_of(spectator)) <= public
    assert list(spectator.hand_sizes) == [len(new[seat]) for seat in range(3)]


async def test_a_draw_to_match_shows_the_drawer_its_cards_and_no_one_else(
    stub: pb_grpc.GameServiceStub, store: EventStore, database_url: str
) -> None:
    # Seat 1 holds nothing that matches R5; the pile holds three cards that do not, then R1.
    hands = {1: ["Y1", "Y2", "G3", "G4", "B6", "B7", "B8"]}
    deck = arranged_deck(hands, "R5", players=3, then=["Y9", "G9", "B9", "R1"])
    game = await _game(stub, deck, draw_to_match=True, force_play=True)
    version = game.reply.version
    reply = await stub.Draw(pb.DrawRequest(header=header(game.game_id)), metadata=game.seat(1))
    drawn = [payload(e)["card"] for e in reply.events if e.type == "CardDrawn"]
    assert drawn == ["Y9", "G9", "B9", "R1"]
    assert (reply.view.awaiting, reply.view.drawn, reply.view.hand_sizes[1]) == ("drawn", "R1", 11)
    for metadata in (game.seat(0), game.seat(2), None):
        seen = [e for e in await _events(stub, game, metadata, version) if e.type == "CardDrawn"]
        assert [payload(e)["card"] for e in seen] == [None] * 4
        assert (await _view(stub, game, metadata)).drawn == ""
    # force_play: the card that ended the drawing must be played, not kept.
    before = await count_rows(database_url)
    await fails_with(
        stub.Pass(pb.PassRequest(header=header(game.game_id)), metadata=game.seat(1)),
        RULE,
        reason="house.force-play",
    )
    assert await count_rows(database_url) == before
    view = (await _play(stub, game, 1, "R1")).view
    assert (view.top, view.turn) == ("R1", 2)
    state, events = await folded(store, game.game_id)
    assert_view_matches(await _view(stub, game, ADMIN), state, len(events))
