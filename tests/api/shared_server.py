"""One server for a whole module: for modules whose tests each play games of their own and read nothing
but them (no listing of every game, no count of rows), so that a server and a database per test would
only cost time. Import the fixtures and mark the module to run in one event loop::

    from tests.api.shared_server import shared_address, shared_channel, shared_server  # noqa: F401

    pytestmark = pytest.mark.asyncio(loop_scope="module")
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import grpc
import pytest
import pytest_asyncio

from service.api.config import ServeConfig
from service.api.server import RunningServer, start_server
from tests.postgres import PostgresServer, service_url

from .support import ADMIN_TOKEN


@contextlib.asynccontextmanager
async def serving(database_url: str) -> AsyncIterator[RunningServer]:
    """``start_server`` on 127.0.0.1 (a free port) over ``database_url``'s migrated database (the owner's
    URL), logged in as the service's restricted login, admin token ADMIN_TOKEN; stopped afterwards."""
    running = await start_server(
        ServeConfig(listen="127.0.0.1:0", database_url=service_url(database_url), admin_token=ADMIN_TOKEN)
    )
    try:
        yield running
    finally:
        await running.stop(grace=2.0)


@pytest_asyncio.fixture(name="server", scope="module", loop_scope="module")
async def shared_server(
    postgres_server: PostgresServer, migrated_template: str
) -> AsyncIterator[RunningServer]:
    """``start_server`` on 127.0.0.1 over a database of the module's own (a copy of the migrated
    template), as tests/api/conftest.py's ``server`` but once per module."""
    database_url = postgres_server.create_database(template=migrated_template)
    try:
        async with serving(database_url) as running:
            yield running
    finally:
        postgres_server.drop_database(database_url)


@pytest.fixture(name="address", scope="module")
def shared_address(server: RunningServer) -> str:
    return f"127.0.0.1:{server.port}"


@pytest_asyncio.fixture(name="channel", scope="module", loop_scope="module")
async def shared_channel(address: str) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(address) as opened:
        yield opened
