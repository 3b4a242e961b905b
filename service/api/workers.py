"""``uno-audit serve --workers N``: N server processes (:mod:`service.api.worker_process`) and the
projector's process on one port, as fresh interpreters given their plan on standard input, supervised.

The parent probes the port without ``SO_REUSEPORT`` (:func:`probe_listen`: taken, exit 2) and has every
worker bind before any accepts. A process that exits is started again after :func:`backoff`;
:data:`CRASH_LOOP_RESTARTS` within :data:`CRASH_LOOP_SECONDS` is a crash loop. SIGHUP replaces them one
by one, SIGTERM stops all gracefully, and they die with the parent. The parent serves every worker's
metrics. docs/OPERATIONS.md ("Supervision", "Serving") says more.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import pickle
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from prometheus_client import multiprocess, start_http_server

from service.api.config import GRACE_SECONDS, ListenError, ServeConfig
from service.api.metrics import Exporter
from service.checkpoints.keyring import Keyring
from service.ops import metrics
from service.ops.logging import logger
from service.rules.engine_kind import engine_kind

#: What a worker process runs: a fresh interpreter, reading its :class:`WorkerPlan` from standard input.
WORKER_CODE = "from service.api.worker_process import worker_main; worker_main()"
#: A port whose server was just killed (``kill -9`` of its whole process group, then a restart) is free a
#: moment later, once the kernel has closed the dead workers' sockets: the probe tries again this long
#: before it calls the port taken.
PROBE_RETRY_SECONDS = 1.0
#: How long the parent waits for the workers to stop after SIGTERM before it kills them.
STOP_SECONDS = GRACE_SECONDS + 5.0
#: This many restarts of one process within :data:`CRASH_LOOP_SECONDS` is a crash loop.
CRASH_LOOP_RESTARTS = 5
CRASH_LOOP_SECONDS = 60.0
#: The wait before a second restart within the window; it doubles with each further one, up to the max.
BACKOFF_FIRST_SECONDS = 0.5
BACKOFF_MAX_SECONDS = 30.0
#: prometheus_client's multiprocess mode: each worker writes its metrics to files in this folder.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
#: The metric files' folder's name starts so, then the parent's pid (see :func:`_sweep_metric_folders`).
METRICS_FOLDER = "uno-audit-metrics-"


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
    #: The server's settings, ``listen`` with the port the parent's probe resolved.
    config: ServeConfig
    #: False for the projector's own process: it runs the projector and serves nothing.
    serves: bool
    signer: str  # the signing key, encoded (Signer.encode): a key object does not pickle
    older: tuple[str, ...]
    #: Bind, say so, and accept only once the parent says "go" (the first start: all bind first).
    hold: bool = False


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
    refused = ListenError(listen)
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


@dataclass(slots=True)
class _Slot:
    """One place the parent keeps filled: a server worker or the projector, and its recent restarts."""

    plan: WorkerPlan
    worker: _Worker | None = None
    restarts: list[float] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return "worker" if self.plan.serves else "projector"

    def recent(self, now: float) -> int:
        """Restarts within the crash-loop window before ``now``."""
        self.restarts = [when for when in self.restarts if now - when < CRASH_LOOP_SECONDS]
        return len(self.restarts)


def backoff(recent: int) -> float:
    """Seconds to wait before a restart, after ``recent`` others within the window: none for the first
    (a lone crash is replaced at once), then 0.5 s doubling up to :data:`BACKOFF_MAX_SECONDS`."""
    return 0.0 if recent == 0 else min(BACKOFF_MAX_SECONDS, BACKOFF_FIRST_SECONDS * 2 ** (recent - 1))


async def _spawn(plan: WorkerPlan, env: dict[str, str] | None) -> _Worker:
    """Start the worker of ``plan`` (from the main thread: the death signal follows the thread that made
    the child), hand it its plan, and return it with the reader of its status pipe. Its standard input
    stays open: the parent's later word (:func:`_tell`) goes there."""
    loop = asyncio.get_running_loop()
    reader_fd, writer_fd = os.pipe()
    plan = replace(plan, status_fd=writer_fd)
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", WORKER_CODE, stdin=asyncio.subprocess.PIPE, pass_fds=(writer_fd,), env=env
        )
    finally:
        os.close(writer_fd)  # the worker's end: an EOF on ours then means the worker is gone
    assert process.stdin is not None
    process.stdin.write(pickle.dumps(plan))
    with contextlib.suppress(ConnectionError):  # a worker that died at once: its status says so
        await process.stdin.drain()
    status = asyncio.StreamReader()
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(status), os.fdopen(reader_fd, "rb", buffering=0)
    )
    return _Worker(plan.index, process, status)


def _sweep_metric_folders() -> None:
    """Remove the metric folders of ``serve`` parents that are gone (killed: nobody removed them)."""
    for found in Path(tempfile.gettempdir()).glob(f"{METRICS_FOLDER}*-*"):
        pid = found.name.removeprefix(METRICS_FOLDER).partition("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists() and sys.platform.startswith("linux"):
            shutil.rmtree(found, ignore_errors=True)


def _tell(worker: _Worker, message: dict[str, object]) -> None:
    """A line for the worker on its standard input ("go" to accept, the crash-loop state); a worker that
    is gone hears nothing (its exit is seen on its own)."""
    stdin = worker.process.stdin
    if stdin is not None and not stdin.is_closing():
        with contextlib.suppress(ConnectionError, RuntimeError):
            stdin.write(json.dumps(message).encode() + b"\n")


async def serve_workers(
    config: ServeConfig, keyring: Keyring, reload_keyring: Callable[[], Keyring] | None = None
) -> None:
    """Run ``config.workers`` server processes on ``config.listen`` until SIGTERM or SIGINT, restarting any
    that exits (see the module), then stop them gracefully; the parent serves every worker's metrics on
    ``config.metrics_listen``. SIGHUP replaces the processes one by one (:func:`_reload`), signing with
    ``reload_keyring()``.

    :class:`ListenError` if the address is taken or cannot be bound; :class:`WorkerError` if a worker
    fails to start the first time (its own message, its exit status)."""
    log = logger("server")
    loop = asyncio.get_running_loop()
    stopping, reloading = asyncio.Event(), asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    loop.add_signal_handler(signal.SIGHUP, reloading.set)
    folder = None
    if config.metrics_listen is not None:
        _sweep_metric_folders()
        folder = tempfile.mkdtemp(prefix=f"{METRICS_FOLDER}{os.getpid()}-")
    env = None if folder is None else {**os.environ, MULTIPROC_ENV: folder}
    exporter: Exporter | None = None
    slots: list[_Slot] = []
    retiring: list[_Worker] = []  # replaced by a reload, finishing their calls
    try:
        address = await asyncio.to_thread(probe_listen, config.listen)
        if config.metrics_listen is not None and folder is not None:
            exporter = _start_exporter(config.metrics_listen, folder)
        try:
            for plan in _plans(config, address, keyring):
                slot = _Slot(plan)
                slot.worker = await _spawn(plan, env)
                slots.append(slot)
            if not await _started(slots, stopping):
                return
            _log_serving(config, address, slots, exporter)
            await _Supervisor(slots, env, folder, reload_keyring, retiring).run(stopping, reloading)
            log.info("stopping: finishing in-flight commands", grace_seconds=GRACE_SECONDS)
        finally:
            await _stop([slot.worker for slot in slots if slot.worker is not None] + retiring)
        log.info("stopped")
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(sig)
        if exporter is not None:
            await asyncio.to_thread(exporter.stop)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _start_exporter(metrics_listen: str, folder: str) -> Exporter:
    """Serve every worker's metrics (their files in ``folder``) and the parent's own on ``metrics_listen``."""
    try:
        host, _, port = metrics_listen.rpartition(":")
        registry = metrics.supervisor_registry(folder)
        return Exporter(*start_http_server(int(port), addr=host.strip("[]"), registry=registry))
    except OSError:
        raise ListenError(metrics_listen) from None


def _plans(config: ServeConfig, address: str, keyring: Keyring) -> list[WorkerPlan]:
    """The first plans: the servers', then the projector's process (with ``config.projector``)."""
    served = replace(config, listen=address)
    return [
        WorkerPlan(
            index=index,
            parent=os.getpid(),
            status_fd=-1,
            config=served,
            serves=index < config.workers,
            signer=keyring.signer.encode(),
            older=tuple(verifier.encode() for verifier in keyring.older),
            hold=True,
        )
        for index in range(config.workers + config.projector)
    ]


def _log_serving(config: ServeConfig, address: str, slots: list[_Slot], exporter: Exporter | None) -> None:
    """The parent's "serving" line, once every process serves."""
    logger("server").info(
        "serving",
        address=address,
        workers=config.workers,
        pids=[slot.worker.process.pid for slot in slots if slot.worker],  # the projector's last
        projector=slots[-1].worker.process.pid if config.projector and slots[-1].worker else None,
        admin=config.admin_token is not None,
        tls=config.tls_mode,
        metrics=None if exporter is None else exporter.port,
        engine=engine_kind(),  # "compiled" or "pure": a build without a C compiler falls back silently
    )


async def _started(slots: list[_Slot], stopping: asyncio.Event) -> bool:
    """Wait until every worker has bound (then tell them all to accept) and serves (True), or a stop is
    asked first (False); :class:`WorkerError` for a worker that failed or died starting."""
    running = [slot.worker for slot in slots if slot.worker is not None]
    stop: asyncio.Future[Any] = asyncio.ensure_future(stopping.wait())
    try:
        for phase in ("bound", "serving"):
            pending: dict[asyncio.Future[Any], _Worker] = {
                asyncio.ensure_future(_said(worker, phase)): worker for worker in running
            }
            try:
                while pending:
                    done, _ = await asyncio.wait([*pending, stop], return_when=asyncio.FIRST_COMPLETED)
                    if stop in done:
                        return False
                    for task in done:
                        pending.pop(task)
                        task.result()
            finally:
                for task in pending:
                    task.cancel()
            if phase == "bound":  # every socket is in the port's group: the kernel spreads over all
                for worker in running:
                    _tell(worker, {"go": True})
        return True
    finally:
        stop.cancel()


async def _said(worker: _Worker, phase: str) -> None:
    """Read the worker's status lines until it says ``phase``; :class:`WorkerError` if it fails first."""
    while True:
        line = await worker.status.readline()
        if not line:
            code = await worker.process.wait()
            raise WorkerError(f"worker {worker.index} exited while starting (status {code})", 1)
        said = json.loads(line)
        if "failed" in said:
            raise WorkerError(str(said["failed"]), int(said["exit"]))
        if phase in said:
            return


class _Supervisor:
    """Until a stop: restart each process that exits, in its place, after :func:`backoff`; keep the
    crash-loop state current in every worker's health and in the metrics; reload on SIGHUP."""

    def __init__(
        self,
        slots: list[_Slot],
        env: dict[str, str] | None,
        folder: str | None,
        reload_keyring: Callable[[], Keyring] | None,
        retiring: list[_Worker],
    ) -> None:
        self.slots, self.env, self.folder = slots, env, folder
        self.reload_keyring, self.retiring = reload_keyring, retiring
        self.restarting: dict[asyncio.Future[Any], _Slot] = {}
        self.looping: set[str] = set()
        self.reload: asyncio.Future[Any] | None = None
        self.log = logger("server")

    def announce(self) -> None:
        """The crash-loop state, to the metrics, the log (when it changes) and every worker's health."""
        now = time.monotonic()
        kinds = {slot.kind for slot in self.slots if slot.recent(now) >= CRASH_LOOP_RESTARTS}
        for kind in ("worker", "projector"):
            metrics.crash_loop(kind, kind in kinds)
        if kinds != self.looping:
            (self.log.error if kinds else self.log.info)(
                "crash loop" if kinds else "crash loop over", kinds=sorted(kinds)
            )
        self.looping = kinds
        for slot in self.slots:
            if slot.worker is not None and slot.plan.serves:
                _tell(slot.worker, {"crash_loop": bool(kinds)})

    async def restart(self, slot: _Slot, gone: _Worker) -> None:
        now = time.monotonic()
        delay = backoff(slot.recent(now))
        slot.restarts.append(now)
        metrics.restarted(slot.kind)
        self.log.error(
            "process exited on its own: restarting it",
            kind=slot.kind,
            worker=slot.plan.index,
            pid=gone.process.pid,
            status=gone.process.returncode,
            backoff_seconds=delay,
        )
        self.announce()
        await asyncio.sleep(delay)
        plan = replace(slot.plan, hold=False)
        worker = slot.worker = await _spawn(plan, self.env)
        try:
            await _said(worker, "serving")
        except WorkerError as error:  # it exits too: seen below, restarted again with a longer wait
            self.log.error(
                "restarted process failed", kind=slot.kind, worker=slot.plan.index, error=str(error)
            )
            return
        _tell(worker, {"crash_loop": bool(self.looping)})
        self.log.info("process restarted", kind=slot.kind, worker=slot.plan.index, pid=worker.process.pid)

    async def run(self, stopping: asyncio.Event, reloading: asyncio.Event) -> None:
        stop: asyncio.Future[Any] = asyncio.ensure_future(stopping.wait())
        asked: asyncio.Future[Any] = asyncio.ensure_future(reloading.wait())
        try:
            while not stopping.is_set():
                exits: dict[asyncio.Future[Any], tuple[_Slot, _Worker]] = {
                    asyncio.ensure_future(slot.worker.process.wait()): (slot, slot.worker)
                    for slot in self.slots
                    if slot.worker is not None and slot not in self.restarting.values()
                }
                others = [*self.restarting, stop, asked, *self._reloads()]
                try:
                    done, _ = await asyncio.wait(
                        [*exits, *others],
                        timeout=CRASH_LOOP_SECONDS / 10,
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                finally:
                    for task in exits:
                        task.cancel()
                if asked in done:
                    reloading.clear()
                    asked = asyncio.ensure_future(reloading.wait())
                    self._start_reload()
                self._ended(done, exits)
                if self.looping:  # a loop is over once its restarts leave the window
                    self.announce()
        finally:
            stop.cancel()
            asked.cancel()
            for task in [*self.restarting, *self._reloads()]:
                task.cancel()
            await asyncio.gather(*self.restarting, *self._reloads(), return_exceptions=True)

    def _reloads(self) -> list[asyncio.Future[Any]]:
        return [self.reload] if self.reload is not None else []

    def _start_reload(self) -> None:
        if self.reload is None:
            self.reload = asyncio.ensure_future(
                _reload(
                    self.slots, self.restarting, self.env, self.folder, self.reload_keyring, self.retiring
                )
            )
        else:
            self.log.warning("reload already under way: SIGHUP ignored")

    def _ended(
        self, done: set[asyncio.Future[Any]], exits: dict[asyncio.Future[Any], tuple[_Slot, _Worker]]
    ) -> None:
        """Deal with what ended: a reload or a restart (its error logged), or a process (restarted)."""
        if self.reload is not None and self.reload in done:
            _failed(self.reload, "reload")
            self.reload = None
        for task in done:
            if task in self.restarting:
                _failed(task, "restart")
                self.restarting.pop(task)
            elif task in exits and task.cancelled() is False:
                slot, gone = exits[task]
                if slot.worker is not gone:  # replaced by a reload meanwhile: its exit is expected
                    continue
                if self.folder is not None:
                    multiprocess.mark_process_dead(gone.process.pid, self.folder)  # type: ignore[no-untyped-call]
                self.restarting[asyncio.create_task(self.restart(slot, gone))] = slot


def _failed(task: asyncio.Future[Any], what: str) -> None:
    """Log the error a finished restart or reload ended with, if any (the supervisor goes on: a
    process it could not start is seen as exited, and restarted again after a longer backoff)."""
    error = None if task.cancelled() else task.exception()
    if error is not None:
        logger("server").error(f"{what} failed", error=f"{type(error).__name__}: {error}")


async def _reload(
    slots: list[_Slot],
    restarting: dict[asyncio.Future[Any], _Slot],
    env: dict[str, str] | None,
    folder: str | None,
    reload_keyring: Callable[[], Keyring] | None,
    retiring: list[_Worker],
) -> None:
    """SIGHUP: replace each process in turn by a fresh one (new code, the key file read again): the new
    one serves beside the old (``SO_REUSEPORT``) before the old is stopped gracefully (SIGTERM: health
    NOT_SERVING, in-flight calls finish, its connections told to go elsewhere). A key that cannot be
    read, or a new process that fails to start, ends the reload; the processes not yet replaced stay."""
    log = logger("server")
    started = time.monotonic()
    signer, older = slots[0].plan.signer, slots[0].plan.older
    if reload_keyring is not None:
        try:
            keyring = await asyncio.to_thread(reload_keyring)
        except Exception as error:
            log.error("reload refused: the signing key cannot be read", error=" ".join(str(error).split()))
            return
        signer, older = keyring.signer.encode(), tuple(verifier.encode() for verifier in keyring.older)
    log.info("reloading: replacing the processes one by one", processes=len(slots))
    for slot in slots:
        if slot in restarting.values() or slot.worker is None:
            continue  # being restarted already: with the plan it had
        plan = replace(slot.plan, signer=signer, older=older, hold=False)
        fresh = await _spawn(plan, env)
        try:
            await _said(fresh, "serving")
        except WorkerError as error:
            log.error("reload stopped: a new process failed", worker=plan.index, error=str(error))
            await _stop([fresh])
            return
        old, slot.worker, slot.plan = slot.worker, fresh, plan
        retiring.append(old)
        await _stop([old])
        retiring.remove(old)
        if folder is not None:
            multiprocess.mark_process_dead(old.process.pid, folder)  # type: ignore[no-untyped-call]
        log.info(
            "process reloaded", kind=slot.kind, worker=plan.index, pid=fresh.process.pid, old=old.process.pid
        )
    log.info(
        "reloaded",
        seconds=round(time.monotonic() - started, 2),
        pids=[s.worker.process.pid for s in slots if s.worker],
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
