"""What each caller may see: the one redaction of event payloads and of the game's hands.

The server is the dealer and knows every card. A seat sees its own hand and everyone's card counts; a
spectator sees counts; the admin (adjudicator) sees everything. In event payloads a card the caller may
not see is ``null``: the count stays visible, the card does not. Every game event type is listed once,
in :data:`_REDACTIONS` (what it hides) or in :data:`PUBLIC` (everyone may read it whole); a new type
must be placed in one or the other. docs/DESIGN.md ("What each caller sees") gives the reasoning.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from service.domain.auth import Caller
from service.domain.catalogue import type_name
from service.domain.entries import DisputeRuled
from service.rules import events as ev
from service.rules.cards import Card
from service.rules.events import Awaiting
from service.rules.state import State, dealt_positions

Payload = dict[str, Any]
#: The game's players by seat: a dealt deck's redaction needs their number, a ruling's their names.
Players = Sequence[str]


def _hidden(cards: list[Any]) -> list[None]:
    return [None] * len(cards)


def _round_started(payload: Payload, caller: Caller, players: Players) -> Payload:
    out = dict(payload)
    if payload.get("deck") is not None:
        # The deck's card tokens as stored: the compiled engine's deal() takes Card objects only.
        deck = payload["deck"]
        hands = [[deck[i] for i in seat] for seat in dealt_positions(len(players), payload["dealer"])]
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


def visible_hands(state: State, caller: Caller) -> list[tuple[int, tuple[Card, ...]]]:
    """The hands ``caller`` may see, by seat: all for the admin, its own for a seat, none for a spectator."""
    if caller.admin:
        return list(enumerate(state.hands))
    if caller.seat is not None:
        return [(caller.seat, tuple(state.hands[caller.seat]))]
    return []


def visible_drawn(state: State, caller: Caller) -> Card | None:
    """The card just drawn and waiting to be played or kept, if ``caller`` may see it (its drawer, the
    admin)."""
    if (
        state.drawn is not None
        and state.awaiting is Awaiting.DRAWN
        and (caller.admin or caller.seat == state.turn)
    ):
        return state.drawn
    return None


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
