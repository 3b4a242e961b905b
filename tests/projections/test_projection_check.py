"""The consistency check finds a projected row that disagrees with a fold of the game's events."""

from __future__ import annotations

import dataclasses

import psycopg
import pytest
from projection_support import GAME_SPECS, simulate, store_game, store_games, store_house_games

from projections import Projector, check_game
from projections.check import UnfoldableLog, fold_stream
from projections.migrate import apply_migrations
from service.rules.cards import DECKS
from service.rules.options import Variant
from service.store import EventStore, StoredEvent
from tests import golden

pytestmark = pytest.mark.timeout(120)


async def _project(url: str) -> None:
    await apply_migrations(url)
    async with await Projector.open(url) as projector:
        await projector.catch_up()


async def _corrupt(url: str, statement: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(statement.encode())
        assert cursor.rowcount == 1


async def test_consistent_games_have_no_problems(store: EventStore, database_url: str) -> None:
    games = await store_games(store, GAME_SPECS) + await store_house_games(store)
    await _project(database_url)
    for stored in games:
        assert await check_game(store, stored.game_id) == []
    assert await check_game(store, "no-such-game") == []


async def test_a_game_projected_part_way_is_checked_at_its_projected_version(
    store: EventStore, database_url: str
) -> None:
    game = simulate(Variant.ATTACK, 3, 3)
    await store_game(store, "g", game, steps=slice(0, 20))
    await _project(database_url)
    await store_game(store, "g", game, steps=slice(20, None))  # not projected yet
    assert await check_game(store, "g") == []


@pytest.mark.parametrize(
    ("statement", "problem"),
    [
        ("UPDATE hands SET cards = cards || '{R7}' WHERE game_id = 'g0' AND seat = 1", "hands: seat 1"),
        ("UPDATE tables SET top = 'WX', version = version WHERE game_id = 'g0'", "tables: top"),
        ("UPDATE tables SET turn = turn + 1 WHERE game_id = 'g0'", "tables: turn"),
        (
            "UPDATE round_scores SET points = points + 1 WHERE game_id = 'g0' AND round = 1",
            "round_scores: row 0",
        ),
        (
            "UPDATE match_scores SET total = total - 5 WHERE game_id = 'g0' AND seat = 0",
            "match_scores: row 0",
        ),
        ("DELETE FROM hands WHERE game_id = 'g0' AND seat = 2", "hands: seat 2"),
        ("INSERT INTO hands VALUES ('g0', 7, '{}')", "seat 7"),
    ],
)
async def test_a_corrupted_view_row_is_found(
    store: EventStore, database_url: str, statement: str, problem: str
) -> None:
    await store_games(store, GAME_SPECS[:2])
    await _project(database_url)
    assert await check_game(store, "g0") == []
    await _corrupt(database_url, statement)
    problems = await check_game(store, "g0")
    assert problems and any(problem in p for p in problems), problems
    assert await check_game(store, "g1") == []  # the other game is untouched


async def test_a_game_missing_from_the_views_is_found(store: EventStore, database_url: str) -> None:
    await store_games(store, GAME_SPECS[:1])
    await _project(database_url)
    await _corrupt(database_url, "DELETE FROM tables WHERE game_id = 'g0'")
    assert await check_game(store, "g0") == ["game 'g0' is behind the checkpoint but has no tables row"]


async def test_a_stream_handed_in_is_not_read_again_but_read_on_past_its_end(
    store: EventStore, database_url: str
) -> None:
    games = await store_games(store, GAME_SPECS[:1])
    await _project(database_url)
    game_id = games[0].game_id
    rows = await store.read_stream(game_id)
    assert await check_game(store, game_id, stream=rows) == []
    # A stream read before the projection moved on: the events past its end are read, not missed.
    assert await check_game(store, game_id, stream=rows[: len(rows) // 2]) == []


# --- a log edited into nonsense is reported, never a crash ------------------------------------------------


def _edited(rows: list[StoredEvent], at: int, **payload: object) -> list[StoredEvent]:
    """``rows`` with the payload of the row at position ``at`` changed (a superuser's edit)."""
    return [dataclasses.replace(r, payload={**r.payload, **payload}) if r.version == at else r for r in rows]


@pytest.mark.parametrize("variant", list(Variant), ids=lambda v: v.value)
def test_an_edited_log_that_cannot_be_folded_is_reported_at_its_position(variant: Variant) -> None:
    _, rows = golden.read(variant)
    assert fold_stream(rows) is not None  # the log as written folds
    played = next(r for r in rows if r.type == "CardPlayed")
    before = fold_stream([r for r in rows if r.version < played.version])
    assert before is not None
    held = {card.token for card in before.hands[played.payload["player"]]}
    absent = next(card.token for card in DECKS["classic"] if card.token not in held)
    for edit in ({"card": absent}, {"player": 10}):
        with pytest.raises(UnfoldableLog) as caught:
            fold_stream(_edited(rows, played.version, **edit))
        assert caught.value.position == played.version
