"""A short failover run in the full tier: bench/failover.py's short plan (a minute of bot load with a
switchover, a stop of the secondary and a ``kill -9`` of the primary's postmaster) on deploy/ha/'s cluster,
with its checks, ``verify --all`` through the standby and on a restored base backup. It needs
pg_auto_failover (Debian: pg-auto-failover-cli, postgresql-15-auto-failover) and skips with the reason
when they are missing; the long run and its figures are docs/HA.md's.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ and deploy/ are not installed packages
    sys.path.insert(0, str(ROOT))

from bench.chaos import render  # noqa: E402
from bench.failover import SHORT, run_failover  # noqa: E402
from deploy.ha.cluster import available  # noqa: E402
from tests import tiers  # noqa: E402

_missing = available()


@pytest.mark.skipif(_missing is not None, reason=f"no HA PostgreSQL here: {_missing}")
@pytest.mark.timeout(420)  # a minute of load, the cluster's start and the checks; a loaded CI is slow
async def test_failover_under_load_loses_nothing() -> None:
    tiers.full_only("the failover run")
    report = await run_failover(SHORT)
    figures = report.figures
    assert report.passed, render(report)
    assert figures["faults"] == {"postmaster": 1, "node": 0, "switchover": 1, "secondary": 1}
    assert figures["failovers"] >= 1  # the switchover at least
    assert figures["commands_acknowledged"] > 0
    assert (figures["lost"], figures["duplicated"], figures["unknown"]) == (0, 0, 0)
    assert figures["unavailable_without_retry_info"] == 0
    assert figures["other_statuses"] == {}
    assert figures["games_invalid"] == 0
    assert figures["read_model_differences"] == 0
    assert max(max(seconds, default=0.0) for seconds in figures["seconds_to_serving"].values()) < 30
    # Reads through the standby, and a base backup restored as a lone server: every game there, valid.
    assert figures["standby_verify"]["games"] > 0 and figures["standby_verify"]["invalid"] == 0
    assert figures["restore"]["games"] == figures["standby_verify"]["games"]
    assert figures["restore"]["invalid"] == 0
