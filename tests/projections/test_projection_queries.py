"""Reads of the views: the values, reading one's own write, and a bounded wait that reports the lag."""

from __future__ import annotations

import asyncio

import pytest
from projection_support import GAME_SPECS, expected_stats, simulate, store_game, store_games
from psycopg_pool import AsyncConnectionPool

from projections import ProjectionLag, Projector, hand, scores, standings
from projections.migrate import apply_migrations
from service.rules.options import Variant
from service.store import EventStore, cursor_of

pytestmark = pytest.mark.timeout(120)


async def test_reads_return_the_projected_values(store: EventStore, database_url: str) -> None:
    games = await store_games(store, GAME_SPECS[:4])
    await apply_migrations(database_url)
    async with await Projector.open(database_url) as projector:
        await projector.catch_up()
    first = games[0]
    state = first.game.state

    got = await scores(store, first.game_id)
    assert got is not None
    assert got.version == len(first.game.events) and got.status == "over"
    assert [(s.seat, s.player, s.total) for s in got.seats] == list(
        zip(range(len(state.players)), state.players, state.scores, strict=True)
    )
    assert [(r.round, r.winner, r.points) for r in got.rounds] == [
        (r.round, r.winner, r.points) for r in state.results
    ]
    assert got.rounds[0].hands == tuple(tuple(c.token for c in h) for h in state.results[0].hands)

    for seat, cards in enumerate(state.hands):
        held = await hand(store, first.game_id, seat)
        assert held is not None and held.cards == tuple(c.token for c in cards)
    assert await hand(store, first.game_id, 9) is None
    assert await scores(store, "no-such-game") is None
    assert await hand(store, "no-such-game", 0) is None

    table = await standings(store, "t0")
    assert table.cursor == projector.cursor
    in_t0 = [s for s in games if s.tournament_id == "t0"]
    wins = sum(row.wins for row in table.rows)
    assert wins == len(in_t0)
    games_played = {row.player: row.games for row in table.rows}
    expected_played: dict[str, int] = {}
    for stored in in_t0:
        for name in stored.game.state.players:
            expected_played[name] = expected_played.get(name, 0) + 1
    assert games_played == expected_played
    assert [r.wins for r in table.rows] == sorted((r.wins for r in table.rows), reverse=True)
    assert (await standings(store, "no-such-tournament")).rows == ()
    totals = {row.player: row.challenges_won + row.challenges_lost for row in table.rows}
    counted: dict[str, int] = {}
    for stored in in_t0:
        for seat, stats in enumerate(expected_stats(stored.game)):
            name = stored.game.state.players[seat]
            counted[name] = counted.get(name, 0) + stats[6] + stats[7]
    assert totals == counted


async def test_a_read_with_a_minimum_waits_for_the_projector(store: EventStore, database_url: str) -> None:
    await apply_migrations(database_url)
    game = simulate(Variant.CLASSIC, 3, 1)
    half = len(game.steps) // 2
    await store_game(store, "g", game, tournament_id="cup", steps=slice(0, half))
    async with await Projector.open(database_url) as projector:
        await projector.catch_up()
        stored = await store_game(store, "g", game, tournament_id="cup", steps=slice(half, None))
        version = len(stored.game.events)
        last = (await store.read_stream("g", version - 1))[-1]

        async def project_soon() -> None:
            await asyncio.sleep(0.3)
            await projector.catch_up()

        later = asyncio.create_task(project_soon())
        got = await scores(store, "g", min_version=version)
        held = await hand(store, "g", 0, min_version=version)
        table = await standings(store, "cup", min_cursor=cursor_of(last))
        await later
    assert got is not None and got.version == version
    assert held is not None and held.version == version
    assert table.cursor >= cursor_of(last) and sum(r.wins for r in table.rows) == 1


async def test_a_read_that_waits_too_long_raises_projection_lag(store: EventStore, database_url: str) -> None:
    await apply_migrations(database_url)
    games = await store_games(store, GAME_SPECS[:1])
    total = len(games[0].game.events)
    async with AsyncConnectionPool(database_url, min_size=1, max_size=2, open=False) as pool:
        with pytest.raises(ProjectionLag) as lagging:
            await scores(pool, games[0].game_id, min_version=total, timeout=0.2)
        assert lagging.value.lag.events_behind == total
        assert lagging.value.wanted == total and lagging.value.have == 0
        last = (await store.read_stream(games[0].game_id))[-1]
        with pytest.raises(ProjectionLag, match="not yet at"):
            await standings(pool, "t0", min_cursor=cursor_of(last), timeout=0.1)
        with pytest.raises(ProjectionLag):
            await hand(pool, games[0].game_id, 0, min_version=1, timeout=0.0)
