"""The one mapping of the service's errors (:mod:`service.errors`) to gRPC statuses with rich details.

Every refusal becomes its status code, its message, and a ``google.rpc.ErrorInfo`` detail whose ``reason``
is the error's machine reason (a rule id for a rule violation, ``VERSION_CONFLICT``, ``GAME_EXISTS``, …)
and whose metadata is the error's (the field, the actual version, the game id…):

============================  ======================
error                         status
============================  ======================
``InvalidInput``              INVALID_ARGUMENT
``NotFound``                  NOT_FOUND
``RuleViolation``             FAILED_PRECONDITION
``Precondition``              FAILED_PRECONDITION
``Conflict``                  ABORTED
``AlreadyExists``             ALREADY_EXISTS
``Unavailable``               UNAVAILABLE
``Unauthenticated``           UNAUTHENTICATED
``PermissionDenied``          PERMISSION_DENIED
============================  ======================
"""

from __future__ import annotations

from collections.abc import Mapping

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from service.errors import (
    AlreadyExists,
    Conflict,
    InvalidInput,
    NotFound,
    PermissionDenied,
    Precondition,
    RuleViolation,
    ServiceError,
    Unauthenticated,
    Unavailable,
)

DOMAIN = "uno-audit"

CODES: Mapping[type[ServiceError], grpc.StatusCode] = {
    InvalidInput: grpc.StatusCode.INVALID_ARGUMENT,
    NotFound: grpc.StatusCode.NOT_FOUND,
    RuleViolation: grpc.StatusCode.FAILED_PRECONDITION,
    Precondition: grpc.StatusCode.FAILED_PRECONDITION,
    Conflict: grpc.StatusCode.ABORTED,
    AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    Unavailable: grpc.StatusCode.UNAVAILABLE,
    Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
}


def code_of(error: ServiceError) -> grpc.StatusCode:
    """The status code of ``error``'s kind (a subclass takes its nearest registered ancestor's)."""
    for kind in type(error).__mro__:
        if kind in CODES:
            return CODES[kind]
    return grpc.StatusCode.INTERNAL


def status_of(error: ServiceError) -> grpc.Status:
    """The ``grpc.Status`` carrying ``google.rpc.Status`` with an ErrorInfo detail."""
    code = code_of(error)
    detail = any_pb2.Any()
    detail.Pack(
        error_details_pb2.ErrorInfo(reason=error.reason, domain=DOMAIN, metadata=dict(error.metadata))
    )
    status: grpc.Status = rpc_status.to_status(
        status_pb2.Status(code=getattr(code_pb2, code.name), message=error.message, details=[detail])
    )
    return status
