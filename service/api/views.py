"""What each caller may see: redacted event payloads and the game view.

The server is the dealer and knows every card. A seat sees its own hand and everyone's card counts; a
spectator sees counts; the admin (adjudicator) sees everything. In event payloads a card the caller may
not see is ``null`` — the count stays visible, the card does not.

What is public: cards played, flipped or returned face up, the dealer draw, the hands scored at the end
of a round (they are laid down), the seed once ``GameEnded`` reveals it. What is private: a dealt hand,
a card drawn or fired at a player (theirs only), any pile order, the offender's hand shown for a
Wild Draw Four challenge (the challenger's only), and the hand in a dispute ruling's evidence (the
adjudicator's, and for a challenge's ruling the challenger's too).

Every game event type is listed once, in :data:`_REDACTIONS` (what it hides) or in :data:`PUBLIC` (it
names seats, counts and face-up cards only, so everyone may read it whole): a new type must be placed in
one or the other (``tests/api/test_house_rules.py`` holds the catalogue's game events to that). The house
rules' events are public: ``JumpedIn`` and ``HandsRotated`` name a seat, ``StackAccepted`` a seat and a
total (its cards follow as ``CardsTaken`` or ``LauncherPressed``, redacted as ever), and a seven-o swap
is a ``HandsTraded`` naming two seats. None moves a card into view: after a swap or a rotation a seat's
view shows the hand it now holds, as folded by the rules, and nothing of anyone else's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from google.protobuf import struct_pb2, timestamp_pb2

from service.api.gen.uno.audit.v1 import game_pb2 as pb
from service.audit.entries import DisputeRuled
from service.catalogue import type_name
from service.rules import events as ev
from service.rules.events import Awaiting
from service.rules.options import Variant
from service.rules.state import State, deal
from service.store import StoredEvent

from .auth import Caller

VARIANTS = {
    Variant.CLASSIC: pb.CLASSIC,
    Variant.SONIC: pb.SONIC,
    Variant.ATTACK: pb.ATTACK,
    Variant.MARIO_KART: pb.MARIO_KART,
}
VARIANT_OF = {value: variant for variant, value in VARIANTS.items()}

Payload = dict[str, Any]
#: The game's players by seat: a dealt deck's redaction needs their number, a ruling's their names.
Players = Sequence[str]


def _hidden(cards: list[Any]) -> list[None]:
    return [None] * len(cards)


def _round_started(payload: Payload, caller: Caller, players: Players) -> Payload:
    out = dict(payload)
    if payload.get("deck") is not None:
        hands, _ = deal(tuple(payload["deck"]), len(players), payload["dealer"])
        out["deck"] = None
        out["hands"] = [
            list(hand) if seat == caller.seat else _hidden(list(hand)) for seat, hand in enumerate(hands)
        ]
    elif payload.get("hands") is not None:
        out["hands"] = [
            hand if seat == caller.seat else _hidden(hand) for seat, hand in enumerate(payload["hands"])
        ]
    return out


def _own_cards(field: str) -> Callable[[Payload, Caller, Players], Payload]:
    def redact(payload: Payload, caller: Caller, players: Players) -> Payload:
        if payload.get("player") == caller.seat:
            return payload
        value = payload[field]
        return {**payload, field: _hidden(value) if isinstance(value, list) else None}

    return redact


def _pile(payload: Payload, caller: Caller, players: Players) -> Payload:
    return {**payload, "pile": _hidden(payload["pile"])}


def _challenge(payload: Payload, caller: Caller, players: Players) -> Payload:
    if payload.get("player") == caller.seat:
        return payload
    return {**payload, "hand": _hidden(payload["hand"]), "matching": _hidden(payload["matching"])}


def _created(payload: Payload, caller: Caller, players: Players) -> Payload:
    return {**payload, "seed": None}


def _ruling(payload: Payload, caller: Caller, players: Players) -> Payload:
    evidence = dict(payload.get("evidence") or {})
    # A Wild Draw Four challenge's evidence (it names the matching cards) is the offender's hand, which
    # the rules show the challenger (wd4.challenge): the ruling's ``by``. A catch's stays hidden.
    seat = caller.seat
    if (
        "matching" in evidence
        and seat is not None
        and 0 <= seat < len(players)
        and players[seat] == payload.get("by")
    ):
        return payload
    for key in ("hand", "matching"):
        if isinstance(evidence.get(key), list):
            evidence[key] = _hidden(evidence[key])
    return {**payload, "evidence": evidence}


#: The stored types that hide nothing: seats, counts, directions, colours, and cards face up for everyone.
PUBLIC: frozenset[str] = frozenset(
    type_name(kind)
    for kind in (
        ev.DealerDrawn,
        ev.CardFlipped,
        ev.CardPlayed,
        ev.Passed,
        ev.DirectionReversed,
        ev.ColourChosen,
        ev.HandsTraded,
        ev.HandsRotated,
        ev.JumpedIn,
        ev.StackAccepted,
        ev.UnoCalled,
        ev.UnoCaught,
        ev.Wd4Accepted,
        ev.Prompted,
        ev.RoundEnded,
        ev.GameEnded,
    )
)

_REDACTIONS: dict[str, Callable[[Payload, Caller, Players], Payload]] = {
    type_name(ev.GameCreated): _created,
    type_name(ev.RoundStarted): _round_started,
    type_name(ev.CardDrawn): _own_cards("card"),
    type_name(ev.CardsTaken): _own_cards("cards"),
    type_name(ev.LauncherPressed): _own_cards("cards"),
    type_name(ev.PileReshuffled): _pile,
    type_name(ev.FlipReturned): _pile,
    type_name(ev.Wd4Challenged): _challenge,
    type_name(DisputeRuled): _ruling,
}


def redact(kind: str, payload: Mapping[str, Any], caller: Caller, players: Players) -> Payload:
    """``payload`` as ``caller`` may see it."""
    if caller.admin:
        return dict(payload)
    redaction = _REDACTIONS.get(kind)
    return redaction(dict(payload), caller, players) if redaction else dict(payload)


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
    if caller.admin:
        hands = [pb.Hand(seat=seat, cards=[c.token for c in hand]) for seat, hand in enumerate(state.hands)]
    elif caller.seat is not None:
        hands = [pb.Hand(seat=caller.seat, cards=[c.token for c in state.hands[caller.seat]])]
    else:
        hands = []
    drawn = ""
    if (
        state.drawn is not None
        and state.awaiting is Awaiting.DRAWN
        and (caller.admin or caller.seat == state.turn)
    ):
        drawn = state.drawn.token
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
        drawn=drawn,
        pending_draw=state.pending,
        house_rules=house_rules,
        jumpable=jumpable(state),
        top_by=state.top_by if state.top_by is not None else -1,
    )


#: What a jump-in may not interrupt (``house.jump-in``), besides a round not in play.
_NO_JUMPING_IN = frozenset(
    {
        Awaiting.STACK,
        Awaiting.WD4_RESPONSE,
        Awaiting.COLOUR,
        Awaiting.TARGET,
        Awaiting.ROUND_START,
        Awaiting.GAME_OVER,
    }
)


def jumpable(state: State) -> bool:
    """Whether a jump-in on the top card may be made now (by a seat other than ``top_by`` holding its
    twin): the house rule is on, no turn action came since the card went down and nothing waits that a
    jump-in may not interrupt — as :func:`service.rules.house.check_jump_in` judges it."""
    return state.options.jump_in and state.jumpable and state.awaiting not in _NO_JUMPING_IN
