"""The floor of a Python gRPC server's CPU per command: a ``GameService`` that does nothing.

    python -m bench.grpc_floor --listen 127.0.0.1:PORT [--workers N]

It answers every table action the way ``uno-audit serve`` is called (the same method names, requests and
metadata) with no store, no rules and no checks: it parses the request, reads the caller's
``authorization`` metadata and answers with a reply of a typical size, made once at start (two events and
a seat's view with a seven-card hand, as a ``Play`` is answered). ``CreateGame`` answers a new game id
and ten seat tokens. With ``--workers N``, N processes serve one port (gRPC's ``SO_REUSEPORT``), as
``serve --workers N`` does.

``bench/service.py`` replays its commands against it with the same client as against the service: the
CPU this server spends per command is what grpcio's core, its asyncio binding and protobuf cost before
any of the service's own work, the part of the service's CPU per command no change to the service can
remove.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from google.protobuf import struct_pb2
from grpc_health.v1 import health_pb2_grpc
from grpc_health.v1.health import aio as health_aio

from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb

#: The table actions, by method name, with their request types.
ACTIONS: dict[str, type[Any]] = {
    "StartRound": pb.StartRoundRequest,
    "Play": pb.PlayRequest,
    "Draw": pb.DrawRequest,
    "Pass": pb.PassRequest,
    "Press": pb.PressRequest,
    "CallUno": pb.CallUnoRequest,
    "Catch": pb.CatchRequest,
    "Challenge": pb.ChallengeRequest,
    "Accept": pb.AcceptRequest,
    "Choose": pb.ChooseRequest,
}
SEATS = 10
_STOP = {signal.SIGTERM, signal.SIGINT}


def typical_reply() -> bytes:
    """A ``Play``'s reply as a seat sees it: the card played, the next prompt, and the seat's view."""
    events = []
    played: dict[str, Any] = {"player": 1, "card": "R5", "uno": False}
    prompted: dict[str, Any] = {"player": 2}
    for version, (kind, fields) in enumerate((("CardPlayed", played), ("Prompted", prompted)), start=40):
        payload = struct_pb2.Struct()
        payload.update(fields)
        event = pb.Event(position=1000 + version, version=version, type=kind, payload=payload, xid=5000)
        event.recorded_at.GetCurrentTime()
        events.append(event)
    view = pb.GameView(
        game_id=str(uuid.uuid4()),
        variant=pb.CLASSIC,
        players=[f"p{seat}" for seat in range(4)],
        version=41,
        awaiting="play",
        round=1,
        turn=2,
        direction=1,
        top="R5",
        colour="R",
        draw_pile=70,
        discard_pile=9,
        hand_sizes=[6, 6, 7, 7],
        scores=[0, 0, 0, 0],
        viewer_seat=1,
        hands=[pb.Hand(seat=1, cards=["R1", "G2", "B3", "Y4", "W", "R+2", "G9"])],
        exposed=-1,
        winner=-1,
        top_by=1,
    )
    reply = pb.CommandReply(version=41, events=events, view=view, receipt="x" * 180)
    return reply.SerializeToString()


def _action(request_type: type[Any], reply: bytes) -> Callable[[bytes, Any], Awaitable[bytes]]:
    async def answer(request: bytes, context: Any) -> bytes:
        parsed = request_type.FromString(request)
        dict(context.invocation_metadata()).get("authorization")
        if not parsed.header.game_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "header.game_id")
        return reply

    return answer


async def _create(request: bytes, context: Any) -> bytes:
    parsed = pb.CreateGameRequest.FromString(request)
    seats = [pb.SeatToken(seat=seat, player=f"p{seat}", token=uuid.uuid4().hex) for seat in range(SEATS)]
    return pb.CreateGameReply(
        game_id=str(uuid.uuid4()), version=len(parsed.players), seats=seats
    ).SerializeToString()


async def serve(listen: str) -> None:
    """Serve until SIGTERM or SIGINT."""
    reply = typical_reply()
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
        name: grpc.unary_unary_rpc_method_handler(_action(kind, reply)) for name, kind in ACTIONS.items()
    }
    handlers["CreateGame"] = grpc.unary_unary_rpc_method_handler(_create)
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("uno.audit.v1.GameService", handlers),)
    )
    health_pb2_grpc.add_HealthServicer_to_server(health_aio.HealthServicer(), server)  # "": SERVING
    server.add_insecure_port(listen)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(grace=1.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="a GameService that does nothing: gRPC's own CPU per call")
    parser.add_argument("--listen", required=True)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    if args.workers == 1:
        asyncio.run(serve(args.listen))
        return 0
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP)  # for sigwait, before a signal can come
    command = [sys.executable, "-m", "bench.grpc_floor", "--listen", args.listen]
    # Each process its own interpreter (gRPC's core does not survive a fork), with signals unblocked.
    workers = [
        subprocess.Popen(command, preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP))
        for _ in range(args.workers)
    ]
    signal.sigwait(_STOP)
    for worker in workers:
        worker.terminate()
    for worker in workers:
        worker.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
