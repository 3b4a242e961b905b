"""Robustness: a record edited at random (lines swapped, dropped, re-attributed, cards changed) is either
refused as malformed, naming its line, or judged — the verifier and the adjudicator never crash on it,
whether it comes as a file or as an imported game's log."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.audit.log import GameLog
from service.audit.stored_game import AdjudicationError, adjudicate, verify_game
from service.play.simulate import play_game
from service.records.export import record_from_game
from service.records.record import RecordError, read_record, write_record
from service.records.verify import verify_record
from service.rules.cards import DECKS
from service.rules.options import Variant
from tests.tiers import examples

from .logs import imported_rows

TOKENS = sorted({card.token for deck in DECKS.values() for card in deck})


@st.composite
def edited_records(draw: st.DrawFn) -> str:
    variant = draw(st.sampled_from(list(Variant)))
    game = play_game(variant, draw(st.integers(2, 4)), draw(st.integers(0, 10_000)))
    lines = write_record(record_from_game(game)).splitlines()
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(2, len(lines) - 1))  # an action or round line, never the header
        edit = draw(st.sampled_from(["swap", "drop", "by", "card"]))
        if edit == "swap":
            other = draw(st.integers(2, len(lines) - 1))
            lines[at], lines[other] = lines[other], lines[at]
        elif edit == "drop" and len(lines) > 3:
            del lines[at]
        else:
            line = json.loads(lines[at])
            if edit == "by" and "by" in line:
                line["by"] = draw(st.sampled_from(json.loads(lines[0])["players"]))
            elif edit == "card" and "play" in line:
                line["play"] = draw(st.sampled_from(TOKENS))
            lines[at] = json.dumps(line)
    return "\n".join(lines) + "\n"


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edited_records())
def test_an_edited_record_is_refused_or_judged_never_a_crash(text: str) -> None:
    try:
        record = read_record(text)
    except RecordError as bad:
        assert bad.line >= 1
        return
    report = verify_record(record)
    log = GameLog("g", imported_rows("g", text))
    stored = verify_game(log)
    assert stored.rules_valid == report.valid and stored.chain.valid
    assert stored.replay is not None and not stored.replay.outcome_differs  # the verdict at import, read back
    for ruling in report.rulings:
        try:
            found = adjudicate(log, ruling.kind, ruling.at + 1)
        except AdjudicationError:
            continue  # the record stops before it
        assert found.recorded and found.ruling.verdict is ruling.verdict
