"""The primary's load with and without a read database: bots play while readers verify, export and replay
finished games and read a tournament's standings, through ``serve`` on deploy/ha/'s cluster; once with
every read on the primary, once with ``serve --read-database-url`` naming the standby. Phases alternate.

    python bench/read_offload.py [--seconds 30] [--rounds 2] [--readers 2] [--concurrency 2] [--json]

Prints, per phase, the commands and reads done per second and the CPU seconds each node's PostgreSQL spent
(its postmaster and every backend, ended ones included). Both nodes share this machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402

from bench.chaos import Child, free_port, signing_key, wait_serving  # noqa: E402
from deploy.ha.cluster import Cluster, available  # noqa: E402
from service.client.bots import LoadSummary, run_bots  # noqa: E402
from service.rules.options import Variant  # noqa: E402
from service.store.migrate import SERVICE_LOGIN  # noqa: E402
from uno_audit_client.gen.uno.audit.v1 import audit_pb2, audit_pb2_grpc  # noqa: E402
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb  # noqa: E402
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc  # noqa: E402

TOURNAMENT = "offload-cup"
_TICK = os.sysconf("SC_CLK_TCK")


def postgres_cpu(postmaster: int) -> float:
    """CPU seconds of a postmaster and its children, live ones and those it has reaped."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(stat.parent.name), int(fields[1])
        if pid == postmaster:
            total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
        elif ppid == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / _TICK


async def _read_loop(address: str, admin: tuple[tuple[str, str], ...], games: list[str], stop: asyncio.Event,
                     counts: dict[str, int], seed: int) -> None:  # fmt: skip
    rng = random.Random(seed)
    async with grpc.aio.insecure_channel(address) as channel:
        audit = audit_pb2_grpc.AuditServiceStub(channel)  # type: ignore[no-untyped-call]
        game = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
        while not stop.is_set():
            game_id = rng.choice(games)
            kind = rng.randrange(4)
            if kind == 0:
                await audit.VerifyGame(audit_pb2.VerifyGameRequest(game_id=game_id), metadata=admin)
            elif kind == 1:
                await audit.ExportGame(audit_pb2.ExportGameRequest(game_id=game_id), metadata=admin)
            elif kind == 2:
                await audit.ReplayGame(audit_pb2.ReplayGameRequest(game_id=game_id), metadata=admin)
            else:
                await game.GetStandings(pb.GetStandingsRequest(tournament_id=TOURNAMENT))
            counts["reads"] += 1


async def _bot_loop(address: str, summary: LoadSummary, concurrency: int) -> None:
    """Single-round games, ``concurrency`` at a time, until cancelled (``summary`` counts as they go)."""
    for seed in itertools.count(1000):
        await run_bots(
            address, games=concurrency, variant=Variant.CLASSIC, players=3, concurrency=concurrency,
            seed=seed, target_score=1, summary=summary,
        )  # fmt: skip


class Offload:
    def __init__(self, workdir: Path, args: argparse.Namespace) -> None:
        self.workdir, self.args = workdir, args
        self.cluster = Cluster(workdir / "ha")
        self.token = secrets.token_hex(16)
        self.token_file = workdir / "admin-token"
        self.token_file.write_text(self.token)
        self.admin = (("authorization", f"Bearer {self.token}"),)

    def _serve(self, read_dsn: str | None) -> tuple[Child, str]:
        address = f"127.0.0.1:{free_port()}"
        extra = [] if read_dsn is None else ["--read-database-url", read_dsn]
        child = Child(
            "serve",
            ["serve", "--listen", address, "--database-url", self.cluster.dsn(SERVICE_LOGIN),
             "--admin-token-file", str(self.token_file), "--workers", "1",
             "--checkpoint-key-file", str(signing_key(self.workdir)), *extra],
            self.workdir / "serve.log",
        )  # fmt: skip
        child.start()
        return child, address

    async def run(self) -> list[dict[str, Any]]:
        await asyncio.to_thread(self.cluster.start)
        try:
            migrate = [sys.executable, "-m", "service.cli", "migrate", "--database-url", self.cluster.dsn()]
            subprocess.run(migrate, cwd=ROOT, check=True, capture_output=True)
            games = await self._seed_games()
            phases = []
            for _ in range(self.args.rounds):
                for mode in ("primary", "standby"):
                    phases.append(await self._phase(mode, games))
                    print(json.dumps(phases[-1]), file=sys.stderr, flush=True)
            return phases
        finally:
            await asyncio.to_thread(self.cluster.stop)

    async def _seed_games(self) -> list[str]:
        child, address = self._serve(None)
        try:
            if not await wait_serving(address, time.monotonic() + 60):
                raise RuntimeError(f"serve did not start: {child.tail()}")
            await run_bots(address, games=6, variant=Variant.CLASSIC, players=3, concurrency=3,
                           tournament_id=TOURNAMENT, target_score=1)  # fmt: skip
            async with grpc.aio.insecure_channel(address) as channel:
                stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
                listed = await stub.ListGames(pb.ListGamesRequest(tournament_id=TOURNAMENT))
            return [game.game_id for game in listed.games]
        finally:
            child.stop()

    async def _phase(self, mode: str, games: list[str]) -> dict[str, Any]:
        primary, standby = await asyncio.to_thread(self.cluster.wait_healthy, 60)
        read_dsn = self.cluster.dsn(SERVICE_LOGIN, standby=True) if mode == "standby" else None
        child, address = self._serve(read_dsn)
        try:
            if not await wait_serving(address, time.monotonic() + 60):
                raise RuntimeError(f"serve did not start: {child.tail()}")
            pids = {name: self.cluster.postmaster_pid(name) for name in (primary, standby)}
            before = {name: postgres_cpu(pid) for name, pid in pids.items() if pid is not None}
            stop = asyncio.Event()
            counts = {"reads": 0}
            summary = LoadSummary()
            bots = asyncio.create_task(_bot_loop(address, summary, self.args.concurrency))
            tasks = [
                asyncio.create_task(_read_loop(address, self.admin, games, stop, counts, seed))
                for seed in range(self.args.readers)
            ]
            started = time.monotonic()
            await asyncio.sleep(self.args.seconds)
            stop.set()
            commands = summary.commands - summary.rejected
            bots.cancel()
            await asyncio.gather(*tasks, bots, return_exceptions=True)
            seconds = time.monotonic() - started
            after = {name: postgres_cpu(pid) for name, pid in pids.items() if pid is not None}
        finally:
            child.stop()
        return {
            "reads_on": mode,
            "seconds": round(seconds, 1),
            "commands_per_second": round(commands / seconds, 1),
            "reads_per_second": round(counts["reads"] / seconds, 1),
            "primary_cpu_seconds": round(after[primary] - before[primary], 2),
            "standby_cpu_seconds": round(after[standby] - before[standby], 2),
        }


def render(phases: list[dict[str, Any]]) -> str:
    lines = [
        "| reads on | commands/s | reads/s | primary PostgreSQL CPU s | standby PostgreSQL CPU s |"
        " primary CPU ms per command |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for p in phases:
        per_command = 1000 * p["primary_cpu_seconds"] / max(1, p["commands_per_second"] * p["seconds"])
        lines.append(
            f"| {p['reads_on']} | {p['commands_per_second']} | {p['reads_per_second']} | "
            f"{p['primary_cpu_seconds']} | {p['standby_cpu_seconds']} | {per_command:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the primary's load with and without a read database")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each phase (default 30)")
    parser.add_argument("--rounds", type=int, default=2, help="pairs of phases (default 2)")
    parser.add_argument("--readers", type=int, default=2, help="concurrent readers (default 2)")
    parser.add_argument("--concurrency", type=int, default=2, help="bot games in flight (default 2)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    missing = available()
    if missing is not None:
        parser.error(f"no HA PostgreSQL here: {missing}")
    with tempfile.TemporaryDirectory(prefix="uno-offload-") as folder:
        workdir = Path(folder)
        workdir.chmod(0o755)  # the cluster's folder inside it belongs to the postgres user when we are root
        phases = asyncio.run(Offload(workdir, args).run())
    print(json.dumps(phases) if args.json else render(phases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
