"""A stored game's report as typed values: the sections :func:`service.audit.stored_game.verify_game`
adds to the rules report, the ruling of an adjudication, the rows of ``verify --all`` — and their JSON.

As in :mod:`service.records.report`, the values are built typed and become JSON only at the edges, through
the ``to_json`` methods here (the shapes of ``docs/RECORD.md``, "A stored game's report"); the text is
:mod:`service.audit.render`'s. Every number here is a position of the game's log.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from service.domain.entries import DisputeRuled
from service.domain.errors import NotFound
from service.records.report import Outcome, RulesReport, Ruling, Unit
from service.rules.events import (
    CardDrawn,
    CardFlipped,
    CardsTaken,
    DealerDrawn,
    FlipReturned,
    LauncherPressed,
    PileReshuffled,
    RoundStarted,
)

if TYPE_CHECKING:  # the event store's modules load only with a stored game
    from service.audit.chain import ChainFinding
    from service.audit.log import Dispute
    from service.checkpoints.receipts import ReceiptCheck

#: Events that carry cards taken from the pile: a difference in one of them is a fair-dealing mismatch.
CARD_EVENTS = frozenset(
    kind.__name__
    for kind in (
        RoundStarted,
        DealerDrawn,
        CardDrawn,
        CardsTaken,
        LauncherPressed,
        CardFlipped,
        FlipReturned,
        PileReshuffled,
    )
)


class Origin(enum.Enum):
    """Where a stored game came from: the service ran it, or a table's record was imported."""

    LIVE = "live"
    IMPORTED = "imported"


class GameStatus(enum.Enum):
    OVER = "over"
    IN_PROGRESS = "in-progress"


class SeedStatus(enum.Enum):
    """``revealed`` (by ``GameEnded`` or the adjudicator), ``secret`` (a game in progress: its cards are
    re-derived but the seed is not shown), ``none`` (no seed recorded: the cards are as the log says)."""

    REVEALED = "revealed"
    SECRET = "secret"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class Flaw:
    """Something wrong at a position of the log, in words: a dealing mismatch, where reading the log
    stopped, an audit entry that no longer decodes."""

    position: int
    message: str

    def to_json(self) -> dict[str, object]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class ChainSection:
    """The hash chain recomputed from the rows (:func:`service.audit.chain.check_chain`): how many
    events, the last hash (to publish), and where it is broken, or where an imported record's lines no
    longer match its fingerprint (:func:`service.audit.chain.check_import`)."""

    events: int
    head: bytes
    findings: tuple[ChainFinding, ...]

    @property
    def valid(self) -> bool:
        return not self.findings

    def to_json(self) -> dict[str, object]:
        return {
            "valid": self.valid,
            "events": self.events,
            "head": self.head.hex(),
            "findings": [f.to_json() for f in self.findings],
        }


@dataclass(frozen=True, slots=True)
class SeedSection:
    """Fair dealing: the committed SHA-256, the seed's status (and the seed itself when it may be
    shown), whether it matches the commitment (``None``: nothing to compare), the position the cards
    were re-derived up to, and the positions where a stored card is not the seed's."""

    committed: str | None
    status: SeedStatus
    revealed_at: int | None
    shown: bytes | None
    commitment_ok: bool | None
    checked_to: int | None
    mismatches: tuple[Flaw, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "committed": self.committed,
            "status": self.status.value,
            "revealed_at": self.revealed_at,
            "seed": None if self.shown is None else self.shown.hex(),
            "commitment_ok": self.commitment_ok,
            "checked_to": self.checked_to,
            "mismatches": [m.to_json() for m in self.mismatches],
        }


@dataclass(frozen=True, slots=True)
class StoredForm:
    """An event in the form the log stores it: its type's name and its JSON payload."""

    type: str
    payload: Mapping[str, object]

    def to_json(self) -> dict[str, object]:
        return {"type": self.type, "payload": dict(self.payload)}


@dataclass(frozen=True, slots=True)
class Divergence:
    """The first stored event today's rules engine does not make of the same command: its position, the
    stored event and the engine's (``None``: nothing there)."""

    position: int
    stored: StoredForm | None
    replayed: StoredForm | None

    @property
    def deals_cards(self) -> bool:
        """Whether the event that differs is one that takes cards from the pile (a dealing mismatch)."""
        event = self.stored or self.replayed
        return event is not None and event.type in CARD_EVENTS

    def to_json(self) -> dict[str, object]:
        return {
            "position": self.position,
            "stored": None if self.stored is None else self.stored.to_json(),
            "replayed": None if self.replayed is None else self.replayed.to_json(),
        }


@dataclass(frozen=True, slots=True)
class ReplaySection:
    """Today's replay against the log: where a live game's stored events first differ from what the
    rules engine makes of the same commands, and the stored outcome against the replayed one (an
    imported game's: the verifier's at import against today's). ``stored`` is ``None`` when the log's
    outcome no longer reads as one (an edited log)."""

    diverged_at: Divergence | None
    stored: Outcome | None
    replayed: Outcome

    @property
    def outcome_differs(self) -> bool:
        return self.stored != self.replayed

    def to_json(self) -> dict[str, object]:
        return {
            "diverged_at": None if self.diverged_at is None else self.diverged_at.to_json(),
            "outcome_differs": self.outcome_differs,
            "stored": None if self.stored is None else self.stored.to_json(),
            "replayed": self.replayed.to_json(),
        }


@dataclass(frozen=True, slots=True)
class ProjectionCheck:
    """The read models' rows of the game against a fold of its log: what disagrees (nothing: agree)."""

    problems: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {"problems": list(self.problems)}


def _nothing_judged() -> dict[str, object]:
    """The rules part of a report whose log cannot be read back as a record: nothing judged. Such a
    report has always given ``rules_valid`` right after ``valid``; a readable one, after the rules part."""
    return {
        "valid": False,
        "rules_valid": False,
        "variant": None,
        "violations": [],
        "rulings": [],
        "rounds": [],
        "scores": {},
        "winner": None,
        "final": None,
        "stopped_at": None,
    }


@dataclass(frozen=True, slots=True)
class GameReport:
    """A stored game's full report: the rules report of the record it stands for (``rules``, in
    positions; ``None`` when the log cannot be read back as one, and ``unreadable`` says where), and
    the sections only a stored game has. ``players`` names the seats in ``disputes``; ``receipts``
    are the checks of a player's receipts against the log, when some were given."""

    game_id: str
    origin: Origin
    version: int
    status: GameStatus
    rules: RulesReport | None
    unreadable: Flaw | None
    chain: ChainSection
    seed: SeedSection | None
    replay: ReplaySection | None
    projections: ProjectionCheck | None
    players: tuple[str, ...]
    disputes: tuple[Dispute, ...]
    unreadable_entries: tuple[Flaw, ...]
    receipts: tuple[ReceiptCheck, ...] | None = None

    @property
    def rules_valid(self) -> bool:
        return self.rules is not None and self.rules.valid

    @property
    def valid(self) -> bool:
        """Every check passed: the stored game's own (:attr:`log_valid`) and every receipt given."""
        return self.log_valid and self.receipts_valid

    @property
    def receipts_valid(self) -> bool:
        """Every receipt given matches the log (true when none was given)."""
        return self.receipts is None or all(check.ok for check in self.receipts)

    @property
    def log_valid(self) -> bool:
        """The stored game holds together: no rule broken, an intact chain, every audit entry readable, no
        replay divergence or outcome difference, a seed that matches its commitment, no read-model problem."""
        replay, seed, projections = self.replay, self.seed, self.projections
        return (
            self.rules_valid
            and self.chain.valid
            and not self.unreadable_entries
            and (replay is None or (replay.diverged_at is None and not replay.outcome_differs))
            and (seed is None or seed.commitment_ok is not False)
            and (projections is None or not projections.problems)
        )

    @property
    def stopped_at(self) -> int | None:
        """The position the game could no longer be followed at (or read back at), if any."""
        if self.rules is None:
            return None if self.unreadable is None else self.unreadable.position
        return self.rules.stopped_at

    def first_problem(self) -> str | None:
        """The first thing wrong, as one line (``None``: nothing), in the order a reader would look:
        tampering, an unreadable log, the seed, a divergence, a broken rule, the outcome, the read models."""
        for finding in self.chain.findings:
            return f"position {finding.position}: chain {finding.kind}: {finding.message}"
        if self.unreadable is not None:
            return f"position {self.unreadable.position}: unreadable: {self.unreadable.message}"
        if self.seed is not None and self.seed.commitment_ok is False:
            return "the seed does not match its commitment"
        for mismatch in self.seed.mismatches if self.seed is not None else ():
            return f"position {mismatch.position}: {mismatch.message}"
        diverged = None if self.replay is None else self.replay.diverged_at
        if diverged is not None:
            stored = diverged.stored.type if diverged.stored else "nothing"
            replayed = diverged.replayed.type if diverged.replayed else "nothing"
            return f"position {diverged.position}: stored {stored}, today's engine {replayed}"
        for violation in self.rules.violations if self.rules is not None else ():
            return f"position {violation.at}: {violation.rule.value}: {violation.message}"
        if self.replay is not None and self.replay.outcome_differs:
            return "the stored outcome differs from today's replay"
        for problem in self.projections.problems if self.projections is not None else ():
            return f"read models: {problem}"
        return None

    def summary(self) -> GameSummary:
        diverged = None if self.replay is None else self.replay.diverged_at
        return GameSummary(
            self.game_id,
            self.origin,
            self.version,
            self.valid,
            self.chain.valid,
            None if diverged is None else diverged.position,
            None if self.replay is None else self.replay.outcome_differs,
            self.first_problem(),
        )

    def to_json(self) -> dict[str, object]:
        """The report object of ``docs/RECORD.md`` ("A stored game's report")."""
        judged = _nothing_judged() if self.rules is None else self.rules.to_json()
        # The whole report's validity, where the rules report gives its own.
        judged.update(valid=self.valid, stopped_at=self.stopped_at)
        return {
            "game_id": self.game_id,
            "origin": self.origin.value,
            "unreadable": None if self.unreadable is None else self.unreadable.to_json(),
            "version": self.version,
            "status": self.status.value,
            **judged,
            "rules_valid": self.rules_valid,
            "chain": self.chain.to_json(),
            "seed": None if self.seed is None else self.seed.to_json(),
            "replay": None if self.replay is None else self.replay.to_json(),
            "projections": None if self.projections is None else self.projections.to_json(),
            "disputes": [d.to_json(self.players) for d in self.disputes],
            "unreadable_entries": [e.to_json() for e in self.unreadable_entries],
            **({} if self.receipts is None else {"receipts": [check.to_json() for check in self.receipts]}),
        }


@dataclass(frozen=True, slots=True)
class Unverified:
    """A stored game the auditor could not verify at all (``verify --all`` goes on past it)."""

    game_id: str
    error: str

    def summary(self) -> GameSummary:
        return GameSummary(self.game_id, None, None, False, None, None, None, self.error)

    def to_json(self) -> dict[str, object]:
        return {"game_id": self.game_id, "valid": False, "error": self.error}


@dataclass(frozen=True, slots=True)
class LostGame:
    """A game the store holds no event of, that a player's receipts say the service once acknowledged
    (:func:`lost_game`): a restore from a copy older than its creation, or its rows deleted. It is
    reported as any lost command is: each of its genuine receipts ``missing``, the game not valid."""

    game_id: str
    receipts: tuple[ReceiptCheck, ...]

    @property
    def valid(self) -> bool:
        return False

    @property
    def first_missing_version(self) -> int:
        """The lowest version a genuine receipt names: the history was lost from there on."""
        return min(_genuine_versions(self.receipts))

    @property
    def signed_up_to(self) -> int:
        """The highest version a genuine receipt names: at least this much of the game was acknowledged."""
        return max(_genuine_versions(self.receipts))

    @property
    def error(self) -> str:
        return (
            f"not in the store: it holds no event of game {self.game_id!r}, yet the service signed "
            f"receipts for it up to version {self.signed_up_to:,}"
        )

    def to_json(self) -> dict[str, object]:
        """The report of ``docs/RECORD.md`` ("A game lost whole")."""
        return {
            "game_id": self.game_id,
            "lost": True,
            "version": 0,
            "valid": False,
            "error": self.error,
            "receipts": [check.to_json() for check in self.receipts],
        }


def lost_game(game_id: str, checks: Sequence[ReceiptCheck]) -> LostGame:
    """A game the store does not know, checked against a player's ``checks`` (made against no rows):
    lost, when one of them is a genuine receipt of it. Otherwise it is unknown, as an id nobody was ever
    given is (a typo, or a forged receipt, is not a loss): NOT_FOUND ``UNKNOWN_GAME``, saying why."""
    from service.checkpoints.receipts import signed_for_game

    if signed_for_game(checks):
        return LostGame(game_id, tuple(checks))
    message = f"no game {game_id!r}"
    if checks:
        given = (
            "the one receipt given is not" if len(checks) == 1 else f"none of the {len(checks):,} given is"
        )
        message += (
            f", and {given} a receipt this service signed for it, so nothing says it was lost "
            f"({'' if len(checks) == 1 else 'the first: '}{checks[0].message})"
        )
    raise NotFound(message, reason="UNKNOWN_GAME")


def _genuine_versions(checks: Sequence[ReceiptCheck]) -> list[int]:
    """The versions the receipts that opened name (a refused one names none that can be trusted)."""
    from service.checkpoints.receipts import REFUSED

    return [check.version for check in checks if check.verdict != REFUSED and check.version is not None]


@dataclass(frozen=True, slots=True)
class GameSummary:
    """One row of ``verify --all``: a game's report in brief (``None``: not known, the game could not be
    verified or read back as a record)."""

    game_id: str
    origin: Origin | None
    version: int | None
    valid: bool
    chain: bool | None
    diverged_at: int | None
    outcome_differs: bool | None
    first_problem: str | None

    def to_json(self) -> dict[str, object]:
        return {
            "game_id": self.game_id,
            "origin": None if self.origin is None else self.origin.value,
            "version": self.version,
            "valid": self.valid,
            "chain": self.chain,
            "diverged_at": self.diverged_at,
            "outcome_differs": self.outcome_differs,
            "first_problem": self.first_problem,
        }


@dataclass(frozen=True, slots=True)
class Adjudication:
    """A ruling on one catch or challenge of a stored game, with where it stands in the log.

    ``recorded`` says which was judged: the catch or challenge the log holds at ``position`` (true), or,
    the log holding none there, the one the caller described, as made right after ``position``.
    ``mismatch`` says in words where the ``by`` or ``target`` the caller named differ from what was
    judged (``None`` when they agree or named nothing), so that nothing named is dropped unsaid.
    ``ruling`` gives positions of the log.
    """

    game_id: str
    position: int
    recorded: bool
    ruling: Ruling
    mismatch: str | None

    def ruled(self, dispute_id: str, note: str) -> DisputeRuled:
        """The audit entry that records this as the ruling on dispute ``dispute_id``."""
        ruling = self.ruling
        return DisputeRuled(
            dispute_id,
            ruling.verdict.value,
            ruling.rule.value,
            ruling.reason,
            ruling.by,
            ruling.against,
            self.position,
            self.recorded,
            ruling.evidence.to_json(),
            note,
            self.mismatch,
        )

    def to_json(self) -> dict[str, object]:
        return {
            "game_id": self.game_id,
            "kind": self.ruling.kind.value,
            "position": self.position,
            "recorded": self.recorded,
            "mismatch": self.mismatch,
            "ruling": self.ruling.to_json(Unit.POSITION),
        }
