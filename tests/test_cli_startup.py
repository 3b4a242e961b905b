"""Start-up failures of ``uno-audit serve`` are one line on standard error and exit 2: a port another
server holds (refused, never shared), an address that cannot be bound, a database that does not answer
(within ``--database-timeout``, not half a minute later with a traceback). The same for ``project`` and
``rebuild``; and a reader that stops early (``| head``) gets no traceback."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from psycopg.conninfo import make_conninfo

from projections.migrate import apply_migrations
from service.api.config import ServeConfig
from service.api.server import start_server
from service.cli.main import main
from tests.signing import SERVE_KEY

if TYPE_CHECKING:
    from tests.conftest import ServiceLogin

pytestmark = pytest.mark.timeout(120)

UNO_AUDIT = Path(sys.executable).with_name("uno-audit")
needs_script = pytest.mark.skipif(not UNO_AUDIT.exists(), reason="the uno-audit script is not installed")


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "UNO_AUDIT_ADMIN_TOKEN": "a-good-admin-token-0123456789", **SERVE_KEY}
    return subprocess.run(
        [str(UNO_AUDIT), "serve", *args], env=env, capture_output=True, text=True, timeout=90
    )


def _one_line(done: subprocess.CompletedProcess[str], words: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("uno-audit serve: ") and words in lines[0], lines[0]
    assert "Traceback" not in done.stderr + done.stdout


@needs_script
async def test_a_port_another_server_holds_is_refused_not_shared(
    database_url: str, service_login: ServiceLogin
) -> None:
    await apply_migrations(database_url)
    service_url = await service_login.url(database_url)
    running = await start_server(
        ServeConfig(listen="127.0.0.1:0", database_url=service_url, admin_token=None, projector=False)
    )
    try:
        done = await asyncio.to_thread(
            _serve, "--listen", f"127.0.0.1:{running.port}", "--database-url", service_url, "--no-projector"
        )
    finally:
        await running.stop(grace=1.0)
    _one_line(done, f"cannot listen on 127.0.0.1:{running.port}")


@needs_script
async def test_an_address_of_another_machine_cannot_be_bound(
    database_url: str, service_login: ServiceLogin
) -> None:
    await apply_migrations(database_url)
    service_url = await service_login.url(database_url)
    done = await asyncio.to_thread(_serve, "--listen", "192.0.2.1:50051", "--database-url", service_url)
    _one_line(done, "cannot listen on 192.0.2.1:50051")


@needs_script
def test_a_database_that_does_not_answer_is_one_line_within_the_timeout() -> None:
    with socket.socket() as silent:  # accepts connections (the kernel does) and never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        url = make_conninfo(host="127.0.0.1", port=port, dbname="uno", user="uno_audit_service")
        done = _serve("--database-url", url, "--database-timeout", "2")  # bounded by the test's timeout
    _one_line(done, "database")


@pytest.mark.parametrize("command", ["project", "rebuild"])
def test_the_read_model_commands_without_a_database_say_so_in_one_line(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    refused = make_conninfo(host="127.0.0.1", port=_closed_port(), dbname="uno", user="nobody")
    assert main([command, "--database-url", refused]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"uno-audit {command}: database: ") and err.count("\n") == 1, err


@needs_script
def test_a_reader_that_stops_early_gets_no_traceback() -> None:
    """``uno-audit … | head``: the pipe closes before the report is written."""
    done = subprocess.Popen(
        [str(UNO_AUDIT), "simulate", "--variant", "classic", "--players", "3", "--games", "20", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert done.stdout is not None and done.stderr is not None
    done.stdout.close()  # the reader is gone before the command prints
    err = done.stderr.read().decode()
    assert done.wait(timeout=90) != 0
    assert err == "", err


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # nobody listens there once the probe is closed


@needs_script
@pytest.mark.parametrize("command", [["project"], ["rebuild"], ["verify", "--all"]])
def test_a_silent_database_ends_the_other_commands_in_one_line_too(command: list[str]) -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = make_conninfo(host="127.0.0.1", port=silent.getsockname()[1], dbname="uno", user="nobody")
        env = {"PATH": "/usr/bin:/bin", "PGCONNECT_TIMEOUT": "2"}
        done = subprocess.run(
            [str(UNO_AUDIT), *command, "--database-url", url],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
