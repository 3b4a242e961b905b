"""Tamper evidence: rows edited behind the service's back, as a database superuser with the
immutability trigger switched off, are found by the verifier at the position they were edited."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import psycopg
import pytest
from google.protobuf import json_format

from service.api.server import RunningServer
from service.app.auditor import Auditor
from service.audit.game_report import GameStatus
from service.domain.entries import DisputeKind
from service.rules.options import Variant
from service.store import EventStore
from service.store.model import stored_hash
from tests.api.support import ADMIN
from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as apb
from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc

from .support import store_simulated


async def tamper(database_url: str, *statements: tuple[str, tuple[object, ...]]) -> None:
    """Run ``statements`` as the superuser with the row triggers of ``events`` off, then on again."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=False) as conn:
        await conn.execute("ALTER TABLE events DISABLE TRIGGER USER")
        for statement, params in statements:
            await conn.execute(statement, params)
        await conn.execute("ALTER TABLE events ENABLE TRIGGER USER")
        await conn.commit()


@pytest.fixture
async def game(store: EventStore) -> AsyncIterator[str]:
    yield await store_simulated(store, Variant.CLASSIC, seed=5)


async def findings(store: EventStore, game_id: str) -> list[tuple[int, str]]:
    report = await Auditor(store).verify(game_id, check_projections=False)
    assert not report.valid
    return [(f.position, f.kind) for f in report.chain.findings]


async def first_of_type(store: EventStore, game_id: str, kind: str, after: int = 1) -> int:
    rows = await store.read_stream(game_id)
    return next(r.version for r in rows if r.type == kind and r.version > after)


async def test_an_untouched_game_has_an_intact_chain(store: EventStore, game: str) -> None:
    report = await Auditor(store).verify(game, check_projections=False)
    assert report.valid and report.chain.to_json() == {
        "valid": True,
        "events": report.version,
        "head": (await store.read_stream(game))[-1].hash.hex(),
        "findings": [],
    }


async def test_a_changed_payload_is_found_at_its_position(
    store: EventStore, database_url: str, game: str
) -> None:
    played = await first_of_type(store, game, "CardPlayed", after=20)
    rows = await store.read_stream(game)
    card = rows[played - 1].payload["card"]
    other = "B9" if card != "B9" else "B8"
    await tamper(
        database_url,
        (
            "UPDATE events SET payload = jsonb_set(payload, '{card}', to_jsonb(%s::text)) "
            "WHERE game_id = %s AND version = %s",
            (other, game, played),
        ),
    )
    assert await findings(store, game) == [(played, "changed")]


async def test_a_deleted_event_is_found_at_its_position(
    store: EventStore, database_url: str, game: str
) -> None:
    victim = await first_of_type(store, game, "CardDrawn", after=10)
    await tamper(database_url, ("DELETE FROM events WHERE game_id = %s AND version = %s", (game, victim)))
    found = await findings(store, game)
    assert found[0] == (victim, "deleted")
    assert all(kind == "deleted" for _, kind in found)  # the hole is reported, not every later event


async def test_events_deleted_from_the_end_are_found_by_the_command_ledger(
    store: EventStore, database_url: str, game: str
) -> None:
    last = await store.stream_version(game)
    await tamper(database_url, ("DELETE FROM events WHERE game_id = %s AND version > %s", (game, last - 3)))
    assert await findings(store, game) == [(last - 2, "deleted")]


async def test_two_swapped_payloads_are_found_at_the_first_of_them(
    store: EventStore, database_url: str, game: str
) -> None:
    rows = await store.read_stream(game)
    first = next(r for r in rows[30:] if r.type == "CardPlayed")
    second = next(r for r in rows[first.version :] if r.type == "CardPlayed" and r.payload != first.payload)
    swap = "UPDATE events SET payload = %s::jsonb WHERE game_id = %s AND version = %s"
    await tamper(
        database_url,
        (swap, (psycopg.types.json.Jsonb(second.payload), game, first.version)),
        (swap, (psycopg.types.json.Jsonb(first.payload), game, second.version)),
    )
    assert await findings(store, game) == [(first.version, "swapped")]


async def test_two_rows_that_changed_places_are_found(
    store: EventStore, database_url: str, game: str
) -> None:
    version = 40
    move = "UPDATE events SET version = %s WHERE game_id = %s AND version = %s"
    await tamper(
        database_url,
        (move, (1_000_000, game, version)),
        (move, (version, game, version + 1)),
        (move, (version + 1, game, 1_000_000)),
    )
    assert await findings(store, game) == [(version, "swapped")]


async def test_an_event_rewritten_with_a_fresh_hash_is_found(
    store: EventStore, database_url: str, game: str
) -> None:
    rows = await store.read_stream(game)
    target = next(r for r in rows[25:] if r.type == "CardPlayed")
    payload = {**target.payload, "uno": not target.payload["uno"]}  # an UNO call made up afterwards
    # The hash a forger would write: the row's own, by its hash version, over the new payload.
    rehashed = stored_hash(dataclasses.replace(target, payload=payload))
    await tamper(
        database_url,
        (
            "UPDATE events SET payload = %s::jsonb, hash = %s WHERE game_id = %s AND version = %s",
            (psycopg.types.json.Jsonb(payload), rehashed, game, target.version),
        ),
    )
    assert await findings(store, game) == [(target.version, "changed")]


async def test_the_audit_service_reports_the_first_tampered_position(
    server: RunningServer, audit: audit_pb2_grpc.AuditServiceStub, database_url: str
) -> None:
    game_id = await store_simulated(server.store, Variant.MARIO_KART, seed=2)
    played = await first_of_type(server.store, game_id, "CardPlayed", after=15)
    await tamper(
        database_url,
        (
            "UPDATE events SET payload = jsonb_set(payload, '{uno}', 'true') "
            "WHERE game_id = %s AND version = %s",
            (game_id, played),
        ),
    )
    reply = await audit.VerifyGame(apb.VerifyGameRequest(game_id=game_id), metadata=ADMIN)
    report = json_format.MessageToDict(reply.report)
    assert (reply.valid, reply.chain_valid, reply.first_tampered_position) == (False, False, played)
    assert report["chain"]["findings"][0]["kind"] == "changed"


@pytest.mark.parametrize("seat", [99, -1])
async def test_an_event_edited_to_name_a_seat_the_game_lacks_is_reported_not_followed(
    store: EventStore, database_url: str, game: str, seat: int
) -> None:
    played = await first_of_type(store, game, "CardPlayed", after=12)
    await tamper(
        database_url,
        (
            "UPDATE events SET payload = jsonb_set(payload, '{player}', to_jsonb(%s::int)) "
            "WHERE game_id = %s AND version = %s",
            (seat, game, played),
        ),
    )
    report = await Auditor(store).verify(game, check_projections=False)
    assert not report.valid and report.status is GameStatus.OVER  # as the log says, damaged or not
    assert report.unreadable is not None and report.unreadable.position == played
    assert [(f.position, f.kind) for f in report.chain.findings] == [(played, "changed")]
    assert [r.game_id async for r in Auditor(store).verify_all(check_projections=False)] == [game]


async def test_a_dispute_entry_edited_out_of_shape_is_reported(
    store: EventStore, database_url: str, game: str
) -> None:
    auditor = Auditor(store)
    await auditor.file_dispute(
        game,
        seat=0,
        kind=DisputeKind.UNO_CATCH,
        position=5,
        by=None,
        target=1,
        claim="caught too late",
        command_id="dispute-1",
        request_hash=b"file",
    )
    filed_at = await store.stream_version(game)
    await tamper(
        database_url,
        (
            "UPDATE events SET payload = payload - 'claim' WHERE game_id = %s AND version = %s",
            (game, filed_at),
        ),
    )
    report = await auditor.verify(game, check_projections=False)
    assert not report.valid and report.disputes == ()
    assert [e.position for e in report.unreadable_entries] == [filed_at]
    assert [(f.position, f.kind) for f in report.chain.findings] == [(filed_at, "changed")]


async def test_the_audit_service_reports_a_log_that_no_longer_reads_back(
    server: RunningServer, audit: audit_pb2_grpc.AuditServiceStub, database_url: str
) -> None:
    game_id = await store_simulated(server.store, Variant.SONIC, seed=4)
    played = await first_of_type(server.store, game_id, "CardPlayed", after=8)
    await tamper(
        database_url,
        (
            "UPDATE events SET payload = jsonb_set(payload, '{card}', '\"??\"') "
            "WHERE game_id = %s AND version = %s",
            (game_id, played),
        ),
    )
    reply = await audit.VerifyGame(apb.VerifyGameRequest(game_id=game_id), metadata=ADMIN)
    report = json_format.MessageToDict(reply.report)
    assert (reply.valid, reply.first_tampered_position, reply.diverged_at) == (False, played, 0)
    assert report["unreadable"]["position"] == played
