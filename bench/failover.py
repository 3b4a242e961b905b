"""Failover: bots play over gRPC against ``serve --require-sync-standby`` on deploy/ha/'s cluster while
faults hit it, one at a time or in back-to-back sequences (a postmaster kill then at once a switchover,
two switchovers, a node kill or a standby stop during a switchover, a switchover as the standby returns);
then every ack in the clients' logs is judged against the surviving log, with bench/chaos.py's checks.

    python bench/failover.py [--short] [--seconds 240] [--sequences 5] [--seed 0] [--json] (see --help)

It prints acks lost, duplicated and at another version; statuses by code and ErrorInfo reason; and per
fault the longest gap between consecutive acknowledgements until the next fault (docs/HA.md, "Measured").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, LiteralString

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402
import psycopg  # noqa: E402
from google.rpc import error_details_pb2  # noqa: E402
from grpc_status import rpc_status  # noqa: E402

from bench.chaos import (  # noqa: E402
    OWNER,
    Chaos,
    Journal,
    Plan,
    RecordingTable,
    Reply,
    Report,
    Stopped,
    _command_of,
    _say,
    render,
    verify_all,
    wait_serving,
)
from deploy.ha.cluster import (  # noqa: E402
    DATABASE,
    Cluster,
    ClusterError,
    available,
    parse_ports,
    restore,
    stop_restored,
)
from service.client.bots import LoadSummary, Metadata  # noqa: E402
from service.rules.options import Variant  # noqa: E402
from service.store.migrate import SERVICE_LOGIN  # noqa: E402
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc  # noqa: E402

#: One fault at a time, as before.
SINGLE = ("postmaster", "node", "switchover", "secondary")
#: Two steps with no pause between them: the races one fault at a time never meets.
SEQUENCES = (
    "kill-then-switchover",  # kill -9 of the primary's postmaster, then at once a switchover
    "switchover-twice",  # a switchover, then at once another
    "node-kill-in-switchover",  # a switchover started, a node killed (keeper and postmaster) while it runs
    "standby-stop-in-promotion",  # a switchover started, the standby-to-be stopped while it runs
    # The standby stopped, started again, and at once a switchover: the monitor takes it as soon as the
    # standby is back in sync, when the primary may still run in wait_primary (synchronous replication off).
    "switchover-at-standby-return",
)
FAULTS = SINGLE + SEQUENCES
#: A switchover's stages, as the monitor assigns them: the primary starts draining (``draining``), or
#: the candidate is promoted (``promoted``: told to accept writes, the old primary demoted).
STAGES = ("draining", "promoted")
_DRAINING = frozenset({"draining", "demote_timeout", "demoted", "prepare_promotion", "stop_replication"})
_PROMOTED = frozenset({"wait_primary", "primary"})
#: Seconds a healed cluster must stay healthy, with the same primary, before the next fault.
SETTLE = 2.0
#: The service login reads pg_stat_replication's positions with it (``serve --require-sync-standby``).
GRANT_STATS = f"GRANT pg_read_all_stats TO {SERVICE_LOGIN}"


@dataclass(frozen=True, slots=True)
class FailoverPlan(Plan):
    """chaos's plan with the database faults of an HA cluster instead of its own."""

    postmaster_kills: int = 2
    node_kills: int = 1
    switchovers: int = 2
    secondary_stops: int = 1
    kill_then_switchovers: int = 1
    switchovers_twice: int = 1
    node_kills_in_switchover: int = 1
    standby_stops_in_promotion: int = 1
    switchovers_at_standby_return: int = 1
    #: How long a stopped secondary stays away (the primary commits alone once the monitor says so).
    secondary_outage: float = 8.0
    #: The longest a killed node's machine stays away: it comes back once the other node is promoted.
    node_outage: float = 30.0
    #: Seconds the cluster serves, healthy, between one fault's end and the next fault (at least).
    quiet: float = 5.0
    #: ``serve --require-sync-standby``: an acknowledgement only once a synchronous standby has the commit.
    require_sync_standby: bool = True
    #: The cluster's ports (monitor, node1, node2); ``None``: free ones.
    ports: tuple[int, int, int] | None = None

    def counts(self) -> dict[str, int]:
        numbers = (
            self.postmaster_kills, self.node_kills, self.switchovers, self.secondary_stops,
            self.kill_then_switchovers, self.switchovers_twice, self.node_kills_in_switchover,
            self.standby_stops_in_promotion, self.switchovers_at_standby_return,
        )  # fmt: skip
        return dict(zip(FAULTS, numbers, strict=True))

    def faults(self) -> list[str]:
        faults = [kind for kind, n in self.counts().items() for _ in range(n)]
        faults += ["serve"] * self.kills + ["projector"] * self.projector_kills
        random.Random(self.seed).shuffle(faults)
        return faults


def sequence_counts(n: int) -> dict[str, int]:
    """``--sequences N``: N sequences, the kinds in turn."""
    return {kind: n // len(SEQUENCES) + (i < n % len(SEQUENCES)) for i, kind in enumerate(SEQUENCES)}


SHORT = FailoverPlan(
    seconds=60.0, kills=0, projector_kills=0, restarts=0, concurrency=4, seed=3,
    postmaster_kills=1, node_kills=0, switchovers=1, secondary_stops=1, secondary_outage=6.0,
    kill_then_switchovers=1, switchovers_twice=0, node_kills_in_switchover=0, standby_stops_in_promotion=0,
    switchovers_at_standby_return=0,
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


# --- what the clients saw -------------------------------------------------------------------------------


def rich_details(error: grpc.aio.AioRpcError) -> tuple[str, bool]:
    """The ErrorInfo reason of a failed call ('' without one), and whether it carries RetryInfo."""
    try:
        status = rpc_status.from_call(error)
    except ValueError:
        return "", False
    reason, retry_info = "", False
    for detail in status.details if status is not None else ():
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            reason = info.reason
        elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry_info = True
    return reason, retry_info


@dataclass(frozen=True, slots=True)
class Acked:
    """One acknowledgement, as the client logged it: when, which command, the versions its reply named
    (``None`` for a creation answered ALREADY_EXISTS on a retry: stored, at versions not given)."""

    at: float
    game_id: str
    command_id: str
    method: str
    first: int | None
    last: int | None


@dataclass(slots=True)
class Seen:
    """What the clients saw besides chaos's journal: every attempt's status by code and ErrorInfo reason,
    the UNAVAILABLE replies without RetryInfo, and every acknowledgement, in the order received."""

    statuses: Counter[str] = field(default_factory=Counter)
    bare: Counter[str] = field(default_factory=Counter)
    acks: list[Acked] = field(default_factory=list)


class CheckedTable(RecordingTable):
    """chaos's recording table that also logs each attempt's status with its reason, and each
    acknowledgement (creations too) with its time."""

    def __init__(
        self,
        stub: pb_grpc.GameServiceStub,
        rng: random.Random,
        summary: LoadSummary,
        journal: Journal,
        stop: asyncio.Event,
        seen: Seen,
    ) -> None:
        super().__init__(stub, rng, summary, journal, stop)
        self.seen = seen

    async def call(
        self, rpc: Callable[..., Awaitable[Reply]], request: object, metadata: Metadata = ()
    ) -> Reply:
        seen = self.seen

        async def checked(sent: object, *, metadata: Metadata, timeout: float) -> Reply:
            try:
                reply = await rpc(sent, metadata=metadata, timeout=timeout)
            except grpc.aio.AioRpcError as error:
                reason, retry_info = rich_details(error)
                seen.statuses[f"{error.code().name}/{reason}" if reason else error.code().name] += 1
                if error.code() is grpc.StatusCode.UNAVAILABLE and not retry_info:
                    seen.bare[str(error.details())[:120]] += 1
                raise
            seen.statuses["OK"] += 1
            return reply

        command = _command_of(request)
        try:
            reply = await super().call(checked, request, metadata)
        except grpc.aio.AioRpcError as error:
            if command is not None and error.code() is grpc.StatusCode.ALREADY_EXISTS:
                self._log(command)  # a retried creation: chaos's journal took it as acknowledged
            raise
        if command is not None:
            self._log(command)
        return reply

    def _log(self, command: tuple[str, str, str]) -> None:
        game_id, command_id, method = command
        ack = self.journal.acknowledged.get((game_id, command_id))
        if ack is not None:
            self.seen.acks.append(Acked(time.monotonic(), game_id, command_id, method, ack.first, ack.last))


# --- the verdict, per acknowledgement ---------------------------------------------------------------------

# Every ledger row, and the events that carry its command id: how many, and their lowest and highest version.
_LEDGER: LiteralString = """
SELECT c.game_id, c.command_id, c.first_version, c.last_version,
       count(e.version), coalesce(min(e.version), 0), coalesce(max(e.version), 0)
  FROM commands c
  LEFT JOIN events e ON e.game_id = c.game_id AND e.metadata->>'command_id' = c.command_id
 GROUP BY c.game_id, c.command_id, c.first_version, c.last_version
"""


@dataclass(frozen=True, slots=True)
class Stored:
    """A command's ledger row (its versions) and the events carrying its id (how many, lowest, highest)."""

    first: int
    last: int
    carried: int
    low: int
    high: int


@dataclass(slots=True)
class Verdict:
    acknowledgements: int = 0
    creations: int = 0
    lost: int = 0
    duplicated: int = 0
    other_version: int = 0
    #: The failed acknowledgements, with when they came (seconds into the load) and the fault of the moment.
    problems: list[str] = field(default_factory=list)


def judge(
    acks: Iterable[Acked],
    ledger: Mapping[tuple[str, str], Stored],
    where: Callable[[float], str] = lambda at: f"{at:.2f}",
) -> Verdict:
    """Each acknowledgement against the surviving log: its command in the ledger once (the ledger's key
    is the command), its events carrying its id exactly once each, at the versions its reply named.
    ``where(at)`` names the moment of an ack for the problems listed."""
    verdict = Verdict()
    for ack in acks:
        verdict.acknowledgements += 1
        verdict.creations += ack.method == "CreateGame"
        name = f"{ack.method} {ack.game_id}/{ack.command_id} acknowledged at {where(ack.at)}"
        stored = ledger.get((ack.game_id, ack.command_id))
        if stored is None:
            verdict.lost += 1
            verdict.problems.append(f"lost: {name}, not in the log")
            continue
        span = stored.last - stored.first + 1
        if stored.carried > span:
            verdict.duplicated += 1
            verdict.problems.append(
                f"duplicated: {name}: {stored.carried} events carry its id, its ledger row has {span}"
            )
        elif (stored.carried, stored.low, stored.high) != (span, stored.first, stored.last):
            verdict.lost += 1
            verdict.problems.append(
                f"lost: {name}: ledger versions {stored.first}–{stored.last}, events carrying its id "
                f"{stored.carried} ({stored.low}–{stored.high})"
            )
        elif (ack.first is not None and ack.first != stored.first) or (
            ack.last is not None and ack.last != stored.last
        ):
            verdict.other_version += 1
            verdict.problems.append(
                f"at a different version: {name} with versions {ack.first}–{ack.last}, stored at "
                f"{stored.first}–{stored.last}"
            )
    return verdict


async def read_ledger(owner_url: str) -> dict[tuple[str, str], Stored]:
    async with await psycopg.AsyncConnection.connect(owner_url, autocommit=True) as conn:
        rows = await (await conn.execute(_LEDGER)).fetchall()
    return {(game, command): Stored(*map(int, numbers)) for game, command, *numbers in rows}


# --- time to serve again ----------------------------------------------------------------------------------


@dataclass(slots=True)
class Fault:
    """One fault of the run: its kind, when it started, what was done, and the figures measured."""

    kind: str
    started: float
    detail: str = ""
    primaries: str = ""
    first_ack_s: float | None = None
    longest_gap_s: float | None = None
    acks_in_window: int = 0


def longest_gaps(faults: Sequence[Fault], acks: Sequence[float], ended: float) -> None:
    """Per fault: the longest gap between consecutive acknowledgements in its window, from its start to
    the next fault's (or ``ended``, the end of the load), the window's two ends counting as bounds: so the
    wait for the first ack after the fault counts, and so does a silence that lasts to the window's end."""
    for index, fault in enumerate(faults):
        end = faults[index + 1].started if index + 1 < len(faults) else ended
        inside = [at for at in acks if fault.started < at <= end]
        fault.acks_in_window = len(inside)
        fault.first_ack_s = round(inside[0] - fault.started, 2) if inside else None
        points = [fault.started, *inside, end]
        fault.longest_gap_s = round(max(b - a for a, b in itertools.pairwise(points)), 2)


# --- the run ----------------------------------------------------------------------------------------------


class Failover(Chaos):
    """One run of :class:`bench.chaos.Chaos` on the HA cluster, with the faults of :class:`FailoverPlan`."""

    plan: FailoverPlan

    def __init__(self, plan: FailoverPlan, workdir: Path) -> None:
        super().__init__(plan, workdir)
        self.cluster = Cluster(workdir / "ha", plan.ports)
        self.postgres = ClusterDatabase(self.cluster)  # type: ignore[assignment]
        if plan.require_sync_standby:
            self.serve.args.append("--require-sync-standby")
        self.timeline = 0
        self.faults_run: list[Fault] = []
        self.seen = Seen()
        #: The sequences' choices (which node, at which stage), seeded apart from the faults' order.
        self.choices = random.Random(plan.seed * 7919 + 1)
        self.load_started = 0.0
        self.load_ended = 0.0
        self.settled = 0.0  # when the last fault's cluster had settled

    def _urls(self) -> None:
        for child in (self.serve, self.projector):
            child.args[child.args.index("--database-url") + 1] = self.cluster.dsn(SERVICE_LOGIN)

    async def _set_up(self) -> None:
        await asyncio.to_thread(self.cluster.start)
        self._urls()
        migrate = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "service.cli", "migrate", "--database-url", self.cluster.dsn()],
            cwd=ROOT, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if migrate.returncode != 0:
            raise RuntimeError(f"uno-audit migrate failed: {migrate.stderr.strip()}")
        async with await psycopg.AsyncConnection.connect(self.cluster.dsn(), autocommit=True) as conn:
            await conn.execute(GRANT_STATS)  # as the cluster's superuser
        self.serve.start()
        self.projector.start()
        if not await wait_serving(self.address, time.monotonic() + 60):
            raise RuntimeError(f"uno-audit serve did not start: {self.serve.tail()}")
        self.timeline = await asyncio.to_thread(self.cluster.timeline)
        _say(f"HA cluster {self.cluster.dsn()}; serve on {self.address} ({' '.join(self.serve.args[1:])})")

    def _tear_down(self) -> None:
        for child in (self.serve, self.projector):
            child.kill()
        self.cluster.stop()

    async def _load_under_faults(self) -> float:
        self.load_started = time.monotonic()

        async def note_stop() -> None:
            await self.stop.wait()
            self.load_ended = time.monotonic()

        noting = asyncio.create_task(note_stop())
        try:
            return await super()._load_under_faults()
        finally:
            if not self.load_ended:
                self.load_ended = time.monotonic()
            noting.cancel()

    async def _worker(self, stub: Any, index: int) -> None:
        rng = random.Random(self.plan.seed * 1_000_003 + index)
        variants = list(Variant)
        while not self.stop.is_set():
            table = CheckedTable(
                stub, random.Random(rng.getrandbits(64)), self.summary, self.journal, self.stop, self.seen
            )
            try:
                await table.play(rng.choice(variants), rng.randint(2, 4), 50)
            except Stopped:
                return
            except (grpc.aio.AioRpcError, RuntimeError) as error:
                self.journal.broken_off.append(f"game {table.game_id}: {error}")
            else:
                self.journal.games += 1

    # --- the faults ---------------------------------------------------------------------------------------

    async def _inject(self, fault: str) -> None:
        if fault not in FAULTS:
            await super()._inject(fault)
            return
        await asyncio.sleep(max(0.0, self.settled + self.plan.quiet - time.monotonic()))
        async with self.lock:
            try:
                before, secondary = await asyncio.to_thread(self.cluster.wait_healthy, self.plan.recovery)
            except ClusterError as error:
                # A cluster that did not heal (a keeper wedged, say): a fault more would measure nothing.
                self.failures.append(f"{fault} not made, the cluster is not healthy: {error}")
                _say(f"{fault} not made, the cluster is not healthy: {error}")
                return
            injected = time.monotonic()
            record = Fault(fault, injected)
            self.faults_run.append(record)
            _say(f"fault: {fault} (primary {before})")
            healing = await self._make(fault, before, secondary, record)
            made = time.monotonic()
            healed = await self._commands_flow()
            await healing
            after = await self._settle(fault)
            self.settled = time.monotonic()
        self.done[fault] += 1
        record.primaries = f"{before} -> {after}"
        if healed is None:
            self.failures.append(f"no command acknowledged within {self.plan.recovery:.0f} s after {fault}")
        else:
            self.recoveries.append(healed - injected)
        _say(f"{fault}: {record.detail}; primary {before} -> {after}; its steps took {made - injected:.2f} s")

    async def _settle(self, fault: str) -> str:
        """Wait until the cluster is healthy, still with the same primary :data:`SETTLE` seconds later, and
        a command was acknowledged since: right after a postmaster kill the monitor has not noticed yet,
        and the next fault would hit a postmaster still starting. The primary ("?": none)."""
        for _ in range(3):
            try:
                first, _ = await asyncio.to_thread(self.cluster.wait_healthy, self.plan.recovery)
                await asyncio.sleep(SETTLE)
                flowing = await self._commands_flow()
                then, _ = await asyncio.to_thread(self.cluster.wait_healthy, self.plan.recovery)
            except ClusterError as error:
                self.failures.append(f"after {fault}: {error}")
                return "?"
            if flowing is not None and first == then:
                return then
        self.failures.append(f"after {fault}: the cluster did not settle")
        return "?"

    def _roles(self) -> tuple[str, str]:
        """(primary, other) as the monitor has them now, when the cluster is not settled."""
        with contextlib.suppress(ClusterError, subprocess.TimeoutExpired, json.JSONDecodeError):
            for node in self.cluster.state():
                if node["assigned_group_state"] in _PROMOTED:
                    name = str(node["nodename"])
                    return name, next(other for other in self.cluster.nodes if other != name)
        return "node1", "node2"

    async def _make(self, fault: str, primary: str, secondary: str, record: Fault) -> asyncio.Task[None]:
        """Make ``fault`` happen; the task that heals it (a node's machine back, a standby restarted)."""
        cluster = self.cluster

        def healed_by(coroutine: Awaitable[None]) -> asyncio.Task[None]:
            async def run() -> None:
                await coroutine

            return asyncio.create_task(run())

        if fault == "postmaster":
            cluster.kill_postmaster(primary)
            record.detail = f"kill -9 of {primary}'s postmaster"
        elif fault == "node":
            await asyncio.to_thread(cluster.kill_node, primary)
            record.detail = f"kill -9 of {primary} (keeper and postmaster)"
            return healed_by(self._node_back(primary, record.started))
        elif fault == "switchover":
            await asyncio.to_thread(cluster.switchover)
            record.detail = "switchover"
        elif fault == "secondary":
            await asyncio.to_thread(cluster.stop_node, secondary)
            record.detail = f"stop of {secondary}"
            return healed_by(self._standby_back(secondary, record.started))
        elif fault == "kill-then-switchover":
            # At once, or at once when the monitor has a primary running without its standby (the
            # tester's loss: a switchover drained a primary in wait_primary, which went on committing).
            when = self.choices.choice(("at once", "at wait_primary"))
            cluster.kill_postmaster(primary)
            seen = "" if when == "at once" else f" ({await self._until_wait_primary()})"
            tries, said = await self._switchover_at_once()
            record.detail = (
                f"kill -9 of {primary}'s postmaster, then {when}{seen} a switchover: {said} ({tries} tries)"
            )
        elif fault == "switchover-at-standby-return":
            await asyncio.to_thread(cluster.stop_node, secondary)
            await asyncio.sleep(max(0.0, record.started + self.plan.secondary_outage - time.monotonic()))
            await asyncio.to_thread(cluster.run_node, secondary)
            tries, said = await self._switchover_at_once()
            record.detail = (
                f"stop of {secondary}, started again, then at once a switchover: {said} ({tries} tries)"
            )
        elif fault == "switchover-twice":
            await asyncio.to_thread(cluster.switchover)
            tries, said = await self._switchover_at_once()
            record.detail = f"switchover, then another: {said} ({tries} tries)"
        else:
            return await self._in_switchover(fault, primary, secondary, record)
        return healed_by(asyncio.sleep(0))

    async def _until_wait_primary(self, limit: float = 15.0) -> str:
        """Wait until the monitor has a node in (or assigned) wait_primary, for up to ``limit`` seconds."""
        started = time.monotonic()
        while time.monotonic() < started + limit:
            with contextlib.suppress(ClusterError, subprocess.TimeoutExpired, json.JSONDecodeError):
                for node in await asyncio.to_thread(self.cluster.state):
                    if "wait_primary" in (node["current_group_state"], node["assigned_group_state"]):
                        return f"{node['nodename']} wait_primary after {time.monotonic() - started:.2f} s"
            await asyncio.sleep(0.05)
        return f"no wait_primary within {limit:.0f} s"

    async def _switchover_at_once(self) -> tuple[int, str]:
        """A switchover now; while the monitor refuses one (the cluster not ready for it), asked again
        every 0.1 s, for up to the recovery time. (attempts, how it ended)."""
        deadline = time.monotonic() + self.plan.recovery
        tries = 0
        while True:
            tries += 1
            try:
                await asyncio.to_thread(self.cluster.switchover)
            except (ClusterError, subprocess.TimeoutExpired) as error:
                refused = "Failed to perform failover" in str(error)
                if not refused or time.monotonic() > deadline:
                    return tries, f"failed: {str(error)[-160:]}"
                await asyncio.sleep(0.1)
                continue
            return tries, "done"

    async def _in_switchover(
        self, fault: str, primary: str, secondary: str, record: Fault
    ) -> asyncio.Task[None]:
        """A switchover started, and at its seeded stage a node killed (either, seeded) or the
        standby-to-be (the old primary) stopped; the task that heals it and lets the switchover end."""
        stage = self.choices.choice(STAGES)
        # The standby-to-be is the old primary; a node killed is either.
        victim = self.choices.choice((primary, secondary)) if fault == "node-kill-in-switchover" else primary
        switching = asyncio.create_task(asyncio.to_thread(self.cluster.switchover))
        seen = await self._until_stage(stage, primary, secondary, switching)
        role = "the old primary" if victim == primary else "the candidate"
        if fault == "node-kill-in-switchover":
            await asyncio.to_thread(self.cluster.kill_node, victim)
            record.detail = f"switchover; kill -9 of {victim} ({role}) at {stage} ({seen})"
            back = self._node_back(victim, time.monotonic())
        else:
            await asyncio.to_thread(self.cluster.stop_node, victim)
            record.detail = f"switchover; stop of {victim} ({role}) at {stage} ({seen})"
            back = self._standby_back(victim, time.monotonic())

        async def heal() -> None:
            await back
            try:
                await switching
            except (ClusterError, subprocess.TimeoutExpired) as error:
                record.detail += f"; the switchover failed: {str(error)[-160:]}"
            else:
                record.detail += "; the switchover ended"

        return asyncio.create_task(heal())

    async def _until_stage(
        self, stage: str, primary: str, candidate: str, switching: asyncio.Task[Any]
    ) -> str:
        """Wait until the monitor has the switchover at ``stage`` (what was seen), or it has ended."""
        started = time.monotonic()
        while not switching.done():
            with contextlib.suppress(ClusterError, subprocess.TimeoutExpired, json.JSONDecodeError):
                nodes = {node["nodename"]: node for node in await asyncio.to_thread(self.cluster.state)}
                old, new = nodes[primary]["assigned_group_state"], nodes[candidate]["assigned_group_state"]
                if (stage == "draining" and (old in _DRAINING or new in _DRAINING)) or (
                    stage == "promoted" and new in _PROMOTED
                ):
                    return f"{primary} {old}, {candidate} {new} after {time.monotonic() - started:.2f} s"
            await asyncio.sleep(0.05)
        return "missed: the switchover had ended"

    async def _node_back(self, name: str, killed: float) -> None:
        """The killed node's machine back once the monitor has promoted the other node (or after the
        longest outage): its keeper rewinds it and it rejoins as the standby."""
        deadline = killed + self.plan.node_outage
        while time.monotonic() < deadline:
            with contextlib.suppress(ClusterError, subprocess.TimeoutExpired, json.JSONDecodeError):
                if any(
                    node["nodename"] != name and node["assigned_group_state"] in _PROMOTED
                    for node in await asyncio.to_thread(self.cluster.state)
                ):
                    break
            await asyncio.sleep(0.2)
        await asyncio.to_thread(self.cluster.run_node, name)

    async def _standby_back(self, name: str, stopped: float) -> None:
        await asyncio.sleep(max(0.0, stopped + self.plan.secondary_outage - time.monotonic()))
        await asyncio.to_thread(self.cluster.run_node, name)

    # --- the checks ---------------------------------------------------------------------------------------

    def _where(self, at: float) -> str:
        """An ack's moment: seconds into the load, and the fault whose window it fell in."""
        current = [fault for fault in self.faults_run if fault.started <= at]
        if not current:
            return f"{at - self.load_started:.2f} s (before any fault)"
        fault, into = current[-1], at - self.load_started
        return f"{into:.2f} s (after {fault.kind} at {fault.started - self.load_started:.1f} s)"

    async def _check(self) -> dict[str, Any]:
        # Promotions, counted by the timeline: a postmaster kill may or may not end in one (the monitor
        # decides), and a failover may settle after the fault's own look at the cluster.
        promotions = await asyncio.to_thread(self.cluster.timeline) - self.timeline
        figures = await super()._check()
        verdict = judge(self.seen.acks, await read_ledger(self.cluster.dsn()), self._where)
        if verdict.lost or verdict.duplicated or verdict.other_version:
            self.failures.append(
                f"of {verdict.acknowledgements} acknowledgements: {verdict.lost} lost, {verdict.duplicated} "
                f"duplicated, {verdict.other_version} at a different version"
            )
            self.failures += verdict.problems[:30]
        bare = sum(self.seen.bare.values())
        if bare:
            self.failures.append(f"{bare} UNAVAILABLE without RetryInfo: {dict(self.seen.bare)}")
        codes = Counter({status.partition("/")[0]: 0 for status in self.seen.statuses})
        for status, n in self.seen.statuses.items():
            codes[status.partition("/")[0]] += n
        for code in ("INTERNAL", "UNKNOWN"):
            if codes[code]:
                self.failures.append(f"{codes[code]} {code} replies: must be 0")
        longest_gaps(self.faults_run, [ack.at for ack in self.seen.acks], self.load_ended)
        by_kind: dict[str, list[float]] = {}
        for fault in self.faults_run:
            by_kind.setdefault(fault.kind, []).append(fault.longest_gap_s or 0.0)
        # The refused challenges are on purpose; ALREADY_EXISTS answers a retried creation (the bots then
        # make another game: the first one's seat tokens are gone).
        allowed = {"OK", "UNAVAILABLE", "FAILED_PRECONDITION", "ALREADY_EXISTS"}
        figures.update(await self._standby_and_restore(), failovers=promotions)
        # chaos's figure: from a fault to the first ack once its steps were done; here, the longest gap.
        figures["longest_recovery_s"] = max(
            (fault.longest_gap_s or 0.0 for fault in self.faults_run), default=0.0
        )
        figures.update(
            require_sync_standby=self.plan.require_sync_standby,
            acknowledgements=verdict.acknowledgements,
            creations_acknowledged=verdict.creations,
            lost=verdict.lost,
            duplicated=verdict.duplicated,
            at_a_different_version=verdict.other_version,
            statuses_by_reason=dict(sorted(self.seen.statuses.items())),
            internal=codes["INTERNAL"],
            unknown=codes["UNKNOWN"],
            unavailable_without_retry_info=bare,
            other_statuses={code: n for code, n in codes.items() if code not in allowed},
            faults={kind: self.done[kind] for kind in FAULTS},
            longest_gap_s=by_kind,
            faults_run=[
                {
                    "fault": fault.kind,
                    "at_s": round(fault.started - self.load_started, 1),
                    "detail": fault.detail,
                    "primary": fault.primaries,
                    "first_ack_s": fault.first_ack_s,
                    "longest_gap_s": fault.longest_gap_s,
                    "acks_in_window": fault.acks_in_window,
                }
                for fault in self.faults_run
            ],
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
    parser = argparse.ArgumentParser(description="bots under database failovers, checked per ack")
    parser.add_argument("--short", action="store_true", help="the full tier's run: a minute, four faults")
    parser.add_argument("--seconds", type=float, default=240.0)
    parser.add_argument("--postmaster-kills", type=int, default=2)
    parser.add_argument("--node-kills", type=int, default=1)
    parser.add_argument("--switchovers", type=int, default=2)
    parser.add_argument("--secondary-stops", type=int, default=1)
    parser.add_argument(
        "--sequences", type=int, default=5, help="back-to-back sequences, the five kinds in turn (default 5)"
    )
    # Each kind besides --sequences' share.
    parser.add_argument("--kill-then-switchovers", type=int, default=0)
    parser.add_argument("--switchovers-twice", type=int, default=0)
    parser.add_argument("--node-kills-in-switchover", type=int, default=0)
    parser.add_argument("--standby-stops-in-promotion", type=int, default=0)
    parser.add_argument("--switchovers-at-standby-return", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--recovery", type=float, default=90.0, help="seconds a fault may take to heal")
    parser.add_argument(
        "--quiet", type=float, default=5.0, help="seconds of healthy serving between faults, at least"
    )
    parser.add_argument("--ports", metavar="M,N1,N2", help="the cluster's ports (default: free ones)")
    parser.add_argument(
        "--no-require-sync-standby",
        action="store_true",
        help="serve without --require-sync-standby: to see what it prevents (such a run may lose acks)",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the folder with the processes' logs")
    args = parser.parse_args(argv)
    counts = {
        "postmaster": args.postmaster_kills, "node": args.node_kills, "switchover": args.switchovers,
        "secondary": args.secondary_stops, "kill-then-switchover": args.kill_then_switchovers,
        "switchover-twice": args.switchovers_twice, "node-kill-in-switchover": args.node_kills_in_switchover,
        "standby-stop-in-promotion": args.standby_stops_in_promotion,
        "switchover-at-standby-return": args.switchovers_at_standby_return,
    }  # fmt: skip
    if min(*counts.values(), args.sequences) < 0 or args.concurrency < 1 or args.seconds <= 0:
        parser.error("counts must not be negative, --concurrency and --seconds must be positive")
    for kind, n in sequence_counts(args.sequences).items():
        counts[kind] += n
    try:
        ports = None if args.ports is None else parse_ports(args.ports)
    except ValueError as error:
        parser.error(str(error))
    why = available()
    if why is not None:
        print(why, file=sys.stderr)
        return 2
    plan = SHORT if args.short else FailoverPlan(
        seconds=args.seconds, kills=0, projector_kills=0, restarts=0, concurrency=args.concurrency,
        seed=args.seed, recovery=args.recovery, postmaster_kills=counts["postmaster"],
        node_kills=counts["node"], switchovers=counts["switchover"], secondary_stops=counts["secondary"],
        kill_then_switchovers=counts["kill-then-switchover"], switchovers_twice=counts["switchover-twice"],
        node_kills_in_switchover=counts["node-kill-in-switchover"],
        standby_stops_in_promotion=counts["standby-stop-in-promotion"],
        switchovers_at_standby_return=counts["switchover-at-standby-return"], quiet=args.quiet,
    )  # fmt: skip
    if args.ports is not None or args.no_require_sync_standby:
        plan = replace(plan, ports=ports, require_sync_standby=not args.no_require_sync_standby)
    try:
        report = asyncio.run(run_failover(plan, keep=args.keep))
    except KeyboardInterrupt:
        return 130
    print(json.dumps(report.to_json()) if args.json else render(report))
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
