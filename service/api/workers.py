"""Several server processes on one port: ``uno-audit serve --workers N``.

One server process decides and appends commands on one core at most (one event loop, one GIL), so on a
machine with more cores ``serve`` runs N of them. Each worker is a whole server (:func:`start_server`):
its own pool of database connections, its own state cache, its own LISTEN for ``WatchGame``. Nothing is
shared between them but the database, and nothing needs to be: a command decided on a state another
worker has since moved on is refused by the store's version check and decided again on the fresh state
(:mod:`service.runner`), exactly as it is between two replicas of the service. The projector runs in a
process of its own beside them (one at a time works anyway; one is enough): a batch folds and writes
for milliseconds, and in a serving worker every command arriving meanwhile would wait for it.

The kernel shares the port between the workers (``SO_REUSEPORT``) and hands each new *connection* to one
of them; a connection stays with its worker, so a client with one channel talks to one worker, and many
clients spread over all of them.

``SO_REUSEPORT`` lets any process of the same user bind the port as well, which is exactly what the
single-process server refuses (``grpc.so_reuseport`` 0 in :func:`start_server`): a second ``serve`` on a
taken port must fail, not answer every other call. So the parent first binds the address itself with a
plain socket that does *not* ask for ``SO_REUSEPORT`` (:func:`probe_listen`): that bind fails if anything
listens there, a single-process server or another ``serve --workers N`` alike, and ``serve`` exits 2.

The parent does the start-up checks, starts the embedded database if there is one (see
``service.cli._serve``: the workers log in to it, it is stopped after them), then starts the workers as
fresh interpreters (not forks: gRPC's core does not survive a fork) and hands each its plan on its
standard input — the admin token and the signing key included, so that neither reaches a command line
or the environment. It reports ``serving`` once every worker serves. SIGTERM or SIGINT is passed on as
SIGTERM: each worker stops gracefully (in-flight commands finish), then the parent stops. A worker that
exits on its own takes the others down with it (exit 1), for the supervisor to restart the whole: a
half-staffed port would look healthy while serving less. Workers die with the parent, even a parent
killed with SIGKILL (Linux ``prctl(PR_SET_PDEATHSIG)``; elsewhere a thread that watches the parent), so
that a restarted ``serve`` finds its port free.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import json
import os
import pickle
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import IO

import structlog

from projections.migrate import apply_migrations as migrate_projections
from projections.projector import run_projector
from service.checkpoints.keyring import Keyring
from service.checkpoints.keys import Signer, Verifier

from .server import GRACE_SECONDS, ListenError, configure_logging, start_server
from .tls import ServerTLS

#: What a worker process runs: a fresh interpreter, reading its :class:`WorkerPlan` from standard input.
WORKER_CODE = "from service.api.workers import worker_main; worker_main()"
#: A port whose server was just killed (``kill -9`` of its whole process group, then a restart) is free a
#: moment later, once the kernel has closed the dead workers' sockets: the probe tries again this long
#: before it calls the port taken.
PROBE_RETRY_SECONDS = 1.0
#: How long the parent waits for the workers to stop after SIGTERM before it kills them.
STOP_SECONDS = GRACE_SECONDS + 5.0
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


class WorkerError(Exception):
    """A worker failed to start or exited on its own: a one-line message and the exit status for ``serve``."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True, slots=True)
class WorkerPlan:
    """Everything one worker needs, sent pickled on its standard input (never on its command line)."""

    index: int
    parent: int
    status_fd: int
    listen: str
    database_url: str
    admin_token: str | None
    #: False for the projector's own process: it runs the projector and serves nothing.
    serves: bool
    database_timeout: float
    tls: ServerTLS | None
    signer: str  # the signing key, encoded (Signer.encode): a key object does not pickle
    older: tuple[str, ...]
    log_format: str
    log_level: str


# --- the parent -------------------------------------------------------------------------------------------


def probe_listen(listen: str) -> str:
    """``listen`` with its port resolved (port 0: a free one), after binding each of its addresses with a
    socket that does not ask for ``SO_REUSEPORT``; :class:`ListenError` if any is in use, or if none can
    be bound (an address of another machine).

    The bind fails while any socket listens on the port (``SO_REUSEADDR``, which the probe sets, only
    lets it past connections of a server that is gone, in TIME_WAIT, as gRPC's own bind does). The probe
    is closed before the workers bind, so a race remains: another ``serve --workers`` whose probe runs in
    the same instant, between this probe and our workers' binds, would find the port free too, and both
    sets of workers would then share it (a single-process server in that gap only makes our workers'
    binds fail: exit 2, safe). Closing it cannot be avoided: a socket bound without ``SO_REUSEPORT``
    keeps the workers from binding, and one bound with it keeps no one out.
    """
    host, _, port_text = listen.rpartition(":")
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    port = int(port_text)
    refused = ListenError(f"cannot listen on {listen}: the address is in use or cannot be bound")
    try:
        found = socket.getaddrinfo(bare or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError):
        raise refused from None
    addresses = list(dict.fromkeys((family, address[0]) for family, _, _, _, address in found))
    deadline = time.monotonic() + PROBE_RETRY_SECONDS
    while True:
        bound, in_use = 0, False
        for family, address in addresses:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:  # [::] alone, as gRPC binds it beside 0.0.0.0
                    with contextlib.suppress(OSError):
                        probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                try:
                    probe.bind((address, port))
                    probe.listen(1)  # a listener conflicts with listeners, whatever they asked for
                except OSError as error:
                    in_use = in_use or error.errno == errno.EADDRINUSE
                    continue
                bound += 1
                port = port or int(probe.getsockname()[1])  # port 0: the others are probed on this one
        if bound and not in_use:
            return f"{host}:{port}"
        if not in_use or time.monotonic() >= deadline:
            raise refused
        time.sleep(0.05)


@dataclass(slots=True)
class _Worker:
    index: int
    process: asyncio.subprocess.Process
    status: asyncio.StreamReader


async def _spawn(plan: WorkerPlan, reader_fd: int) -> _Worker:
    """Start the worker of ``plan`` (from the main thread: the death signal follows the thread that made
    the child), hand it its plan, and return it with the reader of its status pipe."""
    loop = asyncio.get_running_loop()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", WORKER_CODE, stdin=asyncio.subprocess.PIPE, pass_fds=(plan.status_fd,)
    )
    os.close(plan.status_fd)  # the worker's end: an EOF on ours then means the worker is gone
    assert process.stdin is not None
    process.stdin.write(pickle.dumps(plan))
    with contextlib.suppress(ConnectionError):  # a worker that died at once: its status says so
        await process.stdin.drain()
    process.stdin.close()
    status = asyncio.StreamReader()
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(status), os.fdopen(reader_fd, "rb", buffering=0)
    )
    return _Worker(plan.index, process, status)


async def serve_workers(
    workers: int,
    *,
    listen: str,
    database_url: str,
    admin_token: str | None,
    projector: bool,
    database_timeout: float,
    tls: ServerTLS | None,
    keyring: Keyring,
    log_format: str,
    log_level: str,
) -> None:
    """Run ``workers`` server processes on ``listen`` until SIGTERM or SIGINT, then stop them gracefully.

    :class:`ListenError` if the address is taken or cannot be bound; :class:`WorkerError` if a worker
    fails to start (its own message, its exit status) or exits on its own (the others are stopped)."""
    log = structlog.get_logger("uno_audit.server")
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    try:
        address = await asyncio.to_thread(probe_listen, listen)
        running: list[_Worker] = []
        try:
            for index in range(workers + projector):  # the servers, then the projector's process
                reader_fd, writer_fd = os.pipe()
                plan = WorkerPlan(
                    index=index,
                    parent=os.getpid(),
                    status_fd=writer_fd,
                    listen=address,
                    database_url=database_url,
                    admin_token=admin_token,
                    serves=index < workers,
                    database_timeout=database_timeout,
                    tls=tls,
                    signer=keyring.signer.encode(),
                    older=tuple(verifier.encode() for verifier in keyring.older),
                    log_format=log_format,
                    log_level=log_level,
                )
                running.append(await _spawn(plan, reader_fd))
            if not await _started(running, stopping):
                return
            log.info(
                "serving",
                address=address,
                workers=workers,
                pids=[worker.process.pid for worker in running],  # the projector's last, if it runs
                projector=running[-1].process.pid if projector else None,
                admin=admin_token is not None,
                tls="off" if tls is None else "mutual" if tls.client_ca is not None else "on",
                metrics=None,
            )
            await _watch(running, stopping)
            log.info("stopping: finishing in-flight commands", grace_seconds=GRACE_SECONDS)
        finally:
            await _stop(running)
        log.info("stopped")
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


async def _started(running: list[_Worker], stopping: asyncio.Event) -> bool:
    """Wait until every worker serves (True), or a stop is asked first (False); :class:`WorkerError` for a
    worker that failed or died starting."""
    pending: dict[asyncio.Future[object], _Worker] = {
        asyncio.ensure_future(worker.status.readline()): worker for worker in running
    }
    stop: asyncio.Future[object] = asyncio.ensure_future(stopping.wait())
    try:
        while pending:
            done, _ = await asyncio.wait([*pending, stop], return_when=asyncio.FIRST_COMPLETED)
            if stop in done:
                return False
            for task in done:
                worker = pending.pop(task)
                line = task.result()
                if not isinstance(line, bytes) or not line:
                    code = await worker.process.wait()
                    raise WorkerError(f"worker {worker.index} exited while starting (status {code})", 1)
                said = json.loads(line)
                if "failed" in said:
                    raise WorkerError(str(said["failed"]), int(said["exit"]))
        return True
    finally:
        stop.cancel()
        for task in pending:
            task.cancel()


async def _watch(running: list[_Worker], stopping: asyncio.Event) -> None:
    """Wait for a stop; a worker that exits first is :class:`WorkerError` (the caller stops the rest)."""
    exits = {asyncio.create_task(worker.process.wait()): worker for worker in running}
    stop = asyncio.create_task(stopping.wait())
    try:
        done, _ = await asyncio.wait([*exits, stop], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        for task in exits:
            task.cancel()
    if stop not in done:
        gone = next(exits[task] for task in done if task is not stop)
        structlog.get_logger("uno_audit.server").error(
            "worker exited on its own: stopping the others", worker=gone.index, status=gone.process.returncode
        )
        status = gone.process.returncode
        raise WorkerError(
            f"worker {gone.index} exited on its own (status {status}); the others were stopped", 1
        )


async def _stop(running: list[_Worker]) -> None:
    """SIGTERM to every worker still running; SIGKILL to any still running ``STOP_SECONDS`` later."""
    for worker in running:
        if worker.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                worker.process.send_signal(signal.SIGTERM)
    waits = [worker.process.wait() for worker in running]
    try:
        await asyncio.wait_for(asyncio.gather(*waits), STOP_SECONDS)
    except TimeoutError:
        for worker in running:
            if worker.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    worker.process.kill()
        await asyncio.gather(*(worker.process.wait() for worker in running))


# --- a worker ---------------------------------------------------------------------------------------------


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
    configure_logging(plan.log_format, plan.log_level, worker=plan.index)
    import psycopg

    from service.store import StoreError

    from .tls import TLSError

    try:
        asyncio.run(_work(plan, status))
    except (ListenError, TLSError, StoreError, psycopg.Error, OSError) as error:
        _say(status, {"failed": " ".join(str(error).split()) or type(error).__name__, "exit": 2})
        sys.exit(2)
    except BaseException as error:
        if isinstance(error, SystemExit):
            raise
        structlog.get_logger("uno_audit.server").exception("worker failed")
        _say(status, {"failed": f"worker {plan.index}: {type(error).__name__}: {error}", "exit": 1})
        sys.exit(1)


def _say(status: IO[str], message: dict[str, object]) -> None:
    with contextlib.suppress(OSError):  # a parent that is gone hears nothing (and we die with it)
        status.write(json.dumps(message) + "\n")


async def _work(plan: WorkerPlan, status: IO[str]) -> None:
    log = structlog.get_logger("uno_audit.server")
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # SIGINT: Ctrl-C reaches the whole process group
        loop.add_signal_handler(sig, stopping.set)
    if not plan.serves:
        await _project(plan, status, stopping)
        return
    keyring = Keyring(Signer.parse(plan.signer), tuple(Verifier.parse(text) for text in plan.older))
    running = await start_server(
        listen=plan.listen,
        database_url=plan.database_url,
        admin_token=plan.admin_token,
        projector=False,  # in a process of its own
        database_timeout=plan.database_timeout,
        tls=plan.tls,
        keyring=keyring,
        reuse_port=True,
    )
    log.info("worker serving", address=plan.listen, pid=os.getpid())
    _say(status, {"serving": plan.index, "port": running.port})
    await stopping.wait()
    log.info("worker stopping: finishing in-flight commands", grace_seconds=GRACE_SECONDS)
    await running.stop()
    log.info("worker stopped")


async def _project(plan: WorkerPlan, status: IO[str], stopping: asyncio.Event) -> None:
    """The projector's process: migrate (a failure is reported as a worker's failure to start), then
    keep the read models current until SIGTERM or SIGINT, riding out database outages on its own."""
    log = structlog.get_logger("uno_audit.server")
    await migrate_projections(plan.database_url)
    log.info("projector process running", pid=os.getpid())
    _say(status, {"serving": plan.index})
    await run_projector(plan.database_url, stop=stopping)
    log.info("projector process stopped")
