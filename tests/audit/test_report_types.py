"""The typed reports turn into the JSON ``docs/RECORD.md`` documents, and their corner cases hold.

The examples are read from ``docs/RECORD.md`` itself, so the document and the code cannot drift apart: a
report built as typed values with the example's facts gives JSON with every key of the example, in the
example's order, with its values. ``"…"`` in an example stands for what it leaves out (a value, or, as
a key or a list's last item, the rest), a string ending in ``…`` for a value it abbreviates; the
additions this implementation documents in prose (``stopped_at``, the full evidence) may come on top.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from service.audit.game_report import (
    ChainSection,
    GameReport,
    GameStatus,
    Origin,
    ProjectionCheck,
    ReplaySection,
    SeedSection,
    SeedStatus,
    lost_game,
)
from service.audit.log import Dispute, GameLog
from service.audit.render import render
from service.audit.stored_game import verify_game
from service.checkpoints import Signer, game_checkpoint
from service.checkpoints.keyring import Keyring
from service.checkpoints.receipts import check_receipts
from service.domain.entries import DisputeFiled, DisputeKind, DisputeRuled
from service.domain.errors import NotFound
from service.records.report import (
    CatchEvidence,
    ChallengeEvidence,
    FinalTable,
    Finding,
    Outcome,
    RefusedChallengeEvidence,
    RoundScore,
    RulesReport,
    Ruling,
    Unit,
    Verdict,
)
from service.rules.cards import Colour, card, cards
from service.rules.options import Variant
from service.rules.violations import Rule

from .logs import imported_rows

RECORD_MD = Path(__file__).parent.parent.parent / "docs" / "RECORD.md"
ELIDED = "…"


def documented_example(section: str) -> object:
    """The JSON example under the heading ``section`` of ``docs/RECORD.md``."""
    text = RECORD_MD.read_text(encoding="utf-8")
    found = re.search(re.escape(section) + r".*?```json\n(.*?)```", text, re.DOTALL)
    assert found, f"no JSON example under {section!r}"
    return json.loads(found[1])


def conforms(documented: object, ours: object, where: str = "report") -> None:
    """Assert that ``ours`` is what ``documented`` shows (see the module docstring)."""
    if documented == ELIDED:
        return
    if isinstance(documented, str) and documented.endswith(ELIDED):
        assert isinstance(ours, str) and ours.startswith(documented[:-1]), (where, ours)
    elif isinstance(documented, dict):
        assert isinstance(ours, dict), (where, ours)
        keys = [key for key in documented if key != ELIDED]
        assert all(key in ours for key in keys), (where, keys, list(ours))
        assert sorted(keys, key=list(ours).index) == keys, (where, "order", keys, list(ours))
        for key in keys:
            conforms(documented[key], ours[key], f"{where}.{key}")
    elif isinstance(documented, list):
        assert isinstance(ours, list), (where, ours)
        rest = bool(documented) and documented[-1] == ELIDED  # more may follow what is shown
        shown = documented[:-1] if rest else documented
        assert (len(ours) >= len(shown)) if rest else (len(ours) == len(shown)), (where, ours)
        for index, item in enumerate(shown):
            conforms(item, ours[index], f"{where}[{index}]")
    else:
        assert ours == documented and type(ours) is type(documented), (where, ours, documented)


def test_the_documented_record_report_is_what_a_typed_report_gives() -> None:
    report = RulesReport(
        Variant.CLASSIC,
        (Finding(12, Rule.PLAY_MATCH, "B7 does not match R5 (active colour R)"),),
        (
            Ruling(
                20,
                DisputeKind.WD4_CHALLENGE,
                "cy",
                "bob",
                Verdict.UPHELD,
                Rule.WD4_CHALLENGE_UPHELD,
                ChallengeEvidence(cards("B2 G5"), Colour.BLUE, card("B9"), cards("B2"), 19),
                None,
                True,
            ),
            Ruling(
                31,
                DisputeKind.UNO_CATCH,
                "ann",
                "bob",
                Verdict.NO_PENALTY,
                Rule.UNO_CATCH_INVALID,
                CatchEvidence(cards("R7"), Colour.GREEN, card("GS"), 28, 30, None),
                "window closed at line 30",
                None,
            ),
        ),
        Outcome((RoundScore(1, "ann", 230),), {"ann": 230, "bob": 0, "cy": 0}, None),
        FinalTable({"ann": (), "bob": cards("R7"), "cy": cards("B1")}, card("GS"), Colour.GREEN, "bob"),
        None,
    )

    conforms(documented_example("## The verifier's report"), report.to_json())


def test_the_documented_stored_game_report_is_what_a_typed_report_gives() -> None:
    players = ("ann", "bob", "cy")
    ruling = Ruling(
        96,
        DisputeKind.UNO_CATCH,
        "bob",
        "ann",
        Verdict.PENALTY,
        Rule.UNO_CATCH,
        CatchEvidence(cards("G7"), Colour.GREEN, card("G1"), 95, None, None),
        None,
        True,
    )
    outcome = Outcome((RoundScore(1, "ann", 112),), {"ann": 112, "bob": 0, "cy": 0}, "ann")
    ruled = DisputeRuled("d", "penalty", "uno.catch", None, "bob", "ann", 96, True, {}, "", None)
    report = GameReport(
        game_id="g",
        origin=Origin.LIVE,
        version=414,
        status=GameStatus.OVER,
        rules=RulesReport(
            Variant.CLASSIC, (), (ruling,), outcome, FinalTable({}, None, None, None), None, Unit.POSITION
        ),
        unreadable=None,
        chain=ChainSection(414, bytes.fromhex("9f1c" + "00" * 30), ()),
        seed=SeedSection("5e0a" + "0" * 60, SeedStatus.REVEALED, 412, bytes([0xC4] * 32), True, 414, ()),
        replay=ReplaySection(None, outcome, outcome),
        projections=ProjectionCheck(()),
        players=players,
        disputes=(Dispute(413, DisputeFiled("d", 0, "uno-catch", 96, None, "too late"), 414, ruled),),
        unreadable_entries=(),
    )

    conforms(documented_example("## A stored game's report"), report.to_json())


def test_the_documented_lost_game_is_what_receipts_of_a_game_never_stored_give() -> None:
    keyring = Keyring(Signer.generate("svc"))
    genuine = [keyring.receipt("g", version, bytes([version]) * 32) for version in (4, 6, 16)]
    forged = game_checkpoint("svc", "g", 99, bytes(32)).sign(Signer.generate("svc"))
    checks = check_receipts("g", (), [*genuine, forged], service="svc", log_keys=keyring.published)
    lost = lost_game("g", checks)

    conforms(documented_example("**A game lost whole.**"), lost.to_json())
    assert [c.verdict for c in lost.receipts] == ["missing", "missing", "missing", "refused"]
    assert (lost.valid, lost.first_missing_version, lost.signed_up_to) == (False, 4, 16)
    assert render(lost).splitlines() == [
        "game g: INVALID (lost: a receipt names it, the store holds none of it)",
        "  not in the store: it holds no event of game 'g', yet the service signed receipts for it up to "
        "version 16",
        "  4 receipts: 3 missing (their versions are past the log's end); 1 refused (not this game's, or not "
        "signed by a key given)",
    ]


@pytest.mark.parametrize(
    ("notes", "says"),
    [
        ([], "no game 'g'"),
        (
            ["not a note"],
            "no game 'g', and the one receipt given is not a receipt this service signed for it",
        ),
        (["x", "y"], "no game 'g', and none of the 2 given is a receipt this service signed for it"),
        (
            ["other game"],
            "no game 'g', and the one receipt given is not a receipt this service signed for it",
        ),
    ],
)
def test_no_genuine_receipt_leaves_an_unknown_game_unknown(notes: list[str], says: str) -> None:
    keyring = Keyring(Signer.generate("svc"))
    # A genuine receipt of another game is no evidence for this one (a misspelt id).
    given = [keyring.receipt("h", 4, bytes(32)) if note == "other game" else note for note in notes]
    checks = check_receipts("g", (), given, service="svc", log_keys=keyring.published)
    with pytest.raises(NotFound) as unknown:
        lost_game("g", checks)
    assert unknown.value.reason == "UNKNOWN_GAME" and str(unknown.value).startswith(says)
    assert ("nothing says it was lost" in str(unknown.value)) == bool(notes)


def test_evidence_given_in_positions_moves_only_its_lines() -> None:
    catch = CatchEvidence(cards("G7"), Colour.GREEN, card("G1"), 9, None, 11)
    challenge = ChallengeEvidence(cards("W+4 B2"), Colour.BLUE, card("B3"), cards("B2"), 3)

    assert catch.placed(lambda line: line + 100) == CatchEvidence(
        cards("G7"), Colour.GREEN, card("G1"), 109, None, 111
    )
    assert challenge.placed(lambda line: line * 2).to_json() == {
        "hand": ["W+4", "B2"],
        "active_colour": "B",
        "top": "B3",
        "matching": ["B2"],
        "played_at": 6,
    }
    assert RefusedChallengeEvidence(None).placed(lambda line: line + 1).to_json() == {"played_at": None}


@pytest.mark.parametrize(
    "stored",
    [
        {},
        {"rounds": [{"round": 1}], "scores": {}, "winner": None},
        {"rounds": 3, "scores": {}, "winner": None},
        {"rounds": [], "scores": [[1, 2]], "winner": None},
        {"rounds": [{"round": 1, "winner": "ann", "points": 3, "by": "bob"}], "scores": {}, "winner": None},
    ],
    ids=["empty", "short-round", "not-a-list", "scores-as-pairs", "round-with-other-keys"],
)
def test_an_outcome_that_does_not_read_as_one_is_refused(stored: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="not an outcome"):
        Outcome.from_json(stored, verdict=False)


CAUGHT = (Path(__file__).parent.parent / "data" / "records" / "classic_uno_catch.jsonl").read_text(
    encoding="utf-8"
)


def test_an_imported_games_outcome_that_no_longer_reads_is_reported_as_differing() -> None:
    report = verify_game(GameLog("g", imported_rows("g", CAUGHT, outcome={"valid": "yes"})))

    assert report.replay is not None and report.replay.stored is None and report.replay.outcome_differs
    assert report.chain.valid and report.rules_valid and not report.valid
    assert report.to_json()["replay"] == {
        "diverged_at": None,
        "outcome_differs": True,
        "stored": None,
        "replayed": report.replay.replayed.to_json(),
    }
    assert "    stored:   unreadable (the log's outcome is not one)" in render(report).splitlines()


def test_a_report_of_a_log_that_cannot_be_read_back_keeps_its_keys_in_their_order() -> None:
    unreadable = CAUGHT.replace('"play": "RR"', '"play": "R10"', 1)  # line 5: no such card

    report = verify_game(GameLog("g", imported_rows("g", unreadable, outcome={})))

    assert report.rules is None and report.unreadable is not None and report.unreadable.position == 6
    assert list(report.to_json()) == [
        "game_id",
        "origin",
        "unreadable",
        "version",
        "status",
        "valid",
        "rules_valid",
        "variant",
        "violations",
        "rulings",
        "rounds",
        "scores",
        "winner",
        "final",
        "stopped_at",
        "chain",
        "seed",
        "replay",
        "projections",
        "disputes",
        "unreadable_entries",
    ]
    assert report.to_json()["stopped_at"] == 6 and report.to_json()["final"] is None
    assert render(report).splitlines()[-2:] == [
        "  scores: -; winner: none yet",
        "  the game could not be followed past position 6",
    ]
