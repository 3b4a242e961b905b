"""``serve --require-sync-standby`` on a server with no standby: every command is UNAVAILABLE with reason
NOT_REPLICATED and RetryInfo, never a false success, and never INTERNAL.

The tests' server has no standby, the state of a primary running alone; the commits are made and not
acknowledged. The positive case, with a real standby, is tests/ha/test_sync_guard.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from psycopg.conninfo import make_conninfo

from service.api.config import ServeConfig
from service.api.server import RunningServer, start_server
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import ADMIN_TOKEN, error_info, fails, new_id

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def guarded_server(
    database_url: str, service_login: object, may_read_stats: None
) -> AsyncIterator[RunningServer]:
    login = await service_login.url(database_url)  # type: ignore[attr-defined]
    running = await start_server(
        ServeConfig(
            listen="127.0.0.1:0",
            # The tests' server turns synchronous_commit off; a primary under the guard has it on.
            database_url=make_conninfo(login, options="-c synchronous_commit=on"),
            admin_token=ADMIN_TOKEN,
            require_sync_standby=True,
        )
    )
    try:
        yield running
    finally:
        await running.stop(grace=2.0)


async def test_a_command_not_on_a_standby_is_not_acknowledged(guarded_server: RunningServer) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{guarded_server.port}") as channel:
        stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
        request = pb.CreateGameRequest(command_id=new_id(), variant=pb.CLASSIC, players=["a", "b"])
        for _ in range(2):  # the first run, and the client's retry with the same command id
            error = await fails(stub.CreateGame(request))
            assert error.code() is grpc.StatusCode.UNAVAILABLE, f"{error.code()}: {error.details()}"
            assert error_info(error).reason == "NOT_REPLICATED"
            status = rpc_status.from_call(error)
            assert status is not None
            assert any(d.Is(error_details_pb2.RetryInfo.DESCRIPTOR) for d in status.details)
            assert "psycopg" not in (error.details() or "")
