"""Server reflection in both versions, ``grpc.reflection.v1`` and ``v1alpha``, error details included.

grpcio-reflection serves only ``grpc.reflection.v1alpha.ServerReflection``, which gRPC deprecated: tools
that ask ``v1`` (grpc-java's and grpc-go's clients, newer releases of generic tools) get UNIMPLEMENTED. The
``v1`` protocol is ``v1alpha`` under a new package name, message for message and field for field (gRPC's
``reflection/v1/reflection.proto``), so the bytes of one are the bytes of the other: the ``v1alpha``
servicer answers the ``v1`` method too, decoding and encoding with the ``v1alpha`` classes. So that a tool
can also describe the ``v1`` service it lists, its file is derived from the ``v1alpha`` one (renamed,
without the deprecation option) and added to the descriptor pool the servicer reads.

The servicer resolves files and symbols in protobuf's default pool, which holds what this process imported.
A failed call's details are ``google.protobuf.Any`` values naming ``google.rpc.ErrorInfo``, ``BadRequest``
or ``RetryInfo``; importing their files here keeps them resolvable whatever else the server imports, so
that a client that looks the types up through reflection (grpcurl) prints their fields, not bytes.
"""

from __future__ import annotations

from collections.abc import Iterable

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from google.rpc import error_details_pb2, status_pb2
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

V1_SERVICE = "grpc.reflection.v1.ServerReflection"
V1_FILE = "grpc/reflection/v1/reflection.proto"
#: The files a failed call's status (``grpc-status-details-bin``) and its details need.
ERROR_FILES = (status_pb2.DESCRIPTOR.name, error_details_pb2.DESCRIPTOR.name)


def _register_v1_file() -> None:
    """Add the ``v1`` reflection file to the default pool, unless this process already holds it."""
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(V1_FILE)
        return
    except KeyError:
        pass
    old, new = reflection_pb2.DESCRIPTOR.package, V1_SERVICE.rsplit(".", 1)[0]
    proto = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(proto)
    proto.name, proto.package = V1_FILE, new
    proto.ClearField("options")
    for message in proto.message_type:
        for field in message.field:
            if field.HasField("type_name"):
                field.type_name = field.type_name.replace(f".{old}.", f".{new}.")
    for method in proto.service[0].method:
        method.input_type = method.input_type.replace(f".{old}.", f".{new}.")
        method.output_type = method.output_type.replace(f".{old}.", f".{new}.")
    pool.AddSerializedFile(proto.SerializeToString())


def enable_reflection(service_names: Iterable[str], server: grpc.aio.Server) -> None:
    """Serve reflection on ``server`` under both names, listing ``service_names`` and itself."""
    _register_v1_file()
    servicer = reflection.aio.ReflectionServicer((*service_names, reflection.SERVICE_NAME, V1_SERVICE))
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
    v1 = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(V1_SERVICE, {"ServerReflectionInfo": v1}),)
    )
