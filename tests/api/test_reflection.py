"""Server reflection as generic tools use it: both protocol versions, and the error details' types.

Each version is asked over a raw stream on its own method path. The ``v1alpha`` client uses
grpcio-reflection's classes; the ``v1`` client uses classes built from the ``v1`` file the server describes
through ``v1alpha``, so the ``v1`` service is checked as a tool that knows only the served descriptors would
see it. A failed call's ``google.rpc.Status`` and its ``ErrorInfo`` are then decoded with descriptors that
reflection alone provided, in a pool of their own.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from grpc_reflection.v1alpha import reflection_pb2

from service.api.reflection import ERROR_FILES, V1_FILE, V1_SERVICE
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import error_info

pytestmark = pytest.mark.timeout(30)

GAME_SERVICE = "uno.audit.v1.GameService"
V1ALPHA_SERVICE = "grpc.reflection.v1alpha.ServerReflection"


class Reflection:
    """A reflection client for one protocol version, on a raw stream, over the given message classes."""

    def __init__(self, channel: grpc.aio.Channel, service: str, request: Any, response: Any) -> None:
        self.request, self.response = request, response
        self.call = channel.stream_stream(
            f"/{service}/ServerReflectionInfo",
            request_serializer=request.SerializeToString,
            response_deserializer=response.FromString,
        )

    async def ask(self, **request: str) -> Any:
        """One request's answer; a reflection error (NOT_FOUND...) fails the test with its message."""
        replies = [reply async for reply in self.call(iter([self.request(**request)]))]
        assert len(replies) == 1
        assert not replies[0].HasField("error_response"), (request, replies[0].error_response)
        return replies[0]

    async def files(self, **request: str) -> list[descriptor_pb2.FileDescriptorProto]:
        reply = await self.ask(**request)
        return [
            descriptor_pb2.FileDescriptorProto.FromString(raw)
            for raw in reply.file_descriptor_response.file_descriptor_proto
        ]


def pool_of(files: Iterable[descriptor_pb2.FileDescriptorProto]) -> descriptor_pool.DescriptorPool:
    """A fresh pool holding ``files`` (each answer carries its file's dependencies), dependencies first."""
    by_name = {f.name: f for f in files}
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(name: str) -> None:
        if name not in added:
            for dependency in by_name[name].dependency:
                add(dependency)
            pool.AddSerializedFile(by_name[name].SerializeToString())
            added.add(name)

    for name in by_name:
        add(name)
    return pool


def message_class(pool: descriptor_pool.DescriptorPool, name: str) -> Any:
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


@pytest.fixture(params=["v1", "v1alpha"])
async def reflect(request: pytest.FixtureRequest, channel: grpc.aio.Channel) -> Reflection:
    v1alpha = Reflection(
        channel,
        V1ALPHA_SERVICE,
        reflection_pb2.ServerReflectionRequest,
        reflection_pb2.ServerReflectionResponse,
    )
    if request.param == "v1alpha":
        return v1alpha
    served = pool_of(await v1alpha.files(file_containing_symbol=V1_SERVICE))
    assert served.FindServiceByName(V1_SERVICE).file.name == V1_FILE
    package = V1_SERVICE.rsplit(".", 1)[0]
    return Reflection(
        channel,
        V1_SERVICE,
        message_class(served, f"{package}.ServerReflectionRequest"),
        message_class(served, f"{package}.ServerReflectionResponse"),
    )


async def test_lists_the_services_with_both_reflection_versions(reflect: Reflection) -> None:
    reply = await reflect.ask(list_services="")
    listed = {service.name for service in reply.list_services_response.service}
    assert listed == {
        GAME_SERVICE,
        "uno.audit.v1.AuditService",
        "uno.audit.v1.CheckpointService",
        "grpc.health.v1.Health",
        V1ALPHA_SERVICE,
        V1_SERVICE,
    }


async def test_every_listed_service_resolves(reflect: Reflection) -> None:
    """A tool describes what it lists: each service's file, with its dependencies, builds in a pool."""
    reply = await reflect.ask(list_services="")
    for listed in reply.list_services_response.service:
        pool = pool_of(await reflect.files(file_containing_symbol=listed.name))
        assert pool.FindServiceByName(listed.name).methods, listed.name


async def test_describes_the_game_service(reflect: Reflection) -> None:
    pool = pool_of(await reflect.files(file_containing_symbol=GAME_SERVICE))
    described = pool.FindServiceByName(GAME_SERVICE)
    compiled = pb.DESCRIPTOR.services_by_name["GameService"]
    assert [m.name for m in described.methods] == [m.name for m in compiled.methods]
    assert described.methods_by_name["WatchGame"].server_streaming


@pytest.mark.parametrize("filename", ERROR_FILES)
async def test_resolves_the_error_detail_files(reflect: Reflection, filename: str) -> None:
    files = await reflect.files(file_by_filename=filename)
    assert files[0].name == filename
    pool_of(files).FindFileByName(filename)


async def test_an_error_info_decodes_with_reflected_descriptors_only(
    reflect: Reflection, channel: grpc.aio.Channel
) -> None:
    """As grpcurl or ``buf curl`` does: the status from the trailers, each detail by its Any's type URL."""
    stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await stub.GetGame(pb.GetGameRequest(game_id="no-such-game"))
    assert failed.value.code() is grpc.StatusCode.NOT_FOUND
    trailers = dict(failed.value.trailing_metadata() or ())
    raw_status = trailers["grpc-status-details-bin"]
    assert isinstance(raw_status, bytes)

    status = message_class(
        pool_of(await reflect.files(file_by_filename="google/rpc/status.proto")), "google.rpc.Status"
    ).FromString(raw_status)
    decoded: dict[str, Any] = {}
    for detail in status.details:
        symbol = detail.type_url.rsplit("/", 1)[1]
        cls = message_class(pool_of(await reflect.files(file_containing_symbol=symbol)), symbol)
        decoded[symbol] = cls.FromString(detail.value)

    info = decoded["google.rpc.ErrorInfo"]
    expected = error_info(failed.value)
    assert (info.reason, info.domain, dict(info.metadata)) == (
        expected.reason,
        expected.domain,
        dict(expected.metadata),
    )
    assert info.reason == "NOT_FOUND"


def test_the_server_module_alone_registers_the_error_files() -> None:
    """The in-process server shares this process's pool, where the tests' imports put the error files
    anyway; a fresh interpreter that imports only the server shows what ``uno-audit serve`` can resolve."""
    script = (
        "import sys; from google.protobuf import descriptor_pool; import service.api.server; "
        "[descriptor_pool.Default().FindFileByName(name) for name in sys.argv[1:]]"
    )
    subprocess.run([sys.executable, "-c", script, *ERROR_FILES], check=True, timeout=20)


@pytest.mark.parametrize("protocol", ["grpc-v1", "grpc-v1alpha"])
async def test_buf_curl_calls_through_either_reflection_version(address: str, protocol: str) -> None:
    """A generic client outside Python (the buf CLI of the dev extra, written in Go) takes the schema from
    reflection in the version it is told, then calls."""
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "buf"),
        "curl",
        "--protocol=grpc",
        f"--reflect-protocol={protocol}",
        "--emit-defaults",
        "--data={}",
        f"http://{address}/uno.audit.v1.GameService/ListGames",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 20)
    assert process.returncode == 0, err.decode()
    assert json.loads(out) == {"games": [], "nextPageToken": ""}
