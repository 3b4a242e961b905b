"""``uno-audit serve`` and ``uno-audit migrate`` as real processes: the credentials they refuse (one line on
standard error, exit 2, the secret never echoed), the database logins they refuse, and the service
running as its own login with the admin token from a file or disabled with a warning."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from projections.migrate import migrations as projection_migrations
from service.store import migrations as store_migrations
from tests.signing import SERVE_KEY

if TYPE_CHECKING:  # the root conftest is pytest's, not a module to import again
    from tests.conftest import ServiceLogin

pytestmark = pytest.mark.timeout(120)

UNO_AUDIT = Path(sys.executable).with_name("uno-audit")
TOKEN = "a-good-admin-token-0123456789"

needs_script = pytest.mark.skipif(not UNO_AUDIT.exists(), reason="the uno-audit script is not installed")


def _env(**extra: str) -> dict[str, str]:
    """This process's environment without the variables the commands read, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL" and not k.startswith("UNO_AUDIT_")}
    env.update(SERVE_KEY)
    env.update(extra)
    return env


def _run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(UNO_AUDIT), *args], env=env, capture_output=True, text=True, timeout=60)


def _refused(done: subprocess.CompletedProcess[str], command: str, words: str, secret: str = "") -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"uno-audit {command}: ") and words in lines[0], lines[0]
    if secret.strip():
        assert secret.strip() not in done.stderr + done.stdout


@needs_script
@pytest.mark.parametrize(
    ("env", "file", "words"),
    [
        ({"UNO_AUDIT_ADMIN_TOKEN": ""}, None, "admin token in $UNO_AUDIT_ADMIN_TOKEN is empty"),
        ({"UNO_AUDIT_ADMIN_TOKEN": " \t "}, None, "admin token in $UNO_AUDIT_ADMIN_TOKEN is empty"),
        ({}, "\n  \n", "is empty"),
        ({"UNO_AUDIT_ADMIN_TOKEN": "fifteen-chars-x"}, None, "shorter than 16 characters"),
        ({}, "fifteen-chars-x\n", "shorter than 16 characters"),
        ({"UNO_AUDIT_ADMIN_TOKEN": "é" * 20}, None, "must be printable ASCII"),
    ],
    ids=["empty", "whitespace", "blank-file", "short", "short-file", "not-ascii"],
)
def test_an_unfit_admin_token_is_refused(
    tmp_path: Path, env: dict[str, str], file: str | None, words: str
) -> None:
    args = ["serve", "--data-dir", str(tmp_path / "never-started")]
    if file is not None:
        (tmp_path / "token").write_text(file, encoding="utf-8")
        args += ["--admin-token-file", str(tmp_path / "token")]
    done = _run(*args, env=_env(**env))
    _refused(done, "serve", words, secret=file or env.get("UNO_AUDIT_ADMIN_TOKEN", ""))
    assert not (tmp_path / "never-started").exists()  # refused before any database


@needs_script
def test_the_token_on_the_command_line_is_refused_without_echoing_it(tmp_path: Path) -> None:
    done = _run("serve", "--admin-token", TOKEN, "--data-dir", str(tmp_path / "no"), env=_env())
    _refused(done, "serve", "--admin-token is not accepted", secret=TOKEN)


@needs_script
def test_a_missing_token_file_and_an_empty_service_password_are_refused(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    _refused(
        _run("serve", "--admin-token-file", str(missing), env=_env()),
        "serve",
        f"cannot read the admin token file {missing}",
    )
    done = _run(
        "migrate",
        "--database-url",
        "postgresql://nobody@127.0.0.1:1/none",
        env=_env(UNO_AUDIT_SERVICE_PASSWORD=" "),
    )
    _refused(done, "migrate", "service password in $UNO_AUDIT_SERVICE_PASSWORD is empty")
    done = _run("serve", "--migrate-url", "postgresql://owner@127.0.0.1:1/none", env=_env())
    _refused(done, "serve", "--migrate-url goes with --database-url")


@needs_script
async def test_serve_refuses_a_superuser_login_before_touching_the_database(empty_database_url: str) -> None:
    done = await asyncio.to_thread(
        _run, "serve", "--database-url", empty_database_url, env=_env(UNO_AUDIT_ADMIN_TOKEN=TOKEN)
    )
    _refused(done, "serve", "is (or may SET ROLE to) a superuser")
    async with await psycopg.AsyncConnection.connect(empty_database_url, autocommit=True) as conn:
        row = await (await conn.execute("SELECT to_regclass('schema_migrations')")).fetchone()
    assert row == (None,)  # nothing migrated with it


@needs_script
async def test_migrate_then_serve_as_the_service_login(
    tmp_path: Path, empty_database_url: str, service_login: ServiceLogin
) -> None:
    env = _env(UNO_AUDIT_SERVICE_PASSWORD=service_login.password)
    done = await asyncio.to_thread(_run, "migrate", "--database-url", empty_database_url, env=env)
    assert done.returncode == 0, done.stderr
    assert service_login.password not in done.stdout + done.stderr
    printed = json.loads(done.stdout)
    assert printed == {
        "applied": [m.name for m in store_migrations()] + [m.name for m in projection_migrations()],
        "login": "uno_audit_service",
        "password_set": True,
    }
    service_url = make_conninfo(empty_database_url, user="uno_audit_service", password=service_login.password)
    logged = await _serve_until_serving(tmp_path, "--database-url", service_url, env=_env())
    warnings = [line for line in logged if line.get("level") == "warning"]
    assert [line["event"] for line in warnings] == ["admin actions are disabled: no admin token"]
    assert any(line.get("event") == "serving" and line.get("admin") is False for line in logged)

    async with await psycopg.AsyncConnection.connect(empty_database_url, autocommit=True) as conn:
        await conn.execute(
            "DELETE FROM projection_migrations WHERE name = (SELECT max(name) FROM projection_migrations)"
        )
    done = await asyncio.to_thread(_run, "serve", "--database-url", service_url, env=_env())
    _refused(done, "serve", "the database's schema is not current")
    assert "run `uno-audit migrate" in done.stderr


@needs_script
async def test_serve_migrates_with_the_owner_url_and_takes_the_token_from_a_file(
    tmp_path: Path, empty_database_url: str, service_login: ServiceLogin
) -> None:
    token_file = tmp_path / "admin-token"
    token_file.write_text(TOKEN + "\n", encoding="utf-8")
    service_url = make_conninfo(empty_database_url, user="uno_audit_service", password=service_login.password)
    logged = await _serve_until_serving(
        tmp_path, "--database-url", service_url, "--admin-token-file", str(token_file),
        env=_env(UNO_AUDIT_MIGRATE_URL=empty_database_url, UNO_AUDIT_SERVICE_PASSWORD=service_login.password),
    )  # fmt: skip
    assert not [line for line in logged if line.get("level") == "warning"]
    assert any(line.get("event") == "serving" and line.get("admin") is True for line in logged)
    assert TOKEN not in json.dumps(logged)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _serve_until_serving(tmp_path: Path, *args: str, env: dict[str, str]) -> list[dict[str, object]]:
    """Start ``uno-audit serve``, wait until it logs "serving", stop it with SIGTERM (it must exit 0); its
    JSON log lines."""
    out, err = tmp_path / "serve.out", tmp_path / "serve.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        server = await asyncio.create_subprocess_exec(
            str(UNO_AUDIT), "serve", "--listen", f"127.0.0.1:{_free_port()}", *args,
            env=env, stdout=stdout, stderr=stderr,
        )  # fmt: skip
    try:
        while '"serving"' not in out.read_text(encoding="utf-8"):
            assert server.returncode is None, f"serve exited: {err.read_text()}"
            await asyncio.sleep(0.1)
        server.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(server.wait(), 30) == 0, err.read_text()
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()
    lines = out.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]
