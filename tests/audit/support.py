"""Helpers for the audit tests: bot games written to a real event store as the service writes them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from service.app.auditor import Auditor
from service.domain.entries import DisputeKind
from service.play.simulate import play_game
from service.rules.options import Variant
from service.store import EventStore
from tests.projections.projection_support import store_game


async def store_simulated(store: EventStore, variant: Variant, seed: int, players: int = 3) -> str:
    """A bot game of ``variant`` played in-process and written to ``store`` command by command; its id."""
    game_id = str(uuid.uuid4())
    await store_game(store, game_id, play_game(variant, players, seed))
    return game_id


#: The docs' disputed game: bob catches ann at line 10 (position 11), after her window closed.
DISPUTED = Path(__file__).parents[2] / "docs" / "examples" / "disputed.jsonl"


@dataclass(frozen=True, slots=True)
class RuledDispute:
    """The disputed game imported, and where ann's dispute of the catch was filed and ruled on."""

    game_id: str
    filed_at: int
    ruled_at: int


async def import_and_rule(auditor: Auditor, *, claim: str, note: str) -> RuledDispute:
    """Import :data:`DISPUTED`; ann disputes the catch at position 11 (``claim``) and the adjudicator rules
    on it (``note``), as docs/arbiter.md's walk-through does over gRPC."""
    imported = await auditor.import_record(
        DISPUTED.read_text(),
        tournament_id="",
        seat_token_hashes=lambda count: [bytes([seat]) * 32 for seat in range(count)],
        command_id="import-1",
        request_hash=b"import-1",
    )
    game = imported.game_id
    filed = await auditor.file_dispute(
        game,
        seat=0,
        kind=DisputeKind.UNO_CATCH,
        position=11,
        by=None,
        target=None,
        claim=claim,
        command_id="dispute-1",
        request_hash=b"dispute-1",
    )
    ruled = await auditor.rule_on_dispute(
        game, filed.filed.dispute_id, note=note, command_id="ruling-1", request_hash=b"ruling-1"
    )
    return RuledDispute(game, filed.filed_at, ruled.ruled_at)
