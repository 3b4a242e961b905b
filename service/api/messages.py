"""The wire form of what a caller may see: stored events and the game view as protobuf messages.

What each caller may see is :mod:`service.domain.visibility`'s to say; this module only maps it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf import struct_pb2, timestamp_pb2

from service.domain.auth import Caller
from service.domain.visibility import Players, jumpable, redact, visible_drawn, visible_hands
from service.rules.options import Variant
from service.rules.state import State
from service.store import StoredEvent
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb

VARIANTS = {
    Variant.CLASSIC: pb.CLASSIC,
    Variant.SONIC: pb.SONIC,
    Variant.ATTACK: pb.ATTACK,
    Variant.MARIO_KART: pb.MARIO_KART,
}
VARIANT_OF = {value: variant for variant, value in VARIANTS.items()}


def event_message(event: StoredEvent, caller: Caller, players: Players) -> pb.Event:
    """The wire form of a stored event, redacted for ``caller``."""
    payload = struct_pb2.Struct()
    payload.update(redact(event.type, event.payload, caller, players))
    return pb.Event(
        position=event.position,
        version=event.version,
        type=event.type,
        payload=payload,
        recorded_at=timestamp(event.recorded_at),
        xid=event.xid,
    )


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def timestamp(moment: datetime) -> timestamp_pb2.Timestamp:
    """``moment`` (aware) as a protobuf Timestamp: what ``Timestamp.FromDatetime`` gives, in a third of
    its time (it is paid for every event of every reply)."""
    since = moment - _EPOCH
    return timestamp_pb2.Timestamp(
        seconds=since.days * 86_400 + since.seconds, nanos=since.microseconds * 1000
    )


def game_view(
    game_id: str, state: State, version: int, caller: Caller, tournament_id: str = ""
) -> pb.GameView:
    """The game as ``caller`` may see it."""
    in_round = state.round > 0
    hands = [pb.Hand(seat=seat, cards=[c.token for c in hand]) for seat, hand in visible_hands(state, caller)]
    drawn = visible_drawn(state, caller)
    house_rules = struct_pb2.Struct()
    on = state.options.house_rules()
    if on:
        house_rules.update(on)
    return pb.GameView(
        game_id=game_id,
        variant=VARIANTS[state.variant],
        players=list(state.players),
        version=version,
        awaiting=state.awaiting.value,
        round=state.round,
        dealer=state.dealer if state.dealer is not None else -1,
        turn=state.turn,
        direction=state.direction,
        top=state.discard[-1].token if in_round and state.discard else "",
        colour=state.colour.value if state.colour else "",
        draw_pile=len(state.pile),
        discard_pile=len(state.discard),
        hand_sizes=[len(hand) for hand in state.hands],
        scores=list(state.scores),
        viewer_seat=caller.seat if caller.seat is not None else -1,
        hands=hands,
        exposed=state.exposed[0] if state.exposed else -1,
        exposed_seats=state.exposed,
        winner=state.winner if state.winner is not None else -1,
        seed_sha256=state.seed_sha256 or "",
        tournament_id=tournament_id,
        drawn=drawn.token if drawn else "",
        pending_draw=state.pending,
        house_rules=house_rules,
        jumpable=jumpable(state),
        top_by=state.top_by if state.top_by is not None else -1,
    )
