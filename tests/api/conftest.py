"""Fixtures for the API tests: a real gRPC server in-process on a fresh database, and channels to it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from service.api.server import RunningServer
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

pytest.register_assert_rewrite("tests.api.support")

from .shared_server import serving  # noqa: E402


@pytest.fixture
async def server(database_url: str) -> AsyncIterator[RunningServer]:
    """A server over this test's database (migrated, a copy of the template): :func:`serving`."""
    async with serving(database_url) as running:
        yield running


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
