"""The typed reports give, byte for byte, the JSON and text the verifier gave before they were typed.

``tests/data/reports/`` holds outputs captured from the dict-based reports (the code of commit f5e0686),
from inputs kept in the repository: the record files of ``tests/data/records/``, the golden stored logs
of ``tests/data/stored/`` (``tests/golden.py``), and an imported record with disputes built here. They are
never regenerated to make a test pass: a difference is a change of a documented output.

* ``record.NAME.json`` — ``verify --record NAME --json``;
* ``stored.VARIANT.json`` / ``.txt`` — a stored game's report (``verify --game``), seed shown;
* ``adjudication.VARIANT.json`` / ``.txt`` — ``adjudicate catch`` at the golden log's disputed position,
  naming another catcher (a mismatch);
* ``imported.classic_uno_catch.json`` / ``.txt`` and ``adjudication.imported.N.json`` / ``.txt`` — an
  imported record whose log holds disputes ruled on the recorded catch, on one described, on one named
  otherwise, and one left open.

Only the text of a record's rulings changed on purpose when one renderer took over both reports ("the
table did not say", as a stored game's report always said): ``test_one_renderer.py`` covers it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.audit.log import GameLog
from service.audit.render import render, render_adjudication
from service.audit.stored_game import adjudicate, verify_game
from service.domain.entries import DisputeFiled, DisputeKind
from service.records.record import read_record
from service.records.verify import verify_record
from service.rules.options import Variant
from tests import golden

from .logs import chained, imported_rows

DATA = Path(__file__).parent.parent / "data"
REPORTS = DATA / "reports"
RECORDS = sorted((DATA / "records").glob("*.jsonl"))


def captured(name: str) -> str:
    return (REPORTS / name).read_text(encoding="utf-8")


def dumped(value: object) -> str:
    """``value`` as the command line prints it with ``--json``."""
    return json.dumps(value, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("path", RECORDS, ids=lambda path: path.stem)
def test_a_record_report_is_the_json_it_was(path: Path) -> None:
    report = verify_record(read_record(path.read_text(encoding="utf-8")))

    assert dumped(report.to_json()) == captured(f"record.{path.stem}.json")


STOPPED = (
    '{"record": "uno-game-record/1", "variant": "classic", "players": ["ann", "bob"], "options": {}}\n'
    '{"round": 1, "dealer": "bob", "hands": {"ann": ["R1", "G7", "B5", "Y2", "RS", "W", "W+4"], '
    '"bob": ["R3", "G5", "B1", "Y9", "G2", "B7", "Y6"]}, "first": ["R9"]}\n'
    '{"by": "ann", "play": "G7"}\n{"by": "ann", "catch": "bob"}\n{"by": "bob", "challenge": true}\n'
    '{"by": "bob", "play": "G9"}\n'
)


def test_a_refused_challenge_and_a_stopped_record_are_the_json_they_were() -> None:
    report = verify_record(read_record(STOPPED))

    assert dumped(report.to_json()) == (
        '{"valid": false, "variant": "classic", "violations": [{"line": 3, "rule": "play.match", "message": '
        '"G7 does not match R9 (active colour R)"}, {"line": 5, "rule": "wd4.challenge", "message": '
        '"no Wild Draw Four is waiting for an answer"}, {"line": 6, "rule": "play.in-hand", "message": '
        '"the record cannot be followed: bob does not hold G9"}], "rulings": [{"line": 4, "kind": '
        '"uno-catch", "by": "ann", "against": "bob", "verdict": "no-penalty", "rule": "uno.catch.invalid", '
        '"evidence": {"hand": ["R3", "G5", "B1", "Y9", "G2", "B7", "Y6"], "active_colour": "G", "top": '
        '"G7", "window_opened": null, "window_closed": null, "called": null}, "reason": "bob holds 7 '
        'cards, not one", "applied_ok": null}, {"line": 5, "kind": "wd4-challenge", "by": "bob", '
        '"against": "", "verdict": "failed", "rule": "wd4.challenge", "evidence": {"played_at": null}, '
        '"reason": "no Wild Draw Four is waiting for an answer", "applied_ok": null}], "rounds": [], '
        '"scores": {"ann": 0, "bob": 0}, "winner": null, "final": {"hands": {"ann": ["R1", "B5", "Y2", '
        '"RS", "W", "W+4"], "bob": ["R3", "G5", "B1", "Y9", "G2", "B7", "Y6"]}, "top": "G7", "colour": '
        '"G", "turn": "bob"}, "stopped_at": 6}\n'
    )


def golden_log(variant: Variant) -> GameLog:
    meta, rows = golden.read(variant)
    return GameLog(meta["game_id"], rows, bytes.fromhex(meta["seed"]))


@pytest.mark.parametrize("variant", list(Variant), ids=lambda variant: variant.value)
def test_a_stored_games_report_is_the_json_and_text_it_was(variant: Variant) -> None:
    report = verify_game(golden_log(variant), show_seed=True)

    assert dumped(report.to_json()) == captured(f"stored.{variant.value}.json")
    assert render(report) + "\n" == captured(f"stored.{variant.value}.txt")


@pytest.mark.parametrize("variant", list(Variant), ids=lambda variant: variant.value)
def test_an_adjudication_is_the_json_and_text_it_was(variant: Variant) -> None:
    log = golden_log(variant)
    disputed = next(row.payload["position"] for row in log.rows if row.type == DisputeFiled.__name__)

    # p2 named as the caught player: in three of the games nobody holds a single card there, and a catch
    # naming no one would be refused (nothing to judge).
    found = adjudicate(log, DisputeKind.UNO_CATCH, disputed, by=0, target=1)

    assert dumped(found.to_json()) == captured(f"adjudication.{variant.value}.json")
    assert render_adjudication(found) + "\n" == captured(f"adjudication.{variant.value}.txt")


IMPORTED = "imported-classic-uno-catch"
#: The disputes of the imported record: (filer, position, by, target, ruled). Its catch is at line 9,
#: position 10; position 8 is the play of R1, where the log holds no catch.
DISPUTES = [(0, 10, None, None, True), (0, 8, 1, 0, True), (1, 10, 0, None, True), (1, 10, None, None, False)]


def imported_with_disputes() -> GameLog:
    """The record imported as the auditor imports it, then every dispute filed and (but the last) ruled
    as the auditor rules: the typed adjudication written as the stored ``DisputeRuled`` entry."""
    rows = imported_rows(IMPORTED, (DATA / "records" / "classic_uno_catch.jsonl").read_text(encoding="utf-8"))
    for number, (seat, position, by, target, ruled) in enumerate(DISPUTES, start=1):
        dispute_id = f"d-{number}"
        filed = DisputeFiled(
            dispute_id, seat, DisputeKind.UNO_CATCH.value, position, target, f"claim {number}", by=by
        )
        rows = chained(IMPORTED, [filed], rows)
        if ruled:
            found = adjudicate(GameLog(IMPORTED, rows), DisputeKind.UNO_CATCH, position, by=by, target=target)
            rows = chained(IMPORTED, [found.ruled(dispute_id, f"note {number}")], rows)
    return GameLog(IMPORTED, rows)


def test_an_imported_record_with_disputes_and_rulings_is_the_json_and_text_it_was() -> None:
    # The rulings' entries are in the log, hash-chained: the chain's head is only the captured one if
    # every stored payload (the outcome at import, each ruling's evidence) is the one stored before.
    report = verify_game(imported_with_disputes(), show_seed=True)

    assert dumped(report.to_json()) == captured("imported.classic_uno_catch.json")
    assert render(report) + "\n" == captured("imported.classic_uno_catch.txt")


@pytest.mark.parametrize(
    ("position", "by", "target"), [(10, None, None), (8, 1, 0)], ids=["recorded", "described"]
)
def test_an_adjudication_of_an_imported_record_is_the_json_and_text_it_was(
    position: int, by: int | None, target: int | None
) -> None:
    # The described catch names ann: at position 8 she holds two cards, and a catch naming no one would
    # be refused (nothing to judge).
    found = adjudicate(imported_with_disputes(), DisputeKind.UNO_CATCH, position, by=by, target=target)

    assert dumped(found.to_json()) == captured(f"adjudication.imported.{position}.json")
    assert render_adjudication(found) + "\n" == captured(f"adjudication.imported.{position}.txt")
