"""The suite's own promises: it leaves a server it was not given alone, and the browser test skips
locally but never in CI. Each runs a child pytest on a few real tests and looks at what it did: in the
full tier only (CI), as a child pytest is a second suite's start-up."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests import tiers
from tests.postgres import DATABASE_URL_ENV

ROOT = Path(__file__).resolve().parent.parent
LOCAL_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
#: A store test, an API test and a read-model test: together they make databases, the service's login
#: and a server's roles.
DATABASE_TESTS = (
    "tests/store/test_roles.py::test_it_logs_in_as_itself_and_no_reset_gives_more",
    "tests/api/test_receipts.py",
    "tests/projections/test_projection_migrate.py",
)


def _child_pytest(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    tiers.full_only("a child pytest")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-rs", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _cluster_snapshot(url: str) -> tuple[set[str], set[str]]:
    with psycopg.connect(url, connect_timeout=5) as conn:
        roles = {name for (name,) in conn.execute("SELECT rolname FROM pg_roles").fetchall()}
        databases = {name for (name,) in conn.execute("SELECT datname FROM pg_database").fetchall()}
    return roles, databases


def test_a_run_without_a_named_server_creates_nothing_on_the_local_one() -> None:
    try:
        before = _cluster_snapshot(LOCAL_URL)
    except psycopg.OperationalError:
        pytest.skip("no PostgreSQL on 127.0.0.1:5432 to watch")
    if os.environ.get(DATABASE_URL_ENV):
        pytest.skip(f"{DATABASE_URL_ENV} names a server, which this run's other workers may change")
    env = {key: value for key, value in os.environ.items() if key != DATABASE_URL_ENV}
    child = _child_pytest(*DATABASE_TESTS, env=env)
    assert child.returncode == 0, child.stdout[-3000:] + child.stderr[-3000:]
    assert "PostgreSQL for tests: embedded" in child.stdout or "testcontainers" in child.stdout
    assert _cluster_snapshot(LOCAL_URL) == before


def _without_chromium() -> dict[str, str]:
    """This environment with a PATH on which neither chromium nor chromedriver is found."""
    python_bin = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": f"{python_bin}:/nonexistent", "UNO_AUDIT_REQUIRE_BROWSER": ""}


def test_the_browser_test_skips_without_a_browser_and_says_what_to_install() -> None:
    child = _child_pytest("tests/test_replay_browser.py", env=_without_chromium())
    assert child.returncode == 0, child.stdout[-3000:]
    assert re.search(r"\b\d+ skipped in", child.stdout) and " passed" not in child.stdout, child.stdout
    assert "apt-get install chromium chromium-driver" in child.stdout


def test_the_browser_test_fails_without_a_browser_where_one_is_required() -> None:
    child = _child_pytest(
        "tests/test_replay_browser.py", env={**_without_chromium(), "UNO_AUDIT_REQUIRE_BROWSER": "1"}
    )
    assert child.returncode == 1, child.stdout[-3000:]
    assert re.search(r"\b\d+ (errors?|failed)\b", child.stdout) and "skipped" not in child.stdout, (
        child.stdout
    )
    assert "UNO_AUDIT_REQUIRE_BROWSER is set" in child.stdout
