"""One process of ``uno-audit serve --workers N``: a server worker or the projector's process.

The supervisor (:mod:`service.api.workers`) starts it as a fresh interpreter and hands it its
:class:`~service.api.workers.WorkerPlan` on standard input; it reports on a status pipe ("bound",
"serving", "failed") and hears the supervisor's word ("go", the crash-loop state) on standard input.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import IO, Any

from projections.migrate import apply_migrations as migrate_projections
from projections.projector import run_projector
from service.api.config import GRACE_SECONDS, ListenError
from service.api.server import start_server, supervision_health
from service.api.workers import MULTIPROC_ENV, WorkerPlan
from service.checkpoints.keyring import Keyring
from service.checkpoints.keys import Signer, Verifier
from service.ops import metrics
from service.ops.logging import configure_logging, logger

_PR_SET_PDEATHSIG = 1  # linux/prctl.h
#: How often a worker copies its live figures (streams, pool) to its metric files in multiprocess mode.
MIRROR_SECONDS = 1.0


def _die_with_parent(parent: int) -> None:
    """Have the kernel kill this process when its parent dies, however it dies (SIGKILL included): a
    worker left behind would hold the port, and a restarted ``serve`` would find it taken."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    else:  # no death signal: watch the parent instead (a dead one makes init, or a reaper, our parent)

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(1)

        threading.Thread(target=watch, name="parent-watch", daemon=True).start()
    if os.getppid() != parent:  # it died before the death signal was asked for
        os._exit(1)


def worker_main() -> None:
    """A worker process: read the plan, serve until SIGTERM or SIGINT, report to the parent on the way."""
    plan: WorkerPlan = pickle.load(sys.stdin.buffer)
    _die_with_parent(plan.parent)
    status = os.fdopen(plan.status_fd, "w", buffering=1)
    configure_logging(plan.config.log_format, plan.config.log_level, worker=plan.index)
    import psycopg

    from service.api.tls import TLSError
    from service.store import StoreError

    try:
        asyncio.run(_work(plan, status))
    except (ListenError, TLSError, StoreError, psycopg.Error, OSError) as error:
        _say(status, {"failed": " ".join(str(error).split()) or type(error).__name__, "exit": 2})
        sys.exit(2)
    except BaseException as error:
        if isinstance(error, SystemExit):
            raise
        logger("server").exception("worker failed")
        _say(status, {"failed": f"worker {plan.index}: {type(error).__name__}: {error}", "exit": 1})
        sys.exit(1)


def _say(status: IO[str], message: dict[str, object]) -> None:
    with contextlib.suppress(OSError):  # a parent that is gone hears nothing (and we die with it)
        status.write(json.dumps(message) + "\n")


def _listen_to_parent(loop: asyncio.AbstractEventLoop, heard: Callable[[dict[str, Any]], None]) -> None:
    """Read the parent's lines on standard input in a thread, each handed to ``heard`` in the loop."""

    def read() -> None:
        # Raw reads of the descriptor, not sys.stdin: a daemon thread blocked inside the buffered reader
        # holds its lock, and the interpreter's shutdown then dies with "Fatal Python error" on stderr.
        fd, pending = sys.stdin.fileno(), b""
        while chunk := os.read(fd, 65536):
            *lines, pending = (pending + chunk).split(b"\n")
            for line in filter(bytes.strip, lines):
                with contextlib.suppress(ValueError, RuntimeError):  # a loop closed: the worker is stopping
                    loop.call_soon_threadsafe(heard, json.loads(line))

    threading.Thread(target=read, name="parent-lines", daemon=True).start()


async def _work(plan: WorkerPlan, status: IO[str]) -> None:
    log = logger("server")
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # SIGINT: Ctrl-C reaches the whole process group
        loop.add_signal_handler(sig, stopping.set)
    if not plan.serves:
        await _project(plan, status, stopping)
        return
    go = asyncio.Event()
    if not plan.hold:
        go.set()
    health: list[Any] = []
    crash_loop = [False]
    telling: set[asyncio.Task[None]] = set()

    def heard(message: dict[str, Any]) -> None:
        if message.get("go"):
            go.set()
        if "crash_loop" in message:
            crash_loop[0] = bool(message["crash_loop"])
            for servicer in health:
                told = loop.create_task(supervision_health(servicer, crash_loop=crash_loop[0]))
                telling.add(told)
                told.add_done_callback(telling.discard)

    _listen_to_parent(loop, heard)

    async def bound() -> None:  # every worker binds before any accepts: see _started
        _say(status, {"bound": plan.index})
        await go.wait()

    keyring = Keyring(Signer.parse(plan.signer), tuple(Verifier.parse(text) for text in plan.older))
    running = await start_server(
        # The projector runs in a process of its own, and the supervisor serves every worker's metrics.
        replace(plan.config, projector=False, metrics_listen=None),
        keyring=keyring,
        reuse_port=True,
        bound=bound,
    )
    health.append(running.health)
    await supervision_health(running.health, crash_loop=crash_loop[0])
    mirroring = asyncio.create_task(_mirror_live_figures(stopping)) if os.environ.get(MULTIPROC_ENV) else None
    log.info(
        "worker serving", address=plan.config.listen, pid=os.getpid(), key=f"{keyring.signer.key_id:08x}"
    )
    _say(status, {"serving": plan.index, "port": running.port})
    await stopping.wait()
    log.info("worker stopping: finishing in-flight commands", grace_seconds=GRACE_SECONDS)
    await running.stop()
    if mirroring is not None:
        await mirroring
    log.info("worker stopped")


async def _mirror_live_figures(stopping: asyncio.Event) -> None:
    """In multiprocess mode, copy this worker's live figures (streams, pool) to its metric files."""
    while not stopping.is_set():
        metrics.mirror_live()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), MIRROR_SECONDS)
    metrics.mirror_live()


async def _project(plan: WorkerPlan, status: IO[str], stopping: asyncio.Event) -> None:
    """The projector's process: migrate (a failure is reported as a worker's failure to start), then
    keep the read models current until SIGTERM or SIGINT, riding out database outages on its own."""
    log = logger("server")
    await migrate_projections(plan.config.database_url)
    log.info("projector process running", pid=os.getpid())
    _say(status, {"bound": plan.index})
    _say(status, {"serving": plan.index})
    await run_projector(plan.config.database_url, stop=stopping)
    log.info("projector process stopped")
