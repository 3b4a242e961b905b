"""Where a command's time goes on the server: its stages, the event loop's lag, the collector's pauses.

A command of GameService opens :func:`begin`; the layers below stamp it through the context (the append
marks when it queued and when its group went out), and :meth:`Stamps.stages` gives the five stages in
seconds. The ticker measures how late the event loop wakes it, and records the passes of the garbage
collector that :func:`watch_collector` timed. All of it is metrics (docs/grpc.md, "Metrics");
``serve --stage-timing`` also answers each command's stages to its client (bench/service.py's breakdown).
"""

from __future__ import annotations

import asyncio
import gc
import time
from contextvars import ContextVar
from typing import Any, Final

from service.ops import metrics

#: A command's stages, in order: checks and authentication, load and decide (and hashing), the wait for
#: the group its append joins, the database's statement, then the reply (views, receipt, log line).
STAGES: Final = ("admit", "decide", "group_wait", "database", "reply")

#: The trailing metadata key of a command's stages, when the server answers them (``--stage-timing``).
TIMING_KEY: Final = "uno-audit-timing"

#: The ticker's period: short enough to see a stall of a few milliseconds, long enough to cost nothing.
TICK_SECONDS: Final = 0.005

_current: ContextVar[Stamps | None] = ContextVar("uno_audit_stamps", default=None)


class Stamps:
    """One command's ``perf_counter`` readings (``time.perf_counter`` is ``CLOCK_MONOTONIC`` on Linux, so
    another process on the machine can compare them with its own)."""

    __slots__ = ("appended", "handled", "queued", "received", "sent", "settled")

    def __init__(self, received: float) -> None:
        self.received = received
        self.handled = self.queued = self.sent = self.settled = received
        #: Whether the command appended (a retry answered from the ledger, or a command with nothing to
        #: append, has no group wait or statement: its stages are not counted).
        self.appended = False

    def stages(self, replied: float) -> tuple[float, ...]:
        """The seconds of each of :data:`STAGES`, the reply ending at ``replied``."""
        return (
            self.handled - self.received,
            self.queued - self.handled,
            self.sent - self.queued,
            self.settled - self.sent,
            replied - self.settled,
        )


def begin(received: float) -> Stamps:
    """Stamps for the command this task runs, received at ``received``."""
    stamps = Stamps(received)
    _current.set(stamps)
    return stamps


def handled() -> None:
    """The command passed its checks and goes to the command handler."""
    stamps = _current.get()
    if stamps is not None:
        stamps.handled = stamps.queued = stamps.sent = stamps.settled = time.perf_counter()


def appended(queued: float, sent: float) -> None:
    """The command's append queued at ``queued``, went to the database at ``sent`` and is settled now."""
    stamps = _current.get()
    if stamps is not None:
        stamps.queued, stamps.sent, stamps.settled = queued, sent, time.perf_counter()
        stamps.appended = True


def end(stamps: Stamps, *, answer: bool) -> str | None:
    """Record the stages of a command that appended as metrics; with ``answer``, the ``uno-audit-timing``
    text its client is sent: ``received`` and ``replied`` as ``perf_counter`` nanoseconds, then each
    stage in microseconds."""
    replied = time.perf_counter()
    seconds = stamps.stages(replied)
    if stamps.appended:
        metrics.command_stages(STAGES, seconds)
    if not answer:
        return None
    stages = ",".join(f"{name}={round(s * 1e6)}" for name, s in zip(STAGES, seconds, strict=True))
    return f"received={round(stamps.received * 1e9)},replied={round(replied * 1e9)},{stages}"


async def tick(stopping: asyncio.Event) -> None:
    """Until ``stopping``: sleep :data:`TICK_SECONDS` and record how much later than asked the loop woke
    this task (a callback that holds the loop shows here), and the collector's passes since the last
    tick."""
    while not stopping.is_set():
        asked = time.perf_counter()
        await asyncio.sleep(TICK_SECONDS)
        metrics.loop_lag(max(0.0, time.perf_counter() - asked - TICK_SECONDS))
        while _paused:
            metrics.gc_pause(*_paused.pop())


_collecting: list[float] = []
#: The collector's passes not yet recorded: (generation, seconds). The callback only appends here: a pass
#: can start inside a metric's update, which holds a lock (prometheus_client's multiprocess mode holds one
#: for all of them), and a callback that took it again would wait for itself forever.
_paused: list[tuple[int, float]] = []


def _timed(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _collecting.append(time.perf_counter())
    elif _collecting:
        _paused.append((info["generation"], time.perf_counter() - _collecting.pop()))


def watch_collector() -> None:
    """Time every pass of the garbage collector from now on (once per process)."""
    if _timed not in gc.callbacks:
        gc.callbacks.append(_timed)


def settle_heap() -> None:
    """After start-up: collect once, then move every object alive to the permanent generation
    (``gc.freeze``), so no later pass walks the modules, the catalogue and the pools again."""
    gc.collect()
    gc.freeze()
