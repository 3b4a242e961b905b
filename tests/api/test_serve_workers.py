"""``uno-audit serve --workers N``: N server processes on one port (SO_REUSEPORT) behind one parent.

Connections spread over the workers (each log line names its worker); a port another server holds is
still refused, a multi-worker server's included (the parent probes it without SO_REUSEPORT); SIGTERM stops
every worker and the parent exits 0; a parent killed with SIGKILL takes its workers with it (the kernel's
death signal), so the port is free for a restart."""

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
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from projections.migrate import apply_migrations
from service.api.gen.uno.audit.v1 import game_pb2 as pb
from service.api.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc
from service.api.server import ListenError, start_server
from service.api.workers import probe_listen

if TYPE_CHECKING:
    from tests.conftest import ServiceLogin

pytestmark = pytest.mark.timeout(180)

UNO_AUDIT = Path(sys.executable).with_name("uno-audit")
needs_script = pytest.mark.skipif(not UNO_AUDIT.exists(), reason="the uno-audit script is not installed")
#: How long a server may take to start on a loaded machine (a wait's bound, not a measured figure).
START_SECONDS = 60.0
CHANNELS = 24  # fresh connections: the kernel picks a worker for each; all on one of two: 2 in 8 million


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening(port: int) -> bool:
    """Whether any socket listens on ``port``, as the kernel lists them (``/proc/net/tcp``, ``tcp6``:
    state 0A). Not a bind attempt: after the server is gone the kernel may hand the same port to an
    outgoing connection (it is in the ephemeral range), which a bind would take for a listener."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table, encoding="ascii") as rows:
            next(rows)
            for row in rows:
                local, state = row.split()[1], row.split()[3]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                    return True
    return False


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for a reaper does not: its sockets are closed)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _json_lines(path: Path) -> list[dict[str, Any]]:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


class Serve:
    """``uno-audit serve --workers N`` as a process in a session of its own, logging to files."""

    def __init__(self, tmp_path: Path, name: str, *args: str) -> None:
        self.out, self.err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
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


async def _create_on_fresh_connections(address: str, count: int) -> None:
    """One CreateGame on each of ``count`` new channels (a channel is one connection, kept by one worker)."""
    for index in range(count):
        async with grpc.aio.insecure_channel(address) as channel:
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
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
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
        listen="127.0.0.1:0", database_url=service_url, admin_token=None, projector=False
    )
    try:
        done = await asyncio.to_thread(
            subprocess.run,
            [str(UNO_AUDIT), "serve", "--listen", f"127.0.0.1:{running.port}", "--database-url", service_url,
             "--no-projector", "--workers", "3"],
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
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
        os.kill(serve.process.pid, signal.SIGKILL)  # the parent alone, not its process group
        serve.process.wait()
        deadline = time.monotonic() + START_SECONDS  # the kernel's death signal is quick; a bound to wait
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not any(_alive(pid) for pid in workers), "a worker outlived its parent's SIGKILL"
        assert not _listening(port), "something still listens on the killed server's port"

        again = Serve(tmp_path, "again", *args)  # what a supervisor (or tests/chaos) does next
        try:
            await asyncio.to_thread(again.serving)
            assert await _health(address) == health_pb2.HealthCheckResponse.SERVING
        finally:
            again.end()
    finally:
        serve.end()


def test_metrics_with_several_workers_is_refused_in_one_line() -> None:
    done = subprocess.run(
        [str(UNO_AUDIT), "serve", "--metrics-listen", "127.0.0.1:0", "--workers", "2",
         "--database-url", "postgresql://nobody@127.0.0.1:1/none"],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("uno-audit serve: --metrics-listen serves one process's metrics")
    assert done.stderr.count("\n") == 1


@needs_script
async def test_a_worker_that_dies_takes_the_others_down_with_exit_1(
    tmp_path: Path, database_url: str, service_login: ServiceLogin
) -> None:
    """A half-staffed port would look healthy while serving less: the supervisor restarts the whole."""
    await apply_migrations(database_url)
    service_url = await service_login.url(database_url)
    address = f"127.0.0.1:{_free_port()}"
    serve = Serve(tmp_path, "dying", "--listen", address, "--database-url", service_url, "--workers", "2")
    try:
        workers: list[int] = (await asyncio.to_thread(serve.serving))["pids"]
        os.kill(workers[1], signal.SIGKILL)
        assert await asyncio.to_thread(serve.process.wait, 60) == 1
    finally:
        serve.end()
    assert not _alive(workers[0]), "the other worker outlived the parent"
    assert serve.err.read_text().splitlines() == [
        "uno-audit serve: worker 1 exited on its own (status -9); the others were stopped"
    ]


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
