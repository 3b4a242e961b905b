"""Fixtures for the API tests: a real gRPC server in-process on a fresh database, and channels to it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import grpc
import pytest

from projections.migrate import apply_migrations
from service.api.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc
from service.api.server import RunningServer, start_server

if TYPE_CHECKING:  # the root conftest is not importable as a module of a package
    from tests.conftest import ServiceLogin

pytest.register_assert_rewrite("tests.api.support")

from .support import ADMIN_TOKEN  # noqa: E402


@pytest.fixture
async def server(database_url: str, service_login: ServiceLogin) -> AsyncIterator[RunningServer]:
    """``start_server`` on 127.0.0.1 (a free port) over this test's database, admin token ADMIN_TOKEN: the
    owner migrates the database, the server logs in as the service's restricted login."""
    await apply_migrations(database_url)
    running = await start_server(
        listen="127.0.0.1:0", database_url=await service_login.url(database_url), admin_token=ADMIN_TOKEN
    )
    try:
        yield running
    finally:
        await running.stop(grace=2.0)


@pytest.fixture
def address(server: RunningServer) -> str:
    return f"127.0.0.1:{server.port}"


@pytest.fixture
async def channel(address: str) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(address) as opened:
        yield opened


@pytest.fixture
def stub(channel: grpc.aio.Channel) -> pb_grpc.GameServiceStub:
    return pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
