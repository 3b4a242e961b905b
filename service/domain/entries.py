"""Audit entries: what the audit trail adds to a game's stream besides the game's own events.

:class:`DisputeFiled` and :class:`DisputeRuled` (a dispute and its ruling), :class:`SeedRevealed` (the
adjudicator saw a game's seed in progress), :class:`RecordImported` and :class:`RecordLine` (a table's
record, line by line, verbatim). They are hash-chained like any event, but the rules engine does not know
them; :mod:`service.domain.catalogue` registers them (group ``AUDIT``). Payloads are plain JSON (no
floats); a field added later gets a default. docs/DESIGN.md ("Stored types and their versions").
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class DisputeKind(enum.Enum):
    """What a dispute is about; the value is the kind a verifier's ruling carries."""

    UNO_CATCH = "uno-catch"
    WD4_CHALLENGE = "wd4-challenge"


@dataclass(frozen=True, slots=True)
class DisputeFiled:
    """``seat`` disputes the ``kind`` at ``position`` (a position of the same stream, before this entry).

    ``seat`` only says who filed: the ruling judges the catch or challenge the log holds at ``position``,
    whoever disputes it. ``by`` (the catcher, the challenger) and ``target`` (the player who should have
    been caught) describe the one the dispute is about, when it names them: they are what is judged when
    the log holds none at ``position``. ``claim`` is the player's own words. ``by`` came later than the
    other fields: a filing stored before it decodes with ``by`` = ``None``.
    """

    dispute_id: str
    seat: int
    kind: str
    position: int
    target: int | None
    claim: str
    by: int | None = None


@dataclass(frozen=True, slots=True)
class DisputeRuled:
    """The adjudicator's ruling on dispute ``dispute_id``: the verifier's verdict, rule and evidence.

    ``recorded`` says which was judged: the catch or challenge the log holds at ``position`` (true), or,
    the log holding none there, the one the dispute describes, as made right after ``position``.
    ``mismatch`` says, in words, where the dispute's ``by`` or ``target`` differ from the recorded one
    that was judged instead (``None``: they agree, or named nothing; rulings stored before the field
    existed decode with ``None``). ``evidence`` is the ruling's evidence as the game's report gives it
    (positions, the hand, the colour); ``note`` is the adjudicator's remark, if any. A ruling records the
    verdict; it does not rewrite the game.
    """

    dispute_id: str
    verdict: str
    rule: str
    reason: str | None
    by: str
    against: str
    position: int
    recorded: bool
    evidence: dict[str, Any]
    note: str
    mismatch: str | None = None


@dataclass(frozen=True, slots=True)
class SeedRevealed:
    """The adjudicator saw the secret seed (committed as ``seed_sha256``) before the game ended."""

    seed_sha256: str
    reason: str


@dataclass(frozen=True, slots=True)
class RecordImported:
    """A table game's record was imported; ``lines`` physical lines follow as :class:`RecordLine` entries.

    ``sha256`` is the hash of the imported text (UTF-8), ``final_newline`` whether it ended with a line
    break (so that the export is byte for byte the import). ``outcome`` is what the verifier of the day
    found (``valid``, ``rounds``, ``scores``, ``winner``, ``stopped_at``): a later re-verification after a
    rules fix compares against it.
    """

    format: str
    sha256: str
    lines: int
    final_newline: bool
    outcome: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RecordLine:
    """Physical line ``line`` of an imported record, exactly as written (blank and comment lines too)."""

    line: int
    text: str


Entry = DisputeFiled | DisputeRuled | SeedRevealed | RecordImported | RecordLine
