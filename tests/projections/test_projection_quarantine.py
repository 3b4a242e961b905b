"""One bad input cannot stop the read models: free text of any length fits their keys, and a game whose
events cannot be folded is quarantined, reported, and left out while every other game projects."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from projection_support import GAME_SPECS, Stored, dump, expected_views, simulate, store_game

from projections import Projector, queries, rebuild
from projections.migrate import apply_migrations
from projections.quarantine import REASON_LIMIT, Cause, ProjectionHealth, read_health
from projections.source import connect
from service.rules.options import Variant
from service.store import EventStore

pytestmark = pytest.mark.timeout(180)

PER_GAME = ("hands", "tables", "round_scores", "match_scores")
#: 100,000 characters that do not compress (an index entry is compressed before it is measured against
#: the btree's limit of about 2,700 bytes, so a run of one letter would fit).
LONG_NAME = "Ω" + hashlib.shake_256(b"a long name").hexdigest(50_000)[1:]


async def _health(url: str) -> ProjectionHealth:
    async with await connect(url) as conn:
        return await read_health(conn, "main")


async def _projector(url: str, **options: Any) -> Projector:
    await apply_migrations(url)
    return await Projector.open(url, **options)


async def _tamper(url: str, game_id: str, version: int, payload: dict[str, Any]) -> None:
    """As the superuser, with the log's row triggers off: replace one event's payload."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await conn.execute("ALTER TABLE events DISABLE TRIGGER USER")
        await conn.execute(
            "UPDATE events SET payload = %s::jsonb WHERE game_id = %s AND version = %s",
            (json.dumps(payload), game_id, version),
        )
        await conn.execute("ALTER TABLE events ENABLE TRIGGER USER")
        await conn.commit()


async def _payload(url: str, game_id: str, version: int) -> tuple[str, dict[str, Any]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT type, payload FROM events WHERE game_id = %s AND version = %s", (game_id, version)
        )
        row = await cursor.fetchone()
    assert row is not None
    return row[0], row[1]


async def _quarantine_rows(url: str) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT q.game_id, q.version, q.cause, q.position = e.position FROM projection_quarantine q "
            "JOIN events e ON e.game_id = q.game_id AND e.version = q.version ORDER BY q.game_id"
        )
        return await cursor.fetchall()


def _of_games(views: dict[str, list[Any]], games: Sequence[Stored]) -> dict[str, list[Any]]:
    """The per-game tables' rows of ``games``, and the aggregates' rows of their players."""
    ids = {stored.game_id for stored in games}
    names = {name for stored in games for name in stored.names}
    out = {view: [row for row in views[view] if row[0] in ids] for view in PER_GAME}
    out["standings"] = [row for row in views["standings"] if row[1] in names]
    out["player_stats"] = [row for row in views["player_stats"] if row[0] in names]
    return out


def _table_version(views: dict[str, list[Any]], game_id: str) -> int:
    return next(row[11] for row in views["tables"] if row[0] == game_id)


# --- keys that fit any value -------------------------------------------------------------------------------


async def test_a_player_name_of_100000_characters_is_projected_and_rebuilt(
    store: EventStore, database_url: str
) -> None:
    """Stored straight through the store (no API limit in the way), in a tournament, so that the name is
    part of both aggregates' keys; before the keys were hashed every batch failed on it."""
    plain = await store_game(store, "plain", simulate(Variant.CLASSIC, 3, 1), tournament_id="cup")
    game = simulate(Variant.SONIC, 3, 2)
    long = await store_game(store, "long", game, tournament_id="cup", players=(LONG_NAME, "p2", "p3"))
    expected = expected_views([plain, long])
    assert len(LONG_NAME) == 100_000 and any(row[0] == LONG_NAME for row in expected["player_stats"])

    async with await _projector(database_url, batch_size=100) as projector:
        assert await projector.catch_up() == len(plain.game.events) + len(game.events)
    assert await dump(database_url) == expected
    health = await _health(database_url)
    assert (health.quarantined_total, health.failing, health.serving(5.0)) == (0, None, True)
    table = await queries.standings(store, "cup")
    assert LONG_NAME in {row.player for row in table.rows}
    scores = await queries.scores(store, "long")
    assert scores is not None and scores.seats[0].player == LONG_NAME

    for workers in (1, 2):
        report = await rebuild(database_url, workers=workers)
        assert report.quarantined == []
        assert await dump(database_url) == expected


# --- quarantine by the projector ---------------------------------------------------------------------------


def _edit(kind: str, payload: dict[str, Any]) -> tuple[dict[str, Any], Cause]:
    """An edit of an event's payload that the read models cannot take, and the cause it must be given."""
    if kind == "decode":
        return {**payload, "card": "not a card"}, Cause.DECODE
    if kind == "fold":
        return {**payload, "player": 10}, Cause.FOLD  # a seat the game does not have
    return {**payload, "points": 2**40}, Cause.WRITE  # past round_scores.points (int): the database refuses


@dataclass(frozen=True, slots=True)
class Poisoned:
    """A game stored before, and the first commands of a bad game with one event edited."""

    before: Stored
    bad: Stored
    version: int
    """The version of the edited event."""
    cause: Cause
    """What the edit must be quarantined as."""
    original: dict[str, Any]
    """The edited event's payload as it was."""
    commands: int
    """How many of the bad game's commands are stored."""
    events: int
    """How many of its events are."""


async def _poisoned(store: EventStore, url: str, kind: str) -> Poisoned:
    """Store a game ``before``, then the first commands of a game ``bad`` (players q1…) with one event
    edited: a CardPlayed, or for ``write`` a RoundEnded."""
    before = await store_game(store, "before", simulate(*GAME_SPECS[0]), tournament_id="t0")
    game = simulate(Variant.CLASSIC, 3, 5, target_score=250)  # a second round after the first RoundEnded
    wanted = "RoundEnded" if kind == "write" else "CardPlayed"
    version = next(i for i, event in enumerate(game.events, 1) if type(event).__name__ == wanted and i > 10)
    commands, events = 0, 1  # GameCreated, then the events of each command stored
    while events < version + 5:
        events += len(game.steps[commands][1])
        commands += 1
    assert commands < len(game.steps)
    bad = await store_game(
        store, "bad", game, tournament_id="t0", steps=slice(0, commands), players=("q1", "q2", "q3")
    )
    event_type, payload = await _payload(url, "bad", version)
    assert event_type == wanted
    edited, cause = _edit(kind, payload)
    await _tamper(url, "bad", version, edited)
    return Poisoned(before, bad, version, cause, payload, commands, events)


@pytest.mark.parametrize("kind", ["decode", "fold", "write"])
async def test_a_game_that_cannot_be_folded_is_quarantined_while_every_other_game_projects(
    store: EventStore, database_url: str, kind: str
) -> None:
    poisoned = await _poisoned(store, database_url, kind)
    before, bad, version, cause = poisoned.before, poisoned.bad, poisoned.version, poisoned.cause
    async with await _projector(database_url, batch_size=40) as projector:
        # Every event is read and the checkpoint moves past all of them, the bad game's later ones too.
        assert await projector.catch_up() == len(before.game.events) + poisoned.events
    [(game_id, at, recorded_cause, position_matches)] = await _quarantine_rows(database_url)
    assert (game_id, recorded_cause, position_matches) == ("bad", cause.value, True)
    health = await _health(database_url)
    assert health.quarantined_total == 1 and not health.serving(5.0) and health.failing is None
    assert health.lag.events_behind == 0  # nothing waits behind the bad game
    [reported] = health.quarantined
    assert reported.game_id == "bad" and reported.cause is cause and 0 < len(reported.reason) <= REASON_LIMIT
    if cause is Cause.WRITE:
        assert at <= version and "NumericValueOutOfRange" in reported.reason  # the batch's rows unwritten
    else:
        assert at == version and f"version {version}" in reported.reason
    live = await dump(database_url)
    assert _table_version(live, "bad") == at - 1  # the views hold the game exactly below the version
    assert _of_games(live, [before]) == expected_views([before])

    # The rest of the bad game and a game created after it, projected by a new process: the bad game's
    # events are skipped (it stays where it was), the new game is projected completely.
    await store_game(store, "bad", bad.game, steps=slice(poisoned.commands, None))
    after = await store_game(store, "after", simulate(*GAME_SPECS[1]), tournament_id="t1")
    async with await _projector(database_url, batch_size=40) as projector:
        await projector.catch_up()
    live = await dump(database_url)
    assert _table_version(live, "bad") == at - 1
    assert _of_games(live, [before, after]) == expected_views([before, after])
    assert [row[:3] for row in await _quarantine_rows(database_url)] == [("bad", at, cause.value)]
    assert (await _health(database_url)).lag.events_behind == 0

    # A rebuild of everything meets the same game: same report, and (but for rows the database refused,
    # which depend on where its flushes fall) the same tables.
    for workers in (1, 2):
        report = await rebuild(database_url, workers=workers)
        assert [(q.game_id, q.cause) for q in report.quarantined] == [("bad", cause)]
        assert json.loads(json.dumps(report.to_json()))["quarantined"][0]["game_id"] == "bad"
        rebuilt = await dump(database_url)
        assert _of_games(rebuilt, [before, after]) == expected_views([before, after])
        if cause is not Cause.WRITE:
            assert rebuilt == live
            assert [row[:3] for row in await _quarantine_rows(database_url)] == [("bad", at, cause.value)]
    # A rebuild of one view leaves the bad game out exactly as the live views do.
    await rebuild(database_url, "standings", workers=1)
    assert await dump(database_url) == rebuilt


async def test_a_full_rebuild_lifts_a_quarantine_once_the_game_folds_again(
    store: EventStore, database_url: str
) -> None:
    poisoned = await _poisoned(store, database_url, "decode")
    await store_game(store, "bad", poisoned.bad.game, steps=slice(poisoned.commands, None))
    async with await _projector(database_url, batch_size=40) as projector:
        await projector.catch_up()
    assert (await _health(database_url)).quarantined_total == 1
    await _tamper(database_url, "bad", poisoned.version, poisoned.original)  # the log restored

    await rebuild(database_url, "hands", workers=1)  # some views: the live quarantine stands
    assert [row[0] for row in await _quarantine_rows(database_url)] == ["bad"]
    report = await rebuild(database_url, workers=1)
    assert report.quarantined == [] and await _quarantine_rows(database_url) == []
    health = await _health(database_url)
    assert (health.quarantined_total, health.serving(5.0)) == (0, True)
    assert await dump(database_url) == expected_views([poisoned.before, poisoned.bad])
    after = await store_game(store, "after", simulate(*GAME_SPECS[2]))
    async with await _projector(database_url) as projector:
        await projector.catch_up()
    assert await dump(database_url) == expected_views([poisoned.before, poisoned.bad, after])


async def test_a_rebuild_of_a_log_never_projected_quarantines_what_it_cannot_fold(
    store: EventStore, database_url: str
) -> None:
    poisoned = await _poisoned(store, database_url, "fold")
    after = await store_game(store, "after", simulate(*GAME_SPECS[3]), tournament_id="t1")
    report = await rebuild(database_url, workers=2)
    assert report.moved_checkpoint
    assert [(q.game_id, q.version, q.cause) for q in report.quarantined] == [
        ("bad", poisoned.version, Cause.FOLD)
    ]
    assert [row[:3] for row in await _quarantine_rows(database_url)] == [("bad", poisoned.version, "fold")]
    rebuilt = await dump(database_url)
    assert _of_games(rebuilt, [poisoned.before, after]) == expected_views([poisoned.before, after])
    assert _table_version(rebuilt, "bad") == poisoned.version - 1
    # The live projector takes over from the rebuild's checkpoint and keeps the game out.
    async with await _projector(database_url) as projector:
        assert await projector.catch_up() == 0
    assert await dump(database_url) == rebuilt


async def test_a_projector_that_cannot_make_progress_says_so_until_a_batch_commits(
    store: EventStore, database_url: str
) -> None:
    games = [await store_game(store, "g", simulate(*GAME_SPECS[0]))]
    failures = 2

    async def trouble(stage: str) -> None:
        nonlocal failures
        if stage == "read" and failures:
            failures -= 1
            raise RuntimeError("trouble of the projector's own")

    projector = await _projector(database_url, hook=trouble)
    stop = asyncio.Event()
    task = asyncio.create_task(projector.run(stop, poll_interval=0.05))
    try:
        seen: list[ProjectionHealth] = []
        async with asyncio.timeout(30):
            while not seen or seen[-1].failing is not None or seen[-1].lag.events_behind:
                seen.append(await _health(database_url))
                await asyncio.sleep(0.02)
    finally:
        stop.set()
        await task
        await projector.close()
    failing = [health for health in seen if health.failing is not None]
    assert failing, "the failure was never recorded"
    assert failing[0].failing == "RuntimeError: trouble of the projector's own"
    assert failing[0].failing_since is not None and not failing[0].serving(5.0)
    assert failing[0].quarantined_total == 0
    assert seen[-1].serving(5.0) and seen[-1].failing_since is None
    assert await dump(database_url) == expected_views(games)
