"""The verifier's report as typed values, and the one place they become JSON.

The replay (:mod:`service.records.verify`) builds its report from these enums and dataclasses; their
``to_json`` methods give the shapes docs/RECORD.md documents, at the edges only (``--json``, gRPC, audit
entries). The text is :mod:`service.audit.render`'s. Numbers point at a record's lines or a stored game's
positions (:class:`Unit`); :meth:`RulesReport.placed` turns lines into positions at once.
docs/DESIGN.md ("Replaying a record").
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from service.domain.entries import DisputeKind
from service.rules.cards import Card, Colour, tokens
from service.rules.options import Variant
from service.rules.violations import Rule

#: Where a report's line stands in a stored game's log (record line → event position).
Place = Callable[[int], int]


class Unit(enum.Enum):
    """What a report's numbers count. The value is the key they go under in JSON and the word in text."""

    LINE = "line"
    POSITION = "position"


class Verdict(enum.Enum):
    """A ruling's verdict: a catch earns the penalty or not, a challenge is upheld or fails."""

    PENALTY = "penalty"
    NO_PENALTY = "no-penalty"
    UPHELD = "upheld"
    FAILED = "failed"


def _placed(place: Place, number: int | None) -> int | None:
    return None if number is None else place(number)


@dataclass(frozen=True, slots=True)
class Finding:
    """A rule broken at line (position) ``at`` of what was judged."""

    at: int
    rule: Rule
    message: str

    def placed(self, place: Place) -> Finding:
        return dataclasses.replace(self, at=place(self.at))

    def to_json(self, unit: Unit) -> dict[str, object]:
        return {unit.value: self.at, "rule": self.rule.value, "message": self.message}


def _evidence_json(value: object) -> object:
    """A value of evidence as JSON: cards as their tokens, a colour as its letter."""
    if isinstance(value, Card):
        return value.token
    if isinstance(value, Colour):
        return value.value
    if isinstance(value, tuple):
        # Cards as their tokens; a tuple of names (who stacked) as it is.
        return [item if isinstance(item, str) else item.token for item in value]
    return value


@dataclass(frozen=True, slots=True)
class _Evidence:
    """What every kind of evidence shares: the fields named in :attr:`PLACES` are lines of what was
    judged (positions, once placed), and the JSON lists the fields in their order."""

    PLACES: ClassVar[tuple[str, ...]] = ()

    def placed(self, place: Place) -> Self:
        moved = {name: _placed(place, getattr(self, name)) for name in self.PLACES}
        return dataclasses.replace(self, **moved)

    def to_json(self) -> dict[str, object]:
        return {f.name: _evidence_json(getattr(self, f.name)) for f in dataclasses.fields(self)}


@dataclass(frozen=True, slots=True)
class CatchEvidence(_Evidence):
    """What a catch ruling rests on: the caught player's hand and the table at that moment, and where
    the player's UNO window opened and closed and where they called UNO (``None``: it did not happen)."""

    PLACES: ClassVar[tuple[str, ...]] = ("window_opened", "window_closed", "called")

    hand: tuple[Card, ...]
    active_colour: Colour | None
    top: Card | None
    window_opened: int | None
    window_closed: int | None
    called: int | None


@dataclass(frozen=True, slots=True)
class ChallengeEvidence(_Evidence):
    """What a challenge ruling rests on: the offender's hand when the Wild Draw Four was played (the
    card included), the active colour, the card it was played on, the cards that made it illegal, and
    where it was played."""

    PLACES: ClassVar[tuple[str, ...]] = ("played_at",)

    hand: tuple[Card, ...]
    active_colour: Colour | None
    top: Card | None
    matching: tuple[Card, ...]
    played_at: int | None


@dataclass(frozen=True, slots=True)
class StackedChallengeEvidence(ChallengeEvidence):
    """A challenge in a game played with ``house.stacking``: the Wild Draw Four's own evidence, and what
    the answer costs, since it is no longer always 4 and 6. ``pending`` is the total waiting when the
    challenge was made (4 for a W+4 on its own, more when cards were stacked under or on it);
    ``stacked_by`` names who played the pending cards, in order (the offender last); ``penalised`` and
    ``penalty`` say who takes how many cards by the verdict: the offender ``pending`` when it is upheld,
    the challenger ``pending`` + 2 when it fails. Without them an arbiter sees 8 cards move on a
    challenge and cannot tell why."""

    pending: int
    stacked_by: tuple[str, ...]
    penalised: str
    penalty: int


@dataclass(frozen=True, slots=True)
class RefusedChallengeEvidence(_Evidence):
    """A challenge its player may not make (not the victim, too late, no Wild Draw Four to answer) is
    judged on no hand: its evidence is only where the last Wild Draw Four was played."""

    PLACES: ClassVar[tuple[str, ...]] = ("played_at",)

    played_at: int | None


Evidence = CatchEvidence | ChallengeEvidence | StackedChallengeEvidence | RefusedChallengeEvidence


@dataclass(frozen=True, slots=True)
class Ruling:
    """The verdict on one UNO catch or Wild Draw Four challenge, made at line (position) ``at``.

    ``rule`` is the rule the verdict applies; ``reason`` says why a catch earned no penalty or a
    challenge was refused; ``applied_ok`` compares what the table applied with the verdict (``None``:
    the record did not say).
    """

    at: int
    kind: DisputeKind
    by: str
    against: str
    verdict: Verdict
    rule: Rule
    evidence: Evidence
    reason: str | None
    applied_ok: bool | None

    def placed(self, place: Place) -> Ruling:
        return dataclasses.replace(self, at=place(self.at), evidence=self.evidence.placed(place))

    def to_json(self, unit: Unit) -> dict[str, object]:
        out: dict[str, object] = {
            unit.value: self.at,
            "kind": self.kind.value,
            "by": self.by,
            "against": self.against,
            "verdict": self.verdict.value,
            "rule": self.rule.value,
            "evidence": self.evidence.to_json(),
        }
        if self.reason is not None:
            out["reason"] = self.reason
        out["applied_ok"] = self.applied_ok
        return out


@dataclass(frozen=True, slots=True)
class RoundScore:
    """A round's winner and the points they scored."""

    round: int
    winner: str
    points: int

    def to_json(self) -> dict[str, object]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class RecordVerdict:
    """What the verifier found of a record as a whole: whether it was valid, and the line it could not
    be followed past. An imported game keeps it as found at import, to compare with today's."""

    valid: bool
    stopped_at: int | None


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a game came out: the rounds, the match scores (by player, in seat order) and the winner;
    ``verdict`` for an imported record's outcome, which includes what the verifier found."""

    rounds: tuple[RoundScore, ...]
    scores: dict[str, int]
    winner: str | None
    verdict: RecordVerdict | None = None

    @classmethod
    def from_json(cls, stored: Mapping[str, Any], *, verdict: bool) -> Outcome:
        """The outcome a game's log holds (:meth:`to_json`'s shape; ``verdict``: an imported record's).
        Raises ``ValueError`` when it is not one, which only an edited log's can be: one that does not
        write back as the same JSON (scores given as a list of pairs, a round with other keys…) is not,
        so that what a report shows of it is always the log's own JSON."""
        try:
            outcome = cls(
                tuple(RoundScore(r["round"], r["winner"], r["points"]) for r in stored["rounds"]),
                dict(stored["scores"]),
                stored["winner"],
                RecordVerdict(stored["valid"], stored["stopped_at"]) if verdict else None,
            )
        except (KeyError, TypeError, ValueError) as bad:
            raise ValueError(f"not an outcome: {bad!r}") from None
        if outcome.to_json() != stored:
            raise ValueError("not an outcome: it has other keys or other shapes than an outcome's")
        return outcome

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "rounds": [r.to_json() for r in self.rounds],
            "scores": dict(self.scores),
            "winner": self.winner,
        }
        if self.verdict is not None:
            out.update(valid=self.verdict.valid, stopped_at=self.verdict.stopped_at)
        return out


@dataclass(frozen=True, slots=True)
class FinalTable:
    """The table after the last line: every hand (by player), the top card, the active colour and whose
    turn it is (``None`` between rounds)."""

    hands: dict[str, tuple[Card, ...]]
    top: Card | None
    colour: Colour | None
    turn: str | None

    def to_json(self) -> dict[str, object]:
        return {
            "hands": {name: tokens(hand) for name, hand in self.hands.items()},
            "top": None if self.top is None else self.top.token,
            "colour": None if self.colour is None else self.colour.value,
            "turn": self.turn,
        }


@dataclass(frozen=True, slots=True)
class FixedDeck:
    """Round ``round``, started at line (position) ``at``, was dealt from a deck ``by`` fixed (the
    service's admin), not from the seed's shuffle: the seed is not checked against its deal, everything
    else is (``fair.commit``)."""

    at: int
    round: int
    by: str

    @property
    def message(self) -> str:
        return f"round {self.round} was dealt from a fixed deck by {self.by}, not from the seed's shuffle"

    def placed(self, place: Place) -> FixedDeck:
        return dataclasses.replace(self, at=place(self.at))

    def to_json(self, unit: Unit) -> dict[str, object]:
        return {unit.value: self.at, "round": self.round, "by": self.by, "message": self.message}


def fixed_deck_line(fixed: FixedDeck, unit: Unit) -> str:
    """A round dealt from a fixed deck, as the text report gives it (``line 2: FIXED DECK: …``)."""
    return f"{unit.value} {fixed.at}: FIXED DECK: {fixed.message}; its deal was not checked against the seed"


@dataclass(frozen=True, slots=True)
class RulesReport:
    """What the rules say of one game: a record's whole report, and the part of a stored game's report
    that judges its play. Valid when no rule was broken.

    ``stopped_at`` is the line (position) the game could no longer be followed at, if it could not.
    ``fixed_decks`` are the rounds dealt from a fixed deck rather than the seed's shuffle, in order.
    """

    variant: Variant
    violations: tuple[Finding, ...]
    rulings: tuple[Ruling, ...]
    outcome: Outcome
    final: FinalTable
    stopped_at: int | None
    unit: Unit = Unit.LINE
    fixed_decks: tuple[FixedDeck, ...] = ()

    @property
    def valid(self) -> bool:
        return not self.violations

    def placed(self, place: Place) -> RulesReport:
        """The report with every line given as the log position ``place`` says it stands at."""
        assert self.unit is Unit.LINE
        return dataclasses.replace(
            self,
            violations=tuple(v.placed(place) for v in self.violations),
            rulings=tuple(r.placed(place) for r in self.rulings),
            stopped_at=_placed(place, self.stopped_at),
            unit=Unit.POSITION,
            fixed_decks=tuple(f.placed(place) for f in self.fixed_decks),
        )

    def import_outcome(self) -> Outcome:
        """The outcome an imported record keeps: with the verdict, ``stopped_at`` a record line."""
        assert self.unit is Unit.LINE
        return dataclasses.replace(self.outcome, verdict=RecordVerdict(self.valid, self.stopped_at))

    def to_json(self) -> dict[str, object]:
        """The report object of ``docs/RECORD.md`` (a line or a position under the unit's key).
        ``fixed_decks`` is there only when a round was dealt from one, so that every other game's report
        is what it always was."""
        fixed = {"fixed_decks": [f.to_json(self.unit) for f in self.fixed_decks]} if self.fixed_decks else {}
        return {
            "valid": self.valid,
            "variant": self.variant.value,
            "violations": [v.to_json(self.unit) for v in self.violations],
            "rulings": [r.to_json(self.unit) for r in self.rulings],
            **fixed,
            **self.outcome.to_json(),
            "final": self.final.to_json(),
            "stopped_at": self.stopped_at,
        }
