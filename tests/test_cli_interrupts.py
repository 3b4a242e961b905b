"""Ctrl-C ends every ``uno-audit`` command with one line on standard error and exit status 130, never a
traceback; ``bots`` prints what it did so far first, marked partial, and ``serve`` still stops gracefully.

Each command runs as a real process in a session of its own, and gets SIGINT on its whole process group
(as a terminal sends Ctrl-C, to its workers and helpers too) once its output shows it is underway."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from psycopg.conninfo import make_conninfo

from projections.migrate import apply_migrations
from service.api.config import ServeConfig
from service.api.server import start_server

if TYPE_CHECKING:
    from tests.conftest import ServiceLogin

UNO_AUDIT = Path(sys.executable).with_name("uno-audit")
# Generous bounds only: nothing here asserts how long anything takes.
pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(not UNO_AUDIT.exists(), reason="the uno-audit script is not installed"),
]
WAIT = 90.0  # seconds: the most any step may take before the test gives up


@pytest.fixture(autouse=True)
def _sigint_not_ignored() -> Iterator[None]:
    """A child inherits an ignored SIGINT (a test run started in the background of a shell without job
    control has one): it would then never see the Ctrl-C these tests send."""
    before = signal.getsignal(signal.SIGINT)
    if before == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


async def _start(*args: str, env: dict[str, str] | None = None) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        str(UNO_AUDIT), *args, env=env, start_new_session=True,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def _wait_for(condition: Callable[[], bool], process: asyncio.subprocess.Process) -> None:
    """Poll ``condition()`` until true; fail if the process exits first or ``WAIT`` passes."""
    async with asyncio.timeout(WAIT):
        while not condition():
            assert process.returncode is None, "the command ended before it was underway"
            await asyncio.sleep(0.05)


async def _ctrl_c(process: asyncio.subprocess.Process) -> tuple[str, str]:
    """Ctrl-C to the process's group; its standard output and error once it has ended."""
    os.killpg(process.pid, signal.SIGINT)
    try:
        out, err = await asyncio.wait_for(process.communicate(), WAIT)
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
    return out.decode(errors="replace"), err.decode(errors="replace")


def _one_line(command: str, err: str) -> None:
    assert "Traceback" not in err, err
    assert err.splitlines() == [f"uno-audit {command}: interrupted"], err


async def test_simulate(tmp_path: Path) -> None:
    records = tmp_path / "records"
    simulate = await _start(
        "simulate", "--variant", "classic", "--players", "4", "--games", "1000000", "--records", str(records)
    )
    await _wait_for(lambda: records.is_dir() and any(records.iterdir()), simulate)  # a game written
    out, err = await _ctrl_c(simulate)
    assert simulate.returncode == 130, err
    _one_line("simulate", err)
    assert out == ""  # no summary: simulate's is of a whole run


async def test_bots_prints_its_partial_summary_first(
    tmp_path: Path, database_url: str, service_login: ServiceLogin
) -> None:
    await apply_migrations(database_url)
    running = await start_server(
        ServeConfig(
            listen="127.0.0.1:0",
            database_url=await service_login.url(database_url),
            admin_token=None,
            projector=False,
        )
    )
    receipts = tmp_path / "receipts.jsonl"
    try:
        bots = await _start(
            "bots", "--server", f"127.0.0.1:{running.port}", "--games", "100000", "--variant", "classic",
            "--players", "3", "--concurrency", "4", "--receipts", str(receipts),
        )  # fmt: skip
        # Receipts are written as replies come (buffered): some on disk, commands have been played.
        await _wait_for(lambda: receipts.exists() and receipts.stat().st_size > 0, bots)
        out, err = await _ctrl_c(bots)
    finally:
        await running.stop(grace=1.0)
    assert bots.returncode == 130, err
    _one_line("bots", err)
    summary = json.loads(out.splitlines()[-1])
    assert summary["partial"] is True
    assert summary["commands"] > 0 and summary["games"] < 100000 and summary["rejected"] == 0
    assert {"rounds", "retries", "seconds", "p50_ms"} <= summary.keys()  # the normal summary's fields


@pytest.mark.parametrize(
    "command",
    [["verify", "--all"], ["export", "--game", "a-game-id"]],
    ids=["verify-all", "export"],
)
async def test_the_commands_on_stored_games(command: list[str]) -> None:
    """Interrupted while they wait on the database: one that accepts the connection and never answers
    keeps them there (libpq's timeout set far beyond the test's)."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        silent.setblocking(False)
        url = make_conninfo(host="127.0.0.1", port=silent.getsockname()[1], dbname="uno", user="nobody")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PGCONNECT_TIMEOUT": "600"}
        process = await _start(*command, "--database-url", url, env=env)
        accepted: list[socket.socket] = []

        def connected() -> bool:
            with contextlib.suppress(BlockingIOError):
                accepted.append(silent.accept()[0])
            return bool(accepted)

        try:
            await _wait_for(connected, process)
            out, err = await _ctrl_c(process)
        finally:
            for connection in accepted:
                connection.close()
    assert process.returncode == 130, err
    _one_line(command[0], err)
    assert out == ""


async def test_serve_stops_gracefully_then_says_so(embedded_dir: Path) -> None:
    data_dir = embedded_dir / "data"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "UNO_AUDIT_ADMIN_TOKEN")}
    serve = await _start(
        "serve", "--listen", "127.0.0.1:0", "--data-dir", str(data_dir), "--workers", "1", env=env
    )
    logged: list[dict[str, object]] = []
    try:
        assert serve.stdout is not None
        async with asyncio.timeout(WAIT):
            while not any(line.get("event") == "serving" for line in logged):
                line = await serve.stdout.readline()
                assert line, "serve ended before it served"
                if line.startswith(b"{"):
                    logged.append(json.loads(line))
        out, err = await _ctrl_c(serve)
    finally:
        pid_file = data_dir / "postmaster.pid"  # a failed test must not leave PostgreSQL running
        if serve.returncode != 130 and pid_file.exists():
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid_file.read_text().splitlines()[0]), signal.SIGTERM)
    assert serve.returncode == 130, err
    _one_line("serve", err)
    events = [line.get("event") for line in logged] + [
        json.loads(line).get("event") for line in out.splitlines() if line.startswith("{")
    ]
    assert "stopping: finishing in-flight commands" in events and "stopped" in events  # graceful
    assert not (data_dir / "postmaster.pid").exists(), "the embedded PostgreSQL was left running"
