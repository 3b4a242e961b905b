"""``Auditor.verify_many`` (and ``verify_all``, which runs it page by page): each game read while the one
before is verified, the games sharing their parsed payloads and decoded events, and every report the one
``Auditor.verify`` gives of the game alone, in the order asked; a game it cannot verify is ``Unverified``
and the others are verified all the same."""

from __future__ import annotations

import asyncio
import uuid

from service.app.auditor import Auditor
from service.audit.game_report import GameReport, Unverified
from service.rules.options import Variant
from service.store import EventStore

from .support import store_simulated
from .test_tamper import tamper


async def test_many_games_report_as_each_alone_in_order(store: EventStore, database_url: str) -> None:
    games = [await store_simulated(store, variant, seed=seed) for seed in (1, 2) for variant in Variant]
    played = next(row for row in await store.read_stream(games[2]) if row.type == "CardPlayed")
    await tamper(
        database_url,
        ("UPDATE events SET payload = '[]' WHERE game_id = %s AND version = %s", (games[2], played.version)),
    )
    unknown = str(uuid.uuid4())
    asked = [*games[:3], unknown, *games[3:], games[0]]  # a game twice: read from the shared cache again
    auditor = Auditor(store)

    reports = [report async for report in auditor.verify_many(asked, check_projections=False)]

    assert [report.game_id for report in reports] == asked
    for game_id, report in zip(asked, reports, strict=True):
        if game_id == unknown:
            assert isinstance(report, Unverified) and "no game" in report.error
            continue
        assert isinstance(report, GameReport)
        alone = await auditor.verify(game_id, check_projections=False)
        assert report.to_json() == alone.to_json()
        assert report.valid is (game_id != games[2])
    assert [report async for report in auditor.verify_many([], check_projections=False)] == []


async def test_verify_all_reports_every_game_across_pages(store: EventStore) -> None:
    games = [await store_simulated(store, Variant.SONIC, seed=seed) for seed in range(5)]
    auditor = Auditor(store)

    reports = [report async for report in auditor.verify_all(check_projections=False, page=2)]

    assert sorted(report.game_id for report in reports) == sorted(games)
    for report in reports:
        assert isinstance(report, GameReport) and report.valid
        assert report.to_json() == (await auditor.verify(report.game_id, check_projections=False)).to_json()


async def test_a_reader_that_stops_early_leaves_nothing_running(store: EventStore) -> None:
    games = [await store_simulated(store, Variant.CLASSIC, seed=seed) for seed in range(3)]
    reports = Auditor(store).verify_many(games, check_projections=False)

    first = await anext(reports)
    await reports.aclose()

    assert first.game_id == games[0]
    reading = [t for t in asyncio.all_tasks() if getattr(t.get_coro(), "__qualname__", "") == "Auditor._read"]
    assert all(task.done() or task.cancelling() for task in reading)  # the game read ahead: cancelled
    if reading:
        await asyncio.wait(reading, timeout=30)
    assert all(task.done() for task in reading)
