"""A stored game's stream, read back as the record it stands for.

A game the service ran is read back command by command (grouped by ``command_id``, read from the events);
an imported game's :class:`~service.domain.entries.RecordLine` entries are its text. Either way
:class:`GameLog` knows which stream position each record line stands for, and keeps audit entries apart.
Every row is read once, through the one catalogue; a row it cannot read is kept with the reason, not
raised. docs/DESIGN.md ("A stored game, read and checked") says why.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from service.audit.decision import DisputeOutcome, decision, outcome_of
from service.domain.catalogue import CATALOGUE, CatalogueError, Group, decode_entry, decode_event, type_name
from service.domain.entries import (
    DisputeFiled,
    DisputeRuled,
    Entry,
    RecordImported,
    RecordLine,
    SeedRevealed,
)
from service.records.export import record_from_steps
from service.records.record import GameRecord, RecordHeader, RoundBlock, read_record, write_record
from service.records.report import Ruling
from service.rules.commands import (
    Accept,
    CallUno,
    Catch,
    Challenge,
    Choose,
    Command,
    Draw,
    Pass,
    Play,
    Press,
    Reshuffle,
    StartRound,
)
from service.rules.events import (
    Awaiting,
    CardDrawn,
    CardPlayed,
    CardsTaken,
    ColourChosen,
    DealerDrawn,
    Event,
    GameCreated,
    GameEnded,
    JumpedIn,
    LauncherPressed,
    Passed,
    PileReshuffled,
    Prompted,
    RoundEnded,
    RoundStarted,
    StackAccepted,
    UnoCalled,
    UnoCaught,
    Wd4Accepted,
    Wd4Challenged,
)
from service.rules.violations import Rule
from service.store import StoredEvent
from service.store.canonical import canonical as canonical_bytes

#: The rows after which the seed is public: the game's end, or the adjudicator's early look.
_SEED_PUBLIC = frozenset((type_name(GameEnded), type_name(SeedRevealed)))

#: The events after which no prompt is pending (a tuple: ``isinstance`` takes it faster than a union).
_PROMPTS_END = (RoundEnded, GameEnded)

#: The stored types of the audit trail's entries (every other row is the game's).
_AUDIT_TYPES = CATALOGUE.names(Group.AUDIT)

#: A game row with its event, or with why the catalogue cannot read it.
GameRow = tuple[StoredEvent, Event | CatalogueError]


class LogError(ValueError):
    """A stream that cannot be read back as a game's record (an event that does not decode, a game
    event that no command writes, no start); ``position`` is where reading stopped."""

    def __init__(self, message: str, position: int = 1) -> None:
        super().__init__(message)
        self.position = position


@dataclass(frozen=True, slots=True)
class Dispute:
    """A dispute as the log tells it: the filing, and the ruling once there is one; ``outcome``, what the
    ruling decided of the dispute, once the report has settled it (:meth:`settled`:
    it needs the table's part, which the ruling entry does not hold)."""

    filed_at: int
    filed: DisputeFiled
    ruled_at: int | None = None
    ruling: DisputeRuled | None = None
    outcome: DisputeOutcome | None = None

    def to_json(self, players: Sequence[str]) -> dict[str, Any]:
        """The dispute as a report lists it: ``filer`` is who filed it; ``by`` and ``target`` are the
        catcher (challenger) and the caught player it names, if any, as in the rulings. Seats are given
        by name (a seat the names do not cover: the filer's number, else ``None``). A settled ruling adds
        ``outcome`` and ``decision`` (:mod:`service.audit.decision`) to the entry's fields."""
        filed = self.filed

        def named(seat: int | None) -> str | None:
            return players[seat] if seat is not None and 0 <= seat < len(players) else None

        return {
            "dispute_id": filed.dispute_id,
            "filed_at": self.filed_at,
            "filer": named(filed.seat) or filed.seat,
            "kind": filed.kind,
            "position": filed.position,
            "by": named(filed.by),
            "target": named(filed.target),
            "claim": filed.claim,
            "status": "ruled" if self.ruling is not None else "open",
            "ruled_at": self.ruled_at,
            "ruling": self._ruling_json(),
        }

    def _ruling_json(self) -> dict[str, Any] | None:
        if self.ruling is None:
            return None
        shown = dataclasses.asdict(self.ruling)
        if self.outcome is not None:
            shown["outcome"] = self.outcome.value
            shown["decision"] = self.decided()
        return shown

    def settled(self, rulings: Iterable[Ruling]) -> Dispute:
        """This dispute with its outcome, once ruled: whether the table applied the verdict comes from the
        report's ruling on the catch or challenge the log holds at the ruled position (``rulings``, in
        positions); a dispute not ruled, or already settled, is returned as it is."""
        ruled = self.ruling
        if ruled is None or self.outcome is not None:
            return self
        kind = self.filed.kind
        applied_ok = next(
            (r.applied_ok for r in rulings if r.at == ruled.position and r.kind.value == kind), None
        )
        return dataclasses.replace(self, outcome=outcome_of(ruled.verdict, ruled.recorded, applied_ok))

    def decided(self) -> str | None:
        """What the ruling decided, in words (``None``: not ruled, or not settled)."""
        if self.ruling is None or self.outcome is None:
            return None
        return decision(self.filed.kind, self.ruling, self.outcome)


def collect_disputes(entries: Iterable[tuple[int, Entry]]) -> list[Dispute]:
    """The disputes among ``(position, entry)`` pairs of one game, in filing order, with their rulings."""
    found: dict[str, Dispute] = {}
    for position, entry in entries:
        if isinstance(entry, DisputeFiled):
            found[entry.dispute_id] = Dispute(position, entry)
        elif isinstance(entry, DisputeRuled) and entry.dispute_id in found:
            found[entry.dispute_id] = dataclasses.replace(
                found[entry.dispute_id], ruled_at=position, ruling=entry
            )
    return list(found.values())


class GameLog:
    """One game's stored stream, split into the game and its audit trail.

    ``rows`` are the stream's events in version order (a damaged stream is read as it is: a hole or a
    swap shows in the chain check, and the record follows what is there). ``seed`` is the game's secret
    seed when the caller may use it (the verifier inside the service); the record carries it only when
    ``reveal`` says so.
    """

    def __init__(
        self,
        game_id: str,
        rows: Sequence[StoredEvent],
        seed: bytes | None = None,
        canonical: Sequence[bytes] | None = None,
        decoded: dict[bytes, Event] | None = None,
    ) -> None:
        if not rows:
            raise LogError(f"game {game_id!r} has no events")
        self.game_id = game_id
        self.rows = list(rows)
        self.seed = seed
        self._canonical = None if canonical is None else list(canonical)
        if self._canonical is not None and len(self._canonical) != len(self.rows):
            raise ValueError(f"{len(self._canonical)} canonical forms for {len(self.rows)} rows")
        self.entries: list[tuple[StoredEvent, Entry]] = []
        #: The game's rows (every row that is not an audit entry, a type the catalogue does not know
        #: included), each with its event, or with why the catalogue cannot read it: reading the record
        #: stops there (:class:`LogError`).
        self.game: list[GameRow] = []
        #: Audit entries whose payload no longer decodes (position, why): left out, and the chain check
        #: says what happened to them.
        self.unreadable_entries: list[tuple[int, str]] = []
        # Games repeat their events (the same prompt, the same card drawn again): one decoding of each
        # payload, found by its canonical bytes, which say exactly what the type and payload are
        # (``decoded``: the decodings of the logs read before, :class:`service.audit.rows.StreamCache`).
        # The catalogue's events and entries are frozen, so rows may share one.
        if decoded is None:
            decoded = {}
        for index, row in enumerate(self.rows):
            key = None if self._canonical is None else self._canonical[index]
            event: Event | CatalogueError | None = None if key is None else decoded.get(key)
            if event is None and row.type in _AUDIT_TYPES:
                try:
                    self.entries.append((row, decode_entry(row.type, row.payload)))
                except CatalogueError as bad:
                    self.unreadable_entries.append((row.version, str(bad)))
                continue
            if event is None:
                try:
                    event = decode_event(row.type, row.payload)
                except CatalogueError as bad:
                    event = bad  # kept with its row (an edited row is rare: not shared)
                else:
                    if key is not None:
                        decoded[key] = event
            self.game.append((row, event))
        self._events = {id(row): event for row, event in self.game}
        first = self.entries[0][1] if self.entries and self.entries[0][0] is self.rows[0] else None
        self.imported: RecordImported | None = first if isinstance(first, RecordImported) else None
        self.version = self.rows[-1].version

    # --- what the log says ------------------------------------------------------------------------------

    @property
    def canonical(self) -> list[bytes]:
        """The bytes each row's hash covers (:func:`service.store.canonical.canonical` of its type and
        payload), in row order: as read with the rows (:mod:`service.audit.rows`), else written now."""
        if self._canonical is None:
            self._canonical = [canonical_bytes(row.type, row.payload) for row in self.rows]
        return self._canonical

    def event_of(self, row: StoredEvent) -> Event:
        """The game event of ``row``: as decoded when the log was read, for one of its rows (another row is
        decoded now). Raises :class:`~service.domain.catalogue.CatalogueError` for a row that does not
        decode."""
        event = self._events.get(id(row))
        if event is None:
            return decode_event(row.type, row.payload)
        if isinstance(event, CatalogueError):
            raise event
        return event

    @property
    def origin(self) -> str:
        """``"imported"`` for a table game's record, ``"live"`` for a game the service ran."""
        return "imported" if self.imported is not None else "live"

    @property
    def created(self) -> GameCreated | None:
        """A live game's first event, when it is a readable ``GameCreated`` (only an edited log's is not)."""
        if not self.game or self.game[0][0] is not self.rows[0]:
            return None
        event = self.game[0][1]
        return event if isinstance(event, GameCreated) else None

    @property
    def players(self) -> tuple[str, ...]:
        """The players' names in seat order (none, when the log no longer says)."""
        if self.imported is not None:
            return read_record(self.record_text()).header.players
        created = self.created
        return () if created is None else created.players

    def disputes(self) -> list[Dispute]:
        """Every dispute filed in this game, in filing order, with its ruling when there is one."""
        return collect_disputes((row.version, entry) for row, entry in self.entries)

    def seed_revealed_at(self) -> int | None:
        """The position the seed became public at: ``GameEnded``, or the adjudicator's early look."""
        for row in self.rows:
            if row.type in _SEED_PUBLIC:
                return row.version
        return None

    def record_lines(self) -> list[tuple[int, RecordLine]]:
        """An imported game's ``RecordLine`` entries with their positions, in stream order (a line whose
        payload no longer decodes is left out: :attr:`unreadable_entries` names it)."""
        return [(row.version, entry) for row, entry in self.entries if isinstance(entry, RecordLine)]

    def record_text(self) -> str:
        """An imported game's record, byte for byte as it was imported: the inverse of the import's split
        (:meth:`service.app.auditor.Auditor.import_record`)."""
        assert self.imported is not None
        lines = [line.text for _, line in self.record_lines()]
        return "\n".join(lines) + ("\n" if self.imported.final_newline else "")

    def stored_outcome(self) -> dict[str, Any]:
        """The outcome the log holds: for a live game what its events say (rounds, scores, winner), for
        an imported one what the verifier said at import."""
        if self.imported is not None:
            return dict(self.imported.outcome)
        players: tuple[str, ...] = ()
        rounds: list[dict[str, Any]] = []
        scores: list[int] = []
        winner = None
        for _, event in self.game:
            if isinstance(event, GameCreated):
                players = event.players
                scores = [0] * len(players)
            elif isinstance(event, RoundEnded):
                rounds.append({"round": event.round, "winner": players[event.winner], "points": event.points})
                scores[event.winner] += event.points
            elif isinstance(event, GameEnded):
                winner = players[event.winner]
        return {"rounds": rounds, "scores": dict(zip(players, scores, strict=True)), "winner": winner}

    # --- the record it stands for -----------------------------------------------------------------------

    def record(self, *, reveal: bool) -> LoggedRecord:
        """The game as a record, with the position of every line. ``reveal`` writes the seed into the
        header (a live game's replay then re-derives every card from it); without it the header carries
        the seed's hash alone."""
        if self.imported is not None:
            return self._imported_record()
        return self._live_record(reveal)

    def _imported_record(self) -> LoggedRecord:
        if self.game:  # an imported stream holds the record's lines and audit entries, nothing else
            row = self.game[0][0]
            raise LogError(f"the {row.type} at {row.version} is not part of an imported record", row.version)
        positions = {line.line: position for position, line in self.record_lines()}
        return LoggedRecord(read_record(self.record_text()), positions, {})

    def commands(self, *, reveal: bool) -> LoggedRecord | LoggedCommands:
        """The game as the replay reads it: a live game's commands as read back from its events, before any
        record is written of them (:class:`LoggedCommands`, what :meth:`Replay.run_commands
        <service.records.verify.Replay.run_commands>` replays), an imported game's record (:meth:`record`).
        The same positions and stored events, and the same errors, as :meth:`record`."""
        if self.imported is not None:
            return self._imported_record()
        read = self._read_back(reveal)
        positions = {1: read.created_at}
        steps_of_line: dict[int, tuple[tuple[StoredEvent, ...], tuple[Event, ...]]] = {}
        for line, (first, written) in enumerate(zip(read.firsts, read.stored, strict=True), start=2):
            positions[line] = first
            steps_of_line[line] = written
        header = _record_header(read.created, reveal)
        return LoggedCommands(header, read.steps, positions, steps_of_line)

    def _live_record(self, reveal: bool, read: _ReadBack | None = None) -> LoggedRecord:
        read = read if read is not None else self._read_back(reveal)
        record = record_from_steps(read.created, read.steps, reveal_seed=reveal)
        positions = {record.header.line: read.created_at}
        steps_of_line: dict[int, tuple[tuple[StoredEvent, ...], tuple[Event, ...]]] = {}
        lines: list[int] = []
        for block in record.rounds:
            lines.append(block.start.line)
            lines.extend(action.line for action in block.actions)
        for line, first, written in zip(lines, read.firsts, read.stored, strict=True):
            positions[line] = first
            steps_of_line[line] = written
        return LoggedRecord(record, positions, steps_of_line)

    def _read_back(self, reveal: bool) -> _ReadBack:
        """A live game's events read back as the commands they answered (see :class:`_ReadBack`)."""
        if not self.game:
            raise LogError(f"game {self.game_id!r} holds no game events", self.rows[0].version)
        groups = _command_groups(self.game)
        created_row, created = groups[0][0]
        if isinstance(created, CatalogueError):
            raise LogError(f"the first event does not decode: {created}", created_row.version)
        if not isinstance(created, GameCreated):
            raise LogError(f"game {self.game_id!r} does not start with GameCreated", created_row.version)
        _check_shape(created, len(created.players), created_row.version)
        created = dataclasses.replace(created, seed=self.seed if reveal else None)
        # Who the game waits for, and how: enough to tell a pass from a draw that found nothing, and who
        # chose a Green Shell's target. Taken from the Prompted events alone (no fold), so that a damaged
        # log is still read back as far as it goes, for the replay to judge.
        prompted: Prompted | None = None
        steps: list[tuple[Command, tuple[Event, ...]]] = []
        firsts: list[int] = []
        stored_groups: list[tuple[tuple[StoredEvent, ...], tuple[Event, ...]]] = []
        players = len(created.players)
        shaped: set[int] = set()  # the events checked already (rows with equal payloads share one event)
        rest = groups[0][1:]
        for group in [rest, *groups[1:]] if rest else groups[1:]:
            decoded: list[Event] = []
            for row, event in group:
                if isinstance(event, CatalogueError):
                    raise LogError(f"the {row.type} at {row.version} does not decode: {event}", row.version)
                if id(event) not in shaped:
                    _check_shape(event, players, row.version)
                    shaped.add(id(event))
                decoded.append(event)
            rows, events = tuple(row for row, _ in group), tuple(decoded)
            steps.append((_command_of(prompted, events, rows[0].version), events))
            firsts.append(rows[0].version)
            stored_groups.append((rows, events))
            for event in events:
                if isinstance(event, Prompted):
                    prompted = event
                elif isinstance(event, _PROMPTS_END):
                    prompted = None
        if steps and not isinstance(steps[0][0], StartRound):
            # Every game's first command deals (CreateGame may deal it too); a record has no line for
            # anything before that, so only an edited log holds such a command.
            row = stored_groups[0][0][0]
            raise LogError(
                f"the {row.type} at {row.version} comes before the first round is dealt", row.version
            )
        return _ReadBack(created, created_row.version, steps, firsts, stored_groups)


@dataclass(frozen=True, slots=True)
class _ReadBack:
    """A live game's events read back: its first event (the seed in it the one to replay with, or none),
    its position, and each command with the events it wrote (``steps``), the position of its first event
    (``firsts``) and those events as stored and decoded (``stored``)."""

    created: GameCreated
    created_at: int
    steps: list[tuple[Command, tuple[Event, ...]]]
    firsts: list[int]
    stored: list[tuple[tuple[StoredEvent, ...], tuple[Event, ...]]]


def _record_header(created: GameCreated, reveal: bool) -> RecordHeader:
    """The header :func:`~service.records.export.record_from_steps` writes for a live game read back."""
    return RecordHeader(
        variant=created.variant,
        players=created.players,
        options=created.options.to_json(),
        seed_sha256=created.seed_sha256,
        seed=created.seed if reveal else None,
        line=1,
    )


class _Positions:
    """Record lines and the stream positions they stand for (``positions``)."""

    __slots__ = ()
    positions: dict[int, int]

    def position(self, line: int) -> int:
        """The stream position of record line ``line`` (a line past the record: the position after)."""
        found = self.positions.get(line)
        if found is not None:
            return found
        lines = sorted(self.positions)
        at = bisect.bisect_right(lines, line)
        return self.positions[lines[at - 1]] + 1 if at else 1


@dataclass(frozen=True, slots=True)
class LoggedCommands(_Positions):
    """A live game read back as the commands it answered, each with the events it wrote (``steps``), for a
    replay that does not write them as a record first. Command ``i`` stands at line ``i + 2`` of the record
    the game stands for (:meth:`GameLog.record`), whose ``header`` this is; ``positions`` and ``stored`` are
    that record's (:class:`LoggedRecord`)."""

    header: RecordHeader
    steps: list[tuple[Command, tuple[Event, ...]]]
    positions: dict[int, int]
    stored: dict[int, tuple[tuple[StoredEvent, ...], tuple[Event, ...]]]


@dataclass(frozen=True, slots=True)
class LoggedRecord(_Positions):
    """A stored game as a record: ``positions`` maps each record line to the stream position it stands
    for; ``stored`` maps each line of a live game to the stored events its command wrote, as stored and
    decoded."""

    record: GameRecord
    positions: dict[int, int]
    stored: dict[int, tuple[tuple[StoredEvent, ...], tuple[Event, ...]]]

    @property
    def header(self) -> RecordHeader:
        return self.record.header

    def line_at(self, position: int) -> int | None:
        """The record line whose events include ``position``: the last line starting at or before it."""
        best: tuple[int, int] | None = None
        for line, start in self.positions.items():
            if start <= position and (best is None or start > best[0]):
                best = (start, line)
        return best[1] if best is not None else None


def truncated(record: GameRecord, last_line: int) -> GameRecord:
    """``record`` up to and including line ``last_line``."""
    rounds = []
    for block in record.rounds:
        if block.start.line > last_line:
            break
        rounds.append(RoundBlock(block.start, tuple(a for a in block.actions if a.line <= last_line)))
    return GameRecord(record.header, tuple(rounds))


def last_line(record: GameRecord) -> int:
    """The number of the record's last line (its header's, for a record without rounds)."""
    if not record.rounds:
        return record.header.line
    block = record.rounds[-1]
    return block.actions[-1].line if block.actions else block.start.line


def record_sha256(text: str) -> str:
    """The SHA-256 (hex) of a record's text, as :class:`RecordImported` keeps it."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def export_text(log: GameLog, *, reveal: bool) -> str:
    """The ``uno-game-record/1`` text of a stored game (an imported game's exactly as imported)."""
    if log.imported is not None:
        return log.record_text()
    return write_record(log.record(reveal=reveal).record)


# --- reading commands back from their events -------------------------------------------------------------


#: The event fields that name a seat (an index into the players).
_SEAT_FIELDS = frozenset(("player", "target", "by", "offender", "winner", "dealer", "other"))


@functools.cache
def _seat_fields(kind: type) -> tuple[str, ...]:
    """The fields of event type ``kind`` that name a seat."""
    return tuple(f.name for f in dataclasses.fields(kind) if f.name in _SEAT_FIELDS)


def _check_shape(event: Event, players: int, position: int) -> None:
    """Refuse an event that no game of ``players`` can hold, which only an edited log can: one naming a
    seat the game does not have, hands for another number of players, a round dealt from neither a
    deck nor hands."""
    for name in _seat_fields(type(event)):  # type: ignore[arg-type]
        seat = getattr(event, name)
        if seat is not None and not 0 <= seat < players:
            raise LogError(
                f"the {type(event).__name__} at {position} names seat {seat} of {players}", position
            )
    if (
        isinstance(event, RoundStarted | RoundEnded)
        and event.hands is not None
        and len(event.hands) != players
    ):
        raise LogError(
            f"the {type(event).__name__} at {position} has {len(event.hands)} hands for {players}", position
        )
    if isinstance(event, RoundStarted) and event.deck is None and event.hands is None:
        raise LogError(f"the RoundStarted at {position} deals neither a deck nor hands", position)
    if isinstance(event, DealerDrawn) and any(not 0 <= seat < players for seat, _ in event.draws):
        raise LogError(f"the DealerDrawn at {position} names a seat the game does not have", position)


def _command_groups(rows: Sequence[GameRow]) -> list[list[GameRow]]:
    """The game's events, grouped by the command that wrote them (consecutive events sharing a command id;
    a row whose metadata was edited into something else than an object stands alone)."""
    groups: list[list[GameRow]] = []
    current: object = None
    for row in rows:
        stored = row[0]
        command_id = stored.metadata.get("command_id") if isinstance(stored.metadata, dict) else None
        command_id = stored.version if command_id is None else command_id
        if not groups or command_id != current:
            groups.append([])
            current = command_id
        groups[-1].append(row)
    return groups


def _command_of(prompted: Prompted | None, events: tuple[Event, ...], position: int) -> Command:
    """The command whose answer ``events`` were, given the game's last prompt before them.

    The first *turn action* among the events names it (consequences such as a reshuffle may come
    before it); the prompt tells a pass from a draw that found nothing to draw, and who chose a Green
    Shell's target.
    """
    for event in events:
        if isinstance(event, RoundStarted | DealerDrawn):
            if not any(isinstance(e, RoundStarted) for e in events):
                raise LogError(f"the events at {position} draw for the dealer but deal no round", position)
            return StartRound()
        if isinstance(event, JumpedIn):  # house.jump-in: the CardPlayed that follows is the play
            played = next((e for e in events if isinstance(e, CardPlayed)), None)
            if played is None or played.player != event.player:
                raise LogError(f"the jump-in at {position} is followed by no play of its player", position)
            return Play(played.player, played.card, played.colour, played.uno, played.target, jump_in=True)
        if isinstance(event, CardPlayed):
            return Play(event.player, event.card, event.colour, event.uno, event.target)
        if isinstance(event, CardDrawn):
            return Draw(event.player)
        if isinstance(event, Passed):
            pending = prompted is not None and prompted.awaiting in (Awaiting.DRAWN, Awaiting.FOLLOW_UP)
            return Pass(event.player) if pending else Draw(event.player)
        if isinstance(event, LauncherPressed) and event.cause is Rule.ATTACK_LAUNCHER:
            return Press(event.player)
        if isinstance(event, UnoCalled):
            return CallUno(event.player)
        if isinstance(event, UnoCaught):
            return Catch(event.by, event.target)
        if isinstance(event, Wd4Challenged):
            return Challenge(event.player)
        if isinstance(event, Wd4Accepted | StackAccepted):  # a stacked penalty taken: house.stacking
            return Accept(event.player)
        if isinstance(event, ColourChosen):
            return Choose(event.player, colour=event.colour)
        if isinstance(event, CardsTaken) and event.cause is Rule.MK_ITEM_GREEN_SHELL:
            return Choose(prompted.player if prompted is not None else event.player, target=event.player)
    if events and all(isinstance(e, PileReshuffled) for e in events):
        reshuffled = events[0]
        assert isinstance(reshuffled, PileReshuffled)
        return Reshuffle(reshuffled.pile)
    names = ", ".join(type(e).__name__ for e in events) or "nothing"
    raise LogError(f"the events at {position} ({names}) answer no command", position)
