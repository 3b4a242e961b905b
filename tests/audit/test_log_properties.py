"""Properties of reading a stored game back as a record (no database: the rows are built in memory the
way the store writes them): every bot game of every rule set verifies valid, with no divergence and no
seed mismatch, and every catch in its log is ruled a penalty at its own position."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from service.app.handler import stored_form
from service.audit.game_report import GameStatus
from service.audit.log import GameLog
from service.audit.stored_game import adjudicate, verify_game
from service.domain.entries import DisputeKind
from service.play.simulate import SimulatedGame, play_game
from service.records.report import Verdict
from service.rules.options import Variant
from service.store import GENESIS_HASH, StoredEvent, chain_hash
from tests.tiers import examples

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def rows_of(game: SimulatedGame, game_id: str = "g") -> list[StoredEvent]:
    """The rows the store would hold: the creation, then each command's events under its command id."""
    batches = [
        ("create", [game.events[0]]),
        *((f"c{i}", list(events)) for i, (_, events) in enumerate(game.steps)),
    ]
    rows: list[StoredEvent] = []
    prev = GENESIS_HASH
    for command_id, events in batches:
        for event in events:
            new = stored_form(event)
            version = len(rows) + 1
            digest = chain_hash(prev, game_id, version, new.type, new.payload)
            rows.append(
                StoredEvent(
                    version,
                    game_id,
                    version,
                    new.type,
                    new.payload,
                    {"command_id": command_id},
                    NOW,
                    1,
                    prev,
                    digest,
                )
            )
            prev = digest
    return rows


@settings(max_examples=examples(25), deadline=None)
@given(st.sampled_from(list(Variant)), st.integers(2, 5), st.integers(0, 2**32))
def test_a_stored_game_reads_back_and_verifies_valid(variant: Variant, players: int, seed: int) -> None:
    game = play_game(variant, players, seed)
    rows = rows_of(game)
    log = GameLog("g", rows, game.state.seed)

    report = verify_game(log)

    assert report.valid, report.to_json()
    assert report.status is GameStatus.OVER
    assert report.seed is not None and report.seed.checked_to == rows[-1].version
    assert report.rules is not None
    assert report.rules.outcome.scores == dict(zip(game.state.players, game.state.scores, strict=True))
    for row in rows:
        if row.type == "UnoCaught":
            found = adjudicate(log, DisputeKind.UNO_CATCH, row.version)
            assert found.recorded and found.ruling.verdict is Verdict.PENALTY, found
