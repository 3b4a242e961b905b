"""The JSON form of events: every event of simulated games survives the round trip; bad payloads fail."""

from __future__ import annotations

import json

import pytest

from service.domain.catalogue import decode_event
from service.domain.catalogue import encode as encode_event
from service.domain.codec import CodecError
from service.play.simulate import play_game
from service.rules import Variant, card
from service.rules.events import CardPlayed, CardsTaken
from service.rules.violations import Rule
from service.store.canonical import canonical


@pytest.mark.parametrize("variant", list(Variant))
def test_every_event_of_a_game_round_trips_through_json(variant: Variant) -> None:
    game = play_game(variant, 4, 21, checks=False)
    kinds = set()
    for event in game.events:
        kind, payload = encode_event(event)
        kinds.add(kind)
        assert decode_event(kind, json.loads(json.dumps(payload))) == event
    assert {"GameCreated", "RoundStarted", "CardPlayed", "Prompted", "GameEnded"} <= kinds


def test_payloads_are_plain_readable_json() -> None:
    kind, payload = encode_event(CardsTaken(2, (card("R7"), card("W+4")), Rule.WD4_ACCEPT))
    assert kind == "CardsTaken"
    assert payload == {"player": 2, "cards": ["R7", "W+4"], "cause": "wd4.accept"}


def test_canonical_bytes_do_not_depend_on_key_order() -> None:
    kind, payload = encode_event(CardPlayed(1, card("GS")))
    shuffled = dict(reversed(list(payload.items())))
    assert canonical(kind, payload) == canonical(kind, shuffled)
    assert canonical(kind, payload).startswith(b'{"payload":{"card":"GS"')


@pytest.mark.parametrize(
    ("kind", "payload", "message"),
    [
        ("CardEaten", {}, "unknown event type 'CardEaten'"),
        ("CardPlayed", {"player": 1}, "lacks 'card'"),
        ("CardPlayed", {"player": 1, "card": "X9"}, "unknown card token 'X9'"),
        ("CardPlayed", {"player": "1", "card": "R1"}, "expected a whole number"),
        ("CardPlayed", {"player": 1, "card": "R1", "colour": "P"}, "CardPlayed.colour"),
        ("CardPlayed", {"player": 1, "card": "R1", "extra": 1}, "no field 'extra'"),
        ("CardsTaken", {"player": 1, "cards": "R1", "cause": "wd4.accept"}, "expected a list"),
    ],
)
def test_payloads_that_do_not_fit_are_rejected(kind: str, payload: dict[str, object], message: str) -> None:
    with pytest.raises(CodecError, match=message.replace(".", r"\.").replace("(", r"\(")):
        decode_event(kind, payload)
