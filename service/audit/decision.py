"""What a ruling on a dispute decided, about what: the dispute upheld, rejected, or turning on what the
table applied, in one sentence naming the catch or challenge and its verdict by the rules.

A dispute contests what the table did with a catch or challenge (or, the log holding none, asks for the
one it describes): it is upheld when the rules say otherwise than the table did, rejected when the table
did what they require. The sentence is the same in the report (its text and JSON ``decision``), the
replay page and ``verify``'s text. docs/arbiter.md ("Ruling on a disputed game") shows it.
"""

from __future__ import annotations

import enum

from service.domain.entries import DisputeKind, DisputeRuled

#: The rules a heard challenge is judged by; any other (``wd4.challenge``, a house rule) refused it.
_HEARD = frozenset(("wd4.challenge.upheld", "wd4.challenge.failed"))
#: What a challenge costs when nothing was stacked on the Wild Draw Four.
_WD4 = 4


class DisputeOutcome(enum.Enum):
    """``upheld``: the rules say otherwise than the table did (or the catch or challenge the dispute
    describes would have counted); ``rejected``: the table did what the rules require (or the one
    described would not have counted); ``conditional``: the record does not say what the table applied,
    so the dispute is upheld only if the table did otherwise than the rules say."""

    UPHELD = "upheld"
    REJECTED = "rejected"
    CONDITIONAL = "conditional"


def outcome_of(verdict: str, recorded: bool, applied_ok: bool | None) -> DisputeOutcome:
    """The dispute's outcome from the ruling's ``verdict``, whether it judged the ``recorded`` catch or
    challenge, and whether the table applied that verdict (``None``: the record does not say)."""
    if not recorded:  # a catch or challenge the log does not hold: it counts, or the dispute fails
        return DisputeOutcome.UPHELD if verdict in ("penalty", "upheld") else DisputeOutcome.REJECTED
    if applied_ok is None:
        return DisputeOutcome.CONDITIONAL
    return DisputeOutcome.REJECTED if applied_ok else DisputeOutcome.UPHELD


def decision(kind: str, ruling: DisputeRuled, outcome: DisputeOutcome) -> str:
    """The sentence: what was decided (the dispute upheld or rejected), about which catch or challenge,
    its verdict by the rules, and for a dispute upheld the remedy."""
    verdict = _Verdict(kind, ruling)
    if outcome is DisputeOutcome.REJECTED:
        stands = f"{verdict.stands}, " if ruling.recorded else ""
        said = f"{verdict.subject} {verdict.clause} by the rules{verdict.why}"
        return f"the dispute is rejected: {stands}{said}"
    if outcome is DisputeOutcome.UPHELD:
        table = f", but {verdict.table_did}" if ruling.recorded else ""
        return (
            f"the dispute is upheld: {verdict.subject} {verdict.clause} by the rules{verdict.why}{table}; "
            f"remedy: {verdict.remedy}"
        )
    return (
        "the dispute turns on what the table applied, which the record does not say: "
        f"{verdict.subject} {verdict.clause} by the rules{verdict.why}; had the table done otherwise, "
        f"remedy: {verdict.remedy}"
    )


class _Verdict:
    """The pieces of a decision: who did what to whom, the verdict in words, what stands when the
    dispute fails, what the table did when it succeeds, and the remedy then."""

    def __init__(self, kind: str, ruling: DisputeRuled) -> None:
        by, against, verdict = ruling.by or "-", ruling.against or "-", ruling.verdict
        described = not ruling.recorded
        self.why = f" ({ruling.reason})" if ruling.reason else ""
        if kind == DisputeKind.UNO_CATCH.value:
            self.subject = f"{by}'s catch of {against}"
            penalty = verdict == "penalty"
            self.clause = ("would have " if described else "") + (
                "earned the UNO penalty" if penalty else "earned no penalty"
            )
            self.stands = "the penalty stands" if penalty else "no penalty is due"
            self.table_did = "the table gave no penalty" if penalty else "the table gave the penalty"
            self.remedy = (
                f"{against} takes the UNO penalty now"
                if penalty
                else f"{against} gives back the cards taken as the UNO penalty"
            )
        else:
            # Under house.stacking a challenge costs the pending total (and 2 more when it fails).
            pending = ruling.evidence.get("pending", _WD4)
            cost = pending if isinstance(pending, int) else _WD4
            card = f"{against}'s Wild Draw Four" if ruling.against else "a Wild Draw Four"
            self.subject = f"{by}'s challenge of {card}"
            self._challenge(by, against, verdict, ruling.rule in _HEARD, described, cost)

    def _challenge(
        self, by: str, against: str, verdict: str, heard: bool, described: bool, cost: int
    ) -> None:
        self.table_did = "the table upheld it"
        if not heard:
            self.clause = "could not have been made" if described else "may not be made"
            self.stands = "the refusal stands"
            self.remedy = "the table's ruling is void: whoever took cards for it gives them back"
        elif verdict == "upheld":
            self.clause = "would have been upheld" if described else "was upheld"
            self.stands = "the challenge stands"
            self.table_did = "the table ruled it failed"
            self.remedy = (
                f"{against} takes {cost} cards; {by} gives back any cards taken for the Wild Draw Four"
                if described
                else f"{by} gives back the {cost + 2} cards taken and takes a normal turn; "
                f"{against} takes {cost} cards"
            )
        else:
            self.clause = "would have failed" if described else "failed"
            self.stands = "the failed challenge stands"
            self.remedy = (
                f"{against} gives back the {cost} cards taken; {by} takes {cost + 2} cards and loses the turn"
            )
