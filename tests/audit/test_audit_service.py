"""AuditService end to end: a real server on a real PostgreSQL, called over a real gRPC channel."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from google.protobuf import json_format

from service.api.server import RunningServer
from service.domain.limits import MAX_RECORD_BYTES
from service.records.record import read_record
from service.records.verify import verify_record
from service.rules.options import Variant
from tests.api.support import (
    ADMIN,
    arranged_deck,
    auth,
    count_rows,
    create_game,
    error_info,
    fails_with,
    header,
    new_id,
)
from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as apb
from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc, game_pb2_grpc
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb

from .support import store_simulated

RECORDS = Path(__file__).parent.parent / "data" / "records"

AuditStub = audit_pb2_grpc.AuditServiceStub


def report_of(reply: apb.VerifyGameReply) -> dict[str, Any]:
    return json_format.MessageToDict(reply.report)


@pytest.mark.parametrize("variant", list(Variant))
async def test_a_stored_game_verifies_and_its_export_verifies_offline(
    server: RunningServer, audit: AuditStub, variant: Variant
) -> None:
    game_id = await store_simulated(server.store, variant, seed=11)

    reply = await audit.VerifyGame(apb.VerifyGameRequest(game_id=game_id), metadata=ADMIN)
    report = report_of(reply)
    assert reply.valid and reply.rules_valid and reply.chain_valid, report
    assert (reply.first_tampered_position, reply.diverged_at, reply.outcome_differs) == (0, 0, False)
    assert report["status"] == "over" and report["seed"]["status"] == "revealed"
    assert report["seed"]["commitment_ok"] is True and report["seed"]["mismatches"] == []

    exported = await audit.ExportGame(apb.ExportGameRequest(game_id=game_id), metadata=ADMIN)
    assert exported.sha256 == hashlib.sha256(exported.record.encode()).hexdigest()
    offline = verify_record(read_record(exported.record)).to_json()
    assert offline["valid"], offline["violations"]
    assert (offline["scores"], offline["winner"]) == (report["scores"], report["winner"])


async def test_a_game_played_over_grpc_verifies_with_rulings_pointing_into_its_log(
    server: RunningServer, stub: game_pb2_grpc.GameServiceStub, audit: AuditStub
) -> None:
    game = await create_game(stub, players=2)
    await stub.StartRound(pb.StartRoundRequest(header=header(game.game_id)), metadata=game.seat(0))
    view = await stub.GetGame(pb.GetGameRequest(game_id=game.game_id), metadata=ADMIN)

    reply = await audit.VerifyGame(apb.VerifyGameRequest(game_id=game.game_id), metadata=ADMIN)
    report = report_of(reply)
    assert reply.valid, report
    assert report["status"] == "in-progress" and report["version"] == view.version
    # The seed stays secret while the game goes on: it is used, not shown.
    assert report["seed"]["status"] == "secret" and report["seed"]["seed"] is None
    assert report["seed"]["checked_to"] == view.version


async def test_only_the_adjudicator_verifies(server: RunningServer, stub: Any, audit: AuditStub) -> None:
    game = await create_game(stub, players=2)
    request = apb.VerifyGameRequest(game_id=game.game_id)
    await fails_with(audit.VerifyGame(request), grpc.StatusCode.UNAUTHENTICATED)
    await fails_with(audit.VerifyGame(request, metadata=game.seat(0)), grpc.StatusCode.PERMISSION_DENIED)
    await fails_with(
        audit.VerifyGame(apb.VerifyGameRequest(game_id="nope"), metadata=ADMIN),
        grpc.StatusCode.NOT_FOUND,
        reason="UNKNOWN_GAME",
    )
    await fails_with(
        audit.VerifyGame(apb.VerifyGameRequest(game_id=""), metadata=ADMIN),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="game_id",
    )


async def test_revealing_the_seed_of_a_game_in_progress_is_recorded_once(
    server: RunningServer, stub: Any, audit: AuditStub
) -> None:
    # A number card first, so that the game then simply waits for a play or a draw.
    game = await create_game(stub, players=2, fixed_deck=arranged_deck({}, "R5", players=2))
    before = await server.store.stream_version(game.game_id)

    await fails_with(
        audit.ExportGame(apb.ExportGameRequest(game_id=game.game_id), metadata=ADMIN),
        grpc.StatusCode.FAILED_PRECONDITION,
        reason="GAME_IN_PROGRESS",
    )
    await fails_with(
        audit.VerifyGame(apb.VerifyGameRequest(game_id=game.game_id, reveal_seed=True), metadata=ADMIN),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="command_id",
    )
    assert await server.store.stream_version(game.game_id) == before  # refusals append nothing

    request = apb.VerifyGameRequest(game_id=game.game_id, reveal_seed=True, command_id=new_id())
    report = report_of(await audit.VerifyGame(request, metadata=ADMIN))
    seed = bytes.fromhex(report["seed"]["seed"])
    assert hashlib.sha256(seed).hexdigest() == report["seed"]["committed"]
    assert report["seed"]["revealed_at"] == before + 1
    events = await server.store.read_stream(game.game_id, after_version=before)
    assert [e.type for e in events] == ["SeedRevealed"]
    assert "seed" not in events[0].payload  # the log says it was revealed, not what it is

    await audit.VerifyGame(request, metadata=ADMIN)  # a retry reveals nothing more
    exported = await audit.ExportGame(apb.ExportGameRequest(game_id=game.game_id), metadata=ADMIN)
    assert read_record(exported.record).header.seed == seed
    assert await server.store.stream_version(game.game_id) == before + 1
    # The game goes on after the audit entry.
    view = await stub.GetGame(pb.GetGameRequest(game_id=game.game_id), metadata=ADMIN)
    seat = view.turn
    await stub.Draw(pb.DrawRequest(header=header(game.game_id)), metadata=game.seat(seat))


@pytest.mark.parametrize("name", ["classic_wd4_upheld", "sonic_scoring_230", "classic_violations"])
async def test_an_imported_record_is_stored_as_recorded_and_verifies_like_the_file(
    server: RunningServer, audit: AuditStub, name: str
) -> None:
    text = (RECORDS / f"{name}.jsonl").read_text(encoding="utf-8")
    offline = verify_record(read_record(text)).to_json()

    reply = await audit.ImportRecord(
        apb.ImportRecordRequest(command_id=new_id(), record=text), metadata=ADMIN
    )
    assert [s.player for s in reply.seats] == list(read_record(text).header.players)
    assert json_format.MessageToDict(reply.report)["valid"] == offline["valid"]

    report = report_of(await audit.VerifyGame(apb.VerifyGameRequest(game_id=reply.game_id), metadata=ADMIN))
    assert report["origin"] == "imported"
    assert report["rules_valid"] == offline["valid"] and report["chain"]["valid"]
    assert report["replay"]["outcome_differs"] is False
    # The same findings, at positions: line n of the record is position n + 1 of the game's log.
    assert [(v["position"], v["rule"]) for v in report["violations"]] == [
        (v["line"] + 1, v["rule"]) for v in offline["violations"]
    ]
    assert [(r["position"], r["verdict"]) for r in report["rulings"]] == [
        (r["line"] + 1, r["verdict"]) for r in offline["rulings"]
    ]
    exported = await audit.ExportGame(apb.ExportGameRequest(game_id=reply.game_id), metadata=ADMIN)
    assert exported.record == text  # byte for byte


async def test_an_import_retried_with_its_command_id_imports_once(
    server: RunningServer, audit: AuditStub, database_url: str
) -> None:
    text = (RECORDS / "classic_wd4_upheld.jsonl").read_text(encoding="utf-8")
    request = apb.ImportRecordRequest(command_id=new_id(), record=text)
    first = await audit.ImportRecord(request, metadata=ADMIN)
    rows = await count_rows(database_url)
    error = await fails_with(
        audit.ImportRecord(request, metadata=ADMIN), grpc.StatusCode.ALREADY_EXISTS, reason="GAME_EXISTS"
    )
    assert "shown once" in (error.details() or "")
    assert error_info(error).metadata["game_id"] == first.game_id
    assert await count_rows(database_url) == rows


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ("", "record"),
        ('{"record": "uno-game-record/1", "variant": "poker", "players": ["a", "b"]}\n', "record"),
        (
            '{"record": "uno-game-record/1", "variant": "classic", "players": ["a", "b"]}\n{"by": "a"}\n',
            "record",
        ),
        ('{"record": "uno-game-record/1", "variant": "classic", "players": ["a", "b"]}\n#\x00\n', "record"),
    ],
)
async def test_a_malformed_record_is_refused_and_nothing_is_stored(
    server: RunningServer, audit: AuditStub, database_url: str, record: str, field: str
) -> None:
    before = await count_rows(database_url)
    error = await fails_with(
        audit.ImportRecord(apb.ImportRecordRequest(command_id=new_id(), record=record), metadata=ADMIN),
        grpc.StatusCode.INVALID_ARGUMENT,
        field=field,
    )
    assert "line" in (error.details() or "") or "\\x00" in record or "U+0000" in (error.details() or "")
    assert await count_rows(database_url) == before


async def test_an_imported_game_takes_no_game_commands(
    server: RunningServer, stub: game_pb2_grpc.GameServiceStub, audit: AuditStub
) -> None:
    text = (RECORDS / "classic_wd4_upheld.jsonl").read_text(encoding="utf-8")
    reply = await audit.ImportRecord(
        apb.ImportRecordRequest(command_id=new_id(), record=text), metadata=ADMIN
    )
    request = pb.DrawRequest(header=header(reply.game_id, as_seat=0))
    await fails_with(
        stub.Draw(request, metadata=ADMIN), grpc.StatusCode.FAILED_PRECONDITION, reason="IMPORTED_GAME"
    )


async def test_a_dispute_filed_and_ruled_is_in_the_log_and_the_report(
    server: RunningServer, audit: AuditStub
) -> None:
    text = (RECORDS / "classic_uno_catch.jsonl").read_text(encoding="utf-8")
    offline = verify_record(read_record(text)).to_json()
    catch = next(r for r in offline["rulings"] if r["kind"] == "uno-catch")
    imported = await audit.ImportRecord(
        apb.ImportRecordRequest(command_id=new_id(), record=text), metadata=ADMIN
    )
    seat = next(s for s in imported.seats if s.player == catch["by"])
    position = catch["line"] + 1

    filed = await audit.FileDispute(
        apb.FileDisputeRequest(
            game_id=imported.game_id,
            command_id=new_id(),
            kind=apb.UNO_CATCH,
            position=position,
            claim="I caught them before anyone played",
        ),
        metadata=auth(seat.token),
    )
    assert (filed.status, filed.seat, filed.position) == ("open", seat.seat, position)
    listed = await audit.ListDisputes(
        apb.ListDisputesRequest(game_id=imported.game_id), metadata=auth(seat.token)
    )
    assert [d.dispute_id for d in listed.disputes] == [filed.dispute_id]

    ruled = await audit.RuleOnDispute(
        apb.RuleOnDisputeRequest(
            game_id=imported.game_id, dispute_id=filed.dispute_id, command_id=new_id(), note="checked the log"
        ),
        metadata=ADMIN,
    )
    assert ruled.status == "ruled" and ruled.note == "checked the log"
    assert (ruled.ruling.verdict, ruled.ruling.rule) == (catch["verdict"], catch["rule"])
    assert ruled.ruling.position == position and ruled.ruled_at == filed.filed_at + 1

    events = await server.store.read_stream(imported.game_id, after_version=filed.filed_at - 1)
    assert [e.type for e in events] == ["DisputeFiled", "DisputeRuled"]
    assert events[1].payload["verdict"] == catch["verdict"]

    report = report_of(
        await audit.VerifyGame(apb.VerifyGameRequest(game_id=imported.game_id), metadata=ADMIN)
    )
    [dispute] = report["disputes"]
    assert (dispute["status"], dispute["ruling"]["verdict"]) == ("ruled", catch["verdict"])
    assert report["chain"]["valid"]

    await fails_with(
        audit.RuleOnDispute(
            apb.RuleOnDisputeRequest(
                game_id=imported.game_id, dispute_id=filed.dispute_id, command_id=new_id()
            ),
            metadata=ADMIN,
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
        reason="ALREADY_RULED",
    )
    everything = await audit.ListDisputes(apb.ListDisputesRequest(status="ruled"), metadata=ADMIN)
    assert [d.dispute_id for d in everything.disputes] == [filed.dispute_id]
    assert (await audit.ListDisputes(apb.ListDisputesRequest(status="open"), metadata=ADMIN)).disputes == []


async def test_dispute_filings_are_checked(server: RunningServer, stub: Any, audit: AuditStub) -> None:
    game = await create_game(stub, players=2)
    other = await create_game(stub, players=2)

    def filing(**fields: Any) -> apb.FileDisputeRequest:
        base: dict[str, Any] = {
            "game_id": game.game_id,
            "command_id": new_id(),
            "kind": apb.UNO_CATCH,
            "position": 1,
            "claim": "x",
        }
        return apb.FileDisputeRequest(**{**base, **fields})

    await fails_with(audit.FileDispute(filing()), grpc.StatusCode.UNAUTHENTICATED)
    await fails_with(audit.FileDispute(filing(), metadata=other.seat(0)), grpc.StatusCode.UNAUTHENTICATED)
    await fails_with(
        audit.FileDispute(filing(as_seat=1), metadata=game.seat(0)), grpc.StatusCode.PERMISSION_DENIED
    )
    await fails_with(
        audit.FileDispute(filing(kind=0), metadata=game.seat(0)),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="kind",
    )
    await fails_with(
        audit.FileDispute(filing(position=0), metadata=game.seat(0)),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="position",
    )
    await fails_with(
        audit.FileDispute(filing(position=99), metadata=game.seat(0)),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="position",
    )
    await fails_with(
        audit.FileDispute(filing(claim=" "), metadata=game.seat(0)),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="claim",
    )
    # Two players: seats 0 and 1. A named catcher is checked like a named target.
    for field in ("target", "by"):
        for seat in (2, 5, -1, 2**31 - 1, -(2**31)):
            await fails_with(
                audit.FileDispute(filing(**{field: seat}), metadata=game.seat(0)),
                grpc.StatusCode.INVALID_ARGUMENT,
                field=field,
            )
        await fails_with(
            audit.FileDispute(filing(**{field: 9}, as_seat=0), metadata=ADMIN),
            grpc.StatusCode.INVALID_ARGUMENT,
            field=field,
        )
    await fails_with(
        audit.FileDispute(filing(), metadata=ADMIN), grpc.StatusCode.INVALID_ARGUMENT, field="as_seat"
    )
    assert await server.store.stream_version(game.game_id) == 1  # nothing appended

    request = filing(by=1, target=0)
    first = await audit.FileDispute(request, metadata=game.seat(0))
    again = await audit.FileDispute(request, metadata=game.seat(0))
    assert again.dispute_id == first.dispute_id
    assert (first.seat, first.by, first.target) == (0, 1, 0)
    assert await server.store.stream_version(game.game_id) == 2  # filed once
    await fails_with(
        audit.RuleOnDispute(
            apb.RuleOnDisputeRequest(game_id=game.game_id, dispute_id=first.dispute_id, command_id=new_id()),
            metadata=game.seat(0),
        ),
        grpc.StatusCode.PERMISSION_DENIED,
    )
    await fails_with(
        audit.RuleOnDispute(
            apb.RuleOnDisputeRequest(game_id=game.game_id, dispute_id="nope", command_id=new_id()),
            metadata=ADMIN,
        ),
        grpc.StatusCode.NOT_FOUND,
        reason="UNKNOWN_DISPUTE",
    )


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


async def test_watchers_see_a_ruling_but_only_the_adjudicator_sees_the_hand_in_its_evidence(
    server: RunningServer, stub: game_pb2_grpc.GameServiceStub, audit: AuditStub
) -> None:
    game = await create_game(stub, players=2, fixed_deck=arranged_deck({}, "R5", players=2))
    filed = await audit.FileDispute(
        apb.FileDisputeRequest(
            game_id=game.game_id,
            command_id=new_id(),
            kind=apb.UNO_CATCH,
            position=game.reply.version,
            target=1,
            claim="they hold one card",
        ),
        metadata=game.seat(0),
    )
    ruled = await audit.RuleOnDispute(
        apb.RuleOnDisputeRequest(game_id=game.game_id, dispute_id=filed.dispute_id, command_id=new_id()),
        metadata=ADMIN,
    )
    # Seven cards each after the deal: no catch can earn a penalty.
    assert (ruled.ruling.verdict, ruled.ruling.rule, ruled.ruling.recorded) == (
        "no-penalty",
        "uno.catch.invalid",
        False,
    )
    hand = list(json_format.MessageToDict(ruled.ruling.evidence)["hand"])
    assert len(hand) == 7

    async def ruling_seen_by(metadata: Any) -> dict[str, Any]:
        call = stub.WatchGame(
            pb.WatchGameRequest(game_id=game.game_id, after_version=ruled.ruled_at - 1), metadata=metadata
        )
        async for event in call:
            call.cancel()
            assert event.type == "DisputeRuled"
            return json_format.MessageToDict(event.payload)
        raise AssertionError("no event")

    assert (await ruling_seen_by(ADMIN))["evidence"]["hand"] == hand
    seen = await ruling_seen_by(game.seat(0))
    assert seen["verdict"] == "no-penalty" and seen["evidence"]["hand"] == [None] * 7


async def test_dispute_lists_are_paged(audit: AuditStub) -> None:
    """Every game's disputes come in pages of at most page_size, by game then filing, each exactly once."""
    text = (RECORDS / "classic_uno_catch.jsonl").read_text(encoding="utf-8")
    filed: list[tuple[str, int]] = []
    for copy in range(2):
        # Two games: two texts (a record is imported once), a comment line apart.
        record = text + f"# copy {copy}\n"
        imported = await audit.ImportRecord(
            apb.ImportRecordRequest(command_id=new_id(), record=record), metadata=ADMIN
        )
        for _ in range(3):
            dispute = await audit.FileDispute(
                apb.FileDisputeRequest(
                    game_id=imported.game_id,
                    command_id=new_id(),
                    kind=apb.UNO_CATCH,
                    position=2,
                    claim="paging",
                    as_seat=0,
                ),
                metadata=ADMIN,
            )
            filed.append((dispute.game_id, dispute.filed_at))
    pages: list[list[tuple[str, int]]] = []
    token = ""
    while True:
        page = await audit.ListDisputes(
            apb.ListDisputesRequest(page_size=4, page_token=token), metadata=ADMIN
        )
        pages.append([(d.game_id, d.filed_at) for d in page.disputes])
        token = page.next_page_token
        if not token:
            break
    assert [len(p) for p in pages] == [4, 2]
    assert [d for p in pages for d in p] == sorted(filed)
    for bad in ("x", "1", "12:", "a:b", "9" * 19 + ":g"):
        await fails_with(
            audit.ListDisputes(apb.ListDisputesRequest(page_token=bad), metadata=ADMIN),
            grpc.StatusCode.INVALID_ARGUMENT,
            field="page_token",
        )
    await fails_with(
        audit.ListDisputes(apb.ListDisputesRequest(page_size=501), metadata=ADMIN),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="page_size",
    )


async def test_a_record_over_4_mib_is_refused_by_the_service_not_the_transport(
    audit: AuditStub, database_url: str
) -> None:
    """The documented limit is the one enforced: a record of 4 MiB + 1 byte gets INVALID_ARGUMENT naming
    ``record`` (the server receives requests up to 4 MiB + 64 KiB), and nothing is stored."""
    text = (RECORDS / "classic_uno_catch.jsonl").read_text(encoding="utf-8")
    padded = text + " " * (MAX_RECORD_BYTES + 1 - len(text.encode("utf-8")))
    assert len(padded.encode("utf-8")) == MAX_RECORD_BYTES + 1
    rows = await count_rows(database_url)
    error = await fails_with(
        audit.ImportRecord(apb.ImportRecordRequest(command_id=new_id(), record=padded), metadata=ADMIN),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="record",
    )
    assert "4 MiB" in (error.details() or "")
    assert await count_rows(database_url) == rows


async def test_an_edited_dispute_entry_is_reported_and_hides_no_other_game(
    audit: AuditStub, database_url: str
) -> None:
    """A superuser edit of a dispute entry: that game's list is FAILED_PRECONDITION (LOG_UNREADABLE, the
    position named), never INTERNAL; the list of every game still shows the other games' disputes."""
    text = (RECORDS / "classic_uno_catch.jsonl").read_text(encoding="utf-8")
    filed = {}
    for copy in range(2):
        # Two games: two texts (a record is imported once), a comment line apart.
        record = text + f"# copy {copy}\n"
        imported = await audit.ImportRecord(
            apb.ImportRecordRequest(command_id=new_id(), record=record), metadata=ADMIN
        )
        dispute = await audit.FileDispute(
            apb.FileDisputeRequest(
                game_id=imported.game_id,
                command_id=new_id(),
                kind=apb.UNO_CATCH,
                position=2,
                claim="edited",
                as_seat=0,
            ),
            metadata=ADMIN,
        )
        filed[imported.game_id] = dispute
    damaged, intact = list(filed)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute("ALTER TABLE events DISABLE TRIGGER USER")
        await conn.execute(
            "UPDATE events SET payload = jsonb_set(payload, '{kind}', '\"nonsense\"') "
            "WHERE game_id = %s AND version = %s",
            (damaged, filed[damaged].filed_at),
        )
        await conn.execute("ALTER TABLE events ENABLE TRIGGER USER")
    error = await fails_with(
        audit.ListDisputes(apb.ListDisputesRequest(game_id=damaged), metadata=ADMIN),
        grpc.StatusCode.FAILED_PRECONDITION,
        reason="LOG_UNREADABLE",
    )
    assert f"position {filed[damaged].filed_at}" in (error.details() or "")
    everything = await audit.ListDisputes(apb.ListDisputesRequest(), metadata=ADMIN)
    assert [d.dispute_id for d in everything.disputes] == [filed[intact].dispute_id]
