"""The verifier's reports as text: one renderer for a record's report and a stored game's.

:func:`render` writes ``verify --record`` and ``verify --game`` alike: a heading, then (a stored game
only) its sections — hash chain, seed, replay, read models —, then what the rules found — violations,
rulings, (a stored game's) disputes, rounds, scores, where the game could not be followed. The two
differ only where the reports do: a record's report counts lines, a stored game's positions of its log,
and only a stored game has the sections and disputes. :func:`render_adjudication` and
:func:`render_summary` write ``adjudicate`` and ``verify --all`` with the same pieces. The reports are
typed (:mod:`service.records.report`, :mod:`service.audit.game_report`); their JSON is their own.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from service.audit.game_report import (
    Adjudication,
    GameReport,
    GameSummary,
    LostGame,
    Origin,
    ReplaySection,
    SeedSection,
    SeedStatus,
    StoredForm,
)
from service.records.report import (
    Evidence,
    Finding,
    Outcome,
    RulesReport,
    Ruling,
    StackedChallengeEvidence,
    Unit,
    fixed_deck_line,
)
from service.rules.cards import Card, Colour

if TYPE_CHECKING:  # the event store's modules load only with a stored game
    from service.audit.log import Dispute
    from service.checkpoints.receipts import ReceiptCheck

_TABLE_SAID = {True: "the table agreed", False: "THE TABLE DISAGREED", None: "the table did not say"}


def _validity(valid: bool) -> str:
    return "VALID" if valid else "INVALID"


def render(report: RulesReport | GameReport | LostGame, *, each_receipt: bool = False) -> str:
    """A record's report (lines) or a stored game's (positions) as text; see the module docstring. A
    player's receipts are summed up in one line; ``each_receipt`` adds a line per receipt after it. A
    game the store has lost is its heading, what its receipts say of it, and the receipts."""
    if isinstance(report, LostGame):
        lines = [
            f"game {report.game_id}: INVALID (lost: a receipt names it, the store holds none of it)",
            f"  {report.error}",
        ]
        return "\n".join(lines + _receipt_lines(report.receipts, each_receipt))
    if isinstance(report, GameReport):
        lines = _game_sections(report)
        rules, unit, stopped_at = report.rules, Unit.POSITION, report.stopped_at
        disputes = [f"  {_dispute_line(d, report.players)}" for d in report.disputes]
    else:
        lines = [f"{report.variant.value} game: {_validity(report.valid)}"]
        rules, unit, stopped_at, disputes = report, report.unit, report.stopped_at, []
    if rules is not None:
        lines += [f"  {finding_line(v, unit)}" for v in rules.violations]
        lines += [f"  {_ruling_line(r, unit)}" for r in rules.rulings]
        lines += [f"  {fixed_deck_line(f, unit)}" for f in rules.fixed_decks]
    lines += disputes
    outcome = None if rules is None else rules.outcome
    if outcome is not None:
        lines += [f"  round {r.round}: {r.winner} scored {r.points}" for r in outcome.rounds]
    lines.append(f"  scores: {_scores(outcome)}; winner: {_winner(outcome)}")
    if stopped_at is not None:
        what = "record" if unit is Unit.LINE else "game"
        lines.append(f"  the {what} could not be followed past {unit.value} {stopped_at}")
    if isinstance(report, GameReport) and report.receipts is not None:
        lines += _receipt_lines(report.receipts, each_receipt)
    return "\n".join(lines)


def _receipt_lines(checks: Sequence[ReceiptCheck], each: bool) -> list[str]:
    """The receipts' summary line, then with ``each`` a line per receipt."""
    lines = [f"  {receipts_line(checks)}"]
    if each:
        lines += [
            f"  receipt {check.index + 1} (version {check.version}): {check.verdict.upper()}: {check.message}"
            for check in checks
        ]
    return lines


def receipts_line(checks: Sequence[ReceiptCheck]) -> str:
    """A player's receipts in one line: ``7,273 receipts: all match``, or how many match, the version the
    first rewritten one names and how many more are rewritten, and how many are missing or refused (a
    match's thousands of receipts would otherwise be thousands of lines)."""
    from service.checkpoints.receipts import MATCHES, MISSING, REFUSED, REWRITTEN

    total = f"{len(checks):,} receipt{'' if len(checks) == 1 else 's'}"
    if not checks:
        return f"{total}: nothing to check"
    verdicts = [check.verdict for check in checks]
    if set(verdicts) == {MATCHES}:
        return f"{total}: all match"
    matches = verdicts.count(MATCHES)
    parts = [f"{matches:,} match"] if matches else []
    rewritten = [check.version for check in checks if check.verdict == REWRITTEN and check.version]
    if rewritten:
        parts.append(f"first rewritten at version {min(rewritten):,}; {len(rewritten) - 1:,} after it")
    missing = verdicts.count(MISSING)
    if missing:
        parts.append(f"{missing:,} missing (their versions are past the log's end)")
    refused = verdicts.count(REFUSED)
    if refused:
        parts.append(f"{refused:,} refused (not this game's, or not signed by a key given)")
    return f"{total}: " + "; ".join(parts)


def finding_line(finding: Finding, unit: Unit) -> str:
    """A broken rule, where it was broken (``line 3: play.match: …``)."""
    return f"{unit.value} {finding.at}: {finding.rule.value}: {finding.message}"


def _ruling_line(ruling: Ruling, unit: Unit) -> str:
    why = f" ({ruling.reason})" if ruling.reason else ""
    evidence = ruling.evidence
    # Under house.stacking a challenge no longer costs 4 or 6: say who takes how many, and why so many.
    stacked = (
        f"; {evidence.penalised} takes {evidence.penalty} ({evidence.pending} pending, stacked by "
        f"{' '.join(evidence.stacked_by)})"
        if isinstance(evidence, StackedChallengeEvidence)
        else ""
    )
    return (
        f"{unit.value} {ruling.at}: {ruling.kind.value} by {ruling.by} against {ruling.against}: "
        f"{ruling.verdict.value} [{ruling.rule.value}]{why}{stacked}; {_TABLE_SAID[ruling.applied_ok]}"
    )


def _scores(outcome: Outcome | None) -> str:
    scores = {} if outcome is None else outcome.scores
    return ", ".join(f"{name} {points}" for name, points in scores.items()) or "-"


def _winner(outcome: Outcome | None) -> str:
    return (None if outcome is None else outcome.winner) or "none yet"


# --- a stored game's sections ----------------------------------------------------------------------------


def _game_sections(report: GameReport) -> list[str]:
    variant = "?" if report.rules is None else report.rules.variant.value
    heading = f"game {report.game_id}: {_validity(report.valid)}"
    if report.log_valid and not report.receipts_valid:
        # The game holds together by itself: it is a player's receipt that says the log was rewritten.
        heading += " (a receipt does not match the log)"
    lines = [
        heading,
        f"  {report.origin.value} {variant} game, version {report.version}, {report.status.value}; "
        f"rules {'kept' if report.rules_valid else 'BROKEN'}",
    ]
    unreadable = report.unreadable
    if unreadable is not None:
        lines.append(
            f"  UNREADABLE from position {unreadable.position}: the log cannot be read back as a "
            f"record: {unreadable.message}"
        )
    chain = report.chain
    if chain.valid:
        lines.append(f"  hash chain: intact, {chain.events} events, head {chain.head.hex()}")
    else:
        lines.append(f"  hash chain: TAMPERED ({chain.events} events, head {chain.head.hex()})")
        lines += [f"    position {f.position}: {f.kind}: {f.message}" for f in chain.findings]
    if report.seed is not None:
        lines += _seed_lines(report.seed)
    if report.replay is not None:
        lines += _replay_lines(report.origin, report.replay)
    projections = report.projections
    if projections is None:
        lines.append("  read models: not checked")
    elif not projections.problems:
        lines.append("  read models: agree with the log")
    else:
        lines.append("  read models: DISAGREE with the log")
        lines += [f"    {problem}" for problem in projections.problems]
    return lines


_COMMITMENT = {
    True: "commitment holds",
    False: "COMMITMENT BROKEN (the seed does not hash to the committed SHA-256)",
    None: "no commitment to check",
}


def _seed_lines(seed: SeedSection) -> list[str]:
    if seed.status is SeedStatus.NONE:
        return ["  seed: none recorded; the cards are as the log says"]
    status = "secret" if seed.status is SeedStatus.SECRET else f"revealed at position {seed.revealed_at}"
    lines = [
        f"  seed: {status}; {_COMMITMENT[seed.commitment_ok]}; cards re-derived through position "
        f"{seed.checked_to}"
    ]
    if seed.committed:
        lines.append(f"    committed SHA-256: {seed.committed}")
    if seed.shown:
        lines.append(f"    seed: {seed.shown.hex()}")
    lines += [f"    position {m.position}: DEALING MISMATCH: {m.message}" for m in seed.mismatches]
    return lines


def _replay_lines(origin: Origin, replay: ReplaySection) -> list[str]:
    lines = []
    diverged = replay.diverged_at
    if origin is Origin.IMPORTED:
        lines.append("  replay: an imported record; today's verdict is compared with the one at import")
    elif diverged is None:
        lines.append("  replay: today's rules engine makes the same events of the same commands")
    else:
        lines.append(f"  replay: DIVERGED at position {diverged.position}")
        lines.append(f"    stored:          {_event_text(diverged.stored)}")
        lines.append(f"    today's engine:  {_event_text(diverged.replayed)}")
    if replay.outcome_differs:
        lines.append("  outcome differs from today's replay:")
        lines += _outcome_lines(replay)
    else:
        lines.append("  outcome: the stored outcome is today's replay's")
    return lines


def _outcome_lines(replay: ReplaySection) -> list[str]:
    return [f"    stored:   {_outcome(replay.stored)}", f"    replayed: {_outcome(replay.replayed)}"]


def _outcome(outcome: Outcome | None) -> str:
    if outcome is None:
        return "unreadable (the log's outcome is not one)"
    parts = [f"winner {_winner(outcome)}", f"scores {_scores(outcome)}", f"{len(outcome.rounds)} rounds"]
    verdict = outcome.verdict
    if verdict is not None:
        parts.append("valid" if verdict.valid else "invalid")
        if verdict.stopped_at is not None:
            parts.append(f"stopped at {verdict.stopped_at}")
    return ", ".join(parts)


def _event_text(event: StoredForm | None) -> str:
    if event is None:
        return "nothing"
    return f"{event.type} {json.dumps(event.payload, ensure_ascii=False, sort_keys=True)}"


def _judged(kind: str, position: int, recorded: bool) -> str:
    """Which catch or challenge a ruling judged: the recorded one, or the one described."""
    if recorded:
        return f"the {kind} recorded at position {position}"
    return f"the {kind} described, as made right after position {position} (none is recorded there)"


def _name(players: Sequence[str], seat: int | None) -> str | None:
    return players[seat] if seat is not None and 0 <= seat < len(players) else None


def _dispute_line(dispute: Dispute, players: Sequence[str]) -> str:
    """A dispute of a stored game's report, with what it names and, once ruled, what was judged."""
    filed = dispute.filed
    named = "".join(
        f" {word} {name}"
        for word, name in (("by", _name(players, filed.by)), ("of", _name(players, filed.target)))
        if name
    )
    head = (
        f"dispute {filed.dispute_id} filed at position {dispute.filed_at} by "
        f"{_name(players, filed.seat) or filed.seat}: {filed.kind}{named} at position {filed.position}: "
        f"{filed.claim!r}"
    )
    ruling = dispute.ruling
    if ruling is None:
        return f"{head}; open"
    mismatch = f"; NOT AS NAMED: {ruling.mismatch}" if ruling.mismatch else ""
    judged = _judged(filed.kind, ruling.position, ruling.recorded)
    decided = dispute.decided()
    if decided is None:  # a report that could not settle it (the log does not read as a game)
        why = f" ({ruling.reason})" if ruling.reason else ""
        decided = f"{ruling.verdict}{why}, by {ruling.by or '-'} against {ruling.against or '-'}"
    return f"{head}; ruled at position {dispute.ruled_at} on {judged} [{ruling.rule}]: {decided}{mismatch}"


# --- adjudication and verify --all -----------------------------------------------------------------------


def render_adjudication(found: Adjudication) -> str:
    """The ruling as text: which catch or challenge was judged (the recorded one, or the one described),
    where what was named differs from it, the verdict and the evidence."""
    ruling = found.ruling
    why = f" ({ruling.reason})" if ruling.reason else ""
    lines = [f"game {found.game_id}: {_judged(ruling.kind.value, found.position, found.recorded)}"]
    if found.mismatch is not None:
        lines.append(f"  NOT AS NAMED: {found.mismatch}")
    lines += [
        f"  verdict: {ruling.verdict.value}{why}",
        f"  rule: {ruling.rule.value}",
        f"  by {ruling.by or '-'} against {ruling.against or '-'}",
        "  evidence:",
        *_evidence_lines(ruling.evidence),
    ]
    if found.recorded:
        lines.append(f"  {_TABLE_SAID[ruling.applied_ok]}")
    return "\n".join(lines)


def _evidence_lines(evidence: Evidence) -> list[str]:
    """One line per fact, in the evidence's order: cards by their tokens, positions as such."""
    lines = []
    for fact in dataclasses.fields(evidence):
        value = getattr(evidence, fact.name)
        if value is None:
            text = "-"
        elif fact.name in evidence.PLACES:
            text = f"position {value}"
        elif isinstance(value, tuple):
            # Cards by their tokens, names (who stacked on a Wild Draw Four) as they are.
            text = " ".join(v if isinstance(v, str) else v.token for v in value) or "(none)"
        elif isinstance(value, int | str):
            text = str(value)  # a stacked total, a penalty and who takes it (house.stacking)
        else:
            assert isinstance(value, Card | Colour)
            text = value.token if isinstance(value, Card) else value.value
        lines.append(f"    {fact.name.replace('_', ' ')}: {text}")
    return lines


def render_summary(
    rows: Sequence[GameSummary], invalid: Sequence[str], differs: Sequence[tuple[str, ReplaySection]]
) -> str:
    """``verify --all`` as text: a table of every game, the totals, then the games whose stored outcome
    differs from today's replay (after a rules fix)."""
    if not rows:
        return "no games stored"

    def cell(value: bool | None, yes: str, no: str) -> str:
        return "?" if value is None else (yes if value else no)

    header = ("GAME", "ORIGIN", "VERSION", "VALID", "CHAIN", "DIVERGED AT", "OUTCOME", "FIRST PROBLEM")
    table = [header] + [
        (
            row.game_id,
            "?" if row.origin is None else row.origin.value,
            "?" if row.version is None else str(row.version),
            cell(row.valid, "yes", "NO"),
            cell(row.chain, "ok", "TAMPERED"),
            "-" if row.diverged_at is None else str(row.diverged_at),
            cell(row.outcome_differs, "DIFFERS", "same"),
            row.first_problem or "-",
        )
        for row in rows
    ]
    widths = [max(len(line[column]) for line in table) for column in range(len(header) - 1)]
    lines = [
        "  ".join(value.ljust(width) for value, width in zip(line, widths, strict=False)) + "  " + line[-1]
        for line in table
    ]
    lines.append("")
    lines.append(
        f"{count(len(rows), 'game')}: {len(rows) - len(invalid)} valid, {len(invalid)} invalid; "
        f"outcome differs from today's replay in {len(differs)}"
    )
    if invalid:
        lines.append("invalid: " + ", ".join(invalid))
    if differs:
        lines.append("outcome differs (the stored outcome is not what today's rules engine replays):")
        for game_id, replay in differs:
            diverged = replay.diverged_at
            where = "" if diverged is None else f"; diverged at position {diverged.position}"
            lines.append(f"  {game_id}{where}")
            lines += _outcome_lines(replay)
    return "\n".join(lines)


def count(number: int, thing: str) -> str:
    """``1 game``, ``2 games``."""
    return f"{number} {thing}" if number == 1 else f"{number} {thing}s"
