"""The one mapping of the service's errors (:mod:`service.domain.errors`) to gRPC statuses with rich details.

:class:`ErrorStatuses` is the interceptor that applies it to every method of every service, so a servicer only
raises and nothing reaches a client as UNKNOWN; anything unexpected is INTERNAL with an error id. The table of
errors and statuses, and why: docs/DESIGN.md ("Errors and statuses").
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import grpc
import structlog
from google.protobuf import any_pb2, duration_pb2
from google.protobuf.message import DecodeError
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from service.domain.errors import (
    AlreadyExists,
    Conflict,
    DataLoss,
    InvalidInput,
    NotFound,
    PermissionDenied,
    Precondition,
    ResourceExhausted,
    RuleViolation,
    ServiceError,
    Unauthenticated,
    Unavailable,
)
from service.store import NotReplicated, database_away

DOMAIN = "uno-audit"
#: How long a client should wait before retrying an UNAVAILABLE call (RetryInfo.retry_delay).
RETRY_DELAY_SECONDS = 1

log = structlog.get_logger("uno_audit.api")

CODES: Mapping[type[ServiceError], grpc.StatusCode] = {
    InvalidInput: grpc.StatusCode.INVALID_ARGUMENT,
    NotFound: grpc.StatusCode.NOT_FOUND,
    RuleViolation: grpc.StatusCode.FAILED_PRECONDITION,
    Precondition: grpc.StatusCode.FAILED_PRECONDITION,
    Conflict: grpc.StatusCode.ABORTED,
    AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    Unavailable: grpc.StatusCode.UNAVAILABLE,
    ResourceExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
    DataLoss: grpc.StatusCode.DATA_LOSS,
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
    """The ``grpc.Status`` carrying ``google.rpc.Status`` with an ErrorInfo detail (and, for invalid
    input, a BadRequest naming the field)."""
    code = code_of(error)
    details = [
        _packed(
            error_details_pb2.ErrorInfo(reason=error.reason, domain=DOMAIN, metadata=dict(error.metadata))
        )
    ]
    if isinstance(error, Unavailable):
        details.append(
            _packed(
                error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=RETRY_DELAY_SECONDS))
            )
        )
    if isinstance(error, ResourceExhausted):
        # Every limit is a quota: which one, for whom, and when to try again (docs/OPERATIONS.md).
        subject = error.metadata.get("scope", "server")
        violation = error_details_pb2.QuotaFailure.Violation(subject=subject, description=error.message)
        details.append(_packed(error_details_pb2.QuotaFailure(violations=[violation])))
        delay = int(error.metadata.get("retry_after", RETRY_DELAY_SECONDS))
        details.append(_packed(error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=delay))))
    if isinstance(error, InvalidInput):
        violation = error_details_pb2.BadRequest.FieldViolation(field=error.field, description=error.message)
        details.append(_packed(error_details_pb2.BadRequest(field_violations=[violation])))
    return _status(code, error.message, details)


def internal_status(error_id: str) -> grpc.Status:
    """INTERNAL for a failure that is not the client's doing, naming only the id the log holds it under."""
    info = error_details_pb2.ErrorInfo(reason="INTERNAL", domain=DOMAIN, metadata={"error_id": error_id})
    return _status(grpc.StatusCode.INTERNAL, f"internal error {error_id}", [_packed(info)])


def _packed(detail: Any) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(detail)
    return packed


def _status(code: grpc.StatusCode, message: str, details: list[any_pb2.Any]) -> grpc.Status:
    status: grpc.Status = rpc_status.to_status(
        status_pb2.Status(code=getattr(code_pb2, code.name), message=message, details=details)
    )
    return status


def database_refusal(error: BaseException) -> Unavailable | None:
    """What a client is told of a database error that a retry may get past: a failover's (the server
    gone, restarting, no longer the primary: :func:`~service.store.database_away`), or a commit not yet
    proven on the synchronous standby; ``None`` for any other error (INTERNAL: not the client's doing)."""
    if isinstance(error, NotReplicated):
        return Unavailable(
            "the command was committed but is not yet on a synchronous standby, so it is not acknowledged; "
            "retry with the same command id",
            reason="NOT_REPLICATED",
        )
    if database_away(error):
        return Unavailable(
            "the database is unavailable; retry (with the same command id)", reason="DATABASE_UNAVAILABLE"
        )
    return None


async def abort(context: grpc.aio.ServicerContext[Any, Any], method: str, error: Exception) -> None:
    """End the call with ``error``'s status (``abort_with_status`` raises). An exception that is not a
    :class:`ServiceError` is logged with its traceback under a fresh error id and answered INTERNAL."""
    refusal = database_refusal(error)
    if refusal is not None:
        log.warning("database unavailable", method=method, error=type(error).__name__, reason=refusal.reason)
        error = refusal
    if isinstance(error, ServiceError):
        await context.abort_with_status(status_of(error))
    error_id = uuid.uuid4().hex[:16]
    log.error("internal error", method=method, error_id=error_id, exc_info=error)
    await context.abort_with_status(internal_status(error_id))


class ErrorStatuses(grpc.aio.ServerInterceptor):
    """The one place where what a servicer raises becomes a status, for every method of every service."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None:
            return handler
        if handler.unary_unary is not None and inspect.iscoroutinefunction(handler.unary_unary):
            return grpc.unary_unary_rpc_method_handler(
                _guard_unary(method, handler.unary_unary),
                request_deserializer=_parsing(handler.request_deserializer),
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None and inspect.isasyncgenfunction(handler.unary_stream):
            return grpc.unary_stream_rpc_method_handler(
                _guard_stream(method, handler.unary_stream),
                request_deserializer=_parsing(handler.request_deserializer),
                response_serializer=handler.response_serializer,
            )
        return handler  # the libraries' services (health's Watch, reflection) answer for themselves


#: What the deserializer of :func:`_parsing` gives for a request protobuf cannot parse.
UNPARSED = object()


def _unparsed() -> InvalidInput:
    return InvalidInput(
        "request",
        "protobuf cannot parse it (nested more than 100 levels deep, or not a message of this method)",
    )


def _parsing(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    """The method's request deserializer, giving :data:`UNPARSED` where it would raise (the guards then
    answer INVALID_ARGUMENT; an exception here would reach the client as UNKNOWN)."""
    if deserializer is None:
        return None

    def parse(data: bytes) -> Any:
        try:
            return deserializer(data)
        except DecodeError:
            return UNPARSED

    return parse


def _guard_unary(
    method: str, behaviour: Callable[[Any, Any], Awaitable[Any]]
) -> Callable[[Any, Any], Awaitable[Any]]:
    async def guarded(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        if request is UNPARSED:
            await abort(context, method, _unparsed())
        try:
            return await behaviour(request, context)
        except grpc.aio.AbortError:
            raise  # the call was already ended with its status
        except Exception as error:
            await abort(context, method, error)

    return guarded


def _guard_stream(
    method: str, behaviour: Callable[[Any, Any], AsyncIterator[Any]]
) -> Callable[[Any, Any], AsyncIterator[Any]]:
    async def guarded(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
        if request is UNPARSED:
            await abort(context, method, _unparsed())
        try:
            async for item in behaviour(request, context):
                yield item
        except grpc.aio.AbortError:
            raise
        except Exception as error:
            await abort(context, method, error)

    return guarded
