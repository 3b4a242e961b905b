"""The standard gRPC services beside GameService: health checking and server reflection."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import descriptor_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb

pytestmark = pytest.mark.timeout(30)

GAME_SERVICE = "uno.audit.v1.GameService"


async def test_health_reports_serving(channel: grpc.aio.Channel) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    for service in ("", GAME_SERVICE):
        reply = await health.Check(health_pb2.HealthCheckRequest(service=service))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING, service
    with pytest.raises(grpc.aio.AioRpcError) as unknown:
        await health.Check(health_pb2.HealthCheckRequest(service="uno.audit.v1.NoSuchService"))
    assert unknown.value.code() is grpc.StatusCode.NOT_FOUND


async def test_reflection_lists_and_describes_the_game_service(channel: grpc.aio.Channel) -> None:
    reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
    requests = [
        reflection_pb2.ServerReflectionRequest(list_services=""),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol=GAME_SERVICE),
    ]
    replies = [reply async for reply in reflection.ServerReflectionInfo(iter(requests))]
    assert len(replies) == 2

    listed = {s.name for s in replies[0].list_services_response.service}
    assert {GAME_SERVICE, "grpc.health.v1.Health"} <= listed

    files = [
        descriptor_pb2.FileDescriptorProto.FromString(raw)
        for raw in replies[1].file_descriptor_response.file_descriptor_proto
    ]
    described = {
        f"{f.package}.{service.name}": [m.name for m in service.method]
        for f in files
        for service in f.service
    }
    expected = [m.name for m in pb.DESCRIPTOR.services_by_name["GameService"].methods]
    assert described[GAME_SERVICE] == expected
    assert {"WatchGame", "GetScores", "GetStandings", "GetHand", "GetProjectionLag"} <= set(expected)
    assert len(expected) == 18
