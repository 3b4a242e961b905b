"""Dispute entries as stored: the payloads written before ``DisputeFiled.by`` and ``DisputeRuled.mismatch``
existed still decode, as their defaults; nothing else about decoding is loosened."""

from __future__ import annotations

from typing import Any

import pytest

from service.domain.catalogue import decode_entry, decode_event
from service.domain.catalogue import encode as encode_entry
from service.domain.codec import CodecError, required_fields
from service.domain.entries import DisputeFiled, DisputeRuled
from service.rules.events import CardPlayed

#: A ``DisputeFiled`` payload as the service stored it before a dispute could name its catcher.
OLD_FILED: dict[str, Any] = {
    "dispute_id": "d-1",
    "seat": 0,
    "kind": "uno-catch",
    "position": 20,
    "target": None,
    "claim": "bob caught me too late",
}
#: A ``DisputeRuled`` payload as the service stored it before rulings reported a mismatch.
OLD_RULED: dict[str, Any] = {
    "dispute_id": "d-1",
    "verdict": "penalty",
    "rule": "uno.catch",
    "reason": None,
    "by": "bob",
    "against": "ann",
    "position": 20,
    "recorded": True,
    "evidence": {"hand": ["G7"]},
    "note": "",
}


def test_an_old_dispute_filing_decodes_without_a_catcher() -> None:
    entry = decode_entry("DisputeFiled", OLD_FILED)
    assert entry == DisputeFiled("d-1", 0, "uno-catch", 20, None, "bob caught me too late", by=None)


def test_an_old_ruling_decodes_without_a_mismatch() -> None:
    entry = decode_entry("DisputeRuled", OLD_RULED)
    assert isinstance(entry, DisputeRuled)
    assert (entry.recorded, entry.by, entry.mismatch) == (True, "bob", None)


@pytest.mark.parametrize(
    "entry",
    [
        DisputeFiled("d-2", 2, "uno-catch", 19, 0, "cy caught ann", by=2),
        DisputeRuled("d-2", "penalty", "uno.catch", None, "bob", "ann", 20, True, {}, "", "by cy named, …"),
    ],
    ids=["filed", "ruled"],
)
def test_new_entries_round_trip_with_every_field(entry: DisputeFiled | DisputeRuled) -> None:
    kind, payload = encode_entry(entry)
    assert {"by", "mismatch"} & set(payload)  # written out, not left to the default
    assert decode_entry(kind, payload) == entry


@pytest.mark.parametrize(
    ("kind", "payload"),
    [
        ("DisputeFiled", {key: value for key, value in OLD_FILED.items() if key != "claim"}),
        ("DisputeFiled", {key: value for key, value in OLD_FILED.items() if key != "target"}),
        ("DisputeFiled", {**OLD_FILED, "catcher": 1}),
        ("DisputeFiled", {**OLD_FILED, "by": 1, "mismatch": None}),
        ("DisputeRuled", {key: value for key, value in OLD_RULED.items() if key != "recorded"}),
        ("DisputeRuled", {**OLD_RULED, "filer": 0}),
        ("DisputeAppealed", OLD_FILED),
    ],
    ids=[
        "missing-claim",
        "missing-target",
        "unknown-field",
        "a-ruling-field-on-a-filing",
        "missing-recorded",
        "unknown-ruling-field",
        "unknown-entry",
    ],
)
def test_only_a_field_with_a_default_may_be_missing(kind: str, payload: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        decode_entry(kind, payload)


def test_the_fields_a_stored_payload_must_hold_are_those_without_a_default() -> None:
    assert required_fields(DisputeFiled) == set(OLD_FILED)
    assert required_fields(DisputeRuled) == set(OLD_RULED)
    # The events follow the same rule: CardPlayed's colour, uno, target and discarded have defaults.
    played = decode_event("CardPlayed", {"player": 1, "card": "R1"})
    assert isinstance(played, CardPlayed)
    assert (played.player, played.card.token, played.colour, played.uno) == (1, "R1", None, False)
    with pytest.raises(CodecError, match="lacks 'card'"):
        decode_event("CardPlayed", {"player": 1})
