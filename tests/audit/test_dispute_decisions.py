"""A ruling on a dispute says what it decided of the dispute, about which catch or challenge: upheld
(with the remedy), rejected, or turning on what the table applied (the record does not say).

Every case the code can produce is swept — each kind (catch, heard challenge, refused challenge), each
verdict, the recorded one with the table agreeing, disagreeing or silent, and the one a dispute describes —
once as a table over :func:`decision` and once end to end, each case imported, disputed and ruled on: the
report's JSON, ``verify``'s text and the replay page carry the same sentence. The records are
``tests/audit/disputed.py``'s, with the table's ``applied`` written in.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

import pytest

from service.app.auditor import Auditor
from service.audit.decision import DisputeOutcome, decision, outcome_of
from service.audit.render import render
from service.domain.entries import DisputeKind, DisputeRuled
from service.store import EventStore
from tests.audit.disputed import (
    ANN,
    BOB,
    CATCH_PLAY_POSITION,
    CATCH_POSITION,
    CHALLENGE_POSITION,
    CY,
    WD4_POSITION,
    catch_record,
    challenge_record,
)
from tests.audit.test_replay_html import data_of

pytestmark = pytest.mark.postgres

UPHELD, REJECTED, CONDITIONAL = DisputeOutcome.UPHELD, DisputeOutcome.REJECTED, DisputeOutcome.CONDITIONAL
#: A ruled dispute's step on the replay page names the outcome (never the bare verdict).
RULED = {UPHELD: "upheld", REJECTED: "rejected", CONDITIONAL: "upheld only if the table did otherwise"}
CATCH, CHALLENGE = DisputeKind.UNO_CATCH.value, DisputeKind.WD4_CHALLENGE.value
#: What the table may have applied, as a record line says it: agreeing with the rules, not, or unsaid.
TABLE = ("agrees", "disagrees", "silent")
#: The verdicts of each sort of ruling: a catch, a challenge heard, a challenge refused (it fails).
VERDICTS = {"catch": ("penalty", "no-penalty"), "challenge": ("upheld", "failed"), "refused": ("failed",)}
#: Every (sort, verdict, recorded, outcome) a ruling can come to: a recorded one by what the table did, a
#: described one by its verdict alone (a refused challenge described fails).
_SORTED = [(sort, verdict) for sort in VERDICTS for verdict in VERDICTS[sort]]
ALL_CASES = {
    *(
        (sort, verdict, True, outcome_of(verdict, True, ok))
        for sort, verdict in _SORTED
        for ok in (True, False, None)
    ),
    *((sort, verdict, False, outcome_of(verdict, False, None)) for sort, verdict in _SORTED),
}


def ruling(sort: str, verdict: str, recorded: bool, reason: str | None = None) -> DisputeRuled:
    rule = {"catch": "uno.catch", "challenge": f"wd4.challenge.{verdict}", "refused": "wd4.challenge"}[sort]
    return DisputeRuled("d", verdict, rule, reason, "bob", "ann", 5, recorded, {}, "")


def test_the_outcome_is_the_table_against_the_rules_or_the_described_ones_verdict() -> None:
    for verdict, recorded, ok in itertools.product(
        ("penalty", "no-penalty", "upheld", "failed"), (True, False), (True, False, None)
    ):
        found = outcome_of(verdict, recorded, ok)
        if not recorded:
            assert found is (UPHELD if verdict in ("penalty", "upheld") else REJECTED)
        else:
            assert found is {True: REJECTED, False: UPHELD, None: CONDITIONAL}[ok]
    assert len(ALL_CASES) == 20


@pytest.mark.parametrize("case", sorted(ALL_CASES, key=repr), ids=repr)
def test_every_decision_says_the_disputes_outcome_about_what_and_the_remedy(
    case: tuple[str, str, bool, DisputeOutcome],
) -> None:
    sort, verdict, recorded, outcome = case
    kind = CATCH if sort == "catch" else CHALLENGE
    said = decision(kind, ruling(sort, verdict, recorded, "why"), outcome)
    opening = {
        UPHELD: "the dispute is upheld: ",
        REJECTED: "the dispute is rejected: ",
        CONDITIONAL: "the dispute turns on what the table applied, which the record does not say: ",
    }[outcome]
    assert said.startswith(opening), said
    subject = "bob's catch of ann" if sort == "catch" else "bob's challenge of ann's Wild Draw Four"
    assert subject in said and " by the rules (why)" in said
    # The verdict is the rules', never the dispute's: a word of its own, with the dispute's before it.
    clause = {
        "penalty": "earned the UNO penalty",
        "no-penalty": "earned no penalty",
        "upheld": "been upheld" if not recorded else "was upheld",
        "failed": "failed" if sort != "refused" else ("may not be made" if recorded else "could not have"),
    }[verdict]
    assert clause in said, said
    assert ("would have" in said or "could not have" in said) is (not recorded)
    assert ("remedy: " in said) is (outcome is not REJECTED)
    assert ("but the table" in said) is (recorded and outcome is UPHELD)
    if outcome is REJECTED and recorded:
        stands = {"penalty": "the penalty stands", "no-penalty": "no penalty is due"}
        stands |= {"upheld": "the challenge stands", "failed": "the failed challenge stands"}
        assert said.startswith(
            f"the dispute is rejected: {stands[verdict] if sort != 'refused' else 'the refusal stands'}, "
        )


def test_the_tournament_disputes_challenge_reads_as_the_dispute_rejected() -> None:
    """docs/arbiter.md's organiser: bot2 disputes bot3's challenge, which the table upheld as the rules do."""
    ruled = DisputeRuled("d", "upheld", "wd4.challenge.upheld", None, "bot3", "bot2", 54, True, {}, "")
    assert decision(CHALLENGE, ruled, outcome_of("upheld", True, True)) == (
        "the dispute is rejected: the challenge stands, bot3's challenge of bot2's Wild Draw Four was upheld "
        "by the rules"
    )


# --- end to end: imported, disputed, ruled on, then the three surfaces ------------------------------------


@dataclass(frozen=True, slots=True)
class Case:
    """A record, the dispute filed on it (kind, position, the challenger it names) and what its ruling
    must come to."""

    sort: str
    verdict: str
    recorded: bool
    outcome: DisputeOutcome
    text: str
    kind: DisputeKind
    position: int
    by: int | None = None


def _applied(sort: str, verdict: str, table: str) -> str | None:
    if table == "silent":
        return None
    if sort == "catch":
        said = "penalty" if verdict == "penalty" else "none"
        return said if table == "agrees" else ("none" if said == "penalty" else "penalty")
    return verdict if table == "agrees" else ("failed" if verdict == "upheld" else "upheld")


def _with_last_line(text: str, **fields: Any) -> str:
    lines = text.splitlines()
    last = {**json.loads(lines[-1]), **{k: v for k, v in fields.items() if v is not None}}
    if last.get("applied") == "none":
        last.pop("cards", None)  # the table gave no penalty: nobody took a card
    if last.get("applied") == "penalty" and "cards" not in last:
        last["cards"] = {"ann": ["B8", "B9"]}  # the penalty the table gave
    return "\n".join([*lines[:-1], json.dumps(last)]) + "\n"


#: Whether the table applied the verdict, as each way of writing ``applied`` makes it.
_OK = {"agrees": True, "disagrees": False, "silent": None}


def _recorded(sort: str, verdict: str, table: str, text: str, kind: DisputeKind, position: int) -> Case:
    return Case(sort, verdict, True, outcome_of(verdict, True, _OK[table]), text, kind, position)


def cases() -> list[Case]:
    catch, challenge = DisputeKind.UNO_CATCH, DisputeKind.WD4_CHALLENGE
    found: list[Case] = []
    for verdict in VERDICTS["catch"]:
        for table in TABLE:
            text = _with_last_line(catch_record(verdict), applied=_applied("catch", verdict, table))
            found.append(_recorded("catch", verdict, table, text, catch, CATCH_POSITION))
        # The catch the log does not hold: bob's of ann, right after her play.
        text = "\n".join(catch_record(verdict).splitlines()[:-1]) + "\n"
        outcome = outcome_of(verdict, False, None)
        found.append(Case("catch", verdict, False, outcome, text, catch, CATCH_PLAY_POSITION, by=BOB))
    for verdict in VERDICTS["challenge"]:
        for table in TABLE:
            text = _with_last_line(challenge_record(verdict), applied=_applied("challenge", verdict, table))
            found.append(_recorded("challenge", verdict, table, text, challenge, CHALLENGE_POSITION))
        outcome = outcome_of(verdict, False, None)
        found.append(
            Case("challenge", verdict, False, outcome, challenge_record(verdict), challenge, WD4_POSITION)
        )
    # Refused: cy, not the victim, challenges (recorded; the table may say "upheld") or is named (described).
    for table in TABLE:
        applied = {"agrees": "failed", "disagrees": "upheld", "silent": None}[table]
        text = _with_last_line(challenge_record("upheld"), by="cy", applied=applied)
        found.append(_recorded("refused", "failed", table, text, challenge, CHALLENGE_POSITION))
    text = challenge_record("upheld")
    found.append(Case("refused", "failed", False, REJECTED, text, challenge, WD4_POSITION, by=CY))
    return found


async def test_every_kind_of_dispute_and_outcome_reads_the_same_in_the_report_the_text_and_the_page(
    store: EventStore,
) -> None:
    auditor = Auditor(store)
    reached = set()
    for number, case in enumerate(cases()):
        imported = await auditor.import_record(
            f"{case.text}# case {number}\n",  # a game each: the same text is imported once
            tournament_id="",
            seat_token_hashes=lambda count: [bytes([seat]) * 32 for seat in range(count)],
            command_id=f"import-{number}",
            request_hash=f"import-{number}".encode(),
        )
        game = imported.game_id
        filed = await auditor.file_dispute(
            game,
            seat=ANN,
            kind=case.kind,
            position=case.position,
            by=case.by,
            target=None,
            claim="the table got it wrong",
            command_id=f"file-{number}",
            request_hash=f"file-{number}".encode(),
        )
        rule = f"rule-{number}"
        await auditor.rule_on_dispute(
            game, filed.filed.dispute_id, note="", command_id=rule, request_hash=rule.encode()
        )
        report = await auditor.verify(game, check_projections=False)
        [shown] = report.to_json()["disputes"]
        ruled = shown["ruling"]
        assert (ruled["recorded"], ruled["outcome"]) == (case.recorded, case.outcome.value), (case, ruled)
        assert ruled["verdict"] == case.verdict, (case, ruled)
        [dispute] = report.disputes
        assert dispute.ruling is not None
        said = decision(case.kind.value, dispute.ruling, case.outcome)
        assert ruled["decision"] == said
        # verify's text: the dispute's line says the same, once.
        [line] = [line for line in render(report).splitlines() if line.startswith("  dispute ")]
        assert line.count(said) == 1, line
        # The replay page: the same sentence, with the outcome beside it.
        page = data_of(await auditor.replay(game))
        [on_page] = page["disputes"]
        assert (on_page["ruling"]["decision"], on_page["ruling"]["outcome"]) == (said, case.outcome.value)
        [ruled_step] = [step["what"] for step in page["steps"] if step.get("entry") == "ruled"]
        title = f"the adjudicator rules on ann's dispute: {RULED[case.outcome]}"
        assert ruled_step.startswith(title), ruled_step
        reached.add((case.sort, case.verdict, case.recorded, case.outcome))
    assert reached == ALL_CASES
