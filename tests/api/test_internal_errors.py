"""Nothing reaches a client as UNKNOWN: an exception no servicer expected is INTERNAL, naming only an error
id, and the JSON log holds the same id with the method and the traceback (service/api/errors.py)."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import grpc
import pytest
import structlog

from service.app.auditor import Auditor
from service.app.handler import CommandHandler
from uno_audit_client.gen.uno.audit.v1 import audit_pb2, audit_pb2_grpc
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import ADMIN, create_game, error_info, fails

pytestmark = pytest.mark.timeout(30)

#: What a bug's exception might carry: none of it may reach the client.
SECRET = "SELECT seed FROM game_secrets -- R7 B2 W+4"


async def _broken(*_args: Any, **_kwargs: Any) -> Any:
    raise RuntimeError(SECRET)


def _internal(error: grpc.aio.AioRpcError, logged: list[MutableMapping[str, Any]], method: str) -> None:
    assert error.code() is grpc.StatusCode.INTERNAL
    info = error_info(error)
    error_id = info.metadata["error_id"]
    assert info.reason == "INTERNAL" and len(error_id) == 16
    assert error.details() == f"internal error {error_id}"
    assert "RuntimeError" not in (error.details() or "") and "R7" not in (error.details() or "")
    [entry] = [e for e in logged if e.get("error_id") == error_id]
    assert entry["log_level"] == "error" and entry["method"] == method
    assert isinstance(entry["exc_info"], RuntimeError) and SECRET in str(entry["exc_info"])


async def test_a_unary_rpc_that_breaks_is_internal_with_an_error_id(
    stub: pb_grpc.GameServiceStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    game = await create_game(stub)
    monkeypatch.setattr(CommandHandler, "load", _broken)
    with structlog.testing.capture_logs() as logged:
        error = await fails(stub.GetGame(pb.GetGameRequest(game_id=game.game_id)))
    _internal(error, logged, "/uno.audit.v1.GameService/GetGame")


async def test_a_streaming_rpc_that_breaks_is_internal_with_an_error_id(
    stub: pb_grpc.GameServiceStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    game = await create_game(stub)
    monkeypatch.setattr(CommandHandler, "load", _broken)
    with structlog.testing.capture_logs() as logged:
        error = await fails(stub.WatchGame(pb.WatchGameRequest(game_id=game.game_id)).read())
    _internal(error, logged, "/uno.audit.v1.GameService/WatchGame")


async def test_the_audit_service_breaks_the_same_way(
    stub: pb_grpc.GameServiceStub, channel: grpc.aio.Channel, monkeypatch: pytest.MonkeyPatch
) -> None:
    game = await create_game(stub)
    audit = audit_pb2_grpc.AuditServiceStub(channel)  # type: ignore[no-untyped-call]
    monkeypatch.setattr(Auditor, "verify", _broken)
    with structlog.testing.capture_logs() as logged:
        error = await fails(
            audit.VerifyGame(audit_pb2.VerifyGameRequest(game_id=game.game_id), metadata=ADMIN)
        )
    _internal(error, logged, "/uno.audit.v1.AuditService/VerifyGame")


async def test_a_refusal_is_still_its_own_status_and_the_server_goes_on(
    stub: pb_grpc.GameServiceStub,
) -> None:
    """The interceptor maps refusals too (a servicer only raises them), and a broken call hurts no other."""
    error = await fails(stub.GetGame(pb.GetGameRequest(game_id="")))
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    game = await create_game(stub)
    view = await stub.GetGame(pb.GetGameRequest(game_id=game.game_id))
    assert view.game_id == game.game_id
