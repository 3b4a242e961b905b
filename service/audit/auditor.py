"""The audit application: verify, adjudicate, disputes, export and import over the event store.

:class:`Auditor` is what the gRPC ``AuditService`` and the ``uno-audit`` command line both call. It reads
a game's stream (and, being the adjudicator's tool, the game's secret seed), hands them to the pure
verifier (:mod:`service.audit.stored_game`), and appends the audit trail's entries (disputes, rulings,
seed reveals, imported records) to the game's stream like any other event: hash-chained, in one
transaction each, idempotent by command id, never changing what is there.

Refusals are :class:`Refused` with a kind the caller maps to its own error (a gRPC status, an exit code).
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

import structlog
from psycopg import errors as pg_errors

from service.catalogue import decode_entry, encode
from service.rules.options import OptionError, make_options
from service.store import CommandReused, EventStore, NewEvent, VersionConflict

from .entries import (
    DisputeFiled,
    DisputeKind,
    Entry,
    RecordImported,
    RecordLine,
    SeedRevealed,
)
from .game_report import Adjudication, GameReport, Unverified
from .log import Dispute, GameLog, LogError, collect_disputes, export_text, record_sha256
from .record import FORMAT, RecordError, read_record
from .report import RulesReport
from .stored_game import AdjudicationError, adjudicate, verify_game
from .verify import verify_record

_log = structlog.get_logger(__name__)

MAX_ATTEMPTS = 8
MAX_CLAIM = 2000
MAX_RECORD_BYTES = 4_000_000

#: The read models' cross-check of one game: what is wrong with its projected rows (nothing: they agree
#: with its log). The read models are built on the service, so the auditor does not import them: whoever
#: wires the service passes theirs in (:func:`projections.check.check_game`).
ReadModelCheck = Callable[[EventStore, str], Awaitable[list[str]]]


@dataclass(frozen=True, slots=True)
class Refused(Exception):
    """A request the auditor will not carry out.

    ``kind``: ``"invalid"`` (bad input; ``field`` names it), ``"not-found"``, ``"precondition"`` (the
    game is not in a state that allows it), ``"conflict"`` (the game kept changing meanwhile).
    """

    kind: str
    message: str
    field: str | None = None

    def __str__(self) -> str:
        return self.message if self.field is None else f"{self.field}: {self.message}"


@dataclass(frozen=True, slots=True)
class Imported:
    """An imported record: the new game, its version, and the verifier's report at import."""

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

    # --- reading --------------------------------------------------------------------------------------

    async def load(self, game_id: str) -> GameLog:
        """The game's stream with its secret seed; :class:`Refused` (not-found) for an unknown game."""
        rows = await self.store.read_stream(game_id)
        if not rows:
            raise Refused("not-found", f"no game {game_id!r}")
        try:
            return GameLog(game_id, rows, await self.store.seed(game_id))
        except LogError as bad:
            raise Refused("precondition", f"game {game_id!r} cannot be read: {bad}") from None

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
        else:
            log = await self.load(game_id)
        problems = await self._projection_problems(log) if check_projections else None
        show = log.seed_revealed_at() is not None or log.imported is not None
        ledger = await self.store.ledger_last_version(game_id)
        try:
            # The replay is pure CPU work: off the event loop, so that a server keeps answering
            # (the other RPCs get the interpreter at least every switch interval meanwhile).
            return await asyncio.to_thread(
                functools.partial(
                    verify_game, log, ledger_last_version=ledger, projection_problems=problems, show_seed=show
                )
            )
        except (LogError, RecordError) as bad:
            raise Refused("precondition", f"game {game_id!r} cannot be read as a record: {bad}") from None

    async def _projection_problems(self, log: GameLog) -> list[str] | None:
        if self.read_models is None or log.imported is not None:
            return None  # no read models to check; imported records are not projected
        try:
            return await self.read_models(self.store, log.game_id)
        except pg_errors.UndefinedTable:
            return None  # no read models in this database

    async def verify_all(
        self, *, check_projections: bool = True, page: int = 200
    ) -> AsyncIterator[GameReport | Unverified]:
        """Every stored game's report, game by game (in game id order)."""
        after: str | None = None
        while True:
            games = await self.store.list_games(after=after, limit=page)
            for game in games:
                try:
                    yield await self.verify(game.game_id, check_projections=check_projections)
                except Refused as refused:
                    yield Unverified(game.game_id, str(refused))
                except Exception as error:  # one game the verifier chokes on must not hide the others
                    _log.exception("audit.verify_failed", game=game.game_id)
                    yield Unverified(game.game_id, f"verifier error: {error!r}")
            if len(games) < page:
                return
            after = games[-1].game_id

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
        except AdjudicationError as bad:
            refusal = "invalid" if bad.invalid else "precondition"
            raise Refused(refusal, str(bad), bad.field if bad.invalid else None) from None
        except (LogError, RecordError) as bad:
            raise Refused("precondition", f"game {game_id!r} cannot be read as a record: {bad}") from None

    async def export(self, game_id: str, *, reveal_seed: bool = False, command_id: str | None = None) -> str:
        """The game's ``uno-game-record/1`` text.

        A game still in progress keeps its seed secret, and without the seed its record cannot be
        followed card by card: ``reveal_seed`` records the adjudicator's reveal first; otherwise the
        export is refused (precondition).
        """
        log = await self.load(game_id)
        if log.imported is None and log.seed_revealed_at() is None:
            if not reveal_seed:
                raise Refused(
                    "precondition",
                    f"game {game_id!r} is still in progress and its seed is secret; "
                    "reveal it (recorded in the log) to export it",
                )
            log = await self.reveal_seed(game_id, command_id)
        try:
            return export_text(log, reveal=True)
        except LogError as bad:
            raise Refused("precondition", f"game {game_id!r} cannot be read as a record: {bad}") from None

    # --- writing the audit trail ------------------------------------------------------------------------

    async def reveal_seed(self, game_id: str, command_id: str | None, reason: str = "adjudicator") -> GameLog:
        """Record that the adjudicator sees the seed of a game in progress (once); the game's log after."""
        if command_id is None:
            raise Refused("invalid", "revealing the seed needs a command id", "command_id")

        def decide(log: GameLog) -> list[Entry]:
            if log.seed_revealed_at() is not None or log.imported is not None:
                return []
            committed = log.rows[0].payload.get("seed_sha256") or ""
            return [SeedRevealed(committed, reason)]

        log, _ = await self._append(game_id, command_id, b"reveal:" + game_id.encode(), decide)
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
        claim = claim.strip()
        if not 1 <= len(claim) <= MAX_CLAIM or "\x00" in claim:
            raise Refused("invalid", f"say what is disputed in 1 to {MAX_CLAIM} characters", "claim")
        dispute_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"uno-audit:{game_id}:{command_id}"))

        def decide(log: GameLog) -> list[Entry]:
            players = len(log.players)
            if not 0 <= seat < players:
                raise Refused("invalid", f"seats are 0 to {players - 1}, not {seat}", "as_seat")
            for field, named in (("by", by), ("target", target)):
                if named is not None and not 0 <= named < players:
                    raise Refused("invalid", f"seats are 0 to {players - 1}, not {named}", field)
            if not 1 <= position <= log.version:
                raise Refused(
                    "invalid", f"the game's positions are 1 to {log.version}, not {position}", "position"
                )
            return [DisputeFiled(dispute_id, seat, kind.value, position, target, claim, by=by)]

        log, _ = await self._append(game_id, command_id, request_hash, decide)
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
        if len(note) > MAX_CLAIM or "\x00" in note:
            raise Refused("invalid", f"a note has at most {MAX_CLAIM} characters", "note")

        def decide(log: GameLog) -> list[Entry]:
            dispute = _find_dispute(log, dispute_id)
            if dispute.ruling is not None:
                raise Refused(
                    "precondition", f"dispute {dispute_id} was ruled at position {dispute.ruled_at}"
                )
            filed = dispute.filed
            try:
                found = adjudicate(
                    log, DisputeKind(filed.kind), filed.position, by=filed.by, target=filed.target
                )
            except AdjudicationError as bad:
                raise Refused("precondition", f"the dispute cannot be adjudicated: {bad}") from None
            return [found.ruled(dispute_id, note)]

        log, _ = await self._append(game_id, command_id, request_hash, decide)
        return _find_dispute(log, dispute_id)

    async def list_disputes(
        self, game_id: str | None = None, status: str | None = None
    ) -> list[tuple[str, Dispute]]:
        """``(game id, dispute)`` of every dispute of one game or all, open or ruled as ``status`` says."""
        if status not in (None, "open", "ruled"):
            raise Refused("invalid", "choose open or ruled (or neither)", "status")
        by_game: dict[str, list[tuple[int, Entry]]] = {}
        for row in await self.store.dispute_events(game_id):
            by_game.setdefault(row.game_id, []).append((row.version, decode_entry(row.type, row.payload)))
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

        The record must be well formed (:class:`Refused` invalid, naming the line, if not); rule
        violations are not refused: the verifier's report at import says what they are, and the game
        can be verified, disputed and ruled on like any other. ``seat_token_hashes(n)`` gives the
        hashes of the *n* new seat tokens.
        """
        if len(text.encode("utf-8")) > MAX_RECORD_BYTES:
            raise Refused("invalid", f"a record has at most {MAX_RECORD_BYTES} bytes", "record")
        if "\x00" in text:
            raise Refused("invalid", "a record cannot hold the character U+0000", "record")
        try:
            record = read_record(text)
            make_options(record.header.variant, record.header.options)
        except (RecordError, OptionError) as bad:
            raise Refused("invalid", str(bad), "record") from None
        report = verify_record(record)
        outcome = report.import_outcome().to_json()
        lines = text.split("\n")
        final_newline = lines[-1] == ""
        if final_newline:
            lines.pop()
        entries: list[Entry] = [
            RecordImported(FORMAT, record_sha256(text), len(lines), final_newline, outcome)
        ]
        entries += [RecordLine(number, line) for number, line in enumerate(lines, start=1)]
        game_id = str(uuid.uuid4())
        header = record.header
        try:
            result = await self.store.create_game(
                game_id,
                variant=header.variant.value,
                players=header.players,
                tournament_id=tournament_id,
                seed=header.seed,
                seat_token_hashes=seat_token_hashes(len(header.players)),
                command_id=command_id,
                request_hash=request_hash,
                events=[NewEvent(*encode(e)) for e in entries],
                metadata={"command_id": command_id, "actor": "adjudicator", "command": "ImportRecord"},
            )
        except CommandReused:
            # Every import draws a new game id, so its retry reaches the store as a reused command id.
            seen = await self.store.command(command_id)
            if seen is None or seen[1] != request_hash:
                raise Refused("invalid", "already used for another request", "command_id") from None
            return Imported(seen[0], header.players, seen[3], report, True)
        return Imported(game_id, header.players, result.last_version, report, False)

    async def _append(
        self, game_id: str, command_id: str, request_hash: bytes, decide: Callable[[GameLog], list[Entry]]
    ) -> tuple[GameLog, bool]:
        """Append what ``decide`` makes of the game's log, retrying on a concurrent append; the log after
        and whether anything was appended. A retried ``command_id`` appends nothing again."""
        seen = await self.store.command(command_id)
        if seen is not None:
            if seen[0] != game_id or seen[1] != request_hash:
                raise Refused("invalid", "already used for another request", "command_id")
            return await self.load(game_id), False
        for _ in range(MAX_ATTEMPTS):
            log = await self.load(game_id)
            entries = decide(log)
            if not entries:
                return log, False
            try:
                await self.store.append(
                    game_id,
                    log.version,
                    [NewEvent(*encode(e)) for e in entries],
                    command_id=command_id,
                    request_hash=request_hash,
                    metadata={
                        "command_id": command_id,
                        "actor": "audit",
                        "command": type(entries[0]).__name__,
                    },
                    prev_hash=log.rows[-1].hash,
                )
            except VersionConflict:
                continue
            except CommandReused:
                raise Refused("invalid", "already used for another request", "command_id") from None
            return await self.load(game_id), True
        raise Refused("conflict", f"game {game_id!r} changed {MAX_ATTEMPTS} times meanwhile; try again")


def _find_dispute(log: GameLog, dispute_id: str) -> Dispute:
    for dispute in log.disputes():
        if dispute.filed.dispute_id == dispute_id:
            return dispute
    raise Refused("not-found", f"no dispute {dispute_id!r} in game {log.game_id!r}")
