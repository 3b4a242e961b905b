"""Retrying a call as docs/grpc.md ("Retrying") says: the same request, so the same command id.

``UNAVAILABLE``, ``DEADLINE_EXCEEDED`` and ``CANCELLED`` are retried (the server restarting, its database
out of reach, our own deadline, a server stopping gracefully); a command resent with its command id is
answered with its first result (``duplicate: true``), never applied twice. Each wait honours the server's
``google.rpc.RetryInfo`` and adds full jitter; :class:`RetryPolicy` bounds how long in all.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

Reply = TypeVar("Reply")

#: Every call this package makes may be repeated: reads change nothing, and a command resent with its
#: command id is answered with its first result. So a call cut off by our own deadline is retried like an
#: unavailable server, and so is one the server cancelled (a server that stops gracefully cancels the calls
#: still in flight when its grace ends). ABORTED is not here: it is a version conflict, which a resend
#: only meets again (re-read the game and decide again, under a new command id).
RETRYABLE = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}
)


def retryable(error: BaseException) -> bool:
    """Whether ``error`` is a call's status that the same request may be resent after."""
    return isinstance(error, grpc.aio.AioRpcError) and error.code() in RETRYABLE


def server_delay(error: BaseException | None) -> float:
    """The wait the server asked for (``google.rpc.RetryInfo.retry_delay`` in the status), else 0."""
    if not isinstance(error, grpc.aio.AioRpcError):
        return 0.0
    try:
        status = rpc_status.from_call(error)
    except ValueError:  # a status whose rich form disagrees with its code: no advice to honour
        return 0.0
    for detail in status.details if status is not None else ():
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            return max(0.0, float(info.retry_delay.ToTimedelta().total_seconds()))
    return 0.0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long and how often a call is repeated while the server is unavailable.

    The n-th wait is the server's RetryInfo delay (its floor: the server knows when it may be back) plus a
    random share of ``first_backoff * 2**(n-1)`` or of ``backoff_cap`` if less (full jitter, so clients
    that failed together do not come back together), and at most ``backoff_cap`` in all. No retry starts
    once ``retry_for`` seconds would have passed since the first attempt (0: never retry); each attempt has
    ``call_timeout`` seconds.

    This is done in the client rather than by a ``retryPolicy`` in the channel's service config because
    gRPC's own retries are invisible to the caller, so they cannot be counted, stop after 5 attempts
    whatever their backoff — too few to outlast a restart — and do not read RetryInfo.
    """

    retry_for: float = 60.0
    backoff_cap: float = 5.0
    first_backoff: float = 0.05
    call_timeout: float = 30.0

    def delay(self, attempt: int, error: BaseException | None) -> float:
        """The wait after the ``attempt``-th attempt (from 1) failed with ``error``."""
        # The exponent stops growing long after the cap is reached: 2**n would overflow a float in a day.
        ceiling = min(self.backoff_cap, self.first_backoff * 2.0 ** min(attempt - 1, 64))
        return min(self.backoff_cap, server_delay(error) + random.uniform(0, ceiling))

    def next_wait(self, attempt: int, error: BaseException, started: float) -> float | None:
        """The wait before attempt ``attempt + 1`` after ``error``, or ``None`` to give up: ``error`` is
        not retryable, or the retry would start ``retry_for`` seconds or more after ``started`` (a
        :func:`time.monotonic` reading taken before the first attempt)."""
        if not retryable(error):
            return None
        wait = self.delay(attempt, error)
        if time.monotonic() - started + wait >= self.retry_for:
            return None
        return wait

    async def run(
        self,
        attempt: Callable[[], Awaitable[Reply]],
        on_retry: Callable[[int, grpc.aio.AioRpcError], None] | None = None,
    ) -> Reply:
        """Await ``attempt()`` until it succeeds, fails for good, or time is up; the last error is raised
        as it came. ``on_retry(n, error)`` is told of each retry before its wait (n: the failed attempt)."""
        started = time.monotonic()
        number = 1
        while True:
            try:
                return await attempt()
            except grpc.aio.AioRpcError as error:
                wait = self.next_wait(number, error, started)
                if wait is None:
                    raise
                if on_retry is not None:
                    on_retry(number, error)
            await asyncio.sleep(wait)
            number += 1
