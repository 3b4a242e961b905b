"""``uno-audit health``: ask a running server's ``grpc.health.v1`` service, for container health checks."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from service.cli.exits import EXIT_INVALID, EXIT_OK, EXIT_USAGE
from service.cli.options import bounded, tls_client_options


def register(commands: Any) -> None:
    """The ``health`` command."""
    health = commands.add_parser("health", help="ask a running server's gRPC health service")
    health.add_argument("--server", default="127.0.0.1:50051", help="host:port (default 127.0.0.1:50051)")
    health.add_argument(
        "--service",
        default="",
        metavar="NAME",
        help="a service's health, e.g. uno.audit.v1.GameService (default: the whole server's)",
    )
    health.add_argument(
        "--timeout", type=bounded(1, 600), default=5, metavar="S", help="give up after S seconds (default 5)"
    )
    tls_client_options(health)
    health.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """One line: the status the server's health service gives ``--service``; exit 0 only for SERVING.

    Container health checks (compose, ``docker run``) run a command in the container and read its exit
    status; this is that command (Kubernetes asks the same health service itself). A server that is
    stopping answers NOT_SERVING, an unknown service name is NOT_FOUND, a server that does not answer
    within ``--timeout`` is UNAVAILABLE or DEADLINE_EXCEEDED: all exit 1, so a check never passes by
    accident."""
    # gRPC's core would add its own lines about a refused connection: the one line here says it.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from service.api.tls import TLSError, channel_credentials

    try:
        credentials = channel_credentials(args.tls_ca, args.tls_cert, args.tls_key)
    except TLSError as error:
        print(f"uno-audit health: {error}", file=sys.stderr)
        return EXIT_USAGE
    name = args.service or "server"
    try:
        with (
            grpc.insecure_channel(args.server)
            if credentials is None
            else grpc.secure_channel(args.server, credentials)
        ) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=args.service), timeout=args.timeout
            )
    except grpc.RpcError as error:
        print(
            f"uno-audit health: {args.server} {name}: {error.code().name}: {error.details()}", file=sys.stderr
        )
        return EXIT_INVALID
    print(f"{args.server} {name}: {health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}")
    return EXIT_OK if reply.status == health_pb2.HealthCheckResponse.SERVING else EXIT_INVALID
