"""``uno-audit serve --workers N``: N server processes on one port (SO_REUSEPORT) behind one parent.

Connections spread over the workers (each log line names its worker; 64 at once never worse than 48:16,
start after start); a port another server holds is still refused, a multi-worker server's included (the
parent probes it without SO_REUSEPORT); SIGTERM stops every worker and the parent exits 0; a parent killed
with SIGKILL takes its workers with it (the kernel's death signal), so the port is free for a restart.
Restarts of crashed workers: ``test_supervision.py``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import psycopg
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from projections.migrate import apply_migrations
from service.api.access import new_client_key
from service.api.config import ServeConfig
from service.api.server import ListenError, start_server
from service.api.workers import probe_listen
from service.domain.auth import token_hash
from service.store.clients import add_client
from tests import tiers
from tests.signing import SERVE_KEY
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    from tests.conftest import ServiceLogin

pytestmark = pytest.mark.timeout(180)

UNO_AUDIT = Path(sys.executable).with_name("uno-audit")
needs_script = pytest.mark.skipif(not UNO_AUDIT.exists(), reason="the uno-audit script is not installed")
#: How long a server may take to start on a loaded machine (a wait's bound, not a measured figure).
START_SECONDS = 60.0
CHANNELS = 24  # fresh connections: the kernel picks a worker for each; all on one of two: 2 in 8 million
#: Connections held open at once, and the most of them one of two workers may hold: 48 of 64 or more,
#: for connections the kernel hashes evenly, happens about once in 40,000 starts.
SPREAD_CONNECTIONS, SPREAD_MOST = 64, 48


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening(port: int, session: int) -> bool:
    """Whether a process of ``session`` holds a socket listening on ``port``, as the kernel lists them
    (``/proc/net/tcp``, ``tcp6``: state 0A). Not a bind attempt:
    after the server is gone the kernel may hand the same port to an outgoing connection (it is in the
    ephemeral range), which a bind would take for a listener; and another test running beside this one
    may be handed the port for a server of its own, which is not this server's leftover."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table, encoding="ascii") as rows:
            next(rows)
            for row in rows:
                fields = row.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(fields[9])
    return any(f"socket:[{inode}]" in _sockets(pid) for pid in _session_members(session) for inode in inodes)


def _session_members(session: int) -> list[int]:
    """The processes whose session is ``session`` (a process that is gone meanwhile is left out)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[3]) == session:
                members.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return members


def _sockets(pid: int) -> set[str]:
    """What ``pid``'s open files point to (``socket:[inode]`` for a socket)."""
    targets = set()
    for fd in Path(f"/proc/{pid}/fd").glob("*"):
        try:
            targets.add(str(fd.readlink()))
        except OSError:
            continue
    return targets


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for a reaper does not: its sockets are closed)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _json_lines(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8", errors="replace")
    complete = text[: text.rfind("\n") + 1]  # a line a process is writing right now is not read yet
    return [json.loads(line) for line in complete.splitlines() if line.startswith("{")]


class Serve:
    """``uno-audit serve --workers N`` as a process in a session of its own, logging to files."""

    def __init__(self, tmp_path: Path, name: str, *args: str) -> None:
        self.out, self.err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        if "--checkpoint-key-file" not in args:  # the variable would win over the file a test rotates
            env.update(SERVE_KEY)
        with self.out.open("wb") as stdout, self.err.open("wb") as stderr:
            self.process = subprocess.Popen(
                [str(UNO_AUDIT), "serve", *args],
                env=env,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
            )

    def serving(self) -> dict[str, Any]:
        """Wait for the parent's "serving" line; return it."""
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"serve exited: {self.err.read_text()}"
            for line in _json_lines(self.out):
                if line.get("event") == "serving":
                    return line
            time.sleep(0.1)
        raise AssertionError(f"serve did not serve within {START_SECONDS} s: {self.err.read_text()}")

    def lines(self) -> list[dict[str, Any]]:
        return _json_lines(self.out)

    def end(self) -> None:
        """Whatever is left of it (the test failed): SIGKILL to its session."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


def _fresh_channel(address: str) -> grpc.aio.Channel:
    """A channel with a connection of its own: a local subchannel pool, since gRPC otherwise lets the
    channels of a process to one address share a connection, and so one worker."""
    return grpc.aio.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])


async def _create_on_fresh_connections(address: str, count: int) -> None:
    """One CreateGame on each of ``count`` new channels (a channel is one connection, kept by one worker)."""
    for index in range(count):
        async with _fresh_channel(address) as channel:
            stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
            created = await stub.CreateGame(
                pb.CreateGameRequest(command_id=f"spread-{index}", variant=pb.CLASSIC, players=["ann", "bo"]),
                timeout=20,
            )
            assert created.version >= 1


async def _health(address: str) -> int:
    async with grpc.aio.insecure_channel(address) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        return int(reply.status)


@needs_script
async def test_two_workers_share_one_port_refuse_a_second_server_and_stop_on_sigterm(
    tmp_path: Path, database_url: str, service_login: ServiceLogin
) -> None:
    await apply_migrations(database_url)
    service_url = await service_login.url(database_url)
    address = f"127.0.0.1:{_free_port()}"
    serve = Serve(tmp_path, "first", "--listen", address, "--database-url", service_url, "--workers", "2")
    try:
        serving = await asyncio.to_thread(serve.serving)
        assert serving["workers"] == 2 and serving["address"] == address
        workers: list[int] = serving["pids"]
        assert await _health(address) == health_pb2.HealthCheckResponse.SERVING

        await _create_on_fresh_connections(address, CHANNELS)

        # Another multi-worker server on the same port asks for SO_REUSEPORT as ours do; the kernel would
        # let it share the port. Its probe is refused: one line, exit 2, nothing started.
        second = await asyncio.to_thread(
            subprocess.run,
            [str(UNO_AUDIT), "serve", "--listen", address, "--database-url", service_url, "--workers", "2"],
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **SERVE_KEY},
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert second.returncode == 2, second.stderr
        assert second.stderr.splitlines() == [
            f"uno-audit serve: cannot listen on {address}: the address is in use or cannot be bound"
        ]
        assert "worker serving" not in second.stdout

        serve.process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(serve.process.wait, 60) == 0, serve.err.read_text()
    finally:
        serve.end()
    assert not any(_alive(pid) for pid in workers), "a worker outlived SIGTERM"
    lines = serve.lines()
    commands = [line for line in lines if line.get("event") == "command"]
    assert len(commands) == CHANNELS
    assert {line["worker"] for line in commands} == {0, 1}, "every connection landed on one worker"
    assert [line.get("worker") for line in lines if line.get("event") == "worker stopped"] in ([0, 1], [1, 0])
    assert [line["event"] for line in lines if "logger" not in line][-1] == "stopped"
    # One projector, in a process of its own (after the two servers).
    assert [line["worker"] for line in lines if line.get("event") == "projector.started"] == [2]


@needs_script
async def test_a_port_a_single_process_server_holds_is_refused_with_workers(
    database_url: str, service_login: ServiceLogin
) -> None:
    await apply_migrations(database_url)
    service_url = await service_login.url(database_url)
    running = await start_server(
        ServeConfig(listen="127.0.0.1:0", database_url=service_url, admin_token=None, projector=False)
    )
    try:
        done = await asyncio.to_thread(
            subprocess.run,
            [str(UNO_AUDIT), "serve", "--listen", f"127.0.0.1:{running.port}", "--database-url", service_url,
             "--no-projector", "--workers", "3"],
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **SERVE_KEY},
            capture_output=True,
            text=True,
            timeout=90,
        )  # fmt: skip
    finally:
        await running.stop(grace=1.0)
    assert done.returncode == 2, done.stderr
    where = f"127.0.0.1:{running.port}"
    assert done.stderr.splitlines() == [
        f"uno-audit serve: cannot listen on {where}: the address is in use or cannot be bound"
    ]


@needs_script
async def test_workers_do_not_outlive_a_parent_killed_with_sigkill(
    tmp_path: Path, database_url: str, service_login: ServiceLogin
) -> None:
    await apply_migrations(database_url)
    service_url = await service_login.url(database_url)
    port = _free_port()
    address = f"127.0.0.1:{port}"
    args = ("--listen", address, "--database-url", service_url, "--workers", "2")
    serve = Serve(tmp_path, "killed", *args)
    try:
        workers: list[int] = (await asyncio.to_thread(serve.serving))["pids"]
        assert len(workers) == 3  # two servers and the projector's process
        session = serve.process.pid  # the session its workers inherit (start_new_session)
        assert _listening(port, session)  # the check below sees this server's listeners
        os.kill(serve.process.pid, signal.SIGKILL)  # the parent alone, not its process group
        serve.process.wait()
        deadline = time.monotonic() + START_SECONDS  # the kernel's death signal is quick; a bound to wait
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not any(_alive(pid) for pid in workers), "a worker outlived its parent's SIGKILL"
        assert not _listening(port, session), "a process of the killed server still listens on its port"

        again = Serve(tmp_path, "again", *args)  # what a supervisor (or tests/chaos) does next
        try:
            await asyncio.to_thread(again.serving)
            assert await _health(address) == health_pb2.HealthCheckResponse.SERVING
        finally:
            again.end()
    finally:
        serve.end()


def test_the_probe_resolves_port_0_and_refuses_a_port_in_use() -> None:
    found = probe_listen("127.0.0.1:0")
    host, _, port = found.rpartition(":")
    assert host == "127.0.0.1" and int(port) > 0
    with socket.socket() as holder:  # a listener, whatever options it set, keeps the probe out
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        taken = f"127.0.0.1:{holder.getsockname()[1]}"
        with pytest.raises(ListenError, match=re.escape(f"cannot listen on {taken}")):
            probe_listen(taken)
    with pytest.raises(ListenError, match=re.escape("cannot listen on 192.0.2.1:50051")):
        probe_listen("192.0.2.1:50051")  # TEST-NET-1: no address of this machine


def _connections_by_process(port: int, pids: list[int]) -> list[int]:
    """How many established connections to ``port`` each process holds (its socket inodes, matched with
    the kernel's table of TCP sockets)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table, encoding="ascii") as rows:
            next(rows)
            for row in rows:
                fields = row.split()
                if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(fields[9])
    counts = []
    for pid in pids:
        held = 0
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                held += target.startswith("socket:[") and target[8:-1] in inodes
        counts.append(held)
    return counts


async def _hold_connections(address: str, count: int) -> list[grpc.aio.Channel]:
    """``count`` channels, each its own connection (:func:`_fresh_channel`), connected by a health check."""
    channels = [_fresh_channel(address) for _ in range(count)]
    await asyncio.gather(
        *(
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=30)
            for channel in channels
        )
    )
    return channels


@needs_script
@pytest.mark.timeout(1800 if tiers.full else 300)
async def test_64_connections_spread_over_two_workers_on_every_start(
    tmp_path: Path, database_url: str, service_login: ServiceLogin
) -> None:
    """Every worker binds before any accepts: one that started first no longer takes every connection."""
    await apply_migrations(database_url)
    service_url = await service_login.url(database_url)
    splits = []
    for start in range(tiers.examples(20, fast=3)):
        port = _free_port()
        address = f"127.0.0.1:{port}"
        args = ("--listen", address, "--database-url", service_url, "--workers", "2", "--no-projector")
        serve = Serve(tmp_path, f"spread-{start}", *args)
        try:
            pids: list[int] = (await asyncio.to_thread(serve.serving))["pids"]
            channels = await _hold_connections(address, SPREAD_CONNECTIONS)
            try:
                split = _connections_by_process(port, pids)
            finally:
                for channel in channels:
                    await channel.close()
            serve.process.send_signal(signal.SIGTERM)
            assert await asyncio.to_thread(serve.process.wait, 60) == 0, serve.err.read_text()
        finally:
            serve.end()
        assert sum(split) == SPREAD_CONNECTIONS, split
        splits.append(split)
    assert all(max(split) <= SPREAD_MOST for split in splits), splits


@needs_script
async def test_every_worker_beyond_loopback_needs_a_client_key_to_create(
    tmp_path: Path, database_url: str, service_login: ServiceLogin
) -> None:
    """``--listen 0.0.0.0:…`` without ``--allow-anonymous``: each worker refuses a keyless creation and
    takes a client's key; the workers stop on SIGTERM with nothing on standard error."""
    await apply_migrations(database_url)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        key = new_client_key()
        await add_client(conn, "tablefriends", token_hash(key))
    service_url = await service_login.url(database_url)
    port = _free_port()
    serve = Serve(
        tmp_path, "public", "--listen", f"0.0.0.0:{port}", "--database-url", service_url, "--workers", "2"
    )
    try:
        await asyncio.to_thread(serve.serving)
        for index in range(CHANNELS):  # fresh connections: both workers answer some
            async with _fresh_channel(f"127.0.0.1:{port}") as channel:
                stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
                request = pb.CreateGameRequest(
                    command_id=f"key-{index}", variant=pb.CLASSIC, players=["a", "b"]
                )
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await stub.CreateGame(request, timeout=20)
                assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
                created = await stub.CreateGame(
                    request, metadata=(("authorization", f"Bearer {key}"),), timeout=20
                )
                assert created.version >= 1
        serve.process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(serve.process.wait, 60) == 0, serve.err.read_text()
    finally:
        serve.end()
    refusals = [line for line in serve.lines() if line.get("rule") == "CLIENT_KEY_REQUIRED"]
    assert {line["worker"] for line in refusals} == {0, 1}
    assert serve.err.read_text() == ""
