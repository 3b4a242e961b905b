"""gRPC errors with ``google.rpc.Status`` details: the code, a message, and the rule id as ErrorInfo.

DESIGN: INVALID_ARGUMENT for a malformed request (the message names the field), NOT_FOUND, FAILED_PRECONDITION
for a rule violation (``ErrorInfo.reason`` = the rule id of docs/RULES.md), ABORTED for a version
conflict the client asked to hear about, UNAUTHENTICATED, PERMISSION_DENIED.
"""

from __future__ import annotations

from collections.abc import Mapping

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

DOMAIN = "uno-audit"


class ApiError(Exception):
    """An RPC failure to report to the client; the servicer turns it into a rich status."""

    def __init__(
        self, code: grpc.StatusCode, message: str, reason: str | None = None, **metadata: str
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason
        self.metadata: Mapping[str, str] = metadata

    def status(self) -> grpc.Status:
        """The ``grpc.Status`` carrying ``google.rpc.Status`` with an ErrorInfo detail."""
        detail = any_pb2.Any()
        detail.Pack(
            error_details_pb2.ErrorInfo(
                reason=self.reason or self.code.name, domain=DOMAIN, metadata=dict(self.metadata)
            )
        )
        code_value = getattr(code_pb2, self.code.name)
        status: grpc.Status = rpc_status.to_status(
            status_pb2.Status(code=code_value, message=self.message, details=[detail])
        )
        return status


def invalid(field: str, message: str) -> ApiError:
    """INVALID_ARGUMENT naming the field."""
    return ApiError(grpc.StatusCode.INVALID_ARGUMENT, f"{field}: {message}", "INVALID_ARGUMENT", field=field)


def not_found(what: str) -> ApiError:
    return ApiError(grpc.StatusCode.NOT_FOUND, what, "NOT_FOUND")


def unauthenticated(message: str) -> ApiError:
    return ApiError(grpc.StatusCode.UNAUTHENTICATED, message, "UNAUTHENTICATED")


def denied(message: str) -> ApiError:
    return ApiError(grpc.StatusCode.PERMISSION_DENIED, message, "PERMISSION_DENIED")


def rule_violation(rule: str, message: str) -> ApiError:
    """FAILED_PRECONDITION for a command the rules do not allow; ``reason`` is the rule id."""
    return ApiError(grpc.StatusCode.FAILED_PRECONDITION, f"{rule}: {message}", rule, rule=rule)


def aborted(message: str, actual_version: int) -> ApiError:
    return ApiError(grpc.StatusCode.ABORTED, message, "VERSION_CONFLICT", actual_version=str(actual_version))
