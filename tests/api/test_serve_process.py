"""``uno-audit serve`` as a real process on a machine without a configured database: it starts an embedded
PostgreSQL, migrates it and logs in as the service's restricted login, serves health checks and games,
plays host to ``uno-audit bots``, and exits 0 on SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

pytestmark = pytest.mark.timeout(120)

UNO_AUDIT = Path(sys.executable).with_name("uno-audit")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _json_lines(path: Path) -> list[dict[str, object]]:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


def _stop_embedded_postgres(data_dir: Path) -> None:
    """If the server could not stop its PostgreSQL (the test failed), stop it by its process id."""
    pid_file = data_dir / "postmaster.pid"
    with contextlib.suppress(OSError, ValueError):
        os.kill(int(pid_file.read_text().splitlines()[0]), signal.SIGTERM)


@pytest.mark.skipif(
    not UNO_AUDIT.exists(), reason="the uno-audit script is not installed in this environment"
)
async def test_serve_starts_an_embedded_database_and_stops_on_sigterm(
    tmp_path: Path, embedded_dir: Path
) -> None:
    address = f"127.0.0.1:{_free_port()}"
    data_dir = embedded_dir / "data"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "UNO_AUDIT_ADMIN_TOKEN")}
    out, err = tmp_path / "serve.out", tmp_path / "serve.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        server = await asyncio.create_subprocess_exec(
            str(UNO_AUDIT), "serve", "--listen", address, "--data-dir", str(data_dir),
            env=env, stdout=stdout, stderr=stderr,
        )  # fmt: skip
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            while True:
                assert server.returncode is None, f"serve exited early: {err.read_text()}"
                try:
                    reply = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=1)
                except grpc.aio.AioRpcError:
                    await asyncio.sleep(0.2)
                    continue
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    break
            stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
            created: pb.CreateGameReply = await stub.CreateGame(
                pb.CreateGameRequest(command_id="first", variant=pb.CLASSIC, players=["ann", "bo"]),
                timeout=10,
            )
            assert [s.player for s in created.seats] == ["ann", "bo"] and created.version >= 1

        bots = await asyncio.create_subprocess_exec(
            str(UNO_AUDIT), "bots", "--server", address,
            "--games", "1", "--variant", "sonic", "--players", "3",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        printed, complaints = await asyncio.wait_for(bots.communicate(), 60)
        assert bots.returncode == 0, complaints.decode()
        summary = json.loads(printed.decode().strip().splitlines()[-1])
        assert summary["games"] == 1 and summary["rejected"] == 0 and summary["commands"] > 0

        server.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(server.wait(), 30) == 0, err.read_text()
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()
            _stop_embedded_postgres(data_dir)
    lines = _json_lines(out)
    logged = [line.get("event") for line in lines]
    assert "embedded database started" in logged
    assert "admin actions are disabled: no admin token" in logged  # no token in its environment
    assert "serving" in logged
    # The service's own last line; the embedded server's library may log its clean-up after it (as JSON).
    assert [line["event"] for line in lines if "logger" not in line][-1] == "stopped"
    assert logged.count("command") >= summary["commands"]  # one line per command
    assert not (data_dir / "postmaster.pid").exists(), "the embedded PostgreSQL was left running"
