"""``uno-audit health``, the container health check, against a real server: one line and exit 0 only for
SERVING; exit 1 for a server that is stopping (NOT_SERVING), a service it does not know (NOT_FOUND), an
address that refuses connections and one that never answers (within ``--timeout``)."""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Iterator

import pytest

from service.api.server import AUDIT_SERVICE_NAME, SERVICE_NAME, RunningServer

pytestmark = pytest.mark.timeout(60)


async def _health(*args: str) -> tuple[int, list[str], list[str]]:
    """The command as a process (what a container runs), while the server answers on this test's event
    loop: its exit status and the lines of its standard output and error (gRPC's core's included)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "service.cli",
        "health",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode is not None
    return process.returncode, out.decode().splitlines(), err.decode().splitlines()


async def test_a_serving_server_and_its_services_exit_0(address: str) -> None:
    for service in ("", SERVICE_NAME, AUDIT_SERVICE_NAME):
        done = await _health("--server", address, "--service", service)
        assert done == (0, [f"{address} {service or 'server'}: SERVING"], [])


async def test_a_stopping_server_is_not_serving_exit_1(server: RunningServer, address: str) -> None:
    await server.health.enter_graceful_shutdown()  # what SIGTERM does first; calls are still answered
    for service in ("", SERVICE_NAME):
        done = await _health("--server", address, "--service", service)
        assert done == (1, [f"{address} {service or 'server'}: NOT_SERVING"], [])


async def test_an_unknown_service_exit_1(address: str) -> None:
    code, out, err = await _health("--server", address, "--service", "uno.audit.v1.NoSuchService")
    assert (code, out) == (1, [])
    [line] = err
    assert line.startswith(f"uno-audit health: {address} uno.audit.v1.NoSuchService: NOT_FOUND"), line


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port bound here but not listening: connections are refused, and nothing else can take it."""
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        yield bound.getsockname()[1]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel completes them) and never says a word."""
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(8)
        yield listening.getsockname()[1]


async def test_an_address_that_refuses_exit_1_with_one_line(closed_port: int) -> None:
    code, out, err = await _health("--server", f"127.0.0.1:{closed_port}")
    assert (code, out) == (1, [])
    [line] = err
    assert line.startswith(f"uno-audit health: 127.0.0.1:{closed_port} server: UNAVAILABLE: "), line


async def test_a_server_that_never_answers_exit_1_after_the_timeout(silent_port: int) -> None:
    # Without the timeout it would wait forever: the test's own timeout is the bound, not a clock.
    code, out, err = await _health("--server", f"127.0.0.1:{silent_port}", "--timeout", "1")
    assert (code, out) == (1, [])
    [line] = err
    assert line.startswith(f"uno-audit health: 127.0.0.1:{silent_port} server: "), line
    assert "DEADLINE_EXCEEDED" in line or "UNAVAILABLE" in line, line
