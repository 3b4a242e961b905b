"""Verify and adjudicate a stored game: the record verifier, pointed at the log.

:func:`verify_game` gives a stored game's full report: what :func:`service.records.verify.verify_record`
finds, as positions of the stream, plus ``chain``, ``seed``, ``replay``, ``projections`` and
``disputes``. :func:`adjudicate` rules on one catch or challenge at a position. Everything here is pure:
the caller reads the stream (and the seed, if it may) and passes them in. docs/DESIGN.md ("A stored
game, read and checked").
"""

from __future__ import annotations

import hashlib

from service.audit.chain import check_chain, check_import
from service.audit.game_report import (
    Adjudication,
    ChainSection,
    Divergence,
    Flaw,
    GameReport,
    GameStatus,
    Origin,
    ProjectionCheck,
    ReplaySection,
    SeedSection,
    SeedStatus,
    StoredForm,
)
from service.audit.ledger import Beside, check_game_row, check_ledger
from service.audit.log import (
    GameLog,
    LogError,
    LoggedCommands,
    LoggedRecord,
    last_line,
    record_sha256,
    truncated,
)
from service.domain.catalogue import encode, type_name
from service.domain.entries import DisputeKind
from service.records.record import Action, ActionKind, GameRecord, RecordError, read_record
from service.records.report import Outcome, RulesReport, Ruling
from service.records.verify import Replay, Report
from service.rules.commands import Catch
from service.rules.events import Event, GameEnded
from service.rules.state import State
from service.rules.uno import catch_reason
from service.rules.violations import Rule
from service.store import StoredEvent

#: The stored type of the event that ends a game.
_GAME_ENDED = type_name(GameEnded)


class AdjudicationError(ValueError):
    """A catch or challenge that cannot be adjudicated as asked: bad input (``invalid``; ``field`` names
    it), or a game that cannot be followed as far as the position."""

    def __init__(self, field: str, message: str, *, invalid: bool = True) -> None:
        super().__init__(message)
        self.field = field
        self.invalid = invalid


class NothingToJudge(AdjudicationError):
    """No catch or challenge of the kind asked for is recorded at the position, and none can be made
    right after it (no Wild Draw Four waits for an answer; nobody holds a single card): a verdict there
    would judge a move that could not happen, and read as if it had."""

    def __init__(self, message: str) -> None:
        super().__init__("position", f"nothing to judge: {message}", invalid=False)


def _replay(logged: LoggedRecord, up_to: int | None = None) -> Replay:
    """A replay of the stored game's record (up to line ``up_to``), its messages naming positions."""
    record = logged.record if up_to is None else truncated(logged.record, up_to)
    return Replay(record, where=lambda line: f"position {logged.position(line)}")


def _replayed(logged: LoggedRecord | LoggedCommands) -> Report:
    """The replay of the whole stored game: of its commands as read back, or of its record."""
    if isinstance(logged, LoggedRecord):
        return _replay(logged).run()
    replay = Replay(GameRecord(logged.header, ()), where=lambda line: f"position {logged.position(line)}")
    return replay.run_commands(logged.steps)


def verify_game(
    log: GameLog,
    *,
    beside: Beside | None = None,
    projection_problems: list[str] | None = None,
    show_seed: bool = False,
    via_record: bool = False,
) -> GameReport:
    """The full report of a stored game (see the module docstring).

    ``log.seed`` is used to re-derive the cards whenever it is given; ``show_seed`` also shows it (the
    game has ended, or the adjudicator revealed it). ``projection_problems`` is the read models'
    cross-check (``None``: not run). ``beside`` is what the store keeps beside the events (the command
    ledger, the games row), checked against them (``None``: not checked).

    A live game's commands, as read back from its events, are replayed as they are
    (:meth:`GameLog.commands`, :meth:`Replay.run_commands`); ``via_record`` writes them as the record
    the game stands for and replays that instead (:meth:`GameLog.record`): the same report, slower.
    """
    ledger = None if beside is None else beside.ledger
    ledger_last = None if ledger is None else max((row.last_version for row in ledger), default=None)
    findings = check_chain(log.game_id, log.rows, ledger_last, log.canonical)
    if beside is not None:
        findings += check_ledger(log.rows, beside.ledger, findings)
        findings += check_game_row(log.rows, beside.game, *_catalogued(log))
    if log.imported is not None:
        lines, text = log.record_lines(), log.record_text()
        findings += check_import(log.rows[0].version, log.imported, lines, record_sha256(text), findings)
    chain = ChainSection(len(log.rows), log.rows[-1].hash, tuple(findings))
    projections = None if projection_problems is None else ProjectionCheck(tuple(projection_problems))
    unreadable_entries = tuple(Flaw(position, message) for position, message in log.unreadable_entries)
    reveal = log.seed is not None
    try:
        logged = log.record(reveal=reveal) if via_record else log.commands(reveal=reveal)
    except (LogError, RecordError) as bad:
        # The log cannot even be read back as a record (a payload that no longer decodes, an imported
        # line that is no longer well formed): the chain check, and where reading stopped.
        position = bad.position if isinstance(bad, LogError) else bad.line + 1
        return GameReport(
            log.game_id,
            Origin(log.origin),
            log.version,
            _status(log, None),
            None,
            Flaw(position, str(bad)),
            chain,
            None,
            None,
            projections,
            (),
            tuple(log.disputes()),
            unreadable_entries,
        )
    report = _replayed(logged)
    judged = report.rules()
    rules = judged.placed(logged.position)
    divergence = _divergence(logged, report) if log.imported is None else None
    return GameReport(
        log.game_id,
        Origin(log.origin),
        log.version,
        _status(log, rules),
        rules,
        None,
        chain,
        _seed_section(log, logged, rules, divergence, show_seed),
        _replay_section(log, judged, divergence),
        projections,
        logged.header.players,
        # Each ruling with what it decided of its dispute, which needs what the table applied.
        tuple(dispute.settled(rules.rulings) for dispute in log.disputes()),
        unreadable_entries,
    )


def _status(log: GameLog, rules: RulesReport | None) -> GameStatus:
    """Over or in progress, as the log says (an imported record: as its replay ends)."""
    if log.imported is None:
        over = any(row.type == _GAME_ENDED for row, _ in log.game)
    else:
        over = rules is not None and rules.outcome.winner is not None
    return GameStatus.OVER if over else GameStatus.IN_PROGRESS


def _replay_section(log: GameLog, judged: RulesReport, divergence: Divergence | None) -> ReplaySection:
    """The stored outcome against today's replay (``judged``, in record lines): a live game's as its
    events say, an imported record's as the verifier said at import, with its verdict."""
    imported = log.imported is not None
    replayed = judged.import_outcome() if imported else judged.outcome
    try:
        stored: Outcome | None = Outcome.from_json(log.stored_outcome(), verdict=imported)
    except ValueError:
        stored = None
    return ReplaySection(divergence, stored, replayed)


def _divergence(logged: LoggedRecord | LoggedCommands, report: Report) -> Divergence | None:
    """The first stored event that today's engine does not make of the same command, or ``None``."""
    for line in sorted(logged.stored):
        rows, stored = logged.stored[line]
        replayed = report.events.get(line, [])
        if list(stored) == replayed:
            continue
        for index, row in enumerate(rows):
            mine = replayed[index] if index < len(replayed) else None
            if mine != stored[index]:
                return _diverged(row.version, row, mine)
        return _diverged(rows[-1].version + 1, None, replayed[len(rows)])
    return None


def _diverged(position: int, row: StoredEvent | None, replayed: Event | None) -> Divergence:
    return Divergence(
        position,
        None if row is None else StoredForm(row.type, row.payload),
        None if replayed is None else StoredForm(*encode(replayed)),
    )


def _catalogued(log: GameLog) -> tuple[str | None, tuple[str, ...] | None]:
    """The variant and players the game's first event says, as the games table keeps them (``None``: it no
    longer says)."""
    if log.imported is not None:
        try:
            header = read_record(log.record_text()).header
        except RecordError:
            return None, None
        return header.variant.value, header.players
    created = log.created
    return (None, None) if created is None else (created.variant.value, created.players)


def _seed_section(
    log: GameLog,
    logged: LoggedRecord | LoggedCommands,
    rules: RulesReport,
    divergence: Divergence | None,
    show_seed: bool,
) -> SeedSection:
    header = logged.header
    committed = header.seed_sha256
    seed = log.seed if log.seed is not None else header.seed
    commitment_ok = None
    if seed is not None and committed is not None:
        commitment_ok = hashlib.sha256(seed).hexdigest() == committed
    mismatches = [Flaw(v.at, v.message) for v in rules.violations if v.rule is Rule.FAIR_COMMIT]
    if seed is None and committed is not None and log.imported is None:
        # The service keeps the seed of every game it deals (the games table's secret): none, for a game that
        # commits to one, is a secret lost or moved outside the service, and no card can be checked.
        commitment_ok = False
        mismatches.append(Flaw(1, "the game commits to a dealing seed and the store holds none for it"))
    if divergence is not None and divergence.deals_cards:
        mismatches.append(Flaw(divergence.position, "the stored cards are not the ones the seed deals"))
    revealed_at = log.seed_revealed_at()
    if seed is None:
        status = SeedStatus.NONE
    else:
        status = SeedStatus.SECRET if revealed_at is None else SeedStatus.REVEALED
    return SeedSection(
        committed,
        status,
        revealed_at,
        seed if seed is not None and show_seed else None,
        commitment_ok,
        None if seed is None else (log.version if rules.stopped_at is None else rules.stopped_at),
        tuple(mismatches),
    )


def adjudicate(
    log: GameLog, kind: DisputeKind, position: int, *, by: int | None = None, target: int | None = None
) -> Adjudication:
    """Rule on the ``kind`` at ``position`` of ``log`` (see the module docstring).

    When the log holds a catch (a challenge) at ``position``, that one is judged, whoever asks and
    whatever ``by`` and ``target`` say: a dispute is about what happened at the table, and the log is the
    record of it. Only when the log holds none there is the one ``by`` and ``target`` describe judged, as
    made right after ``position``: a catch by ``by`` of ``target`` (default: a player whose UNO window is
    open, else one holding one card; by anyone else), a challenge by ``by`` (default: the Wild Draw Four's
    victim; a challenge is against the card's player, so ``target`` is only compared). Named seats that
    differ from what was judged are reported in :attr:`Adjudication.mismatch`.

    Raises :class:`AdjudicationError` for a seat or position outside the game, or a game that cannot be
    followed that far; :class:`NothingToJudge` when the log holds none there and none can be made (a
    challenge with no Wild Draw Four waiting; a catch naming no target when nobody holds one card).
    """
    if not 1 <= position <= log.version:
        raise AdjudicationError("position", f"the game's positions are 1 to {log.version}, not {position}")
    logged = log.record(reveal=log.seed is not None)
    record = logged.record
    names = record.header.players
    for name, seat in (("by", by), ("target", target)):
        if seat is not None and not 0 <= seat < len(names):
            raise AdjudicationError(name, f"seats are 0 to {len(names) - 1}, not {seat}")
    line = logged.line_at(position)
    if line is None:
        raise AdjudicationError("position", f"position {position} is not part of the game")
    recorded = _recorded_action(logged, line, kind)
    if recorded is not None:
        replay = _replay_to(logged, line - 1)
        judged, at, where = recorded, line, f"recorded at position {position}"
    else:
        replay = _replay_to(logged, line)
        _check_judgeable(replay, kind, position, by, target, logged)
        judged = _described(replay, kind, names, last_line(record) + 1, by, target)
        at, where = judged.line, f"made right after position {position}"
    found = _adjudication(logged, replay.rule_on(judged), at, position)
    mismatch = _mismatch(found, names, by, target, where)
    return Adjudication(log.game_id, position, recorded is not None, found, mismatch)


def _check_judgeable(
    replay: Replay, kind: DisputeKind, position: int, by: int | None, target: int | None, logged: LoggedRecord
) -> None:
    """Raise :class:`NothingToJudge`, saying what ``position`` holds, when no ``kind`` can be made right
    after it. A catch naming its target is judged on that player's hand whatever it holds (no penalty
    costs nobody a card); a challenge with no Wild Draw Four to answer is not, since "failed" would read as
    the challenger's penalty."""
    state = replay.state
    assert state is not None
    if kind is DisputeKind.WD4_CHALLENGE:
        if state.wd4 is None:
            last = replay.wd4_line
            played = (
                "none has been played"
                if last is None
                else f"the last was played at position {logged.position(last)}"
            )
            raise NothingToJudge(f"no Wild Draw Four waits for an answer at position {position} ({played})")
        return
    if target is not None:
        return
    holding = [seat for seat, hand in enumerate(state.hands) if len(hand) == 1 and seat != by]
    if not holding:
        held = ", ".join(f"{name} {len(hand)}" for name, hand in zip(state.players, state.hands, strict=True))
        cards = f"cards held: {held}" if any(state.hands) else "no cards dealt"
        others = "nobody" if by is None else f"nobody but {state.players[by]}"
        raise NothingToJudge(f"{others} holds a single card at position {position} ({cards})")


def _described(
    replay: Replay, kind: DisputeKind, names: tuple[str, ...], line: int, by: int | None, target: int | None
) -> Action:
    """The catch or challenge ``by`` and ``target`` describe, as record line ``line`` (past the record),
    with the defaults of :func:`adjudicate` for what they leave out."""
    state = replay.state
    assert state is not None
    if kind is DisputeKind.WD4_CHALLENGE:
        if by is None:  # the last Wild Draw Four's victim
            by = state.turn if replay.wd4_victim is None else replay.wd4_victim
        return Action(line=line, by=names[by], kind=ActionKind.CHALLENGE)
    if target is None:
        target = _catchable(state, by)
    if by is None:
        by = (target + 1) % len(names)
    return Action(line=line, by=names[by], kind=ActionKind.CATCH, target=names[target])


def _catchable(state: State, by: int | None) -> int:
    """Whom a catch by ``by`` (anyone, if ``None``) that names no one is about: a player whose UNO
    window is open (the rules engine would penalise them), else one holding a single card, else the
    player whose turn it is (or the next, if that is ``by``), never ``by`` when another will do."""
    players = len(state.hands)

    def catcher(seat: int) -> int:
        return (seat + 1) % players if by is None else by

    others = [seat for seat in range(players) if seat != by]
    exposed = [seat for seat in others if catch_reason(state, Catch(catcher(seat), seat)) is None]
    holding_one = [seat for seat in others if len(state.hands[seat]) == 1]
    return next(iter(exposed + holding_one), state.turn if by != state.turn else (state.turn + 1) % players)


def _recorded_action(logged: LoggedRecord, line: int, kind: DisputeKind) -> Action | None:
    wanted = ActionKind.CATCH if kind is DisputeKind.UNO_CATCH else ActionKind.CHALLENGE
    for block in logged.record.rounds:
        for action in block.actions:
            if action.line == line and action.kind is wanted:
                return action
    return None


def _mismatch(
    ruling: Ruling, names: tuple[str, ...], by: int | None, target: int | None, where: str
) -> str | None:
    """Where the named ``by`` and ``target`` differ from the ruling's, in words (``None``: nowhere)."""
    named = [
        f"{role} {names[seat]}"
        for role, seat, judged in (("by", by, ruling.by), ("target", target, ruling.against))
        if seat is not None and names[seat] != judged
    ]
    if not named:
        return None
    return (
        f"{' and '.join(named)} named, but the {ruling.kind.value} {where} is by {ruling.by} "
        f"against {ruling.against or 'nobody'}"
    )


def _replay_to(logged: LoggedRecord, line: int) -> Replay:
    replay = _replay(logged, line)
    report = replay.run()
    if report.stopped_at is not None:
        raise AdjudicationError(
            "position",
            f"the game cannot be followed past position {logged.position(report.stopped_at)}: "
            f"{report.violations[-1].message}",
            invalid=False,
        )
    return replay


def _adjudication(logged: LoggedRecord, ruling: Ruling | None, line: int, position: int) -> Ruling:
    """``ruling`` (judged at record line ``line``) in positions of the log, ``line`` standing at
    ``position``."""
    if ruling is None:
        raise AdjudicationError(
            "position", f"the game cannot be followed to position {position}", invalid=False
        )

    def place(n: int) -> int:
        return position if n == line else logged.position(n)

    return ruling.placed(place)
