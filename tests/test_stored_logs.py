"""Stored logs verify forever: the golden logs of every rule set, and a stored type's next schema version.

``tests/data/stored/`` holds one game of each rule set as the store held its rows when it was written
(``tests/golden.py``). Today's code must read every row through the catalogue, find the chain intact,
fold the game to the outcome it had, and verify its record as valid. Then a stored type gets a new
schema version (the shape of ``CardPlayed`` changes): logs written in the old shape still read, through
the upcaster, into exactly today's events, and still verify; without the upcaster, or from a version
newer than the code, a row is refused rather than misread.
"""

from __future__ import annotations

import dataclasses
from importlib import resources
from typing import Any

import pytest

from service.audit import log as stored_log
from service.audit.chain import check_chain
from service.audit.entries import DisputeFiled, DisputeRuled, SeedRevealed
from service.audit.log import GameLog
from service.audit.verify import verify_record
from service.catalogue import (
    CATALOGUE,
    VERSION_KEY,
    Catalogue,
    CatalogueError,
    Group,
    StoredType,
    decode,
    split,
    type_name,
)
from service.rules.events import CardPlayed, GameCreated
from service.rules.options import Variant
from service.rules.state import fold
from service.store import GENESIS_HASH, StoredEvent, chain_hash
from service.store.model import DISPUTE_TYPES
from tests import golden

VARIANTS = list(Variant)


def verified(rows: list[StoredEvent], meta: dict[str, Any]) -> dict[str, Any]:
    """The JSON report of the record the stored rows stand for, dealt from the revealed seed."""
    log = GameLog(meta["game_id"], rows, bytes.fromhex(meta["seed"]))
    return verify_record(log.record(reveal=True).record).to_json()


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.value)
def test_a_golden_log_reads_folds_and_verifies_with_todays_code(variant: Variant) -> None:
    meta, rows = golden.read(variant)
    expected = meta["expected"]

    assert check_chain(meta["game_id"], rows) == []
    parts = split(rows)
    assert len(parts.game) == expected["events"]
    assert [type(entry) for _, entry in parts.audit] == [DisputeFiled, SeedRevealed]
    created = parts.game[0][1]
    assert isinstance(created, GameCreated)
    state = fold(
        [dataclasses.replace(created, seed=bytes.fromhex(meta["seed"])), *(e for _, e in parts.game[1:])]
    )
    assert state.winner is not None
    assert state.players[state.winner] == expected["winner"]
    assert dict(zip(state.players, state.scores, strict=True)) == expected["scores"]

    report = verified(rows, meta)
    assert report["valid"], report["violations"][:3]
    assert (report["winner"], report["scores"], len(report["rounds"])) == (
        expected["winner"],
        expected["scores"],
        expected["rounds"],
    )


# --- a new schema version of a stored type ----------------------------------------------------------------


#: How an imagined older shape of ``CardPlayed`` named two of today's fields.
RENAMED = {"uno": "called_uno", "discarded": "also_discarded"}


def played_v1(payload: dict[str, Any]) -> dict[str, Any]:
    """``CardPlayed`` as the older shape stored it."""
    return {RENAMED.get(key, key): value for key, value in payload.items()}


def played_v1_to_v2(payload: dict[str, Any]) -> dict[str, Any]:
    """The upcaster from the older shape to today's."""
    back = {old: new for new, old in RENAMED.items()}
    return {back.get(key, key): value for key, value in payload.items()}


NEXT = CATALOGUE.with_type(
    StoredType("CardPlayed", CardPlayed, Group.GAME, version=2, upcasters=(played_v1_to_v2,))
)


def in_old_shape(rows: list[StoredEvent]) -> list[StoredEvent]:
    """The rows as the older code wrote them: ``CardPlayed`` in its version 1 shape, the chain over that."""
    out: list[StoredEvent] = []
    prev = GENESIS_HASH
    for row in rows:
        payload = played_v1(row.payload) if row.type == "CardPlayed" else row.payload
        digest = chain_hash(prev, row.game_id, row.version, row.type, payload)
        out.append(dataclasses.replace(row, payload=payload, prev_hash=prev, hash=digest))
        prev = digest
    return out


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.value)
def test_old_rows_read_through_the_upcaster_into_todays_events(variant: Variant) -> None:
    _, rows = golden.read(variant)
    old = in_old_shape(rows)
    assert any(row.type == "CardPlayed" and "called_uno" in row.payload for row in old)

    assert [NEXT.decode(row.type, row.payload) for row in old] == [
        decode(row.type, row.payload) for row in rows
    ]
    # Today's catalogue, which has no such version, refuses the old shape rather than misreading it.
    with pytest.raises(CatalogueError, match="has no field"):
        split(old)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.value)
def test_a_log_in_the_old_shape_still_verifies_after_the_change(
    variant: Variant, monkeypatch: pytest.MonkeyPatch
) -> None:
    meta, rows = golden.read(variant)
    before = verified(rows, meta)
    old = in_old_shape(rows)
    # The code after the change: its stored-game reader decodes through the catalogue with version 2.
    monkeypatch.setattr(stored_log, "decode_event", NEXT.decode_event)
    monkeypatch.setattr(stored_log, "decode_entry", NEXT.decode_entry)

    assert check_chain(meta["game_id"], old) == []
    after = verified(old, meta)
    assert after["valid"], after["violations"][:3]
    assert after == before


def test_the_new_version_is_written_with_its_mark_and_read_back() -> None:
    played = CardPlayed(1, CATALOGUE.decode("CardPlayed", {"player": 1, "card": "R1"}).card)  # type: ignore[union-attr]
    kind, payload = NEXT.encode(played)
    assert (kind, payload[VERSION_KEY]) == ("CardPlayed", 2)
    assert NEXT.decode(kind, payload) == played
    # A version-1 row has no mark; the current catalogue writes none.
    assert VERSION_KEY not in CATALOGUE.encode(played)[1]


@pytest.mark.parametrize("version", [3, 0, -1, "2", True, None])
def test_a_row_from_a_newer_or_unknown_version_is_refused(version: object) -> None:
    payload = {"player": 1, "card": "R1", "uno": False, "discarded": [], VERSION_KEY: version}
    with pytest.raises(CatalogueError, match="version"):
        NEXT.decode("CardPlayed", payload)


def test_a_version_needs_one_upcaster_per_older_version() -> None:
    with pytest.raises(ValueError, match="upcasters"):
        StoredType("CardPlayed", CardPlayed, Group.GAME, version=3, upcasters=(played_v1_to_v2,))
    with pytest.raises(ValueError, match="registered twice"):
        Catalogue([CATALOGUE["CardPlayed"], CATALOGUE["CardPlayed"]])


def test_every_stored_type_is_registered_once_in_its_group() -> None:
    assert "CardPlayed" in CATALOGUE.names(Group.GAME)
    assert "DisputeRuled" in CATALOGUE.names(Group.AUDIT)
    assert not CATALOGUE.names(Group.GAME) & CATALOGUE.names(Group.AUDIT)
    with pytest.raises(CatalogueError, match="unknown stored type"):
        decode("CardEaten", {})


def test_the_stores_dispute_types_are_the_catalogues_and_the_index_predicates() -> None:
    """The store lists the dispute types as SQL literals (the partial index ``events_disputes`` is only
    used for the very predicate it was built with): they must name the catalogue's dispute entries."""
    assert set(DISPUTE_TYPES) == {type_name(DisputeFiled), type_name(DisputeRuled)}
    assert set(DISPUTE_TYPES) <= CATALOGUE.names(Group.AUDIT)
    migration = resources.files("service.store").joinpath("migrations/0002_audit.sql").read_text()
    predicate = "WHERE type IN ({});".format(", ".join(f"'{name}'" for name in DISPUTE_TYPES))
    assert predicate in migration
