"""The command's Python path: CPU per table command of GameService called directly, without gRPC.

    python bench/command_path.py [--games 8] [--seconds 6] [--runs 3] [--warmup 1.5] [--before PATH] \
        [--json] [--database-url postgresql://postgres@127.0.0.1:5432/postgres]

It replays bench/service.py's scripts (four-player classic games dealt from the simulation's decks)
through a GameService built as ``serve`` builds it (store, command handler, callers, keyring, the JSON log
line to /dev/null), calling its methods with the request messages and a context that holds the bearer
token; ``--games`` games are in flight in one event loop, so group commit groups them. The figure is this
process's CPU time (``time.process_time``) per accepted command: authentication, decide, the append on
psycopg's side, the reply's events and view, the receipt, the log line and the metric. gRPC's transport
is not in it (bench/service.py's floor measures that), nor PostgreSQL's CPU (another process).

``--before PATH`` measures the code at ``PATH`` too (a worktree of an earlier commit) in a child process
whose ``service`` and ``bench`` come from there, the two taking turns run by run on fresh databases; each
figure is the median of ``--runs``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

if __name__ == "__main__" and "--child" in sys.argv:  # the code under test comes from --root
    sys.path.insert(0, sys.argv[sys.argv.index("--root") + 1])
else:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import service as bench_service  # after the path: either tree's
from projections.migrate import apply_migrations as migrate_projections
from service.api.callers import Callers
from service.api.notify import Notifier
from service.api.servicer import GameService
from service.app.handler import CommandHandler
from service.checkpoints.keyring import Keyring
from service.checkpoints.keys import Signer
from service.domain.auth import token_hash
from service.ops.logging import configure_logging
from service.store import EventStore
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
WARMUP_SECONDS = 1.5


class _Context:
    """What GameService's table actions read of a gRPC context: the caller's metadata."""

    def __init__(self, token: str) -> None:
        self.metadata = (("authorization", f"Bearer {token}"),)

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self.metadata

    def set_trailing_metadata(self, _metadata: Any) -> None:
        pass


async def _replay(
    service: GameService, admin: str, games: int, seconds: float, warmup: float
) -> tuple[int, float]:
    """``games`` games in flight, each replaying scripts one after another, for ``warmup`` seconds and then
    ``seconds``: the commands accepted in the window and the process's CPU seconds over it."""
    scripts = bench_service.scripts(bench_service.SCRIPT_GAMES, bench_service.SEED)
    admin_context = _Context(admin)
    counting = False
    commands = 0

    async def game(index: int) -> None:
        nonlocal commands
        for turn in range(10**9):
            script = scripts[(index + turn * games) % len(scripts)]
            create = pb.CreateGameRequest.FromString(script.create)
            create.command_id = str(uuid.uuid4())
            created = await service.CreateGame(create, admin_context)  # type: ignore[arg-type]
            contexts = {seat.seat: _Context(seat.token) for seat in created.seats}
            contexts[bench_service.ADMIN] = admin_context
            for number, (method, seat, body) in enumerate(script.steps):
                request = getattr(pb, f"{method}Request").FromString(body)
                request.header.game_id = created.game_id
                request.header.command_id = str(number)
                await getattr(service, method)(request, contexts[seat])
                if counting:
                    commands += 1

    tasks = [asyncio.create_task(game(i)) for i in range(games)]
    try:
        await asyncio.sleep(warmup)
        counting, started = True, time.process_time()
        await asyncio.sleep(seconds)
        counting, used = False, time.process_time() - started
        done = commands
        failed = [task for task in tasks if task.done()]  # a game ends only by an error
        if failed:
            raise RuntimeError("a game's command failed") from failed[0].exception()
        if not done:
            raise RuntimeError(f"no command was accepted in {seconds} s")
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return done, used


async def measure(
    server_url: str, games: int, seconds: float, warmup: float = WARMUP_SECONDS
) -> dict[str, Any]:
    """One run on a fresh database: commands, CPU seconds and CPU µs per command."""
    name = f"uno_bench_path_{secrets.token_hex(4)}"
    bench_service.create_database(server_url, name)
    url = bench_service.database_url(server_url, name)
    try:
        store = await EventStore.open(url)
        try:
            await store.migrate()
            await migrate_projections(url)
            admin = secrets.token_hex(24)
            callers = Callers(store, token_hash(admin))
            keyring = Keyring(Signer.generate("uno-audit.bench"))
            service = GameService(store, CommandHandler(store), Notifier(store), callers, keyring)
            commands, used = await _replay(service, admin, games, seconds, warmup)
        finally:
            await store.close()
    finally:
        bench_service.drop_database(server_url, name)
    return {
        "database": name,
        "commands": commands,
        "cpu_s": round(used, 3),
        "cpu_us_per_command": round(used / commands * 1e6, 1),
    }


def _child(root: str, server_url: str, games: int, seconds: float, warmup: float) -> dict[str, Any]:
    """One run of the code at ``root``, in a child process."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    command = [sys.executable, "-P", __file__, "--child", "--root", root, "--database-url", server_url]
    command += [
        "--games",
        str(games),
        "--seconds",
        str(seconds),
        "--warmup",
        str(warmup),
        "--runs",
        "1",
        "--json",
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False, cwd=root)
    if done.returncode != 0:
        raise RuntimeError(f"the code at {root} did not run: {done.stderr.strip()[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)["runs"][0]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="CPU per command of the command's Python path, no gRPC")
    parser.add_argument("--games", type=int, default=8, help="games in flight (default 8)")
    parser.add_argument("--seconds", type=float, default=6.0, help="length of one run (default 6)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each code (default 3)")
    parser.add_argument(
        "--warmup",
        type=float,
        default=WARMUP_SECONDS,
        help=f"seconds before each run (default {WARMUP_SECONDS})",
    )
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL))
    parser.add_argument("--before", metavar="PATH", help="also measure the code at PATH (a worktree)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child and not str(sys.modules[GameService.__module__].__file__).startswith(args.root):
        raise SystemExit(f"the child did not load the code at {args.root}")
    if args.games < 1 or args.runs < 1 or not args.seconds > 0 or not args.warmup >= 0:
        parser.error("--games and --runs must be at least 1, --seconds positive, --warmup not negative")
    sys.stdout.flush()
    shown = os.fdopen(os.dup(sys.stdout.fileno()), "w")  # the figures; the service logs to /dev/null
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the life of the process
    configure_logging("json", "info", worker=0)
    found: dict[str, list[dict[str, Any]]] = {"now": [], "before": []}
    for _ in range(args.runs):
        found["now"].append(asyncio.run(measure(args.database_url, args.games, args.seconds, args.warmup)))
        if args.before:
            found["before"].append(
                _child(args.before, args.database_url, args.games, args.seconds, args.warmup)
            )
    if args.child or args.json:
        print(json.dumps({"games": args.games, "runs": found["now"], "before": found["before"]}), file=shown)
        return 0
    print(
        f"the command's Python path, {args.games} games in flight, {args.runs} runs of {args.seconds} s",
        file=shown,
    )
    for label, runs in (("this code", found["now"]), (f"before ({args.before})", found["before"])):
        if runs:
            each = [run["cpu_us_per_command"] for run in runs]
            print(f"  {label}: {statistics.median(each):.1f} µs CPU per command (runs: {each})", file=shown)
    if found["before"]:
        now = statistics.median(run["cpu_us_per_command"] for run in found["now"])
        before = statistics.median(run["cpu_us_per_command"] for run in found["before"])
        print(f"  this code / before: {now / before:.3f}", file=shown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
