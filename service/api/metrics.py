"""The server's side of the metrics (:mod:`service.ops.metrics`): every call counted and timed, and the HTTP
endpoint Prometheus scrapes.

:class:`CallMetrics` is the server's outermost interceptor: it sees each call of every service (health and
reflection included) with the status it finally ends with, after :class:`~service.api.errors.ErrorStatuses`
turned what a servicer raised into one. Its status codes are spelled as the gRPC ecosystem's dashboards
and alerts expect them (``OK``, ``FailedPrecondition``, ``Canceled``…: go-grpc-prometheus's), not as
Python's ``grpc.StatusCode`` names.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIServer

import grpc
from prometheus_client import REGISTRY, start_http_server

from service.audit.game_report import GameReport
from service.ops import metrics

#: ``grpc.StatusCode`` as the ``grpc_code`` label spells it (Go's ``codes.Code.String()``).
CODE_LABELS = {
    grpc.StatusCode.OK: "OK",
    grpc.StatusCode.CANCELLED: "Canceled",
    grpc.StatusCode.UNKNOWN: "Unknown",
    grpc.StatusCode.INVALID_ARGUMENT: "InvalidArgument",
    grpc.StatusCode.DEADLINE_EXCEEDED: "DeadlineExceeded",
    grpc.StatusCode.NOT_FOUND: "NotFound",
    grpc.StatusCode.ALREADY_EXISTS: "AlreadyExists",
    grpc.StatusCode.PERMISSION_DENIED: "PermissionDenied",
    grpc.StatusCode.RESOURCE_EXHAUSTED: "ResourceExhausted",
    grpc.StatusCode.FAILED_PRECONDITION: "FailedPrecondition",
    grpc.StatusCode.ABORTED: "Aborted",
    grpc.StatusCode.OUT_OF_RANGE: "OutOfRange",
    grpc.StatusCode.UNIMPLEMENTED: "Unimplemented",
    grpc.StatusCode.INTERNAL: "Internal",
    grpc.StatusCode.UNAVAILABLE: "Unavailable",
    grpc.StatusCode.DATA_LOSS: "DataLoss",
    grpc.StatusCode.UNAUTHENTICATED: "Unauthenticated",
}

Context = grpc.aio.ServicerContext[Any, Any]


def _status(context: Context) -> str:
    """The status a call that returned or aborted ends with: the one set on its context, else OK."""
    code = context.code()
    return CODE_LABELS.get(code, "Unknown") if isinstance(code, grpc.StatusCode) else "OK"


class CallMetrics(grpc.aio.ServerInterceptor):
    """Counts every call of every service by type, service, method and status code, and times it."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None:  # an unknown method: gRPC answers UNIMPLEMENTED, and its name is the client's
            return None
        service, _, method = handler_call_details.method.lstrip("/").rpartition("/")
        kinds: tuple[tuple[str, Any, Callable[..., grpc.RpcMethodHandler[Any, Any]]], ...] = (
            ("unary", handler.unary_unary, grpc.unary_unary_rpc_method_handler),
            ("server_stream", handler.unary_stream, grpc.unary_stream_rpc_method_handler),
            ("client_stream", handler.stream_unary, grpc.stream_unary_rpc_method_handler),
            ("bidi_stream", handler.stream_stream, grpc.stream_stream_rpc_method_handler),
        )
        for kind, behaviour, make in kinds:
            if behaviour is None:
                continue
            start = functools.partial(metrics.GrpcCall, kind, service, method)
            if inspect.isasyncgenfunction(behaviour):
                observed: Any = _observed_stream(behaviour, start)
            elif inspect.iscoroutinefunction(behaviour):
                observed = _observed(behaviour, start, replies=1 if kind in ("unary", "client_stream") else 0)
            else:
                return handler  # a synchronous behaviour: none is registered on this asyncio server
            return make(
                observed,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler


def _observed(
    behaviour: Callable[[Any, Context], Awaitable[Any]],
    start: Callable[[], metrics.GrpcCall],
    *,
    replies: int,
) -> Callable[[Any, Context], Awaitable[Any]]:
    """A coroutine behaviour, observed: one that returns its reply (``replies`` 1, counted when it
    succeeds), or one that writes a stream with ``context.write`` (``replies`` 0: its writes are not seen
    from here, so not counted)."""

    async def observed(request: Any, context: Context) -> Any:
        call, code = start(), "Unknown"  # an exception gRPC turns into UNKNOWN
        try:
            reply = await behaviour(request, context)
            code = _status(context)
            if code == "OK" and replies:
                call.sent()
            return reply
        except grpc.aio.AbortError:
            code = _status(context)
            raise
        except asyncio.CancelledError:  # the client went away, or its deadline passed
            code = "Canceled"
            raise
        finally:
            call.ended(code)

    return observed


def _observed_stream(
    behaviour: Callable[[Any, Context], AsyncIterator[Any]], start: Callable[[], metrics.GrpcCall]
) -> Callable[[Any, Context], AsyncIterator[Any]]:
    """A stream behaviour (an async generator), observed: it ends when the generator does."""

    async def observed(request: Any, context: Context) -> AsyncIterator[Any]:
        call, code = start(), "Unknown"
        try:
            async for item in behaviour(request, context):
                call.sent()  # counted as it is handed to gRPC to send
                yield item
            code = _status(context)
        except grpc.aio.AbortError:
            code = _status(context)
            raise
        except (asyncio.CancelledError, GeneratorExit):  # the client went away mid-stream
            code = "Canceled"
            raise
        finally:
            call.ended(code)

    return observed


def verdict_of(report: GameReport) -> str:
    """A VerifyGame report's verdict, as ``uno_audit_verifications_total`` counts it: ``valid``, or the
    first problem in the order a reader looks for one."""
    replay = report.replay
    if report.valid:
        return "valid"
    if not report.chain.valid:
        return "chain_broken"
    if report.rules is None:
        return "unreadable"
    if replay is not None and replay.diverged_at is not None:
        return "diverged"
    if not report.rules_valid:
        return "rules_broken"
    if replay is not None and replay.outcome_differs:
        return "outcome_differs"
    return "other"


@dataclass(slots=True)
class Exporter:
    """The HTTP endpoint serving the registry (``/metrics``, any path in fact) from its own thread."""

    server: WSGIServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        return self.server.server_port

    def stop(self) -> None:
        """Stop serving and close the socket (blocks up to half a second: the server polls for it)."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def start_exporter(listen: str) -> Exporter:
    """Serve the metrics on ``listen`` (``host:port``, port 0 picks one; ``[::1]:port`` for IPv6) with
    ``prometheus_client``'s own HTTP server, in a daemon thread. ``OSError`` when it cannot listen there."""
    host, _, port = listen.rpartition(":")
    server, thread = start_http_server(int(port), addr=host.strip("[]"), registry=REGISTRY)
    return Exporter(server, thread)
