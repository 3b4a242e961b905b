"""One renderer writes a record's report and a stored game's: the two texts differ only where the reports
do — lines against positions, and the sections only a stored game has.

A record imported into the store stands at position *n* + 1 for its line *n*, so the stored game's text,
after its sections, is the record's text with every line turned into its position (in the reasons too)
and "the record" into "the game".
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from service.audit.log import GameLog
from service.audit.render import render
from service.audit.stored_game import verify_game
from service.cli.main import main
from service.records.record import read_record
from service.records.verify import verify_record

from .logs import imported_rows
from .test_report_goldens import STOPPED

RECORDS = sorted((Path(__file__).parent.parent / "data" / "records").glob("*.jsonl"))


def as_positions(line: str) -> str:
    """A line of a record's text as an imported game's text gives it."""
    line = re.sub(r"\bline (\d+)\b", lambda found: f"position {int(found[1]) + 1}", line)
    return line.replace("the record could not be followed", "the game could not be followed")


TEXTS = [path.read_text(encoding="utf-8") for path in RECORDS] + [STOPPED]


@pytest.mark.parametrize("text", TEXTS, ids=[path.stem for path in RECORDS] + ["stopped"])
def test_a_stored_games_text_ends_with_its_records_text_in_positions(text: str) -> None:
    record_text = render(verify_record(read_record(text))).splitlines()
    game_text = render(verify_game(GameLog("g", imported_rows("g", text)))).splitlines()

    judged = record_text[1:]  # after the heading: violations, rulings, rounds, scores, where it stopped
    assert judged, "a report always gives the scores"
    assert game_text[-len(judged) :] == [as_positions(line) for line in judged]
    assert game_text[0].startswith("game g: ") and record_text[0].endswith(("game: VALID", "game: INVALID"))


@pytest.mark.parametrize("path", RECORDS, ids=lambda path: path.stem)
def test_verify_record_prints_the_renderers_text(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["verify", "--record", str(path)])

    assert (
        capsys.readouterr().out == render(verify_record(read_record(path.read_text(encoding="utf-8")))) + "\n"
    )


def test_a_record_and_a_stored_game_word_the_tables_answer_alike() -> None:
    record_text = render(verify_record(read_record(STOPPED)))
    game_text = render(verify_game(GameLog("g", imported_rows("g", STOPPED))))

    said = "uno-catch by ann against bob: no-penalty [uno.catch.invalid] (bob holds 7 cards, not one); "
    assert f"  line 4: {said}the table did not say" in record_text.splitlines()
    assert f"  position 5: {said}the table did not say" in game_text.splitlines()
