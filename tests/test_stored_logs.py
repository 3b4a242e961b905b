"""Stored logs verify forever: the golden logs of every rule set, and a stored type's next schema version.

``tests/data/stored/`` holds one game of each rule set as the store held its rows when it was written, one
stored across the upgrade to row hash version 2 with its command ledger, and one whose round the admin dealt
from a fixed deck (``tests/golden.py``). Today's code must read every row, find the chain (and the ledger)
intact, fold the game to the outcome it had, and verify its record; every row is written today as it was
stored. Then a stored type gets a new schema version (``CardPlayed`` changes shape): old logs still read,
through the upcaster, into exactly today's events, and still verify; without the upcaster, or from a
version newer than the code, a row is refused rather than misread.
"""

from __future__ import annotations

import dataclasses
import json
from importlib import resources
from typing import Any

import pytest

from service.audit import log as stored_log
from service.audit.chain import check_chain
from service.audit.ledger import check_ledger
from service.audit.log import GameLog
from service.audit.stored_game import verify_game
from service.domain.catalogue import (
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
from service.domain.entries import DisputeFiled, DisputeRuled, SeedRevealed
from service.records.verify import verify_record
from service.rules.events import CardPlayed, GameCreated
from service.rules.options import Variant
from service.rules.state import fold
from service.store import GENESIS_HASH, StoredEvent, chain_hash
from service.store.model import DISPUTE_TYPES, stored_hash
from tests import golden

VARIANTS = list(Variant)
#: Every golden log: the rule sets' (row hash version 1), the one stored across the upgrade to version 2, and
#: the one dealt from a fixed deck.
LOGS: list[Variant | str] = [*VARIANTS, golden.UPGRADED, golden.FIXED]


def named(log: Variant | str) -> str:
    return log.value if isinstance(log, Variant) else log


def verified(rows: list[StoredEvent], meta: dict[str, Any]) -> dict[str, Any]:
    """The JSON report of the record the stored rows stand for, dealt from the revealed seed."""
    log = GameLog(meta["game_id"], rows, bytes.fromhex(meta["seed"]))
    return verify_record(log.record(reveal=True).record).to_json()


@pytest.mark.parametrize("variant", LOGS, ids=named)
def test_a_golden_log_reads_folds_and_verifies_with_todays_code(variant: Variant | str) -> None:
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


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.value)
def test_a_golden_log_of_row_hash_version_1_reads_as_it_always_did(variant: Variant) -> None:
    _, rows = golden.read(variant)
    lines = golden.path_of(variant).read_text(encoding="utf-8").splitlines()[1:]

    assert {(row.hash_version, row.recorded_at) for row in rows} == {(1, golden.AT)}
    assert [golden.row_json(row, stamped=False) for row in rows] == [json.loads(line) for line in lines]


@pytest.mark.parametrize("variant", LOGS, ids=named)
def test_every_row_of_a_golden_log_is_written_today_as_it_was_stored(variant: Variant | str) -> None:
    # A field added to a stored type since (RoundStarted.fixed_by) is left out while unused: today's code
    # writes the same payload, so a game dealt as before is stored, hashed and chained as before.
    _, rows = golden.read(variant)
    assert [written_today(row.type, row.payload) for row in rows] == [(row.type, row.payload) for row in rows]


def written_today(kind: str, payload: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The stored form today's code writes of the event or entry a row decodes to."""
    return CATALOGUE.encode(decode(kind, payload))


def test_the_fixed_deck_golden_log_says_who_fixed_its_round_and_verifies() -> None:
    meta, rows = golden.read(golden.FIXED)
    [started] = [row for row in rows if row.type == "RoundStarted"]
    assert started.payload["fixed_by"] == "admin" and started.metadata["actor"] == "admin"
    assert started.payload["deck"] == [card.token for card in golden.fixed_deck()]

    record = GameLog(meta["game_id"], rows, bytes.fromhex(meta["seed"])).record(reveal=True).record
    assert [block.start.fixed_by for block in record.rounds] == ["admin"]
    report = json.loads(json.dumps(verify_record(record).to_json()))
    assert report["valid"], report["violations"][:3]
    assert [(d["line"], d["round"], d["by"]) for d in report["fixed_decks"]] == [(2, 1, "admin")]
    stored = verify_game(GameLog(meta["game_id"], rows, bytes.fromhex(meta["seed"])), show_seed=True)
    assert stored.valid, stored.first_problem()
    assert stored.seed is not None and stored.seed.mismatches == ()
    # The round's command (CreateGame, which dealt it) begins at position 2, after GameCreated.
    said = json.loads(json.dumps(stored.to_json()))["fixed_decks"]
    assert [(d["position"], d["round"], d["by"]) for d in said] == [(2, 1, "admin")]


def test_the_upgraded_golden_log_reads_back_as_written_with_every_stored_hash() -> None:
    meta, rows = golden.read(golden.UPGRADED)
    lines = golden.path_of(golden.UPGRADED).read_text(encoding="utf-8").splitlines()
    upgraded_at = meta["upgraded_at"]

    assert [golden.row_json(row, stamped=True) for row in rows] == [json.loads(line) for line in lines[1:]]
    assert [golden.ledger_json(row) for row in golden.ledger(meta)] == meta["ledger"]
    # Version 1 up to the upgrade, version 2 after it, the audit entries too; never back.
    assert [row.hash_version for row in rows] == [1] * (upgraded_at - 1) + [2] * (len(rows) - upgraded_at + 1)
    assert [type(entry) for _, entry in split(rows).audit] == [DisputeFiled, SeedRevealed]
    v1, v2 = rows[: upgraded_at - 1], rows[upgraded_at - 1 :]
    assert {frozenset(row.metadata) for row in v1[1:]} == {frozenset({"command_id", "actor", "command"})}
    assert {frozenset(row.metadata) for row in v2} == {
        frozenset({"command_id", "request_sha256", "actor", "command"})
    }
    assert all(row.recorded_at.microsecond for row in rows)  # the times hash to the microsecond
    # The hashes as written: a change of either version's hash formula breaks this (and the chain check).
    assert [stored_hash(row) for row in rows] == [row.hash for row in rows]
    # The same game as the classic golden log, only stored across the upgrade.
    assert meta["expected"] == golden.read(Variant.CLASSIC)[0]["expected"]


def test_the_upgraded_golden_logs_ledger_is_the_one_its_rows_say() -> None:
    meta, rows = golden.read(golden.UPGRADED)
    ledger = golden.ledger(meta)

    # The ledger by hand: each run of rows of one command id is a command, written at its rows' time;
    # the request hash is in the rows' metadata from version 2 on.
    runs: list[list[StoredEvent]] = []
    for row in rows:
        if runs and runs[-1][0].metadata["command_id"] == row.metadata["command_id"]:
            runs[-1].append(row)
        else:
            runs.append([row])
    said = [
        (run[0].metadata["command_id"], run[0].version, run[-1].version, run[0].recorded_at) for run in runs
    ]
    assert [(r.command_id, r.first_version, r.last_version, r.recorded_at) for r in ledger] == said
    hashed = [
        (r.command_id, r.request_sha256.hex()) for r in ledger if r.first_version >= meta["upgraded_at"]
    ]
    assert hashed == [
        (run[0].metadata["command_id"], run[0].metadata["request_sha256"])
        for run in runs
        if run[0].hash_version == 2
    ]
    assert len(hashed) == len(ledger) - golden.UPGRADE_AT and hashed[-1][0] == "reveal"

    chain = check_chain(meta["game_id"], rows, ledger[-1].last_version)
    assert chain == []
    assert check_ledger(rows, ledger, chain) == []


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
