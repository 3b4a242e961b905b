"""The audit application: verify, adjudicate, disputes, export and import over the event store.

:class:`Auditor` is what the gRPC ``AuditService`` and the ``uno-audit`` command line both call: it reads
a game's stream (and secret seed), hands them to the pure verifier (:mod:`service.audit.stored_game`), and
appends the audit trail's entries like any other event. Refusals are :mod:`service.domain.errors`
exceptions, each naming its cause in ``reason`` (listed with AuditService in
protos/uno/audit/v1/audit.proto, docs/API.md). docs/DESIGN.md ("The write loop").
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import structlog
from psycopg import errors as pg_errors

from service.app.runner import Appended, Decision, Head, Ran, Unchanged, Writer, ledger_mismatch_refused
from service.audit.game_report import Adjudication, GameReport, Unverified
from service.audit.ledger import Beside
from service.audit.log import Dispute, GameLog, LogError, collect_disputes, export_text, record_sha256
from service.audit.replay_html import SeatError, game_replay_html
from service.audit.rows import StreamCache, read_rows
from service.audit.stored_game import AdjudicationError, NothingToJudge, adjudicate, verify_game
from service.domain.catalogue import decode_entry, encode, type_name
from service.domain.entries import (
    DisputeFiled,
    DisputeKind,
    DisputeRuled,
    Entry,
    RecordImported,
    RecordLine,
    SeedRevealed,
)
from service.domain.errors import InvalidInput, NotFound, Precondition, ServiceError
from service.domain.limits import MAX_RECORD_BYTES, free_text
from service.ops import metrics
from service.records.record import FORMAT, RecordError, read_record
from service.records.report import RulesReport
from service.records.verify import verify_record
from service.rules.events import Event
from service.rules.options import OptionError, make_options
from service.store import CommandReused, EventStore, GameExists, NewEvent, StoredEvent
from service.store.clients import ADMIN_CLIENT

_log = structlog.get_logger(__name__)

A = TypeVar("A")
B = TypeVar("B")


class ReadModelCheck(Protocol):
    """The read models' cross-check of one game: what is wrong with its projected rows (nothing: they agree
    with its log). The read models are built on the service, so the auditor does not import them: whoever
    wires the service passes theirs in (:func:`projections.check.check_game`). The auditor hands it the
    stream it has read and each event as it decoded it, so that the check reads and decodes nothing
    twice."""

    def __call__(
        self,
        store: EventStore,
        game_id: str,
        *,
        stream: Sequence[StoredEvent] | None = None,
        decode: Callable[[StoredEvent], Event],
    ) -> Awaitable[list[str]]: ...


@dataclass(frozen=True, slots=True)
class Imported:
    """An imported record: its game, its version, and the verifier's report at import. ``duplicate``:
    the record (by its SHA-256) was imported before, as this game; no seat token was made now."""

    game_id: str
    players: tuple[str, ...]
    version: int
    report: RulesReport
    duplicate: bool


class Auditor:
    """The audit operations over one event store; ``read_models`` checks a game's read models (none:
    reports say they were not checked)."""

    def __init__(self, store: EventStore, read_models: ReadModelCheck | None = None) -> None:
        self.store = store
        self.read_models = read_models
        self._writer = _EntryWriter(store, self.load)

    # --- reading --------------------------------------------------------------------------------------

    async def load(self, game_id: str, cache: StreamCache | None = None) -> GameLog:
        """The game's stream with its secret seed; :class:`~service.domain.errors.NotFound` for an unknown
        game.

        Each payload is parsed once, with the bytes its hash covers (:mod:`service.audit.rows`): the
        chain check, the log, the replay and the read models' check all read these rows. ``cache``: the
        payloads and events of the games read before (:class:`~service.audit.rows.StreamCache`).
        """
        # The stream and the seed at once (two connections of the pool, one wait).
        stream, seed = await together(read_rows(self.store, game_id, cache), self.store.seed(game_id))
        if not stream.rows:
            raise NotFound(f"no game {game_id!r}", reason="UNKNOWN_GAME")
        try:
            return GameLog(
                game_id, stream.rows, seed, stream.canonical, None if cache is None else cache.events
            )
        except LogError as bad:
            raise _unreadable(game_id, bad, "cannot be read") from None

    async def _read(self, game_id: str, cache: StreamCache | None = None) -> tuple[GameLog, Beside]:
        """The game's log (:meth:`load`) and what the store keeps beside it (ledger, games row)."""
        # The ledger while the log is read (another connection, one wait): an append made meanwhile may
        # show in the ledger and not in the log, as it could when the ledger was read after the log.
        log, beside = await together(self.load(game_id, cache), self._beside(game_id))
        return log, beside

    async def _beside(self, game_id: str) -> Beside:
        ledger, game = await together(self.store.ledger(game_id), self.store.game(game_id))
        return Beside(ledger, game)

    async def verify(
        self,
        game_id: str,
        *,
        check_projections: bool = True,
        reveal_seed: bool = False,
        command_id: str | None = None,
    ) -> GameReport:
        """The game's full report (:func:`service.audit.stored_game.verify_game`).

        ``reveal_seed`` (the adjudicator, for a game in progress) first records a ``SeedRevealed`` entry
        under ``command_id`` and then prints the seed in the report.
        """
        if reveal_seed:
            log = await self.reveal_seed(game_id, command_id)
            beside = await self._beside(game_id)
        else:
            log, beside = await self._read(game_id)
        return await self._verify_read(log, beside, check_projections)

    async def _verify_read(self, log: GameLog, beside: Beside, check_projections: bool) -> GameReport:
        """The report of a game read (:meth:`verify`)."""
        game_id = log.game_id
        problems = await self._projection_problems(log) if check_projections else None
        show = log.seed_revealed_at() is not None or log.imported is not None
        try:
            # The replay is pure CPU work: off the event loop, so that a server keeps answering
            # (the other RPCs get the interpreter at least every switch interval meanwhile).
            return await asyncio.to_thread(
                functools.partial(
                    verify_game, log, beside=beside, projection_problems=problems, show_seed=show
                )
            )
        except (LogError, RecordError) as bad:
            raise _unreadable(game_id, bad) from None

    async def _projection_problems(self, log: GameLog) -> list[str] | None:
        if self.read_models is None or log.imported is not None:
            return None  # no read models to check; imported records are not projected
        try:
            return await self.read_models(self.store, log.game_id, stream=log.rows, decode=log.event_of)
        except pg_errors.UndefinedTable:
            return None  # no read models in this database

    async def verify_all(
        self, *, check_projections: bool = True, page: int = 200
    ) -> AsyncIterator[GameReport | Unverified]:
        """Every stored game's report, game by game (in game id order), as :meth:`verify_many` makes them."""
        cache = StreamCache()
        after: str | None = None
        while True:
            games = await self.store.list_games(after=after, limit=page)
            ids = [game.game_id for game in games]
            async for report in self._verify_each(ids, check_projections, cache):
                yield report
            if len(games) < page:
                return
            after = games[-1].game_id

    def verify_many(
        self, game_ids: Iterable[str], *, check_projections: bool = True
    ) -> AsyncIterator[GameReport | Unverified]:
        """The reports of ``game_ids``, in their order, each as :meth:`verify` makes it; a game it refuses
        (an unknown game, a log it cannot read) or the verifier chokes on is :class:`Unverified`, and the
        next is verified all the same.

        Each game is read while the one before it is verified, so that the waits for PostgreSQL pass
        during the replay rather than between the replays; and the games share their parsed payloads and
        decoded events (:class:`~service.audit.rows.StreamCache`).
        """
        return self._verify_each(game_ids, check_projections, StreamCache())

    async def _verify_each(
        self, game_ids: Iterable[str], check_projections: bool, cache: StreamCache
    ) -> AsyncIterator[GameReport | Unverified]:
        ids = iter(game_ids)
        game_id = next(ids, None)
        reading = None if game_id is None else self._read_ahead(game_id, cache)
        try:
            while game_id is not None and reading is not None:
                current, read = game_id, reading
                game_id = next(ids, None)
                reading = None if game_id is None else self._read_ahead(game_id, cache)
                report: GameReport | Unverified
                try:
                    report = await self._verify_read(*await read, check_projections)
                except ServiceError as refused:
                    report = Unverified(current, str(refused))
                except Exception as error:  # one game the verifier chokes on must not hide the others
                    _log.exception("audit.verify_failed", game=current)
                    report = Unverified(current, f"verifier error: {error!r}")
                yield report
        finally:
            if reading is not None:
                reading.cancel()

    def _read_ahead(self, game_id: str, cache: StreamCache) -> asyncio.Task[tuple[GameLog, Beside]]:
        """:meth:`_read` of ``game_id``, started now (its failure is raised where it is awaited)."""
        task = asyncio.ensure_future(self._read(game_id, cache))
        # A read that is cancelled, or fails after its reader stopped, raises to no one: no warning.
        task.add_done_callback(lambda done: done.cancelled() or done.exception())
        return task

    async def game_ids(self) -> list[str]:
        """Every stored game's id, in game id order (the order of :meth:`verify_all`)."""
        ids: list[str] = []
        while True:
            games = await self.store.list_games(after=ids[-1] if ids else None, limit=1000)
            ids += [game.game_id for game in games]
            if len(games) < 1000:
                return ids

    async def count_games(self) -> int:
        """How many games the store holds (for a progress bar)."""
        count, after = 0, None
        while True:
            games = await self.store.list_games(after=after, limit=1000)
            count += len(games)
            if len(games) < 1000:
                return count
            after = games[-1].game_id

    async def adjudicate(
        self,
        game_id: str,
        kind: DisputeKind,
        position: int,
        *,
        by: int | None = None,
        target: int | None = None,
    ) -> Adjudication:
        """The ruling on the catch or challenge at ``position`` (see :func:`stored_game.adjudicate`)."""
        log = await self.load(game_id)
        try:
            return await asyncio.to_thread(
                functools.partial(adjudicate, log, kind, position, by=by, target=target)
            )
        except NothingToJudge as nothing:
            raise Precondition(str(nothing), reason="NOTHING_TO_JUDGE") from None
        except AdjudicationError as bad:
            if bad.invalid:
                raise InvalidInput(bad.field, str(bad)) from None
            raise Precondition(str(bad), reason="REPLAY_STOPPED") from None
        except (LogError, RecordError) as bad:
            raise _unreadable(game_id, bad) from None

    async def export(self, game_id: str, *, reveal_seed: bool = False, command_id: str | None = None) -> str:
        """The game's ``uno-game-record/1`` text.

        A game still in progress keeps its seed secret, and without the seed its record cannot be
        followed card by card: ``reveal_seed`` records the adjudicator's reveal first; otherwise the
        export is refused (precondition).
        """
        log = await self.load(game_id)
        if log.imported is None and log.seed_revealed_at() is None:
            if not reveal_seed:
                raise Precondition(
                    f"game {game_id!r} is still in progress and its seed is secret; "
                    "reveal it (recorded in the log) to export it",
                    reason="GAME_IN_PROGRESS",
                )
            log = await self.reveal_seed(game_id, command_id)
        try:
            return export_text(log, reveal=True)
        except LogError as bad:
            raise _unreadable(game_id, bad) from None

    async def replay(self, game_id: str, *, seat: int | None = None) -> str:
        """The arbiter's replay of the game: one self-contained HTML page
        (:func:`service.audit.replay_html.game_replay_html`), the adjudicator's view, or ``seat``'s.

        The seed is used to follow the cards but never shown; the read models are not checked (the page
        is about the game, and the full report has them).
        """
        log = await self.load(game_id)
        beside = await self._beside(game_id)

        def page() -> str:
            return game_replay_html(log, verify_game(log, beside=beside), seat=seat)

        try:
            return await asyncio.to_thread(page)  # the replay is CPU work: off the event loop
        except SeatError as bad:
            raise InvalidInput("as_seat", str(bad)) from None
        except (LogError, RecordError) as bad:
            raise _unreadable(game_id, bad) from None

    # --- writing the audit trail ------------------------------------------------------------------------

    async def reveal_seed(self, game_id: str, command_id: str | None, reason: str = "adjudicator") -> GameLog:
        """Record that the adjudicator sees the seed of a game in progress (once); the game's log after."""
        if command_id is None:
            raise InvalidInput("command_id", "revealing the seed needs a command id")

        def decide(log: GameLog) -> list[Entry]:
            if log.seed_revealed_at() is not None or log.imported is not None:
                return []
            created = log.created
            committed = created.seed_sha256 if created is not None else None
            return [SeedRevealed(committed or "", reason)]

        log, _ = await self._append(game_id, command_id, b"reveal:" + game_id.encode(), SeedRevealed, decide)
        return log

    async def file_dispute(
        self,
        game_id: str,
        *,
        seat: int,
        kind: DisputeKind,
        position: int,
        by: int | None,
        target: int | None,
        claim: str,
        command_id: str,
        request_hash: bytes,
    ) -> Dispute:
        """Record ``seat``'s dispute about the ``kind`` at ``position``; the dispute as filed.

        ``by`` and ``target`` are the catcher (challenger) and the caught player the dispute names, if
        any: they describe the catch to judge when the log holds none at ``position``
        (:meth:`rule_on_dispute`). ``seat`` is only who filed it.
        """
        claim = free_text(claim, "claim", required=True).strip()
        dispute_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"uno-audit:{game_id}:{command_id}"))

        def decide(log: GameLog) -> list[Entry]:
            players = len(log.players)
            if not 0 <= seat < players:
                raise InvalidInput("as_seat", f"seats are 0 to {players - 1}, not {seat}")
            for field, named in (("by", by), ("target", target)):
                if named is not None and not 0 <= named < players:
                    raise InvalidInput(field, f"seats are 0 to {players - 1}, not {named}")
            if not 1 <= position <= log.version:
                raise InvalidInput("position", f"the game's positions are 1 to {log.version}, not {position}")
            return [DisputeFiled(dispute_id, seat, kind.value, position, target, claim, by=by)]

        log, _ = await self._append(game_id, command_id, request_hash, DisputeFiled, decide)
        return _find_dispute(log, dispute_id)

    async def rule_on_dispute(
        self, game_id: str, dispute_id: str, *, note: str, command_id: str, request_hash: bytes
    ) -> Dispute:
        """Adjudicate an open dispute and record the ruling; the dispute with its ruling.

        The catch or challenge the log holds at the disputed position is judged, whoever filed the
        dispute; the one it describes (its ``by`` and ``target``, never the filer's seat) only when the
        log holds none there (:func:`stored_game.adjudicate`). The ruling says which, and where the
        dispute's names differ from the recorded one.
        """
        free_text(note, "note", required=False)

        def decide(log: GameLog) -> list[Entry]:
            dispute = _find_dispute(log, dispute_id)
            if dispute.ruling is not None:
                raise Precondition(
                    f"dispute {dispute_id} was ruled at position {dispute.ruled_at}",
                    reason="ALREADY_RULED",
                    ruled_at=str(dispute.ruled_at),
                )
            filed = dispute.filed
            try:
                found = adjudicate(
                    log, DisputeKind(filed.kind), filed.position, by=filed.by, target=filed.target
                )
            except AdjudicationError as bad:
                refused = f"the dispute cannot be adjudicated: {bad}"
                # What an adjudication refuses as input (a position no record line reaches) was accepted
                # when the dispute was filed: it too leaves nothing to judge.
                if bad.invalid or isinstance(bad, NothingToJudge):
                    raise Precondition(refused, reason="NOTHING_TO_JUDGE") from None
                raise Precondition(refused, reason="REPLAY_STOPPED") from None
            return [found.ruled(dispute_id, note)]

        log, _ = await self._append(game_id, command_id, request_hash, DisputeRuled, decide)
        return _find_dispute(log, dispute_id)

    async def list_disputes(
        self, game_id: str | None = None, status: str | None = None
    ) -> list[tuple[str, Dispute]]:
        """``(game id, dispute)`` of every dispute of one game or all, open or ruled as ``status`` says."""
        if status not in (None, "open", "ruled"):
            raise InvalidInput("status", "choose open or ruled (or neither)")
        by_game: dict[str, list[tuple[int, Entry]]] = {}
        unreadable: dict[str, str] = {}
        for row in await self.store.dispute_events(game_id):
            if row.game_id in unreadable:
                continue
            try:
                entry = decode_entry(row.type, row.payload)
                if isinstance(entry, DisputeFiled):
                    DisputeKind(entry.kind)
            except ValueError as bad:  # an edited entry (CatalogueError is a ValueError too)
                unreadable[row.game_id] = f"position {row.version}: {bad}"
                by_game.pop(row.game_id, None)
                continue
            by_game.setdefault(row.game_id, []).append((row.version, entry))
        if game_id is not None and game_id in unreadable:
            raise Precondition(
                f"game {game_id!r}: a dispute entry cannot be read at {unreadable[game_id]}; "
                "VerifyGame reports what the log holds",
                reason="LOG_UNREADABLE",
            )
        for game, where in unreadable.items():  # one damaged game does not hide every other's disputes
            _log.warning("disputes unreadable", game=game, where=where)
        return [
            (game, dispute)
            for game, entries in by_game.items()
            for dispute in collect_disputes(entries)
            if status is None or (status == "open") == (dispute.ruling is None)
        ]

    async def import_record(
        self,
        text: str,
        *,
        tournament_id: str,
        seat_token_hashes: Callable[[int], Sequence[bytes]],
        command_id: str,
        request_hash: bytes,
    ) -> Imported:
        """Store a table game's record as an imported game; its actions are kept as recorded.

        The record must be well formed (:class:`~service.domain.errors.InvalidInput`, naming the line, if
        not); rule violations are not refused: the verifier's report at import says what they are, and the
        game can be verified, disputed and ruled on like any other. ``seat_token_hashes(n)`` gives the
        hashes of the *n* new seat tokens.

        A record whose text (its SHA-256) was imported before is that game: it is answered
        (``duplicate``), not stored again, and its seat tokens are not made again.
        """
        if len(text.encode("utf-8")) > MAX_RECORD_BYTES:
            raise InvalidInput("record", f"a record has at most {MAX_RECORD_BYTES} bytes (4 MiB)")
        if "\x00" in text:
            raise InvalidInput("record", "a record cannot hold the character U+0000")
        try:
            record = read_record(text)
            make_options(record.header.variant, record.header.options)
        except (RecordError, OptionError) as bad:
            raise InvalidInput("record", str(bad)) from None
        report = verify_record(record)
        outcome = report.import_outcome().to_json()
        lines = text.split("\n")
        final_newline = lines[-1] == ""
        if final_newline:
            lines.pop()
        sha256 = record_sha256(text)
        entries: list[Entry] = [RecordImported(FORMAT, sha256, len(lines), final_newline, outcome)]
        entries += [RecordLine(number, line) for number, line in enumerate(lines, start=1)]
        header = record.header
        # The game's id is the record's fingerprint's: a record imported twice, even by two imports at
        # once, is one game, which the games table's key keeps unique (no table or index of its own).
        game_id = imported_game_id(sha256)
        try:
            with ledger_mismatch_refused():
                write = self.store.create_game(
                    game_id,
                    variant=header.variant.value,
                    players=header.players,
                    tournament_id=tournament_id,
                    seed=header.seed,
                    seat_token_hashes=seat_token_hashes(len(header.players)),
                    command_id=command_id,
                    request_hash=request_hash,
                    events=[NewEvent(*encode(e)) for e in entries],
                    metadata={
                        "command_id": command_id,
                        "actor": "adjudicator",
                        "command": "ImportRecord",
                        "tournament_id": tournament_id,
                        "client": ADMIN_CLIENT,
                    },
                    client=ADMIN_CLIENT,
                )
                result = await metrics.timed_write(write, "create")
        except CommandReused as reused:
            raise InvalidInput("command_id", f"already used for another request ({reused})") from None
        except GameExists:
            # Imported before, by another command (or this very moment, by a concurrent one): that game.
            existing = await self.load(game_id)
            return Imported(game_id, header.players, existing.version, report, True)
        return Imported(game_id, header.players, result.last_version, report, result.duplicate)

    async def _append(
        self,
        game_id: str,
        command_id: str,
        request_hash: bytes,
        entry: type,
        decide: EntryDecision,
    ) -> tuple[GameLog, bool]:
        """Append the ``entry`` entries ``decide`` makes of the game's log (retried when the game moves on
        meanwhile); the log after and whether anything was appended. A retried ``command_id`` appends
        nothing again."""
        return await self._writer.handle(
            game_id,
            decide,
            command_id=command_id,
            request_hash=request_hash,
            metadata={"command_id": command_id, "actor": "audit", "command": type_name(entry)},
        )


#: What an audit write decides: the entries to append to the game's log as it is (none: nothing to do).
EntryDecision = Callable[[GameLog], list[Entry]]


class _EntryWriter(Writer[GameLog, EntryDecision, None, tuple[GameLog, bool]]):
    """The auditor's writes through the one write loop (:meth:`service.app.runner.Writer.handle`). The auditor
    keeps no cache: every load is the store's."""

    def __init__(self, store: EventStore, load: Callable[[str], Awaitable[GameLog]]) -> None:
        super().__init__(store)
        self._load = load

    async def load(self, game_id: str, fresh: bool) -> GameLog:
        return await self._load(game_id)

    def head(self, snapshot: GameLog) -> Head:
        return Head(snapshot.version, snapshot.rows[-1].hash)

    def decide(self, snapshot: GameLog, command: EntryDecision) -> Decision[None]:
        return Decision([NewEvent(*encode(entry)) for entry in command(snapshot)], None)

    async def answer(self, game_id: str, ran: Ran[GameLog, None]) -> tuple[GameLog, bool]:
        if isinstance(ran, Unchanged):
            return ran.snapshot, False
        return await self._load(game_id), isinstance(ran, Appended)


async def together(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Both results, awaited at once; when one fails, its error goes on once the other is done too.

    ``asyncio.gather`` lets the error go at once and leaves the other running: a read that failed on an
    unknown game left its sibling to fail later on a closed pool ("Task exception was never retrieved").
    Cancelling the sibling instead would interrupt its query, which psycopg logs. Both are short reads.
    """
    one, two = await asyncio.gather(first, second, return_exceptions=True)
    for outcome in (one, two):
        if isinstance(outcome, BaseException):
            raise outcome
    return one, two  # type: ignore[return-value]


def imported_game_id(sha256: str) -> str:
    """The id of the game a record is imported as: a name-based UUID (RFC 9562 version 5) of its
    text's SHA-256, so that the same text is always the same game."""
    return str(uuid.uuid5(_IMPORTS, sha256))


#: The namespace of imported games' ids (a fixed random UUID: changing it would let a record imported
#: before the change be imported again as a second game).
_IMPORTS = uuid.UUID("0c5b7d0e-3f0a-4d59-8a51-2f3e8b9d6c14")


def _find_dispute(log: GameLog, dispute_id: str) -> Dispute:
    for dispute in log.disputes():
        if dispute.filed.dispute_id == dispute_id:
            return dispute
    raise NotFound(f"no dispute {dispute_id!r} in game {log.game_id!r}", reason="UNKNOWN_DISPUTE")


def _unreadable(
    game_id: str, bad: LogError | RecordError, what: str = "cannot be read as a record"
) -> Precondition:
    """The refusal of a game whose stored log cannot be read as a game: an edit made outside the service
    (VerifyGame still reports on it)."""
    return Precondition(f"game {game_id!r} {what}: {bad}", reason="LOG_UNREADABLE")
