"""A database outage is UNAVAILABLE with RetryInfo for commands, reads and streams alike; nothing is
appended meanwhile, the server recovers by itself, and a command retried with its id is carried out once.

The outage is real and confined to this test's database: new connections to it are refused
(``ALLOW_CONNECTIONS false``) and its open ones terminated, while the PostgreSQL server stays up for
everyone else.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import grpc
import psycopg
import pytest
import structlog
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from projections.migrate import apply_migrations
from service.api.config import ServeConfig
from service.api.server import RunningServer, configure_logging, start_server
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import ADMIN_TOKEN, arranged_deck, count_rows, create_game, error_info, fails, header

if TYPE_CHECKING:
    from tests.conftest import ServiceLogin

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
async def quick_server(database_url: str, service_login: ServiceLogin) -> AsyncIterator[RunningServer]:
    """A server that waits at most one second for the database before answering UNAVAILABLE."""
    await apply_migrations(database_url)
    running = await start_server(
        ServeConfig(
            listen="127.0.0.1:0",
            database_url=await service_login.url(database_url),
            admin_token=ADMIN_TOKEN,
            database_timeout=1.0,
        )
    )
    try:
        yield running
    finally:
        await running.stop(grace=2.0)


async def _allow_connections(database_url: str, allowed: bool) -> None:
    """Open or close this test's database to new connections; closing also ends its open ones."""
    name = conninfo_to_dict(database_url)["dbname"]
    async with await psycopg.AsyncConnection.connect(
        make_conninfo(database_url, dbname="postgres"), autocommit=True
    ) as conn:
        await conn.execute(
            sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS {}").format(
                sql.Identifier(str(name)), sql.SQL("true" if allowed else "false")
            )
        )
        if not allowed:
            await conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )


def _unavailable(error: grpc.aio.AioRpcError) -> None:
    assert error.code() is grpc.StatusCode.UNAVAILABLE, f"{error.code()}: {error.details()}"
    assert error_info(error).reason == "DATABASE_UNAVAILABLE"
    status = rpc_status.from_call(error)
    assert status is not None
    retry = [d for d in status.details if d.Is(error_details_pb2.RetryInfo.DESCRIPTOR)]
    assert len(retry) == 1
    info = error_details_pb2.RetryInfo()
    retry[0].Unpack(info)
    assert info.retry_delay.seconds >= 1
    assert "psycopg" not in (error.details() or "") and "Error" not in (error.details() or "")


async def test_an_outage_is_unavailable_then_the_server_recovers(
    quick_server: RunningServer, database_url: str
) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{quick_server.port}") as channel:
        stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
        # A dealt round whose first card is a number, so the seat on turn may draw (no colour to choose).
        deck = arranged_deck({}, "R5", players=2)
        game = await create_game(stub, players=2, fixed_deck=deck, options={"dealer_selection": "given"})
        assert game.reply.view.awaiting == "play"
        turn = game.reply.view.turn
        draw = pb.DrawRequest(header=header(game.game_id))
        rows = await count_rows(database_url)

        await _allow_connections(database_url, False)
        try:
            _unavailable(await fails(stub.Draw(draw, metadata=game.seat(turn))))
            _unavailable(await fails(stub.GetGame(pb.GetGameRequest(game_id=game.game_id))))
            _unavailable(await fails(stub.WatchGame(pb.WatchGameRequest(game_id=game.game_id)).read()))
            _unavailable(
                await fails(
                    stub.CreateGame(
                        pb.CreateGameRequest(command_id="outage", variant=pb.CLASSIC, players=["a", "b"])
                    )
                )
            )
        finally:
            await _allow_connections(database_url, True)
        assert await count_rows(database_url) == rows  # nothing was appended while the database was away

        for _ in range(100):  # the pool reconnects by itself
            try:
                await stub.GetGame(pb.GetGameRequest(game_id=game.game_id))
                break
            except grpc.aio.AioRpcError as error:
                assert error.code() is grpc.StatusCode.UNAVAILABLE
                await asyncio.sleep(0.2)
        first = await stub.Draw(draw, metadata=game.seat(turn))  # the client's retry, same command id
        again = await stub.Draw(draw, metadata=game.seat(turn))
        assert not first.duplicate and again.duplicate and again.version == first.version
        counts = await count_rows(database_url)
        assert counts["commands"] == rows["commands"] + 1


def test_the_libraries_log_as_json_lines(capsys: pytest.CaptureFixture[str]) -> None:
    """psycopg's pool, grpc and the service's own lines all reach standard output as JSON objects."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        configure_logging()
        logging.getLogger("psycopg.pool").warning("error connecting in %r: %s", "uno-audit-store", "refused")
        try:
            raise ConnectionError("gone")
        except ConnectionError:
            logging.getLogger("grpc._server").exception("Exception calling application")
        structlog.get_logger("uno_audit.api").info("command", outcome="accepted")
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    finally:
        root.handlers, root.level = saved[0], saved[1]
        structlog.reset_defaults()
    assert [(line.get("logger"), line["level"], line["event"]) for line in lines] == [
        ("psycopg.pool", "warning", "error connecting in 'uno-audit-store': refused"),
        ("grpc._server", "error", "Exception calling application"),
        (None, "info", "command"),
    ]
    assert "ConnectionError: gone" in lines[1]["exception"]
    assert all("timestamp" in line for line in lines)
