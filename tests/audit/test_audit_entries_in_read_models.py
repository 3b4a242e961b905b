"""The audit trail lives in the games' streams but is not part of any game: the projector, a rebuild and
the command handler step over disputes, rulings, seed reveals and imported records."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

from projections import Projector, check_game
from projections.migrate import apply_migrations
from projections.rebuild import rebuild
from service.app.auditor import Auditor
from service.audit.game_report import ProjectionCheck
from service.domain.entries import DisputeKind
from service.rules.options import Variant
from service.store import EventStore
from tests.projections.projection_support import dump, wait_readable

from .support import store_simulated

RECORD = Path(__file__).parent.parent / "data" / "records" / "classic_uno_catch.jsonl"


async def test_the_read_models_step_over_the_audit_trail(store: EventStore, database_url: str) -> None:
    auditor = Auditor(store, check_game)
    live = await store_simulated(store, Variant.ATTACK, seed=4)
    dispute = await auditor.file_dispute(
        live,
        seat=1,
        kind=DisputeKind.UNO_CATCH,
        position=10,
        by=None,
        target=0,
        claim="I called it",
        command_id=str(uuid.uuid4()),
        request_hash=b"file",
    )
    await auditor.rule_on_dispute(
        live, dispute.filed.dispute_id, note="", command_id=str(uuid.uuid4()), request_hash=b"rule"
    )
    text = RECORD.read_text(encoding="utf-8")
    await auditor.import_record(
        text,
        tournament_id="",
        seat_token_hashes=lambda n: [hashlib.sha256(bytes([i])).digest() for i in range(n)],
        command_id=str(uuid.uuid4()),
        request_hash=b"import",
    )

    await apply_migrations(database_url)
    await wait_readable(store)  # a transaction of another test's database may hold the horizon back
    async with await Projector.open(database_url) as projector:
        await projector.catch_up()
    assert await check_game(store, live) == []
    followed = await dump(database_url)
    await rebuild(database_url, workers=1)
    assert await dump(database_url) == followed  # a rebuild from zero agrees with the live projector

    report = await auditor.verify(live)
    assert report.valid and report.projections == ProjectionCheck(())
    assert [d.ruling is not None for d in report.disputes] == [True]
