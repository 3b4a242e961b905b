"""Failover: bots play over gRPC against ``serve`` on the highly available database of deploy/ha/ while
its primary's postmaster is killed, the primary's whole node is killed, the roles are switched over and the
secondary is stopped; then bench/chaos.py's checks run (ledger exactly once, verify --all, a rebuild).

    python bench/failover.py [--short] [--seconds 240] [--postmaster-kills 2] [--node-kills 1]
                             [--switchovers 2] [--secondary-stops 1] [--concurrency 8] [--seed 0] [--json]

Besides chaos's figures it prints the failovers seen (the primary changed), the seconds from each fault
to the next acknowledged command, and how many UNAVAILABLE replies lacked ``RetryInfo`` (must be 0).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402
from google.rpc import error_details_pb2  # noqa: E402
from grpc_status import rpc_status  # noqa: E402

from bench.chaos import (  # noqa: E402
    OWNER,
    Chaos,
    Plan,
    RecordingTable,
    Reply,
    Report,
    Stopped,
    _say,
    render,
    verify_all,
    wait_serving,
)
from deploy.ha.cluster import DATABASE, Cluster, available, restore, stop_restored  # noqa: E402
from service.client.bots import Metadata  # noqa: E402
from service.rules.options import Variant  # noqa: E402
from service.store.migrate import SERVICE_LOGIN  # noqa: E402

FAULTS = ("postmaster", "node", "switchover", "secondary")


@dataclass(frozen=True, slots=True)
class FailoverPlan(Plan):
    """chaos's plan with the database faults of an HA cluster instead of its own."""

    postmaster_kills: int = 2
    node_kills: int = 1
    switchovers: int = 2
    secondary_stops: int = 1
    #: How long a stopped secondary stays away (the primary commits alone once the monitor says so).
    secondary_outage: float = 8.0

    def faults(self) -> list[str]:
        faults = ["postmaster"] * self.postmaster_kills + ["node"] * self.node_kills
        faults += ["switchover"] * self.switchovers + ["secondary"] * self.secondary_stops
        faults += ["serve"] * self.kills + ["projector"] * self.projector_kills
        random.Random(self.seed).shuffle(faults)
        return faults


SHORT = FailoverPlan(
    seconds=60.0, kills=0, projector_kills=0, restarts=0, concurrency=4, seed=3,
    postmaster_kills=1, node_kills=0, switchovers=1, secondary_stops=1, secondary_outage=6.0,
)  # fmt: skip


class ClusterDatabase:
    """What :class:`bench.chaos.Chaos` asks of its database, answered by the HA cluster."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.running = True

    def url(self, user: str = OWNER, dbname: str = DATABASE) -> str:
        return self.cluster.dsn(user)

    def destroy(self) -> None:
        self.cluster.stop()


def has_retry_info(error: grpc.aio.AioRpcError) -> bool:
    try:
        status = rpc_status.from_call(error)
    except ValueError:
        return False
    return any(
        detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR)
        for detail in (status.details if status is not None else ())
    )


class CheckedTable(RecordingTable):
    """chaos's recording table that also counts UNAVAILABLE replies without ``RetryInfo``."""

    bare: ClassVar[Counter[str]] = Counter()

    async def call(
        self, rpc: Callable[..., Awaitable[Reply]], request: object, metadata: Metadata = ()
    ) -> Reply:
        async def checked(sent: object, *, metadata: Metadata, timeout: float) -> Reply:
            try:
                return await rpc(sent, metadata=metadata, timeout=timeout)
            except grpc.aio.AioRpcError as error:
                if error.code() is grpc.StatusCode.UNAVAILABLE and not has_retry_info(error):
                    CheckedTable.bare[str(error.details())[:120]] += 1
                raise

        return await super().call(checked, request, metadata)


class Failover(Chaos):
    """One run of :class:`bench.chaos.Chaos` on the HA cluster, with the faults of :class:`FailoverPlan`."""

    plan: FailoverPlan

    def __init__(self, plan: FailoverPlan, workdir: Path) -> None:
        super().__init__(plan, workdir)
        self.cluster = Cluster(workdir / "ha")
        self.postgres = ClusterDatabase(self.cluster)  # type: ignore[assignment]
        for child in (self.serve, self.projector):
            child.args[child.args.index("--database-url") + 1] = self.cluster.dsn(SERVICE_LOGIN)
        self.timeline = 0
        self.failovers: list[tuple[str, str, str]] = []  # (fault, primary before, primary after)
        self.to_serving: dict[str, list[float]] = {kind: [] for kind in FAULTS}
        CheckedTable.bare.clear()

    async def _set_up(self) -> None:
        await asyncio.to_thread(self.cluster.start)
        self.serve.args[self.serve.args.index("--database-url") + 1] = self.cluster.dsn(SERVICE_LOGIN)
        self.projector.args[self.projector.args.index("--database-url") + 1] = self.cluster.dsn(SERVICE_LOGIN)
        migrate = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "service.cli", "migrate", "--database-url", self.cluster.dsn()],
            cwd=ROOT, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if migrate.returncode != 0:
            raise RuntimeError(f"uno-audit migrate failed: {migrate.stderr.strip()}")
        self.serve.start()
        self.projector.start()
        if not await wait_serving(self.address, time.monotonic() + 60):
            raise RuntimeError(f"uno-audit serve did not start: {self.serve.tail()}")
        self.timeline = await asyncio.to_thread(self.cluster.timeline)
        _say(f"HA cluster {self.cluster.dsn()}; serve on {self.address}")

    def _tear_down(self) -> None:
        for child in (self.serve, self.projector):
            child.kill()
        self.cluster.stop()

    async def _worker(self, stub: Any, index: int) -> None:
        rng = random.Random(self.plan.seed * 1_000_003 + index)
        variants = list(Variant)
        while not self.stop.is_set():
            table = CheckedTable(
                stub, random.Random(rng.getrandbits(64)), self.summary, self.journal, self.stop
            )
            try:
                await table.play(rng.choice(variants), rng.randint(2, 4), 50)
            except Stopped:
                return
            except (grpc.aio.AioRpcError, RuntimeError) as error:
                self.journal.broken_off.append(f"game {table.game_id}: {error}")
            else:
                self.journal.games += 1

    async def _inject(self, fault: str) -> None:
        if fault not in FAULTS:
            await super()._inject(fault)
            return
        cluster = self.cluster
        injected = time.monotonic()
        async with self.lock:
            before, secondary = await asyncio.to_thread(cluster.wait_healthy, self.plan.recovery)
            _say(f"fault: {fault} (primary {before})")
            if fault == "postmaster":
                cluster.kill_postmaster(before)
            elif fault == "node":
                await asyncio.to_thread(cluster.kill_node, before)
            elif fault == "switchover":
                await asyncio.to_thread(cluster.switchover)
            else:
                await asyncio.to_thread(cluster.stop_node, secondary)
            healed = await self._commands_flow()
            if fault == "node":  # the machine comes back: its node rejoins as the secondary
                await asyncio.to_thread(cluster.run_node, before)
            elif fault == "secondary":
                await asyncio.sleep(max(0.0, injected + self.plan.secondary_outage - time.monotonic()))
                await asyncio.to_thread(cluster.run_node, secondary)
            try:
                after, _ = await asyncio.to_thread(cluster.wait_healthy, self.plan.recovery)
            except RuntimeError as error:
                self.failures.append(f"after {fault}: {error}")
                after = "?"
        self.done[fault] += 1
        self.failovers.append((fault, before, after))
        if healed is None:
            self.failures.append(f"no command acknowledged within {self.plan.recovery:.0f} s after {fault}")
        else:
            self.to_serving[fault].append(round(healed - injected, 2))
            self.recoveries.append(healed - injected)
        _say(f"{fault}: primary {before} -> {after}; serving again after {healed and healed - injected}")

    async def _check(self) -> dict[str, Any]:
        # Promotions, counted by the timeline: a postmaster kill may or may not end in one (the monitor
        # decides), and a failover may settle after the fault's own look at the cluster.
        promotions = await asyncio.to_thread(self.cluster.timeline) - self.timeline
        figures = await super()._check()
        bare = sum(CheckedTable.bare.values())
        if bare:
            self.failures.append(f"{bare} UNAVAILABLE without RetryInfo: {dict(CheckedTable.bare)}")
        allowed = {"OK", "UNAVAILABLE", "FAILED_PRECONDITION"}  # the refused challenges are on purpose
        others = {code: n for code, n in self.journal.statuses.items() if code not in allowed}
        figures.update(await self._standby_and_restore(), failovers=promotions)
        figures.update(
            primaries=[f"{fault}: {before} -> {after}" for fault, before, after in self.failovers],
            faults={kind: self.done[kind] for kind in FAULTS},
            seconds_to_serving=self.to_serving,
            unavailable_without_retry_info=bare,
            other_statuses=others,
        )
        return figures

    async def _standby_and_restore(self) -> dict[str, Any]:
        """``verify --all`` through the standby (the reads that may lag), and on a base backup of the
        primary restored as a lone server: both must see every game valid."""
        games = (await verify_all(self.cluster.dsn()))["games"]
        standby = await verify_all(self.cluster.dsn(standby=True))
        backup, pgdata = self.workdir / "backup", self.workdir / "restored"
        started = time.monotonic()
        await asyncio.to_thread(self.cluster.backup, backup)
        backup_seconds = round(time.monotonic() - started, 2)
        restored_dsn = await asyncio.to_thread(restore, self.cluster, backup, pgdata)
        try:
            restored = await verify_all(restored_dsn)
        finally:
            await asyncio.to_thread(stop_restored, self.cluster, pgdata)
        for where, found in (("the standby", standby), ("the restored backup", restored)):
            if found["invalid"] or found["games"] < games:
                self.failures.append(f"verify --all on {where}: {found['games']} of {games} games, {found}")
        return {
            "standby_verify": {"games": standby["games"], "invalid": len(standby["invalid"])},
            "restore": {"backup_seconds": backup_seconds, "games": restored["games"],
                        "invalid": len(restored["invalid"])},
        }  # fmt: skip


async def run_failover(plan: FailoverPlan, *, keep: bool = False) -> Report:
    workdir = Path(tempfile.mkdtemp(prefix="uno-failover-"))
    workdir.chmod(0o755)  # the cluster's folder inside it belongs to the postgres user when we are root
    try:
        return await Failover(plan, workdir).run()
    finally:
        if keep:  # the processes' logs, for a failed run (the cluster itself is always stopped)
            _say(f"logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="bots under database failovers, checked")
    parser.add_argument("--short", action="store_true", help="a one-minute run (one fault of each kind)")
    parser.add_argument("--seconds", type=float, default=240.0)
    parser.add_argument("--postmaster-kills", type=int, default=2)
    parser.add_argument("--node-kills", type=int, default=1)
    parser.add_argument("--switchovers", type=int, default=2)
    parser.add_argument("--secondary-stops", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the folder with the processes' logs")
    args = parser.parse_args(argv)
    why = available()
    if why is not None:
        print(why, file=sys.stderr)
        return 2
    plan = SHORT if args.short else FailoverPlan(
        seconds=args.seconds, kills=0, projector_kills=0, restarts=0, concurrency=args.concurrency,
        seed=args.seed, postmaster_kills=args.postmaster_kills, node_kills=args.node_kills,
        switchovers=args.switchovers, secondary_stops=args.secondary_stops,
    )  # fmt: skip
    try:
        report = asyncio.run(run_failover(plan, keep=args.keep))
    except KeyboardInterrupt:
        return 130
    print(json.dumps(report.to_json()) if args.json else render(report))
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
