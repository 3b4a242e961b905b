"""The synchronous standby's proof on a real pg_auto_failover cluster (deploy/ha/).

With the standby in the quorum, commands are acknowledged. With the standby stopped, the monitor assigns
the primary ``wait_primary`` and turns synchronous replication off: PostgreSQL then commits alone, and
the guard refuses every acknowledgement (NotReplicated) rather than answer a commit a failover could
lose. When the standby is back, the same command ids are answered, once, from what was committed.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # deploy/ is not an installed package
    sys.path.insert(0, str(ROOT))

from deploy.ha.cluster import Cluster, available  # noqa: E402
from service.store import EventStore, NotReplicated, apply_migrations  # noqa: E402
from service.store.migrate import SERVICE_LOGIN, ensure_service_login  # noqa: E402
from tests import tiers  # noqa: E402
from tests.store.support import new_game, played, request_hash  # noqa: E402

_missing = available()


async def _play(store: EventStore, version: int, command: str) -> object:
    return await store.append(
        "g1", version, [played(version)], command_id=command, request_hash=request_hash(command), metadata={}
    )


def _wait(done: object, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if done():  # type: ignore[operator]
            return
        time.sleep(0.5)
    raise AssertionError(f"{what} within {seconds} s")


@pytest.mark.skipif(_missing is not None, reason=f"no HA PostgreSQL here: {_missing}")
@pytest.mark.timeout(300)
async def test_a_primary_without_its_standby_acknowledges_nothing() -> None:
    tiers.full_only("the HA cluster")
    workdir = Path(tempfile.mkdtemp(prefix="uno-sync-guard-"))
    workdir.chmod(0o755)  # the cluster's folder inside it belongs to the postgres user when we are root
    cluster = Cluster(workdir / "ha")
    try:
        await asyncio.to_thread(cluster.start)
        primary, secondary = cluster.wait_healthy()
        await apply_migrations(cluster.dsn())
        await ensure_service_login(cluster.dsn())
        async with await psycopg.AsyncConnection.connect(cluster.dsn(), autocommit=True) as conn:
            await conn.execute(f"GRANT pg_read_all_stats TO {SERVICE_LOGIN}")
        store = await EventStore.open(cluster.dsn(SERVICE_LOGIN), max_size=4, require_sync_standby=True)
        try:
            created = await new_game(store, "g1")
            first = await _play(store, created.last_version, "c1")  # the standby holds it: acknowledged

            await asyncio.to_thread(cluster.stop_node, secondary)
            _wait(lambda: cluster._in("wait_primary") == primary, 60, "the primary did not run alone")
            refused = 0
            for attempt in range(3):  # the first run and its retries with the same command id
                try:
                    await _play(store, first.last_version, "c2")  # type: ignore[attr-defined]
                except NotReplicated:
                    refused += 1
                await asyncio.sleep(0.2 * attempt)
            assert refused == 3, "a commit made while the primary ran alone was acknowledged"
            stored = await store.read_stream("g1")
            assert len(stored) == 3  # committed once, here, and not acknowledged

            await asyncio.to_thread(cluster.run_node, secondary)
            await asyncio.to_thread(cluster.wait_healthy, 120)
            answered = await _play(store, first.last_version, "c2")  # type: ignore[attr-defined]
            assert answered.duplicate and answered.last_version == 3  # type: ignore[attr-defined]
            assert len(await store.read_stream("g1")) == 3
        finally:
            await store.close()
    finally:
        await asyncio.to_thread(cluster.stop)
        shutil.rmtree(workdir, ignore_errors=True)
