"""A ruling on a dispute judges the catch or challenge the log holds at the disputed position, whoever
filed the dispute; only when the log holds none there, the one the dispute describes (its ``by`` and
``target``, never the filer's seat). Over a real gRPC channel, on a real PostgreSQL.

The cases are the table records of :mod:`tests.audit.disputed`, imported, then disputed with FileDispute
(with a seat's token, or by the adjudicator for a seat) and ruled with RuleOnDispute. Every combination
of filer × recorded or not × verdict × what the dispute names is asked; what the ruling must say comes
from the records' design (``judged_catch``, ``judged_challenge``), never from the service.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from google.protobuf import json_format

from service.api.server import RunningServer
from service.domain.catalogue import decode_entry
from service.domain.entries import DisputeFiled, DisputeRuled
from service.store import NewEvent
from tests.api.shared_server import shared_address, shared_channel, shared_server  # noqa: F401
from tests.api.support import ADMIN, Metadata, auth, new_id
from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as apb
from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc, game_pb2_grpc

from .disputed import (
    ANN,
    BOB,
    CATCH_NAMES,
    CATCH_PLAY_POSITION,
    CATCH_POSITION,
    CHALLENGE_NAMES,
    CHALLENGE_POSITION,
    CY,
    PLAYERS,
    WD4_POSITION,
    Judged,
    catch_record,
    challenge_record,
    judged_catch,
    judged_challenge,
)
from .test_adjudication import down_to_one

AuditStub = audit_pb2_grpc.AuditServiceStub

# Every test imports and disputes games of its own: one server for the module (48 cases).
pytestmark = pytest.mark.asyncio(loop_scope="module")

#: Who files a catch dispute: a seat with its own token, or the adjudicator filing for the caught player.
CATCH_FILERS = {"catcher": BOB, "caught": ANN, "third-seat": CY, "adjudicator": None}
#: Who files a challenge dispute (with their seat's token).
CHALLENGE_FILERS = {"victim": BOB, "offender": ANN, "third-seat": CY}
#: The seat the adjudicator files for.
FILED_FOR = ANN


async def import_record(audit: AuditStub, text: str) -> apb.ImportRecordReply:
    # A game of its own for each case: the same text is imported once, so each copy differs by a comment.
    command_id = new_id()
    reply: apb.ImportRecordReply = await audit.ImportRecord(
        apb.ImportRecordRequest(command_id=command_id, record=f"{text}# {command_id}\n"), metadata=ADMIN
    )
    assert [seat.player for seat in reply.seats] == list(PLAYERS)
    return reply


async def dispute_and_rule(
    server: RunningServer,
    audit: AuditStub,
    imported: apb.ImportRecordReply,
    kind: apb.DisputeKind,
    position: int,
    filer: int | None,
    by: int | None,
    target: int | None = None,
) -> apb.Dispute:
    """File the dispute as ``filer`` (``None``: the adjudicator, for :data:`FILED_FOR`), naming ``by``
    and ``target``, then rule on it; checks the filing as the reply and the log give it back."""
    game_id = imported.game_id
    request = apb.FileDisputeRequest(
        game_id=game_id,
        command_id=new_id(),
        kind=kind,
        position=position,
        by=by,
        target=target,
        claim="that is not what the rules say",
    )
    metadata: Metadata
    if filer is None:
        request.as_seat = FILED_FOR
        metadata = ADMIN
    else:
        metadata = auth(imported.seats[filer].token)
    filed = await audit.FileDispute(request, metadata=metadata)
    seat = FILED_FOR if filer is None else filer
    assert (filed.seat, filed.position, filed.status) == (seat, position, "open")
    assert (filed.by if filed.HasField("by") else None) == by
    assert (filed.target if filed.HasField("target") else None) == target
    [stored] = await server.store.read_stream(game_id, after_version=filed.filed_at - 1)
    entry = decode_entry(stored.type, stored.payload)
    assert isinstance(entry, DisputeFiled)
    assert (entry.seat, entry.by, entry.target, entry.position) == (seat, by, target, position)

    ruled: apb.Dispute = await audit.RuleOnDispute(
        apb.RuleOnDisputeRequest(game_id=game_id, dispute_id=filed.dispute_id, command_id=new_id()),
        metadata=ADMIN,
    )
    assert (ruled.status, ruled.ruled_at) == ("ruled", filed.filed_at + 1)
    return ruled


def heading(ruling: apb.Ruling) -> tuple[Any, ...]:
    """What a ruling decides, as :class:`Judged` holds it (plus the kind and position)."""
    return (
        ruling.kind,
        ruling.by,
        ruling.against,
        ruling.verdict,
        ruling.rule,
        ruling.reason or None,
        ruling.recorded,
        ruling.mismatch or None,
        ruling.position,
    )


def expected(kind: apb.DisputeKind, judged: Judged, position: int) -> tuple[Any, ...]:
    return (
        kind,
        judged.by,
        judged.against,
        judged.verdict,
        judged.rule,
        judged.reason,
        judged.recorded,
        judged.mismatch,
        position,
    )


async def assert_ruling_recorded(
    server: RunningServer, audit: AuditStub, game_id: str, ruled: apb.Dispute, judged: Judged
) -> None:
    """The ruling in the log (a ``DisputeRuled`` entry) and in the game's report says the same."""
    [stored] = await server.store.read_stream(game_id, after_version=ruled.ruled_at - 1)
    entry = decode_entry(stored.type, stored.payload)
    assert isinstance(entry, DisputeRuled)
    assert (entry.by, entry.against, entry.verdict, entry.rule, entry.recorded, entry.mismatch) == (
        judged.by,
        judged.against,
        judged.verdict,
        judged.rule,
        judged.recorded,
        judged.mismatch,
    )
    reply = await audit.VerifyGame(apb.VerifyGameRequest(game_id=game_id), metadata=ADMIN)
    [shown] = json_format.MessageToDict(reply.report)["disputes"]
    assert shown["filer"] == PLAYERS[ruled.seat]
    assert shown["by"] == (PLAYERS[ruled.by] if ruled.HasField("by") else None)
    assert shown["target"] == (PLAYERS[ruled.target] if ruled.HasField("target") else None)
    ruling = shown["ruling"]
    assert (ruling["by"], ruling["verdict"], ruling["recorded"], ruling["mismatch"]) == (
        judged.by,
        judged.verdict,
        judged.recorded,
        judged.mismatch,
    )


# --- UNO catches -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("by", "target"), list(CATCH_NAMES.values()), ids=list(CATCH_NAMES))
@pytest.mark.parametrize("verdict", ["penalty", "no-penalty"])
@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "not-recorded"])
@pytest.mark.parametrize("filer", list(CATCH_FILERS.values()), ids=list(CATCH_FILERS))
async def test_a_catch_dispute_judges_the_recorded_catch_whoever_files_it(
    server: RunningServer,
    audit: AuditStub,
    filer: int | None,
    recorded: bool,
    verdict: str,
    by: int | None,
    target: int | None,
) -> None:
    imported = await import_record(audit, catch_record(verdict))
    position = CATCH_POSITION if recorded else CATCH_PLAY_POSITION

    ruled = await dispute_and_rule(server, audit, imported, apb.UNO_CATCH, position, filer, by, target)

    names = next(name for name, named in CATCH_NAMES.items() if named == (by, target))
    judged = judged_catch(verdict, recorded, names)
    assert heading(ruled.ruling) == expected(apb.UNO_CATCH, judged, position)
    evidence = json_format.MessageToDict(ruled.ruling.evidence)
    assert evidence["hand"] == ["G7"]  # ann's hand when caught, whoever disputed
    await assert_ruling_recorded(server, audit, imported.game_id, ruled, judged)


async def test_a_dispute_naming_another_catch_than_the_recorded_one_is_told_so(
    server: RunningServer, audit: AuditStub
) -> None:
    imported = await import_record(audit, catch_record("penalty"))

    # ann says cy caught bob: the log holds bob's catch of ann at that position, which is what is judged.
    ruled = await dispute_and_rule(server, audit, imported, apb.UNO_CATCH, CATCH_POSITION, ANN, CY, BOB)

    assert heading(ruled.ruling) == (
        apb.UNO_CATCH,
        "bob",
        "ann",
        "penalty",
        "uno.catch",
        None,
        True,
        f"by cy and target bob named, but the uno-catch recorded at position {CATCH_POSITION} is by bob "
        "against ann",
        CATCH_POSITION,
    )
    # Where the log holds no catch, the catch described is judged: cy's of bob, who holds 2 cards.
    described = await dispute_and_rule(
        server, audit, imported, apb.UNO_CATCH, CATCH_PLAY_POSITION, ANN, CY, BOB
    )
    assert heading(described.ruling) == (
        apb.UNO_CATCH,
        "cy",
        "bob",
        "no-penalty",
        "uno.catch.invalid",
        "bob holds 2 cards, not one",
        False,
        None,
        CATCH_PLAY_POSITION,
    )
    # The adjudicator asking directly gets the same ruling, and the same mismatch, without a dispute.
    asked = await audit.AdjudicateCatch(
        apb.AdjudicateRequest(game_id=imported.game_id, position=CATCH_POSITION, by=CY, target=BOB),
        metadata=ADMIN,
    )
    assert heading(asked) == heading(ruled.ruling)


async def test_a_live_catch_is_judged_as_recorded_whoever_disputes_it(
    server: RunningServer, stub: game_pb2_grpc.GameServiceStub, audit: AuditStub
) -> None:
    # A game the service ran: p1 catches p0 (two players). p0, p1 and the adjudicator (for p0) dispute
    # the catch at its last event naming no one; then p0 names herself as the catcher.
    table, _ = await down_to_one(stub, "classic")
    caught = await table.catch(BOB, ANN)
    game = table.game
    filers: list[tuple[Metadata, int | None]] = [(game.seat(ANN), None), (game.seat(BOB), None)]
    filers += [(ADMIN, None), (game.seat(ANN), ANN)]
    for metadata, by in filers:
        request = apb.FileDisputeRequest(
            game_id=game.game_id,
            command_id=new_id(),
            kind=apb.UNO_CATCH,
            position=caught.last,
            by=by,
            claim="not a fair catch",
        )
        if metadata is ADMIN:
            request.as_seat = ANN
        filed = await audit.FileDispute(request, metadata=metadata)
        ruled = await audit.RuleOnDispute(
            apb.RuleOnDisputeRequest(game_id=game.game_id, dispute_id=filed.dispute_id, command_id=new_id()),
            metadata=ADMIN,
        )
        mismatch = None
        if by == ANN:
            mismatch = (
                f"by p0 named, but the uno-catch recorded at position {caught.last} is by p1 against p0"
            )
        assert heading(ruled.ruling) == (
            apb.UNO_CATCH,
            "p1",
            "p0",
            "penalty",
            "uno.catch",
            None,
            True,
            mismatch,
            caught.last,
        )


# --- Disputes stored before a dispute could name its catcher ---------------------------------------------


async def test_a_dispute_stored_without_by_still_reads_and_is_ruled(
    server: RunningServer, audit: AuditStub
) -> None:
    # The entries as the service wrote them before DisputeFiled.by and DisputeRuled.mismatch existed:
    # one dispute left open, one already ruled.
    imported = await import_record(audit, catch_record("penalty"))
    game_id = imported.game_id
    open_id, ruled_id = str(uuid.uuid4()), str(uuid.uuid4())
    old_filed: dict[str, Any] = {
        "seat": ANN,
        "kind": "uno-catch",
        "position": CATCH_POSITION,
        "target": None,
        "claim": "filed by an older service",
    }
    old_ruling: dict[str, Any] = {
        "dispute_id": ruled_id,
        "verdict": "penalty",
        "rule": "uno.catch",
        "reason": None,
        "by": "bob",
        "against": "ann",
        "position": CATCH_POSITION,
        "recorded": True,
        "evidence": {"hand": ["G7"]},
        "note": "",
    }
    store = server.store
    for kind, payload in (
        ("DisputeFiled", {"dispute_id": open_id, **old_filed}),
        ("DisputeFiled", {"dispute_id": ruled_id, **old_filed}),
        ("DisputeRuled", old_ruling),
    ):
        rows = await store.read_stream(game_id)
        command_id = new_id()
        await store.append(
            game_id,
            rows[-1].version,
            [NewEvent(kind, payload)],
            command_id=command_id,
            request_hash=json.dumps(payload).encode(),
            metadata={"command_id": command_id, "actor": "audit", "command": kind},
            prev_hash=rows[-1].hash,
        )
    stored = await store.read_stream(game_id, after_version=imported.version)
    assert [set(row.payload) - set(old_filed) for row in stored[:2]] == [{"dispute_id"}] * 2  # no "by"
    assert "mismatch" not in stored[2].payload

    listed = await audit.ListDisputes(apb.ListDisputesRequest(game_id=game_id), metadata=ADMIN)
    assert [(d.dispute_id, d.HasField("by"), d.status) for d in listed.disputes] == [
        (open_id, False, "open"),
        (ruled_id, False, "ruled"),
    ]
    assert listed.disputes[1].ruling.mismatch == ""
    ruled = await audit.RuleOnDispute(
        apb.RuleOnDisputeRequest(game_id=game_id, dispute_id=open_id, command_id=new_id()),
        metadata=ADMIN,
    )
    # Filed by ann, the caught player, naming no catcher: the recorded catch, bob's, is judged.
    assert heading(ruled.ruling) == expected(
        apb.UNO_CATCH, judged_catch("penalty", True, "names-nothing"), CATCH_POSITION
    )
    report = json_format.MessageToDict(
        (await audit.VerifyGame(apb.VerifyGameRequest(game_id=game_id), metadata=ADMIN)).report
    )
    assert report["unreadable_entries"] == [] and report["chain"]["valid"]
    assert [(d["filer"], d["by"], d["status"]) for d in report["disputes"]] == [("ann", None, "ruled")] * 2


# --- Wild Draw Four challenges ---------------------------------------------------------------------------


@pytest.mark.parametrize("by", list(CHALLENGE_NAMES.values()), ids=list(CHALLENGE_NAMES))
@pytest.mark.parametrize("verdict", ["upheld", "failed"])
@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "not-recorded"])
@pytest.mark.parametrize("filer", list(CHALLENGE_FILERS.values()), ids=list(CHALLENGE_FILERS))
async def test_a_challenge_dispute_judges_the_recorded_challenge_whoever_files_it(
    server: RunningServer, audit: AuditStub, filer: int, recorded: bool, verdict: str, by: int | None
) -> None:
    imported = await import_record(audit, challenge_record(verdict))
    position = CHALLENGE_POSITION if recorded else WD4_POSITION

    ruled = await dispute_and_rule(server, audit, imported, apb.WD4_CHALLENGE, position, filer, by)

    names = next(name for name, named in CHALLENGE_NAMES.items() if named == by)
    judged = judged_challenge(verdict, recorded, names)
    assert heading(ruled.ruling) == expected(apb.WD4_CHALLENGE, judged, position)
    await assert_ruling_recorded(server, audit, imported.game_id, ruled, judged)
