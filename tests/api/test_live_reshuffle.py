"""A live game's imposed draw across an empty pile (``draw.reshuffle``), over a real channel and store.

Two players empty the draw pile down to one card; then a +2 makes its victim take that card, the pile is
reshuffled from the discards (from the game's seed), and the victim takes the second card from the new
pile — all in the one command, which the stored log, the fold and the view agree on.
"""

from __future__ import annotations

import pytest

from service.rules.state import conservation_error
from service.store import EventStore
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import (
    ADMIN,
    arranged_deck,
    assert_chain,
    assert_view_matches,
    create_game,
    folded,
    header,
    payload,
)

pytestmark = pytest.mark.timeout(90)

DECK = arranged_deck({1: ["R1", "R3", "R+2"], 0: ["R2", "R4"]}, "R5", players=2)


async def test_a_draw_two_takes_its_second_card_from_the_reshuffled_pile(
    stub: pb_grpc.GameServiceStub, store: EventStore
) -> None:
    game = await create_game(stub, players=2, fixed_deck=DECK, options={"dealer_selection": "given"})
    game_id = game.game_id

    async def act(method: str, seat: int, **fields: str) -> pb.CommandReply:
        request = getattr(pb, f"{method}Request")(header=header(game_id, as_seat=seat), **fields)
        reply: pb.CommandReply = await getattr(stub, method)(request, metadata=ADMIN)
        return reply

    for seat, card in ((1, "R1"), (0, "R2"), (1, "R3"), (0, "R4")):  # four cards under the top
        view = (await act("Play", seat, card=card)).view
    while view.draw_pile > 1:  # both draw, keeping what they draw, until one card is left
        reply = await act("Draw", view.turn)
        view = (await act("Pass", view.turn)).view if reply.view.awaiting == "drawn" else reply.view
    assert (view.draw_pile, view.turn, view.discard_pile) == (1, 1, 5)
    held = view.hand_sizes[0]

    reply = await act("Play", 1, card="R+2")

    kinds = [event.type for event in reply.events]
    assert kinds[:4] == ["CardPlayed", "CardsTaken", "PileReshuffled", "CardsTaken"]
    first, reshuffled, second = (payload(e) for e in reply.events[1:4])
    assert (first["player"], len(first["cards"]), second["player"], len(second["cards"])) == (0, 1, 0, 1)
    assert sorted(reshuffled["pile"]) == sorted(["R5", "R1", "R2", "R3", "R4"])  # the discards but the top
    assert second["cards"] == reshuffled["pile"][:1]  # taken from the new pile's top
    assert reply.view.hand_sizes[0] == held + 2
    assert reply.view.draw_pile == 4

    state, events = await folded(store, game_id)
    assert_chain(events)
    assert conservation_error(state) is None
    assert_view_matches(reply.view, state, len(events))
