"""Server reflection in both versions, ``grpc.reflection.v1`` and ``v1alpha``, error details included.

The ``v1alpha`` servicer answers the ``v1`` method too (the messages are the same bytes), and the
``google.rpc`` detail types are imported so tools print their fields. docs/DESIGN.md ("Server reflection").
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
