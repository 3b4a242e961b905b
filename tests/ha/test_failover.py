"""A short failover run in the full tier: bench/failover.py's short plan (a minute of bot load with a
``kill -9`` of the primary's postmaster followed at once by a switchover, a switchover, a stop of the
secondary and a postmaster kill) on deploy/ha/'s cluster, ``serve --require-sync-standby``, every ack
judged, ``verify --all`` through the standby and on a restored base backup. It needs pg_auto_failover
and skips with the reason without it; the verdict and the gaps are checked here without a cluster.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ and deploy/ are not installed packages
    sys.path.insert(0, str(ROOT))

from bench.chaos import render  # noqa: E402
from bench.failover import (  # noqa: E402
    FAULTS,
    SHORT,
    Acked,
    FailoverPlan,
    Fault,
    Stored,
    judge,
    longest_gaps,
    run_failover,
    sequence_counts,
)
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
    assert figures["require_sync_standby"] is True
    assert figures["faults"] == {kind: int(kind in SHORT.faults()) for kind in FAULTS}
    assert figures["faults"]["kill-then-switchover"] == 1  # a back-to-back sequence
    assert figures["failovers"] >= 2  # the two switchovers at least
    assert figures["acknowledgements"] > 0 and figures["creations_acknowledged"] > 0
    assert (figures["lost"], figures["duplicated"], figures["at_a_different_version"]) == (0, 0, 0)
    assert (figures["internal"], figures["unknown"], figures["unavailable_without_retry_info"]) == (0, 0, 0)
    assert figures["other_statuses"] == {}
    assert figures["games_invalid"] == 0
    assert figures["read_model_differences"] == 0
    assert max(max(gaps) for gaps in figures["longest_gap_s"].values()) < 30
    # Reads through the standby, and a base backup restored as a lone server: every game there, valid.
    assert figures["standby_verify"]["games"] > 0 and figures["standby_verify"]["invalid"] == 0
    assert figures["restore"]["games"] == figures["standby_verify"]["games"]
    assert figures["restore"]["invalid"] == 0


def _ack(command: str, first: int | None, last: int | None, method: str = "Play") -> Acked:
    return Acked(0.0, "g1", command, method, first, last)


def test_every_ack_is_judged_lost_duplicated_or_at_another_version() -> None:
    ledger = {
        ("g1", "create"): Stored(1, 3, 3, 1, 3),
        ("g1", "kept"): Stored(4, 5, 2, 4, 5),
        ("g1", "twice"): Stored(6, 6, 2, 6, 7),
        ("g1", "moved"): Stored(8, 8, 1, 8, 8),
        ("g1", "retried"): Stored(9, 9, 1, 9, 9),
    }
    acks = [
        _ack("create", 1, 3, "CreateGame"),
        _ack("kept", 4, 5),
        _ack("twice", 6, 6),
        _ack("moved", 7, 7),  # the reply named version 7: the log has it at 8
        _ack("gone", 10, 10),  # acknowledged, then rewound away
        _ack("retried", None, None, "CreateGame"),  # ALREADY_EXISTS on a retry: present is enough
    ]
    verdict = judge(acks, ledger)
    assert (verdict.acknowledgements, verdict.creations) == (6, 2)
    assert (verdict.lost, verdict.duplicated, verdict.other_version) == (1, 1, 1)
    assert [problem.split(":")[0] for problem in verdict.problems] == [
        "duplicated",
        "at a different version",
        "lost",
    ]
    assert judge(acks[:2], ledger).problems == []


def test_the_time_to_serve_again_is_the_longest_gap_until_the_next_fault() -> None:
    faults = [Fault("postmaster", 10.0), Fault("switchover", 30.0), Fault("node", 50.0)]
    # The first ack after the postmaster kill comes at once, its long silence later in its window; the
    # switchover's window has no ack at all; the node's runs to the end of the load.
    acks = [9.5, 10.1, 10.2, 18.2, 18.3, 25.0, 29.95, 52.0, 53.0, 59.9]
    longest_gaps(faults, acks, ended=60.0)
    assert [(f.first_ack_s, f.longest_gap_s, f.acks_in_window) for f in faults] == [
        (0.1, 8.0, 6),
        (None, 20.0, 0),  # silent to its window's end
        (2.0, 6.9, 3),
    ]


def test_the_sequences_are_spread_and_the_order_is_the_seeds() -> None:
    assert sequence_counts(7) == {
        "kill-then-switchover": 2,
        "switchover-twice": 2,
        "node-kill-in-switchover": 1,
        "standby-stop-in-promotion": 1,
        "switchover-at-standby-return": 1,
    }
    plan = FailoverPlan(seed=5, kills=0, projector_kills=0)
    assert plan.faults() == FailoverPlan(seed=5, kills=0, projector_kills=0).faults()
    assert sorted(plan.faults()) == sorted(kind for kind, n in plan.counts().items() for _ in range(n))
    assert "kill-then-switchover" in SHORT.faults()
