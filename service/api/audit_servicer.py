"""``AuditService``: the adjudicator's gRPC door to the verifier, disputes, export and import.

Every RPC validates its input first (INVALID_ARGUMENT names the field), then checks the caller: the admin
token is the adjudicator; a seat token may file a dispute for its own seat and list its game's disputes.
A ruling's evidence goes out redacted for the caller exactly as WatchGame streams its DisputeRuled entry
(:func:`service.domain.visibility.redact`): the hands in it are the adjudicator's only (and a challenge's, its
challenger's).
The work is :class:`service.app.auditor.Auditor`'s; this module maps requests, replies and refusals.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from typing import Any

import structlog
from google.protobuf import struct_pb2

from service.api.callers import Callers, Context
from service.api.metrics import verdict_of
from service.api.servicer import request_hash_of
from service.app.auditor import Auditor
from service.audit.game_report import GameReport, LostGame, lost_game
from service.audit.log import Dispute
from service.checkpoints.keyring import Keyring
from service.checkpoints.receipts import MISSING, REWRITTEN, check_receipts
from service.domain import limits
from service.domain.auth import ADMIN, Caller, new_token, token_hash
from service.domain.catalogue import encode
from service.domain.entries import DisputeKind, DisputeRuled
from service.domain.errors import (
    AlreadyExists,
    InvalidInput,
    NotFound,
    PermissionDenied,
    Unauthenticated,
)
from service.domain.visibility import redact
from service.ops import metrics
from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc as pb_grpc

log = structlog.get_logger("uno_audit.audit")

KINDS = {pb.UNO_CATCH: DisputeKind.UNO_CATCH, pb.WD4_CHALLENGE: DisputeKind.WD4_CHALLENGE}
KIND_VALUES = {kind.value: value for value, kind in KINDS.items()}


#: The largest whole number a ``Struct``'s numbers (doubles) hold exactly.
_EXACT = 2**53


def _exact(value: Any) -> Any:
    """A report's JSON value with every whole number a double cannot hold exactly as its decimal digits.

    Only an edited log holds such numbers (a payload field set to 10**400), and a report shows them:
    as a number one would go out rounded, or not at all (a ``Struct`` refuses what a double cannot
    reach), and the reply with it.
    """
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _EXACT:
        return str(value)
    if isinstance(value, Mapping):
        return {key: _exact(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_exact(item) for item in value]
    return value


def _struct(value: Mapping[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(_exact(value))
    return out


def _kind(value: int) -> DisputeKind:
    kind: DisputeKind | None = KINDS.get(value)  # type: ignore[call-overload]
    if kind is None:
        raise InvalidInput("kind", "choose UNO_CATCH or WD4_CHALLENGE")
    return kind


def _position(value: int) -> int:
    if value < 1:
        raise InvalidInput("position", "positions start at 1")
    return value


def _evidence(ruling: DisputeRuled, caller: Caller, players: Sequence[str]) -> dict[str, Any]:
    """The ruling's evidence as ``caller`` may see it: its log entry through the one redaction WatchGame
    applies, so no AuditService reply shows a seat a card the game's event stream hides from it (a
    challenge's evidence is its challenger's too: ``players`` names the seats)."""
    name, payload = encode(ruling)
    evidence: dict[str, Any] = redact(name, payload, caller, players)["evidence"]
    return evidence


def _ruling(
    kind: DisputeKind, ruling: DisputeRuled, caller: Caller, players: Sequence[str] = ()
) -> pb.Ruling:
    """A ruling in the form the log records it (an adjudication's too: the same message either way),
    its evidence redacted for ``caller``."""
    return pb.Ruling(
        kind=KIND_VALUES[kind.value],
        verdict=ruling.verdict,
        rule=ruling.rule,
        reason=ruling.reason or "",
        by=ruling.by,
        against=ruling.against,
        position=ruling.position,
        recorded=ruling.recorded,
        evidence=_struct(_evidence(ruling, caller, players)),
        mismatch=ruling.mismatch or "",
    )


def _dispute(game_id: str, dispute: Dispute, caller: Caller, players: Sequence[str] = ()) -> pb.Dispute:
    """A dispute as ``caller`` may see it (its ruling's evidence redacted: :func:`_evidence`; ``players``
    names the game's seats, which a seat's redaction needs and the admin's does not)."""
    filed = dispute.filed
    kind = DisputeKind(filed.kind)
    out = pb.Dispute(
        dispute_id=filed.dispute_id,
        game_id=game_id,
        filed_at=dispute.filed_at,
        ruled_at=dispute.ruled_at or 0,
        seat=filed.seat,
        kind=KIND_VALUES[filed.kind],
        position=filed.position,
        claim=filed.claim,
        status="open" if dispute.ruling is None else "ruled",
    )
    if filed.target is not None:
        out.target = filed.target
    if filed.by is not None:
        out.by = filed.by
    ruled = dispute.ruling
    if ruled is not None:
        out.note = ruled.note
        out.ruling.CopyFrom(_ruling(kind, ruled, caller, players))
    return out


def _dispute_key(page_token: str) -> tuple[str, int]:
    """The (game id, filed at) a page of disputes continues after; its token is ``filed_at:game_id``."""
    position, _, game_id = page_token.partition(":")
    if not position.isdigit() or len(position) > 18:
        raise InvalidInput("page_token", "not a token this list handed out")
    return limits.identifier(game_id, "page_token"), int(position)


class AuditService(pb_grpc.AuditServiceServicer):
    """The ``uno.audit.v1.AuditService`` implementation."""

    def __init__(
        self, auditor: Auditor, callers: Callers, keyring: Keyring, *, reader: Auditor | None = None
    ) -> None:
        self.auditor = auditor
        #: Serves the reads that may lag (from a standby): verifying, exporting and replaying without a
        #: seed reveal, which appends an entry and so stays with ``auditor``.
        self.reader = reader or auditor
        self.callers = callers
        self.keyring = keyring

    async def _players(self, game_id: str, caller: Caller) -> Sequence[str]:
        """The game's players by seat, for a ruling's redaction for a seat (the admin's needs none)."""
        if caller.admin:
            return ()
        row = await self.auditor.store.game(game_id)
        return () if row is None else row.players

    async def VerifyGame(self, request: pb.VerifyGameRequest, context: Context) -> pb.VerifyGameReply:
        started = time.perf_counter()
        game_id = limits.identifier(request.game_id, "game_id")
        command_id = limits.identifier(request.command_id, "command_id") if request.reveal_seed else None
        notes = limits.receipts(request.receipts, "receipts")
        self.callers.admin(context)
        check = request.check_projections if request.HasField("check_projections") else True
        report = await self._report(game_id, check, request.reveal_seed, command_id, notes)
        if isinstance(report, LostGame):
            metrics.verification("lost")
            log.info(
                "verify",
                game=game_id,
                valid=False,
                lost=True,
                latency_ms=round((time.perf_counter() - started) * 1000, 3),
            )
            # Nothing stored was checked: no part of the game is reported valid.
            return pb.VerifyGameReply(
                valid=False,
                report=_struct(report.to_json()),
                receipts_valid=False,
                first_rewritten_version=report.first_missing_version,
            )
        checks = []
        if notes:
            rows = await self.auditor.store.read_stream(game_id)
            checks = check_receipts(
                game_id, rows, notes, service=self.keyring.service, log_keys=self.keyring.published
            )
        receipts_valid = all(check.ok for check in checks)
        failed = [check.version for check in checks if check.verdict in (REWRITTEN, MISSING)]
        metrics.verification(verdict_of(report))
        replay = report.replay  # none when the log cannot even be read back as a record
        diverged = None if replay is None else replay.diverged_at
        log.info(
            "verify",
            game=game_id,
            valid=report.valid,
            latency_ms=round((time.perf_counter() - started) * 1000, 3),
        )
        summary = report.to_json()
        if notes:
            summary["receipts"] = [check.to_json() for check in checks]
            summary["valid"] = report.valid and receipts_valid
        return pb.VerifyGameReply(
            valid=report.valid and receipts_valid,
            rules_valid=report.rules_valid,
            chain_valid=report.chain.valid,
            first_tampered_position=min((f.position for f in report.chain.findings), default=0),
            diverged_at=0 if diverged is None else diverged.position,
            outcome_differs=replay is not None and replay.outcome_differs,
            report=_struct(summary),
            receipts_valid=receipts_valid,
            first_rewritten_version=min((v for v in failed if v is not None), default=0),
        )

    async def _report(
        self, game_id: str, check: bool, reveal_seed: bool, command_id: str | None, notes: list[str]
    ) -> GameReport | LostGame:
        """The game's report; with receipts, a game the store does not know is lost if one of them is
        genuine (:func:`lost_game`; else NOT_FOUND ``UNKNOWN_GAME``, as without receipts)."""
        first = self.auditor if reveal_seed else self.reader
        # A standby that lags has not got a game created since: only the primary can say it is lost.
        for auditor in [first] if first.store is self.auditor.store else [first, self.auditor]:
            try:
                return await auditor.verify(
                    game_id, check_projections=check, reveal_seed=reveal_seed, command_id=command_id
                )
            except NotFound as unknown:
                if not notes or unknown.reason != "UNKNOWN_GAME":
                    raise
        checks = check_receipts(
            game_id, (), notes, service=self.keyring.service, log_keys=self.keyring.published
        )
        return lost_game(game_id, checks)

    async def _adjudicate(
        self, request: pb.AdjudicateRequest, context: Context, kind: DisputeKind
    ) -> pb.Ruling:
        game_id = limits.identifier(request.game_id, "game_id")
        position = _position(request.position)
        self.callers.admin(context)
        found = await self.auditor.adjudicate(
            game_id,
            kind,
            position,
            by=request.by if request.HasField("by") else None,
            target=request.target if request.HasField("target") else None,
        )
        # The message of a ruling the log would record, for no dispute and with no note.
        return _ruling(kind, found.ruled(dispute_id="", note=""), ADMIN)

    async def AdjudicateCatch(self, request: pb.AdjudicateRequest, context: Context) -> pb.Ruling:
        return await self._adjudicate(request, context, DisputeKind.UNO_CATCH)

    async def AdjudicateChallenge(self, request: pb.AdjudicateRequest, context: Context) -> pb.Ruling:
        return await self._adjudicate(request, context, DisputeKind.WD4_CHALLENGE)

    async def FileDispute(self, request: pb.FileDisputeRequest, context: Context) -> pb.Dispute:
        game_id = limits.identifier(request.game_id, "game_id")
        command_id = limits.identifier(request.command_id, "command_id")
        kind = _kind(request.kind)
        position = _position(request.position)
        caller = await self.callers.caller(context, game_id)
        if caller.admin:
            if not request.HasField("as_seat"):
                raise InvalidInput("as_seat", "the admin must name the seat it files for")
            seat = request.as_seat
        elif caller.seat is None:
            raise Unauthenticated("filing a dispute needs a seat token of this game")
        elif request.HasField("as_seat") and request.as_seat != caller.seat:
            raise PermissionDenied(f"a seat token files only for its own seat ({caller.seat})")
        else:
            seat = caller.seat
        dispute = await self.auditor.file_dispute(
            game_id,
            seat=seat,
            kind=kind,
            position=position,
            by=request.by if request.HasField("by") else None,
            target=request.target if request.HasField("target") else None,
            claim=request.claim,
            command_id=command_id,
            request_hash=request_hash_of("FileDispute", request, caller),
        )
        log.info("dispute", game=game_id, dispute=dispute.filed.dispute_id, seat=seat, kind=kind.value)
        # A retry answers with the dispute as it stands now, which may be ruled: redact for the caller.
        return _dispute(game_id, dispute, caller, await self._players(game_id, caller))

    async def RuleOnDispute(self, request: pb.RuleOnDisputeRequest, context: Context) -> pb.Dispute:
        game_id = limits.identifier(request.game_id, "game_id")
        dispute_id = limits.identifier(request.dispute_id, "dispute_id")
        command_id = limits.identifier(request.command_id, "command_id")
        self.callers.admin(context)
        dispute = await self.auditor.rule_on_dispute(
            game_id,
            dispute_id,
            note=request.note,
            command_id=command_id,
            request_hash=request_hash_of("RuleOnDispute", request, ADMIN),
        )
        assert dispute.ruling is not None
        log.info("ruling", game=game_id, dispute=dispute_id, verdict=dispute.ruling.verdict)
        return _dispute(game_id, dispute, ADMIN)

    async def ListDisputes(self, request: pb.ListDisputesRequest, context: Context) -> pb.ListDisputesReply:
        game_id = limits.identifier(request.game_id, "game_id") if request.game_id else None
        caller = ADMIN
        if game_id is None:
            self.callers.admin(context)
        else:
            caller = await self.callers.caller(context, game_id)
            if caller.spectator:
                raise Unauthenticated("listing disputes needs a seat token of this game or the admin")
        size = limits.page_size(request.page_size, 100)
        after = _dispute_key(request.page_token) if request.page_token else None
        found = await self.auditor.list_disputes(game_id, request.status or None)
        found.sort(key=lambda listed: (listed[0], listed[1].filed_at))  # the order the tokens follow
        page = [(game, d) for game, d in found if after is None or (game, d.filed_at) > after][: size + 1]
        last = page[size - 1] if len(page) > size else None
        players = await self._players(game_id, caller) if game_id is not None else ()
        return pb.ListDisputesReply(
            disputes=[_dispute(game, dispute, caller, players) for game, dispute in page[:size]],
            next_page_token="" if last is None else f"{last[1].filed_at}:{last[0]}",
        )

    async def ExportGame(self, request: pb.ExportGameRequest, context: Context) -> pb.ExportGameReply:
        game_id = limits.identifier(request.game_id, "game_id")
        command_id = limits.identifier(request.command_id, "command_id") if request.reveal_seed else None
        self.callers.admin(context)
        auditor = self.auditor if request.reveal_seed else self.reader
        text = await auditor.export(game_id, reveal_seed=request.reveal_seed, command_id=command_id)
        return pb.ExportGameReply(record=text, sha256=hashlib.sha256(text.encode()).hexdigest())

    async def ReplayGame(self, request: pb.ReplayGameRequest, context: Context) -> pb.ReplayGameReply:
        game_id = limits.identifier(request.game_id, "game_id")
        self.callers.admin(context)
        seat = request.as_seat if request.HasField("as_seat") else None
        return pb.ReplayGameReply(html=await self.reader.replay(game_id, seat=seat))

    async def ImportRecord(self, request: pb.ImportRecordRequest, context: Context) -> pb.ImportRecordReply:
        tokens: list[str] = []

        def hashes(count: int) -> list[bytes]:
            tokens.extend(new_token() for _ in range(count))
            return [token_hash(t) for t in tokens]

        command_id = limits.identifier(request.command_id, "command_id")
        limits.optional_identifier(request.tournament_id, "tournament_id")
        self.callers.admin(context)
        imported = await self.auditor.import_record(
            request.record,
            tournament_id=request.tournament_id,
            seat_token_hashes=hashes,
            command_id=command_id,
            request_hash=request_hash_of("ImportRecord", request, ADMIN),
        )
        if imported.duplicate:
            raise AlreadyExists(
                f"the record was imported before, as game {imported.game_id} (this command id's import, or "
                "another of the same text); its seat tokens were shown once, not again",
                reason="GAME_EXISTS",
                game_id=imported.game_id,
            )
        log.info("import", game=imported.game_id, valid=imported.report.valid, version=imported.version)
        return pb.ImportRecordReply(
            game_id=imported.game_id,
            version=imported.version,
            seats=[
                pb.ImportSeat(seat=seat, player=name, token=token)
                for seat, (name, token) in enumerate(zip(imported.players, tokens, strict=True))
            ],
            report=_struct(imported.report.to_json()),
        )
