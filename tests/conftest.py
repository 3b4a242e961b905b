"""Shared fixtures and the suite's options: a real PostgreSQL, a fresh database per test, two tiers.

The store's guarantees (unique versions, triggers, privileges, LISTEN) are PostgreSQL's behaviour, so
its tests run against a real server (:mod:`tests.postgres`): the one ``UNO_AUDIT_TEST_DATABASE_URL``
names (its login needs CREATEDB and CREATEROLE), else a private server this process starts and deletes.
Each test's database is a copy of a migrated template; the service's code logs in as its restricted
login ``uno_audit_service``, as ``uno-audit serve`` does. ``--full`` runs the full tier
(:mod:`tests.tiers`).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest
import structlog
from psycopg.conninfo import make_conninfo

from service.store import EventStore
from tests import tiers
from tests.postgres import (
    SERVICE_PASSWORD,
    PostgresServer,
    embedded_data_dir,
    make_template,
    service_url,
    start_postgres,
)

log = logging.getLogger(__name__)

_started: list[PostgresServer] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--full",
        action="store_true",
        help="the full tier: every property and sweep at full strength (tests/tiers.py); CI runs it",
    )


def pytest_configure(config: pytest.Config) -> None:
    tiers.choose(bool(config.getoption("--full")))
    if os.environ.get("UNO_AUDIT_REQUIRE_COMPILED") == "1":  # .ci/run's in-process run on the compiled engine
        from service.rules.engine_kind import engine_kind

        if engine_kind() != "compiled":
            raise pytest.UsageError("UNO_AUDIT_REQUIRE_COMPILED=1, but the rules engine imported is pure")
    config.addinivalue_line("markers", "postgres: needs a real PostgreSQL server (see tests/postgres.py)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "postgres_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)


def pytest_report_header(config: pytest.Config) -> str:
    return f"uno-audit tier: {'full' if tiers.full else 'fast'} (pytest --full for the full tier)"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for server in _started:
        terminalreporter.write_line(f"PostgreSQL for tests: {server.describe()}")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """This process's PostgreSQL (see :mod:`tests.postgres`), stopped at the end if it started it."""
    server = start_postgres()
    _started.append(server)
    log.info("PostgreSQL for tests: %s", server.describe())
    try:
        yield server
    finally:
        if server.stop is not None:
            server.stop()


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PostgresServer) -> str:
    """The maintenance URL of the session's server; its login is the owner."""
    return postgres_server.url


@pytest.fixture(scope="session")
def migrated_template(postgres_server: PostgresServer) -> Iterator[str]:
    """The name of a migrated database each test's database is copied from, dropped at the end."""
    name = make_template(postgres_server)
    try:
        yield name
    finally:
        postgres_server.drop_database(make_conninfo(postgres_server.url, dbname=name))


@pytest.fixture
def database_url(postgres_server: PostgresServer, migrated_template: str) -> Iterator[str]:
    """A new database for one test, its schema migrated (a copy of the template), dropped afterwards;
    the URL is the owner's."""
    url = postgres_server.create_database(template=migrated_template)
    try:
        yield url
    finally:
        postgres_server.drop_database(url)


@pytest.fixture
def empty_database_url(postgres_server: PostgresServer, migrated_template: str) -> Iterator[str]:
    """A new, empty database for one test (no migration applied), dropped afterwards."""
    url = postgres_server.create_database()
    try:
        yield url
    finally:
        postgres_server.drop_database(url)


class ServiceLogin:
    """The service's login on the session's server (made with the template): its password, and a URL for
    it to any of the server's databases whose store schema is migrated."""

    password = SERVICE_PASSWORD

    async def url(self, owner_url: str) -> str:
        return service_url(owner_url)


@pytest.fixture(scope="session")
def service_login(migrated_template: str) -> ServiceLogin:
    return ServiceLogin()


@pytest.fixture
def may_read_stats(postgres_url: str) -> Iterator[None]:
    """The service's login may read the standbys' positions (``pg_read_all_stats``), as
    ``serve --require-sync-standby`` needs, for the test."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("GRANT pg_read_all_stats TO uno_audit_service")
        try:
            yield
        finally:
            conn.execute("REVOKE pg_read_all_stats FROM uno_audit_service")


@pytest.fixture
def embedded_dir() -> Iterator[Path]:
    """A folder for an embedded PostgreSQL (see :func:`embedded_data_dir`), removed afterwards."""
    folder = embedded_data_dir()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
async def store(database_url: str, service_login: ServiceLogin) -> AsyncIterator[EventStore]:
    """An open event store on a fresh migrated database, logged in as the service."""
    event_store = await EventStore.open(await service_login.url(database_url), max_size=20)
    try:
        yield event_store
    finally:
        await event_store.close()


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    """Put logging back after a test that ran a command in-process: ``serve`` and ``project`` route every
    log through handlers bound to the standard streams of that moment, which pytest closes after the
    test (a library logging at exit would then write to a closed file)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    # An in-process Ctrl-C silences psycopg's loggers for the rest of the process (quiet_interrupt).
    libraries = {name: logging.getLogger(name).level for name in ("psycopg", "psycopg_pool")}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, was in libraries.items():
        logging.getLogger(name).setLevel(was)
    if structlog.is_configured():
        structlog.reset_defaults()
