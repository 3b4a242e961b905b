"""Receipts against logs: every rewrite of a game's history before a receipt is caught at that receipt,
even when the rewriter recomputed the whole hash chain; nothing after it is blamed on it.

The logs are real games (bots, every rule set) encoded as the store encodes them; rewrites are made the
way a database superuser would: edit, delete or swap rows, then recompute every later hash so the chain
is consistent again.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.checkpoints import Signer, game_checkpoint
from service.checkpoints.receipts import (
    MATCHES,
    MISSING,
    REFUSED,
    REWRITTEN,
    check_receipts,
    read_receipts,
    recomputed_heads,
)
from service.domain.catalogue import CATALOGUE
from service.play.simulate import play_game
from service.rules import Variant
from service.store.model import GENESIS_HASH, StoredEvent, chain_hash
from tests.tiers import examples

SERVICE = "uno-audit.example"
GAME = "6f1c1f9e-3a55-4f61-9a4e-0d6d3c1f0a11"
SIGNER = Signer.from_seed(SERVICE, bytes(range(32)))
OTHER = Signer.from_seed(SERVICE, bytes(range(1, 33)))  # same name, another key: a forger's


def _rows(variant: Variant, seed: int) -> list[StoredEvent]:
    game = play_game(variant, 3, seed, checks=False)
    rows = []
    previous = GENESIS_HASH
    for version, event in enumerate(game.events, start=1):
        kind, payload = CATALOGUE.encode(event)
        digest = chain_hash(previous, GAME, version, kind, payload)
        rows.append(
            StoredEvent(version, GAME, version, kind, payload, {}, datetime.now(UTC), 1, previous, digest)
        )
        previous = digest
    return rows


def _rechained(rows: list[StoredEvent]) -> list[StoredEvent]:
    """``rows`` numbered 1, 2, … with every hash recomputed: a rewrite the chain check cannot see."""
    out = []
    previous = GENESIS_HASH
    for version, row in enumerate(rows, start=1):
        digest = chain_hash(previous, GAME, version, row.type, row.payload)
        out.append(
            StoredEvent(
                row.position,
                GAME,
                version,
                row.type,
                row.payload,
                row.metadata,
                row.recorded_at,
                row.xid,
                previous,
                digest,
            )
        )
        previous = digest
    return out


def _receipts(rows: list[StoredEvent], signer: Signer = SIGNER) -> list[str]:
    return [game_checkpoint(SERVICE, GAME, row.version, row.hash).sign(signer) for row in rows]


ROWS = {variant: _rows(variant, 11) for variant in Variant}
#: The receipts the players of each game kept: one per version, signed once (Ed25519 is deterministic).
RECEIPTS = {variant: _receipts(rows) for variant, rows in ROWS.items()}


def _check(rows: list[StoredEvent], receipts: list[str]) -> list[str]:
    checks = check_receipts(GAME, rows, receipts, service=SERVICE, log_keys=[SIGNER.verifier])
    return [check.verdict for check in checks]


def test_every_receipt_of_an_untouched_log_matches() -> None:
    for variant, rows in ROWS.items():
        assert set(_check(rows, RECEIPTS[variant])) == {MATCHES}


@st.composite
def rewrites(draw: st.DrawFn) -> tuple[Variant, list[StoredEvent], int]:
    """A game's rows rewritten from some version on (edited, deleted or swapped, then re-chained), and
    the version the rewrite was made at (the first version whose contents differ may be later: deleting
    the first of two equal events changes the history only from the second on)."""
    variant = draw(st.sampled_from(list(Variant)))
    rows = list(ROWS[variant])
    at = draw(st.integers(2, len(rows)))  # GameCreated stays: the rewrite is of the play
    how = draw(st.sampled_from(["edit", "delete", "swap"]))
    if how == "edit":
        row = rows[at - 1]
        payload = copy.deepcopy(row.payload)
        key = draw(st.sampled_from(sorted(payload) or ["note"]))
        payload[key] = draw(
            st.sampled_from([None, 0, 7, "R", "G", [], "edited"]).filter(lambda v: v != payload.get(key))
        )
        rows[at - 1] = StoredEvent(
            row.position,
            GAME,
            row.version,
            row.type,
            payload,
            row.metadata,
            row.recorded_at,
            row.xid,
            row.prev_hash,
            row.hash,
        )
    elif how == "delete":
        del rows[at - 1]
    else:
        if at == len(rows):
            at -= 1
        rows[at - 1], rows[at] = rows[at], rows[at - 1]
    return variant, _rechained(rows), at


def _first_difference(rewritten: list[StoredEvent], original: list[StoredEvent]) -> int | None:
    """The first version whose type or payload differs between the two logs (a log that is a prefix of
    the other differs at the version only the other has), or None if they are the same."""
    for version, (new, old) in enumerate(zip(rewritten, original, strict=False), start=1):
        if (new.type, new.payload) != (old.type, old.payload):
            return version
    if len(rewritten) != len(original):
        return min(len(rewritten), len(original)) + 1
    return None


def _caught_from(variant: Variant, rewritten: list[StoredEvent]) -> None:
    """Every receipt before the first version that differs matches, and every one from it on is caught."""
    original = ROWS[variant]
    differs = _first_difference(rewritten, original)
    if differs is None:
        return  # a swap of two equal events, or a delete of one of two: the history is the same
    verdicts = _check(rewritten, RECEIPTS[variant])
    assert verdicts[: differs - 1] == [MATCHES] * (differs - 1), "a receipt before the rewrite was blamed"
    for version, verdict in enumerate(verdicts[differs - 1 :], start=differs):
        assert verdict in (REWRITTEN, MISSING), f"the receipt at version {version} missed the rewrite"
    # The rewritten chain itself is consistent: only the receipts can tell.
    assert [r.hash for r in rewritten] == recomputed_heads(GAME, rewritten)


@settings(max_examples=examples(200), suppress_health_check=[HealthCheck.too_slow])
@given(rewrites())
def test_a_rewrite_with_a_recomputed_chain_is_caught_by_every_receipt_at_or_after_it(
    case: tuple[Variant, list[StoredEvent], int],
) -> None:
    variant, rewritten, at = case
    differs = _first_difference(rewritten, ROWS[variant])
    assert differs is None or differs >= at, "the history changed before the version rewritten"
    _caught_from(variant, rewritten)


def test_deleting_the_first_of_two_equal_events_is_caught_from_the_second() -> None:
    """A case the property once drew: two equal consecutive events, the first deleted. The history up
    to the first is unchanged, so its receipt rightly matches; the next one is caught."""
    equal = [
        (variant, version)
        for variant, rows in ROWS.items()
        for version in range(1, len(rows))
        if (rows[version - 1].type, rows[version - 1].payload) == (rows[version].type, rows[version].payload)
    ]
    assert equal, "no game here has two equal consecutive events"
    variant, at = equal[0]
    rows = ROWS[variant]
    rewritten = _rechained([*rows[: at - 1], *rows[at:]])
    assert _first_difference(rewritten, rows) == at + 1
    _caught_from(variant, rewritten)


def test_forged_re_signed_and_other_games_receipts_are_refused() -> None:
    rows = ROWS[Variant.CLASSIC]
    forged = _receipts(rows[:3], OTHER)  # same key name, another key
    other_game = [
        game_checkpoint(SERVICE, "another-game", rows[0].version, rows[0].hash).sign(SIGNER),
    ]
    tampered = _receipts(rows[:1])[0].replace("\n1\n", "\n2\n", 1)
    verdicts = _check(rows, [*forged, *other_game, tampered, "not a note"])
    assert verdicts == [REFUSED] * 6


def test_a_receipt_beyond_the_log_reports_the_missing_events() -> None:
    rows = ROWS[Variant.SONIC]
    receipts = _receipts(rows)
    verdicts = _check(rows[:-5], receipts)
    assert verdicts[-5:] == [MISSING] * 5
    assert set(verdicts[:-5]) == {MATCHES}


def test_a_receipts_file_is_json_lines_of_notes_or_objects() -> None:
    note = _receipts(ROWS[Variant.CLASSIC][:1])[0]
    text = json.dumps(note) + "\n\n" + json.dumps({"receipt": note, "version": 1}) + "\n"
    assert read_receipts(text) == [note, note]
    for bad in ["{", "[1]", '{"receipt": 5}', '""']:  # not JSON, not a note, not a string, empty
        with pytest.raises(ValueError, match="line 1"):
            read_receipts(bad)


def test_the_stored_hash_column_is_not_trusted() -> None:
    # An edit that leaves every stored hash as it was: the chain check reports it, and so does every
    # receipt from there on, because the head is recomputed from the events, not read from the column.
    rows = list(ROWS[Variant.MARIO_KART])
    row = rows[4]
    rows[4] = StoredEvent(
        row.position,
        GAME,
        row.version,
        row.type,
        {**row.payload, "edited": True},
        row.metadata,
        row.recorded_at,
        row.xid,
        row.prev_hash,
        row.hash,
    )
    verdicts = _check(rows, _receipts(ROWS[Variant.MARIO_KART]))
    assert verdicts[:4] == [MATCHES] * 4
    assert set(verdicts[4:]) == {REWRITTEN}
